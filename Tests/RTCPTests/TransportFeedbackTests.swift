import Testing
import RTP
@testable import RTCP
import TestSupport

/// Transport-wide feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1), byte for byte.
@Suite struct TransportFeedbackTests {
    /// Five packets: received (delta 4), lost, received (+10), received late (+300: two octets),
    /// reordered (−14: two octets). One vector chunk of two-bit symbols: 01 00 01 10 10 (00 00).
    @Test func aVectorChunkWithSmallLargeAndNegativeDeltas() throws {
        let fb = TransportFeedback(senderSSRC: 0x0102_0304, mediaSSRC: 0x0506_0708, baseSequence: 100, referenceTime: 16,
                                   feedbackCount: 7, arrivals: [4, nil, 14, 314, 300])
        let expected: [UInt8] = [
            0x8F, 0xCD, 0x00, 0x06,  // FMT=15, PT=205, length 6 (28 bytes)
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
            0x00, 0x64, 0x00, 0x05,  // base sequence 100, 5 packets
            0x00, 0x00, 0x10, 0x07,  // reference time 16 × 64 ms, feedback 7
            0xD1, 0xA0,  // 1 1 | 01 00 01 10 10 00 00
            0x04, 0x0A, 0x01, 0x2C, 0xFF, 0xF2,  // 4, 10, 300, −14 (× 250 µs)
        ]
        #expect(bytes(of: .transportFeedback(fb)) == expected)
        let parsed = try expected.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
        #expect(parsed == [.transportFeedback(fb)])
        #expect(fb.arrivalMicros(ticks: 314) == 16 * 64_000 + 314 * 250)
    }

    /// Twenty packets 250 µs apart: one run chunk (0 01 0000000010100), 20 one-octet deltas, and
    /// two octets of padding (P set, the last octet counting them).
    @Test func aRunChunkAndPadding() throws {
        let fb = TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: 0xFFFE, referenceTime: -1, feedbackCount: 255,
                                   arrivals: (1...20).map { Int64($0) })
        let b = bytes(of: .transportFeedback(fb))
        #expect(b.count == 44)
        #expect(Array(b[0..<4]) == [0xAF, 0xCD, 0x00, 0x0A])
        #expect(Array(b[12..<20]) == [0xFF, 0xFE, 0x00, 0x14, 0xFF, 0xFF, 0xFF, 0xFF])  // reference −1 (24 bits), feedback 255
        #expect(Array(b[20..<22]) == [0x20, 0x14])
        #expect(Array(b[22..<42]) == [UInt8](repeating: 1, count: 20))
        #expect(Array(b[42..<44]) == [0x00, 0x02])
        let parsed = try b.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
        #expect(parsed == [.transportFeedback(fb)])
    }

    /// Receivers may send one-bit vectors (libwebrtc does): 1 0 | 1 0 1 then 11 unused symbols.
    @Test func aOneBitVectorChunkParses() throws {
        let packet: [UInt8] = [
            0x8F, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2,
            0x00, 0x0A, 0x00, 0x03, 0x00, 0x00, 0x01, 0x00,
            0xA8, 0x00, 0x08, 0x02,  // symbols 1 0 1; deltas 8 and 2
        ]
        let parsed = try packet.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
        guard case .transportFeedback(let fb) = parsed.first else { Issue.record("not parsed as transport feedback"); return }
        #expect(fb.baseSequence == 10)
        #expect(fb.arrivals == [8, nil, 10])
    }

    @Test(arguments: [
        // No packets.
        ([0x8F, 0xCD, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0] as [UInt8], "describes no packets"),
        // 65535 packets claimed by one run.
        ([0x8F, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0xFF, 0xFF, 0, 0, 0, 0, 0x1F, 0xFF, 0, 0], "more than 16384"),
        // A run of the reserved symbol 3.
        ([0x8F, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 1, 0, 0, 0, 0, 0x60, 0x01, 0, 0], "reserved symbol 3"),
        // Two received packets, one delta present.
        ([0x8F, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 3, 0, 0, 0, 0, 0x20, 0x03, 0x05, 0], "truncated"),
        // A run of length 0.
        ([0x8F, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 1, 0, 0, 0, 0, 0x20, 0x00, 0, 0], "length 0"),
    ])
    func malformedFeedbackIsRefusedByName(packet: [UInt8], reason: String) {
        #expect { try packet.withUnsafeBytes { try RTCPPacket.parseCompound($0) } } throws: { error in
            "\(error)".contains("transport feedback") && "\(error)".contains(reason)
        }
    }

    @Test func randomFeedbackRoundTrips() throws {
        var rng = SplitMix64(seed: 17)
        for _ in 0..<300 {
            var arrivals: [Int64?] = []
            var t = Int64.random(in: 0...255, using: &rng)
            for _ in 0..<Int.random(in: 1...600, using: &rng) {
                switch Int.random(in: 0..<10, using: &rng) {
                case 0, 1: arrivals.append(nil)
                case 2: t += Int64.random(in: -2000...2000, using: &rng); arrivals.append(t)
                default: t += Int64.random(in: 0...40, using: &rng); arrivals.append(t)
                }
            }
            // A run of one symbol now and then.
            if Bool.random(using: &rng) { arrivals += [Int64?](repeating: nil, count: Int.random(in: 7...40, using: &rng)) }
            let fb = TransportFeedback(senderSSRC: rng.next(), mediaSSRC: rng.next(), baseSequence: UInt16.random(in: 0...UInt16.max, using: &rng),
                                       referenceTime: Int32.random(in: -0x80_0000...0x7F_FFFF, using: &rng), feedbackCount: UInt8.random(in: 0...255, using: &rng),
                                       arrivals: arrivals)
            // Trailing losses are kept: the count says how many.
            let b = bytes(of: .transportFeedback(fb))
            #expect(b.count == fb.marshalSize && b.count % 4 == 0)
            let parsed = try b.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
            #expect(parsed == [.transportFeedback(fb)])
        }
    }
}
