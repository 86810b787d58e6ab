import Testing
@testable import RTPSession
import TestSupport

/// The audio jitter buffer's adaptive target (pure: arrivals passed in).
@Suite struct AudioPlayoutDelayTests {
    /// Feeds `count` 20 ms packets from `start` (packet index) with `extra(i)` ns of delay each.
    func feed(_ d: inout AudioPlayoutDelay, from start: Int = 0, count: Int, extra: (Int) -> Int64) {
        for i in start..<(start + count) {
            let media = Int64(i) * 20_000_000
            d.onPacket(mediaNanos: media, arrival: UInt64(5_000_000_000 + media + 30_000_000 + extra(i)))
        }
    }

    @Test func aSteadyPathNeedsOnlyTheMinimumAfterTheFirstSecond() {
        var d = AudioPlayoutDelay()
        #expect(d.targetDelay == 60_000_000)
        var rng = SplitMix64(seed: 1)
        feed(&d, count: 49) { _ in Int64.random(in: 0...1_000_000, using: &rng) }
        #expect(d.targetDelay == 60_000_000, "still warming up")
        feed(&d, from: 49, count: 500) { _ in Int64.random(in: 0...1_000_000, using: &rng) }
        #expect(d.targetDelay == 20_000_000)
        #expect(d.minTransit! >= 5_030_000_000 && d.minTransit! <= 5_031_000_000, "\(d.minTransit!)")
    }

    /// Uniform 0…40 ms of jitter (the test proxy's ±20 ms): 97 % arrive within ~39 ms, so the
    /// target is that bucket plus the 10 ms margin.
    @Test func jitterSetsTheTargetAtItsQuantile() {
        var d = AudioPlayoutDelay()
        var rng = SplitMix64(seed: 7)
        feed(&d, count: 1500) { _ in Int64.random(in: 0...40_000_000, using: &rng) }
        let t = d.targetDelay
        #expect(t >= 45_000_000 && t <= 55_000_000, "\(t)")
    }

    /// A burst of late packets raises the target at once; it fades back once they stop.
    @Test func aDelaySpikeRaisesTheTargetWhichThenFades() {
        var d = AudioPlayoutDelay()
        feed(&d, count: 200) { _ in 0 }
        feed(&d, from: 200, count: 10) { _ in 200_000_000 }
        #expect(d.targetDelay >= 210_000_000, "\(d.targetDelay)")
        feed(&d, from: 210, count: 1000) { _ in 0 }
        #expect(d.targetDelay == 20_000_000, "\(d.targetDelay)")
    }

    /// The sender's clock running 1000 ppm slow: transit grows 1 ms a second. The fastest
    /// transit is looked for within 2 s only, so it follows and the target stays small.
    @Test func clockDriftIsFollowedNotTakenForJitter() {
        var d = AudioPlayoutDelay()
        feed(&d, count: 3000) { i in Int64(i) * 20_000 }
        #expect(d.targetDelay <= 25_000_000, "\(d.targetDelay)")
        #expect(d.minTransit! > 5_030_000_000 + 55_000_000, "follows the drift: \(d.minTransit!)")
    }

    @Test func theTargetIsBoundedAndResetForgets() {
        var d = AudioPlayoutDelay()
        feed(&d, count: 100) { i in i % 2 == 0 ? 0 : 1_500_000_000 }
        #expect(d.targetDelay == d.configuration.maxDelay)
        d.reset()
        #expect(d.targetDelay == 60_000_000 && d.minTransit == nil && d.packets == 0)
    }
}
