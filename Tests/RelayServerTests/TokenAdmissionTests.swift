import Access
import Foundation
import HopTestSupport
import Logging
import MediaCore
import Basics
import Room
import Synchronization
import Testing
import Transport
@testable import Relay
import WebRTC

/// A relay that requires tokens, over its real sockets: peers (their encrypted hop) and
/// browsers (HTTP, WHEP with `Authorization: Bearer`) are refused with the reason named, and
/// nothing is made for them; the right token admits.
@Suite(.serialized) struct TokenAdmissionTests {
    static let secret = Array("a relay secret of at least thirty-two bytes".utf8)

    @Test func peersAndBrowsersNeedTheRightToken() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let presenterToken = try await authority.mint(room: "class", role: .presenter, name: "Ms Smith", ttl: 600)
        let viewerToken = try await authority.mint(room: "class", role: .viewer, name: "Ada", ttl: 600)
        let otherRoom = try await authority.mint(room: "lab", role: .viewer, ttl: 600)
        let expired = try await authority.mint(room: "class", role: .viewer, ttl: 60, now: Date().addingTimeInterval(-3600))
        let certificate = try DTLSCertificate()
        let relay = try RelayServer(host: "127.0.0.1", port: 0, events: nil, logger: Logger(label: "test"), browsers: true,
                                    authorizer: authority, certificate: certificate)
        #expect(relay.fingerprint == certificate.fingerprintText)
        let thread = Thread { _ = relay.run(durationSeconds: nil) }
        thread.start()
        defer { relay.stop() }
        let port = relay.port

        // A presenter without a token, and with a viewer's: refused, the reason in the error.
        let peer = try HopPeer(relayPort: port, pinned: certificate.fingerprint)
        try peer.connect()
        let bare = try peer.ask(.join(room: "class", name: "x", role: "presenter", token: nil))
        guard case let .error(code, message) = bare else { Issue.record("\(bare)"); return }
        #expect(code == .unauthorized && message.contains("no token"), "\(message)")
        let asViewer = try peer.ask(.join(room: "class", name: "x", role: "presenter", token: viewerToken))
        guard case let .error(_, viewerMessage) = asViewer else { Issue.record("\(asViewer)"); return }
        #expect(viewerMessage.contains("a viewer token cannot present"), "\(viewerMessage)")
        // Nothing was made: the room does not exist (asked with a valid token).
        let (none, _, _) = try BrowserAdmissionTests.http("GET", "/rooms/class", port: port, headers: ["Authorization: Bearer \(viewerToken)"])
        #expect(none == 404)

        // The presenter's token admits, with the token's name.
        let welcome = try peer.ask(.join(room: "class", name: "x", role: "presenter", token: presenterToken))
        guard case let .welcome(_, room, _, peers) = welcome else { Issue.record("\(welcome)"); return }
        #expect(room == "class" && peers.map(\.name) == ["Ms Smith"])
        peer.send(.publish(streams: [StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)]), requestID: 2)

        // Browsers: the directory and WHEP want a bearer token for this room.
        let (noToken, noTokenHeaders, noTokenText) = try BrowserAdmissionTests.http("GET", "/rooms/class", port: port)
        #expect(noToken == 401 && noTokenHeaders["www-authenticate"] == #"Bearer realm="screenshare""#, "\(noToken) \(noTokenText)")
        #expect(!noTokenText.contains("Ms Smith"))
        let cases: [(header: [String], says: String)] = [
            ([], "no token"),
            (["Authorization: Bearer \(otherRoom)"], "for room 'lab', not 'class'"),
            (["Authorization: Bearer \(expired)"], "expired at"),
            (["Authorization: Bearer not.a.jwt"], "not a room token"),
            (["Authorization: Basic dXNlcjpwYXNz"], "not 'Bearer TOKEN'"),
        ]
        for c in cases {
            let (status, headers, text) = try BrowserAdmissionTests.http("POST", "/whep/class", port: port, body: BrowserAdmissionTests.offer,
                                                                         headers: c.header)
            #expect(status == 401 && text.contains(c.says), "\(c.header): \(status) \(text)")
            #expect(headers["www-authenticate"]?.hasPrefix("Bearer realm=\"screenshare\"") == true)
            if !c.header.isEmpty { #expect(headers["www-authenticate"]?.contains(#"error="invalid_token""#) == true) }
        }
        #expect(relay.connectingBrowsers == 0, "a refused offer makes no session")
        var info = ""
        try waitFor("the directory names the presenter") {
            info = (try? BrowserAdmissionTests.http("GET", "/rooms/class", port: port, headers: ["Authorization: Bearer \(viewerToken)"]).2) ?? ""
            return info.contains(#""presenters":["Ms Smith"]"#)
        }
        let (created, headers, answer) = try BrowserAdmissionTests.http("POST", "/whep/class", port: port, body: BrowserAdmissionTests.offer,
                                                                        headers: ["Authorization: Bearer \(viewerToken)"])
        #expect(created == 201 && headers["location"]?.hasPrefix("/whep/class/") == true)
        // The answer names the certificate the relay was given.
        let named = certificate.fingerprint.map { String(format: "%02X", $0) }.joined(separator: ":")
        #expect(answer.contains("a=fingerprint:sha-256 \(named)"), "\(answer)")
        #expect(relay.connectingBrowsers == 1)
    }
}
