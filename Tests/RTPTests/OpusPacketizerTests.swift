import RTP
import Testing

@Suite struct OpusPacketizerTests {
    @Test func packetBytesFollowRFC7587() {
        var p = OpusPacketizer(ssrc: 0x1122_3344, initialSequence: 0xFFFF)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { buffer.deallocate() }
        let opus: [UInt8] = [0xFC, 0xFF, 0xFE, 0x01]
        // First packet: marker (start of a talkspurt), PT 111, the Opus packet as the whole payload.
        let first = opus.withUnsafeBytes { Array(p.packetize(opus: $0, rtpTimestamp: 0xAABB_CCDD, into: buffer)!) }
        #expect(first == [0x80, 0x80 | 111, 0xFF, 0xFF, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44, 0xFC, 0xFF, 0xFE, 0x01])
        // Next 20 ms: no marker, sequence wraps to 0, timestamp + 960 (48 kHz clock).
        let second = opus.withUnsafeBytes { Array(p.packetize(opus: $0, rtpTimestamp: 0xAABB_CCDD &+ 960, into: buffer)!) }
        #expect(second == [0x80, 111, 0x00, 0x00, 0xAA, 0xBB, 0xD0, 0x9D, 0x11, 0x22, 0x33, 0x44, 0xFC, 0xFF, 0xFE, 0x01])
        // A frame left out for DTX: the sequence number does not move; the next packet is marked.
        p.skipped()
        let third = [UInt8]([0x08]).withUnsafeBytes { Array(p.packetize(opus: $0, rtpTimestamp: 2880, into: buffer)!) }
        #expect(third == [0x80, 0x80 | 111, 0x00, 0x01, 0x00, 0x00, 0x0B, 0x40, 0x11, 0x22, 0x33, 0x44, 0x08])
        #expect(p.packetsSent == 3 && p.payloadBytesSent == 9)
        // Nothing to send for an empty packet.
        #expect([UInt8]().withUnsafeBytes { p.packetize(opus: $0, rtpTimestamp: 0, into: buffer) } == nil)
    }

    @Test func packetsParseBackToTheirHeader() throws {
        var p = OpusPacketizer(ssrc: 7, payloadType: 100, initialSequence: 5)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { buffer.deallocate() }
        let opus = [UInt8](repeating: 0x5A, count: 200)
        let packet = try #require(opus.withUnsafeBytes { p.packetize(opus: $0, rtpTimestamp: 1234, into: buffer) })
        let (h, offset, length) = try RTPHeader.parse(packet)
        #expect(h == RTPHeader(marker: true, payloadType: 100, sequenceNumber: 5, timestamp: 1234, ssrc: 7))
        #expect(offset == 12 && length == 200)
    }
}

@Suite struct AudioSessionDescriptionTests {
    @Test func audioSectionFollowsRFC7587() {
        let sdp = SessionDescription(destination: "127.0.0.1", videoPort: 5004, framerate: 15, audioPort: 5006).render()
        #expect(sdp == [
            "v=0", "o=- 0 1 IN IP4 127.0.0.1", "s=screenshare", "c=IN IP4 127.0.0.1", "t=0 0",
            "m=video 5004 RTP/AVP 96", "a=rtpmap:96 VP8/90000", "a=rtcp:5005", "a=framerate:15", "a=content:slides", "a=recvonly",
            "m=audio 5006 RTP/AVP 111", "a=rtpmap:111 opus/48000/2", "a=fmtp:111 minptime=10;useinbandfec=1", "a=rtcp:5007",
            "a=recvonly",
        ].joined(separator: "\r\n") + "\r\n")
    }

    @Test func videoOnlyHasNoAudioSection() {
        let sdp = SessionDescription(destination: "::1", videoPort: 6000).render()
        #expect(!sdp.contains("m=audio") && !sdp.contains("opus"))
        #expect(sdp.contains("c=IN IP6 ::1\r\n"))
    }
}
