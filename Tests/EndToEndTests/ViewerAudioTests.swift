import Foundation
import Testing
import X11TestSupport

/// `watch` plays the audio through PulseAudio and records it: a shared app's 440 Hz tone comes
/// out of the viewer's sink and is in the WebM, checked by tone detection (Goertzel) after
/// PulseAudio's and ffmpeg's decoding.
@Suite struct ViewerAudioTests {
    @Test func theSharedAppsToneIsPlayedAndRecorded() throws {
        let pulse = try PrivatePulse()
        let dir = try makeTempDir()
        let tone = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()
        let sdp = "\(dir)/s.sdp"
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--sdp", sdp, "--input", input, "--input-size", "320x240",
            "--audio-app", "lecture-app", "--no-mic", "--duration", "9", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try waitUntil(seconds: 10, "the sender's SDP file") { FileManager.default.fileExists(atPath: sdp) }
        // The viewer plays into the "virtmic" null sink; its monitor is what a listener would hear.
        let viewer = try Child(screenshareBinary(), [
            "watch", "--sdp", sdp, "--headless", "--record", "\(dir)/got.webm", "--audio-sink", "virtmic", "--duration", "7", "--json",
        ], dir: dir, name: "viewer", environment: pulse.environment)
        _ = try EventLog.wait(for: "first_frame", in: viewer)
        let heardPath = "\(dir)/heard.raw"
        let heard = try Child(which("parecord"), ["--device=virtmic.monitor", "--raw", "--format=s16le", "--rate=48000", "--channels=2",
                                                 heardPath], dir: dir, name: "parecord", environment: pulse.environment)
        // The app's first sound reaches the stream after up to 2 s (see the README's known
        // limits): once the sink plays the tone, 2 s more of it, the last of which is checked
        // (in the first, lip sync may still move the audio once: one short gap or skip, by design).
        var toneFrom = 0
        try waitUntil(seconds: 10, "the 440 Hz tone out of the viewer's sink") {
            let last = try readS16Stereo(heardPath, lastFrames: 4_800)
            guard last.count == 4_800, amplitude(hann(last), 440) * 2 > 0.1 else { return false }
            toneFrom = s16StereoFrames(heardPath)
            return true
        }
        try waitUntil(seconds: 5, "2 s more of the viewer's sink") { s16StereoFrames(heardPath) >= toneFrom + 96_000 }
        kill(heard.pid, SIGINT)
        _ = heard.finish(within: 5)
        #expect(viewer.finish(within: 20) == 0, "\(viewer.stderr)")
        #expect(sender.finish(within: 20) == 0, "\(sender.stderr)")
        _ = tone.finish(within: 0)

        let summary = try EventLog(viewer).stopped()
        #expect(summary["audio_playing"] as? Bool == true, "\(summary)")
        #expect((summary["audio_decoded"] as? Int ?? 0) > 100, "\(summary)")
        #expect(summary["audio_late"] as? Int == 0, "\(summary)")
        // Played: the tone at about its level (0.25) in what the sink played.
        let played = try readS16Stereo(heardPath)
        #expect(played.count > 48_000, "parecord got \(played.count) samples")
        let window = hann(Array(played.suffix(48_000)))
        let a440 = amplitude(window, 440) * 2, a1000 = amplitude(window, 1000) * 2
        #expect(a440 > 0.15, "440 Hz played at \(a440)")
        #expect(a1000 < a440 / 100, "1 kHz at \(a1000)")
        // Recorded: an Opus track that ffmpeg decodes to the same tone.
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-c:a", "libopus", "-i", "\(dir)/got.webm", "-vn",
                                          "-ac", "2", "-ar", "48000", "-f", "s16le", "-y", "\(dir)/rec.raw"]) == 0)
        let recorded = try readS16Stereo("\(dir)/rec.raw")
        #expect(recorded.count > 48_000 * 3, "recorded \(recorded.count) samples")
        let r440 = amplitude(hann(Array(recorded.suffix(48_000))), 440) * 2
        #expect(r440 > 0.2, "440 Hz recorded at \(r440)")
        #expect((summary["recorded_audio_packets"] as? Int ?? 0) > 100)
    }
}
