import Foundation
import HopTestSupport
import Glibc
import Logging
import MediaCore
import Basics
import Room
import Synchronization
import Testing
import Transport
@testable import Relay
import NetworkAddress

/// What the relay's HTTP side admits, through a whole `RelayServer` on loopback with the clock
/// in the test's hands: an offer for a room nobody is in gets 404; the room's directory names
/// its presenter; a flood of offers that never connect fills the places for connecting browsers
/// and the rest get 503 with Retry-After, until the unconnected sessions expire.
@Suite(.serialized) struct BrowserAdmissionTests {
    static let loopback: UInt32 = 0x7F00_0001

    /// A recvonly VP8 + Opus offer the relay can answer (its ICE and DTLS never follow).
    static let offer = [
        "v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
        "m=video 9 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 0.0.0.0", "a=mid:0", "a=recvonly", "a=rtcp-mux",
        "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
        "a=fingerprint:sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"), "a=setup:actpass",
        "a=rtpmap:96 VP8/90000",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0", "a=mid:1", "a=recvonly", "a=rtcp-mux",
        "a=rtpmap:111 opus/48000/2", "",
    ].joined(separator: "\r\n")

    /// One HTTP/1.1 request on a fresh TCP connection (Connection: close): status, headers
    /// (lowercased names), body.
    static func http(_ method: String, _ path: String, port: UInt16, body: String = "", headers extra: [String] = []) throws -> (Int, [String: String], String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in(PeerAddress(ip: loopback, port: port))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("connect to TCP \(port): errno \(errno)") }
        let request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/sdp\r\n"
            + extra.map { $0 + "\r\n" }.joined() + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var response = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw TestFailure("no HTTP response: '\(text)'") }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? -1
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, String(text[split.upperBound...]))
    }

    /// An invitation code is exchanged at `POST /invite/ROOM` for the token it stands for and
    /// the relay's certificate, until the token lapses (410) or the code is renewed (404);
    /// only in its room.
    @Test func anInvitationCodeIsExchangedForItsTokenUntilItLapses() throws {
        let clock = ManualClock()
        let relay = try RelayServer(host: "127.0.0.1", port: 0, events: nil, logger: Logger(label: "test"), clock: clock, browsers: true)
        let code = relay.invites.issue(InviteBook.Invite(room: "class", token: "eyJ.viewer.token", expiresWallNanos: clock.wallNanos() + 10_000_000_000))
        let (status, headers, body) = try Self.http("POST", "/invite/class", port: relay.port, body: code)
        #expect(status == 200 && headers["content-type"] == "application/json", "\(status) \(body)")
        let granted = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String], "\(body)")
        #expect(granted == ["room": "class", "token": "eyJ.viewer.token", "fingerprint": relay.fingerprint])
        let (elsewhere, _, elsewhereText) = try Self.http("POST", "/invite/lab", port: relay.port, body: code)
        #expect(elsewhere == 404 && elsewhereText.contains("not valid"), "\(elsewhere) \(elsewhereText)")
        clock.advance(nanos: 10_000_000_000)
        let (lapsed, _, lapsedText) = try Self.http("POST", "/invite/class", port: relay.port, body: code)
        #expect(lapsed == 410 && lapsedText.contains("expired"), "\(lapsed) \(lapsedText)")
        let renewed = relay.invites.issue(InviteBook.Invite(room: "class", token: "eyJ.viewer.token", expiresWallNanos: clock.wallNanos() + 10_000_000_000))
        #expect(try Self.http("POST", "/invite/class", port: relay.port, body: renewed).0 == 200)
        _ = relay.invites.issue(InviteBook.Invite(room: "class", token: "eyJ.viewer.token", expiresWallNanos: clock.wallNanos() + 10_000_000_000))
        #expect(try Self.http("POST", "/invite/class", port: relay.port, body: renewed).0 == 404)
    }

    /// A session the HTTP thread made after the relay's turn read its clock is new, not expired
    /// (the difference once wrapped, and 16 of 300 browsers arriving in one second were dropped
    /// as "setup_timeout" before their first ICE check).
    @Test func aSessionMadeAfterTheTurnsClockIsNotExpired() {
        let timeout: UInt64 = 30_000_000_000
        #expect(!BrowserGateway.setupExpired(createdNanos: 5_000_000_001, now: 5_000_000_000, timeoutNanos: timeout))
        #expect(!BrowserGateway.setupExpired(createdNanos: 5_000_000_000, now: 35_000_000_000, timeoutNanos: timeout))
        #expect(BrowserGateway.setupExpired(createdNanos: 5_000_000_000, now: 35_000_000_001, timeoutNanos: timeout))
    }

    /// A kernel arrival stamp on the monotonic clock: that far before the batch was read; none
    /// without a stamp, or with one that does not fit (ahead of the read, or a second behind it).
    @Test func anArrivalStampIsPutOnTheMonotonicClock() {
        let now: UInt64 = 50_000_000_000, wall: UInt64 = 1_800_000_000_000_000_000
        #expect(RelayServer.arrival(stamp: wall - 3_000_000, now: now, wall: wall) == now - 3_000_000)
        #expect(RelayServer.arrival(stamp: wall, now: now, wall: wall) == now)
        #expect(RelayServer.arrival(stamp: nil, now: now, wall: wall) == nil)
        #expect(RelayServer.arrival(stamp: wall + 1, now: now, wall: wall) == nil, "ahead of the read")
        #expect(RelayServer.arrival(stamp: wall - 1_000_000_000, now: now, wall: wall) == nil, "a clock set meanwhile")
    }

    @Test func unknownRoomsDirectoryAndAFloodOfOffersThatNeverConnect() throws {
        let clock = ManualClock()
        var limits = BrowserLimits()
        limits.maxConnecting = 3
        limits.setupTimeoutNanos = 2_000_000_000
        let relay = try RelayServer(host: "127.0.0.1", port: 0, events: nil, logger: Logger(label: "test"), clock: clock, browsers: true,
                                    browserLimits: limits)
        let finished = Atomic<Bool>(false)
        let thread = Thread { _ = relay.run(durationSeconds: nil); finished.store(true, ordering: .relaxed) }
        thread.start()
        defer { relay.stop() }

        // Nobody is in "class" yet.
        let (noRoom, _, noRoomText) = try Self.http("POST", "/whep/class", port: relay.port, body: Self.offer)
        #expect(noRoom == 404 && noRoomText.contains("no room 'class'"), "\(noRoom) \(noRoomText)")
        let (noInfo, _, noInfoText) = try Self.http("GET", "/rooms/class", port: relay.port)
        #expect(noInfo == 404 && noInfoText.contains(#""presenters":[]"#), "\(noInfoText)")

        // A presenter joins and shares a screen: the directory names it.
        let presenter = try HopPeer(relayPort: relay.port)
        try presenter.connect()
        guard case .welcome = try presenter.ask(.join(room: "class", name: "teacher", role: "presenter", token: nil)) else {
            throw TestFailure("the presenter is not welcome")
        }
        presenter.send(.publish(streams: [StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)]), requestID: 2)
        var info = ""
        try waitFor("the directory names the presenter") {
            info = (try? Self.http("GET", "/rooms/class", port: relay.port).2) ?? ""
            return info.contains(#""presenters":["teacher"]"#)
        }
        #expect(info.contains(#""peers":1"#) && info.contains(#""browsers":0"#), "\(info)")

        // Three offers are answered; they never connect, so the fourth finds no place.
        for i in 0..<3 {
            let (status, headers, _) = try Self.http("POST", "/whep/class", port: relay.port, body: Self.offer)
            #expect(status == 201 && headers["location"]?.hasPrefix("/whep/class/") == true, "offer \(i): \(status)")
        }
        let (busy, busyHeaders, busyText) = try Self.http("POST", "/whep/class", port: relay.port, body: Self.offer)
        #expect(busy == 503 && busyHeaders["retry-after"] == "2" && busyText.contains("3 browsers are connecting"), "\(busy) \(busyText)")
        #expect(relay.connectingBrowsers == 3)

        // The clock passes their setup time: they expire, and a new offer is answered.
        clock.advance(nanos: 2_100_000_000)
        presenter.send(.ping(version: 0), requestID: 3)
        try waitFor("the unconnected sessions expire") { relay.connectingBrowsers == 0 }
        let (again, _, _) = try Self.http("POST", "/whep/class", port: relay.port, body: Self.offer)
        #expect(again == 201)
        let stillRunning = !finished.load(ordering: .relaxed)
        #expect(stillRunning, "the relay runs on")
    }
}

/// Waits (bounded, 5 s) until `condition` holds, checking every 10 ms.
func waitFor(_ what: String, seconds: Double = 5, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !condition() {
        guard Date() < deadline else { throw TestFailure("waited \(seconds) s for \(what)") }
        usleep(10_000)
    }
}
