/// Turns a wrapping counter (RTP sequence numbers, RTP timestamps) into a 64-bit one.
///
/// Each value is taken as the nearest one to the previous value: a step forward of less than
/// half the range is forward (across the wrap if needed), anything else is backward, as in
/// libwebrtc's `SeqNumUnwrapper`. The first value maps to itself. Reordered packets get their
/// true, smaller extended value; a forward jump of half the range or more reads as backward,
/// which callers detect as a large negative step (see ``ReceiveStatistics``).
public struct Unwrapper<Value: FixedWidthInteger & UnsignedInteger & Sendable>: Sendable {
    private var last: Int64?

    public init() {}

    /// The most recent extended value, or nil before the first.
    public var lastExtended: Int64? { last }

    /// The extended value of `value`, without remembering it.
    public func extended(_ value: Value) -> Int64 {
        guard let last else { return Int64(value) }
        let previous = Value(truncatingIfNeeded: last)
        let forward = value &- previous  // modular distance forward
        let half = Value(1) << (Value.bitWidth - 1)
        if forward < half {
            return last + Int64(forward)
        } else {
            return last - Int64(previous &- value)
        }
    }

    /// The extended value of `value`, which becomes the reference for the next one.
    public mutating func unwrap(_ value: Value) -> Int64 {
        let e = extended(value)
        last = e
        return e
    }

    /// Forgets the history: the next value maps to itself.
    public mutating func reset() { last = nil }
}

/// 16-bit RTP sequence numbers to 64-bit.
public typealias SequenceUnwrapper = Unwrapper<UInt16>
/// 32-bit RTP timestamps to 64-bit.
public typealias TimestampUnwrapper = Unwrapper<UInt32>
