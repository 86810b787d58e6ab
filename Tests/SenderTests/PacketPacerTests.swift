import MediaCore
@testable import Sender
import Testing

/// The sender's pacing in simulated time: when each packet of a frame may leave, within the
/// frame and across frames.
@Suite struct PacketPacerTests {
    static let ms: UInt64 = 1_000_000

    /// Sends `packets` of `size` bytes as the send step does (wait until the pacer's time, then
    /// send) from `start`; returns each packet's send time.
    static func sendFrame(_ pacer: inout PacketPacer, packets: Int, size: Int, at start: UInt64, rates: PacketPacer.Rates) -> [UInt64] {
        pacer.startFrame(at: start, rates: rates)
        var now = start, times: [UInt64] = []
        for _ in 0..<packets {
            now = pacer.sendTime(bytes: size, now: now)
            pacer.sent(bytes: size, at: now)
            times.append(now)
        }
        return times
    }

    /// Under congestion control at 1 Mbit/s: pace 2.5 Mbit/s after two packets.
    static let congested = PacketPacer.Rates(paceBitsPerSecond: 2_500_000, unpacedBytes: 2400, budgetBitsPerSecond: 1_100_000,
                                             burstBits: 100_000, networkLimited: true)

    @Test func aKeyframeLeavesTwoPacketsAtOnceThenAtThePaceRate() {
        var pacer = PacketPacer()
        var rates = Self.congested
        rates.networkLimited = false  // a keyframe does not wait for the budget
        let t0: UInt64 = 5_000 * Self.ms
        let times = Self.sendFrame(&pacer, packets: 20, size: 1200, at: t0, rates: rates)
        #expect(times[0] == t0 && times[1] == t0 && times[2] == t0)  // 2400 bytes sent before the third: not over
        // The fourth waits for the 1200 bytes beyond the unpaced 2400 at 2.5 Mbit/s: 3.84 ms.
        #expect(times[3] == t0 + 3_840_000)
        // The last: 20,400 bytes beyond, 65.28 ms after the start, evenly spaced on the way.
        #expect(times[19] == t0 + 65_280_000)
        for k in 4..<20 { #expect((3_839_999...3_840_001).contains(times[k] - times[k - 1])) }
    }

    @Test func withoutCongestionControlSixteenKilobytesLeaveAtOnce() {
        var pacer = PacketPacer()
        let rates = PacketPacer.Rates(paceBitsPerSecond: 8_000_000, unpacedBytes: 16_000, budgetBitsPerSecond: 0, burstBits: 0, networkLimited: false)
        let times = Self.sendFrame(&pacer, packets: 20, size: 1200, at: 0, rates: rates)
        // The first 14 packets (the 14th follows 15,600 bytes): at once.
        #expect(times[0..<14].allSatisfy { $0 == 0 })
        // The 15th follows 16,800 bytes: 800 beyond at 8 Mbit/s, 0.8 ms.
        #expect(times[14] == 800_000)
        #expect(times[19] == UInt64(Double(19 * 1200 - 16_000) * 8 / 8e6 * 1e9))
    }

    /// An encoder that overshoots 1.5 × for 3 s (libvpx can): the budget holds what leaves to
    /// 1.1 × the target with a tenth of a second of burst; the encode thread waits with the
    /// packets, so frames come later (the mailbox would skip pictures meanwhile).
    @Test func anOvershootingEncoderIsHeldToTheBudget() {
        var pacer = PacketPacer()
        let frameBytes = 6250  // 1.5 Mbit/s at 30 fps
        var start: UInt64 = 0, sentBits = 0, last: UInt64 = 0
        var frameTime: UInt64 = 0
        var frames = 0
        while frameTime < 3_000 * Self.ms {
            start = max(frameTime, last)  // the encode thread was still sending the last frame
            let times = Self.sendFrame(&pacer, packets: 5, size: frameBytes / 5, at: start, rates: Self.congested)
            last = times.last!
            sentBits += frameBytes * 8
            frames += 1
            // Never more in the budget than the burst and the packet just sent.
            #expect(pacer.budget.levelBits <= Self.congested.burstBits + Double(frameBytes / 5 * 8) + 1)
            frameTime = start + 33_333_333
        }
        let rate = Double(sentBits) / (Double(last) / 1e9)
        #expect(rate <= 1_100_000 * 1.05 && rate >= 1_100_000 * 0.9, "\(rate) bit/s over \(frames) frames")
        // Unheld, 90 frames would have left in 3 s; held, about 1.1 / 1.5 of them.
        #expect(frames < 75, "\(frames)")
    }

    /// A keyframe is the one burst allowed: it does not wait, but the frames after it pay for it.
    @Test func theFramesAfterAKeyframePayForIt() {
        var pacer = PacketPacer()
        var key = Self.congested
        key.networkLimited = false
        let keyTimes = Self.sendFrame(&pacer, packets: 25, size: 1200, at: 0, rates: key)  // 240 kbit
        #expect(keyTimes.last! == UInt64(Double(24 * 1200 - 2400) * 8 / 2.5e6 * 1e9))  // paced, never held
        // The next frame, once the keyframe's last packet left (84.5 ms): the budget holds
        // 240 kbit less what drained at 1.1 Mbit/s; its first packet waits until 100 kbit less
        // its own remain.
        let next = max(33_333_333, keyTimes.last!)
        pacer.startFrame(at: next, rates: Self.congested)
        let due = pacer.sendTime(bytes: 1200, now: next)
        var bucket = RateBucket()
        bucket.drain(at: 0, bitsPerSecond: 1_100_000)
        for t in keyTimes {
            bucket.drain(at: t, bitsPerSecond: 1_100_000)
            bucket.add(bits: 9600)
        }
        bucket.drain(at: next, bitsPerSecond: 1_100_000)
        let expected = next + bucket.nanosUntil(atMost: 100_000 - 9600, bitsPerSecond: 1_100_000)
        #expect(due == expected)
        #expect(due > next + 40 * Self.ms, "a keyframe of 240 kbit holds the next frame back about 50 ms: \(due - next)")
    }

    @Test func aNewEncoderOwesNothing() {
        var pacer = PacketPacer()
        _ = Self.sendFrame(&pacer, packets: 50, size: 1200, at: 0, rates: Self.congested)
        #expect(pacer.sendTime(bytes: 1200, now: 100 * Self.ms) > 100 * Self.ms)
        pacer.reset()
        pacer.startFrame(at: 100 * Self.ms, rates: Self.congested)
        #expect(pacer.sendTime(bytes: 1200, now: 100 * Self.ms) == 100 * Self.ms)
    }
}
