import Basics

/// A one-slot hand-off between a producer and a consumer thread where the newest item wins:
/// `put` replaces an item the consumer has not taken yet (and returns it, so it can be
/// recycled), so latency never queues up behind a slow consumer.
public final class LatestFrameMailbox<Item: Sendable>: @unchecked Sendable {
    // All state is guarded by `condition`.
    private let condition = ConditionLock()
    private var slot: Item?
    private var closed = false
    private var woken = false
    private var replacedCount = 0

    public init() {}

    /// Puts `item` in the slot. Returns the item it replaced, if the consumer had not taken it.
    @discardableResult
    public func put(_ item: Item) -> Item? {
        condition.lock()
        defer { condition.unlock() }
        let old = slot
        slot = item
        if old != nil { replacedCount += 1 }
        condition.signal()
        return old
    }

    /// Puts `item` in the slot; an item it replaces is first handed to `merge` with it (under the
    /// lock, so the consumer cannot take `item` half merged), then returned.
    @discardableResult
    public func put(_ item: Item, merging merge: (_ item: Item, _ replaced: Item) -> Void) -> Item? {
        condition.lock()
        defer { condition.unlock() }
        let old = slot
        if let old {
            merge(item, old)
            replacedCount += 1
        }
        slot = item
        condition.signal()
        return old
    }

    /// Waits until an item is there (returns it), `timeoutNanos` pass, or the mailbox is closed
    /// or woken (both return nil, unless an item is there). Timeouts over a day wait without one.
    public func take(timeoutNanos: UInt64) -> Item? {
        let unbounded = timeoutNanos > 86_400_000_000_000
        let deadline = unbounded ? 0 : SystemClock().nowNanos() &+ timeoutNanos
        condition.lock()
        defer { condition.unlock() }
        while slot == nil && !closed && !woken {
            if unbounded {
                condition.wait()
            } else if !condition.wait(untilMonotonicNanos: deadline) {
                break
            }
        }
        woken = false
        let item = slot
        slot = nil
        return item
    }

    /// Takes an item without waiting.
    public func poll() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        let item = slot
        slot = nil
        return item
    }

    /// Takes back the item the consumer has not taken yet, so the producer brings it up to date
    /// in place instead of filling another (one item fewer in flight); counted as replaced.
    public func reclaim() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        let item = slot
        slot = nil
        if item != nil { replacedCount += 1 }
        return item
    }

    /// Wakes a waiting consumer once (its `take` returns what is there, possibly nil), so it can
    /// look at other work, e.g. a keyframe request.
    public func wake() {
        condition.lock()
        woken = true
        condition.signal()
        condition.unlock()
    }

    /// Wakes the consumer for good; later `take` calls return at once.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    public var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }

    /// How many items were replaced before the consumer took them (frames skipped).
    public var replaced: Int {
        condition.lock()
        defer { condition.unlock() }
        return replacedCount
    }
}
