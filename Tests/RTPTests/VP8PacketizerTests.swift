import Testing
@testable import RTP
import TestSupport

/// VP8 payload per RFC 7741: RTP header (RFC 3550 §5.1), then the payload descriptor of
/// §4.2 with X=1, I=1 and a 15-bit PictureID (M=1): `|X|R|N|S|R|PID|`, `|I|L|T|K|RSV|`,
/// `|M|PictureID hi|`, `|PictureID lo|`.
@Suite struct VP8PacketizerTests {
    @Test func smallFrameIsOnePacketWithTheExactRFCBytes() {
        var p = VP8Packetizer(ssrc: 0x1122_3344, payloadType: 96, initialSequence: 0x1234, initialPictureID: 0x2345)
        let frame: [UInt8] = [0xDE, 0xAD, 0xBE, 0xEF, 0x01]
        let packets = packetize(&p, frame, timestamp: 0xAABB_CCDD)
        #expect(packets == [[
            0x80, 0xE0, 0x12, 0x34,  // V=2 P=0 X=0 CC=0 | M=1 PT=96 | seq 0x1234
            0xAA, 0xBB, 0xCC, 0xDD,  // timestamp
            0x11, 0x22, 0x33, 0x44,  // SSRC
            0x90,  // X=1 R=0 N=0 S=1 R=0 PID=0
            0x80,  // I=1 L=0 T=0 K=0
            0xA3, 0x45,  // M=1, PictureID 0x2345
            0xDE, 0xAD, 0xBE, 0xEF, 0x01,
        ]])
        #expect(p.sequenceNumber == 0x1235)
        #expect(p.pictureID == 0x2346)
        #expect(p.packetsSent == 1)
        #expect(p.payloadBytesSent == 9)

        // The next frame: next sequence number and PictureID, its own timestamp.
        let next = packetize(&p, [0x42], timestamp: 0xAABB_CCDD &+ 6000)
        #expect(next == [[
            0x80, 0xE0, 0x12, 0x35,
            0xAA, 0xBB, 0xE4, 0x4D,
            0x11, 0x22, 0x33, 0x44,
            0x90, 0x80, 0xA3, 0x46,
            0x42,
        ]])
    }

    /// With temporal layers the descriptor carries L and T (RFC 7741 §4.2): TL0PICIDX counts
    /// the base-layer frames, TID the layer; an upper-layer frame has N (non-reference) and Y
    /// (it depends on the base layer only), and the base frame's TL0PICIDX.
    @Test func temporalLayersAreInTheDescriptorWithTheExactRFCBytes() throws {
        var p = VP8Packetizer(ssrc: 0x1122_3344, payloadType: 96, initialSequence: 0x1234, initialPictureID: 0x2345)
        p.temporalLayers = true
        let base = packetize(&p, [0xDE, 0xAD], timestamp: 0xAABB_CCDD, layer: 0)
        #expect(base == [[
            0x80, 0xE0, 0x12, 0x34, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44,
            0x90,  // X=1 R=0 N=0 S=1 R=0 PID=0
            0xE0,  // I=1 L=1 T=1 K=0
            0xA3, 0x45,  // M=1, PictureID 0x2345
            0x01,  // TL0PICIDX 1: the first base-layer frame
            0x00,  // TID=0 Y=0 KEYIDX=0
            0xDE, 0xAD,
        ]])
        let upper = packetize(&p, [0x42], timestamp: 0xAABB_CCDD &+ 3000, layer: 1)
        #expect(upper.first.map { Array($0[12...]) } == [
            0xB0,  // X=1 N=1 S=1
            0xE0, 0xA3, 0x46,
            0x01,  // the base frame it depends on
            0x60,  // TID=1 Y=1
            0x42,
        ])
        let next = packetize(&p, [0x43], timestamp: 0xAABB_CCDD &+ 6000, layer: 0)
        #expect(next.first.map { Array($0[12..<18]) } == [0x90, 0xE0, 0xA3, 0x47, 0x02, 0x00])
        // Our own parser reads back what the relay will look at.
        let d = try next[0].withUnsafeBytes { try VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        #expect(d.temporalLayer == 0 && d.tl0PictureIndex == 2 && d.pictureID == 0x2347 && d.size == 6)
        let u = try upper[0].withUnsafeBytes { try VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: $0[12...])) }
        #expect(u.temporalLayer == 1 && u.layerSync && u.nonReference && u.tl0PictureIndex == 1)
        // Payloads stay within the limit with the longer descriptor: 1194 data bytes a packet.
        var big = VP8Packetizer(ssrc: 1, initialSequence: 0, initialPictureID: 0)
        big.temporalLayers = true
        #expect(packetize(&big, [UInt8](repeating: 7, count: 1194), timestamp: 0).map(\.count) == [12 + 1200])
        #expect(packetize(&big, [UInt8](repeating: 7, count: 1195), timestamp: 0).count == 2)
    }

    @Test func threePacketFrameHasExactHeadersOnEveryPacket() {
        // 3000 bytes with 1196 data bytes per packet → 3 packets of 1000.
        var p = VP8Packetizer(ssrc: 0xCAFE_BABE, payloadType: 100, initialSequence: 7, initialPictureID: 0x0102)
        let frame = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let packets = packetize(&p, frame, timestamp: 90_000)
        #expect(packets.count == 3)
        guard packets.count == 3 else { return }
        // 90000 = 0x00015F90. PT 100 = 0x64, with the marker 0xE4.
        #expect(Array(packets[0][0..<16]) == [0x80, 0x64, 0x00, 0x07, 0x00, 0x01, 0x5F, 0x90, 0xCA, 0xFE, 0xBA, 0xBE, 0x90, 0x80, 0x81, 0x02])
        #expect(Array(packets[1][0..<16]) == [0x80, 0x64, 0x00, 0x08, 0x00, 0x01, 0x5F, 0x90, 0xCA, 0xFE, 0xBA, 0xBE, 0x80, 0x80, 0x81, 0x02])
        #expect(Array(packets[2][0..<16]) == [0x80, 0xE4, 0x00, 0x09, 0x00, 0x01, 0x5F, 0x90, 0xCA, 0xFE, 0xBA, 0xBE, 0x80, 0x80, 0x81, 0x02])
        #expect(packets.map(\.count) == [1016, 1016, 1016])
        #expect(Array(packets.map { $0[16...] }.joined()) == frame)
        #expect(p.packetsSent == 3)
        #expect(p.payloadBytesSent == 3 * 1004)
    }

    @Test(arguments: [
        // (frame bytes, expected data bytes per packet); 1196 = 1200 - 4-byte descriptor.
        (1, [1]),
        (1196, [1196]),
        (1197, [599, 598]),
        (2392, [1196, 1196]),
        (2393, [798, 798, 797]),
        (5000, [1000, 1000, 1000, 1000, 1000]),
        (12_000, [1091, 1091, 1091, 1091, 1091, 1091, 1091, 1091, 1091, 1091, 1090]),
    ])
    func splitsIntoBalancedPacketsOfAtMost1200PayloadBytes(frameSize: Int, sizes: [Int]) throws {
        var p = VP8Packetizer(ssrc: 1, initialSequence: 100, initialPictureID: 5)
        let frame = (0..<frameSize).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 3) }
        let packets = packetize(&p, frame, timestamp: 1234)
        #expect(packets.map { $0.count - 16 } == sizes)
        var data: [UInt8] = []
        for (i, packet) in packets.enumerated() {
            #expect(packet.count - 12 <= 1200)
            let (h, offset, length) = try parseHeader(packet)
            #expect(offset == 12 && length == packet.count - 12)
            #expect(h.marker == (i == packets.count - 1))
            #expect(h.sequenceNumber == UInt16(100 + i))
            #expect(h.timestamp == 1234 && h.ssrc == 1 && h.payloadType == 96)
            let d = try parseDescriptor(Array(packet[12...]))
            #expect(d.start == (i == 0))
            #expect(d.partitionID == 0)
            #expect(d.pictureID == 5)
            #expect(d.headerLength == 4)
            data += packet[16...]
        }
        #expect(data == frame)
    }

    @Test func honoursASmallerMaximumPayload() {
        var p = VP8Packetizer(ssrc: 1, initialSequence: 0, initialPictureID: 0, maxPayloadSize: 10)
        let frame = [UInt8](0..<13)
        let packets = packetize(&p, frame, timestamp: 0)
        // 6 data bytes per packet → 3 packets, balanced 5/4/4.
        #expect(packets.map(\.count) == [12 + 4 + 5, 12 + 4 + 4, 12 + 4 + 4])
        #expect(Array(packets.map { $0[16...] }.joined()) == frame)
    }

    @Test func sequenceNumberWrapsAt0xFFFF() throws {
        var p = VP8Packetizer(ssrc: 9, initialSequence: 0xFFFE, initialPictureID: 0)
        let packets = packetize(&p, [UInt8](repeating: 0xAA, count: 3000), timestamp: 0)
        #expect(packets.map { Array($0[2...3]) } == [[0xFF, 0xFE], [0xFF, 0xFF], [0x00, 0x00]])
        #expect(p.sequenceNumber == 1)
        #expect(try parseHeader(packets[2]).header.sequenceNumber == 0)
    }

    @Test func pictureIDIncrementsPerFrameAndWrapsAt0x7FFF() throws {
        var p = VP8Packetizer(ssrc: 9, initialSequence: 0, initialPictureID: 0x7FFE)
        let a = packetize(&p, [1], timestamp: 0)
        let b = packetize(&p, [UInt8](repeating: 2, count: 1500), timestamp: 3000)
        let c = packetize(&p, [3], timestamp: 6000)
        #expect(Array(a[0][14...15]) == [0xFF, 0xFE])
        // Both packets of one frame carry the same PictureID.
        #expect(b.map { Array($0[14...15]) } == [[0xFF, 0xFF], [0xFF, 0xFF]])
        #expect(Array(c[0][14...15]) == [0x80, 0x00])  // M=1, PictureID 0
        #expect(try parseDescriptor(Array(c[0][12...])).pictureID == 0)
        #expect(p.pictureID == 1)
        #expect(p.sequenceNumber == 4)
    }

    @Test func initialPictureIDIsMaskedTo15Bits() {
        var p = VP8Packetizer(ssrc: 9, initialSequence: 0, initialPictureID: 0xFFFF)
        #expect(p.pictureID == 0x7FFF)
        let packets = packetize(&p, [1], timestamp: 0)
        #expect(Array(packets[0][14...15]) == [0xFF, 0xFF])
    }

    @Test func emptyFrameEmitsNothingAndChangesNothing() {
        var p = VP8Packetizer(ssrc: 9, initialSequence: 10, initialPictureID: 20)
        #expect(packetize(&p, [], timestamp: 0).isEmpty)
        #expect(p.sequenceNumber == 10 && p.pictureID == 20 && p.packetsSent == 0)
    }

    @Test func randomFramesKeepTheInvariants() throws {
        var rng = SplitMix64(seed: 7741)
        var p = VP8Packetizer(ssrc: 0xABCD, initialSequence: 0xFF00, initialPictureID: 0x7F00)
        var expectedSeq: UInt16 = 0xFF00
        var expectedPicture: UInt16 = 0x7F00
        for frameIndex in 0..<600 {
            let size = Int.random(in: 1...20_000, using: &rng)
            let frame = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let ts = UInt32.random(in: 0...UInt32.max, using: &rng)
            let packets = packetize(&p, frame, timestamp: ts)
            #expect(packets.count == (size + 1195) / 1196, "frame \(frameIndex)")
            let dataSizes = packets.map { $0.count - 16 }
            #expect(dataSizes.max()! - dataSizes.min()! <= 1)
            var data: [UInt8] = []
            for (i, packet) in packets.enumerated() {
                let (h, offset, _) = try parseHeader(packet)
                let d = try parseDescriptor(Array(packet[offset...]))
                #expect(packet.count - offset <= 1200)
                #expect(h.sequenceNumber == expectedSeq)
                #expect(h.timestamp == ts)
                #expect(h.marker == (i == packets.count - 1))
                #expect(d.start == (i == 0) && d.partitionID == 0 && d.pictureID == expectedPicture)
                data += packet[(offset + d.headerLength)...]
                expectedSeq &+= 1
            }
            #expect(data == frame)
            expectedPicture = (expectedPicture + 1) & 0x7FFF
        }
        #expect(p.sequenceNumber == expectedSeq)
        #expect(p.pictureID == expectedPicture)
    }
}

/// The descriptor parser must handle every optional field of RFC 7741 §4.2.
@Suite struct VP8DescriptorParseTests {
    @Test func minimalDescriptorWithoutExtensions() throws {
        let d = try parseDescriptor([0x10, 0x9D])
        #expect(d.start && d.partitionID == 0 && d.pictureID == nil && d.headerLength == 1)
        let cont = try parseDescriptor([0x03, 0x00])
        #expect(!cont.start && cont.partitionID == 3 && cont.headerLength == 1)
    }

    @Test func sevenAndFifteenBitPictureIDs() throws {
        let seven = try parseDescriptor([0x90, 0x80, 0x7F, 0xAA])
        #expect(seven.pictureID == 0x7F && seven.headerLength == 3)
        let fifteen = try parseDescriptor([0x90, 0x80, 0xFF, 0xFE, 0xAA])
        #expect(fifteen.pictureID == 0x7FFE && fifteen.headerLength == 4)
    }

    @Test func skipsTL0PICIDXAndTIDKEYIDX() throws {
        // X with I, L, T, K: PictureID (2), TL0PICIDX (1), TID|Y|KEYIDX (1) → 6 bytes.
        let all = try parseDescriptor([0x90, 0xF0, 0x81, 0x23, 0x05, 0x40, 0xAA])
        #expect(all.pictureID == 0x0123 && all.headerLength == 6)
        // K alone still takes the TID|Y|KEYIDX byte.
        let k = try parseDescriptor([0x80, 0x10, 0x00, 0xAA])
        #expect(k.pictureID == nil && k.headerLength == 3)
        let l = try parseDescriptor([0x80, 0x40, 0x00])
        #expect(l.headerLength == 3)
    }

    @Test(arguments: [
        [UInt8](),
        [0x80],  // X, no extension byte
        [0x80, 0x80],  // I, no PictureID
        [0x80, 0x80, 0x80],  // M, second PictureID byte missing
        [0x80, 0x40],  // L, no TL0PICIDX
        [0x80, 0x20],  // T, no TID byte
        [0x80, 0xF0, 0x81, 0x23, 0x05],  // TID byte missing
    ])
    func truncatedDescriptorsThrow(_ bytes: [UInt8]) {
        #expect(throws: RTPParseError.self) { try parseDescriptor(bytes) }
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 42)
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 0...8, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if let d = try? parseDescriptor(bytes) {
                #expect(d.headerLength >= 1 && d.headerLength <= bytes.count)
            }
        }
    }

    /// What a frame costs on the wire, known before it is sent (the encode thread counts it
    /// while the send thread sends): exactly what `packetize` then emits, in every shape.
    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func theWireSizeIsWhatPacketizeEmits(layers: Bool, transportWide: Bool) {
        var p = VP8Packetizer(ssrc: 7, initialSequence: 1, initialPictureID: 1)
        p.temporalLayers = layers
        if transportWide { p.transportSequenceID = 3 }
        for bytes in [0, 1, 1100, 1173, 1174, 1175, 1200, 5_000, 64_321] {
            let predicted = p.wireSize(frameBytes: bytes)
            let packets = packetize(&p, [UInt8](repeating: 0x5A, count: bytes), timestamp: 1)
            #expect(predicted.packets == packets.count, "\(bytes) bytes")
            #expect(predicted.bytes == packets.reduce(0) { $0 + $1.count }, "\(bytes) bytes")
        }
    }
}
