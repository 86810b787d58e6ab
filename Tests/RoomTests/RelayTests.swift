import Foundation
import RTCP
import RTP
import Testing
@testable import Room
import NetworkAddress

let ms: UInt64 = 1_000_000

@Suite struct RelayTests {
    let wire = Wire()
    let relay: RelayCore
    let presenter = addr(1), viewer = addr(2), other = addr(3)

    init() { relay = RelayCore(ssrc: 0xAAAA, wire: wire) }

    func join(_ a: PeerAddress, room: String = "class", name: String, now: UInt64 = 0) -> UInt32 {
        relay.receive(ControlEnvelope(requestID: 1, .join(room: room, name: name, role: "viewer", token: nil,
                                                           cookie: relay.cookie(for: a, now: now))), from: a, now: now)
        for e in wire.controls(a) { if case let .welcome(peer, _, _, _) = e.message { return peer } }
        Issue.record("no welcome for \(name)")
        return 0
    }

    /// A presenter publishing the screen and a viewer subscribed to it.
    func setUp(now: UInt64 = 0) -> (presenter: UInt32, viewer: UInt32) {
        let p = join(presenter, name: "teacher", now: now)
        relay.receive(ControlEnvelope(requestID: 2, .publish(streams: [screen, audio])), from: presenter, now: now)
        let v = join(viewer, name: "pupil", now: now)
        relay.receive(ControlEnvelope(requestID: 3, .subscribe(publisher: p, kinds: [.screen, .audio])), from: viewer, now: now)
        return (p, v)
    }

    /// A viewer's NACK for `seqs` of the screen, at `t`.
    func ask(_ seqs: [UInt16], from who: PeerAddress, at t: UInt64) {
        var nack = [UInt8](repeating: 0, count: 64)
        let n = nack.withUnsafeMutableBytes { RTCPPacket.buildNACK(senderSSRC: 7, mediaSSRC: screen.ssrc, sequenceNumbers: seqs, into: $0) }
        relay.receive(Array(nack[0..<n]), from: who, now: t)
    }

    /// The keyframe requests (PLIs) sent to the presenter since the last look.
    func plis() -> Int {
        wire.take(presenter).filter { bytes in
            let packets = bytes.withUnsafeBytes { try? RTCPPacket.parseCompound($0) } ?? []
            return packets.contains { if case .pli = $0 { true } else { false } }
        }.count
    }

    /// The core calls into no I/O: what it decides waits in its queue, in order, until the
    /// caller drains it; its events likewise; and it says when its timers want it.
    @Test func whatTheCoreDecidesWaitsForTheCallerInOrder() {
        let core = RelayCore(ssrc: 0xAAAA)  // no wire drains it on read
        let a = addr(1), b = addr(2)
        for (n, address) in [a, b].enumerated() {
            core.receive(ControlEnvelope(requestID: UInt32(n), .join(room: "class", name: "p\(n)", role: "viewer", token: nil,
                                                                     cookie: core.cookie(for: address, now: 0))), from: address, now: 0)
        }
        // a's welcome, b's welcome, and a told that b joined: queued, none sent yet.
        #expect(core.queuedDatagrams == 3)
        let collected = Wire()
        core.drain(into: collected)
        #expect(core.queuedDatagrams == 0)
        let order = collected.sent.map { entry in
            (entry.to.port, (try? ControlEnvelope.parse(entry.bytes).message).map { m -> String in
                if case .welcome = m { return "welcome" } else if case .peerJoined = m { return "joined" } else { return "\(m)" }
            } ?? "?")
        }
        #expect(order.map(\.0) == [a.port, b.port, a.port] && order.map(\.1) == ["welcome", "welcome", "joined"], "\(order)")
        var events: [RelayEvent] = []
        core.drainEvents { events.append($0) }
        #expect(events.count == 2 && events.allSatisfy { if case .peerJoined = $0 { true } else { false } }, "\(events)")
        core.drainEvents { events.append($0) }
        #expect(events.count == 2)  // drained once
        // Its timers: due at once before the first poll, then 50 ms after each.
        #expect(core.nextDeadline == 0)
        core.poll(now: 7 * ms, wallNanos: 0)
        #expect(core.nextDeadline == 57 * ms)
    }

    @Test func joinIsAnsweredAndAnnounced() {
        let a = join(presenter, name: "teacher")
        let b = join(viewer, name: "pupil")
        #expect(a != b)
        let toFirst = wire.controls(presenter).map(\.message)
        #expect(toFirst == [.peerJoined(version: 2, peer: PeerInfo(id: b, name: "pupil", role: "viewer"))])
        #expect(relay.peers(in: "class").map(\.name) == ["teacher", "pupil"])
        // A retransmitted join gets the same id.
        #expect(join(viewer, name: "pupil") == b)
        #expect(relay.peerCount == 2)
    }

    @Test func subscribingAsksThePublisherForAKeyframeAndForwardsOnlyToSubscribers() {
        let (p, _) = setUp()
        _ = join(other, name: "not-subscribed")
        wire.sent.removeAll()
        // The subscribe above made the relay send a PLI for the screen (not for audio).
        relay.receive(ControlEnvelope(requestID: 9, .subscribe(publisher: p, kinds: [.screen])), from: other, now: 1000 * ms)
        let toPresenter = wire.take(presenter).filter { DatagramKind.of(bytesOf: $0) == .rtcp }
        #expect(toPresenter.count == 1)
        let plis = toPresenter.flatMap { b in (try? b.withUnsafeBytes { try RTCPPacket.parseCompound($0) }) ?? [] }
        #expect(plis == [.pli(senderSSRC: 0xAAAA, mediaSSRC: screen.ssrc)])
        relay.receive(ControlEnvelope(requestID: 10, .unsubscribe(publisher: p, kinds: [])), from: other, now: 1001 * ms)
        wire.sent.removeAll()
        let packet = vp8Packet(ssrc: screen.ssrc, seq: 5, keyframe: true)
        relay.receive(packet, from: presenter, now: 1002 * ms)
        #expect(wire.take(viewer) == [packet])
        #expect(wire.take(other).isEmpty)
        #expect(wire.take(presenter).isEmpty)
        #expect(relay.counters.rtpForwarded == 1)
        // An SSRC nobody published is dropped and counted.
        relay.receive(vp8Packet(ssrc: 0x9999, seq: 1), from: presenter, now: 1003 * ms)
        #expect(wire.sent.isEmpty)
        #expect(relay.counters.rejected == 1)
    }

    @Test func nacksAreAnsweredFromTheRelaysHistory() throws {
        _ = setUp()
        for seq in UInt16(100)...110 { relay.receive(vp8Packet(ssrc: screen.ssrc, seq: seq), from: presenter, now: 10 * ms) }
        wire.sent.removeAll()
        var nack = [UInt8](repeating: 0, count: 64)
        let n = nack.withUnsafeMutableBytes { RTCPPacket.buildNACK(senderSSRC: 7, mediaSSRC: screen.ssrc, sequenceNumbers: [103, 105, 200], into: $0) }
        relay.receive(Array(nack[0..<n]), from: viewer, now: 20 * ms)
        let resent = wire.take(viewer).map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        #expect(resent == [103, 105])
        #expect(wire.take(presenter).isEmpty)  // the presenter's uplink is spared
        #expect(relay.counters.retransmitted == 2)
        #expect(relay.counters.resendsGone == 1 && relay.counters.retransmitMissed == 1, "200 was never stored")
    }

    /// A packet a viewer asks for a fourth time, 300 ms after the first, will not get through
    /// (the path drops it every time): the relay asks the presenter for a keyframe then, once
    /// — not after the browser's own 3 s wait. A viewer that asks once or twice does not.
    @Test func aPacketAskedForAgainAndAgainGetsAKeyframe() throws {
        _ = setUp()
        for seq in UInt16(100)...110 { relay.receive(vp8Packet(ssrc: screen.ssrc, seq: seq), from: presenter, now: 10 * ms) }
        wire.sent.removeAll()
        let before = relay.counters.keyframeRequests
        // Another packet lost once and resent: nothing more.
        ask([104], from: viewer, at: 20 * ms)
        for k in UInt64(0)..<3 { ask([103], from: viewer, at: (100 + 100 * k) * ms) }
        #expect(plis() == 0 && relay.counters.keyframeRequests == before, "three asks are resends only")
        ask([103], from: viewer, at: 400 * ms)  // the fourth, 300 ms after the first
        #expect(plis() == 1 && relay.counters.lostForGood == 1)
        ask([103], from: viewer, at: 800 * ms)  // asked again: not a second keyframe for it
        #expect(plis() == 0 && relay.counters.lostForGood == 1)
        #expect(relay.counters.retransmitted == 6, "every ask is still answered")
    }

    /// A packet the relay cannot resend — gone from its history, or over the viewer's resend
    /// budget each time — is no better: asked for a fourth time, 300 ms after the first, it gets
    /// a keyframe (a browser kept asking 3.4 s for two packets lost at its start, each ask
    /// unanswered, until its own keyframe request).
    @Test func aPacketTheRelayCannotResendGetsAKeyframeWhenAskedAgainAndAgain() throws {
        _ = setUp()
        for seq in UInt16(100)...110 { relay.receive(vp8Packet(ssrc: screen.ssrc, seq: seq), from: presenter, now: 10 * ms) }
        wire.sent.removeAll()
        let before = relay.counters.keyframeRequests
        // 90 was never stored (lost before the relay, or long gone).
        for k in UInt64(0)..<3 { ask([90], from: viewer, at: (100 + 100 * k) * ms) }
        #expect(plis() == 0 && relay.counters.keyframeRequests == before, "three asks are not yet a lost cause")
        #expect(wire.take(viewer).isEmpty && relay.counters.resendsGone == 3 && relay.counters.retransmitMissed == 3)
        ask([90], from: viewer, at: 400 * ms)
        #expect(plis() == 1 && relay.counters.lostForGood == 1)
        ask([90], from: viewer, at: 800 * ms)
        #expect(plis() == 0 && relay.counters.lostForGood == 1, "one keyframe for one packet")
    }

    /// Four asks within 300 ms are a link's retries, not a lost cause.
    @Test func quickRetriesAreNotALostCause() {
        var watch = ResendWatch()
        func ask(_ seq: UInt16, _ t: UInt64) -> Bool { watch.asked(seq, now: t) }
        for k in UInt64(0)..<6 { #expect(!ask(7, k * 50 * ms)) }
        #expect(ask(7, 300 * ms))
        #expect(!ask(7, 900 * ms))
        // Eight other packets push it out; asked again, it starts over.
        for seq in UInt16(20)..<28 { _ = ask(seq, 1000 * ms) }
        for k in UInt64(0)..<3 { #expect(!ask(7, (2000 + 200 * k) * ms)) }
        #expect(ask(7, 2600 * ms))
    }

    /// A presenter's screen with its FEC stream (`--fec`): a packet lost on the way in is
    /// recovered by the relay from the FEC packet and forwarded to the viewer as if it had
    /// arrived (and kept: a NACK for it is answered); the FEC packet goes to the viewer who
    /// subscribed to it, never to one who did not.
    @Test func theRelayRecoversAPresentersLostPacketFromItsFEC() throws {
        let fecInfo = StreamInfo(kind: .fec, ssrc: 0xFEC0, pt: ULPFEC.payloadType, codec: "ulpfec", clock: 90_000)
        let p = join(presenter, name: "teacher")
        relay.receive(ControlEnvelope(requestID: 2, .publish(streams: [screen, fecInfo])), from: presenter, now: 0)
        _ = join(viewer, name: "pupil")
        relay.receive(ControlEnvelope(requestID: 3, .subscribe(publisher: p, kinds: [.screen, .fec])), from: viewer, now: 0)
        _ = join(other, name: "browser-like")
        relay.receive(ControlEnvelope(requestID: 4, .subscribe(publisher: p, kinds: [.screen])), from: other, now: 0)
        var encoder = ULPFECEncoder(capacity: 8)
        var media: [[UInt8]] = []
        for i in 0..<4 { media.append(vp8Packet(ssrc: screen.ssrc, seq: UInt16(300 + i), ts: 9000, start: i == 0, keyframe: i == 0)) }
        for m in media { m.withUnsafeBytes { encoder.add($0) } }
        var fecs: [[UInt8]] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
        defer { buffer.deallocate() }
        encoder.finish(protection: 0.25, payloadType: ULPFEC.payloadType, sequence: 7, ssrc: fecInfo.ssrc, transportSequenceID: nil,
                       into: buffer) { fecs.append(Array($0)) }
        #expect(fecs.count == 1)
        wire.sent.removeAll()
        for (i, m) in media.enumerated() where i != 2 { relay.receive(m, from: presenter, now: 10 * ms) }
        relay.receive(fecs[0], from: presenter, now: 11 * ms)
        let got = wire.take(viewer)
        #expect(got.contains(media[2]) && got.contains(fecs[0]) && got.count == 5, "\(got.map { $0.prefix(4) })")
        let otherGot = wire.take(other)
        #expect(otherGot.contains(media[2]) && !otherGot.contains(fecs[0]) && otherGot.count == 4)
        #expect(relay.counters.fecIn == 1 && relay.counters.fecRecovered == 1)
        var nack = [UInt8](repeating: 0, count: 64)
        let n = nack.withUnsafeMutableBytes { RTCPPacket.buildNACK(senderSSRC: 7, mediaSSRC: screen.ssrc, sequenceNumbers: [302], into: $0) }
        relay.receive(Array(nack[0..<n]), from: viewer, now: 30 * ms)
        #expect(wire.take(viewer) == [media[2]])
        // Rebuilt, so never asked of the presenter.
        relay.poll(now: 500 * ms, wallNanos: 0)
        #expect(relay.counters.uplinkNacks == 0)
    }

    /// A packet the presenter's uplink lost is asked of the presenter by the relay (its viewers'
    /// NACKs for it find nothing in the history until the resend comes), and again after a
    /// round trip while it does not come; the resend then reaches the viewer.
    @Test func theRelayAsksThePresenterForWhatItsUplinkLost() throws {
        _ = setUp()
        for seq in UInt16(100)...106 where seq != 103 { relay.receive(vp8Packet(ssrc: screen.ssrc, seq: seq), from: presenter, now: 10 * ms) }
        wire.sent.removeAll()
        relay.poll(now: 30 * ms, wallNanos: 0)
        func nacked() -> [UInt16] {
            wire.take(presenter).flatMap { b in (try? b.withUnsafeBytes { try RTCPPacket.parseCompound($0) }) ?? [] }.flatMap { p -> [UInt16] in
                guard case .nack(let n) = p, n.mediaSSRC == screen.ssrc else { return [] }
                var seqs: [UInt16] = []
                n.forEachSequenceNumber { seqs.append($0) }
                return seqs
            }
        }
        #expect(nacked() == [103])
        relay.poll(now: 60 * ms, wallNanos: 0)
        #expect(nacked().isEmpty, "not again within a round trip")
        relay.poll(now: 200 * ms, wallNanos: 0)
        #expect(nacked() == [103])
        let resend = vp8Packet(ssrc: screen.ssrc, seq: 103)
        relay.receive(resend, from: presenter, now: 210 * ms)
        #expect(wire.take(viewer) == [resend])
        relay.poll(now: 600 * ms, wallNanos: 0)
        #expect(nacked().isEmpty && relay.counters.uplinkNacks == 2)
        // A frame's packet without the marker, then a pause (the presenter's pacer holding the
        // rest): nothing is asked for until a later packet shows a hole.
        var first = vp8Packet(ssrc: screen.ssrc, seq: 107)
        first[1] &= 0x7F
        relay.receive(first, from: presenter, now: 700 * ms)
        relay.poll(now: 900 * ms, wallNanos: 0)
        #expect(nacked().isEmpty, "no tail probe")
    }

    /// A presenter's packets carrying the transport-wide sequence number are answered with
    /// transport feedback every 100 ms (its uplink's congestion control), naming each, lost ones
    /// too; the packets still reach the viewer.
    @Test func aPresentersTransportSequenceIsAnsweredWithFeedback() throws {
        _ = setUp()
        func stamped(_ seq: UInt16, _ transport: UInt16) -> [UInt8] {
            var p = vp8Packet(ssrc: screen.ssrc, seq: seq)
            p.insert(contentsOf: [UInt8](repeating: 0, count: TransportWideSequence.blockSize), at: 12)
            p.withUnsafeMutableBytes {
                _ = TransportWideSequence.writeBlock(id: RoomProtocol.transportSequenceID, into: $0)
                TransportWideSequence.stamp(transport, into: $0)
            }
            return p
        }
        for (i, t) in [UInt16(65534), 65535, 1, 2].enumerated() {  // 0 is lost
            relay.receive(stamped(UInt16(10 + i), t), from: presenter, now: 1_000 * ms + UInt64(i) * 5 * ms)
        }
        #expect(wire.take(viewer).filter { DatagramKind.of(bytesOf: $0) == .rtp }.count == 4)
        relay.poll(now: 1_050 * ms, wallNanos: 0)
        #expect(wire.take(presenter).filter { $0.count > 1 && $0[1] == 205 && $0[0] & 0x1F == 15 }.isEmpty)  // not due yet
        relay.poll(now: 1_101 * ms, wallNanos: 0)
        let feedback = try wire.take(presenter).compactMap { bytes -> TransportFeedback? in
            guard DatagramKind.of(bytesOf: bytes) == .rtcp else { return nil }
            let packets = try bytes.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
            for case .transportFeedback(let fb) in packets { return fb }
            return nil
        }
        #expect(feedback.count == 1)
        #expect(feedback.first?.baseSequence == 65534)
        #expect(feedback.first?.arrivals.map { $0 != nil } == [true, true, false, true, true])
        #expect(feedback.first.map { $0.arrivals[4]! - $0.arrivals[0]! } == 60)  // 15 ms in 250 µs
        #expect(relay.counters.transportFeedbacks == 1)
    }

    @Test func keyframeRequestsAreThrottledTo300msAndAKeyframeAnswersThePendingOne() throws {
        _ = setUp(now: 0)  // PLI #1 at 0 for the subscription
        wire.sent.removeAll()
        var pli = [UInt8](repeating: 0, count: 32)
        let n = pli.withUnsafeMutableBytes { RTCPPacket.buildPLI(senderSSRC: 7, mediaSSRC: screen.ssrc, into: $0) }
        let request = Array(pli[0..<n])
        relay.receive(request, from: viewer, now: 100 * ms)
        relay.poll(now: 200 * ms, wallNanos: 0)
        #expect(wire.take(presenter).filter { DatagramKind.of(bytesOf: $0) == .rtcp && $0[1] == 206 }.isEmpty)
        relay.poll(now: 300 * ms, wallNanos: 0)
        #expect(wire.take(presenter).filter { $0[1] == 206 }.count == 1)  // the pending one, once due
        #expect(relay.counters.keyframeRequests == 2)
        // Pending again, but a keyframe passes first: nothing more is asked.
        relay.receive(request, from: viewer, now: 400 * ms)
        relay.receive(vp8Packet(ssrc: screen.ssrc, seq: 1, keyframe: true), from: presenter, now: 450 * ms)
        relay.poll(now: 700 * ms, wallNanos: 0)
        #expect(wire.take(presenter).filter { $0[1] == 206 }.isEmpty)
        #expect(relay.counters.keyframeRequests == 2)
    }

    @Test func aSilentPeerIsRemovedWithin5sAndNothingMoreIsSentToIt() {
        let (p, v) = setUp(now: 0)
        var t: UInt64 = 0
        while t < 3900 * ms {  // the presenter keeps talking; the viewer went silent at 0
            t += 250 * ms
            relay.receive(ControlEnvelope(.ping(version: 0)), from: presenter, now: t)
            relay.poll(now: t, wallNanos: t)
        }
        #expect(relay.subscribers(room: "class", ssrc: screen.ssrc) == [viewer])
        t += 250 * ms
        relay.receive(ControlEnvelope(.ping(version: 0)), from: presenter, now: t)
        relay.poll(now: t, wallNanos: t)
        #expect(t <= 5000 * ms)
        #expect(relay.subscribers(room: "class", ssrc: screen.ssrc).isEmpty)
        let told = wire.controls(presenter).map(\.message)
        #expect(told.contains { if case .peerLeft(_, v, "timeout") = $0 { true } else { false } })
        #expect(told.contains(.subscribers(peers: [])))
        wire.sent.removeAll()
        relay.receive(vp8Packet(ssrc: screen.ssrc, seq: 9), from: presenter, now: t)
        #expect(wire.take(viewer).isEmpty)
        _ = p
    }

    @Test func roomsAreIsolated() {
        let p = join(presenter, room: "a", name: "pa")
        relay.receive(ControlEnvelope(requestID: 2, .publish(streams: [screen])), from: presenter, now: 0)
        _ = join(viewer, room: "b", name: "vb")
        // Peer ids are relay-wide: b cannot subscribe to a's presenter.
        relay.receive(ControlEnvelope(requestID: 3, .subscribe(publisher: p, kinds: [.screen])), from: viewer, now: 0)
        #expect(wire.controls(viewer).contains { if case .error(.unknownPeer, _) = $0.message { true } else { false } })
        wire.sent.removeAll()
        relay.receive(vp8Packet(ssrc: screen.ssrc, seq: 1), from: presenter, now: 1)
        #expect(wire.sent.isEmpty)
        // The same SSRC may be used in another room; in the same room it is a conflict.
        relay.receive(ControlEnvelope(requestID: 4, .publish(streams: [screen])), from: viewer, now: 2)
        #expect(wire.controls(viewer).map(\.message).first == .ok(streams: nil))
        _ = join(other, room: "a", name: "pa2")
        relay.receive(ControlEnvelope(requestID: 5, .publish(streams: [screen])), from: other, now: 3)
        #expect(wire.controls(other).contains { if case .error(.ssrcConflict, _) = $0.message { true } else { false } })
    }

    /// Return routability: a join from an address that has not shown it receives what is sent
    /// to it gets one retry, no larger than the join, and nothing else; echoing the cookie (this
    /// address's, from this or the last 30 s) gets it in.
    @Test func aStrangersJoinGetsOnlyARetryUntilItEchoesTheCookie() throws {
        let join = ControlEnvelope(requestID: 4, .join(room: "class", name: "spoofed", role: "viewer", token: nil)).encoded()
        relay.receive(join, from: viewer, now: 0)
        let replies = wire.take(viewer)
        #expect(replies.count == 1 && replies[0].count <= join.count, "\(replies.map(\.count)) for \(join.count) bytes")
        let retry = try ControlEnvelope.parse(replies[0], maxSize: RoomProtocol.maxRelayMessageSize)
        guard case let .retry(cookie) = retry.message else { Issue.record("not a retry: \(retry)"); return }
        #expect(retry.requestID == 4 && relay.peerCount == 0 && relay.counters.retriesSent == 1)
        func joinWith(_ cookie: String?, from a: PeerAddress, now: UInt64) -> ControlMessage? {
            relay.receive(ControlEnvelope(requestID: 5, .join(room: "class", name: "pupil", role: "viewer", token: nil, cookie: cookie)), from: a, now: now)
            return wire.controls(a).first?.message
        }
        // Another port's cookie, a made-up one, one from two periods ago: a new retry.
        if case .retry? = joinWith(cookie, from: other, now: 0) {} else { Issue.record("another address's cookie let it in") }
        if case .retry? = joinWith("00112233445566778899aabb", from: viewer, now: 0) {} else { Issue.record("a made-up cookie let it in") }
        if case .retry? = joinWith(cookie, from: viewer, now: 2 * RelayCore.cookieEpochNanos) {} else { Issue.record("a stale cookie let it in") }
        // Its own, within the next period: welcome.
        if case .welcome? = joinWith(cookie, from: viewer, now: RelayCore.cookieEpochNanos + 1) {} else { Issue.record("its cookie did not let it in") }
        #expect(relay.peerCount == 1)
    }

    /// To an address in no room the relay never sends more bytes than it got: requests are
    /// padded so that an error code fits; a bare 8-octet header gets nothing.
    @Test func aStrangerNeverGetsMoreBytesThanItSent() {
        let requests: [[UInt8]] = [
            ControlEnvelope(requestID: 1, .subscribe(publisher: 1, kinds: [])).encoded(),
            ControlEnvelope(requestID: 2, .ping(version: 0)).encoded(),
            ControlEnvelope(requestID: 3, .sync).encoded(),
            ControlEnvelope(requestID: 4, .join(room: "a room with spaces and a long name", name: "x", role: "viewer", token: nil)).encoded(),
            [0x53, 0x53, 9, 4, 0, 0, 0, 5], [0x53, 0x53, RoomProtocol.version, 99, 0, 0, 0, 6],
            vp8Packet(ssrc: 0x77, seq: 1), [0x80, 201, 0, 1, 0, 0, 0, 1],
        ]
        var sent = 0, received = 0
        for r in requests {
            relay.receive(r, from: other, now: 0)
            sent += r.count
            for reply in wire.take(other) {
                received += reply.count
                #expect(reply.count <= r.count, "\(reply.count) bytes back for \(r.count)")
            }
        }
        #expect(received <= sent && received > 0, "\(received) of \(sent)")
        #expect(relay.counters.repliesWithheld >= 1)  // the bare header, at least (the per-address budget may have run out first)
    }

    @Test func strangersAndBadRequestsGetErrorsAndAreCounted() {
        relay.receive(ControlEnvelope(requestID: 5, .subscribe(publisher: 1, kinds: [])), from: other, now: 0)
        let reply = wire.controls(other)
        #expect(reply.map(\.requestID) == [5])
        #expect(reply.first.map { if case .error(.notJoined, _) = $0.message { true } else { false } } == true)
        relay.receive(ControlEnvelope(requestID: 6, .join(room: "bad room", name: "x", role: "viewer", token: nil,
                                                           cookie: relay.cookie(for: other, now: 0))), from: other, now: 0)
        #expect(wire.controls(other).first.map { if case .error(.badRoom, _) = $0.message { true } else { false } } == true)
        relay.receive(vp8Packet(ssrc: 1, seq: 1), from: other, now: 0)
        #expect(relay.counters.unknownSource == 1)
        // Errors are rate limited: a flood is not answered in kind.
        for i in 0..<500 { relay.receive([0x53, 0x53, 9, 1, 0, 0, 0, 0], from: addr(UInt16(100 + i)), now: 5_000 * ms) }
        #expect(relay.counters.errorsSent <= 2 + RelayLimits().maxErrorsPerSecond)
        #expect(relay.counters.rejected >= 502)
    }

    @Test func senderReportsAreForwardedAndViewerRTTComesFromTheForwardTime() throws {
        _ = setUp()
        wire.sent.removeAll()
        var b = [UInt8](repeating: 0, count: 256)
        let ntp = NTPTimestamp(unixNanos: 1_700_000_000_000_000_000)
        let n = b.withUnsafeMutableBytes {
            RTCPPacket.buildSenderReport(ssrc: screen.ssrc, ntp: ntp, rtpTimestamp: 1, packetCount: 1, octetCount: 1, cname: "c", bye: false, into: $0)
        }
        relay.receive(Array(b[0..<n]), from: presenter, now: 1000 * ms)  // forwarded at wall 1_700…+1 s
        #expect(wire.take(viewer) == [Array(b[0..<n])])
        // The viewer answers 30 ms later having held the report 10 ms: RTT 20 ms.
        let block = ReceptionReport(ssrc: screen.ssrc, lastSenderReport: ntp.middle32, delaySinceLastSenderReport: NTPTimestamp.short(fromNanos: 10 * ms))
        let m = b.withUnsafeMutableBytes { RTCPPacket.buildReceiverReport(ssrc: 5, reports: [block], cname: "v", into: $0) }
        relay.receive(Array(b[0..<m]), from: viewer, now: 1030 * ms)
        let reports = relay.subscriberReports(room: "class", ssrc: screen.ssrc)
        #expect(reports.count == 1)
        let rtt = try #require(reports.first?.rttNanos)
        #expect(rtt > 19 * ms && rtt < 21 * ms)
    }
}
