import Testing
import RTP
@testable import RTCP
import TestSupport

func bytes(of packet: RTCPPacket) -> [UInt8] {
    var buffer = [UInt8](repeating: 0xEE, count: 2048)
    let n = buffer.withUnsafeMutableBytes { packet.marshal(into: $0) }
    return Array(buffer[0..<n])
}

func build(_ body: (UnsafeMutableRawBufferPointer) -> Int, capacity: Int = 2048) -> [UInt8] {
    var buffer = [UInt8](repeating: 0xEE, count: capacity)
    let n = buffer.withUnsafeMutableBytes { body($0) }
    return Array(buffer[0..<n])
}

let sampleBlock = ReceptionReport(ssrc: 0xAABB_CCDD, fractionLost: 0x40, cumulativeLost: -1, extendedHighestSequence: 0x0001_0005,
                                  jitter: 0x20, lastSenderReport: 0xB705_2030, delaySinceLastSenderReport: 0x0005_4000)
let sampleBlockBytes: [UInt8] = [
    0xAA, 0xBB, 0xCC, 0xDD,  // SSRC_1
    0x40, 0xFF, 0xFF, 0xFF,  // fraction lost 64/256, cumulative lost −1 (24-bit two's complement)
    0x00, 0x01, 0x00, 0x05,  // extended highest sequence: 1 cycle, seq 5
    0x00, 0x00, 0x00, 0x20,  // interarrival jitter
    0xB7, 0x05, 0x20, 0x30,  // LSR
    0x00, 0x05, 0x40, 0x00,  // DLSR (5.25 s)
]

/// SR/RR report blocks (RFC 3550 §6.4.1, §6.4.2), SDES (§6.5), BYE (§6.6), and the RTT a sender
/// computes from a block.
@Suite struct ReportTests {
    @Test func senderReportWithABlockByteForByte() throws {
        let sr = SenderReport(ssrc: 0x1122_3344, ntp: NTPTimestamp(seconds: 0xE8A1_B2C3, fraction: 0x8000_0000),
                              rtpTimestamp: 0x0102_0304, packetCount: 10, octetCount: 12_000, reports: [sampleBlock])
        let expected: [UInt8] = [
            0x81, 0xC8, 0x00, 0x0C,  // RC=1, PT=200, length 12 (52 bytes)
            0x11, 0x22, 0x33, 0x44, 0xE8, 0xA1, 0xB2, 0xC3, 0x80, 0x00, 0x00, 0x00,
            0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x0A, 0x00, 0x00, 0x2E, 0xE0,
        ] + sampleBlockBytes
        #expect(bytes(of: .senderReport(sr)) == expected)
        #expect(sr.marshalSize == expected.count)
        #expect(try parse(expected) == [.senderReport(sr)])
    }

    @Test func receiverReportCompoundWithCNAMEByteForByte() throws {
        let compound = build { RTCPPacket.buildReceiverReport(ssrc: 0x0102_0304, reports: [sampleBlock], cname: "viewer", into: $0) }
        #expect(compound == [0x81, 0xC9, 0x00, 0x07, 0x01, 0x02, 0x03, 0x04] + sampleBlockBytes + [
            0x81, 0xCA, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04,
            0x01, 0x06, 0x76, 0x69, 0x65, 0x77, 0x65, 0x72,  // CNAME "viewer"
            0x00, 0x00, 0x00, 0x00,  // end + padding
        ])
        #expect(try parse(compound) == [
            .receiverReport(ReceiverReport(ssrc: 0x0102_0304, reports: [sampleBlock])),
            .sourceDescription(SourceDescription(chunks: [.init(ssrc: 0x0102_0304, cname: "viewer")])),
        ])
    }

    @Test func emptyReceiverReportWithBye() throws {
        let compound = build { RTCPPacket.buildReceiverReport(ssrc: 7, reports: [], cname: "", bye: true, into: $0) }
        #expect(compound == [0x80, 0xC9, 0x00, 0x01, 0, 0, 0, 7,
                             0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 7, 0x01, 0x00, 0x00, 0x00,
                             0x81, 0xCB, 0x00, 0x01, 0, 0, 0, 7])
        #expect(try parse(compound).count == 3)
    }

    @Test(arguments: [
        ([0xFF, 0xFF, 0xFF] as [UInt8], -1 as Int32),
        ([0x80, 0x00, 0x00] as [UInt8], -0x80_0000 as Int32),
        ([0x7F, 0xFF, 0xFF] as [UInt8], 0x7F_FFFF as Int32),
        ([0x00, 0x01, 0x00] as [UInt8], 256 as Int32),
    ])
    func cumulativeLostIs24BitSigned(field: [UInt8], lost: Int32) throws {
        var block = sampleBlockBytes
        block.replaceSubrange(5..<8, with: field)
        let packets = try parse([0x81, 0xC9, 0x00, 0x07, 0, 0, 0, 1] + block)
        guard case .receiverReport(let rr) = packets.first else { Issue.record("not an RR"); return }
        #expect(rr.reports.first?.cumulativeLost == lost)
        #expect(bytes(of: packets[0]) == [0x81, 0xC9, 0x00, 0x07, 0, 0, 0, 1] + block)
    }

    @Test func cumulativeLostSaturatesAt24Bits() {
        #expect(ReceptionReport(ssrc: 1, cumulativeLost: 10_000_000).cumulativeLost == 0x7F_FFFF)
        #expect(ReceptionReport(ssrc: 1, cumulativeLost: -10_000_000).cumulativeLost == -0x80_0000)
    }

    /// The worked example of RFC 3550 §6.4.1 (Figure 2): A = 0xb710:8000 (46864.500 s),
    /// LSR = 0xb705:2030 (46853.125 s), DLSR = 0x0005:4000 (5.250 s). The figure rounds the
    /// result to 0x0006:2000 (6.125 s); the exact difference is 0x0006:1fd0 (≈ 6.1243 s).
    @Test func roundTripTimeFromTheRFCExample() {
        let arrival = NTPTimestamp(seconds: 0xB710, fraction: 0x8000_0000)
        #expect(sampleBlock.roundTripTime(arrival: arrival) == 0x0006_1FD0)
        #expect(sampleBlock.roundTripNanos(arrival: arrival) == 6_124_267_578)
    }

    @Test func roundTripTimeNeedsAnSRAndIsNeverNegative() {
        var block = sampleBlock
        block.lastSenderReport = 0
        #expect(block.roundTripTime(arrival: NTPTimestamp(seconds: 0xB710, fraction: 0)) == nil)
        // Arrival before LSR + DLSR (clock step): 0, not a huge wrapped value.
        #expect(sampleBlock.roundTripTime(arrival: NTPTimestamp(seconds: 0xB706, fraction: 0)) == 0)
        // Across the 32-bit wrap of the middle word.
        let wrapped = ReceptionReport(ssrc: 1, lastSenderReport: 0xFFFF_0000, delaySinceLastSenderReport: 0x0000_8000)
        #expect(wrapped.roundTripTime(arrival: NTPTimestamp(seconds: 0x1_0001, fraction: 0)) == 0x0001_8000)
    }

    @Test func shortNTPConversions() {
        #expect(NTPTimestamp.nanos(fromShort: 0x0001_0000) == 1_000_000_000)
        #expect(NTPTimestamp.nanos(fromShort: 0x0000_8000) == 500_000_000)
        #expect(NTPTimestamp.short(fromNanos: 5_250_000_000) == 0x0005_4000)
        #expect(NTPTimestamp.short(fromNanos: 1_000_000) == 65)  // 1 ms = 65.536 units
        #expect(NTPTimestamp.short(fromNanos: .max) == 0xFFFF_0000)
    }

    @Test func sdesChunksSkipOtherItems() throws {
        // Two chunks: the first has NAME (2) then CNAME (1); the second only a NOTE (7).
        let sdes: [UInt8] = [0x82, 0xCA, 0x00, 0x06,
                             0, 0, 0, 1, 0x02, 0x01, 0x6E, 0x01, 0x02, 0x68, 0x69, 0x00,  // NAME "n", CNAME "hi", end
                             0, 0, 0, 2, 0x07, 0x02, 0x61, 0x62, 0x00, 0x00, 0x00, 0x00]  // NOTE "ab", end, pad
        let expected = SourceDescription(chunks: [.init(ssrc: 1, cname: "hi"), .init(ssrc: 2, cname: nil)])
        #expect(try parse(sdes) == [.sourceDescription(expected)])
        #expect(try parse(bytes(of: .sourceDescription(expected))) == [.sourceDescription(expected)])
    }

    @Test(arguments: [
        [UInt8]([0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 1, 0x01, 0x05, 0x61, 0x62]),  // item runs past the packet
        [0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 1, 0x01, 0x01, 0x61, 0x62],  // no end-of-list null
        [0x82, 0xCA, 0x00, 0x02, 0, 0, 0, 1, 0x00, 0x00, 0x00, 0x00],  // two chunks announced, one present
        [0x82, 0xCB, 0x00, 0x01, 0, 0, 0, 1],  // BYE with two SSRCs announced, one present
        [0x81, 0xCB, 0x00, 0x02, 0, 0, 0, 1, 0x08, 0x61, 0x62, 0x63],  // BYE reason longer than the packet
        [0x81, 0xC9, 0x00, 0x01, 0, 0, 0, 1],  // RR announcing a block it does not have
        [0x80, 0xC8, 0x00, 0x01, 0, 0, 0, 1],  // SR without sender info
        [0xA1, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 0],  // padding count 0
        [0xA1, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 9],  // padding longer than the packet
        [0xA1, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 4],  // PLI whose media SSRC is padding
    ])
    func malformedReportsThrow(_ bytes: [UInt8]) {
        #expect(throws: RTPParseError.self) { try parse(bytes) }
    }

    @Test func byeWithReasonByteForByte() throws {
        let bye = Goodbye(sources: [0x1111_1111, 0x2222_2222], reason: "gone")
        let expected: [UInt8] = [0x82, 0xCB, 0x00, 0x04, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22,
                                 0x04, 0x67, 0x6F, 0x6E, 0x65, 0x00, 0x00, 0x00]
        #expect(bytes(of: .goodbye(bye)) == expected)
        #expect(try parse(expected) == [.goodbye(bye)])
        // A reason of exactly 3 bytes needs no padding.
        #expect(bytes(of: .goodbye(Goodbye(sources: [1], reason: "bye"))) == [0x81, 0xCB, 0x00, 0x02, 0, 0, 0, 1, 0x03, 0x62, 0x79, 0x65])
        #expect(try parse([0x80, 0xCB, 0x00, 0x00]) == [.goodbye(Goodbye(sources: []))])
    }
}

/// Feedback messages a receiver sends: generic NACK (RFC 4585 §6.2.1), PLI (§6.3.1), FIR
/// (RFC 5104 §4.3.1).
@Suite struct FeedbackTests {
    func nack(_ seqs: [UInt16], capacity: Int = 2048) -> [UInt8] {
        build({ RTCPPacket.buildNACK(senderSSRC: 1, mediaSSRC: 2, sequenceNumbers: seqs, into: $0) }, capacity: capacity)
    }

    @Test func nackPacksIntoPIDAndBLP() throws {
        let packet = nack([1, 2, 3, 17, 18, 40])
        #expect(packet == [0x81, 0xCD, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 2,
                           0x00, 0x01, 0x80, 0x03,  // PID 1; BLP bits 0, 1, 15: 2, 3, 17
                           0x00, 0x12, 0x00, 0x00,  // PID 18 (17 after 1: too far for the BLP)
                           0x00, 0x28, 0x00, 0x00])  // PID 40
        guard case .nack(let parsed) = try parse(packet).first else { Issue.record("not a NACK"); return }
        #expect(parsed.sequenceNumbers == [1, 2, 3, 17, 18, 40])
    }

    @Test func nackAcrossTheSequenceWrap() throws {
        let packet = nack([0xFFFE, 0xFFFF, 0, 1, 14, 15])
        // 0xFFFF, 0, 1 at bits 0–2; 14 is 16 after 0xFFFE: bit 15; 15 is 17 after: a new pair.
        #expect(Array(packet[12...]) == [0xFF, 0xFE, 0x80, 0x07, 0x00, 0x0F, 0x00, 0x00])
        guard case .nack(let parsed) = try parse(packet).first else { Issue.record("not a NACK"); return }
        #expect(parsed.sequenceNumbers == [0xFFFE, 0xFFFF, 0, 1, 14, 15])
    }

    @Test func nackEdgeCases() {
        #expect(nack([]) == [])
        #expect(nack([5, 5, 5]) == [0x81, 0xCD, 0x00, 0x03, 0, 0, 0, 1, 0, 0, 0, 2, 0x00, 0x05, 0x00, 0x00])
        // A 20-byte buffer fits two pairs; the third is left for next time.
        #expect(nack([10, 100, 1000], capacity: 20) == [0x81, 0xCD, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 2,
                                                        0x00, 0x0A, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00])
        #expect(nack([10], capacity: 15) == [])
        // Unsorted input stays correct, only less compact.
        #expect(nack([3, 1, 2]).count == 12 + 4 * 2)
    }

    @Test func nackRoundTripsRandomSets() throws {
        var rng = SplitMix64(seed: 4585)
        for _ in 0..<500 {
            let start = UInt16.random(in: 0...UInt16.max, using: &rng)
            let span = Int.random(in: 1...200, using: &rng)
            var seqs: [UInt16] = []
            for i in 0..<span where Bool.random(using: &rng) { seqs.append(start &+ UInt16(i)) }
            guard !seqs.isEmpty else { continue }
            let packet = nack(seqs)
            guard case .nack(let parsed) = try parse(packet).first else { Issue.record("not a NACK"); return }
            #expect(parsed.sequenceNumbers == seqs)
        }
    }

    @Test func pliByteForByte() throws {
        let packet = build { RTCPPacket.buildPLI(senderSSRC: 0x0102_0304, mediaSSRC: 0x0A0B_0C0D, into: $0) }
        #expect(packet == [0x81, 0xCE, 0x00, 0x02, 0x01, 0x02, 0x03, 0x04, 0x0A, 0x0B, 0x0C, 0x0D])
        #expect(try parse(packet) == [.pli(senderSSRC: 0x0102_0304, mediaSSRC: 0x0A0B_0C0D)])
    }

    @Test func firByteForByte() throws {
        let packet = build { RTCPPacket.buildFIR(senderSSRC: 1, mediaSSRC: 0xBBBB_BB02, sequenceNumber: 7, into: $0) }
        #expect(packet == [0x84, 0xCE, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0, 0xBB, 0xBB, 0xBB, 0x02, 0x07, 0x00, 0x00, 0x00])
        let fir = FullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 0xBBBB_BB02, sequenceNumber: 7)])
        #expect(try parse(packet) == [.fir(fir)])
        #expect(bytes(of: .fir(fir)) == packet)
    }
}

/// Anything that parses serializes back to bytes that parse the same; mutated packets never
/// crash the parser.
@Suite struct RTCPRoundTripTests {
    static let samples: [RTCPPacket] = [
        .senderReport(SenderReport(ssrc: 1, ntp: NTPTimestamp(seconds: 2, fraction: 3), rtpTimestamp: 4, packetCount: 5,
                                   octetCount: 6, reports: [sampleBlock, ReceptionReport(ssrc: 9)])),
        .receiverReport(ReceiverReport(ssrc: 1, reports: [sampleBlock])),
        .receiverReport(ReceiverReport(ssrc: 1)),
        .sourceDescription(SourceDescription(chunks: [.init(ssrc: 1, cname: "a@b"), .init(ssrc: 2, cname: "ünï"), .init(ssrc: 3, cname: nil)])),
        .goodbye(Goodbye(sources: [1, 2, 3], reason: "closing")),
        .goodbye(Goodbye(sources: [1], reason: "")),
        .nack(GenericNACK(senderSSRC: 1, mediaSSRC: 2, pairs: [.init(packetID: 65535, lostBitmask: 0xFFFF), .init(packetID: 7, lostBitmask: 0)])),
        .pli(senderSSRC: 1, mediaSSRC: 2),
        .fir(FullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 255), .init(ssrc: 3, sequenceNumber: 0)])),
        .extendedReport(ExtendedReport(ssrc: 1, referenceTime: NTPTimestamp(seconds: 2, fraction: 3))),
        .extendedReport(ExtendedReport(ssrc: 1, dlrr: [.init(ssrc: 2, lastReceiverReport: 3, delaySinceLastReceiverReport: 4),
                                                       .init(ssrc: 5, lastReceiverReport: 6, delaySinceLastReceiverReport: 7)])),
        .extendedReport(ExtendedReport(ssrc: 9, referenceTime: NTPTimestamp(seconds: 1, fraction: 1),
                                       dlrr: [.init(ssrc: 2, lastReceiverReport: 3, delaySinceLastReceiverReport: 4)])),
    ]

    @Test(arguments: samples)
    func marshalThenParseIsIdentity(_ packet: RTCPPacket) throws {
        let b = bytes(of: packet)
        #expect(b.count % 4 == 0)
        #expect(try parse(b) == [packet])
    }

    @Test func mutatedCompoundsNeverCrashAndReparseTheSame() throws {
        var rng = SplitMix64(seed: 5104)
        let compound = Self.samples.flatMap { bytes(of: $0) }
        var parsed = 0
        for _ in 0..<5_000 {
            var b = compound
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let i = Int.random(in: 0..<b.count, using: &rng)
                b[i] ^= UInt8(1) << UInt8.random(in: 0...7, using: &rng)
            }
            if Bool.random(using: &rng) { b.removeLast(Int.random(in: 0...b.count, using: &rng)) }
            guard let packets = try? parse(b) else { continue }
            parsed += 1
            for p in packets {
                if case .unknown = p { continue }
                #expect(try parse(bytes(of: p)) == [p])
            }
        }
        #expect(parsed > 100)
    }
}

/// RTCP XR (RFC 3611) as a receive-only viewer uses it: RRTR out, DLRR back, RTT from them.
@Suite struct ExtendedReportTests {
    /// RR (no blocks) + SDES CNAME "v" + XR with an RRTR, as the viewer sends each second.
    @Test func receiverReportWithRRTRByteForByte() throws {
        let b = build { RTCPPacket.buildReceiverReport(ssrc: 0x0102_0304, reports: [], cname: "v",
                                                       referenceTime: NTPTimestamp(seconds: 0xE000_0001, fraction: 0x8000_0000), into: $0) }
        let xr: [UInt8] = [
            0x80, 207, 0x00, 0x04,  // V=2, PT=XR, length 4 (20 bytes)
            0x01, 0x02, 0x03, 0x04,  // SSRC
            0x04, 0x00, 0x00, 0x02,  // BT=4 (RRTR), reserved, block length 2
            0xE0, 0x00, 0x00, 0x01,  // NTP seconds
            0x80, 0x00, 0x00, 0x00,  // NTP fraction (0.5 s)
        ]
        #expect(Array(b.suffix(20)) == xr)
        #expect(b.count == 8 + 12 + 20)
        let packets = try parse(b)
        #expect(packets.last == .extendedReport(ExtendedReport(ssrc: 0x0102_0304, referenceTime: NTPTimestamp(seconds: 0xE000_0001, fraction: 0x8000_0000))))
    }

    @Test func dlrrBlockByteForByte() {
        let xr = ExtendedReport(ssrc: 0xAABB_CCDD, dlrr: [.init(ssrc: 0x0102_0304, lastReceiverReport: 0x0001_8000, delaySinceLastReceiverReport: 0x0000_4000)])
        #expect(bytes(of: .extendedReport(xr)) == [
            0x80, 207, 0x00, 0x05,  // length 5 (24 bytes)
            0xAA, 0xBB, 0xCC, 0xDD,  // SSRC of the sender
            0x05, 0x00, 0x00, 0x03,  // BT=5 (DLRR), block length 3 (one sub-block)
            0x01, 0x02, 0x03, 0x04,  // SSRC_1: the receiver answered
            0x00, 0x01, 0x80, 0x00,  // LRR: middle 32 bits of its RRTR time
            0x00, 0x00, 0x40, 0x00,  // DLRR: 0.25 s held
        ])
    }

    /// The RTT: arrival 1.75 s (short NTP) − LRR 1.5 s − DLRR 0.25 s = 0; 2 s − 1.5 − 0.25 = 0.25 s.
    @Test func roundTripFromTheDLRR() {
        let item = ExtendedReport.DLRRItem(ssrc: 1, lastReceiverReport: 0x0001_8000, delaySinceLastReceiverReport: 0x0000_4000)
        #expect(item.roundTripNanos(arrival: NTPTimestamp(seconds: 2, fraction: 0)) == 250_000_000)
        #expect(item.roundTripNanos(arrival: NTPTimestamp(seconds: 1, fraction: 0x8000_0000)) == 0, "negative: clamped")
        #expect(ExtendedReport.DLRRItem(ssrc: 1, lastReceiverReport: 0, delaySinceLastReceiverReport: 0)
            .roundTripNanos(arrival: NTPTimestamp(seconds: 2, fraction: 0)) == nil)
    }

    /// Other block types (here a VoIP metrics block, BT=7) are skipped; a DLRR whose length is
    /// not a multiple of 3 words, or a block running past the packet, is an error naming it.
    @Test func otherBlocksAreSkippedAndBadLengthsNamed() throws {
        let voip: [UInt8] = [0x80, 207, 0x00, 0x03, 0, 0, 0, 9, 0x07, 0x00, 0x00, 0x01, 1, 2, 3, 4]
        #expect(try parse(voip) == [.extendedReport(ExtendedReport(ssrc: 9))])
        let badDLRR: [UInt8] = [0x80, 207, 0x00, 0x04, 0, 0, 0, 9, 0x05, 0x00, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2]
        #expect(throws: RTPParseError.self) { try parse(badDLRR) }
        let pastEnd: [UInt8] = [0x80, 207, 0x00, 0x02, 0, 0, 0, 9, 0x04, 0x00, 0x00, 0x02]
        #expect(throws: RTPParseError.self) { try parse(pastEnd) }
    }
}

/// REMB (draft-alvestrand-rmcat-remb-03 §2.2), against the packet of libwebrtc's own test
/// (`remb_unittest.cc`): three SSRCs, 522,022 bit/s as exponent 1, mantissa 0x3FB93.
@Suite struct REMBTests {
    static let packet: [UInt8] = [0x8F, 206, 0x00, 0x07, 0x12, 0x34, 0x56, 0x78,
                                  0x00, 0x00, 0x00, 0x00, 0x52, 0x45, 0x4D, 0x42,
                                  0x03, 0x07, 0xFB, 0x93, 0x23, 0x45, 0x67, 0x89,
                                  0x23, 0x45, 0x67, 0x8A, 0x23, 0x45, 0x67, 0x8B]
    static let remb = REMB(senderSSRC: 0x1234_5678, bitsPerSecond: 0x3FB93 * 2, ssrcs: [0x2345_6789, 0x2345_678A, 0x2345_678B])

    @Test func parsedAndWrittenByteForByte() throws {
        let parsed = try Self.packet.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
        #expect(parsed == [.remb(Self.remb)])
        #expect(bytes(of: .remb(Self.remb)) == Self.packet)
    }

    @Test func largeRatesRoundDownNeverUp() {
        for bps: UInt64 in [0, 1, 0x3FFFF, 0x40000, 1_000_000, 2_500_001, 123_456_789_012] {
            let (e, m) = REMB.encode(bps)
            #expect(m <= 0x3FFFF && e < 64)
            let back = UInt64(m) << UInt64(e)
            #expect(back <= bps && bps - back < (UInt64(1) << UInt64(e)), "\(bps) → \(back)")
        }
    }

    /// Another application message (not "REMB") is skipped; a REMB cut short is an error.
    @Test func otherApplicationMessagesAndTruncation() throws {
        var other = Self.packet
        other[12] = 0x58
        #expect(try other.withUnsafeBytes { try RTCPPacket.parseCompound($0) } == [.unknown(packetType: 206)])
        // An exponent past 46 would overflow: the largest encodable rate, stable when written again.
        var huge = Self.packet
        huge[17] = 0xFF
        let parsed = try huge.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
        guard case .remb(let r) = parsed.first else { Issue.record("\(parsed)"); return }
        #expect(r.bitsPerSecond == UInt64(0x3FFFF) << 46)
        #expect(try bytes(of: .remb(r)).withUnsafeBytes { try RTCPPacket.parseCompound($0) } == parsed)
        var cut = Array(Self.packet[0..<28])
        cut[3] = 0x06  // length says 28 bytes: two of the three SSRCs are there
        #expect(throws: RTPParseError.self) { try cut.withUnsafeBytes { try RTCPPacket.parseCompound($0) } }
    }
}
