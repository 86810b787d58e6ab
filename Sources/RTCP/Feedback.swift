/// Generic NACK, RFC 4585 §6.2.1 (PT 205 RTPFB, FMT 1).
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P| FMT=1   |   PT=205      |          length               |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                  SSRC of packet sender                        |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                  SSRC of media source                         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |            PID                |             BLP               |  × N (FCI)
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
/// PID is a lost packet's sequence number; bit i of BLP (least significant = 0) reports
/// PID + i + 1 lost as well.
public struct GenericNACK: Sendable, Equatable {
    public static let packetType: UInt8 = 205
    public static let format: UInt8 = 1

    public struct Pair: Sendable, Equatable {
        public var packetID: UInt16
        public var lostBitmask: UInt16
        public init(packetID: UInt16, lostBitmask: UInt16) {
            self.packetID = packetID
            self.lostBitmask = lostBitmask
        }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var pairs: [Pair]

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, pairs: [Pair]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.pairs = pairs
    }

    /// The sequence numbers reported lost, in the order the FCI lists them.
    public var sequenceNumbers: [UInt16] {
        var out: [UInt16] = []
        forEachSequenceNumber { out.append($0) }
        return out
    }

    /// Calls `body` with each sequence number reported lost, allocating nothing.
    public func forEachSequenceNumber(_ body: (UInt16) -> Void) {
        for pair in pairs {
            body(pair.packetID)
            var mask = pair.lostBitmask
            while mask != 0 {
                let bit = UInt16(mask.trailingZeroBitCount)
                body(pair.packetID &+ bit &+ 1)
                mask &= mask - 1
            }
        }
    }

    public var marshalSize: Int { 12 + 4 * pairs.count }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        w.header(count: Self.format, packetType: Self.packetType, size: marshalSize)
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        for p in pairs { w.u16(p.packetID); w.u16(p.lostBitmask) }
        return w.offset
    }

    static func parse(body: UnsafeRawBufferPointer) throws -> GenericNACK {
        var r = ByteReader(body, what: "NACK")
        var nack = GenericNACK(senderSSRC: try r.u32(), mediaSSRC: try r.u32(), pairs: [])
        while r.remaining >= 4 { nack.pairs.append(Pair(packetID: try r.u16(), lostBitmask: try r.u16())) }
        return nack
    }
}

/// Full Intra Request, RFC 5104 §4.3.1 (PT 206 PSFB, FMT 4). The media source SSRC in the
/// common part is unused (0); each FCI entry names the source asked for a keyframe.
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P| FMT=4   |   PT=206      |          length               |
/// |                  SSRC of packet sender                        |
/// |                  SSRC of media source (0)                     |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                              SSRC                             |  × N (FCI)
/// | Seq nr.       |    Reserved                                   |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
/// A sender answers each new Seq nr. once; a repeated request keeps the number (§4.3.1.1).
public struct FullIntraRequest: Sendable, Equatable {
    public static let packetType: UInt8 = 206
    public static let format: UInt8 = 4

    public struct Entry: Sendable, Equatable {
        public var ssrc: UInt32
        public var sequenceNumber: UInt8
        public init(ssrc: UInt32, sequenceNumber: UInt8) {
            self.ssrc = ssrc
            self.sequenceNumber = sequenceNumber
        }
    }

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    public var entries: [Entry]

    public init(senderSSRC: UInt32, mediaSSRC: UInt32 = 0, entries: [Entry]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.entries = entries
    }

    public var marshalSize: Int { 12 + 8 * entries.count }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        w.header(count: Self.format, packetType: Self.packetType, size: marshalSize)
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        for e in entries { w.u32(e.ssrc); w.u8(e.sequenceNumber); w.zeros(3) }
        return w.offset
    }

    static func parse(body: UnsafeRawBufferPointer) throws -> FullIntraRequest {
        var r = ByteReader(body, what: "FIR")
        var fir = FullIntraRequest(senderSSRC: try r.u32(), mediaSSRC: try r.u32(), entries: [])
        try r.need(8)  // at least one FCI entry
        while r.remaining >= 8 {
            let ssrc = try r.u32()
            fir.entries.append(Entry(ssrc: ssrc, sequenceNumber: try r.u8()))
            try r.skip(3)
        }
        return fir
    }
}

/// Receiver Estimated Maximum Bitrate (draft-alvestrand-rmcat-remb-03 §2.2): an application
/// layer feedback message (PT 206, FMT 15) capping what the named streams may send in all.
///
/// ```
/// |V=2|P| FMT=15  |   PT=206      |             length            |
/// |                  SSRC of packet sender                        |
/// |                  SSRC of media source (unused: 0)             |
/// |  Unique identifier 'R' 'E' 'M' 'B'                            |
/// |  Num SSRC     | BR Exp    |  BR Mantissa                      |
/// |   SSRC feedback (Num SSRC times)                              |
/// ```
/// The bit rate is mantissa × 2^exp bit/s (18 + 6 bits).
public struct REMB: Sendable, Equatable {
    public static let packetType: UInt8 = 206
    public static let format: UInt8 = 15

    public var senderSSRC: UInt32
    /// The cap, bit/s (as encoded: the mantissa's 18 bits lose precision above 262 kbit/s).
    public var bitsPerSecond: UInt64
    public var ssrcs: [UInt32]

    public init(senderSSRC: UInt32, bitsPerSecond: UInt64, ssrcs: [UInt32]) {
        self.senderSSRC = senderSSRC
        self.bitsPerSecond = bitsPerSecond
        self.ssrcs = ssrcs
    }

    /// The encoding of `bitsPerSecond`: the smallest exponent whose mantissa fits 18 bits
    /// (rounded down, so the cap never grows).
    static func encode(_ bps: UInt64) -> (exponent: UInt8, mantissa: UInt32) {
        var exponent: UInt8 = 0
        while exponent < 63, bps >> UInt64(exponent) > 0x3FFFF { exponent += 1 }
        return (exponent, UInt32(min(bps >> UInt64(exponent), 0x3FFFF)))
    }

    public var marshalSize: Int { 20 + 4 * min(ssrcs.count, 255) }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        w.header(count: Self.format, packetType: Self.packetType, size: marshalSize)
        w.u32(senderSSRC)
        w.u32(0)
        for c in "REMB".utf8 { w.u8(c) }
        let (exponent, mantissa) = Self.encode(bitsPerSecond)
        w.u8(UInt8(min(ssrcs.count, 255)))
        w.u24(UInt32(exponent) << 18 | mantissa)
        for s in ssrcs.prefix(255) { w.u32(s) }
        return w.offset
    }

    /// Parses the body after the common header. Nil when the application message is not a
    /// REMB (another PT 206 FMT 15 message).
    /// - Throws: `RTPParseError` when it says REMB and is cut short.
    static func parse(body: UnsafeRawBufferPointer) throws -> REMB? {
        var r = ByteReader(body, what: "REMB")
        let sender = try r.u32()
        _ = try r.u32()
        guard body.count >= 12, body[8] == 0x52, body[9] == 0x45, body[10] == 0x4D, body[11] == 0x42 else { return nil }
        try r.skip(4)
        let count = Int(try r.u8())
        let packed = try r.u24()
        let exponent = UInt64(packed >> 18), mantissa = UInt64(packed & 0x3FFFF)
        // Past 2^46 the value means nothing (and would overflow): the largest encodable.
        let bps = exponent > 46 ? UInt64(0x3FFFF) << 46 : mantissa << exponent
        var ssrcs: [UInt32] = []
        ssrcs.reserveCapacity(count)
        for _ in 0..<count { ssrcs.append(try r.u32()) }
        return REMB(senderSSRC: sender, bitsPerSecond: bps, ssrcs: ssrcs)
    }
}
