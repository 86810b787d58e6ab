import Basics
import MediaCore

/// The bounded hand-off from the encode thread to the send thread: encoded frames in the order
/// they were made, at most ``capacity`` of them (the one being sent counts). Unlike the
/// pictures' latest-frame mailbox nothing here is skipped — each frame refers to the ones before
/// it — so the bound is kept the other way: the encode thread waits for room *before* it takes
/// a picture (``waitForRoom(timeoutNanos:)``), and the picture it then takes is the newest there
/// is when the send stage can take another. A frame waiting for the pacer holds up the next
/// encode by at most one frame, never the encoder itself.
///
/// One producer (the encode thread) and one consumer (the send thread). Each slot keeps its
/// buffer and grows it only for a frame bigger than any before: no allocation per frame.
/// `@unchecked Sendable`: the counters are guarded by `condition`; a slot's bytes are touched
/// only by the producer while it is free (the one ``push(_:_:)`` fills) and by the consumer
/// while it is the head (the one ``withNext(timeoutNanos:_:)`` lends) — never both, since the
/// head is counted until the consumer gives it back.
final class EncodedFrameQueue: @unchecked Sendable {
    /// What the send stage needs besides the bytes.
    struct Frame: Sendable, Equatable {
        var rtpTimestamp: UInt32
        var temporalLayer: UInt8
        var keyframe: Bool
        /// The encoder's rate when it made the frame (FEC and the pacer's rates derive from it).
        var bitsPerSecond: Int
        /// Paced within the path's budget across frames (``PacketPacer/Rates/networkLimited``).
        var networkLimited: Bool
        var size: PixelSize
        /// When its picture was captured (the first frame's latency).
        var captureNanos: UInt64
    }

    private final class Slot {
        var bytes: UnsafeMutableRawBufferPointer
        var count = 0
        var frame = Frame(rtpTimestamp: 0, temporalLayer: 0, keyframe: false, bitsPerSecond: 0, networkLimited: false,
                          size: PixelSize(width: 0, height: 0), captureNanos: 0)
        init(capacity: Int) { bytes = .allocate(byteCount: capacity, alignment: 16) }
        deinit { bytes.deallocate() }
    }

    let capacity: Int
    private let slots: [Slot]
    private let condition = ConditionLock()
    private var head = 0, queued = 0
    private var closed = false

    init(capacity: Int = 2, initialBytes: Int = 64 * 1024) {
        precondition(capacity > 0)
        self.capacity = capacity
        slots = (0..<capacity).map { _ in Slot(capacity: initialBytes) }
    }

    /// Frames queued, the one being sent included.
    var count: Int { condition.withLock { queued } }

    /// Waits until a frame fits (true) or the queue is closed or `timeoutNanos` pass (false).
    func waitForRoom(timeoutNanos: UInt64) -> Bool {
        let deadline = SystemClock().nowNanos() &+ timeoutNanos
        condition.lock()
        defer { condition.unlock() }
        while queued == capacity && !closed {
            if !condition.wait(untilMonotonicNanos: deadline) { break }
        }
        return queued < capacity && !closed
    }

    /// Copies a frame in, after the ones queued; waits for room first. False: closed, not queued.
    @discardableResult
    func push(_ bytes: UnsafeRawBufferPointer, _ frame: Frame) -> Bool {
        condition.lock()
        while queued == capacity && !closed { condition.wait() }
        guard !closed else { condition.unlock(); return false }
        let slot = slots[(head + queued) % capacity]
        condition.unlock()
        // The slot is free: only this (the one) producer touches it until it is counted.
        if bytes.count > slot.bytes.count {
            slot.bytes.deallocate()
            slot.bytes = .allocate(byteCount: max(bytes.count, 2 * slot.bytes.count), alignment: 16)
        }
        if let base = bytes.baseAddress { slot.bytes.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
        slot.count = bytes.count
        slot.frame = frame
        condition.withLock {
            queued += 1
            condition.broadcast()
        }
        return true
    }

    /// Lends the oldest frame to `body` and then frees its slot; waits up to `timeoutNanos` for
    /// one. False: none came in time, or the queue is closed and empty (what was queued before
    /// the close is still handed out, so a stop sends what was encoded).
    @discardableResult
    func withNext(timeoutNanos: UInt64, _ body: (UnsafeRawBufferPointer, Frame) -> Void) -> Bool {
        let deadline = SystemClock().nowNanos() &+ timeoutNanos
        condition.lock()
        while queued == 0 && !closed {
            if !condition.wait(untilMonotonicNanos: deadline) { break }
        }
        guard queued > 0 else { condition.unlock(); return false }
        let slot = slots[head]
        condition.unlock()
        body(UnsafeRawBufferPointer(rebasing: slot.bytes[0..<slot.count]), slot.frame)
        condition.withLock {
            head = (head + 1) % capacity
            queued -= 1
            condition.broadcast()
        }
        return true
    }

    /// Wakes both sides for good: pushes fail, waits for room end, and the consumer gets what
    /// is left, then false.
    func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }
}
