import RTCP
import Testing
@testable import RTPSession

/// Lip sync from the two streams' sender reports (pure: times passed in).
@Suite struct AVSyncTests {
    static let wallBase: UInt64 = 3_900_000_000 * 1_000_000_000  // NTP-era nanoseconds, far from the local clock

    func sr(_ ssrc: UInt32, wall: UInt64, rtp: UInt32) -> SenderReport {
        let seconds = wall / 1_000_000_000, frac = (wall % 1_000_000_000) << 32 / 1_000_000_000
        return SenderReport(ssrc: ssrc, ntp: NTPTimestamp(seconds: UInt32(seconds), fraction: UInt32(frac)), rtpTimestamp: rtp,
                            packetCount: 0, octetCount: 0)
    }

    @Test func senderClockMapsAcrossTheTimestampWrap() {
        let c = SenderClock(sr(1, wall: Self.wallBase, rtp: 0xFFFF_FF00), clockRate: 90_000)
        #expect(c.wallNanos(of: 0xFFFF_FF00) - Int64(Self.wallBase) < 2)
        #expect(c.wallNanos(of: 0xFFFF_FF00 &+ 90_000) - Int64(Self.wallBase) - 1_000_000_000 < 2)
        #expect(c.wallNanos(of: 0xFFFF_FF00 &- 45_000) - Int64(Self.wallBase) + 500_000_000 < 2)
    }

    /// Audio heard 120 ms after its capture, video shown 30 ms after its: the video must wait
    /// 90 ms, reached in steps (80 ms at most each), and what remains is within the dead band.
    @Test func lateAudioDelaysTheVideoUntilTheOffsetIsGone() {
        var s = AVSync()
        s.audioClock = SenderClock(sr(1, wall: Self.wallBase, rtp: 1000), clockRate: 48_000)
        s.videoClock = SenderClock(sr(2, wall: Self.wallBase, rtp: 7000), clockRate: 90_000)
        let local: UInt64 = 50_000_000_000  // the local monotonic clock at wallBase
        for second in 0..<6 {
            for k in 0..<50 {
                let t = UInt64(second * 1000 + k * 20) * 1_000_000  // media time since wallBase
                s.audioPlayed(rtpTimestamp: 1000 &+ UInt32(t / 1_000_000 * 48), at: local + t + 120_000_000 + s.audioExtraDelay)
                s.videoRendered(rtpTimestamp: 7000 &+ UInt32(t / 1_000_000 * 90), at: local + t + 30_000_000 + s.videoExtraDelay)
            }
            if second == 0 { #expect(abs(Double(s.offset!) / 1e6 - 90) < 1) }
            s.update()
        }
        #expect(s.audioExtraDelay == 0)
        #expect(s.videoExtraDelay >= 80_000_000 && s.videoExtraDelay <= 91_000_000, "\(s.videoExtraDelay)")
        #expect(abs(s.offset!) <= s.deadband + 1_000_000, "\(s.offset!)")
    }

    @Test func lateVideoDelaysTheAudioAndNothingHappensWithoutBothReports() {
        var s = AVSync()
        s.audioPlayed(rtpTimestamp: 0, at: 1)
        #expect(s.offset == nil && !s.update())
        s.audioClock = SenderClock(sr(1, wall: Self.wallBase, rtp: 0), clockRate: 48_000)
        s.videoClock = SenderClock(sr(2, wall: Self.wallBase, rtp: 0), clockRate: 90_000)
        for _ in 0..<10 {
            s.audioPlayed(rtpTimestamp: 0, at: 1_000_000_000 + 40_000_000 + s.audioExtraDelay)
            s.videoRendered(rtpTimestamp: 0, at: 1_000_000_000 + 240_000_000 + s.videoExtraDelay)
            s.update()
        }
        #expect(s.videoExtraDelay == 0)
        #expect(abs(Double(s.audioExtraDelay) / 1e6 - 200) < 2, "\(s.audioExtraDelay)")
    }

    /// Feeds one second of steady delays (ms after capture) through `s`, then updates it.
    func second(_ s: inout AVSync, audio: UInt64, video: UInt64) {
        for k in 0..<50 {
            let t = UInt64(k * 20) * 1_000_000
            s.audioPlayed(rtpTimestamp: UInt32(t / 1_000_000 * 48), at: 1_000_000_000 + t + audio * 1_000_000 + s.audioExtraDelay)
            s.videoRendered(rtpTimestamp: UInt32(t / 1_000_000 * 90), at: 1_000_000_000 + t + video * 1_000_000 + s.videoExtraDelay)
        }
        s.update()
    }

    func clocks() -> AVSync {
        var s = AVSync()
        s.audioClock = SenderClock(sr(1, wall: Self.wallBase, rtp: 0), clockRate: 48_000)
        s.videoClock = SenderClock(sr(2, wall: Self.wallBase, rtp: 0), clockRate: 90_000)
        return s
    }

    @Test func anOffsetWithinTheDeadBandIsLeftAlone() {
        var s = clocks()
        for _ in 0..<5 { second(&s, audio: 45, video: 40) }
        #expect(s.audioExtraDelay == 0 && s.videoExtraDelay == 0)
    }

    /// The first correction is whole (up to 120 ms); later ones (the network changed) move 80 ms
    /// a second at most, and the side delayed switches when the other stream becomes the later one.
    @Test func laterCorrectionsAreStepsAndTheDelayedSideCanSwitch() {
        var s = clocks()
        for _ in 0..<3 { second(&s, audio: 150, video: 30) }
        #expect(abs(Double(s.videoExtraDelay) / 1e6 - 120) < 2, "\(s.videoExtraDelay)")
        // Now the video is 200 ms later than the audio (without correction).
        second(&s, audio: 40, video: 240)
        #expect(abs(Double(s.videoExtraDelay) / 1e6 - 40) < 2, "one step of 80 ms: \(s.videoExtraDelay)")
        for _ in 0..<8 { second(&s, audio: 40, video: 240) }
        #expect(s.videoExtraDelay == 0)
        #expect(abs(Double(s.audioExtraDelay) / 1e6 - 200) < 11, "\(s.audioExtraDelay)")
    }

    @Test func theDelayIsBoundedAndAResetForgetsIt() {
        var s = clocks()
        for _ in 0..<15 { second(&s, audio: 5000, video: 30) }
        #expect(s.videoExtraDelay == UInt64(s.maxExtraDelay))
        s.reset()
        #expect(s.videoExtraDelay == 0 && s.offset == nil && !s.update())
    }

    /// A first correction longer than 120 ms would show as a freeze: the rest follows in steps.
    @Test func theFirstCorrectionIsCapped() {
        var s = clocks()
        second(&s, audio: 400, video: 30)
        #expect(s.videoExtraDelay == 120_000_000, "\(s.videoExtraDelay)")
        second(&s, audio: 400, video: 30)
        #expect(s.videoExtraDelay == 200_000_000, "\(s.videoExtraDelay)")
    }

    /// A sink still in its first long block: each frame written is heard at the same instant,
    /// so the audio delay falls 20 ms per frame. Nothing is corrected from that second; once the
    /// delay holds still, the offset is corrected.
    @Test func aPathThatHasNotSettledIsNotCorrectedFor() {
        var s = clocks()
        for k in 0..<50 {
            let t = UInt64(k * 20) * 1_000_000
            s.audioPlayed(rtpTimestamp: UInt32(t / 1_000_000 * 48), at: 1_000_000_000 + 1_000_000_000)
            s.videoRendered(rtpTimestamp: UInt32(t / 1_000_000 * 90), at: 1_000_000_000 + t + 30_000_000)
        }
        #expect(abs(s.offset!) > 50_000_000)
        let changed = s.update()
        #expect(!changed)
        #expect(s.videoExtraDelay == 0 && s.audioExtraDelay == 0)
        second(&s, audio: 130, video: 30)
        #expect(abs(Double(s.videoExtraDelay) / 1e6 - 100) < 15, "\(s.videoExtraDelay)")
    }

    /// A path that never settles (a sink reporting a wildly varying latency) is still corrected,
    /// after `maxUnsettledUpdates` seconds.
    @Test func aPathThatNeverSettlesIsCorrectedLate() {
        var s = clocks()
        var corrected = 0
        for n in 0..<8 {
            for k in 0..<50 {
                let t = UInt64(k * 20) * 1_000_000
                let swing: UInt64 = k % 2 == 0 ? 0 : 100_000_000
                s.audioPlayed(rtpTimestamp: UInt32(t / 1_000_000 * 48), at: 1_000_000_000 + t + 150_000_000 + swing + s.audioExtraDelay)
                s.videoRendered(rtpTimestamp: UInt32(t / 1_000_000 * 90), at: 1_000_000_000 + t + 30_000_000 + s.videoExtraDelay)
            }
            if s.update() && corrected == 0 { corrected = n + 1 }
        }
        #expect(corrected == s.maxUnsettledUpdates + 1, "first corrected at update \(corrected)")
        #expect(s.videoExtraDelay > 0)
    }
}
