import RTP

/// An NTP timestamp (RFC 5905 §6), as RTCP sender reports carry it.
public struct NTPTimestamp: Sendable, Equatable {
    public var seconds: UInt32
    public var fraction: UInt32

    public init(seconds: UInt32, fraction: UInt32) {
        self.seconds = seconds
        self.fraction = fraction
    }

    /// From wall-clock nanoseconds since the Unix epoch (NTP's epoch is 1900: +2,208,988,800 s).
    public init(unixNanos: UInt64) {
        seconds = UInt32(truncatingIfNeeded: unixNanos / 1_000_000_000 + 2_208_988_800)
        fraction = UInt32(truncatingIfNeeded: (unixNanos % 1_000_000_000) << 32 / 1_000_000_000)
    }

    /// The middle 32 bits, as LSR in reception reports (RFC 3550 §6.4.1).
    public var middle32: UInt32 { seconds << 16 | fraction >> 16 }

    /// A round trip ending now (this is when the answer arrived): `A − last − delay` in 1/65536 s,
    /// `last` the middle 32 bits of the time the question left and `delay` how long the other
    /// end held it (LSR/DLSR, RFC 3550 §6.4.1; LRR/DLRR, RFC 3611 §4.5). 0 if clocks make it
    /// negative; nil when `last` is 0 (no question was seen).
    public func roundTrip(last: UInt32, delay: UInt32) -> UInt32? {
        guard last != 0 else { return nil }
        let rtt = middle32 &- last &- delay
        return Int32(bitPattern: rtt) < 0 ? 0 : rtt
    }
}

/// One RTCP packet of a compound datagram (RFC 3550 §6, RFC 4585 §6, RFC 5104 §4.3.1).
public enum RTCPPacket: Sendable, Equatable {
    /// RFC 3550 §6.4.1 (PT 200).
    case senderReport(SenderReport)
    /// RFC 3550 §6.4.2 (PT 201).
    case receiverReport(ReceiverReport)
    /// RFC 3550 §6.5 (PT 202).
    case sourceDescription(SourceDescription)
    /// RFC 3550 §6.6 (PT 203).
    case goodbye(Goodbye)
    /// Generic NACK, RFC 4585 §6.2.1 (PT 205, FMT 1).
    case nack(GenericNACK)
    /// Picture Loss Indication, RFC 4585 §6.3.1 (PT 206, FMT 1).
    case pli(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// Full Intra Request, RFC 5104 §4.3.1 (PT 206, FMT 4).
    case fir(FullIntraRequest)
    /// Extended Report, RFC 3611 (PT 207): RRTR and DLRR blocks (others skipped).
    case extendedReport(ExtendedReport)
    /// Transport-wide congestion control feedback (PT 205, FMT 15).
    case transportFeedback(TransportFeedback)
    /// Receiver Estimated Maximum Bitrate (PT 206, FMT 15, "REMB").
    case remb(REMB)
    /// Any other packet type or feedback format (APP, TMMBR, …), skipped.
    case unknown(packetType: UInt8)

    /// Splits a compound packet (RFC 3550 §6.1) into its packets and parses each.
    ///
    /// Common header of each (RFC 3550 §6.4.1):
    /// ```
    ///  0                   1                   2                   3
    /// |V=2|P|  RC/FMT |      PT       |             length            |
    /// ```
    /// `length` is in 32-bit words minus one; with P set, the last octet counts the padding
    /// octets (RFC 3550 §6.4.1), which are removed before parsing.
    /// - Throws: `RTPParseError` naming the packet when any part of the datagram is malformed.
    public static func parseCompound(_ bytes: UnsafeRawBufferPointer) throws -> [RTCPPacket] {
        var out: [RTCPPacket] = []
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= 4 else { throw RTPParseError("RTCP header truncated at byte \(offset)") }
            guard bytes[offset] >> 6 == 2 else { throw RTPParseError("RTCP version \(bytes[offset] >> 6) at byte \(offset), expected 2") }
            let padded = bytes[offset] & 0x20 != 0
            let count = bytes[offset] & 0x1F
            let pt = bytes[offset + 1]
            let length = (((Int(bytes[offset + 2]) << 8) | Int(bytes[offset + 3])) + 1) * 4
            guard offset + length <= bytes.count else {
                throw RTPParseError("RTCP packet type \(pt) of \(length) bytes runs past the \(bytes.count)-byte datagram")
            }
            var end = offset + length
            if padded {
                let pad = Int(bytes[end - 1])
                guard pad >= 1, pad <= length - 4 else { throw RTPParseError("RTCP packet type \(pt) has invalid padding length \(pad)") }
                end -= pad
            }
            let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<end])
            out.append(try parse(packetType: pt, count: count, body: body))
            offset += length
        }
        return out
    }

    static func parse(packetType pt: UInt8, count: UInt8, body: UnsafeRawBufferPointer) throws -> RTCPPacket {
        switch (pt, count) {
        case (SenderReport.packetType, _): return .senderReport(try SenderReport.parse(count: count, body: body))
        case (ReceiverReport.packetType, _): return .receiverReport(try ReceiverReport.parse(count: count, body: body))
        case (SourceDescription.packetType, _): return .sourceDescription(try SourceDescription.parse(count: count, body: body))
        case (Goodbye.packetType, _): return .goodbye(try Goodbye.parse(count: count, body: body))
        case (GenericNACK.packetType, GenericNACK.format): return .nack(try GenericNACK.parse(body: body))
        case (TransportFeedback.packetType, TransportFeedback.format): return .transportFeedback(try TransportFeedback.parse(body: body))
        case (206, 1):
            var r = ByteReader(body, what: "PLI")
            return .pli(senderSSRC: try r.u32(), mediaSSRC: try r.u32())
        case (FullIntraRequest.packetType, FullIntraRequest.format): return .fir(try FullIntraRequest.parse(body: body))
        case (REMB.packetType, REMB.format): return try REMB.parse(body: body).map { .remb($0) } ?? .unknown(packetType: pt)
        case (ExtendedReport.packetType, _): return .extendedReport(try ExtendedReport.parse(body: body))
        default: return .unknown(packetType: pt)
        }
    }

    /// Writes this packet into `buffer`. Returns the bytes written; 0 for `.unknown`.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        switch self {
        case .senderReport(let p): return p.marshal(into: buffer)
        case .receiverReport(let p): return p.marshal(into: buffer)
        case .sourceDescription(let p): return p.marshal(into: buffer)
        case .goodbye(let p): return p.marshal(into: buffer)
        case .nack(let p): return p.marshal(into: buffer)
        case .pli(let s, let m): return Self.buildPLI(senderSSRC: s, mediaSSRC: m, into: buffer)
        case .fir(let p): return p.marshal(into: buffer)
        case .extendedReport(let p): return p.marshal(into: buffer)
        case .transportFeedback(let p): return p.marshal(into: buffer)
        case .remb(let p): return p.marshal(into: buffer)
        case .unknown: return 0
        }
    }

    // MARK: - Builders: compound packets into a caller's buffer, nothing allocated

    /// Writes an SR (RFC 3550 §6.4.1, with up to 31 report blocks) + SDES CNAME (§6.5)
    /// [+ BYE (§6.6)] compound packet. Returns the bytes written.
    ///
    /// ```
    /// SR:   |V=2|P|RC|PT=200|length| SSRC | NTP sec | NTP frac | RTP ts | packets | octets | blocks |
    /// SDES: |V=2|P|SC=1|PT=202|length  | SSRC | CNAME=1 | len | text... | 0 (end) | pad to 32 bits |
    /// BYE:  |V=2|P|SC=1|PT=203|length=1| SSRC |
    /// ```
    /// With `dlrr`, an XR with a DLRR block (RFC 3611 §4.5) answers receivers' RRTRs, before
    /// the BYE. The buffer needs 28 + 24 × blocks + 264 (the longest SDES) + 8 bytes, plus
    /// 12 + 12 × DLRR items.
    public static func buildSenderReport(ssrc: UInt32, ntp: NTPTimestamp, rtpTimestamp: UInt32, packetCount: UInt32,
                                         octetCount: UInt32, reports: [ReceptionReport] = [], cname: String, bye: Bool,
                                         dlrr: [ExtendedReport.DLRRItem] = [],
                                         into b: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(b)
        SenderReport(ssrc: ssrc, ntp: ntp, rtpTimestamp: rtpTimestamp, packetCount: packetCount, octetCount: octetCount,
                     reports: reports).write(&w)
        SourceDescription.writeCNAME(ssrc: ssrc, cname: cname, &w)
        if !dlrr.isEmpty { ExtendedReport(ssrc: ssrc, dlrr: dlrr).write(&w) }
        if bye { writeBye(ssrc: ssrc, &w) }
        return w.offset
    }

    /// Writes an RR (RFC 3550 §6.4.2, up to 31 report blocks) + SDES CNAME (§6.5) [+ BYE]
    /// compound packet, as a receiver sends it. Returns the bytes written.
    ///
    /// With `referenceTime` and/or `dlrr`, an XR (RFC 3611) follows the SDES: an RRTR block
    /// (so the media sender answers with a DLRR and this receive-only end learns its RTT) and
    /// a DLRR block (a relay answering its viewers' RRTRs).
    ///
    /// The buffer needs 8 + 24 × blocks + 264 (the longest SDES) + 8 bytes, plus 20 for an
    /// RRTR and 12 + 12 × DLRR items.
    public static func buildReceiverReport(ssrc: UInt32, reports: [ReceptionReport], cname: String, bye: Bool = false,
                                           referenceTime: NTPTimestamp? = nil, dlrr: [ExtendedReport.DLRRItem] = [],
                                           into b: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(b)
        ReceiverReport(ssrc: ssrc, reports: reports).write(&w)
        SourceDescription.writeCNAME(ssrc: ssrc, cname: cname, &w)
        if referenceTime != nil || !dlrr.isEmpty { ExtendedReport(ssrc: ssrc, referenceTime: referenceTime, dlrr: dlrr).write(&w) }
        if bye { writeBye(ssrc: ssrc, &w) }
        return w.offset
    }

    private static func writeBye(ssrc: UInt32, _ w: inout ByteWriter) {
        w.header(count: 1, packetType: Goodbye.packetType, size: 8)
        w.u32(ssrc)
    }

    /// Writes a generic NACK (RFC 4585 §6.2.1) for `sequenceNumbers`, packed into PID + BLP
    /// pairs: a number within 16 after the current PID sets a BLP bit, any other starts a new
    /// pair (so ascending input packs best; duplicates cost nothing).
    /// - Returns: the bytes written (12 + 4 × pairs), 0 when there is nothing to request.
    ///   Pairs that do not fit in `b` are left out; the caller asks for them next time.
    public static func buildNACK(senderSSRC: UInt32, mediaSSRC: UInt32, sequenceNumbers: some Sequence<UInt16>,
                                 into b: UnsafeMutableRawBufferPointer) -> Int {
        guard b.count >= 16 else { return 0 }
        var w = ByteWriter(b, offset: 12)
        var current: GenericNACK.Pair?
        var full = false
        func flush(_ w: inout ByteWriter) {
            guard let pair = current else { return }
            if w.remaining >= 4 { w.u16(pair.packetID); w.u16(pair.lostBitmask) } else { full = true }
        }
        for seq in sequenceNumbers {
            if var pair = current {
                let d = seq &- pair.packetID
                if d == 0 { continue }
                if d <= 16 {
                    pair.lostBitmask |= 1 << (d - 1)
                    current = pair
                    continue
                }
                flush(&w)
                if full { break }
            }
            current = GenericNACK.Pair(packetID: seq, lostBitmask: 0)
        }
        if !full { flush(&w) }
        let size = w.offset
        guard size > 12 else { return 0 }
        var h = ByteWriter(b)
        h.header(count: GenericNACK.format, packetType: GenericNACK.packetType, size: size)
        h.u32(senderSSRC)
        h.u32(mediaSSRC)
        return size
    }

    /// Writes a PLI (RFC 4585 §6.3.1): common header with FMT 1, PT 206, the two SSRCs and no
    /// FCI. Returns 12.
    public static func buildPLI(senderSSRC: UInt32, mediaSSRC: UInt32, into b: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(b)
        w.header(count: 1, packetType: 206, size: 12)
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        return w.offset
    }

    /// Writes a FIR (RFC 5104 §4.3.1) asking `mediaSSRC` for a keyframe; `sequenceNumber`
    /// increases by one per new request (a repeat of the same request keeps it). Returns 20.
    public static func buildFIR(senderSSRC: UInt32, mediaSSRC: UInt32, sequenceNumber: UInt8,
                                into b: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(b)
        w.header(count: FullIntraRequest.format, packetType: FullIntraRequest.packetType, size: 20)
        w.u32(senderSSRC)
        w.u32(0)
        w.u32(mediaSSRC)
        w.u8(sequenceNumber)
        w.zeros(3)
        return w.offset
    }
}
