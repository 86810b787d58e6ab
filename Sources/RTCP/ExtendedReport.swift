import RTP

/// RTCP Extended Report, RFC 3611 (PT 207), with the two blocks a receive-only endpoint needs
/// to measure its round-trip time (§4.4, §4.5): it sends a Receiver Reference Time Report
/// (RRTR, its NTP time), the media sender answers with a DLRR sub-block (the middle 32 bits of
/// that time and how long it held it), and RTT = arrival − LRR − DLRR, as for an SR/RR pair.
/// libwebrtc's receive-only streams do the same. Other block types are skipped.
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// |V=2|P|reserved |   PT=XR=207   |             length            |
/// |                              SSRC                             |
/// :                         report blocks                         :
///
/// RRTR: |     BT=4      |   reserved    |       block length = 2        |
///       |              NTP timestamp, most significant word             |
///       |             NTP timestamp, least significant word             |
/// DLRR: |     BT=5      |   reserved    |         block length          |
///       |                 SSRC_1 (SSRC of first receiver)               | sub-
///       |                         last RR (LRR)                         | block
///       |                   delay since last RR (DLRR)                  | 1
///       :                              ...                              : (3 words each)
/// ```
/// Block length is in 32-bit words after the block's own header.
public struct ExtendedReport: Sendable, Equatable {
    public static let packetType: UInt8 = 207
    static let rrtrType: UInt8 = 4
    static let dlrrType: UInt8 = 5

    /// One DLRR sub-block: the answer to receiver `ssrc`'s RRTR.
    public struct DLRRItem: Sendable, Equatable {
        public var ssrc: UInt32
        /// The middle 32 bits of the RRTR's NTP timestamp.
        public var lastReceiverReport: UInt32
        /// How long after it arrived this was sent, in 1/65536 s.
        public var delaySinceLastReceiverReport: UInt32

        public init(ssrc: UInt32, lastReceiverReport: UInt32, delaySinceLastReceiverReport: UInt32) {
            self.ssrc = ssrc
            self.lastReceiverReport = lastReceiverReport
            self.delaySinceLastReceiverReport = delaySinceLastReceiverReport
        }

        /// `A − LRR − DLRR` in nanoseconds, A the NTP time it arrived (0 if clocks make it
        /// negative); nil when LRR is 0 (no RRTR was seen).
        public func roundTripNanos(arrival: NTPTimestamp) -> UInt64? {
            arrival.roundTrip(last: lastReceiverReport, delay: delaySinceLastReceiverReport).map(NTPTimestamp.nanos(fromShort:))
        }
    }

    public var ssrc: UInt32
    /// The RRTR block's time, if the report has one.
    public var referenceTime: NTPTimestamp?
    /// The DLRR block's sub-blocks (empty without one).
    public var dlrr: [DLRRItem]

    public init(ssrc: UInt32, referenceTime: NTPTimestamp? = nil, dlrr: [DLRRItem] = []) {
        self.ssrc = ssrc
        self.referenceTime = referenceTime
        self.dlrr = dlrr
    }

    static func parse(body: UnsafeRawBufferPointer) throws -> ExtendedReport {
        var r = ByteReader(body, what: "XR")
        var report = ExtendedReport(ssrc: try r.u32())
        while r.remaining > 0 {
            let type = try r.u8()
            try r.skip(1)
            let words = Int(try r.u16())
            try r.need(words * 4)
            switch type {
            case rrtrType where words == 2:
                report.referenceTime = NTPTimestamp(seconds: try r.u32(), fraction: try r.u32())
            case dlrrType where words % 3 == 0:
                for _ in 0..<(words / 3) {
                    report.dlrr.append(DLRRItem(ssrc: try r.u32(), lastReceiverReport: try r.u32(), delaySinceLastReceiverReport: try r.u32()))
                }
            case rrtrType, dlrrType:
                throw RTPParseError("RTCP XR block type \(type) has a length of \(words) words (RRTR: 2, DLRR: a multiple of 3)")
            default:
                try r.skip(words * 4)
            }
        }
        return report
    }

    /// The packet's size in bytes.
    var size: Int { 8 + (referenceTime == nil ? 0 : 12) + (dlrr.isEmpty ? 0 : 4 + 12 * dlrr.count) }

    func write(_ w: inout ByteWriter) {
        w.header(count: 0, packetType: Self.packetType, size: size)
        w.u32(ssrc)
        if let t = referenceTime {
            w.u8(Self.rrtrType)
            w.u8(0)
            w.u16(2)
            w.u32(t.seconds)
            w.u32(t.fraction)
        }
        if !dlrr.isEmpty {
            w.u8(Self.dlrrType)
            w.u8(0)
            w.u16(UInt16(3 * dlrr.count))
            for item in dlrr {
                w.u32(item.ssrc)
                w.u32(item.lastReceiverReport)
                w.u32(item.delaySinceLastReceiverReport)
            }
        }
    }

    /// Writes this packet into `buffer` (it needs ``size`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        write(&w)
        return w.offset
    }
}
