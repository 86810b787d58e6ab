import Foundation
import OpusCodec
import RTP
import Testing
import X11TestSupport

/// The audio path against a real PulseAudio: applications play tones through `pacat`, a tone is
/// played into the virtual microphone, and independent decoders (ffmpeg from the SDP, and
/// libopus on packets received here) check what arrived. Each test has its own PulseAudio.
@Suite(.serialized) struct AudioEndToEndTests {
    let pulse: PrivatePulse
    init() throws { pulse = try PrivatePulse() }

    @Test func sharedAppAndMicArriveAtTheirGainsAndOtherAppsDoNot() throws {
        let dir = try makeTempDir()
        let video = try tinyVideo(dir: dir)
        let port = freeEvenPort()
        // Receivers first: ffmpeg reads the SDP the sender will write (video and Opus audio).
        let sdp = "\(dir)/stream.sdp"
        // As the sender writes it: its video numbered for transport feedback (`a=extmap:3`).
        var description = SessionDescription(destination: "127.0.0.1", videoPort: port, framerate: 15, audioPort: port + 2)
        description.transportSequenceID = 3
        try description.render().write(toFile: sdp, atomically: true, encoding: .utf8)
        // ffmpeg decodes with libopus: Debian 12's ffmpeg 5.1 native Opus decoder plays this
        // stream's 440 Hz tone at 450 Hz (libopus, here and in the test below, does not).
        let ffmpeg = try Child(which("ffmpeg"), [
            "-nostdin", "-loglevel", "error", "-protocol_whitelist", "file,udp,rtp", "-c:a", "libopus", "-i", sdp,
            "-map", "0:a", "-f", "s16le", "-ar", "48000", "-ac", "2", "-y", "\(dir)/audio.raw",
        ], dir: dir, name: "ffmpeg")
        try waitUntilBound(port + 2)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", video, "--input-format", "nv12", "--input-size", "64x64", "--input-fps", "5",
            "--audio-app", "lecture-app", "--app-gain", "0", "--mic-gain", "-6", "--sdp", "\(dir)/sender.sdp", "--duration", "6", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try EventLog.wait(for: "started", in: sender)
        // The capture's record streams (microphone, and the anchor that keeps the sink in small
        // blocks) are open before anything plays.
        try pulse.waitForRecordStreams(of: "screenshare", count: 2)
        // The app being shared (440 Hz), another app (2500 Hz), the microphone (1000 Hz). Same
        // amplitude each; the mic is asked for 6 dB lower.
        let players = try [
            pulse.play(tone: 440, app: "lecture-app", dir: dir),
            pulse.play(tone: 2500, app: "chat-app", dir: dir),
            pulse.play(tone: 1000, app: "mic-feeder", device: "virtmic", dir: dir),
        ]
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        players.forEach { $0.finish(within: 0, interrupt: false) }
        ffmpeg.finish(within: 2)
        #expect(EventLog(sender).contains("audio_app_attached"), "\(sender.stdout)")
        #expect((try EventLog(sender).stopped()["audio_packets_sent"] as? Int ?? 0) > 150)
        #expect(try String(contentsOfFile: "\(dir)/sender.sdp", encoding: .utf8) == String(contentsOfFile: sdp, encoding: .utf8))

        let samples = try readS16Stereo("\(dir)/audio.raw")
        #expect(samples.count >= 48_000 * 3, "ffmpeg decoded \(samples.count) samples: \(ffmpeg.stderr)")
        // The last 2 s (the tones are steady by then), Hann-windowed (which halves amplitudes).
        let tail = hann(Array(samples.suffix(96_000)))
        let app = 2 * amplitude(tail, 440), mic = 2 * amplitude(tail, 1000), other = 2 * amplitude(tail, 2500)
        #expect(abs(app - 0.25) < 0.25 * 0.2, "440 Hz amplitude \(app)")
        let micDB = 20 * log10(mic / app)
        #expect(abs(micDB - -6) <= 3, "mic is \(micDB) dB relative to the app (asked -6)")
        let otherDB = 20 * log10(max(other, 1e-9) / app)
        #expect(otherDB <= -40, "the other app's 2500 Hz is only \(-otherDB) dB below the shared app")
    }

    @Test func sharedAppRestartingIsBackWithinOneSecond() throws {
        let dir = try makeTempDir()
        let video = try tinyVideo(dir: dir)
        let port = freeEvenPort()
        let receiver = try OpusRTPReceiver(port: port + 2)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", video, "--input-format", "nv12", "--input-size", "64x64", "--input-fps", "5",
            "--audio-app", "lecture-app", "--no-mic", "--duration", "8", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try EventLog.wait(for: "started", in: sender)
        try pulse.waitForRecordStreams(of: "screenshare", count: 1)  // the capture's anchor
        let first = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        // Wait until it is heard, and steady: 300 ms of it (15 frames of 20 ms) in a row. (The
        // first time can take up to 2 s: a null sink renders 2 s blocks until the capture's
        // low-latency anchor takes effect.)
        try waitUntil(seconds: 5, "300 ms of the tone before the app stops") {
            let frames = receiver.snapshot()
            return frames.count >= 15 && frames.suffix(15).allSatisfy { $0.level440 > 0.15 }
        }
        first.finish(within: 0, interrupt: false)  // SIGKILL: the app vanishes
        let stoppedAt = Date()
        try EventLog.wait(for: "audio_app_detached", in: sender, seconds: 5)
        hold(1.2 - Date().timeIntervalSince(stoppedAt), "the app stays away 1.2 s: the stream must carry no tone meanwhile")
        let restartedAt = Date()
        let second = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        second.finish(within: 0, interrupt: false)
        let frames = receiver.stop()

        let log = EventLog(sender)
        #expect(log.events(named: "audio_app_attached").count == 2, "\(sender.stdout)")
        #expect(log.contains("audio_app_detached"))
        func tone(_ f: OpusRTPReceiver.Frame) -> Bool { f.level440 > 0.15 }
        #expect(frames.contains { $0.arrival < stoppedAt && tone($0) }, "no tone before the app stopped")
        // Silence while it is gone (DTX may leave packets out altogether).
        let gap = frames.filter { $0.arrival > stoppedAt.addingTimeInterval(0.4) && $0.arrival < restartedAt }
        #expect(!gap.contains(where: tone), "tone while the app was stopped")
        let back = try #require(frames.first { $0.arrival > restartedAt && tone($0) }, "the tone never came back")
        let delay = back.arrival.timeIntervalSince(restartedAt)
        #expect(delay < 1.0, "sound back \(delay) s after the app restarted")
        // And it stays: every frame in the following second carries the tone.
        let after = frames.filter { $0.arrival > back.arrival.addingTimeInterval(0.1) && $0.arrival < back.arrival.addingTimeInterval(1.1) }
        #expect(after.count >= 45 && after.allSatisfy(tone), "\(after.filter { !tone($0) }.count) of \(after.count) frames without the tone")
    }

    @Test func explicitAudioWithoutPulseAudioIsAClearError() throws {
        let dir = try makeTempDir()
        let video = try tinyVideo(dir: dir)
        let noServer = ["PULSE_SERVER": "unix:\(dir)/no-such-socket"]
        let explicit = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(freeEvenPort())", "--input", video, "--input-size", "64x64", "--audio-app", "lecture-app", "--duration", "1",
        ], dir: dir, name: "explicit", environment: noServer)
        #expect(explicit.finish(within: 10) == 69)
        #expect(explicit.stderr.contains("audio") && explicit.stderr.contains("no-such-socket"), "stderr: \(explicit.stderr)")
        // Only the default microphone implied: a warning, and video goes out.
        let implicit = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(freeEvenPort())", "--input", video, "--input-size", "64x64", "--duration", "1", "--json",
        ], dir: dir, name: "implicit", environment: noServer)
        #expect(implicit.finish(within: 10) == 0, "\(implicit.stderr)")
        #expect(EventLog(implicit).events(named: "warning").contains { $0["kind"] as? String == "audio_unavailable" }, "\(implicit.stdout)")
        #expect((try EventLog(implicit).stopped()["frames_sent"] as? Int ?? 0) > 0)
    }

    @Test func sourcesListsPlayingApplicationsAndMicrophones() throws {
        let xvfb = try PrivateXvfb(width: 320, height: 240)
        let dir = try makeTempDir()
        let player = try pulse.play(tone: 440, app: "listed-app ✓", device: "headset", dir: dir)
        defer { player.finish(within: 0, interrupt: false) }
        func sources(json: Bool, environment: [String: String]) throws -> Child {
            let c = try Child(screenshareBinary(), ["sources", "--display", xvfb.name] + (json ? ["--json"] : []), dir: dir,
                              name: "sources-\(UUID().uuidString.prefix(4))", environment: environment)
            #expect(c.finish(within: 15) == 0, "\(c.stderr)")
            return c
        }
        // pacat connects asynchronously: list until it shows up.
        var audio: [String: Any] = [:]
        try waitUntil(seconds: 10, "the playing app in `sources --json`") {
            audio = (try? parseJSONObject(sources(json: true, environment: pulse.environment).stdout))?["audio"] as? [String: Any] ?? [:]
            return (audio["applications"] as? [[String: Any]] ?? []).contains { $0["name"] as? String == "listed-app ✓" }
        }
        #expect(audio["available"] as? Bool == true)
        #expect(audio["server"] as? String == pulse.server)
        let app = try #require((audio["applications"] as? [[String: Any]])?.first { $0["name"] as? String == "listed-app ✓" })
        #expect(app["binary"] as? String == "pacat")
        #expect(app["pid"] as? Int == Int(player.pid))
        #expect(app["sink"] as? String == "headset")
        // The index is PulseAudio's own, as pactl shows it.
        let pactl = try Child(which("pactl"), ["list", "short", "sink-inputs"], dir: dir, name: "pactl", environment: pulse.environment)
        #expect(pactl.finish(within: 5) == 0)
        let indices = pactl.stdout.split(separator: "\n").compactMap { $0.split(separator: "\t").first.flatMap { Int($0) } }
        #expect(indices.count == 1 && indices.first == app["index"] as? Int, "pactl: \(pactl.stdout) ours: \(app)")
        let sourceList = try #require(audio["sources"] as? [[String: Any]])
        #expect(Set(sourceList.compactMap { $0["name"] as? String }) == ["speakers.monitor", "virtmic.monitor", "headset.monitor", "mic2.monitor"])
        #expect(sourceList.filter { $0["default"] as? Bool == true }.compactMap { $0["name"] as? String } == ["virtmic.monitor"])
        let virtmic = try #require(sourceList.first { $0["name"] as? String == "virtmic.monitor" })
        #expect(virtmic["description"] as? String == "Monitor of Virtual-microphone")
        #expect(virtmic["monitor_of"] as? String == "virtmic")
        let sinks = try #require(audio["sinks"] as? [[String: Any]])
        #expect(sinks.filter { $0["default"] as? Bool == true }.compactMap { $0["name"] as? String } == ["speakers"])
        #expect(sinks.contains { $0["name"] as? String == "headset" && $0["description"] as? String == "Headset" })

        let text = try sources(json: false, environment: pulse.environment).stdout
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("listed-app ✓") && $0.contains("binary pacat") && $0.contains("pid \(player.pid)") }, "\(text)")
        #expect(lines.contains { $0.contains("virtmic.monitor") && $0.contains("Monitor of Virtual-microphone") && $0.hasSuffix("default") }, "\(text)")
        #expect(lines.contains { $0.contains("mic2.monitor") && !$0.hasSuffix("default") }, "\(text)")
        #expect(text.contains("windows:") && text.contains("monitors:"))

        // No PulseAudio: the X11 part is still listed, and a clear line says audio is unavailable.
        let none = ["PULSE_SERVER": "unix:\(dir)/no-such-socket"]
        let noAudio = try sources(json: false, environment: none).stdout
        #expect(noAudio.contains("monitors:") && noAudio.contains("windows:"))
        #expect(noAudio.split(separator: "\n").contains { $0.hasPrefix("audio: unavailable") && $0.contains("no-such-socket") }, "\(noAudio)")
        let noAudioJSON = try parseJSONObject(sources(json: true, environment: none).stdout)
        let unavailable = try #require(noAudioJSON["audio"] as? [String: Any])
        #expect(unavailable["available"] as? Bool == false)
        #expect((unavailable["error"] as? String)?.contains("no-such-socket") == true)
        #expect(noAudioJSON["monitors"] as? [[String: Any]] != nil)
    }

    @Test func pulseAudioRestartingMidStreamKeepsVideoAndBringsAudioBack() throws {
        let dir = try makeTempDir()
        let video = try changingVideo(dir: dir)
        let port = freeEvenPort()
        let videoLog = try UDPReceiver(port: port)
        let receiver = try OpusRTPReceiver(port: port + 2)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", video, "--input-format", "nv12", "--input-size", "64x64", "--input-fps", "10",
            "--fps", "10", "--audio-app", "lecture-app", "--no-mic", "--duration", "60", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try EventLog.wait(for: "started", in: sender)
        // Low-latency players, so what is measured is the reconnection, not a null sink's 2 s blocks.
        let first = try pulse.play(tone: 440, app: "lecture-app", latencyMillis: 20, dir: dir)
        let heard = receiver.waitFor(seconds: 5) { $0.level440 > 0.15 }
        try #require(heard != nil, "the tone was never heard before the restart: \(sender.stdout)")

        pulse.kill()
        let killedAt = Date()
        first.finish(within: 2, interrupt: false)
        // The capture notices, and retries while the server is away (at least twice).
        try EventLog.wait(for: "audio_reconnecting", in: sender, count: 2, seconds: 5)
        hold(1.5 - Date().timeIntervalSince(killedAt), "PulseAudio stays away 1.5 s: video must keep flowing meanwhile")
        let restartAt = Date()
        try pulse.restart()
        let backAt = Date()
        let second = try pulse.play(tone: 440, app: "lecture-app", latencyMillis: 20, dir: dir)
        defer { second.finish(within: 0, interrupt: false) }
        let again = receiver.waitFor(seconds: 4) { $0.arrival > backAt && $0.level440 > 0.15 }
        let resumedSeen = (try? EventLog.wait(for: "audio_resumed", in: sender, seconds: 2)) != nil
        // The app attached again (checked below, with the order of every step).
        _ = try? EventLog.wait(for: "audio_app_attached", in: sender, count: 2, seconds: 3)
        kill(sender.pid, SIGINT)
        #expect(sender.finish(within: 15) == 130, "sender: \(sender.stderr)")
        let frames = receiver.stop()
        let packets = videoLog.stop().compactMap { d in d.rtp.map { (arrival: d.arrival, payloadType: $0.header.payloadType) } }

        // Video kept flowing while PulseAudio was away (10 fps, one packet per 64x64 frame).
        let outage = packets.filter { $0.payloadType == 96 && $0.arrival > killedAt && $0.arrival < restartAt }
        let expected = restartAt.timeIntervalSince(killedAt) * 10
        #expect(Double(outage.count) >= expected * 0.6, "\(outage.count) video packets during a \(restartAt.timeIntervalSince(killedAt)) s outage")
        #expect(packets.contains { $0.payloadType == 96 && $0.arrival > backAt })
        // No tone while the server was gone.
        #expect(!frames.contains { $0.arrival > killedAt.addingTimeInterval(0.2) && $0.arrival < backAt && $0.level440 > 0.05 })
        // Audio is back within 3 s of the server answering again.
        let back = try #require(again, "the tone did not come back: \(sender.stdout)")
        let delay = back.arrival.timeIntervalSince(backAt)
        #expect(delay < 3, "audio back \(delay) s after PulseAudio")
        // Each step was reported, in order.
        #expect(resumedSeen)
        let names = EventLog(sender).all.compactMap { e -> String? in
            let name = e["event"] as? String
            if name == "warning" { return e["kind"] as? String == "audio_source_lost" ? "audio_source_lost" : nil }
            return ["audio_reconnecting", "audio_resumed", "audio_app_attached"].contains(name ?? "") ? name : nil
        }
        let lost = try #require(names.firstIndex(of: "audio_source_lost"), "\(names)")
        #expect(names[..<lost] == ["audio_app_attached"], "\(names)")
        let resumed = try #require(names.firstIndex(of: "audio_resumed"), "\(names)")
        #expect(names[(lost + 1)..<resumed].count >= 2 && names[(lost + 1)..<resumed].allSatisfy { $0 == "audio_reconnecting" }, "\(names)")
        #expect(names[(resumed + 1)...].first == "audio_app_attached", "\(names)")
    }

    @Test func wholeOutputOfANamedSinkAndANamedMicrophone() throws {
        let dir = try makeTempDir()
        let video = try tinyVideo(dir: dir)
        let port = freeEvenPort()
        let receiver = try OpusRTPReceiver(port: port + 2)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", video, "--input-format", "nv12", "--input-size", "64x64", "--input-fps", "5",
            "--audio-output", "headset", "--mic", "mic2.monitor", "--mic-gain", "-6", "--duration", "60", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try EventLog.wait(for: "started", in: sender)
        // Two apps on the shared sink, one on the default sink; one tone into the named
        // microphone, one into the default microphone.
        let players = try [
            pulse.play(tone: 440, app: "lecture-app", device: "headset", dir: dir),
            pulse.play(tone: 2500, app: "chat-app", device: "headset", dir: dir),
            pulse.play(tone: 660, app: "elsewhere-app", device: "speakers", dir: dir),
            pulse.play(tone: 1000, app: "mic-feeder", device: "mic2", dir: dir),
            pulse.play(tone: 1500, app: "default-mic-feeder", device: "virtmic", dir: dir),
        ]
        defer { players.forEach { $0.finish(within: 0, interrupt: false) } }
        // Once all three are heard, take 1 s more.
        func present(_ f: Double, in frames: ArraySlice<OpusRTPReceiver.Frame>) -> Bool {
            amplitude(frames.flatMap(\.left), f) > 0.05
        }
        try waitUntil(seconds: 8, "440, 2500 and 1000 Hz in the stream") {
            let recent = receiver.snapshot().suffix(10)
            return recent.count == 10 && [440.0, 2500, 1000].allSatisfy { present($0, in: recent) }
        }
        let from = receiver.snapshot().count
        try waitUntil(seconds: 5, "1 s more of audio") { receiver.snapshot().count >= from + 50 }
        kill(sender.pid, SIGINT)
        #expect(sender.finish(within: 15) == 130, "sender: \(sender.stderr)")
        let frames = receiver.stop()
        let window = hann(frames[from..<(from + 50)].flatMap(\.left))
        let a440 = 2 * amplitude(window, 440), a2500 = 2 * amplitude(window, 2500), a1000 = 2 * amplitude(window, 1000)
        let a660 = 2 * amplitude(window, 660), a1500 = 2 * amplitude(window, 1500)
        #expect(abs(a440 - 0.25) < 0.05, "440 Hz (app on the shared sink) amplitude \(a440)")
        #expect(abs(a2500 - 0.25) < 0.05, "2500 Hz (other app on the shared sink) amplitude \(a2500)")
        let micDB = 20 * log10(a1000 / a440)
        #expect(abs(micDB - -6) <= 3, "named mic at \(micDB) dB relative to the output (asked -6)")
        #expect(20 * log10(max(a660, 1e-9) / a440) <= -40, "the default sink's app leaks in: \(a660)")
        #expect(20 * log10(max(a1500, 1e-9) / a440) <= -40, "the default microphone leaks in: \(a1500)")
        // The capture-to-send latency is measured (its size is for bench/audio.sh, not a test).
        let stats = EventLog(sender).events(named: "stats")
        let latency = try #require(stats.last?["audio_latency_ms_p50"] as? Double, "\(stats.last ?? [:])")
        #expect(latency > 0 && (stats.last?["audio_latency_ms_p95"] as? Double ?? 0) >= latency)
    }

    @Test func pauseSendsSilenceWithContinuousTimestampsAndResumeBringsTheToneBack() throws {
        let dir = try makeTempDir()
        let video = try tinyVideo(dir: dir)
        let port = freeEvenPort()
        let socket = "\(dir)/ctl.sock"
        let receiver = try OpusRTPReceiver(port: port + 2)
        // --audio-output without a name: the default sink's monitor.
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", video, "--input-format", "nv12", "--input-size", "64x64", "--input-fps", "5",
            "--audio-output", "--no-mic", "--control-socket", socket, "--duration", "60", "--json",
        ], dir: dir, name: "sender", environment: pulse.environment)
        try EventLog.wait(for: "started", in: sender)
        let player = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        defer { player.finish(within: 0, interrupt: false) }
        let tone: (OpusRTPReceiver.Frame) -> Bool = { $0.level440 > 0.15 }
        let first = try #require(receiver.waitFor(seconds: 5, tone), "the tone was never heard")
        try waitUntil(seconds: 5, "1 s of tone") { receiver.snapshot().last!.arrival > first.arrival.addingTimeInterval(1) }

        kill(sender.pid, SIGUSR1)  // pause
        let pausedAt = Date()
        try EventLog.wait(for: "paused", in: sender, seconds: 5)
        hold(1.5 - Date().timeIntervalSince(pausedAt), "paused for 1.5 s: silence meanwhile, and the RTP clock must keep time across it")
        let ctl = try Child(screenshareBinary(), ["ctl", "--socket", socket, "resume"], dir: dir, name: "ctl-resume")
        let resumedAt = Date()
        #expect(ctl.finish(within: 10) == 0, "\(ctl.stderr)")
        let back = receiver.waitFor(seconds: 3) { $0.arrival > resumedAt && tone($0) }
        if let back { try waitUntil(seconds: 5, "1 s of tone after resume") { receiver.snapshot().last!.arrival > back.arrival.addingTimeInterval(1) } }
        let stop = try Child(screenshareBinary(), ["ctl", "--socket", socket, "stop"], dir: dir, name: "ctl-stop")
        #expect(stop.finish(within: 10) == 0)
        #expect(sender.finish(within: 15) == 0, "sender: \(sender.stderr)")
        let frames = receiver.stop()

        // Paused (after the packets in flight): silence, the tone absent.
        let during = frames.filter { $0.arrival > pausedAt.addingTimeInterval(0.15) && $0.arrival < resumedAt }
        #expect(during.count >= 5, "only \(during.count) packets while paused")
        #expect(during.allSatisfy { $0.rms < 0.002 && $0.level440 < 0.002 },
                "sound while paused: \(during.map { String(format: "%.4f", $0.rms) })")
        // Resumed: the tone is back within 1 s.
        let b = try #require(back, "the tone did not come back after resume")
        #expect(b.arrival.timeIntervalSince(resumedAt) < 1, "tone back \(b.arrival.timeIntervalSince(resumedAt)) s after resume")

        // Timestamps: one SSRC clock, 960 ticks (20 ms) per frame, no packet lost; a step of more
        // than one frame only where DTX left silent frames out.
        for (a, b) in zip(frames, frames.dropFirst()) {
            #expect(b.sequence == a.sequence &+ 1, "sequence \(a.sequence) → \(b.sequence)")
            let step = b.timestamp &- a.timestamp
            #expect(step % 960 == 0 && step >= 960 && step < 48_000, "timestamp step \(step)")
            if step > 960 { #expect(a.rms < 0.002, "a gap of \(step) ticks after a frame that was not silent") }
            if tone(a) && tone(b) { #expect(step == 960) }
        }
        // ...and no jump: the timestamps keep time with the wall clock across the pause. (The
        // least-delayed packet of each stretch shows the offset; the sender is never early.)
        let t0 = frames[0].timestamp, a0 = frames[0].arrival
        func offset(_ f: OpusRTPReceiver.Frame) -> Double {
            f.arrival.timeIntervalSince(a0) - Double(f.timestamp &- t0) / 48_000
        }
        let before = frames.filter { $0.arrival < pausedAt }.map(offset).min()!
        let after = frames.filter { $0.arrival > b.arrival }.map(offset).min()!
        #expect(abs(after - before) <= 0.02, "the RTP clock moved \((before - after) * 1000) ms against the wall clock across the pause")
        let names = EventLog(sender).names.filter { ["paused", "resumed"].contains($0) }
        #expect(names == ["paused", "resumed"])
    }
}

/// A 64x64 grey NV12 frame: video that costs nothing, so the audio tests measure audio.
func tinyVideo(dir: String) throws -> String {
    let path = "\(dir)/tiny.nv12"
    try Data(repeating: 128, count: 64 * 64 * 3 / 2).write(to: URL(fileURLWithPath: path))
    return path
}

/// A private PulseAudio for one test: null sinks "speakers" (default) and "virtmic" (its
/// monitor is the default source), and two that are not defaults: "headset" (an output) and
/// "mic2" (its monitor is a second microphone). Listens on a fixed socket in its own directory
/// and writes no pid file, so it can be killed and started again where clients find it.
/// Stopped when the value goes away.
final class PrivatePulse {
    let dir: String
    let server: String
    private(set) var child: Child
    var environment: [String: String] { ["PULSE_SERVER": server] }

    init() throws {
        dir = try makeTempDir()
        server = "unix:\(dir)/native"
        try """
            load-module module-native-protocol-unix socket=\(dir)/native auth-anonymous=1
            load-module module-null-sink sink_name=speakers rate=48000 sink_properties=device.description=Speakers
            load-module module-null-sink sink_name=virtmic rate=48000 sink_properties=device.description=Virtual-microphone
            load-module module-null-sink sink_name=headset rate=48000 sink_properties=device.description=Headset
            load-module module-null-sink sink_name=mic2 rate=48000 sink_properties=device.description=Second-microphone
            set-default-sink speakers
            set-default-source virtmic.monitor
            """.write(toFile: "\(dir)/default.pa", atomically: true, encoding: .utf8)
        child = try Self.start(dir: dir)
        try waitUntilAnswering()
    }

    private static func start(dir: String) throws -> Child {
        try Child(which("pulseaudio"), [
            "--daemonize=no", "--exit-idle-time=-1", "--system=false", "--disallow-exit", "--use-pid-file=no", "-n",
            "-F", "\(dir)/default.pa",
        ], dir: dir, name: "pulseaudio-\(UUID().uuidString.prefix(4))", environment: [
            "HOME": dir, "XDG_CONFIG_HOME": dir, "PULSE_RUNTIME_PATH": "\(dir)/runtime", "PULSE_STATE_PATH": "\(dir)/state",
        ])
    }

    func waitUntilAnswering() throws {
        let deadline = Date().addingTimeInterval(10)
        while true {
            let probe = try Child(which("pactl"), ["info"], dir: dir, name: "pactl", environment: environment)
            if probe.finish(within: 5) == 0 { return }
            guard child.isRunning, Date() < deadline else { throw TestFailure("private PulseAudio did not start: \(child.stderr)") }
            usleep(50_000)
        }
    }

    /// Waits (bounded) until `app` has `count` record streams open on this server (`pactl list
    /// source-outputs`).
    func waitForRecordStreams(of app: String, count: Int, seconds: Double = 10) throws {
        var listing = ""
        try waitUntil(seconds: seconds, pollMillis: 50, "\(count) record streams of \(app); pactl: \(listing)") {
            let pactl = try Child(which("pactl"), ["list", "source-outputs"], dir: dir, name: "pactl-\(UUID().uuidString.prefix(6))",
                                  environment: environment)
            guard pactl.finish(within: 5) == 0 else { return false }
            listing = pactl.stdout
            return listing.components(separatedBy: "application.name = \"\(app)\"").count - 1 >= count
        }
    }

    /// The latency a sink reports (`pactl list sinks`), in microseconds; nil when it is not listed.
    /// A null sink reports how far ahead of now it has rendered: up to a whole block.
    func sinkLatencyMicros(_ sink: String) throws -> Int? {
        let pactl = try Child(which("pactl"), ["list", "sinks"], dir: dir, name: "pactl-\(UUID().uuidString.prefix(6))", environment: environment)
        guard pactl.finish(within: 5) == 0 else { return nil }
        // "Sink #3" ... "\tName: headset" ... "\tLatency: 1007451 usec, configured 2000000 usec"
        for block in pactl.stdout.components(separatedBy: "Sink #") {
            let lines = block.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            guard lines.contains("Name: \(sink)") else { continue }
            return lines.first { $0.hasPrefix("Latency: ") }.flatMap { Int($0.dropFirst("Latency: ".count).prefix { $0.isNumber }) }
        }
        return nil
    }

    /// Kills the server (SIGKILL, like a crash).
    func kill() { Glibc.kill(child.pid, SIGKILL); child.finish(within: 5, interrupt: false) }

    /// Starts it again on the same socket.
    func restart() throws {
        child = try Self.start(dir: dir)
        try waitUntilAnswering()
    }

    /// Plays a 0.25-amplitude sine (48 kHz stereo s16, 30 s) under an application name.
    /// - Parameter latencyMillis: the playback latency pacat asks for (default: its own, up to
    ///   2 s, which makes a null sink render 2 s blocks until a low-latency reader appears).
    func play(tone: Double, app: String, device: String? = nil, latencyMillis: Int? = nil, dir: String) throws -> Child {
        let path = "\(dir)/tone-\(Int(tone)).raw"
        if !FileManager.default.fileExists(atPath: path) {
            let seconds = 30
            var samples = [Int16](repeating: 0, count: 48_000 * seconds * 2)
            for i in 0..<(48_000 * seconds) {
                let v = Int16(0.25 * 32767 * sin(2 * Double.pi * tone * Double(i) / 48_000))
                samples[2 * i] = v
                samples[2 * i + 1] = v
            }
            try samples.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        }
        return try Child(which("pacat"), ["--raw", "--format=s16le", "--rate=48000", "--channels=2",
                                          "--property=application.name=\(app)"] + (device.map { ["--device=\($0)"] } ?? [])
                                          + (latencyMillis.map { ["--latency-msec=\($0)"] } ?? []) + [path],
                         dir: dir, name: "pacat-\(app)-\(UUID().uuidString.prefix(4))", environment: environment)
    }

    deinit {
        Glibc.kill(child.pid, SIGTERM)
        child.finish(within: 5, interrupt: false)
    }
}

/// Our Opus RTP arriving on a UDP port (a `UDPReceiver`), decoded with libopus in order of
/// arrival as the test reads it.
final class OpusRTPReceiver {
    struct Frame: Sendable {
        var arrival: Date
        var sequence: UInt16
        var timestamp: UInt32
        var marker: Bool
        var level440: Double
        /// The decoded left channel.
        var left: [Float]
        var rms: Double { left.isEmpty ? 0 : sqrt(left.reduce(0) { $0 + Double($1) * Double($1) } / Double(left.count)) }
    }
    private let udp: UDPReceiver
    private let decoder: OpusFrameDecoder
    private var frames: [Frame] = []
    private var datagramsRead = 0
    private var pcm = [Float](repeating: 0, count: 5760 * 2)

    init(port: UInt16) throws {
        udp = try UDPReceiver(port: port)
        decoder = try OpusFrameDecoder()
    }

    /// The frames received so far (decoding those that arrived since the last call).
    func snapshot() -> [Frame] {
        let new = udp.datagrams(from: datagramsRead)
        datagramsRead += new.count
        for d in new {
            guard let (header, payload) = d.rtp, header.payloadType == 111, !payload.isEmpty else { continue }
            let count = (try? payload.withUnsafeBytes { p in
                try pcm.withUnsafeMutableBufferPointer { try decoder.decode(p, into: $0) }
            }) ?? 0
            let left = stride(from: 0, to: count * 2, by: 2).map { pcm[$0] }
            frames.append(Frame(arrival: d.arrival, sequence: header.sequenceNumber, timestamp: header.timestamp, marker: header.marker,
                                level440: amplitude(left, 440), left: left))
        }
        return frames
    }

    /// Waits (bounded) until a received frame satisfies `condition`; returns it, or nil at the deadline.
    func waitFor(seconds: Double, _ condition: (Frame) -> Bool) -> Frame? {
        var found: Frame?
        try? waitUntil(seconds: seconds, "an Opus frame") {
            found = snapshot().first(where: condition)
            return found != nil
        }
        return found
    }

    /// Stops receiving and returns every frame received.
    func stop() -> [Frame] {
        udp.stop()
        return snapshot()
    }
}

/// Two different 64x64 NV12 frames: looped, every frame is a change, so video flows at the input rate.
func changingVideo(dir: String) throws -> String {
    let path = "\(dir)/changing.nv12"
    let size = 64 * 64 * 3 / 2
    try (Data(repeating: 60, count: size) + Data(repeating: 200, count: size)).write(to: URL(fileURLWithPath: path))
    return path
}

/// Interleaved s16 stereo → the left channel as floats (of the last `lastFrames` frames only,
/// when given: a file still being written is read from its end).
func readS16Stereo(_ path: String, lastFrames: Int? = nil) throws -> [Float] {
    let data: Data
    if let lastFrames {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        let size = try handle.seekToEnd() / 4 * 4
        try handle.seek(toOffset: size - min(size, UInt64(lastFrames * 4)))
        data = handle.readData(ofLength: Int(size) - Int(handle.offsetInFile))
    } else {
        data = try Data(contentsOf: URL(fileURLWithPath: path))
    }
    return data.withUnsafeBytes { raw in
        let s = raw.bindMemory(to: Int16.self)
        return stride(from: 0, to: s.count - 1, by: 2).map { Float(s[$0]) / 32768 }
    }
}

/// How many s16 stereo frames a file holds so far (0 when it does not exist yet).
func s16StereoFrames(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0) / 4
}

func hann(_ x: [Float]) -> [Float] {
    x.indices.map { i in x[i] * Float(0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(x.count))) }
}

/// The amplitude of one frequency (Goertzel).
func amplitude(_ x: [Float], _ f: Double, rate: Double = 48_000) -> Double {
    let w = 2 * Double.pi * f / rate, c = 2 * cos(w)
    var s1 = 0.0, s2 = 0.0
    for v in x { let s = Double(v) + c * s1 - s2; s2 = s1; s1 = s }
    return 2 * sqrt(max(s1 * s1 + s2 * s2 - c * s1 * s2, 0)) / Double(x.count)
}
