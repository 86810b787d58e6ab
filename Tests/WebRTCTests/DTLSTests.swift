import Foundation
import SRTP
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif
@testable import WebRTC

/// DTLS 1.2 between two of our transports, in memory: the handshake, the fingerprint check, the
/// exported SRTP keys, application data, and hostile datagrams.
@Suite struct DTLSTests {
    /// Carries datagrams both ways until neither side has anything to send.
    func run(_ client: DTLSTransport, _ server: DTLSTransport, start: Bool = true, drop: (Int) -> Bool = { _ in false }) {
        if start { client.start() }
        var n = 0
        for _ in 0..<20 {
            var moved = false
            if let d = client.takeOutgoing() {
                moved = true
                if !drop(n) { d.withUnsafeBytes { _ = server.receive($0) } }
                n += 1
            }
            if let d = server.takeOutgoing() {
                moved = true
                if !drop(n) { d.withUnsafeBytes { _ = client.receive($0) } }
                n += 1
            }
            if !moved { break }
        }
    }

    @Test func handshakeChecksFingerprintsAndExportsTheSameKeys() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        #expect(a.fingerprint.count == 32 && a.fingerprint != b.fingerprint)
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        run(client, server)
        #expect(client.state == .connected && server.state == .connected)
        #expect(client.peerFingerprint == b.fingerprint && server.peerFingerprint == a.fingerprint)
        let ck = try #require(client.keys), sk = try #require(server.keys)
        #expect(ck == sk)
        #expect(ck.profile == SRTPProfile.usable.first)
        #expect(ck.clientKey.count == 16 && ck.clientSalt.count == ck.profile.saltLength && ck.clientKey != ck.serverKey)
    }

    /// The server answers a ClientHello that has no cookie with a HelloVerifyRequest (RFC 6347
    /// §4.2.1) smaller than the hello, not with its certificate flight: a spoofed hello reflects
    /// less than it cost. A cookie from another handshake is refused the same way.
    @Test func aHelloWithoutTheCookieGetsOnlyASmallHelloVerifyRequest() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: nil)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: nil)
        client.start()
        let hello = try #require(client.takeOutgoing())
        #expect(hello[0] == 22 && hello[13] == 1, "a handshake record with a ClientHello")
        hello.withUnsafeBytes { _ = server.receive($0) }
        let answer = try #require(server.takeOutgoing())
        // Content type 22 (handshake), DTLS 1.0 record version for the HVR, message type 3.
        #expect(answer[0] == 22 && answer[13] == 3, "a HelloVerifyRequest: \(answer.prefix(16).map { String($0) })")
        #expect(answer.count < hello.count, "\(answer.count) bytes answer a \(hello.count)-byte hello")
        #expect(server.state == .handshaking)

        // Another server (another handshake) does not take this server's cookie: the client's
        // second hello, with the cookie, draws nothing there (the handshake is refused).
        answer.withUnsafeBytes { _ = client.receive($0) }
        let second = try #require(client.takeOutgoing())
        #expect(second.count > hello.count, "the hello again, with the cookie")
        let stranger = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: nil)
        second.withUnsafeBytes { _ = stranger.receive($0) }
        #expect(stranger.takeOutgoing() == nil && stranger.state != .connected)

        // The server that gave the cookie goes on to its certificate flight, and the handshake ends.
        second.withUnsafeBytes { _ = server.receive($0) }
        let flight = try #require(server.takeOutgoing())
        #expect(flight[13] == 2, "ServerHello")
        flight.withUnsafeBytes { _ = client.receive($0) }
        run(client, server, start: false)
        #expect(client.state == .connected && server.state == .connected)
    }

    /// A certificate written as PEM and read back is the same one (its fingerprint), and its
    /// key still signs a handshake; `loadOrCreate` makes the file once, private, then keeps it.
    @Test func aCertificateKeptInAFileKeepsItsFingerprint() throws {
        let original = try DTLSCertificate()
        let back = try DTLSCertificate(pem: original.pem())
        #expect(back.fingerprint == original.fingerprint)
        #expect(back.fingerprintText == "sha256:" + original.fingerprint.map { String(format: "%02x", $0) }.joined())
        let client = try DTLSTransport(role: .client, certificate: try DTLSCertificate(), remoteFingerprint: original.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: back, remoteFingerprint: nil)
        run(client, server)
        #expect(client.state == .connected, "the loaded key signs the handshake the fingerprint names")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cert-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/relay.pem"
        let made = try DTLSCertificate.loadOrCreate(file: path)
        var info = stat()
        #expect(made.created && stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let again = try DTLSCertificate.loadOrCreate(file: path)
        #expect(!again.created && again.certificate.fingerprint == made.certificate.fingerprint)
        chmod(path, 0o644)
        #expect(throws: DTLSError.self) { try DTLSCertificate.loadOrCreate(file: path) }
        #expect(throws: DTLSError.self) { try DTLSCertificate(pem: "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n") }
        let other = try DTLSCertificate()
        let mixed = String(original.pem().split(separator: "-----BEGIN CERTIFICATE-----")[0]) + "-----BEGIN CERTIFICATE-----"
            + other.pem().components(separatedBy: "-----BEGIN CERTIFICATE-----")[1]
        #expect(throws: DTLSError.self) { try DTLSCertificate(pem: mixed) }
    }

    @Test func theProfileIsTheOneBothOffer() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: nil, profiles: [.aes128CmHmacSha1_80])
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: nil,
                                       profiles: [.aeadAes128Gcm, .aes128CmHmacSha1_80])
        run(client, server)
        let keys = try #require(server.keys)
        #expect(keys.profile == .aes128CmHmacSha1_80 && keys.clientSalt.count == 14)
    }

    /// A peer whose certificate is not the one its SDP named is refused: a man in the middle.
    @Test func aWrongFingerprintFailsTheHandshake() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate(), other = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: other.fingerprint)
        run(client, server)
        guard case .failed(let reason) = server.state else { Issue.record("server: \(server.state)"); return }
        #expect(reason.contains("fingerprint mismatch"))
        #expect(server.keys == nil)
    }

    @Test func applicationDataCrossesBothWays() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        run(client, server)
        try Array("join room".utf8).withUnsafeBytes { try client.send($0) }
        let record = try #require(client.takeOutgoing())
        #expect(!record.contains(Array("join room".utf8)), "application data must not cross in clear")
        #expect(record.withUnsafeBytes { server.receive($0) } == [Array("join room".utf8)])
        try Array("welcome".utf8).withUnsafeBytes { try server.send($0) }
        #expect(try #require(server.takeOutgoing()).withUnsafeBytes { client.receive($0) } == [Array("welcome".utf8)])
    }

    /// A lost flight is sent again when the timer runs out (100 ms the first time, not
    /// OpenSSL's second: a flight lost on a lossy Wi-Fi must not cost a viewer's start a
    /// second), and the handshake completes.
    @Test func aLostFlightIsRetransmitted() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        client.start()
        _ = client.takeOutgoing()  // the ClientHello is lost
        let wait = try #require(client.timeoutMillis)
        #expect(wait > 0 && wait <= 100)
        // Wait for OpenSSL's timer to run out (it keeps it on the system clock, no clock can be
        // injected): exactly as long as it says is left.
        while let left = client.timeoutMillis, left > 0 { usleepMillis(UInt32(left)) }
        client.handleTimeout()
        run(client, server)
        #expect(client.state == .connected && server.state == .connected)
    }

    /// Garbage and truncated records during and after the handshake: dropped, never a crash,
    /// and the association still works.
    @Test func hostileDatagramsAreDropped() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        var rng = SplitMix64(seed: 0xD715)
        for _ in 0..<2_000 {
            var bytes = (0..<(rng.next() % 200)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if !bytes.isEmpty { bytes[0] = 22 }  // a handshake record's type
            bytes.withUnsafeBytes { _ = server.receive($0) }
            _ = server.takeOutgoing()
        }
        #expect(server.state != .connected)
        let fresh = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: a.fingerprint)
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: b.fingerprint)
        run(client, fresh)
        #expect(fresh.state == .connected)
        for _ in 0..<500 {
            let bytes = [23, 0xfe, 0xfd] + (0..<(rng.next() % 100)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            #expect(bytes.withUnsafeBytes { fresh.receive($0) }.isEmpty)
        }
        #expect(fresh.state == .connected)
    }
}

func usleepMillis(_ ms: UInt32) {
    var ts = timespec(tv_sec: Int(ms / 1000), tv_nsec: Int(ms % 1000) * 1_000_000)
    nanosleep(&ts, nil)
}

extension DTLSTests {
    /// A room message larger than the path MTU (a `welcome` listing a big room) is one record,
    /// so it arrives as one message, whole, as a datagram of its own did before.
    @Test func aMessageLargerThanTheMTUArrivesWhole() throws {
        let a = try DTLSCertificate(), b = try DTLSCertificate()
        let client = try DTLSTransport(role: .client, certificate: a, remoteFingerprint: nil)
        let server = try DTLSTransport(role: .server, certificate: b, remoteFingerprint: nil)
        run(client, server)
        try #require(client.state == .connected && server.state == .connected)
        for size in [1, 1100, 5000, DTLSTransport.maxMessage] {
            let message = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            try message.withUnsafeBytes { try server.send($0) }
            let datagram = try #require(server.takeOutgoing())
            let got = datagram.withUnsafeBytes { client.receive($0) }
            #expect(got == [message], "\(size) bytes came as \(got.map(\.count))")
        }
    }
}
