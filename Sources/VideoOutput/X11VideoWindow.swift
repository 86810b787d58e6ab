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
/// ximagesink do), so a picture that fits is drawn without scaling, and then only its bands of
/// 16 rows that differ from the last picture are converted and put (a refined slide or a video
/// in a still page changes part of the screen); once resized, the picture is scaled to fit it
/// (aspect kept, black bars). Closing it (WM_DELETE_WINDOW) is reported by
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
    /// The picture scaled to the window, when it does not fit.
    private var scaled: VideoFrame?
    public private(set) var closed = false
    public private(set) var framesShown = 0
    /// Pictures that had to be scaled to the window (for tests).
    private(set) var framesScaled = 0
    /// Bands of 16 rows converted and drawn (for tests): a picture shown at its own size
    /// converts only the bands that differ from the last one.
    private(set) var bandsConverted = 0
    /// The last picture drawn at its own size, to find the bands the next one changes.
    private var previous: VideoFrame?
    private var previousValid = false
    /// The window size and picture placement the image was last drawn for.
    private var drawnLayout: (window: PixelSize, fit: PixelSize)?
    /// Set by Expose: the next picture is put whole.
    private var exposed = false
    static let bandRows = 16
    private var bandScratch: [Int] = []

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
        drawnLayout = nil
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
            case Expose:
                exposed = true
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
        let sameLayout = drawnLayout.map { $0.window == windowSize && $0.fit == fit } ?? false
        if !sameLayout {
            if fit != windowSize { ARGBRect(base, Int32(stride), 0, 0, Int32(windowSize.width), Int32(windowSize.height), 0xFF00_0000) }
            drawnLayout = (windowSize, fit)
            previousValid = false
        }
        // The rows of the image to put: all of it, or the span of the bands that changed.
        var rows = 0..<windowSize.height
        if fit.width == p.width && fit.height == p.height {
            let bands = changedBands(p)
            guard !bands.isEmpty || !sameLayout || exposed else {
                framesShown += 1
                return
            }
            for band in bands {
                let row = band * Self.bandRows, count = min(Self.bandRows, p.height - row), chromaRow = row / 2
                I420ToARGB(p.y + row * p.strideY, Int32(p.strideY), p.u + chromaRow * p.strideU, Int32(p.strideU),
                           p.v + chromaRow * p.strideV, Int32(p.strideV), base + (oy + row) * stride + ox * 4, Int32(stride),
                           Int32(fit.width), Int32(count))
            }
            bandsConverted += bands.count
            if sameLayout && !exposed, let first = bands.first, let last = bands.last {
                rows = (oy + first * Self.bandRows)..<(oy + min(p.height, (last + 1) * Self.bandRows))
            }
        } else {
            previousValid = false
            let s = Self.frame(&scaled, fit)
            I420Scale(p.y, Int32(p.strideY), p.u, Int32(p.strideU), p.v, Int32(p.strideV), Int32(p.width), Int32(p.height),
                      s.y, Int32(s.strideY), s.u, Int32(s.strideUV), s.v, Int32(s.strideUV), Int32(fit.width), Int32(fit.height),
                      kFilterBilinear)
            framesScaled += 1
            I420ToARGB(s.y, Int32(s.strideY), s.u, Int32(s.strideUV), s.v, Int32(s.strideUV), base + oy * stride + ox * 4,
                       Int32(stride), Int32(fit.width), Int32(fit.height))
        }
        exposed = false
        let y0 = Int32(rows.lowerBound), height = UInt32(rows.count)
        if shm {
            XShmPutImage(display, window, gc, image, 0, y0, 0, y0, UInt32(windowSize.width), height, 0)
        } else {
            XPutImage(display, window, gc, image, 0, y0, 0, y0, UInt32(windowSize.width), height)
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

    /// The bands of `bandRows` rows where `p` differs from the last picture drawn at its own
    /// size (all of them when there is none to compare with); the copy is brought up to `p`.
    private func changedBands(_ p: I420View) -> [Int] {
        let cw = (p.width + 1) / 2, ch = (p.height + 1) / 2
        if previous?.width != p.width || previous?.height != p.height { previousValid = false }
        let copy = Self.frame(&previous, PixelSize(width: p.width, height: p.height))
        let sy = copy.strideY, suv = copy.strideUV
        let all = !previousValid
        previousValid = true
        let bandCount = (p.height + Self.bandRows - 1) / Self.bandRows
        bandScratch.removeAll(keepingCapacity: true)
        for band in 0..<bandCount {
            let row = band * Self.bandRows, count = min(Self.bandRows, p.height - row)
            let chromaRow = row / 2, chromaCount = min(Self.bandRows / 2, ch - chromaRow)
            var changed = all
            if !changed {
                for r in row..<(row + count) where memcmp(copy.y + r * sy, p.y + r * p.strideY, p.width) != 0 {
                    changed = true
                    break
                }
            }
            if !changed {
                for r in chromaRow..<(chromaRow + chromaCount)
                where memcmp(copy.u + r * suv, p.u + r * p.strideU, cw) != 0 || memcmp(copy.v + r * suv, p.v + r * p.strideV, cw) != 0 {
                    changed = true
                    break
                }
            }
            guard changed else { continue }
            bandScratch.append(band)
            for r in row..<(row + count) { memcpy(copy.y + r * sy, p.y + r * p.strideY, p.width) }
            for r in chromaRow..<(chromaRow + chromaCount) {
                memcpy(copy.u + r * suv, p.u + r * p.strideU, cw)
                memcpy(copy.v + r * suv, p.v + r * p.strideV, cw)
            }
        }
        return bandScratch
    }

    /// `frame`, made again when it is not of `size`.
    private static func frame(_ frame: inout VideoFrame?, _ size: PixelSize) -> VideoFrame {
        if let f = frame, f.width == size.width, f.height == size.height { return f }
        let f = VideoFrame(width: size.width, height: size.height)
        frame = f
        return f
    }
}
