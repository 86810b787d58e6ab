import Foundation
import HopTestSupport
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
import NetworkAddress

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
    static func collectRTP(_ socket: UDPListener, expecting count: Int, ssrc: UInt32 = 0x5EED_0001, seconds: Double = 5) -> [Int: Int] {
        var seen: [Int: Int] = [:]
        var total = 0
        drain(socket, seconds: seconds) { bytes, _ in
            guard DatagramKind.of(bytesOf: bytes) == .rtp else { return true }
            let seq = Int(bytes[2]) << 8 | Int(bytes[3])
            if bytes == packet(seq, ssrc: ssrc) { seen[seq, default: 0] += 1 } else { seen[-1, default: 0] += 1 }
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

    /// A fan-out's datagrams differ per receiver (each its own SRTP key): each is written in a
    /// slot of its own, and one `sendmmsg` sends 64 of them.
    @Test func aSendBatchDeliversEachReceiverItsOwnDatagramAcrossBatchesAndSkipsARefusedOne() throws {
        let receivers = try (0..<200).map { _ in try UDPListener(host: "127.0.0.1", port: 0) }
        var addresses = receivers.map { PeerAddress(ip: Self.loopback, port: $0.port) }
        addresses.insert(PeerAddress(ip: Self.loopback, port: 0), at: 130)  // port 0: EINVAL
        let sender = try UDPListener(host: "127.0.0.1", port: 0)
        let batch = SendBatch(fd: sender.fd, count: 64, slotSize: 1600)
        let packets = 40
        for i in 0..<packets {
            for (k, address) in addresses.enumerated() {
                let r = k > 130 ? k - 1 : k  // the receiver's index (130 is the refused address)
                let datagram = Self.packet(i, ssrc: UInt32(r + 1))
                batch.add(to: address) { slot in
                    datagram.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: slot[0..<$0.count]).copyMemory(from: $0) }
                    return datagram.count
                }
            }
            batch.flush()
        }
        #expect(batch.errors == packets)  // the port-0 address, once per packet
        #expect(batch.calls >= packets * 4, "201 datagrams a packet, 64 a call: \(batch.calls)")
        for (r, receiver) in receivers.enumerated() {
            let seen = Self.collectRTP(receiver, expecting: packets, ssrc: UInt32(r + 1))
            #expect(seen == Dictionary(uniqueKeysWithValues: (0..<packets).map { ($0, 1) }), "receiver \(r)")
        }
    }

    @Test func relayForwardsEveryPacketExactlyOnceTo200Subscribers() throws {
        let relay = try RelayServer(host: "127.0.0.1", port: 0, events: nil, logger: Logger(label: "test"), fanOutBatch: 64)
        let done = Mutex<[String: JSONValue]?>(nil)
        let thread = Thread { let s = relay.run(durationSeconds: 60); done.withLock { $0 = s } }
        thread.start()
        defer { relay.stop() }

        // Every peer speaks the encrypted hop: its own DTLS handshake, control messages inside
        // it, media as SRTP, protected by the relay once per viewer.
        let publisher = try HopPeer(relayPort: relay.port)
        try publisher.connect()
        guard case let .welcome(publisherID, _, _, _) = try publisher.ask(.join(room: "fan", name: "teacher", role: "presenter", token: nil)) else {
            throw TestFailure("publisher not welcome")
        }
        let screen = StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)
        _ = try publisher.ask(.publish(streams: [screen]))
        let viewers = try (0..<200).map { _ in try HopPeer(relayPort: relay.port) }
        // Everyone pings while the room fills up (a debug build takes a few seconds for 200
        // handshakes and joins; the relay drops peers silent for 4 s).
        var lastPing = Date()
        func pingAll(upTo count: Int) {
            for peer in [publisher] + viewers.prefix(count) { peer.send(.ping(version: 0), requestID: 1) }
            lastPing = Date()
        }
        for (i, v) in viewers.enumerated() {
            if Date().timeIntervalSince(lastPing) > 1 { pingAll(upTo: i) }
            try v.connect()
            guard case .welcome = try v.ask(.join(room: "fan", name: "v\(i)", role: "viewer", token: nil)) else { throw TestFailure("viewer \(i) not welcome") }
            let answer = try v.ask(.subscribe(publisher: publisherID, kinds: [.screen]))
            guard case let .ok(streams) = answer, streams == [screen] else { throw TestFailure("viewer \(i) not subscribed: \(answer)") }
        }
        pingAll(upTo: viewers.count)

        // Bursts of 100 back to back: the relay drains them 32 at a time.
        let packets = 300
        for i in 0..<packets {
            publisher.send(media: Self.packet(i))
            if i % 100 == 99 { usleep(20_000) }
        }
        for (r, v) in viewers.enumerated() {
            var seen: [Int: Int] = [:]
            var total = 0
            v.drain(seconds: 5) { incoming in
                guard case .media(let bytes) = incoming, DatagramKind.of(bytesOf: bytes) == .rtp else { return true }
                let seq = Int(bytes[2]) << 8 | Int(bytes[3])
                if bytes == Self.packet(seq) { seen[seq, default: 0] += 1 } else { seen[-1, default: 0] += 1 }
                total += 1
                return total < packets
            }
            // Anything more (a duplicate) is queued already.
            v.drain(seconds: 0.05) { incoming in
                if case .media(let bytes) = incoming, DatagramKind.of(bytesOf: bytes) == .rtp { seen[Int(bytes[2]) << 8 | Int(bytes[3]), default: 0] += 1 }
                return true
            }
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
