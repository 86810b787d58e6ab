internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import Logging
import MediaCore
import Basics

/// Captures the screen, a region, a RandR monitor or one window of an X11 display, band by band
/// through a small reused MIT-SHM image (``X11SharedImage``; XGetImage when shared memory
/// cannot be attached), only the areas the sink asks for, skipping the copy when XDamage reports
/// no change (``X11DamageTracker``), and drawing the cursor in (XFixes, ``CursorComposer``)
/// when asked.
///
/// A window (``X11WindowTracker``) is captured from its own off-screen pixmap (XComposite,
/// automatic redirection), so windows in front of it never show; it is followed through moves
/// and resizes; when it is unmapped or destroyed a placeholder picture is delivered instead
/// (``PlaceholderPicture``) — never the screen.
///
/// Used from one capture thread only. Owns its Display connection and what it made on it.
public final class X11ScreenCapturer: ScreenCapturer {
    private enum Target {
        case rect(PixelRect)
        case window(X11WindowTracker)
    }

    private let display: OpaquePointer
    private let displayName: String
    private let root: Window
    private var screenSize: PixelSize
    private var target: Target
    private let spec: CaptureSourceSpec
    private var randrEventBase: Int32 = -1
    private let logger: Logger
    private let wantSharedMemory: Bool
    private let image: X11SharedImage
    private let damage: X11DamageTracker?
    /// What the sink asked for in this capture (reused).
    private var areas: [PixelRect] = []
    private var dirty = true
    /// When the change waiting to be grabbed was first seen (`clock`), nil when none is.
    private var changedAtNanos: UInt64?
    private let clock: any MediaClock
    private let placeholder = PlaceholderPicture()
    public private(set) var usesSharedMemory = false
    /// Bytes of the MIT-SHM segment (one band), 0 without one.
    public var sharedMemoryBytes: Int { image.bytes }

    // Cursor state.
    private let drawCursor: Bool
    private var fixesEventBase: Int32 = 0
    private var cursorStale = true
    private var cursor = CursorComposer()

    /// The size of the frames delivered now (a window's size changes as it is resized).
    public var outputSize: PixelSize {
        switch target {
        case .rect(let r): return r.size
        case .window(let w): return placeholder.reason != nil ? placeholder.size : w.rect.size
        }
    }

    /// - Parameters:
    ///   - display: an X display name like ":1"; nil uses $DISPLAY.
    ///   - source: what to capture.
    ///   - drawCursor: draw the pointer into the frames (XFixes cursor image).
    ///   - useSharedMemory: false forces the XGetImage path (as does SCREENSHARE_NO_SHM=1).
    ///   - clock: the time `settle` waits by.
    /// - Throws: `CaptureError` naming the display, region, monitor or window that is not usable.
    public init(display name: String?, source: CaptureSourceSpec, drawCursor: Bool = false,
                useSharedMemory: Bool = true, clock: any MediaClock = SystemClock(), logger: Logger) throws {
        self.logger = logger
        self.clock = clock
        self.drawCursor = drawCursor
        self.spec = source
        XInitThreads()
        let (d, shownName) = try openDisplay(name)
        display = d
        displayName = shownName
        cx11_install_error_handler()
        cx11_install_io_handlers(d)
        let screen = cx11_default_screen(d)
        root = cx11_root_window(d, screen)
        screenSize = PixelSize(width: Int(cx11_display_width(d, screen)), height: Int(cx11_display_height(d, screen)))
        let visual = cx11_default_visual(d, screen)
        let depth = cx11_default_depth(d, screen)
        guard let visual, depth == 24 || depth == 32, visual.pointee.red_mask == 0xff0000,
              visual.pointee.green_mask == 0xff00, visual.pointee.blue_mask == 0xff
        else {
            XCloseDisplay(d)
            throw CaptureError(.unsupportedVisual, "display \"\(shownName)\" has depth \(depth); only 24/32-bit TrueColor (BGRX) is supported")
        }
        let noSHM = getenv("SCREENSHARE_NO_SHM").map { String(cString: $0) == "1" } ?? false
        wantSharedMemory = useSharedMemory && !noSHM && XShmQueryExtension(d) != 0
        image = X11SharedImage(display: d)

        do {
            target = try Self.resolve(source, display: d, root: root, screen: screenSize, displayName: shownName, logger: logger)
        } catch {
            XCloseDisplay(d)
            throw error
        }
        switch target {
        case .rect(let r):
            if wantSharedMemory { usesSharedMemory = image.attach(width: r.width, visual: visual, depth: depth) }
        case .window:
            usesSharedMemory = wantSharedMemory  // attached at the first grab, for the window's width
        }
        if !usesSharedMemory {
            logger.warning("MIT-SHM unavailable on \"\(shownName)\": capturing with XGetImage (slower)")
        }
        let drawable: Drawable
        switch target {
        case .rect: drawable = root
        case .window(let w): drawable = w.top
        }
        damage = X11DamageTracker(display: d, drawable: drawable)
        if damage == nil { logger.warning("XDamage unavailable: every frame is captured") }
        // Follow screen size and monitor changes (RandR) for screen and monitor sources.
        var rrEvent: Int32 = 0, rrError: Int32 = 0
        if case .rect = target, XRRQueryExtension(d, &rrEvent, &rrError) != 0 {
            randrEventBase = rrEvent
            XRRSelectInput(d, root, Int32(RRScreenChangeNotifyMask))
        }
        if drawCursor {
            var fixesErrorBase: Int32 = 0
            if XFixesQueryExtension(d, &fixesEventBase, &fixesErrorBase) != 0 {
                XFixesSelectCursorInput(d, root, UInt(XFixesDisplayCursorNotifyMask))
            } else {
                logger.warning("XFixes unavailable on \"\(shownName)\": the cursor is not drawn")
                fixesEventBase = -1
            }
        }
        XSync(d, 0)
        _ = cx11_take_error()
    }

    /// What `source` is on this display now.
    private static func resolve(_ source: CaptureSourceSpec, display d: OpaquePointer, root: Window, screen: PixelSize,
                                displayName: String, logger: Logger) throws -> Target {
        switch source {
        case .screen:
            return .rect(PixelRect(x: 0, y: 0, width: screen.width, height: screen.height))
        case .region(let r):
            guard r.x + r.width <= screen.width, r.y + r.height <= screen.height else {
                throw CaptureError(.badArgument, "region \(r) is outside the \(screen) screen of \"\(displayName)\"")
            }
            return .rect(r)
        case .monitor(let spec):
            let m = try X11Query.findMonitor(d, root: root, spec: spec, displayName: displayName)
            guard let r = m.rect.intersection(PixelRect(x: 0, y: 0, width: screen.width, height: screen.height)), !r.isEmpty else {
                throw CaptureError(.sourceNotFound, "--monitor \(spec): monitor \(m.name) \(m.rect) is outside the screen")
            }
            return .rect(r)
        case .window(let spec):
            let client = try X11Query.findWindow(d, root: root, spec: spec, displayName: displayName)
            guard let top = X11Query.topLevel(d, root: root, of: client) else {
                throw CaptureError(.sourceNotFound, "--window \(spec): the window vanished while it was looked up")
            }
            let label = "window 0x\(String(client, radix: 16))" + (X11Query.title(d, client).map { " \"\($0)\"" } ?? "")
            return .window(X11WindowTracker(display: d, root: root, top: top, label: label, displayName: displayName, logger: logger))
        }
    }

    deinit {
        if cx11_io_failed() != 0 {
            // The connection is dead: Xlib requests would block on it. The shared memory
            // segment and the image are ours to release; the rest died with the server.
            image.releaseLocally()
            return
        }
        damage?.destroy()
        image.release()
        if case .window(let w) = target { w.freePixmap() }
        XSync(display, 0)
        _ = cx11_take_error()
        XCloseDisplay(display)
    }

    // MARK: Grabs

    /// Grabs the picture of `size` whose top-left is at `offset` in `drawable` (at `origin` on the
    /// root window) for the sink: tells it what changed, then delivers the areas it asks for in
    /// bands. False on an X error (the sink was told to cancel).
    private func grab(_ drawable: Drawable, offset: (Int, Int), size: PixelSize, visual: UnsafeMutablePointer<Visual>?,
                      depth: Int32, origin: (Int, Int), into sink: CaptureSink) -> Bool {
        _ = cx11_take_error()
        let known = damage?.known ?? false
        if drawCursor {
            // The cursor's old and new places changed too (it is drawn in; XDamage does not see it).
            if cursorStale { refreshCursorImage() }
            if let damage {
                cursor.place(pointer: pointerPosition(), origin: origin, changed: &damage.changed, known: known)
            } else {
                var none: [PixelRect] = []
                cursor.place(pointer: pointerPosition(), origin: origin, changed: &none, known: false)
            }
        }
        areas.removeAll(keepingCapacity: true)
        if known, let damage {
            damage.changed.withUnsafeBufferPointer { sink.begin(size: size, changed: $0, areas: &areas) }
        } else {
            sink.begin(size: size, changed: nil, areas: &areas)
        }
        if usesSharedMemory && image.size.width < size.width {
            guard let visual, image.attach(width: size.width, visual: visual, depth: depth) else {
                usesSharedMemory = false
                logger.warning("MIT-SHM image of \(size.width) pixels wide failed on \"\(displayName)\": capturing with XGetImage (slower)")
                return grabAreas(drawable, offset: offset, size: size, into: sink)
            }
        }
        return grabAreas(drawable, offset: offset, size: size, into: sink)
    }

    private func grabAreas(_ drawable: Drawable, offset: (Int, Int), size: PixelSize, into sink: CaptureSink) -> Bool {
        let whole = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        for asked in areas {
            guard let area = asked.intersection(whole) else { continue }
            let rows = image.rows(forAreaOf: area.height)
            var y = area.y
            while y < area.y + area.height {
                let band = PixelRect(x: area.x, y: y, width: area.width, height: min(rows, area.y + area.height - y))
                let ok = image.grab(drawable, band, at: (Int32(offset.0 + band.x), Int32(offset.1 + band.y))) { base, stride in
                    if drawCursor { cursor.blend(into: base, stride: stride, band: band) }
                    sink.write(BGRAImageView(base: UnsafeRawPointer(base), stride: stride, width: band.width, height: band.height),
                               x: band.x, y: band.y)
                }
                guard ok else {
                    sink.cancel()
                    return false
                }
                y += band.height
            }
        }
        sink.end()
        return true
    }

    // MARK: Events

    /// Reads pending X events: damage, window structure changes, cursor shape changes.
    private func drainEvents() {
        var event = XEvent()
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            let type = event.type
            if let damage, damage.isDamageEvent(type) {
                if !dirty { changedAtNanos = clock.nowNanos() }
                dirty = true
            } else if randrEventBase >= 0, type == randrEventBase + RRScreenChangeNotify {
                XRRUpdateConfiguration(&event)
                screenChanged()
            } else if drawCursor, fixesEventBase >= 0, type == fixesEventBase + XFixesCursorNotify {
                cursorStale = true
                dirty = true
            } else if case .window(let w) = target {
                var destroyed = false
                if w.handle(&event, destroyed: &destroyed) { dirty = true }
                if destroyed { damage?.drawableDestroyed() }  // destroyed with the window
            }
        }
    }

    /// The screen was resized or its monitors changed: re-resolve the rectangle. The next
    /// frame has the new size (the pipeline restarts the encoder with a keyframe).
    private func screenChanged() {
        let screen = cx11_default_screen(display)
        screenSize = PixelSize(width: Int(cx11_display_width(display, screen)), height: Int(cx11_display_height(display, screen)))
        let whole = PixelRect(x: 0, y: 0, width: screenSize.width, height: screenSize.height)
        switch spec {
        case .screen:
            target = .rect(whole)
        case .monitor(let name):
            if let m = try? X11Query.findMonitor(display, root: root, spec: name, displayName: displayName),
               let r = m.rect.intersection(whole), !r.isEmpty {
                target = .rect(r)
            } else {
                logger.warning("monitor \(name) is gone from \"\(displayName)\"; capturing its last area that is still on screen")
                if case .rect(let old) = target, let r = old.intersection(whole), !r.isEmpty { target = .rect(r) } else { target = .rect(whole) }
            }
        case .region(let r):
            if r.intersection(whole) != r { logger.warning("region \(r) is now partly outside the \(screenSize) screen") }
            if let clipped = r.intersection(whole), !clipped.isEmpty { target = .rect(clipped) }
        case .window:
            break
        }
        dirty = true
    }

    // MARK: Capture

    /// Captures a picture if the source changed (or `force`): the sink learns what changed and
    /// gets the areas it asks for, band by band.
    public func capture(force: Bool = false, into sink: CaptureSink) -> CaptureOutcome {
        if cx11_io_failed() != 0 { return .permanentError("the X server of \(displayName) closed the connection (it stopped or crashed)") }
        drainEvents()
        if cx11_io_failed() != 0 { return .permanentError("the X server of \(displayName) closed the connection (it stopped or crashed)") }
        let windowGone: Bool
        if case .window(let w) = target { windowGone = w.gone } else { windowGone = false }
        if damage?.isActive != true && !windowGone { dirty = true }
        guard dirty || force else { return .unchanged }
        if case .rect(let area) = target { damage?.take(force: force, area: area) } else { damage?.take(force: force, area: nil) }
        dirty = false
        changedAtNanos = nil
        switch target {
        case .rect(let r):
            let screen = cx11_default_screen(display)
            guard grab(root, offset: (r.x, r.y), size: r.size, visual: cx11_default_visual(display, screen),
                       depth: cx11_default_depth(display, screen), origin: (r.x, r.y), into: sink) else {
                return .temporaryError("capturing \(r) of \"\(displayName)\" failed")
            }
            return .captured
        case .window(let w):
            if w.gone { return showPlaceholder("\(w.label) is gone (closed)", force: force, into: sink) }
            guard w.refreshGeometry() else {
                return showPlaceholder(w.gone ? "\(w.label) is gone (closed)" : "\(w.label) is not mapped (minimised or hidden)",
                                       force: force, into: sink)
            }
            var attrs = XWindowAttributes()
            XGetWindowAttributes(display, w.top, &attrs)
            guard let (drawable, offset) = w.source() else {
                dirty = true
                return .temporaryError("\(w.label): no pixmap for the window yet")
            }
            let ok = grab(drawable, offset: (offset, offset), size: w.rect.size, visual: attrs.visual,
                          depth: attrs.depth, origin: (w.rect.x, w.rect.y), into: sink)
            guard ok else {
                w.freePixmap()
                dirty = true
                return .temporaryError("capturing \(w.label) failed (resized or unmapped meanwhile)")
            }
            placeholder.sourceShown()
            return .captured
        }
    }

    /// Captures like ``capture(force:into:)`` and hands `body` the whole picture at once, with
    /// what changed (the view is valid only during the call). For tests: it allocates a
    /// picture-sized buffer for each call.
    func capture(force: Bool = false, _ body: (BGRAImageView) -> Void) -> CaptureOutcome {
        let sink = WholePictureSink()
        let outcome = capture(force: force, into: sink)
        if sink.complete, let pixels = sink.pixels {
            sink.changed.withUnsafeBufferPointer { rects in
                body(BGRAImageView(base: UnsafeRawPointer(pixels), stride: sink.size.width * 4, width: sink.size.width,
                                   height: sink.size.height, changed: sink.changesKnown ? rects : nil))
            }
        }
        return outcome
    }

    /// Hands the sink a dark placeholder of the window's last size, once per change of reason.
    private func showPlaceholder(_ reason: String, force: Bool, into sink: CaptureSink) -> CaptureOutcome {
        guard case .window(let w) = target, placeholder.show(reason, size: w.rect.size, force: force, into: sink) else { return .unchanged }
        cursor.hide()
        return .placeholder(reason)
    }

    /// Waits until `nanos` after the change waiting to be grabbed was first seen (at once when
    /// none is, or it is that old). An application draws a picture in several requests (a
    /// video and then its subtitles, a page and then its scroll bar, the bench's content and
    /// then its barcode): a grab at the first damage sends part of the picture now and the
    /// rest a frame later. VNC servers wait the same way before an update (TigerVNC's
    /// DeferUpdate, 1 ms).
    public func settle(nanos: UInt64) {
        drainEvents()
        guard let since = changedAtNanos else { return }
        let due = since &+ nanos
        while clock.nowNanos() < due { clock.sleep(untilNanos: due) }
    }

    /// Whether a change waits to be grabbed (pending X events read first).
    public func changePending() -> Bool {
        if cx11_io_failed() != 0 { return true }  // the next capture reports it
        drainEvents()
        return dirty
    }

    /// While a change waits to be grabbed, waits up to `timeoutNanos` for the source to change
    /// again, and returns true when it did (`settle` then waits from then). For content that
    /// changes faster than the frame rate: grabbed when the pacer lets it, at whatever point
    /// of its drawing, a picture can be half old and half new (a scrolling page grabbed
    /// between two of its application's requests); grabbed just after its next change begins,
    /// it is whole, and as new as it can be. What changed meanwhile is kept for the grab
    /// (XDamage reports a region that becomes non-empty: it is emptied aside so the next
    /// change is reported). False at once when no change waits.
    public func awaitNextChange(timeoutNanos: UInt64) -> Bool {
        guard changePending(), let damage, damage.isActive, cx11_io_failed() == 0 else { return false }
        damage.hold()
        XSync(display, 0)  // emptied before waiting: a change drawn from now on is reported
        let seen = damage.events
        let deadline = clock.nowNanos() &+ timeoutNanos
        while damage.events == seen {
            let now = clock.nowNanos()
            guard now < deadline, cx11_io_failed() == 0 else { return false }
            var pfd = pollfd(fd: cx11_connection_number(display), events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, Int32(min((deadline - now) / 1_000_000 + 1, 1_000)))
            drainEvents()
        }
        changedAtNanos = clock.nowNanos()
        return true
    }

    /// Waits up to `timeoutNanos` for X events (damage, window changes) or, when the cursor is
    /// drawn, a pointer move; returns true if the picture may have changed.
    public func waitForChange(timeoutNanos: UInt64) -> Bool {
        if cx11_io_failed() != 0 { return true }  // the next capture reports it
        drainEvents()
        if dirty { return true }
        XFlush(display)
        // The pointer moving sends no event to us: poll it at ~30 Hz when it is drawn.
        let cap: UInt64 = drawCursor ? 33_000_000 : 10_000_000_000
        var pfd = pollfd(fd: cx11_connection_number(display), events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(timeoutNanos, cap) / 1_000_000)
        _ = poll(&pfd, 1, ms)
        drainEvents()
        if drawCursor && !dirty, let p = pointerPosition(), cursor.moved(to: p, in: viewRect) { dirty = true }
        return dirty
    }

    // MARK: Cursor

    private func pointerPosition() -> (x: Int, y: Int)? {
        var rootReturn: Window = 0, child: Window = 0
        var rx: Int32 = 0, ry: Int32 = 0, wx: Int32 = 0, wy: Int32 = 0
        var mask: UInt32 = 0
        guard XQueryPointer(display, root, &rootReturn, &child, &rx, &ry, &wx, &wy, &mask) != 0 else { return nil }
        return (Int(rx), Int(ry))
    }

    private var viewRect: PixelRect {
        switch target {
        case .rect(let r): return r
        case .window(let w): return w.rect
        }
    }

    private func refreshCursorImage() {
        guard fixesEventBase >= 0, let img = XFixesGetCursorImage(display) else { return }
        defer { XFree(img) }
        cursor.setImage(width: Int(img.pointee.width), height: Int(img.pointee.height), hotX: Int(img.pointee.xhot),
                        hotY: Int(img.pointee.yhot)) { cx11_cursor_pixel(img, Int32($0)) }
        cursorStale = false
    }
}

/// Assembles a whole picture from the bands (``X11ScreenCapturer/capture(force:_:)``, for tests).
final class WholePictureSink: CaptureSink {
    var pixels: UnsafeMutableRawPointer?
    var size = PixelSize(width: 0, height: 0)
    var changed: [PixelRect] = []
    var changesKnown = false
    var complete = false

    deinit { pixels?.deallocate() }

    func begin(size: PixelSize, changed: UnsafeBufferPointer<PixelRect>?, areas: inout [PixelRect]) {
        self.size = size
        self.changed = changed.map(Array.init) ?? []
        changesKnown = changed != nil
        pixels?.deallocate()
        pixels = UnsafeMutableRawPointer.allocate(byteCount: max(size.area, 1) * 4, alignment: 64)
        areas.append(PixelRect(x: 0, y: 0, width: size.width, height: size.height))
    }

    func write(_ band: BGRAImageView, x: Int, y: Int) {
        guard let pixels else { return }
        for row in 0..<band.height {
            (pixels + ((y + row) * size.width + x) * 4).copyMemory(from: band.base + row * band.stride, byteCount: band.width * 4)
        }
    }

    func end() { complete = true }
    func cancel() { complete = false }
}
