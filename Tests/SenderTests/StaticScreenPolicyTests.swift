import Testing
import MediaCore
import Basics
@testable import Sender
import TestSupport

@Suite struct StaticScreenPolicyTests {
    let ms: UInt64 = 1_000_000

    @Test func noRepeatBeforeFirstPicture() {
        let p = StaticScreenPolicy(fps: 15, minFps: 1)
        #expect(p.nextRepeatNanos == nil)
    }

    @Test func refinesAtFullRateThenDropsToKeepAlive() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1)
        p.newPictureEncoded(at: 0)
        // During the refine second: every other frame period.
        var t: UInt64 = 0
        var repeats = 0
        while let next = p.nextRepeatNanos, next < 1000 * ms {
            t = next
            p.repeatEncoded(at: t)
            repeats += 1
        }
        #expect(repeats == 4)  // every 200 ms: half the frame rate
        // Past the refine window: keep-alive at 1 fps.
        p.repeatEncoded(at: 1000 * ms)
        #expect(p.nextRepeatNanos == 2000 * ms)
        p.repeatEncoded(at: 2000 * ms)
        #expect(p.nextRepeatNanos == 3000 * ms)
        #expect(!p.isRefining(at: 2000 * ms))
    }

    @Test func refinementEndsEarlyOnceRepeatsAreTiny() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1.5)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 100 * ms, bytes: 9000)   // still sharpening
        #expect(p.nextRepeatNanos == 300 * ms)
        p.repeatEncoded(at: 200 * ms, bytes: 100)    // one tiny repeat is not enough
        #expect(p.nextRepeatNanos == 400 * ms)
        p.repeatEncoded(at: 300 * ms, bytes: 40)     // two in a row: converged
        #expect(!p.isRefining(at: 300 * ms))
        #expect(p.nextRepeatNanos == 1300 * ms)      // keep-alive from now on
        p.newPictureEncoded(at: 2000 * ms)           // a change refines again
        #expect(p.isRefining(at: 2100 * ms))
        #expect(p.nextRepeatNanos == 2200 * ms)
        // A big new picture (80 kB): repeats under 2 kB are converged.
        p.newPictureEncoded(at: 3000 * ms, bytes: 80_000)
        p.repeatEncoded(at: 3100 * ms, bytes: 1900)
        p.repeatEncoded(at: 3200 * ms, bytes: 1800)
        #expect(!p.isRefining(at: 3200 * ms))
    }

    /// Tiny repeats at a coarse quantizer have not converged: after a keyframe libvpx codes
    /// the next repeats coarsely (the bench's opening slide: quantizer 42, then 16), small
    /// because they say little. Refinement goes on until tiny repeats come at a fine one, or
    /// for `refineSeconds` (4 by default).
    @Test func tinyRepeatsAtACoarseQuantizerHaveNotConverged() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1)
        p.newPictureEncoded(at: 0, bytes: 120_000)
        p.repeatEncoded(at: 200 * ms, bytes: 900, quantizer: 42)
        p.repeatEncoded(at: 400 * ms, bytes: 800, quantizer: 21)
        p.repeatEncoded(at: 600 * ms, bytes: 700, quantizer: 10)
        #expect(p.isRefining(at: 600 * ms))
        p.repeatEncoded(at: 800 * ms, bytes: 600, quantizer: 2)
        p.repeatEncoded(at: 1000 * ms, bytes: 500, quantizer: 0)
        #expect(!p.isRefining(at: 1000 * ms), "two tiny repeats at a fine quantizer")
        // Without convergence it stops after 4 s.
        p.newPictureEncoded(at: 10_000 * ms, bytes: 120_000)
        #expect(p.isRefining(at: 13_900 * ms) && !p.isRefining(at: 14_000 * ms))
    }

    @Test func rateBucketDrainsAtTheBitRate() {
        var b = RateBucket()
        b.drain(at: 0, bitsPerSecond: 1_000_000)
        b.add(bits: 1_500_000)
        #expect(b.nanosUntil(atMost: 1_000_000, bitsPerSecond: 1_000_000) == 500 * ms)
        b.drain(at: 250 * ms, bitsPerSecond: 1_000_000)
        #expect(b.levelBits == 1_250_000)
        b.drain(at: 100 * ms, bitsPerSecond: 1_000_000)  // time going backwards changes nothing
        #expect(b.levelBits == 1_250_000)
        b.drain(at: 5000 * ms, bitsPerSecond: 1_000_000)
        #expect(b.levelBits == 0)
        #expect(b.nanosUntil(atMost: 1_000_000, bitsPerSecond: 1_000_000) == 0)
    }

    @Test func aNewPictureRestartsRefining() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 5000 * ms)
        #expect(p.nextRepeatNanos == 6000 * ms)
        p.newPictureEncoded(at: 5500 * ms)
        #expect(p.nextRepeatNanos == 5700 * ms)
        #expect(p.isRefining(at: 5600 * ms))
    }

    @Test func zeroMinFpsStopsRepeatsAfterRefining() {
        var p = StaticScreenPolicy(fps: 10, minFps: 0, refineSeconds: 0.5)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 600 * ms)
        #expect(p.nextRepeatNanos == nil)
    }
}

@Suite struct KeyframeThrottleTests {
    let ms: UInt64 = 1_000_000

    @Test func atMostOneKeyframePer300ms() {
        var k = KeyframeThrottle()
        let first = k.request(at: 0)
        #expect(first)
        k.keyframeSent(at: 0)
        let early = k.request(at: 100 * ms)
        #expect(!early)
        #expect(k.pending)
        #expect(!k.pendingDue(at: 299 * ms))
        #expect(k.pendingDue(at: 300 * ms))
        k.keyframeSent(at: 300 * ms)
        #expect(!k.pending)
        let later = k.request(at: 650 * ms)
        #expect(later)
    }
}

@Suite struct CapturePacerTests {
    let ms: UInt64 = 1_000_000

    /// Simulates the capture loop: a grab happens at the first moment the pacer allows and the
    /// screen has changed since the last grab; when the pacer held it back with a change
    /// waiting, as it did the grab before, at the next change (within a period) instead.
    /// `changes` are the times the screen changed.
    func grabs(fps: Double, changes: [UInt64], until end: UInt64) -> [UInt64] {
        var pacer = CapturePacer(fps: fps, now: 0)
        var grabbed: [UInt64] = []
        var pending = changes[...]
        var dirtySince: UInt64?
        while true {
            // Next event: the pacer opening, or the next change when the screen is still clean.
            var t: UInt64
            if let since = dirtySince { t = max(since, pacer.nextNanos) } else if let c = pending.first { t = max(c, pacer.nextNanos) } else { break }
            guard t < end else { break }
            while let c = pending.first, c <= t { dirtySince = dirtySince ?? c; pending.removeFirst() }
            guard let since = dirtySince else { continue }
            if pacer.awaitsNextChange(heldWithChangeWaiting: since < t), let next = pending.first, next - t <= pacer.periodNanos {
                t = next
                pending.removeFirst()
                guard t < end else { break }
            }
            grabbed.append(t)
            pacer.grabbed(at: t)
            dirtySince = nil
        }
        return grabbed
    }

    @Test func contentAtTheFrameRateIsGrabbedWhenItChanges() {
        // Changes every 33.3 ms at an arbitrary phase, late at times (by up to 15 ms, under half
        // a period): every change is grabbed at once, the jitter does not build up a lag.
        let period: UInt64 = 1_000_000_000 / 30
        let changes = (0..<90).map { k in 7 * ms + UInt64(k) * period + [0, 15, 3, 0, 9, 1, 0][k % 7] * ms }
        let g = grabs(fps: 30, changes: changes, until: 3_000 * ms)
        #expect(g.count == 90)
        for (grab, change) in zip(g, changes) { #expect(grab == change) }
    }

    @Test func theFirstGrabsPhaseDoesNotStick() {
        // A forced grab at 0, then changes at 30 ms + k periods: grabbed when they happen, not
        // a period after the first grab.
        let period: UInt64 = 1_000_000_000 / 30
        let changes = [0] + (0..<60).map { k in 30 * ms + UInt64(k) * period }
        let g = grabs(fps: 30, changes: changes, until: 2_100 * ms)
        #expect(g == changes)
    }

    @Test func fasterContentIsGrabbedAtTheFrameRate() {
        // Changes every 5 ms: about one grab per period (fps × 32/31, one more for the credit),
        // never two within half a period.
        let changes = (0..<400).map { UInt64($0) * 5 * ms }
        let g = grabs(fps: 30, changes: changes, until: 1_990 * ms)
        #expect(g.count >= 60 && g.count <= 63)  // 2 s × 30 × 32/31 = 61.9, one of them the credit
        for (a, b) in zip(g, g.dropFirst()) { #expect(b - a >= 1_000_000_000 / 30 / 2) }
    }

    @Test func averageStaysAtTheFrameRateWhateverTheChanges() {
        var rng = SplitMix64(seed: 7)
        var t: UInt64 = 0
        var changes: [UInt64] = []
        while t < 10_000 * ms { t += rng.next() % (40 * ms); changes.append(t) }
        let g = grabs(fps: 15, changes: changes, until: 10_000 * ms)
        #expect(g.count <= 156)  // 10 s × 15 × 32/31 = 154.8, and the credit
        for (a, b) in zip(g, g.dropFirst()) { #expect(b - a >= 1_000_000_000 / 15 / 2) }
        // Over any second, at most (1 s + a period of credit) / a grab's cost + 1 grabs (GCRA's
        // bound): 17 at 15 fps.
        let period: UInt64 = 1_000_000_000 / 15
        let most = Int((1_000 * ms + period) / (period - period / CapturePacer.creditLeak)) + 1
        #expect(most == 17)
        for start in stride(from: UInt64(0), to: 9_000 * ms, by: Int(100 * ms)) {
            #expect(g.filter { $0 >= start && $0 < start + 1_000 * ms }.count <= most)
        }
    }

    @Test func contentAtTheFrameRateGetsItsPhaseBackAfterAnExtraGrab() {
        // Changes every period. The fifth is drawn 15 ms late: grabbed late, it leaves the
        // theoretical grid 15 ms behind the changes, harmless while they come a period apart.
        // The tenth picture's application draws a second part 28 ms after the first, a grab of
        // its own: it spends the period of credit, so the next change waits for the grid. At
        // exactly fps the credit never came back: every later change was grabbed 15 ms after it
        // happened, for as long as the stream ran (the bench's `motion`: 24 ms p50 in one run,
        // 39 in the next). It comes back at 1/32 of a period a grab.
        let period: UInt64 = 1_000_000_000 / 30
        let main = (0..<90).map { k in 7 * ms + UInt64(k) * period + (k == 5 ? 15 * ms : 0) }
        let second = main[10] + 28 * ms
        let g = grabs(fps: 30, changes: (main + [second]).sorted(), until: 3_100 * ms)
        #expect(g.contains(second))
        #expect(g.first { $0 > second }.map { $0 > main[11] } == true)  // the next change waited
        for change in main[20...] { #expect(g.contains(change), "the change at \(change / ms) ms is grabbed when it happens") }
    }

    @Test func fasterContentIsGrabbedAsItChanges() {
        // Changes every 33.3 ms (a page scrolling at 30 fps) sent at 15 fps: each grab waits for
        // the content's next change instead of falling anywhere in its drawing.
        let period: UInt64 = 1_000_000_000 / 30
        let changes = (0..<120).map { k in 5 * ms + UInt64(k) * period }
        let g = grabs(fps: 15, changes: changes, until: 4_000 * ms)
        #expect(g.count >= 59 && g.count <= 63, "\(g.count) grabs in 4 s at 15 fps")  // 4 s × 15 × 32/31 = 62
        // Until most grabs were held back, they are grabbed as they are (the first 0.6 s).
        let between = g.filter { !changes.contains($0) && $0 > 600 * ms }
        #expect(between.isEmpty, "grabs between changes: \(between.map { $0 / ms }) ms")
        for (a, b) in zip(g, g.dropFirst()) { #expect(b - a >= 1_000_000_000 / 15 / 2) }
    }

    @Test func onlyGrabsHeldBackMostOfTheTimeWaitForTheNextChange() {
        // Held back now and then (the rest of a picture drawn late): never made to wait, even
        // twice in a row.
        var p = CapturePacer(fps: 30, now: 0)
        let now_and_then = (0..<64).map { $0 % 4 == 0 || $0 == 33 }
        #expect(!now_and_then.map { p.awaitsNextChange(heldWithChangeWaiting: $0) }.contains(true))
        // Held back at every grab (faster content): waits from the 6th on, and still after one
        // grab not held back; not after a run of grabs that are not.
        var q = CapturePacer(fps: 30, now: 0)
        let always = (0..<12).map { _ in q.awaitsNextChange(heldWithChangeWaiting: true) }
        #expect(always == Array(repeating: false, count: 5) + Array(repeating: true, count: 7))
        let once = q.awaitsNextChange(heldWithChangeWaiting: false)
        let after = q.awaitsNextChange(heldWithChangeWaiting: true)
        #expect(!once && after)
        for _ in 0..<8 { _ = q.awaitsNextChange(heldWithChangeWaiting: false) }
        let later = q.awaitsNextChange(heldWithChangeWaiting: true)
        #expect(!later)
    }

    @Test func retryWaitsAPeriod() {
        var p = CapturePacer(fps: 10, now: 0)
        let cost = 100 * ms - 100 * ms / CapturePacer.creditLeak  // a grab's cost: 96.875 ms
        p.retry(at: 50 * ms)
        #expect(p.nextNanos == 150 * ms)
        p.grabbed(at: 150 * ms)  // one frame of credit: half a period later
        #expect(p.nextNanos == 200 * ms)
        p.grabbed(at: 200 * ms)
        #expect(p.nextNanos == 250 * ms)
        p.grabbed(at: 250 * ms)  // credit used: the theoretical grid (150 + 3 grabs' cost) less a period
        #expect(p.nextNanos == 150 * ms + 3 * cost - 100 * ms)
        p.grabbed(at: 900 * ms)  // after a still screen: credit again
        #expect(p.nextNanos == 950 * ms)
    }
}
