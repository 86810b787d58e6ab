import Testing
@testable import Sender

/// The timestamps libvpx is given: its frame rate comes from their gaps.
struct EncoderTimelineTests {
    /// 90 kHz ticks of `ms` milliseconds.
    static func ticks(_ ms: Double) -> UInt32 { UInt32(ms * 90) }

    @Test func withoutTheSendBudgetThePicturesOwnTimesAreGiven() {
        var t = EncoderTimeline()
        let base: UInt32 = 4_000_000_000  // wraps around
        #expect(t.next(rtp: base, budgeted: false, fps: 30) == 0)
        #expect(t.next(rtp: base &+ 2997, budgeted: false, fps: 30) == 2997)
        // A still slide's repeat a second later takes a second's bits.
        #expect(t.next(rtp: base &+ 92_997, budgeted: false, fps: 30) == 92_997)
        // Never backwards, never standing.
        #expect(t.next(rtp: base &+ 92_997, budgeted: false, fps: 30) == 92_998)
    }

    /// Frames the budget held the encoder through (here every other one of a 30 fps capture)
    /// do not read as 15 fps: each frame advances one interval of the capture's rate.
    @Test func underTheSendBudgetTheCapturesRateIsGivenNotTheGapsTheBudgetMade() {
        var t = EncoderTimeline()
        var pts: [Int64] = []
        var captured = 0
        for i in 0..<90 where i % 2 == 0 {
            let now = UInt64(i) * 33_333_333
            captured = i + 1
            t.captured(captured, at: now)
            pts.append(t.next(rtp: Self.ticks(Double(i) * 33.333), budgeted: true, fps: 30))
        }
        let steps = zip(pts.dropFirst(), pts).map { $0 - $1 }
        #expect(steps.allSatisfy { $0 == 3000 }, "\(steps)")
        #expect(t.captureFps.map { abs($0 - 30) < 1 } == true, "\(String(describing: t.captureFps))")
    }

    /// A capture slower than asked (a 24 fps clip in a 30 fps share): its own rate, so libvpx
    /// does not spend only 24/30 of the target; never faster than asked.
    @Test func underTheSendBudgetASlowerCaptureIsMeasured() {
        var t = EncoderTimeline()
        var last: Int64 = 0
        for i in 0..<72 {
            let now = UInt64(i) * 41_666_667
            t.captured(i + 1, at: now)
            last = t.next(rtp: Self.ticks(Double(i) * 41.667), budgeted: true, fps: 30)
        }
        let before = last
        t.captured(73, at: 72 * 41_666_667)
        #expect(t.next(rtp: Self.ticks(72 * 41.667), budgeted: true, fps: 30) - before == 3750)

        var fast = EncoderTimeline()
        for i in 0..<130 {
            fast.captured(i + 1, at: UInt64(i) * 16_666_667)
            last = fast.next(rtp: Self.ticks(Double(i) * 16.667), budgeted: true, fps: 30)
        }
        #expect(fast.next(rtp: Self.ticks(130 * 16.667), budgeted: true, fps: 30) - last == 3000)
    }
}
