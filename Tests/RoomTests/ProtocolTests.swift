import Foundation
import Testing
@testable import Room
import TestSupport

@Suite struct ProtocolTests {
    @Test func headerBytesAreTheDocumentedOnes() throws {
        let bytes = ControlEnvelope(requestID: 0x0102_0304, .ping(version: 7)).encoded()
        #expect(Array(bytes[0..<8]) == [0x53, 0x53, 0x03, 0x04, 0x01, 0x02, 0x03, 0x04])
        // Requests are padded with spaces to 80 octets.
        #expect(bytes.count == 80)
        #expect(String(decoding: bytes[8...], as: UTF8.self) == #"{"version":7}"# + String(repeating: " ", count: 80 - 8 - 13))
        let join = ControlEnvelope(requestID: 1, .join(room: "class", name: "Ann", role: "viewer", token: nil, cookie: "0011")).encoded()
        #expect(String(decoding: join[8...], as: UTF8.self).trimmingCharacters(in: .whitespaces)
                == #"{"cookie":"0011","name":"Ann","role":"viewer","room":"class"}"#)
        // What the relay sends is not padded.
        let retry = ControlEnvelope(requestID: 1, .retry(cookie: "0011")).encoded()
        #expect(String(decoding: retry[8...], as: UTF8.self) == #"{"cookie":"0011"}"#)
    }

    @Test func everyMessageRoundTrips() throws {
        let peer = PeerInfo(id: 3, name: "Ann", role: "presenter", streams: [screen, audio])
        let messages: [ControlMessage] = [
            .join(room: "r", name: "n", role: "presenter", token: "t"), .welcome(peer: 4, room: "r", version: 9, peers: [peer]),
            .leave, .ping(version: 3), .pong(version: 4, subscribers: 2), .publish(streams: [screen, audio]),
            .subscribe(publisher: 3, kinds: [.screen]), .unsubscribe(publisher: 3, kinds: []), .ok(streams: [screen]), .ok(streams: nil),
            .error(code: .ssrcConflict, message: "x"), .peerJoined(version: 5, peer: peer), .peerLeft(version: 6, peer: 3, reason: "timeout"),
            .streams(version: 7, peer: 3, streams: []), .sync, .state(version: 8, peers: [peer]), .subscribers(peers: [1, 2]),
            .retry(cookie: "00112233445566778899aabb"), .join(room: "r", name: "n", role: "viewer", token: nil, cookie: "0011"),
            .link(publisher: 3, layers: .base, estimateKbps: 420), .link(publisher: 3, layers: .keyframes, estimateKbps: nil),
        ]
        #expect(Set(messages.map(\.type.rawValue)) == Set(MessageType.allCases.map(\.rawValue)))
        for (i, m) in messages.enumerated() {
            let e = ControlEnvelope(requestID: UInt32(i), m)
            #expect(try ControlEnvelope.parse(e.encoded()) == e)
        }
    }

    /// `link` (type 18): the relay's word to a viewer on what its link carries; exact bytes, and
    /// a missing or unknown `layers` refused by name.
    @Test func linkHasItsBytesAndRefusesWhatIsNotOneOfItsLayers() throws {
        let bytes = ControlEnvelope(.link(publisher: 3, layers: .base, estimateKbps: 420)).encoded()
        #expect(Array(bytes[0..<8]) == [0x53, 0x53, 3, 18, 0, 0, 0, 0])
        #expect(String(decoding: bytes[8...], as: UTF8.self) == #"{"estimate_kbps":420,"layers":"base","publisher":3}"#)
        func body(_ json: String) -> [UInt8] { [0x53, 0x53, 3, 18, 0, 0, 0, 0] + Array(json.utf8) }
        #expect(throws: RoomProtocolError(.badMessage, "link: field 'layers' missing")) { try ControlEnvelope.parse(body(#"{"publisher":3}"#)) }
        #expect(throws: RoomProtocolError(.badMessage, "link: body is not a valid JSON object of this protocol")) {
            try ControlEnvelope.parse(body(#"{"publisher":3,"layers":"quarter"}"#))
        }
    }

    @Test func aWelcomeListingABigRoomIsLongerThanAPeerMessageAndPeersStillTakeIt() throws {
        let peers = (1...200).map { PeerInfo(id: UInt32($0), name: "viewer \($0)", role: "viewer") }
        let welcome = ControlEnvelope(requestID: 7, .welcome(peer: 200, room: "class", version: 200, peers: peers))
        let bytes = welcome.encoded()
        #expect(bytes.count > RoomProtocol.maxMessageSize)
        #expect(bytes.count <= RoomProtocol.maxRelayMessageSize)
        // The relay's limit for what peers send…
        #expect(throws: RoomProtocolError.self) { try ControlEnvelope.parse(bytes) }
        // …is not the limit for what the relay sends them.
        #expect(try ControlEnvelope.parse(bytes, maxSize: RoomProtocol.maxRelayMessageSize) == welcome)
    }

    /// A room too big to list in one DTLS record: the welcome keeps every publisher and the
    /// peer it goes to, drops other viewers from the end, and fits.
    @Test func aWelcomeTooLongForOneRecordKeepsThePublishersAndTheRecipient() throws {
        let screen = StreamInfo(kind: .screen, ssrc: 9, pt: 96, codec: "VP8", clock: 90000)
        var peers = (1...500).map { PeerInfo(id: UInt32($0), name: "viewer with a long name \($0)", role: "viewer") }
        peers[3].streams = [screen]
        peers[480].streams = [screen]
        let message = ControlMessage.welcome(peer: 499, room: "class", version: 9, peers: peers)
        #expect(ControlEnvelope(requestID: 7, message).encoded().count > RoomProtocol.maxRelayMessageSize)
        let bytes = try #require(RelayCore.fitted(message, requestID: 7, recipient: 499))
        #expect(bytes.count <= RoomProtocol.maxRelayMessageSize)
        guard case let .welcome(_, _, _, listed) = try ControlEnvelope.parse(bytes, maxSize: RoomProtocol.maxRelayMessageSize).message else {
            Issue.record("not a welcome")
            return
        }
        let ids = listed.map(\.id)
        #expect(ids.contains(4) && ids.contains(481) && ids.contains(499), "publishers and the recipient stay")
        #expect(ids == ids.sorted() && ids.count > 150, "viewers kept in join order, as many as fit: \(ids.count)")
    }

    @Test func errorsNameWhatIsWrong() {
        func error(_ bytes: [UInt8]) -> RoomProtocolError? {
            do { _ = try ControlEnvelope.parse(bytes); return nil } catch { return error as? RoomProtocolError }
        }
        #expect(error([0x53, 0x53, 1])?.code == .badMessage)
        let v1 = error([0x53, 0x53, 1, 4, 0, 0, 0, 9] + Array("{}".utf8))
        #expect(v1?.code == .unsupportedVersion)
        #expect(v1?.requestID == 9)
        #expect(error([0x53, 0x53, 3, 99, 0, 0, 0, 1])?.code == .unknownType)
        #expect(error([0x53, 0x53, 3, 1, 0, 0, 0, 1] + Array("{nope".utf8))?.code == .badMessage)
        let missing = error([0x53, 0x53, 3, 1, 0, 0, 0, 1] + Array(#"{"name":"x"}"#.utf8))
        #expect(missing?.message.contains("'room'") == true)
        #expect(error([0x53, 0x53, 3, 4, 0, 0, 0, 1] + Array(repeating: 0x20, count: 1300))?.code == .badMessage)
        // An empty body is an empty object: ping needs no field.
        #expect((try? ControlEnvelope.parse([0x53, 0x53, 3, 4, 0, 0, 0, 1]))?.message == .ping(version: 0))
    }

    @Test func datagramsAreToldApartByTheirFirstOctets() {
        #expect(DatagramKind.of(bytesOf: [0x53, 0x53]) == .control)
        #expect(DatagramKind.of(bytesOf: [0x80, 96]) == .rtp)
        #expect(DatagramKind.of(bytesOf: [0x80, 200]) == .rtcp)
        #expect(DatagramKind.of(bytesOf: [0x81, 206]) == .rtcp)
        #expect(DatagramKind.of(bytesOf: [0x00, 0x01]) == .unknown)  // STUN
        #expect(DatagramKind.of(bytesOf: [0x80]) == .unknown)
    }

    /// Random and mutated datagrams: the parser and the relay never crash, reject and count,
    /// keep their memory bounded and keep serving.
    @Test func fuzzedDatagramsAreRejectedAndTheRelayKeepsServing() {
        var rng = SplitMix64(seed: 0x5EED)
        let wire = Wire()
        var limits = RelayLimits()
        limits.maxRooms = 8
        let relay = RelayCore(limits: limits, wire: wire)
        let valid: [[UInt8]] = [
            ControlEnvelope(requestID: 1, .join(room: "a", name: "x", role: "presenter", token: nil)).encoded(),
            ControlEnvelope(requestID: 2, .publish(streams: [screen])).encoded(),
            ControlEnvelope(requestID: 3, .subscribe(publisher: 1, kinds: [.screen])).encoded(),
            ControlEnvelope(requestID: 4, .ping(version: 1)).encoded(),
            vp8Packet(ssrc: 0x1111, seq: 1, keyframe: true),
            [0x81, 205, 0, 3, 0, 0, 0, 1, 0, 0, 0x11, 0x11, 0, 1, 0xFF, 0xFF],  // NACK
        ]
        var now: UInt64 = 1
        for i in 0..<30_000 {
            var bytes: [UInt8]
            // Joins carry the cookie the relay gave the address they come from (as a peer that
            // answered its retry), so the fuzzing reaches past the door.
            var valid = valid
            valid[0] = ControlEnvelope(requestID: 1, .join(room: "a", name: "x", role: "presenter", token: nil,
                                                          cookie: relay.cookie(for: addr(UInt16(i % 40)), now: now + 1_000_000))).encoded()
            switch rng.next() % 4 {
            case 0: bytes = (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            case 1:
                bytes = valid[Int(rng.next() % UInt64(valid.count))]
                for _ in 0..<(1 + rng.next() % 4) where !bytes.isEmpty { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            case 2:
                bytes = valid[Int(rng.next() % UInt64(valid.count))]
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))))
            default:
                bytes = [0x53, 0x53, RoomProtocol.version, UInt8(rng.next() % 20)] + (0..<4).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                    + Array("{\"room\":\"r\(rng.next() % 50)\",\"streams\":[{\"kind\":\"screen\",\"ssrc\":\(rng.next() % 5)}]}".utf8)
            }
            _ = try? ControlEnvelope.parse(bytes)
            now += 1_000_000
            relay.receive(bytes, from: addr(UInt16(i % 40)), now: now)
            if i % 100 == 0 { relay.poll(now: now, wallNanos: now) }
            if i % 1000 == 0 { wire.sent.removeAll() }
        }
        #expect(relay.counters.rejected > 1000)
        #expect(relay.roomCount <= 8)
        #expect(relay.peerCount <= 40)
        // Still serving.
        wire.sent.removeAll()
        relay.receive(ControlEnvelope(requestID: 77, .join(room: "after", name: "z", role: "viewer", token: nil,
                                                            cookie: relay.cookie(for: addr(999), now: now))), from: addr(999), now: now)
        let reply = wire.controls(addr(999))
        guard case .welcome? = reply.first?.message else {
            Issue.record("no welcome after fuzzing: \(reply)")
            return
        }
        #expect(reply.first?.requestID == 77)
    }
}
