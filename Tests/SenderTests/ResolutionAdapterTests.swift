import MediaCore
import Basics
import Testing
@testable import Sender

/// `motion` trades resolution for the bit rate, a step at a time, with hysteresis.
@Suite struct ResolutionAdapterTests {
    /// Feeds `seconds` of 30 frames a second, each `rate / 30` bits (at `quantizer`, if given),
    /// at `target`; returns the steps taken.
    func feed(_ a: inout ResolutionAdapter, seconds: Double, rate: Double, quantizer: Int? = nil, target: Int, keyframeEvery: Int = 0,
              from start: inout UInt64) -> [Int] {
        var steps: [Int] = []
        for i in 0..<Int(seconds * 30) {
            let key = keyframeEvery > 0 && i % keyframeEvery == 0
            if let step = a.encoded(bits: Int(rate / 30) * (key ? 10 : 1), keyframe: key, quantizer: quantizer, maxQuantizer: 63,
                                    target: target, now: start + UInt64(i) * 33_333_334) { steps.append(step) }
        }
        start += UInt64(seconds * 1e9)
        return steps
    }

    @Test func anEncoderThatCannotHoldTheTargetGetsASmallerPictureAndItComesBack() {
        var a = ResolutionAdapter()
        var t: UInt64 = 0
        // Holding the target: no change; nor 1.2 × over (the odd burst), nor keyframes of 10
        // frames' size twice a second (they are not the size's fault).
        #expect(feed(&a, seconds: 5, rate: 1_000_000, target: 1_000_000, from: &t) == [])
        #expect(feed(&a, seconds: 5, rate: 1_200_000, target: 1_000_000, from: &t) == [])
        var fine = ResolutionAdapter()
        for i in 0...90 {
            #expect(fine.encoded(bits: 1_200_000 / 30, quantizer: 40, maxQuantizer: 63, target: 1_000_000, now: UInt64(i) * 33_333_334) == nil)
        }
        #expect(feed(&a, seconds: 5, rate: 1_000_000, target: 1_000_000, keyframeEvery: 15, from: &t) == [])
        // 1.5 × over for a second: ¾ of the side; the next half second settles, then a
        // second more: ½.
        #expect(feed(&a, seconds: 1.5, rate: 900_000, target: 600_000, from: &t) == [1])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 960, height: 540))
        #expect(feed(&a, seconds: 2, rate: 700_000, target: 500_000, from: &t) == [2])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 640, height: 360))
        // No smaller than a quarter of the area.
        #expect(feed(&a, seconds: 6, rate: 700_000, target: 200_000, from: &t) == [])
        // The target comes back: to 1.2 × what ½ needed (700k), for 3 s, then what ¾ needed (900k).
        #expect(feed(&a, seconds: 5, rate: 700_000, target: 800_000, from: &t) == [])
        #expect(feed(&a, seconds: 5, rate: 800_000, target: 850_000, from: &t) == [1])
        #expect(feed(&a, seconds: 5, rate: 1_000_000, target: 1_000_000, from: &t) == [])
        #expect(feed(&a, seconds: 6, rate: 1_000_000, target: 1_100_000, from: &t) == [0])
        #expect(a.scaled(PixelSize(width: 1280, height: 720)) == PixelSize(width: 1280, height: 720))
        // Twice the target for half a second is enough.
        var b = ResolutionAdapter()
        var changed: [Int] = []
        for i in 0...15 {
            if let step = b.encoded(bits: 2_200_000 / 30, target: 1_000_000, now: UInt64(i) * 33_333_334) { changed.append(step) }
        }
        #expect(changed == [1])
        // 1.2 × over at libvpx's coarsest quantizers for half a second: nothing else helps.
        var c = ResolutionAdapter()
        changed = []
        for i in 0...15 {
            if let step = c.encoded(bits: 1_200_000 / 30, quantizer: 61, maxQuantizer: 63, target: 1_000_000,
                                    now: UInt64(i) * 33_333_334) { changed.append(step) }
        }
        #expect(changed == [1])
    
        // Frames skipped (the send budget held the encoder back): 10 frames a second of a 30 fps
        // stream, each a tenth of the target, are 3 × what the size needs at its frame rate.
        var d = ResolutionAdapter()
        changed = []
        for i in 0...5 {
            if let step = d.encoded(bits: 100_000, target: 1_000_000, fps: 30, now: UInt64(i) * 100_000_000) { changed.append(step) }
        }
        #expect(changed == [1])
    }

    /// The smaller picture at fine quantizers within the target grows back even when the
    /// target never reaches what the larger size once took (it was over `--bitrate`); if the
    /// larger size has to give way again soon, the next try waits twice as long.
    /// The first second under congestion control is not weighed: the encoder settling from
    /// what it made under no limit (1.5 × over for a second and a half) keeps the size; the same overshoot
    /// going on after that second does not.
    @Test func theFirstSecondOfAPathIsNotWeighed() {
        var a = ResolutionAdapter()
        var t: UInt64 = 0
        a.pathStarted()
        #expect(feed(&a, seconds: 1.5, rate: 1_500_000, target: 1_000_000, from: &t).isEmpty)
        #expect(feed(&a, seconds: 1.0, rate: 1_000_000, target: 1_000_000, from: &t).isEmpty)
        // Without it, the same overshoot scales down.
        var b = ResolutionAdapter()
        var u: UInt64 = 0
        #expect(feed(&b, seconds: 1.5, rate: 1_500_000, target: 1_000_000, from: &u) == [1])
        // And after it, a real overshoot still does.
        #expect(feed(&a, seconds: 1.5, rate: 1_500_000, target: 1_000_000, from: &t) == [1])
    }

    @Test func fineQuantizersBringTheSizeBackWithoutFlapping() {
        var a = ResolutionAdapter()
        var t: UInt64 = 0
        #expect(feed(&a, seconds: 1.5, rate: 3_000_000, quantizer: 50, target: 2_000_000, from: &t) == [1])  // 1.5 × over
        // At ¾: 1.8 Mbit/s at quantizer 30 (not fine): stays.
        #expect(feed(&a, seconds: 6, rate: 1_800_000, quantizer: 30, target: 2_000_000, from: &t) == [])
        // Quantizer 12 within the target: back after 3 s (the target 2M never reaches 1.2 × 3M).
        #expect(feed(&a, seconds: 2.5, rate: 1_500_000, quantizer: 12, target: 2_000_000, from: &t) == [])
        #expect(feed(&a, seconds: 1.5, rate: 1_500_000, quantizer: 12, target: 2_000_000, from: &t) == [0])
        // The full size cannot hold it again (within 10 s): down, and the next grow-back on fine
        // quantizers needs 6 s, not 3.
        #expect(feed(&a, seconds: 2, rate: 3_000_000, quantizer: 50, target: 2_000_000, from: &t) == [1])
        #expect(feed(&a, seconds: 5, rate: 1_500_000, quantizer: 12, target: 2_000_000, from: &t) == [])
        #expect(feed(&a, seconds: 2, rate: 1_500_000, quantizer: 12, target: 2_000_000, from: &t) == [0])
        // Fine quantizers but over the target: not a reason to grow.
        var b = ResolutionAdapter()
        t = 0
        #expect(feed(&b, seconds: 1.5, rate: 3_000_000, quantizer: 50, target: 2_000_000, from: &t) == [1])
        #expect(feed(&b, seconds: 8, rate: 2_100_000, quantizer: 12, target: 2_000_000, from: &t) == [])
    }

    /// An overshoot while libvpx's quantizer is in the lower half of its range is its rate
    /// control catching up, not a size it cannot hold: the size stays. The same overshoot at
    /// quantizer 32 (half the range) and above, or with no quantizer known, scales it down.
    @Test func anOvershootAtQuantizersToSpareKeepsTheSize() {
        for (quantizer, expected) in [(22, [Int]()), (31, []), (32, [1]), (nil, [1])] as [(Int?, [Int])] {
            var a = ResolutionAdapter()
            var t: UInt64 = 0
            // 1.4 × over for 1.5 s, then twice the target for half a second.
            var steps = feed(&a, seconds: 1.5, rate: 1_400_000, quantizer: quantizer, target: 1_000_000, from: &t)
            if steps.isEmpty { steps = feed(&a, seconds: 0.6, rate: 2_100_000, quantizer: quantizer, target: 1_000_000, from: &t) }
            #expect(steps == expected, "quantizer \(quantizer.map(String.init) ?? "unknown")")
        }
    }
}
