internal import CX11
internal import CYUV
#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

/// A borrowed I420 picture (a decoder's output), valid during the call it is passed to.
public struct I420View {
    public let y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>
    public let strideY: Int, strideU: Int, strideV: Int
    public let width: Int, height: Int
    public init(y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>,
                strideY: Int, strideU: Int, strideV: Int, width: Int, height: Int) {
        self.y = y; self.u = u; self.v = v
        self.strideY = strideY; self.strideU = strideU; self.strideV = strideV
        self.width = width; self.height = height
    }
}

/// An error opening the viewer window; the message names the display.
public struct VideoOutputError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Shows decoded pictures in an X11 window: libyuv converts the picture to BGRA in a reused
/// MIT-SHM image, which XShmPutImage draws (XPutImage without MIT-SHM). Until the user resizes
/// it, the window takes the picture's size (clamped to the screen, as ffplay and GStreamer's
/// ximagesink do), so a picture that fits is drawn without scaling; once resized, the picture
/// is scaled to fit it (aspect kept, black bars). Closing it (WM_DELETE_WINDOW) is reported by
/// `handleEvents()`. Use from one thread.
public final class X11VideoWindow {
    private let display: OpaquePointer
    private let window: Window
    private let gc: GC
    private let deleteAtom: Atom
    private var windowSize: PixelSize
    private let screenSize: PixelSize
    /// The window follows the picture's size until someone else (the user, a window manager)
    /// sizes it differently.
    private var followsPicture = true
    /// Our last XResizeWindow: its size and request serial, until the server has answered it.
    private var pendingResize: (size: PixelSize, serial: UInt)?
    private var image: UnsafeMutablePointer<XImage>?
    private var imageSize = PixelSize(width: 0, height: 0)
    private var shmInfo = XShmSegmentInfo()
    private var shm = false
    private let useSHM: Bool
    private var scaled: (y: UnsafeMutablePointer<UInt8>, u: UnsafeMutablePointer<UInt8>, v: UnsafeMutablePointer<UInt8>, size: PixelSize)?
    public private(set) var closed = false
    public private(set) var framesShown = 0
    /// Pictures that had to be scaled to the window (for tests).
    private(set) var framesScaled = 0

    /// The X window id (for tests and scripts).
    public var windowID: UInt { UInt(window) }

    /// Opens a window of `size` (clamped to the screen) titled `title`.
    public init(display name: String?, title: String, size: PixelSize) throws {
        let shownName = name ?? (getenv("DISPLAY").map { String(cString: $0) } ?? "")
        guard !shownName.isEmpty else { throw VideoOutputError("no X display for the viewer window: set DISPLAY, pass --display, or use --headless") }
        guard let d = XOpenDisplay(shownName) else {
            throw VideoOutputError("cannot open X display \"\(shownName)\" for the viewer window (use --headless to watch without one)")
        }
        display = d
        cx11_install_error_handler()
        let screen = cx11_default_screen(d)
        let root = cx11_root_window(d, screen)
        let sw = Int(cx11_display_width(d, screen)), sh = Int(cx11_display_height(d, screen))
        screenSize = PixelSize(width: sw, height: sh)
        let fit = Self.fit(size, into: screenSize)
        windowSize = fit
        window = XCreateSimpleWindow(d, root, 0, 0, UInt32(fit.width), UInt32(fit.height), 0, 0, 0)
        XStoreName(d, window, title)
        deleteAtom = XInternAtom(d, "WM_DELETE_WINDOW", 0)
        var atom = deleteAtom
        XSetWMProtocols(d, window, &atom, 1)
        XSelectInput(d, window, StructureNotifyMask | ExposureMask)
        gc = XCreateGC(d, window, 0, nil)
        XMapWindow(d, window)
        useSHM = XShmQueryExtension(d) != 0
        XSync(d, 0)
    }

    deinit {
        releaseImage()
        if let s = scaled { s.y.deallocate(); s.u.deallocate(); s.v.deallocate() }
        XFreeGC(display, gc)
        XDestroyWindow(display, window)
        XSync(display, 0)
        XCloseDisplay(display)
    }

    /// The largest size with `size`'s aspect ratio that fits in `box` (never larger than `size`).
    static func fit(_ size: PixelSize, into box: PixelSize) -> PixelSize {
        guard size.width > box.width || size.height > box.height else { return size }
        let scale = min(Double(box.width) / Double(size.width), Double(box.height) / Double(size.height))
        return PixelSize(width: max(2, Int(Double(size.width) * scale)), height: max(2, Int(Double(size.height) * scale)))
    }

    private func releaseImage() {
        if shm { XShmDetach(display, &shmInfo) }
        if let image {
            if shm { image.pointee.data = nil }
            _ = cx11_destroy_image(image)
        }
        if shm { shmdt(shmInfo.shmaddr) }
        image = nil
        shm = false
    }

    private func ensureImage(_ size: PixelSize) {
        guard image == nil || imageSize != size else { return }
        releaseImage()
        imageSize = size
        let screen = cx11_default_screen(display)
        let visual = cx11_default_visual(display, screen)
        let depth = UInt32(cx11_default_depth(display, screen))
        if useSHM, let img = XShmCreateImage(display, visual, depth, ZPixmap, nil, &shmInfo, UInt32(size.width), UInt32(size.height)) {
            let bytes = Int(img.pointee.bytes_per_line) * size.height
            shmInfo.shmid = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0o600)
            if shmInfo.shmid >= 0, let addr = shmat(shmInfo.shmid, nil, 0), cx11_shmat_failed(addr) == 0 {
                shmctl(shmInfo.shmid, IPC_RMID, nil)
                shmInfo.shmaddr = addr.assumingMemoryBound(to: CChar.self)
                shmInfo.readOnly = 0
                img.pointee.data = shmInfo.shmaddr
                if XShmAttach(display, &shmInfo) != 0 {
                    XSync(display, 0)
                    if cx11_take_error() == 0 {
                        image = img
                        shm = true
                        return
                    }
                }
                shmdt(addr)
                img.pointee.data = nil
            }
            _ = cx11_destroy_image(img)
        }
        // XPutImage path: Xlib frees `data` with the image.
        let data = malloc(size.width * size.height * 4)!.assumingMemoryBound(to: CChar.self)
        image = XCreateImage(display, visual, depth, ZPixmap, 0, data, UInt32(size.width), UInt32(size.height), 32, Int32(size.width * 4))
    }

    /// Processes window events; returns false once the window was closed.
    @discardableResult
    public func handleEvents() -> Bool {
        var event = XEvent()
        while XPending(display) > 0 {
            XNextEvent(display, &event)
            switch event.type {
            case ConfigureNotify:
                let size = PixelSize(width: Int(event.xconfigure.width), height: Int(event.xconfigure.height))
                if let pending = pendingResize {
                    // Sent before our resize was processed: stale, the resize will follow.
                    guard event.xconfigure.serial >= pending.serial else { continue }
                    pendingResize = nil
                    if size != pending.size { followsPicture = false }
                } else if size != windowSize {
                    followsPicture = false
                }
                windowSize = size
            case ClientMessage where UInt(event.xclient.data.l.0) == UInt(deleteAtom):
                closed = true
            case DestroyNotify:
                closed = true
            default:
                break
            }
        }
        return !closed
    }

    /// Draws a picture: the window first takes its size if it still follows the picture;
    /// otherwise it is scaled to fit the window with its aspect ratio, centred on black.
    public func show(_ p: I420View) {
        handleEvents()
        if followsPicture, !closed {
            let wanted = Self.fit(PixelSize(width: p.width, height: p.height), into: screenSize)
            if wanted != windowSize, wanted != pendingResize?.size {
                pendingResize = (wanted, UInt(XNextRequest(display)))
                XResizeWindow(display, window, UInt32(wanted.width), UInt32(wanted.height))
                windowSize = wanted
            }
        }
        guard !closed, windowSize.width >= 2, windowSize.height >= 2 else { return }
        ensureImage(windowSize)
        guard let image else { return }
        let fit = Self.fitAspect(PixelSize(width: p.width, height: p.height), into: windowSize)
        let ox = (windowSize.width - fit.width) / 2, oy = (windowSize.height - fit.height) / 2
        let stride = Int(image.pointee.bytes_per_line)
        let base = UnsafeMutableRawPointer(image.pointee.data)!.assumingMemoryBound(to: UInt8.self)
        if fit != windowSize { ARGBRect(base, Int32(stride), 0, 0, Int32(windowSize.width), Int32(windowSize.height), 0xFF00_0000) }
        var y = p.y, u = p.u, v = p.v
        var sy = p.strideY, su = p.strideU, sv = p.strideV
        if fit.width != p.width || fit.height != p.height {
            let s = scratch(fit)
            let cw = (fit.width + 1) / 2
            I420Scale(p.y, Int32(p.strideY), p.u, Int32(p.strideU), p.v, Int32(p.strideV), Int32(p.width), Int32(p.height),
                      s.y, Int32(fit.width), s.u, Int32(cw), s.v, Int32(cw), Int32(fit.width), Int32(fit.height), kFilterBilinear)
            y = UnsafePointer(s.y); u = UnsafePointer(s.u); v = UnsafePointer(s.v)
            sy = fit.width; su = cw; sv = cw
            framesScaled += 1
        }
        I420ToARGB(y, Int32(sy), u, Int32(su), v, Int32(sv), base + oy * stride + ox * 4, Int32(stride),
                   Int32(fit.width), Int32(fit.height))
        if shm {
            XShmPutImage(display, window, gc, image, 0, 0, 0, 0, UInt32(windowSize.width), UInt32(windowSize.height), 0)
        } else {
            XPutImage(display, window, gc, image, 0, 0, 0, 0, UInt32(windowSize.width), UInt32(windowSize.height))
        }
        XFlush(display)
        framesShown += 1
    }

    /// Waits until the server has drawn everything sent so far (for tests and screenshots).
    public func sync() { XSync(display, 0) }

    /// The largest size of `size`'s aspect ratio that fits `box` (up- or downscaled), even.
    static func fitAspect(_ size: PixelSize, into box: PixelSize) -> PixelSize {
        let scale = min(Double(box.width) / Double(size.width), Double(box.height) / Double(size.height))
        let w = min(box.width, max(2, Int((Double(size.width) * scale).rounded()) & ~1))
        let h = min(box.height, max(2, Int((Double(size.height) * scale).rounded()) & ~1))
        return PixelSize(width: w, height: h)
    }

    private func scratch(_ size: PixelSize) -> (y: UnsafeMutablePointer<UInt8>, u: UnsafeMutablePointer<UInt8>, v: UnsafeMutablePointer<UInt8>, size: PixelSize) {
        if let s = scaled, s.size == size { return s }
        if let s = scaled { s.y.deallocate(); s.u.deallocate(); s.v.deallocate() }
        let cw = (size.width + 1) / 2, ch = (size.height + 1) / 2
        let s = (UnsafeMutablePointer<UInt8>.allocate(capacity: size.area), UnsafeMutablePointer<UInt8>.allocate(capacity: cw * ch),
                 UnsafeMutablePointer<UInt8>.allocate(capacity: cw * ch), size)
        scaled = s
        return s
    }
}
