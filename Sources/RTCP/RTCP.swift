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
}

/// RTCP packets this sender understands (RFC 3550 §6, RFC 4585 §6, RFC 5104 §4.3.1).
public enum RTCPPacket: Sendable, Equatable {
    case senderReport(ssrc: UInt32)
    case receiverReport(ssrc: UInt32)
    case sourceDescription
    case goodbye
    /// Generic NACK, RFC 4585 §6.2.1 (PT 205, FMT 1).
    case nack(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// Picture Loss Indication, RFC 4585 §6.3.1 (PT 206, FMT 1).
    case pli(senderSSRC: UInt32, mediaSSRC: UInt32)
    /// Full Intra Request, RFC 5104 §4.3.1 (PT 206, FMT 4).
    case fir(senderSSRC: UInt32, mediaSSRC: UInt32)
    case unknown(packetType: UInt8)

    /// Splits a compound packet (RFC 3550 §6.1) into its packets.
    ///
    /// Common header of each (RFC 3550 §6.4.1):
    /// ```
    ///  0                   1                   2                   3
    /// |V=2|P|  RC/FMT |      PT       |             length            |
    /// ```
    /// `length` is in 32-bit words minus one.
    public static func parseCompound(_ bytes: UnsafeRawBufferPointer) throws -> [RTCPPacket] {
        var out: [RTCPPacket] = []
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= 4 else { throw RTPParseError("RTCP header truncated at byte \(offset)") }
            guard bytes[offset] >> 6 == 2 else { throw RTPParseError("RTCP version \(bytes[offset] >> 6) at byte \(offset), expected 2") }
            let fmt = bytes[offset] & 0x1F
            let pt = bytes[offset + 1]
            let length = (((Int(bytes[offset + 2]) << 8) | Int(bytes[offset + 3])) + 1) * 4
            guard offset + length <= bytes.count else {
                throw RTPParseError("RTCP packet type \(pt) of \(length) bytes runs past the \(bytes.count)-byte datagram")
            }
            func word(_ i: Int) -> UInt32? {
                let o = offset + 4 + 4 * i
                guard o + 4 <= offset + length else { return nil }
                return UInt32(bytes[o]) << 24 | UInt32(bytes[o + 1]) << 16 | UInt32(bytes[o + 2]) << 8 | UInt32(bytes[o + 3])
            }
            switch (pt, fmt) {
            case (200, _): out.append(.senderReport(ssrc: word(0) ?? 0))
            case (201, _): out.append(.receiverReport(ssrc: word(0) ?? 0))
            case (202, _): out.append(.sourceDescription)
            case (203, _): out.append(.goodbye)
            case (205, 1):
                guard let s = word(0), let m = word(1) else { throw RTPParseError("RTCP NACK too short") }
                out.append(.nack(senderSSRC: s, mediaSSRC: m))
            case (206, 1):
                guard let s = word(0), let m = word(1) else { throw RTPParseError("RTCP PLI too short") }
                out.append(.pli(senderSSRC: s, mediaSSRC: m))
            case (206, 4):
                guard let s = word(0), let m = word(2) else { throw RTPParseError("RTCP FIR too short") }
                out.append(.fir(senderSSRC: s, mediaSSRC: m))
            default: out.append(.unknown(packetType: pt))
            }
            offset += length
        }
        return out
    }

    /// Writes an SR (RFC 3550 §6.4.1, no report blocks) + SDES CNAME (§6.5) [+ BYE (§6.6)]
    /// compound packet. Returns the bytes written.
    ///
    /// ```
    /// SR:   |V=2|P|RC=0|PT=200|length=6| SSRC | NTP sec | NTP frac | RTP ts | packets | octets |
    /// SDES: |V=2|P|SC=1|PT=202|length  | SSRC | CNAME=1 | len | text... | 0 (end) | pad to 32 bits |
    /// BYE:  |V=2|P|SC=1|PT=203|length=1| SSRC |
    /// ```
    public static func buildSenderReport(ssrc: UInt32, ntp: NTPTimestamp, rtpTimestamp: UInt32, packetCount: UInt32,
                                         octetCount: UInt32, cname: String, bye: Bool,
                                         into b: UnsafeMutableRawBufferPointer) -> Int {
        var o = 0
        func u8(_ v: UInt8) { b[o] = v; o += 1 }
        func u16(_ v: UInt16) { u8(UInt8(v >> 8)); u8(UInt8(v & 0xFF)) }
        func u32(_ v: UInt32) { u16(UInt16(v >> 16)); u16(UInt16(v & 0xFFFF)) }
        // SR
        u8(0x80); u8(200); u16(6)
        u32(ssrc); u32(ntp.seconds); u32(ntp.fraction); u32(rtpTimestamp); u32(packetCount); u32(octetCount)
        // SDES with one chunk: SSRC, CNAME item, end item, padding.
        // An SDES item holds at most 255 octets of UTF-8 (§6.5): cut before a character, not inside one.
        var name = Array(cname.utf8)
        if name.count > 255 {
            var end = 255
            while end > 0, name[end] & 0xC0 == 0x80 { end -= 1 }  // name[end] is a continuation byte
            name.removeSubrange(end...)
        }
        let chunk = 4 + 2 + name.count + 1
        let padded = (chunk + 3) & ~3
        u8(0x81); u8(202); u16(UInt16(padded / 4))
        u32(ssrc); u8(1); u8(UInt8(name.count))
        for c in name { u8(c) }
        for _ in 0..<(padded - chunk + 1) { u8(0) }
        if bye {
            u8(0x81); u8(203); u16(1)
            u32(ssrc)
        }
        return o
    }
}
