import Testing
import RTCP
@testable import Room
import NetworkAddress

/// Browsers in a room (external viewers): they follow the first presenter sharing a screen, or
/// the one named, move to the next when it leaves, and never time out.
@Suite struct ExternalViewerTests {
    let wire = Wire()
    let relay: RelayCore
    let teacher = addr(1), guest = addr(2), browser = addr(9)
    let guestScreen = StreamInfo(kind: .screen, ssrc: 0x5151, pt: 96, codec: "VP8", clock: 90_000)

    init() { relay = RelayCore(ssrc: 0xAAAA, wire: wire) }

    func publish(_ a: PeerAddress, name: String, _ streams: [StreamInfo], now: UInt64 = 0) {
        relay.receive(ControlEnvelope(requestID: 1, .join(room: "class", name: name, role: "presenter", token: nil,
                                                           cookie: relay.cookie(for: a, now: now))), from: a, now: now)
        relay.receive(ControlEnvelope(requestID: 2, .publish(streams: streams)), from: a, now: now)
    }

    @Test func aBrowserFollowsTheFirstPresenterAndTheNextWhenItLeaves() throws {
        publish(teacher, name: "teacher", [screen, audio])
        publish(guest, name: "guest", [guestScreen])
        _ = try relay.addExternalViewer(room: "class", name: "browser-1", address: browser, presenter: nil, now: 0)
        #expect(Set(relay.externalViewerStreams(address: browser).map(\.ssrc)) == [screen.ssrc, audio.ssrc])
        // The room sees a browser; its own peers say nothing of what they run.
        #expect(relay.peers(in: "class").map(\.client) == [nil, nil, "browser"])
        // A Janus mountpoint fed as a viewer says so, and is not counted among the browsers.
        _ = try relay.addExternalViewer(room: "class", name: "Janus 10.0.0.7", address: addr(10), presenter: nil, client: "janus", now: 0)
        #expect(relay.peers(in: "class").map(\.client) == [nil, nil, "browser", "janus"])
        #expect(relay.browserCount == 1 && relay.summaries().first?.browsers == 1)
        relay.removeExternalViewer(address: addr(10), reason: "gone")
        #expect(relay.browserCount == 1)
        relay.receive(vp8Packet(ssrc: screen.ssrc, seq: 1, keyframe: true), from: teacher, now: 1)
        #expect(wire.take(browser).contains(vp8Packet(ssrc: screen.ssrc, seq: 1, keyframe: true)))

        relay.receive(ControlEnvelope(requestID: 3, .leave), from: teacher, now: 2)
        #expect(relay.externalViewerStreams(address: browser).map(\.ssrc) == [guestScreen.ssrc])
        wire.sent.removeAll()
        relay.receive(vp8Packet(ssrc: guestScreen.ssrc, seq: 1), from: guest, now: 3)
        #expect(wire.take(browser).count == 1)
    }

    @Test func aBrowserWaitsForTheNamedPresenter() throws {
        publish(guest, name: "guest", [guestScreen])
        _ = try relay.addExternalViewer(room: "class", name: "browser-1", address: browser, presenter: "teacher", now: 0)
        #expect(relay.externalViewerStreams(address: browser).isEmpty)
        publish(teacher, name: "teacher", [screen, audio])
        #expect(Set(relay.externalViewerStreams(address: browser).map(\.ssrc)) == [screen.ssrc, audio.ssrc])
    }

    @Test func aBrowserNeverTimesOutButCanBeRemoved() throws {
        publish(teacher, name: "teacher", [screen])
        let id = try relay.addExternalViewer(room: "class", name: "browser-1", address: browser, presenter: nil, now: 0)
        relay.poll(now: 60_000_000_000, wallNanos: 0)
        #expect(relay.peers(in: "class").contains { $0.id == id })
        relay.removeExternalViewer(address: browser, reason: "left")
        #expect(!relay.peers(in: "class").contains { $0.id == id })
        // A room peer cannot be removed this way.
        relay.receive(ControlEnvelope(requestID: 9, .join(room: "class", name: "pupil", role: "viewer", token: nil,
                                                           cookie: relay.cookie(for: addr(3), now: 60_000_000_000))), from: addr(3), now: 60_000_000_000)
        relay.removeExternalViewer(address: addr(3), reason: "left")
        #expect(relay.peers(in: "class").contains { $0.name == "pupil" })
    }

    /// A browser cannot start without a keyframe: its arrival asks the presenter for one at
    /// once; a second browser 100 ms later is covered by the throttle (one request every
    /// 300 ms), and its request goes out when the throttle allows, not later.
    @Test func aNewBrowserAsksThePresenterForAKeyframeWithin300ms() throws {
        func plis() -> Int {
            wire.take(teacher).filter { $0.count >= 12 && $0[1] == 206 && $0[0] & 0x1F == 1 }.count
        }
        publish(teacher, name: "teacher", [screen, audio])
        _ = wire.take(teacher)
        _ = try relay.addExternalViewer(room: "class", name: "browser-1", address: browser, presenter: nil, now: 1_000_000_000)
        #expect(plis() == 1)
        _ = try relay.addExternalViewer(room: "class", name: "browser-2", address: addr(10), presenter: nil, now: 1_100_000_000)
        #expect(plis() == 0, "throttled")
        relay.poll(now: 1_250_000_000, wallNanos: 0)
        #expect(plis() == 0)
        relay.poll(now: 1_300_000_000, wallNanos: 0)
        #expect(plis() == 1, "sent as soon as the throttle allows")
    }

    /// `--janus-remb`: a Janus mountpoint's REMB caps the presenter (the lowest of those sent
    /// in the last 2.5 s, renewed at most twice a second, a lower one at once); a browser's
    /// REMB, or a Janus mountpoint's without the flag, never does.
    @Test func onlyAViewerAllowedToCapPassesItsREMBToThePresenter() throws {
        func rembs() -> [UInt64] {
            wire.take(teacher).flatMap { b in (try? b.withUnsafeBytes { try RTCPPacket.parseCompound($0) }) ?? [] }.compactMap {
                if case .remb(let r) = $0, r.ssrcs == [screen.ssrc] { return r.bitsPerSecond } else { return nil }
            }
        }
        func remb(_ bps: UInt64, from a: PeerAddress, at now: UInt64) {
            var b = [UInt8](repeating: 0, count: 64)
            let n = b.withUnsafeMutableBytes { RTCPPacket.remb(REMB(senderSSRC: 7, bitsPerSecond: bps, ssrcs: [screen.ssrc])).marshal(into: $0) }
            relay.receive(Array(b[0..<n]), from: a, now: now)
        }
        publish(teacher, name: "teacher", [screen, audio])
        let janusA = addr(20), janusB = addr(21), plainJanus = addr(22)
        _ = try relay.addExternalViewer(room: "class", name: "browser-1", address: browser, presenter: nil, now: 0)
        _ = try relay.addExternalViewer(room: "class", name: "Janus A", address: janusA, presenter: nil, client: "janus", capsWithREMB: true, now: 0)
        _ = try relay.addExternalViewer(room: "class", name: "Janus B", address: janusB, presenter: nil, client: "janus", capsWithREMB: true, now: 0)
        _ = try relay.addExternalViewer(room: "class", name: "Janus C", address: plainJanus, presenter: nil, client: "janus", now: 0)
        _ = wire.take(teacher)
        remb(100_000, from: browser, at: 1_000_000_000)
        remb(100_000, from: plainJanus, at: 1_000_000_000)
        #expect(rembs().isEmpty)
        remb(800_000, from: janusA, at: 1_000_000_000)
        #expect(rembs() == [800_000])
        remb(900_000, from: janusB, at: 1_100_000_000)
        #expect(rembs().isEmpty, "not lower, and within 500 ms")
        remb(500_000, from: janusB, at: 1_200_000_000)
        #expect(rembs() == [500_000], "a lower cap at once")
        remb(800_000, from: janusA, at: 2_000_000_000)
        #expect(rembs() == [500_000], "still the lowest of the last 2.5 s")
        remb(800_000, from: janusA, at: 4_000_000_000)
        #expect(rembs() == [800_000], "B's cap lapsed")
    }

    @Test func badRoomNamesAreRefused() {
        #expect(throws: RoomProtocolError.self) { try relay.addExternalViewer(room: "two words", name: "b", address: browser, presenter: nil, now: 0) }
    }
}
