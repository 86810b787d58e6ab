import Synchronization

/// A small pool of reusable `VideoFrame`s of one size (like libwebrtc's
/// ScreenCaptureFrameQueue): `take()` hands out a free frame, `recycle(_:)` returns it.
/// Frames of another size are dropped when the pool is resized.
public final class FramePool: Sendable {
    private struct State {
        var size: PixelSize
        var free: [VideoFrame] = []
        var allocated = 0
    }
    private let state: Mutex<State>
    /// Most frames kept; beyond that, recycled frames are released.
    public let capacity: Int

    public init(size: PixelSize, capacity: Int = 4) {
        state = Mutex(State(size: size))
        self.capacity = capacity
        state.withLock { $0.free.reserveCapacity(capacity) }
    }

    /// The size of frames the pool hands out.
    public var size: PixelSize { state.withLock { $0.size } }

    /// Frames ever created by this pool (a steady count means no allocation per frame).
    public var allocatedCount: Int { state.withLock { $0.allocated } }

    /// Changes the frame size; free frames of the old size are released.
    public func resize(to size: PixelSize) {
        state.withLock {
            guard $0.size != size else { return }
            $0.size = size
            $0.free.removeAll(keepingCapacity: true)
        }
    }

    /// A free frame of the pool's size (reused when one is free, else a new one).
    public func take() -> VideoFrame {
        let (frame, size): (VideoFrame?, PixelSize) = state.withLock { s in
            if let f = s.free.popLast() { return (f, s.size) }
            s.allocated += 1
            return (nil, s.size)
        }
        return frame ?? VideoFrame(width: size.width, height: size.height)
    }

    /// Gives a frame back for reuse.
    public func recycle(_ frame: VideoFrame) {
        state.withLock { s in
            guard frame.size == s.size, s.free.count < capacity else { return }
            s.free.append(frame)
        }
    }
}
