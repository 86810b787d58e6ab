import Synchronization

/// A small pool of reusable `VideoFrame`s of one size (like libwebrtc's
/// ScreenCaptureFrameQueue): `take()` hands out a free frame, `recycle(_:)` returns it.
/// Frames of another size are dropped when the pool is resized.
///
/// Given a clock, a frame recycled while frames are taken seldom (the last two takes
/// `idleNanos` or more apart: a still slide, not a video or a blinking cursor) keeps its memory
/// only as address space (``VideoFrame/discardPixels()``) and is parked: ``takeResident()``
/// passes it over, so the capture can first try another way (the sender lends it the encoder's
/// picture when the encoder is idle) and a sender on a still screen holds one resident picture,
/// not two. Nothing is allocated either way.
public final class FramePool: Sendable {
    private struct State {
        var size: PixelSize
        var free: [VideoFrame] = []
        /// Free frames whose pixels were given back.
        var parked: [VideoFrame] = []
        var allocated = 0
        var discarded = 0
        /// When `take()` last handed out a frame, and how long after the one before.
        var lastTake: UInt64?
        var takeGap: UInt64?
    }
    private let state: Mutex<State>
    /// Most frames kept; beyond that, recycled frames are released.
    public let capacity: Int
    private let clock: (any MediaClock)?
    public let idleNanos: UInt64

    /// - Parameters:
    ///   - clock: when given, frames recycled while takes are `idleNanos` or more apart give
    ///     their pixels' memory back; nil keeps every frame resident.
    public init(size: PixelSize, capacity: Int = 4, clock: (any MediaClock)? = nil, idleNanos: UInt64 = 1_000_000_000) {
        state = Mutex(State(size: size))
        self.capacity = capacity
        self.clock = clock
        self.idleNanos = idleNanos
        state.withLock {
            $0.free.reserveCapacity(capacity)
            $0.parked.reserveCapacity(capacity)
        }
    }

    /// The size of frames the pool hands out.
    public var size: PixelSize { state.withLock { $0.size } }

    /// Frames ever created by this pool (a steady count means no allocation per frame).
    public var allocatedCount: Int { state.withLock { $0.allocated } }

    /// Frames whose pixels' memory was given back when they were recycled.
    public var discardedCount: Int { state.withLock { $0.discarded } }

    /// Changes the frame size; free frames of the old size are released.
    public func resize(to size: PixelSize) {
        state.withLock {
            guard $0.size != size else { return }
            $0.size = size
            $0.free.removeAll(keepingCapacity: true)
            $0.parked.removeAll(keepingCapacity: true)
        }
    }

    /// A free frame of the pool's size (reused when one is free, resident ones first, else a
    /// new one).
    public func take() -> VideoFrame {
        let now = clock?.nowNanos()
        let (frame, size): (VideoFrame?, PixelSize) = state.withLock { s in
            Self.noteTake(&s, now)
            if let f = s.free.popLast() ?? s.parked.popLast() { return (f, s.size) }
            s.allocated += 1
            return (nil, s.size)
        }
        return frame ?? VideoFrame(width: size.width, height: size.height)
    }

    /// A free frame whose pixels are resident, or nil (none, or only parked ones).
    public func takeResident() -> VideoFrame? {
        let now = clock?.nowNanos()
        return state.withLock { s in
            guard let f = s.free.popLast() else { return nil }
            Self.noteTake(&s, now)
            return f
        }
    }

    private static func noteTake(_ s: inout State, _ now: UInt64?) {
        guard let now else { return }
        s.takeGap = s.lastTake.map { now &- $0 }
        s.lastTake = now
    }

    /// Gives a frame back for reuse.
    public func recycle(_ frame: VideoFrame) {
        state.withLock { s in
            guard frame.size == s.size, s.free.count + s.parked.count < capacity else { return }
            if clock != nil, let gap = s.takeGap, gap >= idleNanos {
                frame.discardPixels()
                s.discarded += 1
                s.parked.append(frame)
            } else {
                s.free.append(frame)
            }
        }
    }
}
