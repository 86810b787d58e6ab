import MediaCore
import Testing
@testable import Sender

/// `motion` trades resolution for the bit rate, a step at a time, with hysteresis.
@Suite struct ResolutionAdapterTests {
    /// Feeds `seconds` of 30 frames a second, each `rate / 30` bits, at `target`; returns the
    /// steps taken.
    func feed(_ a: inout ResolutionAdapter, seconds: Int, rate: Double, target: Int, from start: inout UInt64) -> [Int] {
        var steps: [Int] = []
        for i in 0..<(seconds * 30) {
            if let step = a.encoded(bits: Int(rate / 30), target: target, now: start + UInt64(i) * 33_333_334) { steps.append(step) }
        }
        start += UInt64(seconds) * 1_000_000_000
        return steps
    }

    @Test func anEncoderThatCannotHoldTheTargetGetsASmallerPictureAndItComesBack() {
        var a = ResolutionAdapter()
        var t: UInt64 = 0
        // Holding the target: no change.
        #expect(feed(&a, seconds: 5, rate: 1_000_000, target: 1_000_000, from: &t) == [])
        // 1.2 × over: still no change (keyframes and the odd burst are allowed).
        #expect(feed(&a, seconds: 5, rate: 1_200_000, target: 1_000_000, from: &t) == [])
        // 1.5 × over for 2 s: ¾ of the side; the next second settles, then 2 more: ½.
        #expect(feed(&a, seconds: 3, rate: 900_000, target: 600_000, from: &t) == [1])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 960, height: 540))
        #expect(feed(&a, seconds: 4, rate: 700_000, target: 500_000, from: &t) == [2])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 640, height: 360))
        // No smaller than a quarter of the area.
        #expect(feed(&a, seconds: 6, rate: 700_000, target: 200_000, from: &t) == [])
        // The target comes back: to 1.2 × what ½ needed (700k), for 3 s, then what ¾ needed (900k).
        #expect(feed(&a, seconds: 5, rate: 700_000, target: 800_000, from: &t) == [])
        #expect(feed(&a, seconds: 5, rate: 800_000, target: 850_000, from: &t) == [1])
        #expect(feed(&a, seconds: 5, rate: 1_000_000, target: 1_000_000, from: &t) == [])
        #expect(feed(&a, seconds: 6, rate: 1_000_000, target: 1_100_000, from: &t) == [0])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 1280, height: 720))
        // Twice the target for one second is enough (once the second after the resize settled).
        #expect(feed(&a, seconds: 2, rate: 1_000_000, target: 1_000_000, from: &t) == [])
        var b = ResolutionAdapter()
        var changed: [Int] = []
        for i in 0...30 {  // one window of 1 s
            if let step = b.encoded(bits: 2_200_000 / 30, target: 1_000_000, now: UInt64(i) * 33_333_334) { changed.append(step) }
        }
        #expect(changed == [1])
    }
}
