import Testing
@testable import Congestion

@Suite struct FECPolicyTests {
    /// Feedback every 100 ms for `seconds` at `loss` and `rttMillis`, from `start` (ns).
    static func feed(_ p: inout FECPolicy, loss: Double, rttMillis: UInt64, seconds: Double, start: UInt64) -> (end: UInt64, changes: Int) {
        var now = start, changes = 0
        for _ in 0..<Int(seconds * 10) {
            now += 100_000_000
            if p.update(loss: loss, rttNanos: rttMillis * 1_000_000, now: now) { changes += 1 }
        }
        return (now, changes)
    }

    /// 5 % loss at a 100 ms round trip: on within 2 s, sized to the loss;
    /// the same loss on a 10 ms path stays with NACK; clean feedback turns it off after 5 s
    /// under the threshold, once.
    @Test func autoFollowsLossTimesRoundTrip() {
        var p = FECPolicy(mode: .auto)
        #expect(p.protection == 0)
        var (t, changes) = Self.feed(&p, loss: 0.05, rttMillis: 100, seconds: 2, start: 0)
        #expect(p.protection > 0 && changes == 1)
        (t, _) = Self.feed(&p, loss: 0.05, rttMillis: 100, seconds: 10, start: t)
        #expect(abs(p.protection - FECPolicy.size(loss: 0.05)) < 0.01 && abs(FECPolicy.size(loss: 0.05) - 0.175) < 1e-9)
        // Loss gone: the average decays under half the threshold, then 5 s more.
        var offAt: Double?
        for i in 1...200 {
            t += 100_000_000
            if p.update(loss: 0, rttNanos: 100_000_000, now: t), p.protection == 0 { offAt = Double(i) / 10 }
        }
        let off = offAt ?? 0
        #expect(off > 5 && off < 30, "off after \(off) s")
        var short = FECPolicy(mode: .auto)
        (_, changes) = Self.feed(&short, loss: 0.05, rttMillis: 50, seconds: 10, start: 0)
        #expect(short.protection == 0 && changes == 0, "at 50 ms resends come in time")
        var rare = FECPolicy(mode: .auto)
        _ = Self.feed(&rare, loss: 0.005, rttMillis: 400, seconds: 10, start: 0)
        #expect(rare.protection == 0, "under 1 % loss NACK is enough")
        // Loss with a queue is congestion: left out, FEC stays off.
        var queued = FECPolicy(mode: .auto)
        var now: UInt64 = 0
        for _ in 0..<100 {
            now += 100_000_000
            queued.update(loss: 0.3, rttNanos: 200_000_000, congested: true, now: now)
        }
        #expect(queued.protection == 0 && queued.averageLoss == 0)
    }

    @Test func onAndOffAreFixed() {
        var on = FECPolicy(mode: .on), off = FECPolicy(mode: .off)
        #expect(on.protection == 0.1)
        _ = Self.feed(&on, loss: 0, rttMillis: 5, seconds: 10, start: 0)
        _ = Self.feed(&off, loss: 0.3, rttMillis: 300, seconds: 10, start: 0)
        #expect(on.protection == 0.1 && off.protection == 0)
        _ = Self.feed(&on, loss: 0.3, rttMillis: 5, seconds: 10, start: 0)
        #expect(on.protection == 0.5)
        #expect(on.update(loss: .nan, rttNanos: 0, now: 1) == false)
    }
}
