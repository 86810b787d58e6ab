import Foundation
import Testing
@testable import Room
import TestSupport

/// 10⁶ seeded random and mutated control datagrams through ``ControlEnvelope/parse(_:)``:
/// every message type encoded, then bit flips, random bytes, truncations, splices of two
/// messages and JSON-aware damage (a value swapped for another type, a huge number, nesting).
/// No crash; what parses re-encodes to something that parses to the same envelope.
/// JSON parsing makes this the slowest parser: ~50 000 inputs/s in the debug build on the 2-core
/// CI machine (10⁶ take 19 s), so the suite runs 2 × 10⁵; `FUZZ_ITERATIONS=1000000` runs the
/// issue's 10⁶ (each run prints its rate).
@Suite struct ControlFuzzTests {
    @Test func controlEnvelopeParser() {
        let iterations = ProcessInfo.processInfo.environment["FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 200_000
        let peer = PeerInfo(id: 3, name: "Ann", role: "presenter", streams: [screen, audio])
        let corpus: [[UInt8]] = [
            .join(room: "r", name: "n", role: "presenter", token: "t"), .welcome(peer: 4, room: "r", version: 9, peers: [peer]),
            .leave, .ping(version: 3), .pong(version: 4, subscribers: 2), .publish(streams: [screen, audio]),
            .subscribe(publisher: 3, kinds: [.screen]), .unsubscribe(publisher: 3, kinds: []), .ok(streams: [screen]), .ok(streams: nil),
            .error(code: .ssrcConflict, message: "x"), .peerJoined(version: 5, peer: peer), .peerLeft(version: 6, peer: 3, reason: "timeout"),
            .streams(version: 7, peer: 3, streams: []), .sync, .state(version: 8, peers: [peer]), .subscribers(peers: [1, 2]),
        ].enumerated().map { ControlEnvelope(requestID: UInt32($0.offset), $0.element).encoded() }
        let damage: [[UInt8]] = ["\"x\"", "-1", "1e308", "18446744073709551616", "null", "[[[[[[[[[[]]]]]]]]]]", "{}", "true", "\"\\ud800\""]
            .map { Array($0.utf8) }
        var rng = SplitMix64(seed: 0xC0_7701)
        var bytes = [UInt8]()
        bytes.reserveCapacity(2048)
        var parsed = 0, rejected = 0
        let start = Date()
        for i in 0..<iterations {
            let base = corpus[Int(rng.next() % UInt64(corpus.count))]
            bytes.removeAll(keepingCapacity: true)
            switch rng.next() % 5 {
            case 0:
                bytes.append(contentsOf: base)
                for _ in 0...(rng.next() % 3) where !bytes.isEmpty {
                    let at = Int(rng.next() % UInt64(bytes.count))
                    if rng.next() % 2 == 0 { bytes[at] ^= 1 << (rng.next() % 8) } else { bytes[at] = UInt8(truncatingIfNeeded: rng.next()) }
                }
            case 1:
                bytes.append(contentsOf: base.prefix(Int(rng.next() % UInt64(base.count + 1))))
            case 2:
                let other = corpus[Int(rng.next() % UInt64(corpus.count))]
                bytes.append(contentsOf: base.prefix(8 + Int(rng.next() % UInt64(base.count - 7))))
                bytes.append(contentsOf: other.suffix(Int(rng.next() % UInt64(other.count + 1))))
            case 3:
                // A JSON value (after a ':') replaced by one of another type or size.
                bytes.append(contentsOf: base)
                if let colon = bytes.indices.dropFirst(8).filter({ bytes[$0] == UInt8(ascii: ":") }).randomElement(using: &rng) {
                    let end = bytes[(colon + 1)...].firstIndex { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "}") } ?? bytes.count
                    bytes.replaceSubrange((colon + 1)..<end, with: damage[Int(rng.next() % UInt64(damage.count))])
                }
            default:
                bytes.append(contentsOf: [0x53, 0x53, RoomProtocol.version, UInt8(rng.next() % 20)])
                for _ in 0..<(Int(rng.next() % 40) + 4) { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
            }
            guard let envelope = try? ControlEnvelope.parse(bytes) else { rejected += 1; continue }
            parsed += 1
            if (try? ControlEnvelope.parse(envelope.encoded())) != envelope {
                Issue.record("input \(i) parses but does not round-trip: \(envelope)")
                return
            }
        }
        let s = Date().timeIntervalSince(start)
        print("fuzz room control: \(parsed) parsed, \(rejected) rejected; \(iterations) inputs in \(String(format: "%.2f", s)) s (\(Int(Double(iterations) / s)) per second)")
        #expect(parsed > iterations / 50 && rejected > iterations / 2, "parsed \(parsed), rejected \(rejected)")
    }
}
