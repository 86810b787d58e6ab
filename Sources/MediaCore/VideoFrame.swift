#if canImport(Glibc)
import Glibc
#endif

/// A picture size in pixels.
public struct PixelSize: Hashable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }
    public var description: String { "\(width)x\(height)" }
    public var area: Int { width * height }
}

/// A rectangle in pixels (X11 geometry: origin top-left).
public struct PixelRect: Hashable, Sendable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
    public var size: PixelSize { PixelSize(width: width, height: height) }
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }
    public var isEmpty: Bool { width <= 0 || height <= 0 }

    /// The part of `self` that lies inside `other`, or nil when they do not overlap.
    public func intersection(_ other: PixelRect) -> PixelRect? {
        let x0 = max(x, other.x), y0 = max(y, other.y)
        let x1 = min(x + width, other.x + other.width), y1 = min(y + height, other.y + other.height)
        guard x1 > x0, y1 > y0 else { return nil }
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}

/// A borrowed view of packed 32-bit BGRA pixels (X11 ZPixmap, depth 24/32, little endian:
/// bytes B, G, R, X in memory). Valid only inside the closure that hands it out.
public struct BGRAImageView {
    public let base: UnsafeRawPointer
    public let stride: Int
    public let width: Int
    public let height: Int
    /// What changed since the capturer's previous picture, in this picture's pixels (XDamage's
    /// rectangles, the cursor's old and new places); nil when it cannot say (everything may have).
    /// Borrowed like the pixels.
    public let changed: UnsafeBufferPointer<PixelRect>?
    public init(base: UnsafeRawPointer, stride: Int, width: Int, height: Int, changed: UnsafeBufferPointer<PixelRect>? = nil) {
        self.base = base
        self.stride = stride
        self.width = width
        self.height = height
        self.changed = changed
    }
    public var size: PixelSize { PixelSize(width: width, height: height) }
}

/// A planar I420 (YUV 4:2:0) picture that owns its memory. Frames come from a `FramePool`
/// and go back to it, so the hot path never allocates.
///
/// Sendable by ownership transfer: a frame is written by one stage, then handed to the next
/// through a lock-protected mailbox (`LatestFrameMailbox`), whose lock orders the accesses;
/// no two threads touch it at once.
public final class VideoFrame: @unchecked Sendable {
    public let width: Int
    public let height: Int
    public let strideY: Int
    public let strideUV: Int
    public let y: UnsafeMutablePointer<UInt8>
    public let u: UnsafeMutablePointer<UInt8>
    public let v: UnsafeMutablePointer<UInt8>
    private let storage: UnsafeMutableRawPointer
    public let byteCount: Int
    /// Which 16x16 macroblocks of the picture changed since the picture published before it
    /// (1: changed), row by row: ``macroblockColumns`` × ``macroblockRows``. Meaningful only
    /// when ``changesKnown``; the encoder skips the others (libvpx's active map).
    public let changes: UnsafeMutablePointer<UInt8>
    public let macroblockColumns: Int
    public let macroblockRows: Int
    /// False: anything may have changed (the source cannot say: a file, a window, a placeholder).
    public private(set) var changesKnown = false

    /// Capture time on the monotonic media clock, in nanoseconds.
    public var timestampNanos: UInt64 = 0
    /// Frames that are identical to the previous one (nothing changed on screen).
    public var isRepeat: Bool = false
    /// The number of the captured picture this frame holds (``ChangeHistory``), 0 when none: a
    /// reused frame is brought up to date by converting only what changed since.
    public var pictureSerial: UInt64 = 0

    public init(width: Int, height: Int) {
        precondition(width > 0 && height > 0, "frame size must be positive")
        self.width = width
        self.height = height
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        strideY = (width + 31) & ~31
        strideUV = (cw + 31) & ~31
        let ySize = strideY * height, uvSize = strideUV * ch
        byteCount = ySize + 2 * uvSize
        // Page-aligned, so ``discardPixels()`` gives all of it back.
        storage = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: Self.pageSize)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
        y = storage.assumingMemoryBound(to: UInt8.self)
        u = y + ySize
        v = u + uvSize
        macroblockColumns = (width + 15) / 16
        macroblockRows = (height + 15) / 16
        changes = .allocate(capacity: macroblockColumns * macroblockRows)
        changes.initialize(repeating: 1, count: macroblockColumns * macroblockRows)
    }

    deinit {
        storage.deallocate()
        changes.deallocate()
    }

    /// Anything may have changed.
    public func markEverythingChanged() { changesKnown = false }

    static let pageSize = max(4096, Int(sysconf(Int32(_SC_PAGESIZE))))

    /// Gives the pixels' memory back to the system (`MADV_DONTNEED`): it stays allocated and
    /// reads as zeros until written again, when pages are made resident one by one. The picture
    /// is then unknown: ``pictureSerial`` 0 (a capture converts all of it) and everything
    /// marked changed.
    public func discardPixels() {
        let end = byteCount & ~(Self.pageSize - 1)
        if end > 0 { _ = madvise(storage, end, MADV_DONTNEED) }
        pictureSerial = 0
        changesKnown = false
    }

    /// The changes are `rects`, in the pixels of a `source`-sized picture this frame was
    /// converted (and maybe scaled) from; nil: unknown. A rectangle marks every macroblock it
    /// touches, widened by 2 pixels once scaled (the scaler's filter reaches that far).
    /// - Parameter keepingEarlier: add to the marks already there (a frame brought up to date
    ///   before the encoder took it: what changed in its older picture is not encoded yet).
    public func setChanges(_ rects: UnsafeBufferPointer<PixelRect>?, source: PixelSize, keepingEarlier: Bool = false) {
        guard let rects, source.width > 0, source.height > 0 else { changesKnown = false; return }
        if keepingEarlier && !changesKnown { return }  // everything was already marked
        if !keepingEarlier { changes.update(repeating: 0, count: macroblockColumns * macroblockRows) }
        changesKnown = true
        let scaled = source != size
        let sx = Double(width) / Double(source.width), sy = Double(height) / Double(source.height)
        for r in rects where !r.isEmpty {
            var x0 = r.x, y0 = r.y, x1 = r.x + r.width, y1 = r.y + r.height  // [x0, x1)
            if scaled {
                x0 = Int((Double(x0) * sx).rounded(.down)) - 2
                y0 = Int((Double(y0) * sy).rounded(.down)) - 2
                x1 = Int((Double(x1) * sx).rounded(.up)) + 2
                y1 = Int((Double(y1) * sy).rounded(.up)) + 2
            }
            x0 = max(0, x0); y0 = max(0, y0); x1 = min(width, x1); y1 = min(height, y1)
            guard x1 > x0, y1 > y0 else { continue }
            for row in (y0 / 16)...((y1 - 1) / 16) {
                (changes + row * macroblockColumns + x0 / 16).update(repeating: 1, count: (x1 - 1) / 16 - x0 / 16 + 1)
            }
        }
    }

    /// Adds the changes of `older`, a picture this one replaces before the encoder took it
    /// (what changed in it has to be encoded with this one).
    public func mergeChanges(from older: VideoFrame) {
        guard changesKnown else { return }
        guard older.changesKnown, older.macroblockColumns == macroblockColumns, older.macroblockRows == macroblockRows else {
            changesKnown = false
            return
        }
        for i in 0..<(macroblockColumns * macroblockRows) { changes[i] |= older.changes[i] }
    }

    public var size: PixelSize { PixelSize(width: width, height: height) }
    public var chromaWidth: Int { (width + 1) / 2 }
    public var chromaHeight: Int { (height + 1) / 2 }

    /// Fills the picture with one YUV colour.
    public func fill(y yValue: UInt8, u uValue: UInt8, v vValue: UInt8) {
        for row in 0..<height { (y + row * strideY).update(repeating: yValue, count: width) }
        for row in 0..<chromaHeight {
            (u + row * strideUV).update(repeating: uValue, count: chromaWidth)
            (v + row * strideUV).update(repeating: vValue, count: chromaWidth)
        }
    }
}
