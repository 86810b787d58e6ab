/// A leaky bucket of bits sent, drained at a bit rate: `detail` mode waits for it to fall below
/// one second of budget before encoding a new picture (under pressure the frame rate drops, the
/// latest picture wins, each picture keeps its quality); resends and `motion`'s packets wait
/// for their budgets. Pure.
public struct RateBucket: Sendable, Equatable {
    public private(set) var levelBits: Double = 0
    private var lastNanos: UInt64?

    public init() {}

    /// Drains what the link carried since the last call.
    public mutating func drain(at now: UInt64, bitsPerSecond: Int) {
        if let last = lastNanos, now > last {
            levelBits = max(0, levelBits - Double(bitsPerSecond) * Double(now - last) / 1e9)
        }
        if lastNanos.map({ now > $0 }) ?? true { lastNanos = now }
    }

    /// Adds a frame's bits.
    public mutating func add(bits: Int) { levelBits += Double(bits) }

    /// How long until the level is at most `limitBits` (0 when it already is).
    public func nanosUntil(atMost limitBits: Double, bitsPerSecond: Int) -> UInt64 {
        guard levelBits > limitBits, bitsPerSecond > 0 else { return 0 }
        return UInt64((levelBits - limitBits) / Double(bitsPerSecond) * 1e9)
    }
}
