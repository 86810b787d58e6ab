/// One RTP stream as a browser sees it, whatever the presenters behind it: the relay sends a
/// browser each kind (video, audio) on the one SSRC of its answer, and when the presenter changes
/// (the one it followed left, the next took over) the new presenter's sequence numbers and
/// timestamps are shifted to run on from the last ones sent, as SFUs do (mediasoup's
/// `RtpStreamSend`, pion's and libwebrtc's SSRC rewriting). A jump of thousands of sequence
/// numbers or a timestamp from another clock would make the browser's jitter buffer wait, drop
/// or reset. The browser's feedback (NACK, receiver reports) is shifted back.
///
/// Pure: the time is passed in.
public struct StreamSplicer: Sendable {
    /// The presenter SSRC whose packets go out now (nil: none yet).
    public private(set) var source: UInt32?
    /// Added to the source's sequence numbers and timestamps.
    public private(set) var sequenceOffset: UInt16 = 0
    public private(set) var timestampOffset: UInt32 = 0
    /// The source replaced last, and when: its packets still in flight are dropped for a while
    /// rather than switching back and forth.
    private var previous: UInt32?
    private var switchedNanos: UInt64 = 0
    /// The newest packet sent (after the shift).
    private var highestSequence: UInt16 = 0
    private var highestTimestamp: UInt32 = 0
    private var highestNanos: UInt64 = 0
    private var sentAny = false
    private let clockRate: UInt64

    /// How long packets of the replaced source are dropped after a switch.
    public static let holdOffNanos: UInt64 = 1_000_000_000

    public init(clockRate: UInt32) { self.clockRate = UInt64(clockRate) }

    /// The outgoing sequence number and timestamp of an RTP packet of `ssrc`, or nil to drop it
    /// (a replaced source's late packet).
    public mutating func rewrite(ssrc: UInt32, sequence: UInt16, timestamp: UInt32, now: UInt64) -> (sequence: UInt16, timestamp: UInt32)? {
        if ssrc != source {
            guard adopt(ssrc, now: now, sequence: sequence, timestamp: timestamp) else { return nil }
        }
        let out = (sequence &+ sequenceOffset, timestamp &+ timestampOffset)
        if !sentAny || Int16(bitPattern: out.0 &- highestSequence) > 0 {
            sentAny = true
            highestSequence = out.0
            highestTimestamp = out.1
            highestNanos = now
        }
        return out
    }

    /// A sender report's RTP timestamp, on the outgoing clock; nil when it is not the current
    /// source's (it is dropped).
    public func rewriteReport(ssrc: UInt32, timestamp: UInt32) -> UInt32? {
        ssrc == source ? timestamp &+ timestampOffset : nil
    }

    /// A sequence number the browser names (a NACK, a report's highest) back on the source's.
    public func original(_ sequence: UInt16) -> UInt16 { sequence &- sequenceOffset }

    private mutating func adopt(_ ssrc: UInt32, now: UInt64, sequence: UInt16, timestamp: UInt32) -> Bool {
        if ssrc == previous, now &- switchedNanos < Self.holdOffNanos { return false }
        if source != nil {
            // Run on from the last packet sent: the next sequence number, and the time that has
            // passed since on the stream's clock (at least one tick).
            let elapsed = (now &- highestNanos) * clockRate / 1_000_000_000
            sequenceOffset = highestSequence &+ 1 &- sequence
            timestampOffset = highestTimestamp &+ UInt32(truncatingIfNeeded: max(1, elapsed)) &- timestamp
            previous = source
            switchedNanos = now
        }
        source = ssrc
        return true
    }
}
