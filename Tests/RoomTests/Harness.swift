import RTCP
import RTP
@testable import Room
import NetworkAddress

/// Collects what the relay sends. Reading it first drains what the relay queued, as a socket
/// loop does after each input.
final class Wire: RelayTransport {
    weak var relay: RelayCore?
    private var queued: [(to: PeerAddress, bytes: [UInt8])] = []
    var sent: [(to: PeerAddress, bytes: [UInt8])] {
        get {
            relay?.drain(into: self)
            return queued
        }
        set { queued = newValue }
    }
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) { queued.append((address, Array(bytes))) }

    /// Takes (and removes) what went to `address`.
    func take(_ address: PeerAddress) -> [[UInt8]] {
        let mine = sent.filter { $0.to == address }.map(\.bytes)
        sent.removeAll { $0.to == address }
        return mine
    }

    func controls(_ address: PeerAddress) -> [ControlEnvelope] {
        take(address).compactMap { DatagramKind.of(bytesOf: $0) == .control ? try? ControlEnvelope.parse($0) : nil }
    }
}

extension DatagramKind {
    static func of(bytesOf b: [UInt8]) -> DatagramKind { b.withUnsafeBytes { of($0) } }
}

func addr(_ n: UInt16) -> PeerAddress { PeerAddress(ip: 0x7F00_0001, port: 40000 + n) }

extension RelayCore {
    /// A relay whose queue `wire` drains when read.
    convenience init(limits: RelayLimits = RelayLimits(), ssrc: UInt32 = 0xAAAA, wire: Wire) {
        self.init(limits: limits, ssrc: ssrc)
        wire.relay = self
    }

    func receive(_ bytes: [UInt8], from a: PeerAddress, now: UInt64) {
        bytes.withUnsafeBytes { receive($0, from: a, now: now, wallNanos: 1_700_000_000_000_000_000 + now) }
    }
    func receive(_ e: ControlEnvelope, from a: PeerAddress, now: UInt64) { receive(e.encoded(), from: a, now: now) }
}

/// An RTP packet of a VP8 stream; `keyframe` marks a frame start whose VP8 header says key.
func vp8Packet(ssrc: UInt32, seq: UInt16, ts: UInt32 = 0, start: Bool = true, keyframe: Bool = false) -> [UInt8] {
    var b = [UInt8](repeating: 0, count: 12 + 1 + 10)
    b.withUnsafeMutableBytes { buf in
        _ = RTPHeader(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: ts, ssrc: ssrc).marshal(into: buf)
    }
    b[12] = start ? 0x10 : 0x00  // S bit, PID 0
    b[13] = keyframe ? 0x00 : 0x01  // P bit: 0 = keyframe
    return b
}

/// Runs clients against a relay core in-process, with one clock.
final class Room3 {
    let wire = Wire()
    var relay: RelayCore!
    var relayEvents: [RelayEvent] = []
    var now: UInt64 = 1_000_000_000
    var clients: [PeerAddress: RoomClient] = [:]
    var events: [PeerAddress: [RoomClientEvent]] = [:]
    /// Addresses whose datagrams are lost (both ways).
    var cut: Set<PeerAddress> = []
    var relayUp = true

    init() { restartRelay() }

    func restartRelay() {
        relay = RelayCore(wire: wire)
    }

    func add(_ a: PeerAddress, _ client: RoomClient) {
        var c = client
        c.start(now: now)
        clients[a] = c
        pump()
    }

    func with(_ a: PeerAddress, _ body: (inout RoomClient) -> Void) {
        body(&clients[a]!)
        pump()
    }

    /// Moves datagrams until nothing is left to move.
    func pump() {
        for _ in 0..<20 {
            var moved = false
            for a in clients.keys.sorted(by: { $0.port < $1.port }) {
                for bytes in clients[a]!.takeOutgoing() {
                    moved = true
                    if relayUp, !cut.contains(a) { relay.receive(bytes, from: a, now: now) }
                }
            }
            for a in clients.keys.sorted(by: { $0.port < $1.port }) {
                for bytes in wire.take(a) where relayUp && !cut.contains(a) {
                    moved = true
                    clients[a]!.heard(now: now)
                    if DatagramKind.of(bytesOf: bytes) == .control, let e = try? ControlEnvelope.parse(bytes) { clients[a]!.receive(e, now: now) }
                }
                events[a, default: []] += clients[a]!.takeEvents()
            }
            wire.sent.removeAll()
            relay.drainEvents { relayEvents.append($0) }
            if !moved { break }
        }
    }

    /// Advances the clock in `step` increments, polling everyone.
    func advance(_ nanos: UInt64, step: UInt64 = 50_000_000) {
        let end = now + nanos
        while now < end {
            now = min(end, now + step)
            if relayUp { relay.poll(now: now, wallNanos: now) }
            for a in clients.keys { clients[a]!.poll(now: now) }
            pump()
        }
    }

    func take(_ a: PeerAddress) -> [RoomClientEvent] {
        defer { events[a] = [] }
        return events[a] ?? []
    }
}

let screen = StreamInfo(kind: .screen, ssrc: 0x1111, pt: 96, codec: "VP8", clock: 90000)
let audio = StreamInfo(kind: .audio, ssrc: 0x2222, pt: 111, codec: "opus", clock: 48000, channels: 2)
