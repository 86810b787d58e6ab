import Foundation
import Testing
import X11TestSupport

/// `Scripts/lossy-proxy --rate`: the bottleneck the congestion-control tests stand behind. Fed
/// twice its capacity at a steady rate, it delivers its capacity, holds its queue at the limit
/// given, drops the rest at the tail, and says so itself, second by second; a schedule raises
/// the capacity and it delivers more. What arrives is counted here, on the receiving socket.
@Suite(.serialized) struct BottleneckProxyTests {
    /// Sends `size`-byte datagrams to `port` at `bitsPerSecond` for `seconds` (paced by the clock).
    static func blast(to port: UInt16, bitsPerSecond: Double, seconds: Double, size: Int = 1000) throws {
        let socket = try UDPReceiver()
        let interval = Double(size * 8) / bitsPerSecond
        let start = Date()
        var n = 0
        while true {
            let due = start.addingTimeInterval(Double(n) * interval)
            guard due.timeIntervalSince(start) < seconds else { break }
            // Pacing: the sending rate is the scenario, not a wait for something to happen.
            let wait = due.timeIntervalSinceNow
            if wait > 0 { usleep(useconds_t(wait * 1e6)) }
            var datagram = [UInt8](repeating: 0x5A, count: size)
            datagram[0] = UInt8(truncatingIfNeeded: n >> 8)
            datagram[1] = UInt8(truncatingIfNeeded: n)
            socket.send(datagram, toPort: port)
            n += 1
        }
    }

    static func seconds(_ proxy: Child) -> [[String: Any]] { EventLog(proxy.stdout).events(named: "second") }

    @Test func aBottleneckDeliversItsCapacityWithItsQueueAndDropsTheRest() throws {
        let dir = try makeTempDir()
        let receiver = try UDPReceiver()
        let port = freeEvenPort()
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(port)", "--to", "127.0.0.1:\(receiver.port)",
                                                 "--rate", "1M", "--queue-ms", "200"], dir: dir, name: "proxy")
        try waitUntilBound(port)
        try Self.blast(to: port, bitsPerSecond: 2_000_000, seconds: 6)
        // The queue drains (200 ms of it): the proxy says so in the second after the last datagram.
        try EventLog.wait(for: "second", in: proxy) { ($0["t"] as? Int ?? 0) >= 6 && $0["queued_bytes"] as? Int == 0 }
        kill(proxy.pid, SIGINT)
        #expect(proxy.finish(within: 10, interrupt: false) == 0, "\(proxy.stderr)")

        // Counted at the receiver: about 1 Mbit/s from the second second on (the queue fills in
        // the first), none of it reordered.
        let arrived = receiver.datagrams
        let first = try #require(arrived.first?.arrival)
        let steady = arrived.filter { $0.arrival.timeIntervalSince(first) >= 1 && $0.arrival.timeIntervalSince(first) < 5 }
        let kbps = Double(steady.reduce(0) { $0 + $1.bytes.count }) * 8 / 4 / 1000
        #expect(kbps > 900 && kbps < 1050, "delivered \(kbps) kbit/s through a 1 Mbit/s bottleneck")
        let order = arrived.map { Int($0.bytes[0]) << 8 | Int($0.bytes[1]) }
        #expect(order == order.sorted(), "a FIFO keeps the order")

        // Its own account agrees: capacity, a queue at its 200 ms limit, half dropped.
        let lines = Self.seconds(proxy)
        #expect(lines.count >= 5, "\(proxy.stdout)")
        for line in lines.dropFirst().prefix(4) {
            #expect(line["rate_kbps"] as? Double == 1000)
            let delivered = line["delivered_kbps"] as? Double ?? 0
            #expect(delivered > 900 && delivered < 1050, "\(line)")
            let p95 = line["queue_ms_p95"] as? Double ?? 0
            #expect(p95 > 150 && p95 <= 215, "a full 200 ms queue: \(line)")
            #expect((line["dropped"] as? Int ?? 0) >= 80, "about half of 250 datagrams a second: \(line)")
        }
        let summary = try #require(EventLog(proxy.stdout).last(named: "stopped"))
        let sent = 6 * 250
        #expect(arrived.count + (summary["bottleneck_dropped"] as? Int ?? 0) == sent, "every datagram delivered or dropped: \(summary)")
    }

    @Test func aRateScheduleRaisesTheCapacity() throws {
        let dir = try makeTempDir()
        let receiver = try UDPReceiver()
        let port = freeEvenPort()
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(port)", "--to", "127.0.0.1:\(receiver.port)",
                                                 "--rate-schedule", "0:500k,3:2M", "--queue-ms", "100"], dir: dir, name: "proxy")
        try waitUntilBound(port)
        try Self.blast(to: port, bitsPerSecond: 1_500_000, seconds: 6)
        // Every second the checks read is reported (t = 5 ends as the blast does).
        try EventLog.wait(for: "second", in: proxy) { ($0["t"] as? Int ?? 0) >= 5 }
        kill(proxy.pid, SIGINT)
        _ = proxy.finish(within: 10, interrupt: false)
        let lines = Self.seconds(proxy)
        let t1 = try #require(lines.first { $0["t"] as? Int == 2 }, "\(proxy.stdout)")
        let t5 = try #require(lines.first { $0["t"] as? Int == 5 }, "\(proxy.stdout)")
        #expect(t1["rate_kbps"] as? Double == 500 && (t1["delivered_kbps"] as? Double ?? 0) < 550, "\(t1)")
        #expect(t5["rate_kbps"] as? Double == 2000, "\(t5)")
        let after = t5["delivered_kbps"] as? Double ?? 0
        #expect(after > 1350 && after < 1650, "all of 1.5 Mbit/s passes a 2 Mbit/s link: \(t5)")
        #expect(t5["dropped"] as? Int == 0 && (t5["queue_ms_p95"] as? Double ?? 99) < 20, "\(t5)")
    }
}
