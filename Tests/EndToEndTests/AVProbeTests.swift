import Foundation
import Testing
import X11TestSupport

/// The audio/video sync probe measured against itself: the emitter's window and null sink watched
/// directly (no sender, no viewer), on a private Xvfb and a private PulseAudio. What it reports
/// is the probe's own error, which an end-to-end lip-sync check must be well outside of.
///
/// Each event is checked in halves as well: seen minus drawn (the video poll), heard minus the
/// emitter's estimate of when the sink played the beep (two different PulseAudio accountings: the
/// playback stream's and the monitor's record stream's).
@Suite(.serialized) struct AVProbeTests {
    struct Run {
        var events: [AVEmitter.Event]
        var recording: AVRecording
        var report: AVSyncReport
        var missed: Int
        var underflows: Int

        /// Measured minus expected, ms, for each event found within 50 ms.
        func errors(_ expected: (AVEmitter.Event) -> UInt64, in measured: [UInt64]) -> [Double] {
            events.compactMap { e in
                measured.map { (Double($0) - Double(expected(e))) / 1e6 }.filter { abs($0) < 50 }.min { abs($0) < abs($1) }
            }
        }
        var seenMinusDrawn: [Double] { errors(\.drawnNanos, in: recording.flashOnsets) }
        var heardMinusPlayed: [Double] { errors(\.beepNanos, in: recording.beepOnsets) }
        /// How late the emitter drew (its own scheduling, not the probe's error).
        var drawnMinusIntended: [Double] { events.map { (Double($0.drawnNanos) - Double($0.intendedNanos)) / 1e6 } }
    }

    /// Runs an emitter and a measurer on its window and sink until `count` events were drawn.
    func run(videoDelayMillis: Double, count: Int = 6) throws -> Run {
        let xvfb = try PrivateXvfb(width: 640, height: 480)
        let pulse = try PrivatePulse()
        var config = AVEmitter.Configuration(display: xvfb.name, pulseServer: pulse.server, sink: "speakers")
        config.title = "av-probe-self-test"
        config.applicationName = "av-probe"
        config.videoDelayMillis = videoDelayMillis
        let emitter = try AVEmitter(config)
        let measure = try AVMeasure(.init(display: xvfb.name, window: emitter.windowID, pulseServer: pulse.server,
                                          source: "speakers.monitor"))
        try measure.start()
        try emitter.start()
        // A second apart; the first within 2.5 s (the block the idle sink rendered plays out first).
        let deadline = monotonicNanos() + UInt64(count + 5) * 1_000_000_000
        while emitter.events.count < count && monotonicNanos() < deadline { usleep(20_000) }
        // The last flash and beep reach the measurer (the checks below say what is missing if
        // not). The probe's error is a few milliseconds either way: onsets from 50 ms before count.
        if let last = emitter.events.last {
            _ = try? waitUntil(seconds: 3, "the last event seen and heard") {
                let r = measure.recording
                return r.flashOnsets.contains { $0 + 50_000_000 > last.drawnNanos } && r.beepOnsets.contains { $0 + 50_000_000 > last.beepNanos }
            }
        }
        let events = emitter.stop()
        let recording = measure.stop()
        let run = Run(events: events, recording: recording, report: recording.sync(), missed: emitter.missed, underflows: emitter.underflows)
        func ms(_ values: [Double]) -> String { values.map { String(format: "%+.2f", $0) }.joined(separator: " ") }
        func minus(_ a: UInt64?, _ b: UInt64) -> Double? { a.map { (Double($0) - Double(b)) / 1e6 } }
        print("AVProbe (video delay \(videoDelayMillis) ms):", run.report)
        print("  seen - drawn:", ms(run.seenMinusDrawn), "| heard - played:", ms(run.heardMinusPlayed),
              "| drawn - intended:", ms(run.drawnMinusIntended))
        print("  arrival bound - heard:", ms(recording.beeps.compactMap { minus($0.upperBound, $0.onset) }),
              "| pa_stream_get_latency - heard:", ms(recording.beeps.compactMap { minus($0.byPulseLatency, $0.onset) }))
        print("  polls \(recording.polls) (\(recording.pollErrors) failed), missed \(run.missed), underflows \(run.underflows)")
        return run
    }

    @Test func aSourceInSyncIsMeasuredInSync() throws {
        let run = try run(videoDelayMillis: 0)
        #expect(run.report.pairs.count >= 4, "\(run.report)")
        let median = try #require(run.report.medianMillis)
        let worst = try #require(run.report.maxAbsMillis)
        #expect(abs(median) <= 5, "\(run.report)")
        #expect(worst <= 20, "\(run.report)")
        // The probe's halves, each measured against what the emitter did: about a millisecond.
        let video = run.seenMinusDrawn, audio = run.heardMinusPlayed
        #expect(video.count >= 4 && abs(AVSyncReport.median(video) ?? 99) <= 2, "seen - drawn: \(video)")
        #expect(audio.count >= 4 && abs(AVSyncReport.median(audio) ?? 99) <= 2, "heard - played: \(audio)")
        #expect(audio.allSatisfy { abs($0) <= 5 }, "heard - played: \(audio)")
    }

    /// Pairing alone: sound 0.8 (or 2.3) periods late is not read as 0.2 periods early, thanks to
    /// the emitter's uneven gaps; a few milliseconds of jitter and a missing beep do not matter.
    @Test(arguments: [800.0, -300, 2300, 0])
    func offsetsBeyondHalfAPeriodArePairedRight(offsetMillis: Double) {
        let gaps = AVEmitter.Configuration().intervals
        var flashes: [UInt64] = [], t = 10_000_000_000.0
        for k in 0..<12 { flashes.append(UInt64(t)); t += gaps[k % gaps.count] * 1e9 }
        var beeps = flashes.enumerated().map { UInt64(Double($1) + offsetMillis * 1e6 + Double($0 % 3 - 1) * 4e6) }
        beeps.remove(at: 5)
        let report = AVSyncReport(flashes: flashes, beeps: beeps)
        #expect(report.pairs.count == 11, "\(report)")
        #expect(abs((report.medianMillis ?? 0) - offsetMillis) <= 4, "\(report)")
    }

    @Test func aFlash100msLateIsMeasured100msLate() throws {
        let run = try run(videoDelayMillis: 100)
        #expect(run.report.pairs.count >= 4, "\(run.report)")
        let median = try #require(run.report.medianMillis)
        // Audio minus video: the picture is late, so the sound comes first.
        #expect(abs(median - -100) <= 5, "\(run.report)")
    }
}
