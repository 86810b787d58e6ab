import Testing
@testable import RTP

/// The transport-wide sequence number as an RFC 8285 header extension.
@Suite struct TransportWideSequenceTests {
    @Test func thePacketizerWritesTheBlockAndTheSenderStampsIt() {
        var p = VP8Packetizer(ssrc: 0x0A0B_0C0D, initialSequence: 7, initialPictureID: 1)
        p.transportSequenceID = 3
        let frame = [UInt8](repeating: 0x55, count: 3000)
        var buffer = [UInt8](repeating: 0, count: 1500)
        var packets: [[UInt8]] = []
        buffer.withUnsafeMutableBytes { b -> Void in
            frame.withUnsafeBytes { f -> Void in
                _ = p.packetize(frame: f, rtpTimestamp: 90, into: b) { packet in
                    TransportWideSequence.stamp(0xABCD, into: UnsafeMutableRawBufferPointer(rebasing: b[0..<packet.count]))
                    packets.append(Array(packet))
                }
            }
        }
        #expect(packets.count == 3)
        for packet in packets {
            #expect(packet.count <= 12 + 1200)
            #expect(packet[0] == 0x90)  // V=2, X
            #expect(Array(packet[12..<20]) == [0xBE, 0xDE, 0x00, 0x01, 0x31, 0xAB, 0xCD, 0x00])
            packet.withUnsafeBytes {
                #expect(TransportWideSequence.isStamped($0))
                #expect(TransportWideSequence.find(id: 3, in: $0) == 0xABCD)
                #expect(TransportWideSequence.find(id: 4, in: $0) == nil)
                // The parser skips the block: the VP8 descriptor follows it.
                let parsed = try? RTPHeader.parse($0)
                #expect(parsed?.payloadOffset == 20)
            }
        }
        #expect(packets.reduce(0) { $0 + $1.count - 24 } == 3000)  // 20-byte header + 4-byte descriptor
    }

    @Test func findReadsOtherLayoutsAndNeverPastTheBlock() {
        let header: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2]
        // One-byte form: padding, element 1 (3 bytes), element 5 (2 bytes: the number).
        let oneByte = header + [0xBE, 0xDE, 0x00, 0x02, 0x00, 0x12, 0xAA, 0xBB, 0xCC, 0x51, 0x12, 0x34]
        // Two-byte form (RFC 8285 §4.3): element 9 of 2 bytes.
        let twoByte = header + [0x10, 0x00, 0x00, 0x01, 0x09, 0x02, 0x43, 0x21]
        // A length running past the block, and one past the packet.
        let overrun = header + [0xBE, 0xDE, 0x00, 0x01, 0x5F, 0x00, 0x00, 0x00]
        let pastPacket = header + [0xBE, 0xDE, 0x00, 0x09, 0x51, 0x12, 0x34, 0x00]
        oneByte.withUnsafeBytes { #expect(TransportWideSequence.find(id: 5, in: $0) == 0x1234) }
        twoByte.withUnsafeBytes { #expect(TransportWideSequence.find(id: 9, in: $0) == 0x4321) }
        overrun.withUnsafeBytes { #expect(TransportWideSequence.find(id: 5, in: $0) == nil) }
        pastPacket.withUnsafeBytes { #expect(TransportWideSequence.find(id: 5, in: $0) == nil) }
        header.withUnsafeBytes { #expect(TransportWideSequence.find(id: 5, in: $0) == nil) }
    }
}
