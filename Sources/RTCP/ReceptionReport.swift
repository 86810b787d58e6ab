/// One report block of an SR or RR, RFC 3550 §6.4.1:
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |                 SSRC_1 (SSRC of first source)                 |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// | fraction lost |       cumulative number of packets lost       |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |           extended highest sequence number received           |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                      interarrival jitter                      |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                         last SR (LSR)                         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                   delay since last SR (DLSR)                  |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// ```
public struct ReceptionReport: Sendable, Equatable {
    public static let size = 24
    /// Cumulative loss is a 24-bit signed field: it saturates at these bounds (RFC 3550 §6.4.1).
    public static let cumulativeLostRange: ClosedRange<Int32> = -0x80_0000...0x7F_FFFF

    /// The source this block reports on.
    public var ssrc: UInt32
    /// Packets lost since the previous report, as a fixed-point fraction of 256.
    public var fractionLost: UInt8
    /// Packets expected minus packets received since the start (negative with duplicates).
    public var cumulativeLost: Int32
    /// Highest sequence number received, with the count of wrap-arounds in the upper 16 bits.
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter in RTP timestamp units (RFC 3550 §6.4.1, A.8).
    public var jitter: UInt32
    /// Middle 32 bits of the NTP timestamp of the last SR received from this source, or 0.
    public var lastSenderReport: UInt32
    /// Delay from receiving that SR to sending this block, in units of 1/65536 s.
    public var delaySinceLastSenderReport: UInt32

    public init(ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, extendedHighestSequence: UInt32 = 0,
                jitter: UInt32 = 0, lastSenderReport: UInt32 = 0, delaySinceLastSenderReport: UInt32 = 0) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = min(max(cumulativeLost, Self.cumulativeLostRange.lowerBound), Self.cumulativeLostRange.upperBound)
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    /// Round-trip time seen by the sender that receives this block (RFC 3550 §6.4.1):
    /// `A − LSR − DLSR`, with A the middle 32 bits of the NTP time the block arrived.
    /// - Returns: the RTT in units of 1/65536 s (0 if clocks make it negative), or nil when the
    ///   receiver has not had an SR yet (LSR = 0).
    public func roundTripTime(arrival: NTPTimestamp) -> UInt32? {
        arrival.roundTrip(last: lastSenderReport, delay: delaySinceLastSenderReport)
    }

    /// ``roundTripTime(arrival:)`` in nanoseconds.
    public func roundTripNanos(arrival: NTPTimestamp) -> UInt64? {
        roundTripTime(arrival: arrival).map(NTPTimestamp.nanos(fromShort:))
    }

    static func parse(_ r: inout ByteReader) throws -> ReceptionReport {
        let ssrc = try r.u32()
        let fraction = try r.u8()
        let lost24 = try r.u24()
        let lost = Int32(bitPattern: lost24 << 8) >> 8  // sign-extend 24 bits
        return ReceptionReport(ssrc: ssrc, fractionLost: fraction, cumulativeLost: lost,
                               extendedHighestSequence: try r.u32(), jitter: try r.u32(),
                               lastSenderReport: try r.u32(), delaySinceLastSenderReport: try r.u32())
    }

    func write(_ w: inout ByteWriter) {
        w.u32(ssrc)
        w.u8(fractionLost)
        let clamped = min(max(cumulativeLost, Self.cumulativeLostRange.lowerBound), Self.cumulativeLostRange.upperBound)
        w.u24(UInt32(bitPattern: clamped) & 0xFF_FFFF)
        w.u32(extendedHighestSequence)
        w.u32(jitter)
        w.u32(lastSenderReport)
        w.u32(delaySinceLastSenderReport)
    }
}

extension NTPTimestamp {
    /// Nanoseconds from the 32-bit "short" NTP format (16.16 fixed-point seconds) used by LSR,
    /// DLSR and RTT: 10⁹/2¹⁶ = 1953125/2⁷ exactly.
    public static func nanos(fromShort v: UInt32) -> UInt64 { (UInt64(v) * 1_953_125) >> 7 }

    /// The 32-bit "short" NTP format (1/65536 s) from nanoseconds, saturating at 65536 s.
    public static func short(fromNanos ns: UInt64) -> UInt32 {
        let capped = min(ns, 65_535 * 1_000_000_000)
        return UInt32((capped << 7) / 1_953_125)
    }
}
