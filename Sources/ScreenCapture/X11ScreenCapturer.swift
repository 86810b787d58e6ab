internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import Logging
import MediaCore

/// What to capture.
public enum CaptureSourceSpec: Sendable, Equatable {
    /// The whole X screen.
    case screen
    /// A fixed rectangle of the screen.
    case region(PixelRect)
    /// One RandR monitor, by name or index.
    case monitor(String)
    /// One window, by id (decimal or 0x hex) or a substring of its title. Follows moves and
    /// resizes, shows only that window (XComposite), never falls back to the screen.
    case window(String)

    /// Parses X11 geometry "WxH+X+Y" (or "WxH" at +0+0).
    /// - Throws: `CaptureError` naming the text when it is not a geometry.
    public static func parseRegion(_ text: String) throws -> PixelRect {
        let bad = CaptureError(.badArgument, "'\(text)' is not a region: expected WxH+X+Y, e.g. 1280x720+100+50")
        let parts = text.split(separator: "+", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 3 else { throw bad }
        let dims = parts[0].split(separator: "x", omittingEmptySubsequences: false)
        guard dims.count == 2, let w = Int(dims[0]), let h = Int(dims[1]), w > 0, h > 0 else { throw bad }
        var x = 0, y = 0
        if parts.count == 3 {
            guard let px = Int(parts[1]), let py = Int(parts[2]), px >= 0, py >= 0 else { throw bad }
            x = px
            y = py
        }
        return PixelRect(x: x, y: y, width: w, height: h)
    }
}

/// Result of one capture attempt, as libwebrtc's DesktopCapturer reports it.
public enum CaptureOutcome: Sendable, Equatable {
    /// New pixels were handed to the sink.
    case captured
    /// Nothing changed since the last capture; nothing was copied, the sink was not called.
    case unchanged
    /// The source cannot be shown now (a window unmapped or gone): the sink was handed a
    /// placeholder picture instead, once per change of state; the text says why.
    case placeholder(String)
    /// Try again later.
    case temporaryError(String)
    /// The source is gone for good.
    case permanentError(String)
}

/// An error opening or using a capture source; the message names what was wrong.
public struct CaptureError: Error, CustomStringConvertible, Equatable {
    public struct Kind: Hashable, Sendable {
        let name: String
        public static let displayUnavailable = Kind(name: "display_unavailable")
        public static let badArgument = Kind(name: "bad_argument")
        public static let unsupportedVisual = Kind(name: "unsupported_visual")
        public static let captureFailed = Kind(name: "capture_failed")
        public static let sourceNotFound = Kind(name: "source_not_found")
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// Captures the screen, a region, a RandR monitor or one window of an X11 display, band by band
/// through a small reused MIT-SHM image (XGetImage when shared memory cannot be attached),
/// only the areas the sink asks for, skipping the copy when XDamage reports no change, and
/// drawing the cursor in (XFixes) when asked.
///
/// A window is captured from its own off-screen pixmap (XComposite, automatic redirection),
/// so windows in front of it never show; it is followed through moves and resizes; when it
/// is unmapped or destroyed a placeholder picture is delivered instead — never the screen.
///
/// Used from one capture thread only. Owns its Display connection, the SHM segment and the
/// damage object; teardown order is XShmDetach → XDestroyImage → shmdt.
public final class X11ScreenCapturer {
    private enum Target {
        case rect(PixelRect)
        case window(top: Window, label: String)
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
    /// The MIT-SHM image: one band of up to `imageSize` (its width × `bandRows(width)` rows).
    private var image: UnsafeMutablePointer<XImage>?
    private var imageSize = PixelSize(width: 0, height: 0)
    /// What the sink asked for in this capture (reused).
    private var areas: [PixelRect] = []
    private var shmInfo = XShmSegmentInfo()
    private var shmAttached = false
    private var damage: Damage = 0
    private var damageEventBase: Int32 = 0
    private var dirty = true
    /// When the change waiting to be grabbed was first seen (`clock`), nil when none is.
    private var changedAtNanos: UInt64?
    private let clock: any MediaClock
    /// What changed, for the encoder to skip the rest: XDamage's region moved into this one
    /// (XFixes ≥ 2) at each grab and fetched as rectangles, in the picture's pixels (reused).
    /// `changesKnown` is false when it cannot say (forced grabs, windows, no XFixes).
    private var changedRegion: XserverRegion = 0
    /// What XDamage held while a change waited for the next (``awaitNextChange``): it is
    /// grabbed with that one. Empty unless `holdsDamage`.
    private var heldRegion: XserverRegion = 0
    private var holdsDamage = false
    /// XDamage events seen (each says a region went from empty to changed).
    private var damageEvents: UInt64 = 0
    private var changedRects: [PixelRect] = []
    private var changesKnown = false
    /// Where the cursor was drawn into the last picture (its pixels), nil if it was not.
    private var cursorRect: PixelRect?
    public private(set) var usesSharedMemory = false
    /// Bytes of the MIT-SHM segment (one band), 0 without one.
    public var sharedMemoryBytes: Int { shmAttached ? imageSize.area * 4 : 0 }
    /// Pixels a band holds (1 MB of BGRA, 136 rows at 1920 wide): small enough to stay in the
    /// L2 cache between the X server's copy and the conversion, large enough that a whole
    /// 1080p picture takes 8 round trips to the server.
    static let bandPixels = 1 << 18
    static func bandRows(width: Int) -> Int { max(16, (bandPixels / max(width, 1)) & ~1) }

    // Window state.
    private var useComposite = false
    private var windowPixmap: Pixmap = 0
    private var windowRect = PixelRect(x: 0, y: 0, width: 0, height: 0)
    private var windowBorder = 0
    private var windowGone = false
    private var placeholderReason: String?
    private var placeholder: UnsafeMutableRawPointer?
    private var placeholderSize = PixelSize(width: 0, height: 0)

    // Cursor state.
    private let drawCursor: Bool
    private var fixesEventBase: Int32 = 0
    private var cursorStale = true
    private var cursorPixels: [UInt32] = []
    private var cursorSize = PixelSize(width: 0, height: 0)
    private var cursorHot = (x: 0, y: 0)
    private var lastPointer = (x: Int.min, y: Int.min)

    /// The size of the frames delivered now (a window's size changes as it is resized).
    public var outputSize: PixelSize {
        switch target {
        case .rect(let r): return r.size
        case .window: return placeholderReason != nil ? placeholderSize : windowRect.size
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

        do {
            switch source {
            case .screen:
                target = .rect(PixelRect(x: 0, y: 0, width: screenSize.width, height: screenSize.height))
            case .region(let r):
                guard r.x + r.width <= screenSize.width, r.y + r.height <= screenSize.height else {
                    throw CaptureError(.badArgument, "region \(r) is outside the \(screenSize) screen of \"\(shownName)\"")
                }
                target = .rect(r)
            case .monitor(let spec):
                let m = try X11Query.findMonitor(d, root: root, spec: spec, displayName: shownName)
                guard let r = m.rect.intersection(PixelRect(x: 0, y: 0, width: screenSize.width, height: screenSize.height)),
                      !r.isEmpty else {
                    throw CaptureError(.sourceNotFound, "--monitor \(spec): monitor \(m.name) \(m.rect) is outside the screen")
                }
                target = .rect(r)
            case .window(let spec):
                let client = try X11Query.findWindow(d, root: root, spec: spec, displayName: shownName)
                guard let top = X11Query.topLevel(d, root: root, of: client) else {
                    throw CaptureError(.sourceNotFound, "--window \(spec): the window vanished while it was looked up")
                }
                let label = "window 0x\(String(client, radix: 16))" + (X11Query.title(d, client).map { " \"\($0)\"" } ?? "")
                target = .window(top: top, label: label)
            }
        } catch {
            XCloseDisplay(d)
            throw error
        }

        switch target {
        case .rect(let r):
            if wantSharedMemory { usesSharedMemory = attachSharedImage(width: r.width, visual: visual, depth: depth) }
            if !usesSharedMemory {
                logger.warning("MIT-SHM unavailable on \"\(shownName)\": capturing with XGetImage (slower)")
            }
        case .window(let top, let label):
            var major: Int32 = 0, minor: Int32 = 0, ev: Int32 = 0, er: Int32 = 0
            if XCompositeQueryExtension(d, &ev, &er) != 0, XCompositeQueryVersion(d, &major, &minor) != 0,
               major > 0 || minor >= 2 {
                XCompositeRedirectWindow(d, top, Int32(CompositeRedirectAutomatic))
                useComposite = true
                // Without a compositing manager the new pixmap starts as a copy of the screen,
                // windows in front included. Clear it to the windows' backgrounds and ask the
                // application to repaint (Expose), so no other window's pixels are ever sent.
                Self.clearAndExpose(d, top)
            } else {
                logger.warning("XComposite unavailable on \"\(shownName)\": windows in front of \(label) may show in the capture")
            }
            XSelectInput(d, top, StructureNotifyMask)
            refreshWindowGeometry(top)
            usesSharedMemory = wantSharedMemory
            if !usesSharedMemory {
                logger.warning("MIT-SHM unavailable on \"\(shownName)\": capturing with XGetImage (slower)")
            }
        }

        var errorBase: Int32 = 0
        if XDamageQueryExtension(d, &damageEventBase, &errorBase) != 0 {
            damage = XDamageCreate(d, damageDrawable, Int32(XDamageReportNonEmpty))
            var fixesEvent: Int32 = 0, fixesError: Int32 = 0, major: Int32 = 2, minor: Int32 = 0
            if XFixesQueryExtension(d, &fixesEvent, &fixesError) != 0, XFixesQueryVersion(d, &major, &minor) != 0, major >= 2 {
                changedRegion = XFixesCreateRegion(d, nil, 0)
                heldRegion = XFixesCreateRegion(d, nil, 0)
                changedRects.reserveCapacity(64)
            }
        } else {
            logger.warning("XDamage unavailable: every frame is captured")
        }
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

    deinit {
        if cx11_io_failed() != 0 {
            // The connection is dead: Xlib requests would block on it. The shared memory
            // segment and the image are ours to release; the rest died with the server.
            if let image {
                if shmAttached { image.pointee.data = nil }
                _ = cx11_destroy_image(image)
            }
            if shmAttached { shmdt(shmInfo.shmaddr) }
            placeholder?.deallocate()
            return
        }
        if damage != 0 { XDamageDestroy(display, damage) }
        if changedRegion != 0 { XFixesDestroyRegion(display, changedRegion) }
        if heldRegion != 0 { XFixesDestroyRegion(display, heldRegion) }
        releaseImage()
        if windowPixmap != 0 { XFreePixmap(display, windowPixmap) }
        placeholder?.deallocate()
        XSync(display, 0)
        _ = cx11_take_error()
        XCloseDisplay(display)
    }

    private static func clearAndExpose(_ d: OpaquePointer, _ w: Window, depth: Int = 0) {
        XClearArea(d, w, 0, 0, 0, 0, 1)
        guard depth < 4 else { return }
        for child in X11Query.children(d, w) { clearAndExpose(d, child, depth: depth + 1) }
    }

    private var damageDrawable: Drawable {
        switch target {
        case .rect: return root
        case .window(let top, _): return top
        }
    }

    // MARK: Images

    private func releaseImage() {
        if shmAttached { XShmDetach(display, &shmInfo) }
        if let image {
            if shmAttached { image.pointee.data = nil }
            _ = cx11_destroy_image(image)
        }
        if shmAttached { shmdt(shmInfo.shmaddr) }
        image = nil
        shmAttached = false
        imageSize = PixelSize(width: 0, height: 0)
    }

    /// Attaches a segment for bands of up to `width` pixels (``bandRows(width:)`` rows).
    private func attachSharedImage(width: Int, visual: UnsafeMutablePointer<Visual>, depth: Int32) -> Bool {
        releaseImage()
        shmInfo = XShmSegmentInfo()
        let size = PixelSize(width: width, height: Self.bandRows(width: width))
        guard let img = XShmCreateImage(display, visual, UInt32(depth), ZPixmap, nil, &shmInfo,
                                        UInt32(size.width), UInt32(size.height)) else { return false }
        guard img.pointee.bits_per_pixel == 32, Int(img.pointee.bytes_per_line) == size.width * 4 else {
            _ = cx11_destroy_image(img)
            return false
        }
        let bytes = Int(img.pointee.bytes_per_line) * Int(img.pointee.height)
        shmInfo.shmid = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0o600)
        guard shmInfo.shmid >= 0 else {
            _ = cx11_destroy_image(img)
            return false
        }
        let addr = shmat(shmInfo.shmid, nil, 0)
        // Mark for removal now: the segment goes away when both sides detach, even on a crash.
        shmctl(shmInfo.shmid, IPC_RMID, nil)
        guard let addr, cx11_shmat_failed(addr) == 0 else {
            _ = cx11_destroy_image(img)
            return false
        }
        shmInfo.shmaddr = addr.assumingMemoryBound(to: CChar.self)
        img.pointee.data = shmInfo.shmaddr
        shmInfo.readOnly = 0
        guard XShmAttach(display, &shmInfo) != 0 else {
            shmdt(addr)
            img.pointee.data = nil
            _ = cx11_destroy_image(img)
            return false
        }
        XSync(display, 0)
        image = img
        imageSize = size
        shmAttached = true
        return true
    }

    /// Grabs the picture of `size` whose top-left is at `offset` in `drawable` (at `origin` on the
    /// root window) for the sink: tells it what changed, then delivers the areas it asks for in
    /// bands. False on an X error (the sink was told to cancel).
    private func grab(_ drawable: Drawable, offset: (Int, Int), size: PixelSize, visual: UnsafeMutablePointer<Visual>?,
                      depth: Int32, origin: (Int, Int), into sink: CaptureSink) -> Bool {
        _ = cx11_take_error()
        if drawCursor {
            // The cursor's old and new places changed too (it is drawn in; XDamage does not see it).
            if changesKnown, let old = cursorRect { changedRects.append(old) }
            placeCursor(origin: origin)
            if changesKnown, let new = cursorRect { changedRects.append(new) }
        }
        areas.removeAll(keepingCapacity: true)
        changedRects.withUnsafeBufferPointer { rects in
            sink.begin(size: size, changed: changesKnown ? rects : nil, areas: &areas)
        }
        if usesSharedMemory && imageSize.width < size.width {
            guard let visual, attachSharedImage(width: size.width, visual: visual, depth: depth) else {
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
            let rows = usesSharedMemory ? Self.bandRows(width: imageSize.width) : area.height
            var y = area.y
            while y < area.y + area.height {
                let band = PixelRect(x: area.x, y: y, width: area.width, height: min(rows, area.y + area.height - y))
                guard grabBand(drawable, band, offset: offset, into: sink) else {
                    sink.cancel()
                    return false
                }
                y += band.height
            }
        }
        sink.end()
        return true
    }

    /// Copies one band (picture pixels) of the drawable, draws the cursor in, hands it to the sink.
    private func grabBand(_ drawable: Drawable, _ band: PixelRect, offset: (Int, Int), into sink: CaptureSink) -> Bool {
        let x = Int32(offset.0 + band.x), y = Int32(offset.1 + band.y)
        if usesSharedMemory, let image {
            // One segment, any band that fits: the request carries the image's size.
            image.pointee.width = Int32(band.width)
            image.pointee.height = Int32(band.height)
            image.pointee.bytes_per_line = Int32(band.width * 4)
            guard XShmGetImage(display, drawable, image, x, y, UInt.max) != 0, cx11_take_error() == 0 else { return false }
            deliver(image, band, into: sink)
        } else {
            guard let img = XGetImage(display, drawable, x, y, UInt32(band.width), UInt32(band.height), UInt.max, ZPixmap) else {
                _ = cx11_take_error()
                return false
            }
            deliver(img, band, into: sink)
            _ = cx11_destroy_image(img)
        }
        return true
    }

    private func deliver(_ img: UnsafeMutablePointer<XImage>, _ band: PixelRect, into sink: CaptureSink) {
        let base = UnsafeMutableRawPointer(img.pointee.data)!
        let stride = Int(img.pointee.bytes_per_line)
        if drawCursor { blendCursor(into: base, stride: stride, band) }
        sink.write(BGRAImageView(base: UnsafeRawPointer(base), stride: stride, width: band.width, height: band.height),
                   x: band.x, y: band.y)
    }
    /// Empties the damage for the next grab, keeping what it covered as rectangles of the
    /// picture when the grab is of a screen area (a forced grab, or a window's, says nothing).
    private func takeDamage(force: Bool) {
        changedRects.removeAll(keepingCapacity: true)
        changesKnown = false
        defer {
            if holdsDamage {
                XFixesSetRegion(display, heldRegion, nil, 0)
                holdsDamage = false
            }
        }
        guard damage != 0 else { return }
        guard changedRegion != 0, !force, case .rect(let area) = target else {
            XDamageSubtract(display, damage, 0, 0)
            return
        }
        XDamageSubtract(display, damage, 0, changedRegion)
        if holdsDamage { XFixesUnionRegion(display, changedRegion, changedRegion, heldRegion) }
        var count: Int32 = 0
        let rects = XFixesFetchRegion(display, changedRegion, &count)
        guard rects != nil || count == 0 else { return }
        for i in 0..<Int(count) {
            let r = rects![i]
            let root = PixelRect(x: Int(r.x), y: Int(r.y), width: Int(r.width), height: Int(r.height))
            if let inside = root.intersection(area) {
                changedRects.append(PixelRect(x: inside.x - area.x, y: inside.y - area.y, width: inside.width, height: inside.height))
            }
        }
        if let rects { XFree(rects) }
        changesKnown = true
    }

    // MARK: Events

    /// Reads pending X events: damage, window structure changes, cursor shape changes.
    private func drainEvents() {
        var event = XEvent()
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            let type = event.type
            if damage != 0, type == damageEventBase + XDamageNotify {
                damageEvents &+= 1
                if !dirty { changedAtNanos = clock.nowNanos() }
                dirty = true
            } else if randrEventBase >= 0, type == randrEventBase + RRScreenChangeNotify {
                XRRUpdateConfiguration(&event)
                screenChanged()
            } else if drawCursor, fixesEventBase >= 0, type == fixesEventBase + XFixesCursorNotify {
                cursorStale = true
                dirty = true
            } else if case .window(let top, _) = target {
                switch type {
                case ConfigureNotify where event.xconfigure.window == top:
                    let c = event.xconfigure
                    let size = PixelSize(width: Int(c.width), height: Int(c.height))
                    if size != windowRect.size {
                        dirty = true
                        freeWindowPixmap()
                    }
                    refreshWindowGeometry(top)
                case MapNotify where event.xmap.window == top, UnmapNotify where event.xunmap.window == top:
                    dirty = true
                    freeWindowPixmap()
                case DestroyNotify where event.xdestroywindow.window == top:
                    windowGone = true
                    dirty = true
                    damage = 0  // destroyed with the window
                    freeWindowPixmap()
                default:
                    break
                }
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

    private func freeWindowPixmap() {
        if windowPixmap != 0 { XFreePixmap(display, windowPixmap) }
        windowPixmap = 0
    }

    /// Reads the window's size, border and position on the root; false if it is not viewable.
    @discardableResult
    private func refreshWindowGeometry(_ top: Window) -> Bool {
        var attrs = XWindowAttributes()
        _ = cx11_take_error()
        guard XGetWindowAttributes(display, top, &attrs) != 0, cx11_take_error() == 0 else {
            windowGone = true
            return false
        }
        var x: Int32 = 0, y: Int32 = 0
        var child: Window = 0
        XTranslateCoordinates(display, top, root, 0, 0, &x, &y, &child)
        windowBorder = Int(attrs.border_width)
        windowRect = PixelRect(x: Int(x), y: Int(y), width: Int(attrs.width), height: Int(attrs.height))
        return attrs.map_state == IsViewable
    }

    // MARK: Capture

    /// Captures a picture if the source changed (or `force`): the sink learns what changed and
    /// gets the areas it asks for, band by band.
    public func capture(force: Bool = false, into sink: CaptureSink) -> CaptureOutcome {
        if cx11_io_failed() != 0 { return .permanentError("the X server of \(displayName) closed the connection (it stopped or crashed)") }
        drainEvents()
        if cx11_io_failed() != 0 { return .permanentError("the X server of \(displayName) closed the connection (it stopped or crashed)") }
        if damage == 0 && !windowGone { dirty = true }
        guard dirty || force else { return .unchanged }
        takeDamage(force: force)
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
        case .window(let top, let label):
            if windowGone { return showPlaceholder("\(label) is gone (closed)", force: force, into: sink) }
            guard refreshWindowGeometry(top) else {
                return showPlaceholder(windowGone ? "\(label) is gone (closed)" : "\(label) is not mapped (minimised or hidden)",
                                       force: force, into: sink)
            }
            var attrs = XWindowAttributes()
            XGetWindowAttributes(display, top, &attrs)
            var drawable: Drawable = top
            var offset = 0
            if useComposite {
                if windowPixmap == 0 {
                    _ = cx11_take_error()
                    windowPixmap = XCompositeNameWindowPixmap(display, top)
                    XSync(display, 0)
                    if cx11_take_error() != 0 { windowPixmap = 0 }
                }
                guard windowPixmap != 0 else {
                    dirty = true
                    return .temporaryError("\(label): no pixmap for the window yet")
                }
                drawable = windowPixmap
                offset = windowBorder
            }
            let ok = grab(drawable, offset: (offset, offset), size: windowRect.size, visual: attrs.visual,
                          depth: attrs.depth, origin: (windowRect.x, windowRect.y), into: sink)
            guard ok else {
                freeWindowPixmap()
                dirty = true
                return .temporaryError("capturing \(label) failed (resized or unmapped meanwhile)")
            }
            placeholderReason = nil
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
        if placeholderReason == reason && !force { return .unchanged }
        placeholderReason = reason
        let size = windowRect.size.area > 0 ? PixelSize(width: windowRect.width, height: windowRect.height)
                                            : PixelSize(width: 640, height: 360)
        if placeholder == nil || placeholderSize != size {
            placeholder?.deallocate()
            let p = UnsafeMutableRawPointer.allocate(byteCount: size.area * 4, alignment: 64)
            p.initializeMemory(as: UInt32.self, repeating: 0xFF26_2626, count: size.area)
            placeholder = p
            placeholderSize = size
        }
        areas.removeAll(keepingCapacity: true)
        sink.begin(size: size, changed: nil, areas: &areas)
        let whole = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        for asked in areas {
            guard let a = asked.intersection(whole) else { continue }
            sink.write(BGRAImageView(base: UnsafeRawPointer(placeholder! + (a.y * size.width + a.x) * 4), stride: size.width * 4,
                                     width: a.width, height: a.height), x: a.x, y: a.y)
        }
        sink.end()
        cursorRect = nil
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
    /// (XDamage reports a region that becomes non-empty: it is emptied into `heldRegion` so
    /// the next change is reported). False at once when no change waits.
    public func awaitNextChange(timeoutNanos: UInt64) -> Bool {
        guard changePending(), damage != 0, cx11_io_failed() == 0 else { return false }
        if heldRegion != 0 {
            XDamageSubtract(display, damage, 0, changedRegion)
            XFixesUnionRegion(display, heldRegion, heldRegion, changedRegion)
            holdsDamage = true
        } else {
            XDamageSubtract(display, damage, 0, 0)
        }
        XSync(display, 0)  // emptied before waiting: a change drawn from now on is reported
        let seen = damageEvents
        let deadline = clock.nowNanos() &+ timeoutNanos
        while damageEvents == seen {
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
        if drawCursor && !dirty && pointerMovedInView() { dirty = true }
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
        case .window: return windowRect
        }
    }

    private func cursorRect(at p: (x: Int, y: Int)) -> PixelRect {
        PixelRect(x: p.x - cursorHot.x, y: p.y - cursorHot.y, width: max(cursorSize.width, 1), height: max(cursorSize.height, 1))
    }

    private func pointerMovedInView() -> Bool {
        guard let p = pointerPosition(), p != lastPointer else { return false }
        let view = viewRect
        let touchesNew = cursorRect(at: p).intersection(view) != nil
        let touchesOld = lastPointer.x != Int.min && cursorRect(at: lastPointer).intersection(view) != nil
        if !touchesNew && !touchesOld { lastPointer = p; return false }
        return true
    }

    private func refreshCursorImage() {
        guard fixesEventBase >= 0, let img = XFixesGetCursorImage(display) else { return }
        defer { XFree(img) }
        let w = Int(img.pointee.width), h = Int(img.pointee.height)
        cursorSize = PixelSize(width: w, height: h)
        cursorHot = (Int(img.pointee.xhot), Int(img.pointee.yhot))
        cursorPixels.removeAll(keepingCapacity: true)
        cursorPixels.reserveCapacity(w * h)
        for i in 0..<(w * h) { cursorPixels.append(cx11_cursor_pixel(img, Int32(i))) }
        cursorStale = false
    }

    /// Finds where the cursor goes in this picture, whose top-left is at `origin` on the root
    /// window: sets ``cursorRect`` (picture pixels; nil when it is not drawn).
    private func placeCursor(origin: (Int, Int)) {
        if cursorStale { refreshCursorImage() }
        cursorRect = nil
        guard let p = pointerPosition() else { return }
        lastPointer = p
        guard cursorSize.area > 0 else { return }
        cursorRect = PixelRect(x: p.x - cursorHot.x - origin.0, y: p.y - cursorHot.y - origin.1,
                               width: cursorSize.width, height: cursorSize.height)
    }

    /// Blends the cursor (premultiplied ARGB) at ``cursorRect`` into a BGRA band holding `band`
    /// of the picture.
    private func blendCursor(into base: UnsafeMutableRawPointer, stride: Int, _ band: PixelRect) {
        guard let cursor = cursorRect, let part = cursor.intersection(band) else { return }
        for y in part.y..<(part.y + part.height) {
            let row = base.advanced(by: (y - band.y) * stride).assumingMemoryBound(to: UInt32.self)
            for x in part.x..<(part.x + part.width) {
                let src = cursorPixels[(y - cursor.y) * cursorSize.width + (x - cursor.x)]
                let a = src >> 24
                if a == 0 { continue }
                let dst = row[x - band.x]
                let inv = 255 - a
                func channel(_ shift: UInt32) -> UInt32 {
                    let s = (src >> shift) & 0xff, d = (dst >> shift) & 0xff
                    return min(255, s + (d * inv + 127) / 255) << shift
                }
                row[x - band.x] = 0xff00_0000 | channel(16) | channel(8) | channel(0)
            }
        }
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
