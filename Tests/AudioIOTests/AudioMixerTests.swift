import AudioIO
import Testing

/// Interleaved stereo samples with the same value on both channels.
private func constant(_ value: Float, frames: Int) -> [Float] { Array(repeating: value, count: frames * 2) }

extension AudioMixer {
    /// Pushes an array (test convenience).
    mutating func push(_ samples: [Float], input: Int) {
        samples.withUnsafeBufferPointer { push($0, input: input) }
    }
    /// Mixes one frame into a new array (test convenience).
    mutating func mixFrame() -> (samples: [Float], any: Bool) {
        var out = [Float](repeating: .nan, count: AudioMixer.frameSamples)
        let any = out.withUnsafeMutableBufferPointer { mix(into: $0) }
        return (out, any)
    }
}

@Suite struct AudioMixerTests {
    @Test(arguments: [(0.0, 1.0), (-20.0, 0.1), (20.0, 10.0), (-40.0, 0.01), (-6.0, 0.501187233627), (6.0, 1.995262314969)])
    func decibelsToLinearGain(db: Double, linear: Double) {
        #expect(abs(Double(AudioMixer.linearGain(decibels: db)) - linear) <= linear * 1e-6)
    }

    @Test func theCaptureTimeOfEachMixedFrameFollowsTheSamples() {
        var m = AudioMixer(inputs: 2, primeFrames: 480)
        m.setActive(true, input: 0)
        m.setActive(true, input: 1)
        let t0: UInt64 = 5_000_000_000
        let push = { (m: inout AudioMixer, frames: Int, at: UInt64?, input: Int) in
            constant(0.1, frames: frames).withUnsafeBufferPointer { m.push($0, input: input, capturedAtNanos: at) }
        }
        push(&m, 480, t0, 0)                  // 10 ms captured at t0
        push(&m, 960, t0 + 10_000_000, 0)     // the next 20 ms
        _ = m.mixFrame()
        #expect(m.lastFrameCaptureNanos == t0)  // the frame starts with the first sample pushed
        push(&m, 960, t0 + 30_000_000, 0)
        _ = m.mixFrame()
        #expect(m.lastFrameCaptureNanos == t0 + 20_000_000)  // 960 samples later
        // A second source whose samples are older: the frame's oldest sample counts.
        push(&m, 1_440, t0 - 40_000_000, 1)
        _ = m.mixFrame()
        #expect(m.lastFrameCaptureNanos == t0 - 40_000_000)
        // Silence, or samples of unknown age: unknown.
        m.clear(input: 0)
        m.clear(input: 1)
        _ = m.mixFrame()
        #expect(m.lastFrameCaptureNanos == nil)
        push(&m, 1_440, nil, 0)
        _ = m.mixFrame()
        #expect(m.lastFrameCaptureNanos == nil)
    }

    @Test func silenceWhenNoSourceHasData() {
        var m = AudioMixer(inputs: 2)
        m.setActive(true, input: 0)
        let (out, any) = m.mixFrame()
        #expect(!any)
        #expect(out.allSatisfy { $0 == 0 })
        #expect(out.count == 1920)
    }

    @Test func inactiveSourcesAreIgnored() {
        var m = AudioMixer(inputs: 2, primeFrames: 0)
        m.push(constant(0.5, frames: 960), input: 1)  // never activated
        #expect(m.buffered(input: 1) == 0)
        #expect(m.mixFrame().samples.allSatisfy { $0 == 0 })
    }

    @Test func gainsApplyPerSourceAndSourcesSum() {
        var m = AudioMixer(inputs: 2, primeFrames: 0)
        m.setActive(true, input: 0)
        m.setActive(true, input: 1)
        m.setGain(decibels: -20, input: 0)
        m.setGain(decibels: 0, input: 1)
        m.push(constant(0.5, frames: 960), input: 0)
        m.push(constant(0.25, frames: 960), input: 1)
        let (out, any) = m.mixFrame()
        #expect(any)
        for x in out { #expect(abs(x - (0.05 + 0.25)) < 1e-6) }
    }

    @Test func loudSumsAreSoftClippedNeverWrapped() {
        var m = AudioMixer(inputs: 2, primeFrames: 0)
        m.setActive(true, input: 0)
        m.setActive(true, input: 1)
        m.setGain(decibels: 12, input: 0)
        // A full-scale ramp through ±1 on one source, a constant on the other: sums far past 1.
        var ramp = [Float](repeating: 0, count: 1920)
        for i in 0..<960 { let v = Float(i) / 480 - 1; ramp[2 * i] = v; ramp[2 * i + 1] = -v }
        m.push(ramp, input: 0)
        m.push(constant(0.9, frames: 960), input: 1)
        let out = m.mixFrame().samples
        #expect(out.allSatisfy { $0 >= -1 && $0 <= 1 })
        // Monotonic input stays monotonic (a wrap-around would jump from +1 to -1).
        let left = stride(from: 0, to: 1920, by: 2).map { out[$0] }
        for i in 1..<left.count { #expect(left[i] >= left[i - 1]) }
        #expect(left.last! > 0.99)
        #expect(m.counters.clippedFrames == 1)
        // Below the knee, samples pass unchanged; the curve is continuous at the knee.
        #expect(AudioMixer.softClip(0.5) == 0.5)
        #expect(AudioMixer.softClip(-0.8) == -0.8)
        #expect(abs(AudioMixer.softClip(0.8001) - 0.8001) < 1e-4)
        #expect(AudioMixer.softClip(100) <= 1 && AudioMixer.softClip(-100) >= -1 && AudioMixer.softClip(.infinity) <= 1)
    }

    @Test func unevenChunksComeOutAsExactContinuousFrames() {
        var m = AudioMixer(inputs: 1, primeFrames: 480)
        m.setActive(true, input: 0)
        // A counter signal (left = n, right = -n, scaled small) pushed in uneven chunks.
        let total = 960 * 12
        var signal = [Float](repeating: 0, count: total * 2)
        for n in 0..<total { signal[2 * n] = Float(n) * 1e-5; signal[2 * n + 1] = -Float(n) * 1e-5 }
        let chunks = [1, 7, 333, 441, 1000, 2, 960, 479, 481, 1500, 3000]
        var offset = 0
        var mixed: [Float] = []
        for c in chunks {
            let n = min(c, total - offset)
            m.push(Array(signal[(2 * offset)..<(2 * (offset + n))]), input: 0)
            offset += n
            if m.buffered(input: 0) >= 960 + 480 || !mixed.isEmpty, m.buffered(input: 0) >= 960 {
                mixed += m.mixFrame().samples
            }
        }
        while m.buffered(input: 0) >= 960 { mixed += m.mixFrame().samples }
        #expect(mixed.count % 1920 == 0 && mixed.count >= 1920 * 8)  // 8204 frames pushed
        // Exactly the input, in order, with nothing lost or repeated.
        #expect(mixed == Array(signal[0..<mixed.count]))
        #expect(m.counters.underruns == 0 && m.counters.droppedFrames == 0)
    }

    @Test func aSourceIsHeardOnlyOnceItHasAFramePlusTheMargin() {
        var m = AudioMixer(inputs: 1, primeFrames: 480)
        m.setActive(true, input: 0)
        m.push(constant(0.5, frames: 1000), input: 0)
        #expect(!m.mixFrame().any)                       // 1000 < 960 + 480: still priming
        m.push(constant(0.5, frames: 500), input: 0)
        #expect(m.mixFrame().samples.allSatisfy { $0 == 0.5 })   // primed
        // 540 left: a short frame, padded with silence, counted as an underrun.
        let out = m.mixFrame().samples
        #expect(out[0..<1080].allSatisfy { $0 == 0.5 } && out[1080...].allSatisfy { $0 == 0 })
        #expect(m.counters.underruns == 1)
        #expect(!m.mixFrame().any)                       // priming again
    }

    @Test func latencyIsBoundedWhenASourceRunsAhead() {
        var m = AudioMixer(inputs: 1, primeFrames: 480, maxLatencyFrames: 4_800, capacityFrames: 9_600)
        m.setActive(true, input: 0)
        m.push(constant(0.1, frames: 20_000), input: 0)  // more than the ring holds
        #expect(m.buffered(input: 0) == 9_600)
        _ = m.mixFrame()
        #expect(m.buffered(input: 0) == 480)
        #expect(m.counters.droppedFrames == 20_000 - 960 - 480)
    }

    @Test func deactivatingASourceForgetsItsSamples() {
        var m = AudioMixer(inputs: 1, primeFrames: 0)
        m.setActive(true, input: 0)
        m.push(constant(0.3, frames: 960), input: 0)
        m.setActive(false, input: 0)
        m.setActive(true, input: 0)
        #expect(!m.mixFrame().any)
    }
}

@Suite struct AppMatcherTests {
    @Test func matchesNameOrBinaryWithoutCaseAndPid() throws {
        let byName = try AppMatcher("Lecture-App")
        #expect(byName.matches(applicationName: "lecture-app", binary: "pacat", pid: "10"))
        #expect(byName.matches(applicationName: "x", binary: "LECTURE-APP", pid: "10"))
        #expect(!byName.matches(applicationName: "lecture-app-2", binary: "pacat", pid: "10"))
        #expect(!byName.matches(applicationName: nil, binary: nil, pid: nil))
        let byPid = try AppMatcher("pid:42")
        #expect(byPid.matches(applicationName: "a", binary: "b", pid: "42"))
        #expect(!byPid.matches(applicationName: "pid:42", binary: "b", pid: "421"))
        #expect(throws: AudioError.self) { try AppMatcher("pid:x") }
        #expect(throws: AudioError.self) { try AppMatcher("  ") }
    }
}
