import MediaCore
import Testing
@testable import Sender

/// `motion` trades resolution for the bit rate, a step at a time, with hysteresis.
@Suite struct ResolutionAdapterTests {
    /// Feeds `seconds` of 30 frames a second, each `rate / 30` bits, at `target`; returns the
    /// steps taken.
    func feed(_ a: inout ResolutionAdapter, seconds: Double, rate: Double, target: Int, keyframeEvery: Int = 0,
              from start: inout UInt64) -> [Int] {
        var steps: [Int] = []
        for i in 0..<Int(seconds * 30) {
            let key = keyframeEvery > 0 && i % keyframeEvery == 0
            if let step = a.encoded(bits: Int(rate / 30) * (key ? 10 : 1), keyframe: key, target: target,
                                    now: start + UInt64(i) * 33_333_334) { steps.append(step) }
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
}
