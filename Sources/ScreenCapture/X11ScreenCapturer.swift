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
    /// New pixels were handed to the body.
    case captured
    /// Nothing changed since the last capture; nothing was copied, the body was not called.
    case unchanged
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
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// Captures the screen or a region of an X11 display into a reused MIT-SHM image (XGetImage
/// when shared memory cannot be attached), skipping the copy when XDamage reports no change.
///
/// Used from one capture thread only. Owns its Display connection, the SHM segment and the
/// damage object; teardown order is XShmDetach → XDestroyImage → shmdt.
public final class X11ScreenCapturer {
    private let display: OpaquePointer
    private let root: Window
    private let screenSize: PixelSize
    private let rect: PixelRect
    private let logger: Logger
    private var image: UnsafeMutablePointer<XImage>?
    private var shmInfo = XShmSegmentInfo()
    private var shmAttached = false
    private var damage: Damage = 0
    private var damageEventBase: Int32 = 0
    private var dirty = true
    public private(set) var usesSharedMemory = false

    /// The size of frames delivered.
    public var outputSize: PixelSize { rect.size }

    /// - Parameters:
    ///   - display: an X display name like ":1"; nil uses $DISPLAY.
    ///   - source: what to capture.
    ///   - useSharedMemory: false forces the XGetImage path (as does SCREENSHARE_NO_SHM=1).
    /// - Throws: `CaptureError` naming the display or the region that is not usable.
    public init(display name: String?, source: CaptureSourceSpec, useSharedMemory: Bool = true, logger: Logger) throws {
        self.logger = logger
        XInitThreads()
        let shownName = name ?? (getenv("DISPLAY").map { String(cString: $0) } ?? "")
        guard !shownName.isEmpty else {
            throw CaptureError(.displayUnavailable, "no X display: set DISPLAY or pass --display :N")
        }
        guard let d = XOpenDisplay(shownName) else {
            throw CaptureError(.displayUnavailable, "cannot open X display \"\(shownName)\" (is an X server running there, and may you connect?)")
        }
        display = d
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
        switch source {
        case .screen:
            rect = PixelRect(x: 0, y: 0, width: screenSize.width, height: screenSize.height)
        case .region(let r):
            guard r.x + r.width <= screenSize.width, r.y + r.height <= screenSize.height else {
                XCloseDisplay(d)
                throw CaptureError(.badArgument, "region \(r) is outside the \(screenSize) screen of \"\(shownName)\"")
            }
            rect = r
        }
        let noSHM = getenv("SCREENSHARE_NO_SHM").map { String(cString: $0) == "1" } ?? false
        if useSharedMemory && !noSHM && XShmQueryExtension(d) != 0 {
            usesSharedMemory = attachSharedImage(visual: visual, depth: depth)
        }
        if !usesSharedMemory {
            logger.warning("MIT-SHM unavailable on \"\(shownName)\": capturing with XGetImage (slower)")
        }
        var errorBase: Int32 = 0
        if XDamageQueryExtension(d, &damageEventBase, &errorBase) != 0 {
            damage = XDamageCreate(d, root, Int32(XDamageReportNonEmpty))
        } else {
            logger.warning("XDamage unavailable: every frame is captured")
        }
        XSync(d, 0)
    }

    deinit {
        if damage != 0 { XDamageDestroy(display, damage) }
        if shmAttached { XShmDetach(display, &shmInfo) }
        if let image { _ = cx11_destroy_image(image) }
        if shmAttached { shmdt(shmInfo.shmaddr) }
        XCloseDisplay(display)
    }

    private func attachSharedImage(visual: UnsafeMutablePointer<Visual>, depth: Int32) -> Bool {
        guard let img = XShmCreateImage(display, visual, UInt32(depth), ZPixmap, nil, &shmInfo,
                                        UInt32(rect.width), UInt32(rect.height)) else { return false }
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
        shmAttached = true
        return true
    }

    /// Reads pending X events; returns true if damage touched the captured rectangle.
    private func drainEvents() {
        var event = XEvent()
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            if damage != 0, event.type == damageEventBase + XDamageNotify { dirty = true }
        }
    }

    /// Captures a frame if the screen changed (or `force`), handing the body a borrowed BGRA
    /// view that is valid only during the call.
    public func capture(force: Bool = false, _ body: (BGRAImageView) -> Void) -> CaptureOutcome {
        drainEvents()
        if damage == 0 { dirty = true }
        guard dirty || force else { return .unchanged }
        if damage != 0 { XDamageSubtract(display, damage, 0, 0) }
        dirty = false
        if usesSharedMemory, let image {
            guard XShmGetImage(display, root, image, Int32(rect.x), Int32(rect.y), UInt.max) != 0 else {
                return .temporaryError("XShmGetImage failed")
            }
            deliver(image, body)
        } else {
            guard let img = XGetImage(display, root, Int32(rect.x), Int32(rect.y), UInt32(rect.width),
                                      UInt32(rect.height), UInt.max, ZPixmap) else {
                return .temporaryError("XGetImage failed")
            }
            deliver(img, body)
            _ = cx11_destroy_image(img)
        }
        return .captured
    }

    private func deliver(_ img: UnsafeMutablePointer<XImage>, _ body: (BGRAImageView) -> Void) {
        let view = BGRAImageView(base: UnsafeRawPointer(img.pointee.data), stride: Int(img.pointee.bytes_per_line),
                                 width: Int(img.pointee.width), height: Int(img.pointee.height))
        body(view)
    }

    /// Waits up to `timeoutNanos` for X events (damage); returns true if the screen may have changed.
    public func waitForChange(timeoutNanos: UInt64) -> Bool {
        drainEvents()
        if dirty { return true }
        XFlush(display)
        var pfd = pollfd(fd: cx11_connection_number(display), events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(timeoutNanos / 1_000_000, 10_000))
        _ = poll(&pfd, 1, ms)
        drainEvents()
        return dirty
    }
}
