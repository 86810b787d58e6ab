import Testing
@testable import RTP

/// FEC for browsers: ULPFEC in RED, in the video stream's own sequence numbers.
@Suite struct REDProtectionTests {
    static let vp8: UInt8 = 96, red: UInt8 = 123, ulpfec: UInt8 = 127

    /// A VP8 packet as the gateway hands it over (the browser's PT, a transport-wide block).
    static func packet(seq: UInt16, marker: Bool = false, size: Int = 80, fill: UInt8 = 1) -> [UInt8] {
        var p = ULPFECTests.packet((marker ? 0x80 : 0) | vp8, seq: seq, ts: 90_000, Array(repeating: fill, count: size))
        p[0] |= 0x10
        p.insert(contentsOf: [0xBE, 0xDE, 0, 1, 0x51, UInt8(seq >> 8), UInt8(seq & 0xFF), 0], at: 12)
        return p
    }

    /// Runs `packets` through `red` at `protection`: what goes out, in order (media, then each
    /// frame's FEC).
    static func send(_ packets: [[UInt8]], through red: inout REDProtection, protection: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var b = [UInt8](repeating: 0, count: 2048)
        for p in packets {
            let n = b.withUnsafeMutableBytes { buffer in
                buffer.copyMemory(from: UnsafeRawBufferPointer(start: p.withUnsafeBytes { $0.baseAddress }, count: p.count))
                return red.prepare(buffer, length: p.count, protection: protection)
            }
            if n > 0 { out.append(Array(b[0..<n])) }
            red.finishFrame(protection: protection) { out.append(Array($0)) }
        }
        return out
    }

    static func sequence(_ p: [UInt8]) -> UInt16 { UInt16(p[2]) << 8 | UInt16(p[3]) }

    /// RED unwrapped as libwebrtc's receiver does: the block's payload type into the header,
    /// the one-byte RED header out.
    static func unwrap(_ p: [UInt8]) -> (pt: UInt8, packet: [UInt8]) {
        var headerLength = 12
        if p[0] & 0x10 != 0 { headerLength += 4 + 4 * (Int(p[14]) << 8 | Int(p[15])) }
        var q = p
        let pt = q.remove(at: headerLength)
        #expect(pt & 0x80 == 0, "one block: F = 0")
        q[1] = (q[1] & 0x80) | pt
        return (pt, q)
    }

    @Test func withoutProtectionPacketsGoAsTheyAre() {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        let frame = (0..<4).map { Self.packet(seq: 500 + $0, marker: $0 == 3) }
        #expect(Self.send(frame, through: &red, protection: 0) == frame)
        #expect(red.original(502) == 502 && red.fecPackets == 0)
    }

    /// Media wrapped in RED (the block names VP8), the frame's FEC after its last packet in
    /// RED too, the next frame numbered on after the FEC packets; resends and late packets keep
    /// their first numbers; the browser's numbers map back, FEC's to none.
    @Test func mediaAndFECGoInREDAndTheNumbersRunOnAfterTheFEC() {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        let first = (0..<4).map { Self.packet(seq: 65534 &+ $0, marker: $0 == 3, fill: UInt8($0)) }
        let out = Self.send(first, through: &red, protection: 0.5)
        #expect(out.count == 6)
        #expect(out.map(Self.sequence) == [65534, 65535, 0, 1, 2, 3])
        #expect(out.allSatisfy { $0[1] & 0x7F == Self.red })
        for (i, p) in out.prefix(4).enumerated() {
            let (pt, unwrapped) = Self.unwrap(p)
            #expect(pt == Self.vp8 && unwrapped == first[i], "packet \(i) is the media packet, wrapped")
            #expect(p[20] == Self.vp8, "the RED header follows the header extension")
        }
        #expect(out[3][1] & 0x80 != 0 && out[4][1] & 0x80 == 0, "the frame's last packet keeps its marker")
        #expect(out[4][12] == Self.ulpfec && out[5][12] == Self.ulpfec)
        #expect(red.fecPackets == 2)

        let second = (4..<6).map { Self.packet(seq: 65534 &+ $0, marker: $0 == 5) }
        let next = Self.send(second, through: &red, protection: 0.5)
        #expect(next.map(Self.sequence) == [4, 5, 6], "two media, then one FEC")
        // A resend of the first frame's third packet, and a late one: as first numbered.
        let again = Self.send([Self.packet(seq: 0)], through: &red, protection: 0.5)
        #expect(again.count == 1 && Self.sequence(again[0]) == 0)
        // Back: media numbers to the source's, FEC ones to none.
        #expect(red.original(4) == 2 && red.original(5) == 3 && red.original(1) == 1)
        #expect(red.original(2) == nil && red.original(3) == nil && red.original(6) == nil)
        #expect(red.originalOrPreceding(3) == 1 && red.originalOrPreceding(6) == 3)
        #expect(red.outgoing(4) == 7, "the next frame's first packet")
    }

    /// The FEC repairs what the browser sees: a lost media packet comes back, unwrapped, with
    /// the browser's number, VP8 payload type and header extension.
    @Test func aLostPacketIsRecoveredFromTheREDWrappedFEC() throws {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        // A frame before, with one FEC packet: the numbers after it are shifted by one.
        _ = Self.send([Self.packet(seq: 98), Self.packet(seq: 99, marker: true)], through: &red, protection: 0.5)
        let frame = (0..<6).map { Self.packet(seq: 100 + $0, marker: $0 == 5, size: 200 + 37 * Int($0), fill: UInt8(10 + $0)) }
        let out = Self.send(frame, through: &red, protection: 0.34)
        let media = out.map(Self.unwrap).filter { $0.pt == Self.vp8 }.map(\.packet)
        let fec = out.map(Self.unwrap).filter { $0.pt == Self.ulpfec }.map(\.packet)
        #expect(media.count == 6 && fec.count == 2)
        for lost in 0..<6 {
            var decoder = ULPFECDecoder()
            for (i, p) in media.enumerated() where i != lost { p.withUnsafeBytes { decoder.addMedia($0) } }
            for f in fec {
                try f.withUnsafeBytes { b in
                    let (_, offset, length) = try RTPHeader.parse(b)
                    let taken = decoder.addFEC(b, payloadOffset: offset, payloadLength: length)
                    #expect(taken)
                }
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
            defer { buffer.deallocate() }
            let recovered = decoder.recoverOne(into: buffer)
            let n = try #require(recovered)
            #expect(Array(buffer[0..<n]) == media[lost], "packet \(lost)")
            #expect(Self.sequence(media[lost]) == 101 + UInt16(lost) && media[lost][1] & 0x7F == Self.vp8)
        }
    }

    /// Frames too small for an FEC packet of their own are covered together: one frame of two
    /// packets at 25 % makes none; with the next frame's two, one FEC packet covers all four.
    @Test func smallFramesAreProtectedTogether() {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        let first = Self.send([Self.packet(seq: 20), Self.packet(seq: 21, marker: true)], through: &red, protection: 0.25)
        #expect(first.count == 2 && red.fecPackets == 0)
        let second = Self.send([Self.packet(seq: 22), Self.packet(seq: 23, marker: true)], through: &red, protection: 0.25)
        #expect(second.count == 3 && second[2][12] == Self.ulpfec)
        let fec = Self.unwrap(second[2]).packet
        #expect(UInt16(fec[14]) << 8 | UInt16(fec[15]) == 20, "SN base: the first frame's first packet")
        #expect(fec[24...25] == [0xF0, 0], "the mask covers 20–23")
    }

    /// Padding (a probe) is not wrapped; FEC off again: no RED, numbers still shifted.
    @Test func paddingAndFECOffGoUnwrapped() {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        _ = Self.send([Self.packet(seq: 9), Self.packet(seq: 10, marker: true)], through: &red, protection: 0.5)
        var probe = ULPFECTests.packet(Self.vp8, seq: 11, [0, 0, 0, 4])
        probe[0] |= 0x20
        let sent = Self.send([probe, Self.packet(seq: 12, marker: true)], through: &red, protection: 0)
        #expect(sent.count == 2 && sent[0][1] == Self.vp8 && sent[1][1] & 0x7F == Self.vp8)
        #expect(sent.map(Self.sequence) == [12, 13])
    }

    /// A packet too short for its header, or older than the numbers kept, is dropped.
    @Test func malformedAndTooOldPacketsAreDropped() {
        var red = REDProtection(redPT: Self.red, fecPT: Self.ulpfec)
        var b = [UInt8](repeating: 0, count: 64)
        var short = Self.packet(seq: 1)
        short[15] = 200  // the extension claims 800 bytes
        #expect(b.withUnsafeMutableBytes { buffer in
            buffer.copyMemory(from: UnsafeRawBufferPointer(start: short.withUnsafeBytes { $0.baseAddress }, count: 40))
            return red.prepare(buffer, length: 40, protection: 0.5)
        } == 0)
        for frame in 0..<300 {  // one FEC packet each
            _ = Self.send([Self.packet(seq: UInt16(2 * frame)), Self.packet(seq: UInt16(2 * frame + 1), marker: true)], through: &red, protection: 0.5)
        }
        #expect(red.fecPackets == 300)
        #expect(red.outgoing(1) == nil && red.original(1) == nil)
        #expect(red.outgoing(599).map { Int($0) } == 599 + 299)
    }
}
