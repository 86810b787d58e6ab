import Foundation
import Glibc
import Logging
import Room
import RTP
import Synchronization
import Events
import Transport
import Testing
@testable import Relay
import Transport

/// The relay's batched socket I/O on real loopback sockets: `sendmmsg` fan-out (across several
/// batches, with a refused datagram in the middle) and `recvmmsg` draining, through the whole
/// `RelayServer` with 200 subscribers.
@Suite(.serialized) struct RelayFanOutTests {
    static let loopback: UInt32 = 0x7F00_0001

    /// A packet whose length and bytes depend on its number, so a mixed-up buffer or length shows.
    static func packet(_ i: Int, ssrc: UInt32 = 0x5EED_0001) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 100 + (i * 37) % 1100)
        b.withUnsafeMutableBytes {
            _ = RTPHeader(marker: false, payloadType: 96, sequenceNumber: UInt16(i), timestamp: UInt32(i / 10) * 3000, ssrc: ssrc).marshal(into: $0)
        }
        b[12] = 0x00  // VP8 descriptor: not a frame start
        for k in 13..<b.count { b[k] = UInt8(truncatingIfNeeded: i &* 31 &+ k) }
        return b
    }

    /// Waits up to `seconds` for datagrams on `socket`, handing each to `take` until it says stop.
    static func drain(_ socket: UDPListener, seconds: Double = 5, _ take: ([UInt8], PeerAddress) -> Bool) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var source = sockaddr_in()
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let n = buffer.withUnsafeMutableBytes { socket.receive(into: $0, from: &source) }
            if n > 0 {
                if !take(Array(buffer[0..<n]), PeerAddress(source)) { return }
                continue
            }
            guard Date() < deadline else { return }
            var pfd = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, 20)
        }
    }

    /// Received RTP sequence numbers → how often each came, checking every packet's bytes.
    static func collectRTP(_ socket: UDPListener, expecting count: Int, seconds: Double = 5) -> [Int: Int] {
        var seen: [Int: Int] = [:]
        var total = 0
        drain(socket, seconds: seconds) { bytes, _ in
            guard DatagramKind.of(bytesOf: bytes) == .rtp else { return true }
            let seq = Int(bytes[2]) << 8 | Int(bytes[3])
            if bytes == packet(seq) { seen[seq, default: 0] += 1 } else { seen[-1, default: 0] += 1 }
            total += 1
            return total < count
        }
        // Anything more (a duplicate) was sent before we started reading: it is queued already.
        drain(socket, seconds: 0) { bytes, _ in
            if DatagramKind.of(bytesOf: bytes) == .rtp { seen[Int(bytes[2]) << 8 | Int(bytes[3]), default: 0] += 1 }
            return true
        }
        return seen
    }

    @Test func fanOutReachesEveryAddressOnceAcrossBatchesAndSkipsARefusedOne() throws {
        let receivers = try (0..<200).map { _ in try UDPListener(host: "127.0.0.1", port: 0) }
        var addresses = receivers.map { PeerAddress(ip: Self.loopback, port: $0.port) }
        addresses.insert(PeerAddress(ip: Self.loopback, port: 0), at: 130)  // port 0: EINVAL
        let sender = try UDPListener(host: "127.0.0.1", port: 0)
        let fanOut = FanOutSender(fd: sender.fd, maxBatch: 64, capacity: 16)
        let packets = 40
        for i in 0..<packets { Self.packet(i).withUnsafeBytes { fanOut.send($0, toEach: addresses) } }
        #expect(fanOut.capacity >= 201)
        #expect(fanOut.errors == packets)  // the port-0 address, once per packet
        for (r, receiver) in receivers.enumerated() {
            let seen = Self.collectRTP(receiver, expecting: packets)
            #expect(seen == Dictionary(uniqueKeysWithValues: (0..<packets).map { ($0, 1) }), "receiver \(r)")
        }
    }

    @Test func relayForwardsEveryPacketExactlyOnceTo200Subscribers() throws {
        let relay = try RelayServer(host: "127.0.0.1", port: 0, events: nil, logger: Logger(label: "test"), fanOutBatch: 64)
        let done = Mutex<[String: JSONValue]?>(nil)
        let thread = Thread { let s = relay.run(durationSeconds: 60); done.withLock { $0 = s } }
        thread.start()
        defer { relay.stop() }
        let server = sockaddr_in(PeerAddress(ip: Self.loopback, port: relay.port))

        var requestID: UInt32 = 100
        func ask(_ socket: UDPListener, _ message: ControlMessage) throws -> ControlMessage {
            requestID += 1
            let id = requestID
            var message = message
            for _ in 0..<4 {
                ControlEnvelope(requestID: id, message).encoded().withUnsafeBytes { _ = socket.send($0, to: server) }
                var answer: ControlMessage?
                Self.drain(socket, seconds: 2) { bytes, _ in
                    if DatagramKind.of(bytesOf: bytes) == .control,
                       let e = try? ControlEnvelope.parse(bytes, maxSize: RoomProtocol.maxRelayMessageSize), e.requestID == id {
                        answer = e.message
                        return false
                    }
                    return true
                }
                // A join is first answered with the relay's cookie, to be echoed.
                if case let .retry(cookie)? = answer, case let .join(room, name, role, token, _) = message {
                    message = .join(room: room, name: name, role: role, token: token, cookie: cookie)
                    continue
                }
                if let answer { return answer }
            }
            throw TestFailure("no answer to \(message.type.name)")
        }

        let publisher = try UDPListener(host: "127.0.0.1", port: 0)
        guard case let .welcome(publisherID, _, _, _) = try ask(publisher, .join(room: "fan", name: "teacher", role: "presenter", token: nil)) else {
            throw TestFailure("publisher not welcome")
        }
        let screen = StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)
        _ = try ask(publisher, .publish(streams: [screen]))
        let viewers = try (0..<200).map { _ in try UDPListener(host: "127.0.0.1", port: 0) }
        // Everyone pings while the room fills up (a debug build takes a few seconds for 200
        // joins; the relay drops peers silent for 4 s).
        var lastPing = Date()
        func pingAll(upTo count: Int) {
            for socket in [publisher] + viewers.prefix(count) {
                ControlEnvelope(requestID: 1, .ping(version: 0)).encoded().withUnsafeBytes { _ = socket.send($0, to: server) }
            }
            lastPing = Date()
        }
        for (i, v) in viewers.enumerated() {
            if Date().timeIntervalSince(lastPing) > 1 { pingAll(upTo: i) }
            guard case .welcome = try ask(v, .join(room: "fan", name: "v\(i)", role: "viewer", token: nil)) else { throw TestFailure("viewer \(i) not welcome") }
            let answer = try ask(v, .subscribe(publisher: publisherID, kinds: [.screen]))
            guard case let .ok(streams) = answer, streams == [screen] else { throw TestFailure("viewer \(i) not subscribed: \(answer)") }
        }

        // Bursts of 100 back to back: the relay drains them 32 at a time.
        let packets = 300
        for i in 0..<packets {
            Self.packet(i).withUnsafeBytes { _ = publisher.send($0, to: server) }
            if i % 100 == 99 { usleep(20_000) }
        }
        for (r, v) in viewers.enumerated() {
            let seen = Self.collectRTP(v, expecting: packets)
            #expect(seen == Dictionary(uniqueKeysWithValues: (0..<packets).map { ($0, 1) }), "viewer \(r): \(seen.count) distinct")
        }

        relay.stop()
        let deadline = Date().addingTimeInterval(5)
        while done.withLock({ $0 }) == nil && Date() < deadline { usleep(10_000) }
        let summary = try #require(done.withLock { $0 })
        #expect(summary["rtp_in"] == .int(packets))
        #expect(summary["rtp_forwarded"] == .int(packets * viewers.count))
        #expect(summary["send_errors"] == .int(0))
        #expect(summary["lost_in"] == .int(0))
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

extension DatagramKind {
    static func of(bytesOf b: [UInt8]) -> DatagramKind { b.withUnsafeBytes { of($0) } }
}

extension sockaddr_in {
    init(_ a: PeerAddress) { self = a.sockaddr }
}
