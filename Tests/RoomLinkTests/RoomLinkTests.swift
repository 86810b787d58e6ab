import Room
import RoomLink
import SRTP
import Testing
import WebRTC

/// The peer's encrypted hop against a DTLS server in memory (the relay's end, as `PeerHops`
/// runs it): the join goes only inside a finished handshake with the pinned certificate, the
/// SRTP keys match the relay's, and a reconnect starts a new handshake.
@Suite struct RoomLinkTests {
    static let relayCertificate = try! DTLSCertificate()

    /// Moves datagrams between the link and the server until neither has more; returns the
    /// server's application data (room messages as the relay would read them).
    @discardableResult
    func exchange(_ link: RoomLink, _ server: DTLSTransport, now: UInt64) -> [[UInt8]] {
        var received: [[UInt8]] = []
        for _ in 0..<20 {
            var moved = false
            for d in link.takeDatagrams() {
                moved = true
                received += d.withUnsafeBytes { server.receive($0) }
            }
            while let d = server.takeOutgoing() {
                moved = true
                var copy = d
                _ = copy.withUnsafeMutableBytes { link.receive($0, length: d.count, now: now) }
            }
            if !moved { break }
        }
        return received
    }

    func makeLink(pinned: [UInt8]?) throws -> RoomLink {
        try RoomLink(client: RoomClient(room: "class", name: "ada", role: "viewer", token: "a.token.here", subscribe: .auto),
                     pinnedFingerprint: pinned)
    }

    @Test func anotherCertificateGetsNeitherTheJoinNorTheToken() throws {
        let link = try makeLink(pinned: Array(repeating: 0xAB, count: 32))
        let server = try DTLSTransport(role: .server, certificate: Self.relayCertificate, remoteFingerprint: nil)
        link.start(now: 1_000)
        let messages = exchange(link, server, now: 2_000)
        #expect(messages.isEmpty, "nothing reached the impostor: \(messages)")
        let events = link.takeEvents()
        guard case .untrusted(let why)? = events.last else { Issue.record("\(events)"); return }
        #expect(why.contains(Self.relayCertificate.fingerprintText) && why.contains("sha256:abab"), "\(why)")
        #expect(!link.media.isKeyed)
        // It stays stopped: its timers send nothing more.
        link.poll(now: 10_000_000_000)
        #expect(link.takeDatagrams().isEmpty)
    }

    @Test func thePinnedRelayGetsTheJoinInsideDTLSAndSharesTheSRTPKeys() throws {
        let link = try makeLink(pinned: Self.relayCertificate.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: Self.relayCertificate, remoteFingerprint: nil)
        link.start(now: 1_000)
        let messages = exchange(link, server, now: 2_000)
        #expect(server.state == .connected && link.isConnected)
        #expect(link.relayFingerprint == Self.relayCertificate.fingerprint)
        let envelopes = messages.compactMap { m in m.withUnsafeBytes { try? ControlEnvelope.parse($0) } }
        guard case let .join(room, _, _, token, _)? = envelopes.first?.message else { Issue.record("\(envelopes)"); return }
        #expect(room == "class" && token == "a.token.here")

        // The relay's welcome comes back through DTLS and the client is in the room.
        let welcome = ControlEnvelope(requestID: envelopes[0].requestID, .welcome(peer: 7, room: "class", version: 1, peers: []))
        try welcome.encoded().withUnsafeBytes { try server.send($0) }
        exchange(link, server, now: 3_000)
        #expect(link.takeEvents().contains { if case .connected(7, "class", _, false) = $0 { true } else { false } })

        // SRTP: what the link protects, the relay's keys open; and the other way.
        let keys = try #require(server.keys)
        let relay = try SRTPFlow(profile: keys.profile, sendKey: keys.serverKey + keys.serverSalt, receiveKey: keys.clientKey + keys.clientSalt)
        var rtp: [UInt8] = [0x80, 96, 0, 1, 0, 0, 0, 9, 0xCA, 0xFE, 0xBA, 0xBE] + Array(repeating: 0x42, count: 100)
        var sealed = [UInt8](repeating: 0, count: 200)
        let protected = try #require(rtp.withUnsafeBytes { p in link.media.protect(p) { Array($0) } })
        let n = protected.count
        sealed.replaceSubrange(0..<n, with: protected)
        #expect(n > rtp.count && Array(sealed[12..<112]) != Array(rtp[12...]), "the payload is encrypted")
        let opened = sealed.withUnsafeMutableBytes { relay.unprotect($0, length: n) }
        #expect(opened == rtp.count && Array(sealed[0..<rtp.count]) == rtp)
        rtp[3] = 2
        let back = try #require(rtp.withUnsafeBytes { p in sealed.withUnsafeMutableBytes { relay.protect(p, into: $0) } })
        let wire = Array(sealed[0..<back])
        var first = wire
        let plain = first.withUnsafeMutableBytes { link.receive($0, length: back, now: 4_000) }
        #expect(plain == rtp.count && Array(first[0..<rtp.count]) == rtp)
        // The same packet again (a replay), and one altered (a forgery): refused and counted.
        var again = wire
        #expect(again.withUnsafeMutableBytes { link.receive($0, length: back, now: 4_000) } == nil)
        rtp[3] = 3
        let next = try #require(rtp.withUnsafeBytes { p in sealed.withUnsafeMutableBytes { relay.protect(p, into: $0) } })
        var forged = Array(sealed[0..<next])
        forged[20] ^= 1
        #expect(forged.withUnsafeMutableBytes { link.receive($0, length: next, now: 4_000) } == nil)
        #expect(link.media.refused == 2)
    }

    @Test func aReconnectStartsANewHandshake() throws {
        let link = try makeLink(pinned: nil)
        let server = try DTLSTransport(role: .server, certificate: Self.relayCertificate, remoteFingerprint: nil)
        link.start(now: 1_000_000_000)
        let messages = exchange(link, server, now: 1_000_000_000)
        let join = try #require(messages.first.flatMap { m in m.withUnsafeBytes { try? ControlEnvelope.parse($0) } })
        try ControlEnvelope(requestID: join.requestID, .welcome(peer: 3, room: "class", version: 1, peers: [])).encoded()
            .withUnsafeBytes { try server.send($0) }
        exchange(link, server, now: 1_100_000_000)
        #expect(link.handshakes == 1 && link.media.isKeyed)
        // The relay goes silent (it restarted): after 3 s the client reconnects, with new keys.
        link.poll(now: 1_100_000_000 + RoomProtocol.relayTimeoutNanos + 1)
        #expect(link.takeEvents().contains { if case .reconnecting = $0 { true } else { false } })
        #expect(link.handshakes == 2 && !link.media.isKeyed)
        let hello = try #require(link.takeDatagrams().first)
        #expect(hello[0] == 22 && hello[13] == 1, "a new ClientHello")
    }
}
