import Testing
@testable import Room
import RoomEvents

/// Event names in order, for readable expectations.
func names(_ events: [RoomClientEvent]) -> [String] {
    events.map { e in
        switch e {
        case .connected(_, _, _, let rejoined): rejoined ? "reconnected" : "connected"
        case .peerJoined(let p): "peer_joined \(p.name)"
        case .peerLeft(let p, let reason): "peer_left \(p.name) \(reason)"
        case .substreamStarted(let p, let s): "substream_started \(p.name) \(s.kind.rawValue)"
        case .substreamStopped(let p, let s): "substream_stopped \(p.name) \(s.kind.rawValue)"
        case .subscribed(let p, let s): "subscribed \(p.name) \(s.map(\.kind.rawValue).joined(separator: "+"))"
        case .unsubscribed(let p): "unsubscribed \(p.name)"
        case .subscribers(let ids): "subscribers \(ids.count)"
        case .reconnecting(let attempt, _, _): "reconnecting \(attempt)"
        case .disconnected: "disconnected"
        case .error(let code, _): "error \(code.rawValue)"
        case .refused(let message): "refused \(message)"
        case .untrusted(let message): "untrusted \(message)"
        case .link(_, let layers, _): "link \(layers.rawValue)"
        }
    }
}

@Suite struct ClientTests {
    let p1 = addr(1), p2 = addr(2), v = addr(3)

    @Test func aViewerSeesJoinStartStopLeaveInOrder() {
        let room = Room3()
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto))
        #expect(names(room.take(v)) == ["connected"])
        room.add(p1, RoomClient(room: "class", name: "teacher", role: "presenter"))
        room.with(p1) { $0.publish([screen, audio], now: room.now) }
        #expect(names(room.take(v)) == ["peer_joined teacher", "substream_started teacher screen", "substream_started teacher audio",
                                        "subscribed teacher screen+audio"])
        #expect(names(room.take(p1)).suffix(1) == ["subscribers 1"])
        room.with(p1) { $0.publish([], now: room.now) }
        room.with(p1) { $0.leave() }
        #expect(names(room.take(v)) == ["substream_stopped teacher screen", "substream_stopped teacher audio",
                                        "peer_left teacher left", "unsubscribed teacher"])
        #expect(room.relay.peerCount == 1)
    }

    @Test func aLateViewerIsToldWhatIsAlreadyThere() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "teacher", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto))
        #expect(names(room.take(v)) == ["connected", "substream_started teacher screen", "subscribed teacher screen"])
        #expect(room.clients[v]!.subscribedTo == room.clients[p1]!.peerID)
    }

    @Test func twoPresentersAndAViewerThatSwitches() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        let screen2 = StreamInfo(kind: .screen, ssrc: 0x3333, pt: 96, codec: "VP8", clock: 90000)
        room.add(p2, RoomClient(room: "class", name: "bob", role: "presenter"))
        room.with(p2) { $0.publish([screen2], now: room.now) }
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .peer("bob")))
        #expect(names(room.take(v)).last == "subscribed bob screen")
        #expect(room.relay.subscribers(room: "class", ssrc: screen2.ssrc) == [v])
        #expect(room.relay.subscribers(room: "class", ssrc: screen.ssrc).isEmpty)
        room.with(v) { $0.subscribe(.peer("ann"), now: room.now) }
        #expect(names(room.take(v)) == ["unsubscribed bob", "subscribed ann screen"])
        #expect(room.relay.subscribers(room: "class", ssrc: screen.ssrc) == [v])
        #expect(room.relay.subscribers(room: "class", ssrc: screen2.ssrc).isEmpty)
        // By id works too.
        let bob = room.clients[p2]!.peerID!
        room.with(v) { $0.subscribe(.peer(String(bob)), now: room.now) }
        #expect(room.relay.subscribers(room: "class", ssrc: screen2.ssrc) == [v])
    }

    @Test func autoMovesToAnotherPresenterWhenTheFirstLeaves() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto))
        let screen2 = StreamInfo(kind: .screen, ssrc: 0x3333, pt: 96, codec: "VP8", clock: 90000)
        room.add(p2, RoomClient(room: "class", name: "bob", role: "presenter"))
        room.with(p2) { $0.publish([screen2], now: room.now) }
        _ = room.take(v)
        room.with(p1) { $0.leave() }
        #expect(names(room.take(v)) == ["substream_stopped ann screen", "peer_left ann left", "unsubscribed ann", "subscribed bob screen"])
    }

    @Test func keepAlivesKeepEveryoneInAndASilentPeerIsDropped() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto))
        room.advance(20_000 * ms)
        #expect(room.relay.peerCount == 2)
        #expect(room.clients[v]!.isJoined)
        _ = room.take(p1)
        room.cut.insert(v)  // kill -9: the viewer says nothing more
        room.clients[v] = nil
        let start = room.now
        while room.relay.peerCount == 2 && room.now < start + 10_000 * ms { room.advance(100 * ms) }
        #expect(room.now - start <= 5000 * ms)
        #expect(names(room.take(p1)).contains("peer_left pupil timeout"))
    }

    @Test func aRelayRestartIsSurvived() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .peer("ann")))
        _ = room.take(v)
        room.restartRelay()  // forgets everyone; their next ping gets not_joined
        room.advance(3000 * ms)
        #expect(room.clients[p1]!.isJoined && room.clients[v]!.isJoined)
        #expect(names(room.take(v)).contains("reconnected"))
        #expect(room.relay.subscribers(room: "class", ssrc: screen.ssrc) == [v])  // re-published and re-subscribed by name
    }

    @Test func aVanishedRelayMeansThreeRetriesWithBackoffThenDisconnected() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        _ = room.take(p1)
        room.relayUp = false
        let start = room.now
        var disconnectedAt: UInt64?
        var seen: [String] = []
        while disconnectedAt == nil && room.now < start + 30_000 * ms {
            room.advance(50 * ms)
            let n = names(room.take(p1))
            seen += n
            if n.contains("disconnected") { disconnectedAt = room.now }
        }
        #expect(seen == ["reconnecting 1", "reconnecting 2", "reconnecting 3", "disconnected"])
        // 3 s to notice, then 3 × (backoff 0.5/1/2 s + 1.5 s wait for the welcome) ≈ 11 s.
        let elapsed = (disconnectedAt ?? 0) - start
        #expect(elapsed > 10_000 * ms && elapsed < 12_000 * ms)
        #expect(room.clients[p1]!.state == .disconnected)
    }

    @Test func aLostNotificationIsRepairedBySync() {
        let room = Room3()
        room.add(v, RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto))
        room.cut.insert(v)  // the viewer misses the presenter's arrival
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        room.cut.remove(v)
        _ = room.take(v)
        room.advance(1500 * ms)  // the next pong shows a newer version: sync
        #expect(names(room.take(v)) == ["peer_joined ann", "substream_started ann screen", "subscribed ann screen"])
    }

    @Test func aRefusedRequestIsReported() {
        let room = Room3()
        room.add(p1, RoomClient(room: "class", name: "ann", role: "presenter"))
        room.with(p1) { $0.publish([screen], now: room.now) }
        room.add(p2, RoomClient(room: "class", name: "bob", role: "presenter"))
        room.with(p2) { $0.publish([screen], now: room.now) }  // same SSRC
        #expect(names(room.take(p2)).contains("error ssrc_conflict"))
    }
}
