import Foundation
import OpusCodec
import RTP
import Synchronization
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
        try SessionDescription(destination: "127.0.0.1", videoPort: port, framerate: 15, audioPort: port + 2).render()
            .write(toFile: sdp, atomically: true, encoding: .utf8)
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
        try waitForEvent("started", in: sender)
        usleep(300_000)
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
        #expect(sender.stdout.contains("\"audio_app_attached\""), "\(sender.stdout)")
        #expect((try stoppedEvent(sender.stdout)["audio_packets_sent"] as? Int ?? 0) > 150)
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
        try waitForEvent("started", in: sender)
        usleep(300_000)
        let first = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        // Wait until it is heard. (The first time can take up to 2 s: a null sink renders 2 s
        // blocks until the capture's low-latency anchor takes effect.)
        let deadline = Date().addingTimeInterval(4)
        while !receiver.snapshot().contains(where: { $0.level440 > 0.15 }) && Date() < deadline { usleep(20_000) }
        usleep(300_000)
        first.finish(within: 0, interrupt: false)  // SIGKILL: the app vanishes
        let stoppedAt = Date()
        usleep(1_200_000)
        let restartedAt = Date()
        let second = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        second.finish(within: 0, interrupt: false)
        let frames = receiver.stop()

        let attached = sender.stdout.split(separator: "\n").filter { $0.contains("\"audio_app_attached\"") }
        #expect(attached.count == 2, "\(sender.stdout)")
        #expect(sender.stdout.contains("\"audio_app_detached\""))
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
        #expect(implicit.stdout.contains("\"audio_unavailable\""))
        #expect((try stoppedEvent(implicit.stdout)["frames_sent"] as? Int ?? 0) > 0)
    }
}

/// A 64x64 grey NV12 frame: video that costs nothing, so the audio tests measure audio.
func tinyVideo(dir: String) throws -> String {
    let path = "\(dir)/tiny.nv12"
    try Data(repeating: 128, count: 64 * 64 * 3 / 2).write(to: URL(fileURLWithPath: path))
    return path
}

/// A private PulseAudio for one test: null sinks "speakers" (default) and "virtmic" (its
/// monitor is the default source). Stopped when the value goes away.
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
            load-module module-null-sink sink_name=speakers rate=48000
            load-module module-null-sink sink_name=virtmic rate=48000
            set-default-sink speakers
            set-default-source virtmic.monitor
            """.write(toFile: "\(dir)/default.pa", atomically: true, encoding: .utf8)
        child = try Self.start(dir: dir)
        try waitUntilAnswering()
    }

    private static func start(dir: String) throws -> Child {
        try Child(which("pulseaudio"), [
            "--daemonize=no", "--exit-idle-time=-1", "--system=false", "--disallow-exit", "-n", "-F", "\(dir)/default.pa",
        ], dir: dir, name: "pulseaudio", environment: [
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

    /// Kills the server (SIGKILL, like a crash).
    func kill() { Glibc.kill(child.pid, SIGKILL); child.finish(within: 5, interrupt: false) }

    /// Starts it again on the same socket.
    func restart() throws {
        child = try Self.start(dir: dir)
        try waitUntilAnswering()
    }

    /// Plays a 0.25-amplitude sine (48 kHz stereo s16, 30 s) under an application name.
    func play(tone: Double, app: String, device: String? = nil, dir: String) throws -> Child {
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
                                          "--property=application.name=\(app)"] + (device.map { ["--device=\($0)"] } ?? []) + [path],
                         dir: dir, name: "pacat-\(app)-\(UUID().uuidString.prefix(4))", environment: environment)
    }

    deinit {
        Glibc.kill(child.pid, SIGTERM)
        child.finish(within: 5, interrupt: false)
    }
}

/// Receives our Opus RTP on a UDP port and decodes each packet with libopus as it arrives.
final class OpusRTPReceiver: @unchecked Sendable {
    struct Frame: Sendable {
        var arrival: Date
        var sequence: UInt16
        var level440: Double
    }
    // `frames` is guarded by its Mutex; `fd` is immutable; `running` is atomic.
    private let fd: Int32
    private let frames = Mutex<[Frame]>([])
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { throw TestFailure("cannot bind UDP port \(port)") }
        let decoder = try OpusFrameDecoder()
        let box = UncheckedDecoder(decoder)
        Thread { [self] in receiveLoop(box.decoder) }.start()
    }

    private func receiveLoop(_ decoder: OpusFrameDecoder) {
        var buffer = [UInt8](repeating: 0, count: 2000)
        var pcm = [Float](repeating: 0, count: 5760 * 2)
        while running.load(ordering: .relaxed) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) > 0 else { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 12, buffer[1] & 0x7F == 111 else { continue }
            let seq = UInt16(buffer[2]) << 8 | UInt16(buffer[3])
            let count = (try? buffer.withUnsafeBytes { b in
                try pcm.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: b[12..<n]), into: $0) }
            }) ?? 0
            let left = stride(from: 0, to: count * 2, by: 2).map { pcm[$0] }
            frames.withLock { $0.append(Frame(arrival: Date(), sequence: seq, level440: amplitude(left, 440))) }
        }
        finished.signal()
    }

    /// The frames received so far.
    func snapshot() -> [Frame] { frames.withLock { $0 } }

    /// Stops receiving and returns every frame received.
    func stop() -> [Frame] {
        running.store(false, ordering: .relaxed)
        finished.wait()
        close(fd)
        return frames.withLock { $0 }
    }
}

private struct UncheckedDecoder: @unchecked Sendable {
    // Handed to the receive thread, which is its only user from then on.
    let decoder: OpusFrameDecoder
    init(_ d: OpusFrameDecoder) { decoder = d }
}

/// Interleaved s16 stereo → the left channel as floats.
func readS16Stereo(_ path: String) throws -> [Float] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return data.withUnsafeBytes { raw in
        let s = raw.bindMemory(to: Int16.self)
        return stride(from: 0, to: s.count - 1, by: 2).map { Float(s[$0]) / 32768 }
    }
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
