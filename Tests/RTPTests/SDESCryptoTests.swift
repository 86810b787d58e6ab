import Foundation
import RTP
import Testing

/// `--srtp`'s keys in the SDP (RFC 4568 `a=crypto`): written as ffmpeg and Janus read them, read
/// back, and anything this viewer cannot decrypt refused with its name.
@Suite struct SDESCryptoTests {
    static let key = SDESCrypto(tag: 1, keySalt: Array(0..<30))

    @Test func theSDPCarriesTheKeysAsRTPSAVP() throws {
        var d = SessionDescription(destination: "127.0.0.1", videoPort: 5004, audioPort: 5006)
        d.videoCrypto = Self.key
        d.audioCrypto = SDESCrypto(tag: 1, keySalt: Array(repeating: 7, count: 30))
        let text = d.render()
        #expect(text.contains("m=video 5004 RTP/SAVP 96\r\n"))
        #expect(text.contains("m=audio 5006 RTP/SAVP 111\r\n"))
        // RFC 4568 §9.1 inline key: base64 of the 16-byte key and 14-byte salt.
        #expect(text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd\r\n"))
        let back = try ReceiveDescription.parse(text)
        #expect(back.video?.crypto == Self.key)
        #expect(back.audio?.crypto?.keySalt == Array(repeating: 7, count: 30))
        #expect(back.video?.port == 5004 && back.video?.encoding == "VP8")
        // Without keys the stream stays RTP/AVP with no a=crypto.
        let plain = SessionDescription(destination: "127.0.0.1", videoPort: 5004).render()
        #expect(plain.contains("RTP/AVP 96") && !plain.contains("crypto"))
        #expect(try ReceiveDescription.parse(plain).video?.crypto == nil)
    }

    @Test func keysAreFreshEachTime() {
        #expect(SDESCrypto.random().keySalt != SDESCrypto.random().keySalt)
        #expect(SDESCrypto.random().keySalt.count == 30)
    }

    @Test(arguments: [
        ("a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd", "suite 'AES_CM_128_HMAC_SHA1_32'"),
        ("a=crypto:1 AEAD_AES_256_GCM inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd", "suite 'AEAD_AES_256_GCM'"),
        ("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQF", "not 30 bytes"),
        ("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd|2^20|1:4", "MKI"),
        ("a=crypto:1 AES_CM_128_HMAC_SHA1_80 key:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd", "inline"),
        ("a=crypto:x", "expected TAG SUITE"),
        ("a=rtcp:5005", "no a=crypto line"),
    ])
    func whatCannotBeDecryptedIsRefusedByName(line: String, says: String) {
        let text = "v=0\r\nc=IN IP4 127.0.0.1\r\nm=video 5004 RTP/SAVP 96\r\na=rtpmap:96 VP8/90000\r\n\(line)\r\n"
        #expect { try ReceiveDescription.parse(text) } throws: { ($0 as? RTPParseError)?.description.contains(says) == true }
    }

    @Test func aLifetimeIsAccepted() throws {
        let text = "v=0\r\nm=video 5004 RTP/SAVP 96\r\na=rtpmap:96 VP8/90000\r\na=crypto:7 AES_CM_128_HMAC_SHA1_80 inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd|2^31\r\n"
        #expect(try ReceiveDescription.parse(text).video?.crypto == SDESCrypto(tag: 7, keySalt: Array(0..<30)))
    }
}
