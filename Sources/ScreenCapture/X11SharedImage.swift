internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

/// The pixels of an X11 capture, one band at a time: a small MIT-SHM image reused for every
/// band (the X server writes it, the sink reads it in place), or XGetImage when shared memory
/// cannot be attached. Teardown order: XShmDetach → XDestroyImage → shmdt. Used from the
/// capturer's thread only.
final class X11SharedImage {
    private let display: OpaquePointer
    private var image: UnsafeMutablePointer<XImage>?
    /// The largest band the segment holds (its width × ``bandRows(width:)`` rows).
    private(set) var size = PixelSize(width: 0, height: 0)
    private var shmInfo = XShmSegmentInfo()
    private(set) var attached = false

    /// Pixels a band holds (1 MB of BGRA, 136 rows at 1920 wide): small enough to stay in the
    /// L2 cache between the X server's copy and the conversion, large enough that a whole
    /// 1080p picture takes 8 round trips to the server.
    static let bandPixels = 1 << 18
    static func bandRows(width: Int) -> Int { max(16, (bandPixels / max(width, 1)) & ~1) }

    init(display: OpaquePointer) { self.display = display }

    /// Bytes of the segment, 0 without one.
    var bytes: Int { attached ? size.area * 4 : 0 }

    /// Rows of a band for pictures `width` wide: the segment's, or a whole area's without one.
    func rows(forAreaOf height: Int) -> Int { attached ? Self.bandRows(width: size.width) : height }

    /// Attaches a segment for bands of up to `width` pixels. False when it cannot.
    func attach(width: Int, visual: UnsafeMutablePointer<Visual>, depth: Int32) -> Bool {
        release()
        shmInfo = XShmSegmentInfo()
        let band = PixelSize(width: width, height: Self.bandRows(width: width))
        guard let img = XShmCreateImage(display, visual, UInt32(depth), ZPixmap, nil, &shmInfo,
                                        UInt32(band.width), UInt32(band.height)) else { return false }
        guard img.pointee.bits_per_pixel == 32, Int(img.pointee.bytes_per_line) == band.width * 4 else {
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
        size = band
        attached = true
        return true
    }

    /// Detaches and frees the segment and the image.
    func release() {
        if attached { XShmDetach(display, &shmInfo) }
        releaseLocally()
    }

    /// Frees what is ours after the connection died (no request may be made on it).
    func releaseLocally() {
        if let image {
            if attached { image.pointee.data = nil }
            _ = cx11_destroy_image(image)
        }
        if attached { shmdt(shmInfo.shmaddr) }
        image = nil
        attached = false
        size = PixelSize(width: 0, height: 0)
    }

    /// Copies `band` of `drawable` (its top-left at `at` there) and hands its pixels to `body`
    /// (writable: the cursor is drawn in; valid only during the call). False on an X error.
    func grab(_ drawable: Drawable, _ band: PixelRect, at: (x: Int32, y: Int32),
              _ body: (UnsafeMutableRawPointer, _ stride: Int) -> Void) -> Bool {
        if attached, let image {
            // One segment, any band that fits: the request carries the image's size.
            image.pointee.width = Int32(band.width)
            image.pointee.height = Int32(band.height)
            image.pointee.bytes_per_line = Int32(band.width * 4)
            guard XShmGetImage(display, drawable, image, at.x, at.y, UInt.max) != 0, cx11_take_error() == 0,
                  let data = image.pointee.data else { return false }
            body(UnsafeMutableRawPointer(data), Int(image.pointee.bytes_per_line))
        } else {
            guard let img = XGetImage(display, drawable, at.x, at.y, UInt32(band.width), UInt32(band.height), UInt.max, ZPixmap) else {
                _ = cx11_take_error()
                return false
            }
            defer { _ = cx11_destroy_image(img) }
            guard let data = img.pointee.data else { return false }
            body(UnsafeMutableRawPointer(data), Int(img.pointee.bytes_per_line))
        }
        return true
    }
}
