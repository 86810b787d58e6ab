import MediaCore
import Basics

/// The capture thread's sink for the X11 capturer: takes a pooled frame, asks for what changed
/// since the picture that frame holds (``ChangeHistory``: a frame back from the encoder is two
/// or three pictures old), and converts only those bands into it. A video in one part of a still
/// slide costs the video's pixels, not the screen's. When the picture is scaled, the bands go into
/// a source-sized I420 copy kept up to date the same way, scaled whole into the frame.
///
/// A picture the encoder has not taken yet is taken back (`reclaim`) and brought up to date in
/// place, its marks of what changed kept, instead of filling a third frame: two frames are in
/// flight, the encoder's and the capture's. When the pool has no resident frame free (a still
/// screen: ``FramePool`` parked it), the encoder's own picture is borrowed if the encoder is idle
/// (`borrow`) and brought up to date the same way: one frame in all.
///
/// XDamage can miss a change (some GL drivers, compositors): at least every
/// ``fullRefreshNanos`` the whole picture is converted again, whatever it says, so a missed
/// change shows within that time instead of staying until its area changes again.
///
/// Used on the capture thread only.
public final class FrameAssembler: CaptureSink {
    private let pool: FramePool
    private let converter = FrameConverter()
    /// Convert to within rounding of BT.601 (``FrameConverter/precise``): `detail`.
    public var precise: Bool {
        get { converter.precise }
        set { converter.precise = newValue }
    }
    private let nowNanos: () -> UInt64
    /// Asked with the picture's size before anything is grabbed: false takes nothing (the
    /// source is too small). May resize the pool.
    private let accept: (PixelSize) -> Bool
    /// The last finished frame when the encoder has not taken it yet (the mailbox's), or nil.
    private let reclaim: () -> VideoFrame?
    /// The encoder's picture when it is idle, lent until it comes back published (or given back),
    /// and whether its marks of what changed were not encoded yet; nil when it cannot be lent.
    private let borrow: () -> (frame: VideoFrame, changesPending: Bool)?
    /// Returns a borrowed frame that was not published (a failed grab); false: the encoder has
    /// another, so it goes to the pool.
    private let giveBack: (VideoFrame) -> Bool
    /// Whether the frame being filled was taken back (or borrowed with changes not encoded), so
    /// its marks are added to.
    private var reclaimed = false
    /// Whether the frame being filled is the encoder's, borrowed.
    private var borrowed = false
    /// A taken-back frame was dropped by a failed grab with changes the encoder never got: the
    /// next frame marks everything.
    private var changesLost = false
    private var history = ChangeHistory()
    private var frame: VideoFrame?
    private var size = PixelSize(width: 0, height: 0)
    private var changed: [PixelRect] = []
    private var changesKnown = false
    /// The source-sized copy when the frames are scaled, and the picture it holds.
    private var mirror: VideoFrame?
    private var mirrorSerial: UInt64 = 0
    private var convertNanos: UInt64 = 0
    /// When the whole picture was last converted.
    private var lastFullNanos: UInt64?
    public static let fullRefreshNanos: UInt64 = 2_000_000_000
    /// The picture finished by the last capture, taken by ``takeFinished()``.
    private var finished: VideoFrame?
    /// Source pixels converted for the last picture (all of it when nothing was known).
    public private(set) var pixelsConverted = 0

    public init(pool: FramePool, nowNanos: @escaping () -> UInt64, accept: @escaping (PixelSize) -> Bool = { _ in true },
                reclaim: @escaping () -> VideoFrame? = { nil },
                borrow: @escaping () -> (frame: VideoFrame, changesPending: Bool)? = { nil },
                giveBack: @escaping (VideoFrame) -> Bool = { _ in false }) {
        self.pool = pool
        self.nowNanos = nowNanos
        self.reclaim = reclaim
        self.borrow = borrow
        self.giveBack = giveBack
        self.accept = accept
        changed.reserveCapacity(64)
    }

    /// The frame the last capture completed, and the milliseconds spent converting it.
    public func takeFinished() -> (frame: VideoFrame, convertMillis: Double)? {
        guard let f = finished else { return nil }
        finished = nil
        return (f, Double(convertNanos) / 1e6)
    }

    public func begin(size: PixelSize, changed: UnsafeBufferPointer<PixelRect>?, areas: inout [PixelRect]) {
        if let stale = finished { pool.recycle(stale); finished = nil }
        convertNanos = 0
        pixelsConverted = 0
        guard accept(size) else {
            // Nothing is grabbed: what changed is not in any frame.
            history.recordUnknown()
            return
        }
        self.size = size
        self.changed.removeAll(keepingCapacity: true)
        if let changed { self.changed.append(contentsOf: changed) }
        changesKnown = changed != nil
        let now = nowNanos()
        if let last = lastFullNanos, now &- last < Self.fullRefreshNanos {
            history.record(changed, size: size)
        } else {
            history.record(nil, size: size)  // what the frames hold is not trusted: all of it
            lastFullNanos = now
        }
        var taken = reclaim()
        if let r = taken, r.size != pool.size {
            // Made for an old size: the encoder starts again with a keyframe at the new one.
            pool.recycle(r)
            taken = nil
        }
        reclaimed = taken != nil
        borrowed = false
        if taken == nil { taken = pool.takeResident() }
        if taken == nil, let (lent, changesPending) = borrow() {
            if lent.size == pool.size {
                taken = lent
                borrowed = true
                reclaimed = changesPending
            } else if !giveBack(lent) {
                pool.recycle(lent)
            }
        }
        let f = taken ?? pool.take()
        frame = f
        if f.size == size {
            history.areas(since: f.pictureSerial, into: &areas)
        } else {
            if mirror?.size != size {
                mirror = VideoFrame(width: size.width, height: size.height)
                mirrorSerial = 0
            }
            history.areas(since: mirrorSerial, into: &areas)
        }
    }

    public func write(_ band: BGRAImageView, x: Int, y: Int) {
        guard let frame else { return }
        pixelsConverted += band.width * band.height
        let start = nowNanos()
        converter.convert(bgra: band, into: frame.size == size ? frame : mirror!, x: x, y: y)
        convertNanos &+= nowNanos() &- start
    }

    public func end() {
        guard let f = frame else { return }
        frame = nil
        let start = nowNanos()
        if f.size != size, let mirror {
            converter.scale(mirror, into: f)
            mirrorSerial = history.serial
        }
        convertNanos &+= nowNanos() &- start
        f.pictureSerial = history.serial
        changed.withUnsafeBufferPointer { f.setChanges(changesKnown && !changesLost ? $0 : nil, source: size, keepingEarlier: reclaimed) }
        changesLost = false
        finished = f
    }

    public func cancel() {
        history.recordUnknown()
        mirrorSerial = 0
        guard let f = frame else { return }
        frame = nil
        f.pictureSerial = 0
        if reclaimed || borrowed {
            // A picture the encoder had or was given, partly brought up to date: if the encoder
            // has none (it lent this one), it repeats it, everything marked changed, until the
            // next grab converts all of it (serial 0).
            changesLost = true
            borrowed = false
            f.markEverythingChanged()
            if giveBack(f) { return }
        }
        pool.recycle(f)
    }
}
