import RTCP

/// What ``ReceiveStatistics`` made of one packet.
public enum PacketVerdict: Sendable, Equatable {
    /// Newer than every packet before it (gaps allowed).
    case inOrder
    /// Older than the newest packet, and not seen before (reordered or retransmitted).
    case reordered
    /// Seen before (within the last 1024 sequence numbers).
    case duplicate
    /// Not counted: still on probation, or a jump too large to trust yet (RFC 3550 A.1). Two
    /// sequential packets after a large jump restart the statistics.
    case rejected
}

/// Reception statistics of one RTP source, RFC 3550 Appendix A.1 (sequence validation),
/// A.3 (expected and lost packets) and A.8 (interarrival jitter); produces the report block of
/// an RR. Time is passed in, in nanoseconds of a monotonic clock. Memory is fixed.
///
/// Deviation from A.3: duplicates (detected in a 1024-packet window) are counted apart and do
/// not lower the cumulative loss.
public struct ReceiveStatistics: Sendable {
    public struct Configuration: Sendable {
        /// RTP clock rate in Hz (90 000 for video).
        public var clockRate: UInt32 = 90_000
        /// Sequential packets needed before a source is valid (MIN_SEQUENTIAL of A.1); 0 accepts
        /// the first packet.
        public var probation = 0
        /// A forward jump of at least this many packets is suspect (MAX_DROPOUT of A.1).
        public var maxDropout: UInt16 = 3000
        /// A step back of at most this many packets is reordering (MAX_MISORDER of A.1).
        public var maxMisorder: UInt16 = 100
        public init() {}
    }

    public let ssrc: UInt32
    public let configuration: Configuration

    // RFC 3550 A.1 state.
    private var started = false
    private var maxSeq: UInt16 = 0
    private var cycles: Int64 = 0
    private var baseSeq: Int64 = 0
    private var badSeq: Int = 0x1_0001
    private var probation = 0
    private var receivedPrior: Int64 = 0
    private var expectedPrior: Int64 = 0
    // A.8 state: jitter in 1/16 timestamp units.
    private var transit: UInt32?
    private var jitterQ4: UInt32 = 0
    // Which of the last 1024 sequence numbers arrived, bit (extended & 1023).
    private var seen = SequenceWindow()
    // Last SR from this source.
    private var lastSRMiddle32: UInt32 = 0
    private var lastSRArrival: UInt64 = 0

    /// Packets counted (no duplicates, nothing rejected).
    public private(set) var packetsReceived: Int64 = 0
    /// Payload bytes of the counted packets.
    public private(set) var bytesReceived: Int64 = 0
    public private(set) var duplicates: Int64 = 0
    /// Packets older than the newest one when they arrived (reordered or retransmitted).
    public private(set) var outOfOrder: Int64 = 0
    /// Packets rejected by sequence validation.
    public private(set) var rejected: Int64 = 0
    /// Times the source was resynchronised after a large sequence jump.
    public private(set) var restarts = 0
    /// NTP time and RTP timestamp of the last SR, to map RTP time to wall-clock time.
    public private(set) var lastSenderReport: (ntp: NTPTimestamp, rtpTimestamp: UInt32)?

    public init(ssrc: UInt32, configuration: Configuration = Configuration()) {
        self.ssrc = ssrc
        self.configuration = configuration
    }

    /// Highest sequence number seen, extended by the wrap count (A.1 `cycles + max_seq`).
    public var extendedHighestSequence: Int64 { cycles + Int64(maxSeq) }
    /// Packets expected from the first to the highest sequence number (A.3).
    public var expected: Int64 { started ? extendedHighestSequence - baseSeq + 1 : 0 }
    /// Expected minus received, since the start.
    public var cumulativeLost: Int64 { expected - packetsReceived }
    /// Interarrival jitter in RTP timestamp units (A.8).
    public var jitter: UInt32 { jitterQ4 >> 4 }
    /// Interarrival jitter in seconds.
    public var jitterSeconds: Double { Double(jitterQ4) / 16 / Double(configuration.clockRate) }

    /// Records one packet that arrived at `arrival` (ns).
    @discardableResult
    public mutating func onPacket(sequenceNumber seq: UInt16, rtpTimestamp: UInt32, arrival: UInt64,
                                  payloadBytes: Int = 0) -> PacketVerdict {
        guard started else {
            initSequence(seq)
            maxSeq = seq &- 1
            probation = configuration.probation
            started = true
            if probation == 0 {
                initSequence(seq)
                return count(seq, extended: Int64(seq), inOrder: true, rtpTimestamp: rtpTimestamp, arrival: arrival, bytes: payloadBytes)
            }
            return onProbation(seq)
        }
        if probation > 0 { return onProbation(seq) }
        let udelta = seq &- maxSeq
        if udelta == 0 {
            duplicates += 1
            return .duplicate
        } else if udelta < configuration.maxDropout {
            if seq < maxSeq { cycles += 0x1_0000 }  // wrapped
            maxSeq = seq
            return count(seq, extended: extendedHighestSequence, inOrder: true, rtpTimestamp: rtpTimestamp, arrival: arrival, bytes: payloadBytes)
        } else if Int(udelta) <= 0x1_0000 - Int(configuration.maxMisorder) {
            // A very large jump: believe it only if the next packet follows it (the sender restarted).
            if Int(seq) == badSeq {
                restarts += 1
                initSequence(seq)
                return count(seq, extended: extendedHighestSequence, inOrder: true, rtpTimestamp: rtpTimestamp, arrival: arrival, bytes: payloadBytes)
            }
            badSeq = Int(seq &+ 1)
            rejected += 1
            return .rejected
        } else {
            // Reordered or duplicate: at most maxMisorder behind.
            let extended = extendedHighestSequence - Int64(maxSeq &- seq)
            if seen.contains(extended) {
                duplicates += 1
                return .duplicate
            }
            if extended < baseSeq { baseSeq = extended }  // older than the first packet: the stream began earlier
            return count(seq, extended: extended, inOrder: false, rtpTimestamp: rtpTimestamp, arrival: arrival, bytes: payloadBytes)
        }
    }

    private mutating func onProbation(_ seq: UInt16) -> PacketVerdict {
        if seq == maxSeq &+ 1 {
            probation -= 1
            maxSeq = seq
            if probation == 0 {
                initSequence(seq)
                packetsReceived = 1
                seen.insert(Int64(seq))
                return .inOrder
            }
        } else {
            probation = configuration.probation - 1
            maxSeq = seq
        }
        rejected += 1
        return .rejected
    }

    private mutating func initSequence(_ seq: UInt16) {
        baseSeq = Int64(seq)
        maxSeq = seq
        badSeq = 0x1_0001
        cycles = 0
        packetsReceived = 0
        receivedPrior = 0
        expectedPrior = 0
        transit = nil
        seen = SequenceWindow()
    }

    private mutating func count(_ seq: UInt16, extended: Int64, inOrder: Bool, rtpTimestamp: UInt32, arrival: UInt64,
                                bytes: Int) -> PacketVerdict {
        seen.insert(extended)
        packetsReceived += 1
        bytesReceived += Int64(bytes)
        guard inOrder else {
            outOfOrder += 1
            return .reordered
        }
        // A.8: J += (|D| − J) / 16, on in-order packets only (retransmissions would inflate it).
        let now = Self.timestampUnits(arrival, clockRate: configuration.clockRate)
        let t = now &- rtpTimestamp
        if let previous = transit {
            let d = Int32(bitPattern: t &- previous).magnitude
            jitterQ4 = jitterQ4 &+ d &- ((jitterQ4 &+ 8) >> 4)
        }
        transit = t
        return .inOrder
    }

    /// `nanos` in units of `clockRate`, modulo 2³² (no overflow for any input).
    static func timestampUnits(_ nanos: UInt64, clockRate: UInt32) -> UInt32 {
        let rate = UInt64(clockRate)
        let units = nanos / 1_000_000_000 * rate + nanos % 1_000_000_000 * rate / 1_000_000_000
        return UInt32(truncatingIfNeeded: units)
    }

    /// Records an SR from this source that arrived at `arrival` (ns), for LSR and DLSR.
    public mutating func onSenderReport(_ sr: SenderReport, arrival: UInt64) {
        lastSRMiddle32 = sr.ntp.middle32
        lastSRArrival = arrival
        lastSenderReport = (sr.ntp, sr.rtpTimestamp)
    }

    /// The report block for an RR sent at `now` (ns). Starts a new interval for `fractionLost`
    /// (A.3), so call it once per report sent.
    public mutating func makeReport(now: UInt64) -> ReceptionReport {
        let expected = self.expected
        let expectedInterval = expected - expectedPrior
        expectedPrior = expected
        let receivedInterval = packetsReceived - receivedPrior
        receivedPrior = packetsReceived
        let lostInterval = expectedInterval - receivedInterval
        let fraction = expectedInterval == 0 || lostInterval <= 0 ? 0 : min(255, (lostInterval << 8) / expectedInterval)
        let lost = Int32(clamping: cumulativeLost)
        let dlsr = lastSRMiddle32 == 0 ? 0 : NTPTimestamp.short(fromNanos: now >= lastSRArrival ? now - lastSRArrival : 0)
        return ReceptionReport(ssrc: ssrc, fractionLost: UInt8(fraction), cumulativeLost: lost,
                               extendedHighestSequence: UInt32(truncatingIfNeeded: extendedHighestSequence),
                               jitter: jitter, lastSenderReport: lastSRMiddle32, delaySinceLastSenderReport: dlsr)
    }
}

/// Which of the last 1024 extended sequence numbers were seen: 16 words, no allocation.
struct SequenceWindow: Sendable {
    static let size: Int64 = 1024
    private var bits: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                       UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    private var top: Int64?

    private func word(_ i: Int) -> UInt64 {
        withUnsafeBytes(of: bits) { $0.load(fromByteOffset: i * 8, as: UInt64.self) }
    }

    private mutating func setWord(_ i: Int, _ v: UInt64) {
        withUnsafeMutableBytes(of: &bits) { $0.storeBytes(of: v, toByteOffset: i * 8, as: UInt64.self) }
    }

    private mutating func set(_ e: Int64, _ on: Bool) {
        let i = Int(e & (Self.size - 1))
        let w = word(i >> 6), mask = UInt64(1) << UInt64(i & 63)
        setWord(i >> 6, on ? w | mask : w & ~mask)
    }

    /// Whether `e` was inserted, for `e` within 1024 of the newest.
    func contains(_ e: Int64) -> Bool {
        guard let top, e <= top, e > top - Self.size else { return false }
        let i = Int(e & (Self.size - 1))
        return word(i >> 6) & (UInt64(1) << UInt64(i & 63)) != 0
    }

    mutating func insert(_ e: Int64) {
        if let t = top {
            if e > t {
                if e - t >= Self.size {
                    bits = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                } else {
                    var x = t + 1
                    while x <= e { set(x, false); x += 1 }
                }
                top = e
            } else if e <= t - Self.size {
                return
            }
        } else {
            top = e
        }
        set(e, true)
    }
}
