import Testing
@testable import RTP

/// The SDP (RFC 8866) that ffmpeg/ffplay (`-protocol_whitelist file,udp,rtp -i stream.sdp`)
/// and GStreamer's sdpdemux read: version, origin, session name, connection, timing, one
/// video media line for VP8 on payload type 96 at 90 kHz (RFC 7741 §6.1).
@Suite struct SessionDescriptionTests {
    @Test func rendersTheExactTextForIPv4WithFramerate() {
        let sdp = SessionDescription(destination: "127.0.0.1", videoPort: 5004, framerate: 15, sessionID: 42)
        #expect(sdp.render() == """
            v=0\r
            o=- 42 1 IN IP4 127.0.0.1\r
            s=screenshare\r
            c=IN IP4 127.0.0.1\r
            t=0 0\r
            m=video 5004 RTP/AVP 96\r
            a=rtpmap:96 VP8/90000\r
            a=rtcp:5005\r
            a=framerate:15\r
            a=content:slides\r
            a=recvonly\r

            """)
    }

    @Test func omitsFramerateWhenNotGivenAndUsesThePayloadType() {
        let sdp = SessionDescription(destination: "239.1.2.3", videoPort: 40000, videoPayloadType: 100, sessionID: 7)
        #expect(sdp.render() == """
            v=0\r
            o=- 7 1 IN IP4 239.1.2.3\r
            s=screenshare\r
            c=IN IP4 239.1.2.3\r
            t=0 0\r
            m=video 40000 RTP/AVP 100\r
            a=rtpmap:100 VP8/90000\r
            a=rtcp:40001\r
            a=content:slides\r
            a=recvonly\r

            """)
        #expect(!sdp.render().contains("a=framerate"))
    }

    @Test func ipv6DestinationUsesIP6() {
        let text = SessionDescription(destination: "::1", videoPort: 5004, sessionID: 1).render()
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        #expect(lines[1] == "o=- 1 1 IN IP6 ::1")
        #expect(lines[3] == "c=IN IP6 ::1")
    }

    @Test(arguments: [
        SessionDescription(destination: "10.0.0.2", videoPort: 5004),
        SessionDescription(destination: "192.168.1.20", videoPort: 65534, framerate: 60, sessionID: UInt64.max),
        SessionDescription(destination: "fe80::1", videoPort: 1, videoPayloadType: 127, framerate: 1),
    ])
    func everyLineEndsInCRLFAndTheOrderIsRFC8866s(_ sdp: SessionDescription) {
        let text = sdp.render()
        #expect(text.hasSuffix("\r\n"))
        // No bare LF and no bare CR: every line end is CRLF.
        let bytes = Array(text.utf8)
        for (i, b) in bytes.enumerated() {
            if b == 0x0A { #expect(i > 0 && bytes[i - 1] == 0x0D) }
            if b == 0x0D { #expect(i + 1 < bytes.count && bytes[i + 1] == 0x0A) }
        }
        let lines = text.split(separator: "\r\n").map(String.init)
        // RFC 8866 §5: session-level v, o, s, (c), t in this order before the first m= line.
        #expect(lines.map { $0.prefix(2) }.prefix(6) == ["v=", "o=", "s=", "c=", "t=", "m="])
        #expect(lines.allSatisfy { $0.count >= 2 && $0.dropFirst().first == "=" })
        #expect(lines.contains("m=video \(sdp.videoPort) RTP/AVP \(sdp.videoPayloadType)"))
        #expect(lines.contains("a=rtpmap:\(sdp.videoPayloadType) VP8/90000"))
        #expect(lines.contains("a=rtcp:\(Int(sdp.videoPort) + 1)"))
        #expect(lines.filter { $0.hasPrefix("a=framerate:") } == (sdp.framerate.map { ["a=framerate:\($0)"] } ?? []))
        #expect(lines.filter { $0.hasPrefix("m=") }.count == 1)
    }
}
