/// Sender report, RFC 3550 §6.4.1 (PT 200).
///
/// ```
///         0                   1                   2                   3
///         0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// header |V=2|P|    RC   |   PT=SR=200   |             length            |
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |                         SSRC of sender                        |
///        +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// sender |              NTP timestamp, most significant word             |
/// info   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |             NTP timestamp, least significant word             |
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |                         RTP timestamp                         |
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |                     sender's packet count                     |
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |                      sender's octet count                     |
///        +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
///        |                 report blocks (RC × 24 bytes)                 |
/// ```
public struct SenderReport: Sendable, Equatable {
    public static let packetType: UInt8 = 200
    public var ssrc: UInt32
    public var ntp: NTPTimestamp
    public var rtpTimestamp: UInt32
    public var packetCount: UInt32
    public var octetCount: UInt32
    /// At most 31 blocks.
    public var reports: [ReceptionReport]

    public init(ssrc: UInt32, ntp: NTPTimestamp, rtpTimestamp: UInt32, packetCount: UInt32, octetCount: UInt32,
                reports: [ReceptionReport] = []) {
        self.ssrc = ssrc
        self.ntp = ntp
        self.rtpTimestamp = rtpTimestamp
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.reports = reports
    }

    /// Bytes ``marshal(into:)`` writes.
    public var marshalSize: Int { 28 + ReceptionReport.size * reports.count }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        write(&w)
        return w.offset
    }

    func write(_ w: inout ByteWriter) {
        precondition(reports.count <= 31, "an SR carries at most 31 report blocks")
        w.header(count: UInt8(reports.count), packetType: Self.packetType, size: marshalSize)
        w.u32(ssrc)
        w.u32(ntp.seconds)
        w.u32(ntp.fraction)
        w.u32(rtpTimestamp)
        w.u32(packetCount)
        w.u32(octetCount)
        for r in reports { r.write(&w) }
    }

    static func parse(count: UInt8, body: UnsafeRawBufferPointer) throws -> SenderReport {
        var r = ByteReader(body, what: "SR")
        try r.need(24 + ReceptionReport.size * Int(count))
        var sr = SenderReport(ssrc: try r.u32(), ntp: NTPTimestamp(seconds: try r.u32(), fraction: try r.u32()),
                              rtpTimestamp: try r.u32(), packetCount: try r.u32(), octetCount: try r.u32())
        for _ in 0..<count { sr.reports.append(try ReceptionReport.parse(&r)) }
        return sr  // profile-specific extensions after the blocks are ignored (§6.4.1)
    }
}

/// Receiver report, RFC 3550 §6.4.2 (PT 201): the SR without the sender info.
///
/// ```
/// header |V=2|P|    RC   |   PT=RR=201   |             length            |
///        |                     SSRC of packet sender                     |
///        |                 report blocks (RC × 24 bytes)                 |
/// ```
public struct ReceiverReport: Sendable, Equatable {
    public static let packetType: UInt8 = 201
    public var ssrc: UInt32
    /// At most 31 blocks.
    public var reports: [ReceptionReport]

    public init(ssrc: UInt32, reports: [ReceptionReport] = []) {
        self.ssrc = ssrc
        self.reports = reports
    }

    public var marshalSize: Int { 8 + ReceptionReport.size * reports.count }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        write(&w)
        return w.offset
    }

    func write(_ w: inout ByteWriter) {
        precondition(reports.count <= 31, "an RR carries at most 31 report blocks")
        w.header(count: UInt8(reports.count), packetType: Self.packetType, size: marshalSize)
        w.u32(ssrc)
        for r in reports { r.write(&w) }
    }

    static func parse(count: UInt8, body: UnsafeRawBufferPointer) throws -> ReceiverReport {
        var r = ByteReader(body, what: "RR")
        try r.need(4 + ReceptionReport.size * Int(count))
        var rr = ReceiverReport(ssrc: try r.u32())
        for _ in 0..<count { rr.reports.append(try ReceptionReport.parse(&r)) }
        return rr
    }
}
