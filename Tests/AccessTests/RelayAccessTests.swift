import Access
import Foundation
import Room
import Testing
import NetworkAddress

/// Datagrams the relay sends, kept.
final class Sent: RelayTransport {
    weak var core: RelayCore?
    var datagrams: [(bytes: [UInt8], to: PeerAddress)] = []
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) { datagrams.append((Array(bytes), address)) }
    func messages(to address: PeerAddress) -> [ControlMessage] {
        core?.drain(into: self)
        return datagrams.filter { $0.to == address }.compactMap { try? ControlEnvelope.parse($0.bytes, maxSize: RoomProtocol.maxRelayMessageSize).message }
    }
}

/// The relay core with a token authority: who enters, as what, and what a refusal leaves (nothing).
@Suite struct RelayAccessTests {
    static let secret = Array("0123456789abcdef0123456789abcdef-relay".utf8)
    static let wall = Date(timeIntervalSince1970: 1_800_000_000)
    static let wallNanos = UInt64(1_800_000_000) * 1_000_000_000
    let presenter = PeerAddress(ip: 0x7F00_0001, port: 40000)
    let viewer = PeerAddress(ip: 0x7F00_0001, port: 40002)

    func send(_ core: RelayCore, _ message: ControlMessage, id: UInt32 = 1, from address: PeerAddress) {
        ControlEnvelope(requestID: id, message).encoded().withUnsafeBytes {
            core.receive($0, from: address, now: 1_000_000_000, wallNanos: Self.wallNanos)
        }
    }

    func join(_ core: RelayCore, _ address: PeerAddress, role: String, token: String?) {
        send(core, .join(room: "class", name: "asked", role: role, token: token, cookie: core.cookie(for: address, now: 1_000_000_000)),
             from: address)
    }

    @Test func refusedPeersLeaveNoTraceAndHearWhy() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let sent = Sent()
        let core = RelayCore(authorizer: authority)
        sent.core = core
        let viewerToken = try await authority.mint(room: "class", role: .viewer, ttl: 60, now: Self.wall)
        let old = try await authority.mint(room: "class", role: .viewer, ttl: 60, now: Self.wall.addingTimeInterval(-120))

        join(core, presenter, role: "presenter", token: nil)
        join(core, presenter, role: "presenter", token: viewerToken)
        join(core, viewer, role: "viewer", token: old)
        join(core, viewer, role: "viewer", token: "eyJhbGciOiJub25lIn0.e30.")
        #expect(core.roomCount == 0 && core.peerCount == 0 && core.changes == 0)
        #expect(core.counters.unauthorized == 4)
        let toPresenter = sent.messages(to: presenter).compactMap { m -> String? in
            if case let .error(.unauthorized, text) = m { return text } else { return nil }
        }
        #expect(toPresenter.count == 2 && toPresenter[0].contains("no token") && toPresenter[1].contains("viewer token cannot present"),
                "\(toPresenter)")
        let toViewer = sent.messages(to: viewer).compactMap { m -> String? in
            if case let .error(.unauthorized, text) = m { return text } else { return nil }
        }
        #expect(toViewer.count == 2 && toViewer[0].contains("expired") && toViewer[1].contains("not a room token"), "\(toViewer)")
    }

    @Test func aViewerTokenWatchesButCannotPublishAndTheTokenNamesThePeer() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let sent = Sent()
        let core = RelayCore(authorizer: authority)
        sent.core = core
        let viewerToken = try await authority.mint(room: "class", role: .viewer, name: "Ada", ttl: 60, now: Self.wall)
        join(core, viewer, role: "viewer", token: viewerToken)
        #expect(core.peers(in: "class").map(\.name) == ["Ada"])
        send(core, .publish(streams: [StreamInfo(kind: .screen, ssrc: 7, pt: 96, codec: "VP8", clock: 90000)]), id: 2, from: viewer)
        let refused = sent.messages(to: viewer).contains { if case .error(.unauthorized, _) = $0 { true } else { false } }
        #expect(refused)
        #expect(core.peers(in: "class").first?.streams.isEmpty == true)
    }

    @Test func anOpenRelayAdmitsWithoutTokens() {
        let sent = Sent()
        let core = RelayCore()
        sent.core = core
        join(core, presenter, role: "presenter", token: nil)
        #expect(core.peerCount == 1 && core.counters.unauthorized == 0)
    }
}
