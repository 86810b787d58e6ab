import RTP

/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §3.1; RTPFB, PT 205, FMT 15): which packets of a transport arrived, and when, so the sender
/// can estimate the path (``CongestionController``). Packets are named by the transport-wide
/// sequence number each carried in its header extension (``TransportWideSequence``).
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// |V=2|P|  FMT=15 |    PT=205     |           length              |
/// |                     SSRC of packet sender                     |
/// |                      SSRC of media source                     |
/// |      base sequence number     |      packet status count      |
/// |                 reference time                | fb pkt. count |
/// |          packet chunk         |         packet chunk          |  …
/// |  recv delta   |  recv delta   | …                  (zero padding)
/// ```
/// A chunk is a run (`0|S S|13-bit length`) or a vector (`1|0|14 one-bit symbols` or
/// `1|1|7 two-bit symbols`). Symbols: 0 not received, 1 received with a delta of one octet
/// (0–63.75 ms), 2 received with a signed delta of two octets. Deltas are in 250 µs, each from
/// the previous received packet, the first from the reference time (a signed 24-bit count of
/// 64 ms).
public struct TransportFeedback: Sendable, Equatable {
    public static let packetType: UInt8 = 205
    public static let format: UInt8 = 15
    /// The unit of receive deltas (µs).
    public static let tickMicros: Int64 = 250
    /// The unit of the reference time (µs): 256 ticks.
    public static let referenceMicros: Int64 = 64_000
    /// The most packets one feedback may describe when parsed: more is refused (a two-octet run
    /// chunk could otherwise claim 65535 packets).
    public static let maxParsedPackets = 16_384

    public var senderSSRC: UInt32
    public var mediaSSRC: UInt32
    /// The transport-wide sequence number of the first packet described.
    public var baseSequence: UInt16
    /// The reference time, in 64 ms (signed 24 bits).
    public var referenceTime: Int32
    /// Counts feedback packets (wrapping), so the sender can tell a lost one.
    public var feedbackCount: UInt8
    /// For each packet from `baseSequence` on: when it arrived, in 250 µs ticks after the
    /// reference time; nil: it did not arrive.
    public var arrivals: [Int64?]

    public init(senderSSRC: UInt32, mediaSSRC: UInt32, baseSequence: UInt16, referenceTime: Int32, feedbackCount: UInt8,
                arrivals: [Int64?]) {
        self.senderSSRC = senderSSRC
        self.mediaSSRC = mediaSSRC
        self.baseSequence = baseSequence
        self.referenceTime = referenceTime
        self.feedbackCount = feedbackCount
        self.arrivals = arrivals
    }

    /// A packet's arrival in µs on the receiver's clock (reference time + its ticks).
    public func arrivalMicros(ticks: Int64) -> Int64 { Int64(referenceTime) * Self.referenceMicros + ticks * Self.tickMicros }

    /// Whether `delta` ticks can follow the previous received packet in one feedback.
    public static func fits(delta: Int64) -> Bool { delta >= Int64(Int16.min) && delta <= Int64(Int16.max) }

    private static func symbol(delta: Int64?) -> UInt16 {
        guard let delta else { return 0 }
        return delta >= 0 && delta <= 255 ? 1 : 2
    }

    /// Calls `body` with each packet's symbol and delta (ticks from the previous received one).
    private func forEachDelta(_ body: (UInt16, Int64) -> Void) {
        var previous: Int64 = 0
        for arrival in arrivals {
            guard let arrival else { body(0, 0); continue }
            let delta = arrival - previous
            previous = arrival
            body(Self.symbol(delta: delta), delta)
        }
    }

    /// The chunks, streamed as libwebrtc's `LastChunk` does: symbols gather while they are
    /// all the same (a run, up to 8191) or fewer than 7 (a vector of two-bit symbols; the last
    /// one is padded with "not received", which the count leaves out). Allocates nothing.
    private func forEachChunk(_ body: (UInt16) -> Void) {
        var packed: UInt16 = 0  // the first 7 pending symbols, two bits each
        var count = 0
        var allSame = true
        var first: UInt16 = 0
        func flushVector() {
            body(0xC000 | packed)
            packed = 0; count = 0; allSame = true
        }
        func flushRun() {
            body(first << 13 | UInt16(count))
            packed = 0; count = 0; allSame = true
        }
        forEachDelta { symbol, _ in
            if count > 0 {
                if allSame && symbol == first {
                    if count == 0x1FFF { flushRun() }
                } else if allSame && count >= 7 {
                    flushRun()
                } else if count == 7 {
                    flushVector()
                }
            }
            if count == 0 { first = symbol }
            if symbol != first { allSame = false }
            if count < 7 { packed |= symbol << UInt16(12 - 2 * count) }
            count += 1
        }
        if count > 0 { if allSame { flushRun() } else { flushVector() } }
    }

    /// The packet's size in bytes, padding included (a multiple of 4).
    public var marshalSize: Int {
        var size = 20
        forEachChunk { _ in size += 2 }
        forEachDelta { symbol, _ in size += Int(symbol) }
        return (size + 3) & ~3
    }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes); the padding is zeros
    /// with its count in the last octet and the P bit set, as RFC 3550 §6.4.1 has it. Every
    /// delta must fit two octets (``fits(delta:)``). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(arrivals.count <= 0xFFFF, "a transport feedback describes at most 65535 packets")
        let size = marshalSize
        var w = ByteWriter(buffer)
        w.header(count: Self.format, packetType: Self.packetType, size: size)
        w.u32(senderSSRC)
        w.u32(mediaSSRC)
        w.u16(baseSequence)
        w.u16(UInt16(arrivals.count))
        w.u24(UInt32(bitPattern: referenceTime) & 0xFF_FFFF)
        w.u8(feedbackCount)
        forEachChunk { w.u16($0) }
        forEachDelta { symbol, delta in
            switch symbol {
            case 1: w.u8(UInt8(delta))
            case 2:
                precondition(Self.fits(delta: delta), "receive delta \(delta) does not fit 16 bits")
                w.u16(UInt16(bitPattern: Int16(delta)))
            default: break
            }
        }
        let pad = size - w.offset
        if pad > 0 {
            w.zeros(pad - 1)
            w.u8(UInt8(pad))
            buffer[0] |= 0x20
        }
        return size
    }

    static func parse(body: UnsafeRawBufferPointer) throws -> TransportFeedback {
        var r = ByteReader(body, what: "transport feedback")
        let sender = try r.u32(), media = try r.u32()
        let base = try r.u16(), count = Int(try r.u16())
        let reference = Int32(bitPattern: try r.u24() << 8) >> 8  // sign-extended 24 bits
        let feedbackCount = try r.u8()
        guard count > 0 else { throw RTPParseError("RTCP transport feedback describes no packets") }
        guard count <= maxParsedPackets else {
            throw RTPParseError("RTCP transport feedback describes \(count) packets, more than \(maxParsedPackets)")
        }
        var symbols: [UInt8] = []
        symbols.reserveCapacity(count)
        while symbols.count < count {
            let chunk = try r.u16()
            if chunk & 0x8000 == 0 {
                let symbol = UInt8(chunk >> 13 & 3), run = Int(chunk & 0x1FFF)
                guard symbol != 3 else { throw RTPParseError("RTCP transport feedback: run chunk with the reserved symbol 3") }
                guard run > 0 else { throw RTPParseError("RTCP transport feedback: run chunk of length 0") }
                for _ in 0..<min(run, count - symbols.count) { symbols.append(symbol) }
            } else if chunk & 0x4000 == 0 {
                for k in 0..<14 where symbols.count < count { symbols.append(UInt8(chunk >> UInt16(13 - k) & 1)) }
            } else {
                for k in 0..<7 where symbols.count < count {
                    let symbol = UInt8(chunk >> UInt16(12 - 2 * k) & 3)
                    guard symbol != 3 else { throw RTPParseError("RTCP transport feedback: vector chunk with the reserved symbol 3") }
                    symbols.append(symbol)
                }
            }
        }
        var arrivals: [Int64?] = []
        arrivals.reserveCapacity(count)
        var ticks: Int64 = 0
        for symbol in symbols {
            switch symbol {
            case 1: ticks += Int64(try r.u8()); arrivals.append(ticks)
            case 2: ticks += Int64(Int16(bitPattern: try r.u16())); arrivals.append(ticks)
            default: arrivals.append(nil)
            }
        }
        return TransportFeedback(senderSSRC: sender, mediaSSRC: media, baseSequence: base, referenceTime: reference,
                                 feedbackCount: feedbackCount, arrivals: arrivals)
    }
}
