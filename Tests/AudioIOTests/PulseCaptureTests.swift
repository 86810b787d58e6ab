import AudioIO
import Foundation
import Logging
import Testing

/// Against the PulseAudio that Scripts/test starts ($PULSE_SERVER): null sink "speakers" (the
/// default sink) and "virtmic" (its monitor is the default source).
@Suite(.serialized) struct PulseCaptureTests {
    @Test func appTapHearsOnlyThatApplication() throws {
        let dir = NSTemporaryDirectory() + "pulse-capture-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let mixer = SharedMixer(AudioMixer(inputs: MixerSlot.count))
        var config = AudioCaptureConfig(program: .application(try AppMatcher("capture-test-shared")), mic: nil)
        config.programGainDecibels = 0
        let events = EventBox()
        let capture = try PulseCapture(config: config, mixer: mixer, logger: Logger(label: "test")) { events.add($0) }
        defer { capture.stop() }
        // The application starts only now: the capture, connected and subscribed to the
        // server's sink inputs when its init returned, finds it when it appears.
        let sharedApp = try Player(tone: 440, app: "capture-test-shared", dir: dir)
        let otherApp = try Player(tone: 2500, app: "capture-test-other", dir: dir)
        defer { sharedApp.stop(); otherApp.stop() }
        var pcm = [Float](repeating: 0, count: AudioMixer.frameSamples)
        var levels: [Double] = []
        var late: [Float] = []
        // 5 s of 20 ms frames. Until the tone is first heard, one a 20 ms tick (the onset is
        // measured in them); from then on each as soon as the capture has delivered it, waiting
        // up to 100 ms: a consumer that ticks by the wall clock on a loaded machine takes a frame
        // before its samples arrived (a CI run: 2 of 240 frames short) though none was lost. A
        // capture that stalls for longer still leaves the frame short.
        func buffered() -> Int {
            mixer.state.withLock { m in (MixerSlot.firstProgram..<MixerSlot.count).map { m.buffered(input: $0) }.max() ?? 0 }
        }
        var next = DispatchTime.now().uptimeNanoseconds
        var onsetSeen = false
        for _ in 0..<250 {
            next += 20_000_000
            if onsetSeen {
                let give = DispatchTime.now().uptimeNanoseconds + 100_000_000
                while buffered() < AudioMixer.frameLength, DispatchTime.now().uptimeNanoseconds < give { usleep(1000) }
            } else {
                let now = DispatchTime.now().uptimeNanoseconds
                if next > now { usleep(UInt32((next - now) / 1000)) }
            }
            pcm.withUnsafeMutableBufferPointer { p in _ = mixer.state.withLock { $0.mix(into: p) } }
            let left = stride(from: 0, to: pcm.count, by: 2).map { pcm[$0] }
            levels.append(goertzel(left, 440))
            onsetSeen = onsetSeen || levels.last! > 0.2
            if levels.count > 150 { late += left }
        }
        #expect(events.all.contains { if case .appAttached(_, "capture-test-shared", _, _) = $0 { return true } else { return false } })
        // Once heard (the first time within 2.5 s: a null sink renders 2 s blocks until the
        // capture's low-latency anchor takes effect), every 20 ms frame carries the tone at its level.
        let onset = try #require(levels.firstIndex { $0 > 0.2 }, "440 Hz never heard")
        #expect(onset < 140, "440 Hz first heard after \(onset * 20) ms")
        let after = levels[(onset + 1)...]
        let heard = after.filter { abs($0 - 0.25) < 0.03 }.count
        #expect(heard >= after.count - 1, "440 Hz heard in \(heard) of \(after.count) frames: \(levels.map { String(format: "%.2f", $0) })")
        // ...and the other application's tone is not there (2 s, Hann window: no leakage).
        let hann = late.indices.map { i in late[i] * Float(0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(late.count))) }
        let shared = goertzel(hann, 440), leak = goertzel(hann, 2500)
        #expect(20 * log10(shared / max(leak, 1e-12)) >= 60, "2500 Hz only \(20 * log10(shared / leak)) dB below 440 Hz")
    }
}

final class EventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [AudioCaptureEvent] = []
    func add(_ e: AudioCaptureEvent) { lock.lock(); events.append(e); lock.unlock() }
    var all: [AudioCaptureEvent] { lock.lock(); defer { lock.unlock() }; return events }
}

/// A `pacat` playing a sine (amplitude 0.25, 48 kHz stereo s16) under an application name.
final class Player {
    let process = Process()
    init(tone: Double, app: String, device: String? = nil, seconds: Int = 20, dir: String) throws {
        let path = "\(dir)/tone-\(Int(tone)).raw"
        var samples = [Int16](repeating: 0, count: 48_000 * seconds * 2)
        for i in 0..<(48_000 * seconds) {
            let v = Int16(0.25 * 32767 * sin(2 * Double.pi * tone * Double(i) / 48_000))
            samples[2 * i] = v
            samples[2 * i + 1] = v
        }
        try samples.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/pacat")
        process.arguments = ["--raw", "--format=s16le", "--rate=48000", "--channels=2", "--property=application.name=\(app)"]
            + (device.map { ["--device=\($0)"] } ?? []) + [path]
        try process.run()
    }
    func stop() { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
}

func goertzel(_ x: [Float], _ f: Double, rate: Double = 48_000) -> Double {
    let w = 2 * Double.pi * f / rate, c = 2 * cos(w)
    var s1 = 0.0, s2 = 0.0
    for v in x { let s = Double(v) + c * s1 - s2; s2 = s1; s1 = s }
    return 2 * sqrt(max(s1 * s1 + s2 * s2 - c * s1 * s2, 0)) / Double(x.count)
}
