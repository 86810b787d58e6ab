import Congestion
import Testing
import TestSupport

/// The controller against a simulated bottleneck, in simulated time (nothing sleeps): a sender
/// paces 1200-byte packets at the target, a link of the given capacity with a drop-tail queue
/// and a fixed one-way delay carries them, and the receiver's transport-wide feedback comes back
/// every 50 ms. The schedules are RMCAT's (RFC 8867), the pass bars the issue's.
struct SimulatedPath {
    var capacity: Double          // bit/s
    var queueLimitNanos: UInt64   // drop-tail, as time at the current capacity
    var oneWayNanos: UInt64
    var randomLoss = 0.0
    private var linkFree: UInt64 = 0
    private var rng = SplitMix64(seed: 7)

    init(capacity: Double, queueMillis: UInt64 = 300, oneWayMillis: UInt64 = 25, randomLoss: Double = 0) {
        self.capacity = capacity
        queueLimitNanos = queueMillis * 1_000_000
        oneWayNanos = oneWayMillis * 1_000_000
        self.randomLoss = randomLoss
    }

    /// When a packet sent at `send` arrives, and how long it queued (nil: dropped).
    mutating func carry(size: Int, at send: UInt64) -> (arrival: UInt64, queued: UInt64)? {
        if randomLoss > 0, Double.random(in: 0..<1, using: &rng) < randomLoss { return nil }
        let start = max(send, linkFree)
        guard start - send <= queueLimitNanos else { return nil }  // the queue is full
        let done = start + UInt64(Double(size * 8) / capacity * 1e9)
        linkFree = done
        return (done + oneWayNanos, done - send)
    }
}

/// One second of a simulation: what got through, how long packets queued, what was lost.
struct SecondReport {
    var deliveredBits = 0.0
    var queueDelays: [UInt64] = []
    var sent = 0
    var lost = 0
    var target = 0.0
    var p95Queue: UInt64 {
        let s = queueDelays.sorted()
        return s.isEmpty ? 0 : s[min(s.count - 1, s.count * 95 / 100)]
    }
}

/// Runs `seconds` of simulated time; `capacity(t)` may change the link (t in seconds).
func simulate(seconds: Int, start: Double = 3_000_000, minimum: Double = 200_000, maximum: Double = 3_000_000,
              path initial: SimulatedPath, capacity: (Int) -> Double? = { _ in nil }) -> [SecondReport] {
    var probes = 0
    defer { print("probes sent: \(probes)") }
    var path = initial
    var controller = CongestionController(minimum: minimum, maximum: maximum, start: start)
    controller.rttNanos = 2 * path.oneWayNanos
    let ms: UInt64 = 1_000_000
    var now: UInt64 = 0
    var nextSend: UInt64 = 0
    var pending: [(result: PacketResult, feedbackAt: UInt64)] = []
    var nextFeedback: UInt64 = 50 * ms
    var reports = Array(repeating: SecondReport(), count: seconds)
    let end = UInt64(seconds) * 1000 * ms
    while now < end {
        let second = Int(now / (1000 * ms))
        if now % (1000 * ms) == 0, let c = capacity(second) { path.capacity = c }
        // Send what the pacer allows by now (1200-byte packets at the target rate).
        while nextSend <= now {
            let size = 1200
            let carried = path.carry(size: size, at: nextSend)
            reports[second].sent += 1
            if let c = carried {
                let arrivalSecond = Int(c.arrival / (1000 * ms))
                if arrivalSecond < seconds {
                    reports[arrivalSecond].deliveredBits += Double(size * 8)
                    reports[arrivalSecond].queueDelays.append(c.queued)
                }
            } else {
                reports[second].lost += 1
            }
            let result = PacketResult(sendTime: nextSend, size: size, arrivalTime: carried?.arrival)
            // The receiver reports it in its next feedback after arrival (a lost one: when a later
            // one arrives, ~ its send time + the one-way delay), and that feedback takes the
            // one-way delay to come back.
            let seenAt = carried?.arrival ?? (nextSend + path.oneWayNanos)
            pending.append((result, seenAt))
            nextSend += UInt64(Double(size * 8) / controller.target * 1e9)
        }
        // A probe goes as the sender sends one: its packets back to back at the probe's rate.
        if let probe = controller.takeProbe(now: now) {
            let size = 1200
            var at = now
            for _ in 0..<probe.packets(of: size) {
                let carried = path.carry(size: size, at: at)
                let result = PacketResult(sendTime: at, size: size, arrivalTime: carried?.arrival, probeCluster: probe.id)
                pending.append((result, carried?.arrival ?? (at + path.oneWayNanos)))
                at += UInt64(Double(size * 8) / probe.bitsPerSecond * 1e9)
            }
            probes += 1
        }
        if now >= nextFeedback {
            let due = pending.filter { $0.feedbackAt + path.oneWayNanos <= now }
            pending.removeAll { $0.feedbackAt + path.oneWayNanos <= now }
            // In send order, as transport-wide numbers put them.
            controller.onFeedback(due.map(\.result).sorted { $0.sendTime < $1.sendTime }, now: now)
            nextFeedback += 50 * ms
        }
        reports[second].target = controller.target
        now += 1 * ms
    }
    return reports
}

@Suite struct SimulationTests {
    /// 3 Mbit/s wanted, 1 Mbit/s available, 300 ms queue, 25 ms each way: after 10 s the
    /// delivered rate is 0.7–1.0 × the capacity, the queue delay p95 ≤ 200 ms, drops < 2 %.
    @Test func itSettlesUnderABottleneckWithoutFillingItsQueue() {
        let r = simulate(seconds: 40, path: SimulatedPath(capacity: 1_000_000))
        let steady = r[10...]
        let delivered = steady.map(\.deliveredBits).reduce(0, +) / Double(steady.count)
        let queue = steady.flatMap(\.queueDelays).sorted()
        let p95 = queue[queue.count * 95 / 100]
        let lost = Double(steady.map(\.lost).reduce(0, +)) / Double(steady.map(\.sent).reduce(0, +))
        print("1 Mbit/s: delivered \(Int(delivered / 1000)) kbit/s, queue p95 \(p95 / 1_000_000) ms, lost \(lost * 100) %; targets \(r.map { Int($0.target / 1000) })")
        #expect(delivered >= 700_000 && delivered <= 1_000_000)
        #expect(p95 <= 200_000_000)
        #expect(lost < 0.02)
    }

    /// The capacity falls from 1 Mbit/s to 500 kbit/s at 20 s: the queue delay is back under
    /// 200 ms within 5 s, and the rate follows the new capacity.
    @Test func itFollowsTheCapacityDown() {
        let r = simulate(seconds: 35, path: SimulatedPath(capacity: 1_000_000)) { t in t == 20 ? 500_000 : nil }
        print("1→0.5 Mbit/s: delivered \(r.map { Int($0.deliveredBits / 1000) }) kbit/s; queue p95 \(r.map { $0.p95Queue / 1_000_000 }) ms")
        let recovered = r[21..<25].contains { $0.p95Queue < 200_000_000 && $0.p95Queue > 0 }
        #expect(recovered, "the queue stayed over 200 ms for 5 s after the drop")
        let after = r[26...].map(\.deliveredBits).reduce(0, +) / Double(r[26...].count)
        #expect(after >= 350_000 && after <= 500_000, "\(after)")
        #expect(r[26...].allSatisfy { $0.p95Queue < 200_000_000 })
    }

    /// When the capacity grows (1 → 4 Mbit/s), the rate grows back within RMCAT's bar (past
    /// 2 Mbit/s within 10 s): a probe every 5 s finds the room, and further probes double.
    @Test func itGrowsWhenTheCapacityDoes() {
        let r = simulate(seconds: 40, maximum: 5_000_000, path: SimulatedPath(capacity: 1_000_000)) { t in t == 20 ? 4_000_000 : nil }
        print("1→4 Mbit/s: delivered \(r.map { Int($0.deliveredBits / 1000) }) kbit/s; targets \(r.map { Int($0.target / 1000) })")
        #expect(r[20..<30].contains { $0.deliveredBits > 2_000_000 }, "past 2 Mbit/s within 10 s of the lift")
        #expect(r[35...].allSatisfy { $0.deliveredBits > 3_000_000 })
        // Probing never fills the queue while the capacity was 1 Mbit/s.
        #expect(r[10..<20].allSatisfy { $0.p95Queue < 200_000_000 })
    }

    /// 10 % random loss on a 1 Mbit/s link: no collapse (≥ 50 % of the capacity used).
    @Test func randomLossAloneDoesNotCollapseTheRate() {
        let r = simulate(seconds: 40, path: SimulatedPath(capacity: 1_000_000, randomLoss: 0.10))
        let late = r[20...]
        let delivered = late.map(\.deliveredBits).reduce(0, +) / Double(late.count)
        print("10 % loss: delivered \(Int(delivered / 1000)) kbit/s; targets \(r.map { Int($0.target / 1000) })")
        #expect(delivered >= 500_000)
    }
}

/// A receiver's REMB caps the target while it is renewed, and lapses 3 s after the last.
@Test func aREMBCapsUntilItLapses() {
    var c = CongestionController(minimum: 100_000, maximum: 2_000_000, start: 1_500_000)
    let packet = PacketResult(sendTime: 0, size: 1200, arrivalTime: 1_000_000)
    c.onREMB(400_000, now: 1_000_000_000)
    #expect(c.target == 400_000)
    c.onFeedback([packet], now: 3_900_000_000)
    #expect(c.target == 400_000, "still within 3 s")
    c.onREMB(50_000, now: 3_900_000_000)
    #expect(c.target == 100_000, "never under the minimum")
    c.onFeedback([packet], now: 7_000_000_000)
    #expect(c.remb == nil && c.target > 400_000, "lapsed: \(c.target)")
}
