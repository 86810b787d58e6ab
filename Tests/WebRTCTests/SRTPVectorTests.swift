import COpenSSL
import CSRTP
import SRTP
import Testing

/// Our SRTP (Sources/COpenSSL/srtp_evp.c, over OpenSSL's libcrypto) against the RFCs' test
/// vectors, byte for byte, and against libsrtp2 — the reference implementation browsers carry —
/// both ways. (Chromium and Firefox both ways: the browser tests, which negotiate AES-GCM.)
@Suite struct SRTPVectorTests {
    static func hex(_ s: String) -> [UInt8] {
        let digits = s.filter { !$0.isWhitespace }
        return stride(from: 0, to: digits.count, by: 2).map {
            let i = digits.index(digits.startIndex, offsetBy: $0)
            return UInt8(digits[i...digits.index(after: i)], radix: 16)!
        }
    }

    static func run(_ packet: [UInt8], room: Int = 64, _ transform: (UnsafeMutableRawBufferPointer, Int) throws -> Int) rethrows -> [UInt8] {
        var buffer = packet + [UInt8](repeating: 0, count: room)
        let n = try buffer.withUnsafeMutableBytes { try transform($0, packet.count) }
        return Array(buffer[0..<n])
    }

    /// RFC 3711 Appendix B.3: the session keys derived from a master key and salt.
    @Test func keyDerivationIsRFC3711sB3() {
        let key = Self.hex("E1F97A0D3E018BE0D64FA32C06DE4139"), salt = Self.hex("0EC675AD498AFEEBB6960B3AABE6")
        func derive(_ label: UInt8, _ length: Int) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: length)
            #expect(copenssl_srtp_derive(key, salt, 14, label, &out, length) == 0)
            return out
        }
        #expect(derive(0, 16) == Self.hex("C61E7A93744F39EE10734AFE3FF7A087"), "the cipher key")
        #expect(derive(2, 14) == Self.hex("30CBBC08863D8C85D49DB34A9AE1"), "the cipher salt")
        #expect(derive(1, 20) == Self.hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4"), "the authentication key")
    }

    /// RFC 3711 Appendix B.2: AES-CM's keystream for SSRC 0, index 0 — what a zero payload
    /// encrypts to.
    @Test func aesCMKeystreamIsRFC3711sB2() throws {
        let key = Self.hex("2B7E151628AED2A6ABF7158809CF4F3C"), salt = Self.hex("F0F1F2F3F4F5F6F7F8F9FAFBFCFD")
        let session = try SRTPSession(profile: .aes128CmHmacSha1_80, direction: .outbound,
                                      sessionKeys: (key, salt, [UInt8](repeating: 0, count: 20)),
                                      rtcp: (key, salt, [UInt8](repeating: 0, count: 20)))
        let packet: [UInt8] = [0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 48)
        let out = try Self.run(packet) { try session.protect($0, length: $1) }
        #expect(out.count == 60 + 10)
        #expect(Array(out[12..<60]) == Self.hex("""
            E03EAD0935C95E80E166B16DD92B4EB4 D23513162B02D0F72A43A2FE4A5F97AB 41E95B3BB0A2E8DD477901E4FCA894C0
            """))
    }

    static let gcmKey = hex("000102030405060708090a0b0c0d0e0f"), gcmSalt = hex("517569642070726f2071756f")

    static func rfc7714(_ direction: SRTPSession.Direction) throws -> SRTPSession {
        try SRTPSession(profile: .aeadAes128Gcm, direction: direction, sessionKeys: (gcmKey, gcmSalt, []),
                        rtcp: (gcmKey, gcmSalt, []))
    }

    /// RFC 7714 §16.1.1: AEAD_AES_128_GCM, an RTP packet (SSRC 0x5501a0b2, sequence 0xf17b).
    @Test func aesGCMPacketIsRFC7714s16() throws {
        let plain = Self.hex("""
            8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973 20646976 69736120 696e2070
            61727465 73207472 6573
            """)
        let protected = Self.hex("""
            8040f17b 8041f8d3 5501a0b2 f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5 0d294e6f 42a5f47a
            51c7d19b 36de3adf 8833899d 7f27beb1 6a9152cf 765ee439 0cce
            """)
        #expect(try Self.run(plain) { try Self.rfc7714(.outbound).protect($0, length: $1) } == protected)
        let inbound = try Self.rfc7714(.inbound)
        #expect(try Self.run(protected) { try inbound.unprotect($0, length: $1) } == plain)
        var forged = protected
        forged[20] ^= 1
        #expect(throws: SRTPError.self) { _ = try Self.run(forged) { try Self.rfc7714(.inbound).unprotect($0, length: $1) } }
    }

    /// RFC 7714 §17.1.1: AEAD_AES_128_GCM, a sender report (SSRC "Mars", SRTCP index 0x5d4): the
    /// tag follows the ciphertext, and the E flag and index follow the tag.
    @Test func aesGCMRTCPPacketIsRFC7714s17() throws {
        let plain = Self.hex("""
            81c8000d 4d617273 4e545031 4e545032 52545020 0000042a 0000e930 4c756e61 deadbeef deadbeef
            deadbeef deadbeef deadbeef
            """)
        let protected = Self.hex("""
            81c8000d 4d617273 63e94885 dcdab67c a727d766 2f6b7e99 7ff5c0f7 6c06f32d c676a5f1 730d6fda
            4ce09b46 86303ded 0bb9275b c84aa458 96cf4d2f c5abf872 45d9eade 800005d4
            """)
        let outbound = try Self.rfc7714(.outbound)
        outbound.setRTCPIndex(0x5d4, ssrc: 0x4d61_7273)
        #expect(try Self.run(plain) { try outbound.protectRTCP($0, length: $1) } == protected)
        let inbound = try Self.rfc7714(.inbound)
        #expect(try Self.run(protected) { try inbound.unprotectRTCP($0, length: $1) } == plain)
        #expect(throws: SRTPError.self, "a replay") { _ = try Self.run(protected) { try inbound.unprotectRTCP($0, length: $1) } }
    }

    /// libsrtp2's own reference packets (test/srtp_driver.c, srtp_validate and
    /// srtp_validate_gcm): keys derived from a master key, so the whole path, GCM's key
    /// derivation from a 12-byte salt included.
    @Test(arguments: [
        (SRTPProfile.aes128CmHmacSha1_80, "e1f97a0d3e018be0d64fa32c06de41390ec675ad498afeebb6960b3aabe6",
         "800f1234decafbadcafebabe4e55dc4ce79978d88ca4d215949d2402b78d6acc99ea179b8dbb",
         "81c8000bcafebabe7128035be487b9bdbef89041f977a5a880000001993e08cd54d6c1230798"),
        (SRTPProfile.aeadAes128Gcm, "000102030405060708090a0b0c0d0e0fa0a1a2a3a4a5a6a7a8a9aaab",
         "800f1234decafbadcafebabec5002ede04cfdd2eb91159e0880aa06ed2976826f796b201df3131a127e8a392",
         "81c8000bcafebabec98b8b5df0392a55852b6c21ac8e7025c52c6fbea2b3b446ea31123ba88ce61e80000001"),
    ])
    func libsrtp2sReferencePackets(profile: SRTPProfile, master: String, srtp: String, srtcp: String) throws {
        let m = Self.hex(master)
        let key = Array(m[0..<16]), salt = Array(m[16...])
        let rtp = Self.hex("800f1234decafbadcafebabe") + [UInt8](repeating: 0xAB, count: 16)
        let rtcp = Self.hex("81c8000bcafebabe") + [UInt8](repeating: 0xAB, count: 16)
        let send = try SRTPSession(profile: profile, direction: .outbound, key: key, salt: salt)
        send.setRTCPIndex(1, ssrc: 0xCAFE_BABE)  // libsrtp2 numbers SRTCP from 1
        #expect(try Self.run(rtp) { try send.protect($0, length: $1) } == Self.hex(srtp))
        #expect(try Self.run(rtcp) { try send.protectRTCP($0, length: $1) } == Self.hex(srtcp))
        let receive = try SRTPSession(profile: profile, direction: .inbound, key: key, salt: salt)
        #expect(try Self.run(Self.hex(srtp)) { try receive.unprotect($0, length: $1) } == rtp)
        #expect(try Self.run(Self.hex(srtcp)) { try receive.unprotectRTCP($0, length: $1) } == rtcp)
    }

    /// Packets as the relay sends them: CSRCs, a header extension (RFC 8285), padding; sequence
    /// numbers that roll over (the ROC), a resend, two SSRCs.
    static func packets() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var seq: UInt16 = 65_500
        for i in 0..<200 {
            let ssrc: UInt32 = i % 3 == 0 ? 0x0A0B_0C0D : 0x1122_3344
            var p: [UInt8] = [i % 5 == 0 ? 0x91 : 0x90, 96, UInt8(seq >> 8), UInt8(seq & 0xFF), 0, 0, UInt8(i), 0,
                              UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)]
            if i % 5 == 0 { p += [0, 0, 0, 7] }                       // one CSRC
            p += [0xBE, 0xDE, 0, 1, 0x12, UInt8(i), UInt8(seq & 0xFF), 0]  // a one-byte extension
            p += (0..<(40 + i * 7 % 1100)).map { UInt8(($0 * 31 + i) & 0xFF) }
            out.append(p)
            if i % 3 != 0 { seq &+= 1 }
        }
        out.append(out[150])  // a resend, as the relay answers a NACK
        return out
    }

    static let rtcpPackets: [[UInt8]] = (0..<20).map { i in
        [0x81, 201, 0, 7, 0x11, 0x22, 0x33, 0x44] + (0..<24).map { UInt8(($0 + i) & 0xFF) }
    }

    /// Ours protects, libsrtp2 opens; libsrtp2 protects, ours opens: RTP across a rollover, and
    /// SRTCP. AES-CM only: libsrtp2 opened in this test process refuses an AES-GCM policy
    /// (`srtp_create`: init_fail), though the same library linked into a small C program takes
    /// one. AES-GCM is checked against RFC 7714's packets, libsrtp2's own reference packets
    /// (above), and Chromium and Firefox, which agree it with the relay.
    @Test(arguments: [SRTPProfile.aes128CmHmacSha1_80])
    func libsrtp2ReadsOursAndWeReadItsBothWays(profile: SRTPProfile) throws {
        let key = (0..<16).map { UInt8($0 &* 13 &+ 5) }, salt = (0..<profile.saltLength).map { UInt8($0 &* 7 &+ 1) }
        let ours = try SRTPSession(profile: profile, direction: .outbound, key: key, salt: salt)
        let theirsIn = try LibSRTP2(profile: profile, inbound: true, key: key + salt)
        var sent: [[UInt8]] = []
        for (i, p) in Self.packets().enumerated() {
            let wire = try Self.run(p) { try ours.protect($0, length: $1) }
            sent.append(wire)
            #expect(wire.count == p.count + profile.rtpOverhead)
            if i == 200 {  // the resend: protected with the same index, so the same bytes
                #expect(wire == sent[150])
                continue
            }
            let back = try Self.run(wire) { try theirsIn.call($0, $1, srtp_unprotect) }
            #expect(back == p, "libsrtp2 opens our packet \(p[2]) \(p[3])")
        }
        for p in Self.rtcpPackets {
            let wire = try Self.run(p) { try ours.protectRTCP($0, length: $1) }
            #expect(try Self.run(wire) { try theirsIn.call($0, $1, srtp_unprotect_rtcp) } == p)
        }

        let theirsOut = try LibSRTP2(profile: profile, inbound: false, key: key + salt)
        let oursIn = try SRTPSession(profile: profile, direction: .inbound, key: key, salt: salt)
        var opened = 0
        for (i, p) in Self.packets().enumerated() {
            let wire = try Self.run(p) { try theirsOut.call($0, $1, srtp_protect) }
            if i == 200 {  // the resend: the same bytes again are a replay to a receiver
                #expect(throws: SRTPError.self) { _ = try Self.run(wire) { try oursIn.unprotect($0, length: $1) } }
                continue
            }
            #expect(try Self.run(wire) { try oursIn.unprotect($0, length: $1) } == p)
            opened += 1
        }
        #expect(opened == 200)
        for p in Self.rtcpPackets {
            let wire = try Self.run(p) { try theirsOut.call($0, $1, srtp_protect_rtcp) }
            #expect(try Self.run(wire) { try oursIn.unprotectRTCP($0, length: $1) } == p)
        }
    }

    /// A resend up to 1,023 packets late is taken once; twice, or later than that, it is refused.
    @Test func theReplayWindowIsAThousandPackets() throws {
        let key = [UInt8](repeating: 3, count: 16), salt = [UInt8](repeating: 4, count: 12)
        let send = try SRTPSession(profile: .aeadAes128Gcm, direction: .outbound, key: key, salt: salt)
        let receive = try SRTPSession(profile: .aeadAes128Gcm, direction: .inbound, key: key, salt: salt)
        func packet(_ seq: UInt16) -> [UInt8] { [0x80, 96, UInt8(seq >> 8), UInt8(seq & 0xFF), 0, 0, 0, 0, 1, 2, 3, 4, 9, 9] }
        var wire: [UInt16: [UInt8]] = [:]
        for seq in UInt16(0)...2000 { wire[seq] = try Self.run(packet(seq)) { try send.protect($0, length: $1) } }
        for seq in UInt16(0)...2000 where seq != 990 && seq != 970 {
            #expect(try Self.run(wire[seq]!) { try receive.unprotect($0, length: $1) } == packet(seq))
        }
        #expect(try Self.run(wire[990]!) { try receive.unprotect($0, length: $1) } == packet(990), "1,010 behind: taken")
        #expect(throws: SRTPError.self, "again: a replay") { _ = try Self.run(wire[990]!) { try receive.unprotect($0, length: $1) } }
        #expect(throws: SRTPError.self, "1,030 behind, never seen: out of the window") {
            _ = try Self.run(wire[970]!) { try receive.unprotect($0, length: $1) }
        }
        #expect(throws: SRTPError.self, "seen") { _ = try Self.run(wire[1500]!) { try receive.unprotect($0, length: $1) } }
    }

    /// Garbage is refused with a reason and changes nothing.
    @Test(arguments: [SRTPProfile.aes128CmHmacSha1_80, .aeadAes128Gcm])
    func garbageIsRefused(profile: SRTPProfile) throws {
        let receive = try SRTPSession(profile: profile, direction: .inbound, key: [UInt8](repeating: 1, count: 16),
                                      salt: [UInt8](repeating: 2, count: profile.saltLength))
        for bytes: [UInt8] in [[0x80, 96, 0, 1], [0x90, 96, 0, 1, 0, 0, 0, 0, 1, 2, 3, 4, 0xBE, 0xDE, 0xFF, 0xFF] + [UInt8](repeating: 0, count: 30),
                               [UInt8](repeating: 0, count: 40), [0x80, 200, 0, 1, 1, 2, 3, 4]] {
            #expect(throws: SRTPError.self) { _ = try Self.run(bytes) { try receive.unprotect($0, length: $1) } }
            #expect(throws: SRTPError.self) { _ = try Self.run(bytes) { try receive.unprotectRTCP($0, length: $1) } }
        }
    }
}

/// libsrtp2 (the reference) for one direction: what the tests check ours against.
final class LibSRTP2 {
    private var session: srtp_t?

    init(profile: SRTPProfile, inbound: Bool, key: [UInt8]) throws {
        if let reason = csrtp_load() { throw SRTPError("libsrtp2: \(String(cString: reason))") }
        _ = srtp_init()
        var policy = srtp_policy_t()
        if profile == .aeadAes128Gcm {
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        } else {
            shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp)
            shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp)
        }
        policy.ssrc.type = inbound ? ssrc_any_inbound : ssrc_any_outbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 1
        var master = key + [UInt8](repeating: 0, count: 46 - key.count)  // libsrtp2 reads up to 46 bytes (AES-256 + salt)
        let status = master.withUnsafeMutableBufferPointer { b in
            policy.key = b.baseAddress
            return srtp_create(&session, &policy)
        }
        guard status == srtp_err_status_ok else { throw SRTPError("libsrtp2 refuses the policy: \(status.rawValue)") }
    }

    deinit { if let session { srtp_dealloc(session) } }

    func call(_ b: UnsafeMutableRawBufferPointer, _ length: Int,
              _ f: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t) throws -> Int {
        var n = Int32(length)
        let status = f(session, b.baseAddress, &n)
        guard status == srtp_err_status_ok else { throw SRTPError("libsrtp2: status \(status.rawValue)") }
        return Int(n)
    }
}
