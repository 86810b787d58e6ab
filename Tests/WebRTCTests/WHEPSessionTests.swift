import Foundation
import Testing
import TestSupport
@testable import WebRTC

/// Reading browsers' WHEP offers and answering them.
@Suite struct WHEPSessionTests {
    /// What Chromium offers for `addTransceiver('video'|'audio', {direction: 'recvonly'})`
    /// (trimmed of extmaps and codecs that change nothing here, with its RTX, RED and H.264).
    static let chromiumOffer = """
    v=0
    o=- 4611731400430051336 2 IN IP4 127.0.0.1
    s=-
    t=0 0
    a=group:BUNDLE 0 1
    a=extmap-allow-mixed
    a=msid-semantic: WMS
    m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 45 46
    c=IN IP4 0.0.0.0
    a=rtcp:9 IN IP4 0.0.0.0
    a=ice-ufrag:hT8x
    a=ice-pwd:7qGJjTHv8w0ewv1Xr6gN0dT2
    a=ice-options:trickle
    a=fingerprint:sha-256 2C:1F:8A:7B:03:44:F2:AE:09:4C:51:FD:D6:38:91:28:6F:1B:C7:30:8E:AA:55:12:0B:39:E6:C4:52:7A:44:90
    a=setup:actpass
    a=mid:0
    a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
    a=recvonly
    a=rtcp-mux
    a=rtcp-rsize
    a=rtpmap:96 VP8/90000
    a=rtcp-fb:96 goog-remb
    a=rtcp-fb:96 transport-cc
    a=rtcp-fb:96 ccm fir
    a=rtcp-fb:96 nack
    a=rtcp-fb:96 nack pli
    a=rtpmap:97 rtx/90000
    a=fmtp:97 apt=96
    a=rtpmap:102 H264/90000
    a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
    a=rtpmap:103 rtx/90000
    a=fmtp:103 apt=102
    a=rtpmap:45 AV1/90000
    a=rtpmap:46 rtx/90000
    a=fmtp:46 apt=45
    m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8
    c=IN IP4 0.0.0.0
    a=rtcp:9 IN IP4 0.0.0.0
    a=ice-ufrag:hT8x
    a=ice-pwd:7qGJjTHv8w0ewv1Xr6gN0dT2
    a=ice-options:trickle
    a=fingerprint:sha-256 2C:1F:8A:7B:03:44:F2:AE:09:4C:51:FD:D6:38:91:28:6F:1B:C7:30:8E:AA:55:12:0B:39:E6:C4:52:7A:44:90
    a=setup:actpass
    a=mid:1
    a=recvonly
    a=rtcp-mux
    a=rtpmap:111 opus/48000/2
    a=rtcp-fb:111 transport-cc
    a=fmtp:111 minptime=10;useinbandfec=1
    a=rtpmap:63 red/48000/2
    a=fmtp:63 111/111
    a=rtpmap:9 G722/8000
    a=rtpmap:0 PCMU/8000
    a=rtpmap:8 PCMA/8000

    """.replacingOccurrences(of: "\n", with: "\r\n")

    /// Firefox puts audio first, ICE credentials and the fingerprint at session level, and
    /// numbers VP8 120.
    static let firefoxOffer = """
    v=0
    o=mozilla...THIS_IS_SDPARTA-99.0 7052848360639826063 0 IN IP4 0.0.0.0
    s=-
    t=0 0
    a=fingerprint:sha-256 0A:5F:12:B4:99:03:C1:7D:2E:88:4A:6B:F0:11:23:9C:AD:0E:7F:31:52:64:C8:9B:1D:E2:73:84:95:A6:B7:C8
    a=group:BUNDLE 0 1
    a=ice-options:trickle
    a=msid-semantic:WMS *
    a=ice-ufrag:9f2c1a7e
    a=ice-pwd:4b8e9d2c7a1f3e6b5d4c9a8e7f6b5a4c
    a=setup:actpass
    m=audio 9 UDP/TLS/RTP/SAVPF 109 9 0 8 101
    c=IN IP4 0.0.0.0
    a=mid:0
    a=recvonly
    a=rtcp-mux
    a=rtpmap:109 opus/48000/2
    a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1
    a=rtpmap:101 telephone-event/8000
    m=video 9 UDP/TLS/RTP/SAVPF 120 124 121 125 126 127 97 98
    c=IN IP4 0.0.0.0
    a=mid:1
    a=recvonly
    a=rtcp-mux
    a=rtcp-fb:120 nack
    a=rtcp-fb:120 nack pli
    a=rtcp-fb:120 ccm fir
    a=rtcp-fb:120 goog-remb
    a=rtcp-fb:120 transport-cc
    a=rtpmap:120 VP8/90000
    a=rtpmap:124 rtx/90000
    a=fmtp:124 apt=120
    a=rtpmap:121 VP9/90000
    a=rtpmap:126 H264/90000
    """

    let fingerprint = SDPOffer.Fingerprint(algorithm: "sha-256", bytes: Array(0..<32))

    @Test func readsChromiumsOffer() throws {
        let offer = try SDPOffer(parsing: Self.chromiumOffer)
        #expect(offer.iceUfrag == "hT8x" && offer.icePassword == "7qGJjTHv8w0ewv1Xr6gN0dT2")
        #expect(offer.fingerprint.bytes.count == 32 && offer.fingerprint.bytes.first == 0x2C && offer.setup == "actpass")
        #expect(offer.bundle == ["0", "1"])
        #expect(offer.media.map(\.kind) == ["video", "audio"])
        #expect(offer.media[0].payloadType(for: "VP8", clock: 90_000) == 96)
        #expect(offer.media[1].payloadType(for: "opus", clock: 48_000) == 111)
        #expect(offer.media[0].feedback[96] == ["goog-remb", "transport-cc", "ccm fir", "nack", "nack pli"])
        #expect(offer.media[0].extensions == [WHEPAnswer.transportSequenceURI: 3] && offer.media[1].extensions.isEmpty)
    }

    /// transport-cc is answered with its header extension in the browser's ID (the browser then
    /// sends transport feedback: the relay estimates its link); offered without the extension
    /// (Firefox's offer here), it is not answered at all.
    @Test func transportWideFeedbackIsAgreedOnlyWithItsExtension() throws {
        let chromium = try WHEPAnswer(offer: SDPOffer(parsing: Self.chromiumOffer), videoSSRC: 1, audioSSRC: 2)
        #expect(chromium.media[0].transportSequenceID == 3 && chromium.media[0].feedback.contains("transport-cc"))
        let text = chromium.render(iceUfrag: "u", icePassword: "p", fingerprint: fingerprint, host: "127.0.0.1", port: 7600, cname: "c", sessionID: 1)
        let lines = text.components(separatedBy: "\r\n")
        #expect(lines.contains("a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"))
        #expect(lines.contains("a=rtcp-fb:96 transport-cc"))
        #expect(lines.filter { $0.hasPrefix("a=extmap") }.count == 1, "only in the video section:\n\(text)")
        // Another ID, as the browser numbers it.
        let renumbered = try WHEPAnswer(offer: SDPOffer(parsing: Self.chromiumOffer.replacingOccurrences(of: "a=extmap:3 ", with: "a=extmap:11/recvonly ")),
                                        videoSSRC: 1, audioSSRC: 2)
        #expect(renumbered.media[0].transportSequenceID == 11)
        let firefox = try WHEPAnswer(offer: SDPOffer(parsing: Self.firefoxOffer), videoSSRC: 1, audioSSRC: 2)
        #expect(firefox.media[1].transportSequenceID == nil && !firefox.media[1].feedback.contains("transport-cc"))
        // IDs outside the one-byte form (15 is reserved; two-byte IDs) are not taken.
        let twoByte = try SDPOffer(parsing: Self.chromiumOffer.replacingOccurrences(of: "a=extmap:3 ", with: "a=extmap:200 "))
        #expect(twoByte.media[0].extensions.isEmpty)
        // A malformed ID (found by the fuzzer: "/" alone split into nothing and trapped) is skipped.
        for bad in ["a=extmap:/ ", "a=extmap:/3 ", "a=extmap: ", "a=extmap:3/ "] {
            let offer = try SDPOffer(parsing: Self.chromiumOffer.replacingOccurrences(of: "a=extmap:3 ", with: bad))
            #expect(offer.media[0].extensions.values.contains(3) == (bad == "a=extmap:3/ "), "\(bad)")
        }
    }

    @Test func answersChromiumInItsPayloadTypes() throws {
        let answer = try WHEPAnswer(offer: SDPOffer(parsing: Self.chromiumOffer), videoSSRC: 0x1111, audioSSRC: 0x2222)
        let text = answer.render(iceUfrag: "relayU", icePassword: "relay-password-0123456789", fingerprint: fingerprint,
                                 host: "192.168.1.20", port: 7600, cname: "screenshare-1@host", sessionID: 42)
        let lines = text.components(separatedBy: "\r\n")
        #expect(text.hasSuffix("\r\n"))
        for expected in [
            "a=group:BUNDLE 0 1", "a=ice-lite", "m=video 7600 UDP/TLS/RTP/SAVPF 96", "a=rtpmap:96 VP8/90000",
            "a=rtcp-fb:96 nack", "a=rtcp-fb:96 nack pli", "a=rtcp-fb:96 ccm fir", "a=setup:passive", "a=sendonly", "a=rtcp-mux",
            "m=audio 7600 UDP/TLS/RTP/SAVPF 111", "a=rtpmap:111 opus/48000/2", "a=ice-ufrag:relayU",
            "a=ice-pwd:relay-password-0123456789", "a=fingerprint:sha-256 " + (0..<32).map { String(format2($0)) }.joined(separator: ":"),
            "a=candidate:1 1 udp 2130706431 192.168.1.20 7600 typ host", "a=end-of-candidates", "a=ssrc:4369 cname:screenshare-1@host",
        ] {
            #expect(lines.contains(expected), "missing \(expected) in\n\(text)")
        }
        // Nothing the relay does not send: no RTX, no H.264.
        #expect(!text.contains("rtx") && !text.contains("H264"))
        // It reads back as an SDP with the same credentials.
        let back = try SDPOffer(parsing: text)
        #expect(back.iceUfrag == "relayU" && back.fingerprint == fingerprint && back.setup == "passive")
    }

    /// FEC for the browser: RED and ULPFEC answered in the browser's numbers when the relay
    /// may send FEC and the browser offered both (as Chromium does, RED with its own RTX);
    /// otherwise neither.
    @Test func redAndULPFECAreAnsweredOnlyWhenBothAreOfferedAndFECIsOn() throws {
        let withFEC = Self.chromiumOffer
            .replacingOccurrences(of: "SAVPF 96 97 102 103 45 46", with: "SAVPF 96 97 102 103 45 46 123 124 127")
            .replacingOccurrences(of: "a=fmtp:46 apt=45\r\n",
                                  with: "a=fmtp:46 apt=45\r\na=rtpmap:123 red/90000\r\na=rtpmap:124 rtx/90000\r\na=fmtp:124 apt=123\r\na=rtpmap:127 ulpfec/90000\r\n")
        let answer = try WHEPAnswer(offer: SDPOffer(parsing: withFEC), videoSSRC: 1, audioSSRC: 2, fec: true)
        #expect(answer.media[0].redPT == 123 && answer.media[0].ulpfecPT == 127)
        let text = answer.render(iceUfrag: "relayU", icePassword: "relay-password-0123456789", fingerprint: fingerprint,
                                 host: "127.0.0.1", port: 7600, cname: "c", sessionID: 1)
        let lines = text.components(separatedBy: "\r\n")
        for expected in ["m=video 7600 UDP/TLS/RTP/SAVPF 96 123 127", "a=rtpmap:123 red/90000", "a=rtpmap:127 ulpfec/90000"] {
            #expect(lines.contains(expected), "missing \(expected) in\n\(text)")
        }
        #expect(!text.contains("rtx") && !lines.contains { $0.hasPrefix("a=rtcp-fb:123") })
        #expect(try SDPOffer(parsing: text).media[0].payloadType(for: "ulpfec", clock: 90_000) == 127)
        let off = try WHEPAnswer(offer: SDPOffer(parsing: withFEC), videoSSRC: 1, audioSSRC: 2, fec: false)
        #expect(off.media[0].redPT == nil && off.media[0].ulpfecPT == nil)
        let redOnly = try WHEPAnswer(offer: SDPOffer(parsing: withFEC.replacingOccurrences(of: "ulpfec/90000", with: "flexfec-03/90000")),
                                     videoSSRC: 1, audioSSRC: 2, fec: true)
        #expect(redOnly.media[0].redPT == nil)
        // Opus's RED (audio) is never answered.
        #expect(answer.media[1].redPT == nil && !text.contains("red/48000"))
    }

    @Test func answersFirefoxWithAudioFirstAndVP8At120() throws {
        let answer = try WHEPAnswer(offer: SDPOffer(parsing: Self.firefoxOffer), videoSSRC: 1, audioSSRC: 2)
        #expect(answer.media.map(\.kind) == ["audio", "video"])
        #expect(answer.media.map(\.payloadType) == [109, 120])
        #expect(answer.offer.iceUfrag == "9f2c1a7e")
    }

    @Test(arguments: [
        ("", "no v=0"),
        ("v=0\r\n", "no media sections"),
        ("v=1\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\n", "only version 0"),
        ("v=0\r\nthis is not sdp\r\n", "is not TYPE=VALUE"),
        (chromiumOffer.replacingOccurrences(of: "a=mid:1\r\n", with: ""), "has no a=mid"),
        (chromiumOffer.replacingOccurrences(of: "a=ice-pwd:7qGJjTHv8w0ewv1Xr6gN0dT2\r\n", with: ""), "no a=ice-ufrag and a=ice-pwd"),
        (chromiumOffer.replacingOccurrences(of: "a=fingerprint:sha-256", with: "a=fingerprint:sha-1"), "sha-256"),
        (chromiumOffer.replacingOccurrences(of: "a=fingerprint:sha-256 2C:", with: "a=fingerprint:sha-256 ZZ:"), "not a hex byte"),
        (chromiumOffer.replacingOccurrences(of: "96 97 102", with: "960 97 102"), "is not 0–127"),
        (String(repeating: "a=x\r\n", count: 20_000), "bytes (at most"),
    ])
    func refusesBrokenOffersSayingWhy(text: String, why: String) {
        do {
            _ = try SDPOffer(parsing: text)
            Issue.record("parsed a broken offer (\(why))")
        } catch {
            #expect("\(error)".contains(why), "\(error)")
        }
    }

    @Test(arguments: [
        (chromiumOffer.replacingOccurrences(of: "a=rtpmap:96 VP8/90000", with: "a=rtpmap:96 VP9/90000"), "has no VP8/90000"),
        (chromiumOffer.replacingOccurrences(of: "a=rtpmap:111 opus/48000/2", with: "a=rtpmap:111 ISAC/16000"), "has no opus"),
        (chromiumOffer.replacingOccurrences(of: "m=video", with: "m=text"), "receives no video"),
        (chromiumOffer.replacingOccurrences(of: "a=recvonly\r\na=rtcp-mux\r\na=rtcp-rsize", with: "a=sendonly\r\na=rtcp-mux"),
         "receives no video"),
        (chromiumOffer.replacingOccurrences(of: "a=rtcp-mux\r\na=rtcp-rsize", with: "a=rtcp-rsize"), "without a=rtcp-mux"),
        (chromiumOffer.replacingOccurrences(of: "a=group:BUNDLE 0 1", with: "a=group:BUNDLE 1"), "not in the offer's BUNDLE"),
    ])
    func refusesOffersItCannotServeSayingWhatIsMissing(text: String, why: String) throws {
        let offer = try SDPOffer(parsing: text)
        do {
            _ = try WHEPAnswer(offer: offer, videoSSRC: 1, audioSSRC: 2)
            Issue.record("answered (\(why))")
        } catch {
            #expect("\(error)".contains(why), "\(error)")
        }
    }

    /// Mutated offers: refused with a reason or answered, never a crash.
    @Test func fuzzedOffersNeverCrash() {
        var rng = SplitMix64(seed: 0x0FFE)
        let seeds = [Array(Self.chromiumOffer.utf8), Array(Self.firefoxOffer.utf8)]
        let alphabet = Array("=: \r\n0123456789abcdefvmaoAV/-;".utf8)
        var answered = 0
        for i in 0..<4_000 {
            var bytes = seeds[i % 2]
            for _ in 0...(rng.next() % 8) {
                let at = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[at] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: at)
                }
            }
            if let offer = try? SDPOffer(parsing: String(decoding: bytes, as: UTF8.self)),
               (try? WHEPAnswer(offer: offer, videoSSRC: 1, audioSSRC: 2)) != nil {
                answered += 1
            }
        }
        #expect(answered > 0)
    }
}

private func format2(_ b: Int) -> String { b < 16 ? "0" + String(b, radix: 16, uppercase: true) : String(b, radix: 16, uppercase: true) }
