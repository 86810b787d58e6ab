import Testing
@testable import RTP

@Suite struct ReceiveDescriptionTests {
    @Test func parsesWhatOurSenderWrites() throws {
        let text = SessionDescription(destination: "127.0.0.1", videoPort: 5004, framerate: 15).render()
        let d = try ReceiveDescription.parse(text)
        #expect(d.connectionAddress == "127.0.0.1")
        let v = try #require(d.video)
        #expect(v.port == 5004 && v.payloadType == 96 && v.encoding == "VP8" && v.clockRate == 90000 && v.rtcpPort == 5005)
        #expect(d.audio == nil)
    }

    @Test func theTransportWideSequenceNumberIsWrittenAndRead() throws {
        var description = SessionDescription(destination: "127.0.0.1", videoPort: 5004, framerate: 15)
        description.transportSequenceID = 3
        let text = description.render()
        #expect(text.contains("\r\na=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\na=rtcp-fb:96 transport-cc\r\n"))
        #expect(try ReceiveDescription.parse(text).video?.transportSequenceID == 3)
        // Another extension, a direction, and none at all.
        let other = "m=video 5004 RTP/AVP 96\na=rtpmap:96 VP8/90000\na=extmap:1 urn:ietf:params:rtp-hdrext:toffset\n" +
            "a=extmap:7/sendonly http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\n"
        #expect(try ReceiveDescription.parse(other).video?.transportSequenceID == 7)
        #expect(try ReceiveDescription.parse("m=video 5004 RTP/AVP 96\na=rtpmap:96 VP8/90000\n").video?.transportSequenceID == nil)
        #expect(throws: RTPParseError.self) { try ReceiveDescription.parse("m=video 5004 RTP/AVP 96\na=extmap:0 x\n") }
    }

    @Test func parsesAudioAndExplicitRTCPAndLF() throws {
        let text = "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=x\nc=IN IP4 239.1.1.1/32\nt=0 0\nm=video 6000 RTP/AVP 100\na=rtpmap:100 VP8/90000\n" +
            "m=audio 6002 RTP/AVP 111\na=rtpmap:111 opus/48000/2\na=rtcp:7000\n"
        let d = try ReceiveDescription.parse(text)
        #expect(d.connectionAddress == "239.1.1.1")
        #expect(d.video?.rtcpPort == 6001)
        let a = try #require(d.audio)
        #expect(a.port == 6002 && a.payloadType == 111 && a.encoding == "opus" && a.clockRate == 48000 && a.channels == 2 && a.rtcpPort == 7000)
    }

    @Test(arguments: ["m=video x RTP/AVP 96", "m=video 5004 RTP/AVP 300", "garbage", "m=video 5004 RTP/AVP 96\na=rtpmap:96 VP8", "c=IN"])
    func rejectsBadLinesNamingThem(text: String) {
        do {
            _ = try ReceiveDescription.parse(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)".contains("SDP line"))
        }
    }
}
