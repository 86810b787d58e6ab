import SRTP
import Testing
@testable import WebRTC

/// SRTP with keys from a real DTLS handshake: what one side protects only the other side's
/// matching key opens; replays and forgeries are refused.
@Suite struct SRTPTests {
    /// A DTLS handshake in memory (client and server), for its exported keys.
    func handshake(profiles: [SRTPProfile] = [.aes128CmHmacSha1_80]) throws -> SRTPKeyMaterial {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint, profiles: profiles)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint, profiles: profiles)
        client.start()
        for _ in 0..<10 {
            if let d = client.takeOutgoing() { d.withUnsafeBytes { _ = server.receive($0) } }
            if let d = server.takeOutgoing() { d.withUnsafeBytes { _ = client.receive($0) } }
        }
        return try #require(server.keys)
    }

    /// An RTP packet: V=2, PT 96, the sequence number, timestamp and SSRC, then a payload.
    func rtp(sequence: UInt16, payload: [UInt8]) -> [UInt8] {
        [0x80, 96, UInt8(sequence >> 8), UInt8(sequence & 0xFF), 0, 0, 0x10, 0, 0xDE, 0xAD, 0xBE, 0xEF] + payload
    }

    @Test func theRelaysPacketsOpenWithTheBrowsersKeyOnly() throws {
        let keys = try handshake()
        #expect(keys.profile == .aes128CmHmacSha1_80)
        // The relay (DTLS server) writes with the server key; the browser reads with it.
        let send = try SRTPSession(profile: keys.profile, direction: .outbound, key: keys.serverKey, salt: keys.serverSalt)
        let receive = try SRTPSession(profile: keys.profile, direction: .inbound, key: keys.serverKey, salt: keys.serverSalt)
        let wrongKey = try SRTPSession(profile: keys.profile, direction: .inbound, key: keys.clientKey, salt: keys.clientSalt)
        let payload = Array("a slide's pixels, in confidence".utf8)
        var buffer = [UInt8](repeating: 0, count: 1500)
        let packet = rtp(sequence: 1000, payload: payload)
        buffer.replaceSubrange(0..<packet.count, with: packet)
        let sent = try buffer.withUnsafeMutableBytes { try send.protect($0, length: packet.count) }
        #expect(sent == packet.count + 10)
        let onTheWire = Array(buffer[0..<sent])
        #expect(Array(onTheWire[0..<12]) == Array(packet[0..<12]), "the header stays readable (RFC 3711)")
        #expect(!onTheWire.contains(payload) && Array(onTheWire[12..<packet.count]) != payload, "the payload is encrypted")

        var copy = onTheWire + [UInt8](repeating: 0, count: 16)
        #expect(throws: SRTPError.self) { _ = try copy.withUnsafeMutableBytes { try wrongKey.unprotect($0, length: sent) } }
        copy = onTheWire + [UInt8](repeating: 0, count: 16)
        let opened = try copy.withUnsafeMutableBytes { try receive.unprotect($0, length: sent) }
        #expect(Array(copy[0..<opened]) == packet)
    }

    @Test func replaysAndForgeriesAreRefused() throws {
        let keys = try handshake()
        let send = try SRTPSession(profile: keys.profile, direction: .outbound, key: keys.clientKey, salt: keys.clientSalt)
        let receive = try SRTPSession(profile: keys.profile, direction: .inbound, key: keys.clientKey, salt: keys.clientSalt)
        var buffer = [UInt8](repeating: 0, count: 200)
        let packet = rtp(sequence: 7, payload: [1, 2, 3, 4])
        buffer.replaceSubrange(0..<packet.count, with: packet)
        let n = try buffer.withUnsafeMutableBytes { try send.protect($0, length: packet.count) }
        let wire = Array(buffer[0..<n])

        var first = wire + [0, 0]
        _ = try first.withUnsafeMutableBytes { try receive.unprotect($0, length: n) }
        var again = wire + [0, 0]
        #expect { _ = try again.withUnsafeMutableBytes { try receive.unprotect($0, length: n) } } throws: {
            "\($0)".contains("replayed")
        }
        // A packet not seen before, one bit changed on the way.
        let next = rtp(sequence: 8, payload: [1, 2, 3, 4])
        buffer.replaceSubrange(0..<next.count, with: next)
        let m = try buffer.withUnsafeMutableBytes { try send.protect($0, length: next.count) }
        var forged = Array(buffer[0..<m])
        forged[14] ^= 0x01
        #expect { _ = try forged.withUnsafeMutableBytes { try receive.unprotect($0, length: m) } } throws: {
            "\($0)".contains("authentication tag")
        }
        // The sender may send the same packet again (a resend for a NACK).
        buffer.replaceSubrange(0..<packet.count, with: packet)
        #expect(try buffer.withUnsafeMutableBytes { try send.protect($0, length: packet.count) } == n)
    }

    @Test func rtcpIsProtectedToo() throws {
        let keys = try handshake()
        let send = try SRTPSession(profile: keys.profile, direction: .outbound, key: keys.serverKey, salt: keys.serverSalt)
        let receive = try SRTPSession(profile: keys.profile, direction: .inbound, key: keys.serverKey, salt: keys.serverSalt)
        // A PLI: V=2 FMT=1 PT=206, length 2.
        let pli: [UInt8] = [0x81, 206, 0, 2, 0, 0, 0, 1, 0xDE, 0xAD, 0xBE, 0xEF]
        var buffer = pli + [UInt8](repeating: 0, count: 32)
        let n = try buffer.withUnsafeMutableBytes { try send.protectRTCP($0, length: pli.count) }
        #expect(n == pli.count + 14)
        let back = try buffer.withUnsafeMutableBytes { try receive.unprotectRTCP($0, length: n) }
        #expect(Array(buffer[0..<back]) == pli)
    }

    /// What this machine's libsrtp2 can do decides what DTLS offers (Debian's lacks AES-GCM).
    @Test func supportedProfilesAreKnown() {
        #expect(SRTPSession.supports(.aes128CmHmacSha1_80))
        _ = SRTPSession.supports(.aeadAes128Gcm)  // either answer is fine; it must not crash
    }
}

/// SDES flows (`--srtp`): one key both ways; what one end protects the other reads, a replay
/// or a forgery is refused and counted.
@Suite struct SRTPFlowTests {
    static func rtp(seq: UInt16, ssrc: UInt32 = 0x1234_5678, payload: [UInt8] = Array(repeating: 0xAB, count: 100)) -> [UInt8] {
        [0x80, 96, UInt8(seq >> 8), UInt8(seq & 0xFF), 0, 0, 0, 1,
         UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)] + payload
    }

    @Test func whatOneEndProtectsTheOtherReadsOnce() throws {
        let key = (0..<30).map { UInt8($0 * 7 & 0xFF) }
        let sender = try SRTPFlow(masterKey: key), receiver = try SRTPFlow(masterKey: key)
        var wire: [[UInt8]] = []
        for seq in UInt16(1)...5 {
            let packet = Self.rtp(seq: seq)
            let sent = packet.withUnsafeBytes { sender.protect($0) { wire.append(Array($0)); return 0 } }
            #expect(sent == 0)
        }
        #expect(wire.allSatisfy { $0.count == 112 + 10 }, "the 10-byte tag")
        #expect(!wire.contains { $0[12..<112].contains(0xAB) && $0[12..<22].allSatisfy { $0 == 0xAB } }, "the payload is not in clear")
        var buffer = [UInt8](repeating: 0, count: 1500)
        func receive(_ bytes: [UInt8]) -> Int? {
            buffer.replaceSubrange(0..<bytes.count, with: bytes)
            return buffer.withUnsafeMutableBytes { receiver.unprotect($0, length: bytes.count) }
        }
        for (i, d) in wire.enumerated() {
            #expect(receive(d) == 112)
            #expect(Array(buffer[0..<112]) == Self.rtp(seq: UInt16(i + 1)))
        }
        #expect(receive(wire[2]) == nil, "a replay")
        var forged = wire[4]
        forged[40] ^= 1
        #expect(receive(forged) == nil, "a forgery")
        #expect(receive(Self.rtp(seq: 9)) == nil, "plain RTP")
        #expect(receiver.refused == 3)

        // RTCP the receiver sends back (a PLI) reaches the sender through SRTCP.
        let pli: [UInt8] = [0x81, 206, 0, 2, 0, 0, 0, 9, 0x12, 0x34, 0x56, 0x78]
        var back: [UInt8] = []
        _ = pli.withUnsafeBytes { receiver.protect($0) { back = Array($0); return 0 } }
        #expect(back.count == 12 + 14, "the SRTCP index and tag")
        var rtcp = back + [UInt8](repeating: 0, count: 100)
        #expect(rtcp.withUnsafeMutableBytes { sender.unprotect($0, length: back.count) } == 12)
        #expect(Array(rtcp[0..<12]) == pli)
    }

    @Test func aKeyOfTheWrongLengthIsRefused() {
        #expect(throws: SRTPError.self) { try SRTPFlow(masterKey: [1, 2, 3]) }
    }
}
