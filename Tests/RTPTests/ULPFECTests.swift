import Testing
import TestSupport
@testable import RTP

@Suite struct ULPFECTests {
    /// An RTP packet: V=2, `b1` (M | PT), sequence, timestamp, SSRC, then `payload`.
    static func packet(_ b1: UInt8, seq: UInt16, ts: UInt32 = 100, ssrc: UInt32 = 0x1234_5678, _ payload: [UInt8]) -> [UInt8] {
        [0x80, b1, UInt8(seq >> 8), UInt8(seq & 0xFF),
         UInt8(ts >> 24), UInt8(ts >> 16 & 0xFF), UInt8(ts >> 8 & 0xFF), UInt8(ts & 0xFF),
         UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)] + payload
    }

    static func fec(for packets: [[UInt8]], protection: Double, sequence: UInt16, transportID: UInt8? = nil) -> [[UInt8]] {
        var encoder = ULPFECEncoder(capacity: 256)
        for p in packets { p.withUnsafeBytes { encoder.add($0) } }
        var out: [[UInt8]] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
        defer { buffer.deallocate() }
        encoder.finish(protection: protection, payloadType: ULPFEC.payloadType, sequence: sequence, transportSequenceID: transportID,
                       into: buffer) { out.append(Array($0)) }
        return out
    }

    /// The bytes RFC 5109 §7.3/§7.4 define for two packets (10: PT 96, 3 bytes; 11: the marker,
    /// 2 bytes): every field is the XOR of theirs, the mask covers SN base and SN base + 1.
    @Test func theFECPacketsBytesAreTheXORTheRFCDefines() {
        let p1 = Self.packet(0x60, seq: 10, [0x01, 0x02, 0x03])
        let p2 = Self.packet(0xE0, seq: 11, ts: 0x65, [0x10, 0x20])
        let out = Self.fec(for: [p1, p2], protection: 0.5, sequence: 12)
        #expect(out.count == 1)
        #expect(out[0] == [
            0x80, 117, 0x00, 0x0C, 0x00, 0x00, 0x00, 0x65, 0x12, 0x34, 0x56, 0x78,  // RTP: PT 117, seq 12, the last packet's TS and SSRC
            0x00, 0x80, 0x00, 0x0A,  // E 0, L 0, P X CC 0; M 1 (0 ^ 1), PT 0 (96 ^ 96); SN base 10
            0x00, 0x00, 0x00, 0x01,  // TS recovery 0x64 ^ 0x65
            0x00, 0x01,  // length recovery 3 ^ 2
            0x00, 0x03, 0xC0, 0x00,  // protection length 3; mask: SN base + 0 and + 1
            0x11, 0x22, 0x03,  // payloads XORed, the shorter padded with zero
        ])
    }

    /// Interleaved groups: with 3 FEC packets for 7, FEC j covers packets j, j+3, j+6; a
    /// group over 16 packets apart takes the long mask (L = 1, 48 bits).
    @Test func groupsAreInterleavedAndLongGroupsTakeTheLongMask() {
        let seven = (0..<7).map { Self.packet(0x60, seq: UInt16(100 + $0), [UInt8($0)]) }
        let three = Self.fec(for: seven, protection: 0.43, sequence: 107)
        #expect(three.count == 3)
        #expect(three.map { UInt16($0[14]) << 8 | UInt16($0[15]) } == [100, 101, 102])  // SN base
        #expect(three[0][24...25] == [0b1001_0010, 0])  // 100, 103, 106
        #expect(three[2][24...25] == [0b1001_0000, 0])  // 102, 105
        #expect(three.map { UInt16($0[2]) << 8 | UInt16($0[3]) } == [107, 108, 109])
        let twenty = (0..<20).map { Self.packet(0x60, seq: UInt16(200 + $0), [UInt8($0)]) }
        let one = Self.fec(for: twenty, protection: 0.06, sequence: 220)
        #expect(one.count == 1 && one[0][12] & 0x40 != 0)
        #expect(Array(one[0][24...29]) == [0xFF, 0xFF, 0xF0, 0, 0, 0])
        // 100 packets: blocks of 34, 33, 33, each protected.
        #expect(ULPFEC.fecCount(media: 100, protection: 0.1) == 4 + 4 + 4)
        #expect(ULPFEC.fecCount(media: 5, protection: 0) == 0)
        // Small frames share: one packet at 10 % makes no FEC packet, the tenth such frame one.
        #expect(ULPFEC.fecCount(media: 1, protection: 0.1) == 0 && ULPFEC.fecCount(media: 1, protection: 0.1, credit: 0.95) == 1)
        var encoder = ULPFECEncoder(capacity: 8)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
        defer { buffer.deallocate() }
        var made: [Int] = []
        for frame in 0..<20 {
            let six = (0..<6).map { Self.packet(0x60, seq: UInt16(300 + frame * 8 + $0), [UInt8($0)]) }
            for p in six { p.withUnsafeBytes { encoder.add($0) } }
            made.append(encoder.finish(protection: 0.175, payloadType: 117, sequence: UInt16(306 + frame * 8), transportSequenceID: nil,
                                       into: buffer) { _ in })
        }
        #expect((20...21).contains(made.reduce(0, +)) && made.allSatisfy { $0 == 1 || $0 == 2 }, "\(made)")
    }

    /// Each packet of a frame lost alone comes back byte for byte (header extension, marker,
    /// lengths); so does a burst as long as the FEC packets; two in one group do not.
    @Test func aLostPacketComesBackExactly() throws {
        var media: [[UInt8]] = []
        for i in 0..<12 {
            var p = Self.packet(i == 11 ? 0xE0 : 0x60, seq: UInt16(truncatingIfNeeded: 65530 + i), ts: 9000, Array(repeating: UInt8(i * 7), count: 100 + i * 13))
            // A transport-wide block (X bit, 0xBEDE), as our packets carry.
            p[0] |= 0x10
            p.insert(contentsOf: [0xBE, 0xDE, 0, 1, 0x31, 0, UInt8(i), 0], at: 12)
            media.append(p)
        }
        let fecs = Self.fec(for: media, protection: 0.25, sequence: 65530 &+ 12, transportID: 3)
        #expect(fecs.count == 3)
        for lost in [[0], [5], [11], [3, 4, 5], [0, 3]] {
            var decoder = ULPFECDecoder()
            for (i, p) in media.enumerated() where !lost.contains(i) { p.withUnsafeBytes { decoder.addMedia($0) } }
            for f in fecs {
                try f.withUnsafeBytes { b in
                    let (_, offset, length) = try RTPHeader.parse(b)
                    let ok = decoder.addFEC(b, payloadOffset: offset, payloadLength: length)
                    #expect(ok)
                }
            }
            var got: [[UInt8]] = []
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
            defer { buffer.deallocate() }
            while let n = decoder.recoverOne(into: buffer) { got.append(Array(buffer[0..<n])) }
            if lost == [0, 3] {
                #expect(got.isEmpty, "two losses in one group cannot be repaired")
            } else {
                #expect(got.count == lost.count && Set(got) == Set(lost.map { media[$0] }), "\(lost)")
            }
            #expect(decoder.malformed == 0)
        }
    }

    /// Random frames, random losses: whatever is recovered is exactly a lost packet, never
    /// something else; a group with one loss is always recovered.
    @Test func randomLossesRecoverOnlyTruePackets() {
        var rng = SplitMix64(seed: 7)
        var seq: UInt16 = 40000
        var decoder = ULPFECDecoder()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
        defer { buffer.deallocate() }
        var recovered = 0, repairable = 0
        for _ in 0..<300 {
            let n = Int(rng.next() % 30) + 1
            let frame = (0..<n).map { i in
                Self.packet(i == n - 1 ? 0xE0 : 0x60, seq: seq &+ UInt16(i), ts: UInt32(truncatingIfNeeded: rng.next()),
                            (0..<Int(rng.next() % 1100 + 1)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            }
            let fecs = Self.fec(for: frame, protection: 0.25, sequence: seq &+ UInt16(n))
            let k = fecs.count
            seq &+= UInt16(n + k)
            var lost = Set<Int>()
            for i in 0..<n where rng.next() % 10 == 0 { lost.insert(i) }
            for g in 0..<k where lost.filter({ $0 % k == g }).count == 1 { repairable += 1 }  // (k is 0 for a frame of 1–3)
            for (i, p) in frame.enumerated() where !lost.contains(i) { p.withUnsafeBytes { decoder.addMedia($0) } }
            for f in fecs { _ = f.withUnsafeBytes { decoder.addFEC($0, payloadOffset: 12, payloadLength: $0.count - 12) } }
            while let m = decoder.recoverOne(into: buffer) {
                let got = Array(buffer[0..<m])
                #expect(lost.contains { frame[$0] == got }, "recovered a packet that was not lost")
                recovered += 1
            }
        }
        #expect(recovered == repairable && repairable > 50, "\(recovered) of \(repairable)")
    }

    /// Malformed FEC packets are refused and counted; none recovers anything.
    @Test func malformedFECIsRefused() {
        var decoder = ULPFECDecoder()
        let media = Self.packet(0x60, seq: 1, [1, 2, 3])
        media.withUnsafeBytes { decoder.addMedia($0) }
        let bad: [[UInt8]] = [
            [0x80] + Array(repeating: 0, count: 13),  // E set
            Array(repeating: 0, count: 9),  // short
            [0, 0x60, 0, 1, 0, 0, 0, 0, 0, 3, 0x05, 0xDC, 0xC0, 0],  // protection length past the packet
            [0, 0x60, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0],  // empty mask
        ]
        for payload in bad {
            let packet = Self.packet(117, seq: 9, payload)
            let ok = packet.withUnsafeBytes { decoder.addFEC($0, payloadOffset: 12, payloadLength: $0.count - 12) }
            #expect(!ok)
        }
        // A recovered length over the protection length: refused at recovery.
        let liar = Self.packet(117, seq: 9, [0, 0x60, 0, 1, 0, 0, 0, 0, 0x7F, 0xFF, 0, 2, 0xC0, 0, 9, 9])
        let taken = liar.withUnsafeBytes { decoder.addFEC($0, payloadOffset: 12, payloadLength: $0.count - 12) }
        #expect(taken)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
        defer { buffer.deallocate() }
        #expect(decoder.recoverOne(into: buffer) == nil)
        #expect(decoder.malformed == 5 && decoder.recovered == 0)
    }
}

