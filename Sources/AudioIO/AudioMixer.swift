/// Mixes several 48 kHz stereo sources into 20 ms frames: per-source gain, sum, soft clip.
///
/// Pure logic: no C, no threads, no clock. Sources push interleaved stereo float samples in
/// chunks of any size (PulseAudio delivers whatever its fragment holds); `mix(into:)` is
/// called once per 20 ms tick and takes exactly 960 sample frames from each source that has
/// them. All storage is allocated in `init`; pushing and mixing never allocate.
///
/// Each source is a ring buffer with a small jitter margin: a source contributes only once it
/// holds a frame plus `primeFrames` (so a chunk arriving a little late does not cut the sound),
/// falls back to silence when it runs dry (and primes again), and drops its oldest samples
/// when it holds more than `maxLatencyFrames` (so latency cannot grow).
public struct AudioMixer: Sendable {
    public static let sampleRate = 48_000
    public static let channels = 2
    /// Sample frames (per channel) in one 20 ms output frame.
    public static let frameLength = 960
    /// Interleaved samples in one output frame.
    public static let frameSamples = frameLength * channels

    /// Counters for stats and tests.
    public struct Counters: Sendable, Equatable {
        /// Times a primed source ran dry in the middle of a frame.
        public var underruns = 0
        /// Sample frames dropped because a source ran ahead (or overflowed its buffer).
        public var droppedFrames = 0
        /// Output frames in which some sample hit the soft-clip knee.
        public var clippedFrames = 0
        public init() {}
    }

    private struct Input: Sendable {
        var ring: [Float]          // interleaved stereo, capacity * 2
        var read = 0               // in sample frames, modulo capacity
        var count = 0              // sample frames buffered
        var gain: Float = 1
        var primed = false
        var active = false
        /// Monotonic capture time (ns) of the sample just after the newest buffered one; 0: unknown.
        var captureEnd: UInt64 = 0
    }

    public let inputCount: Int
    public let capacityFrames: Int
    public let primeFrames: Int
    public let maxLatencyFrames: Int
    public private(set) var counters = Counters()
    /// When the oldest sample of the last mixed frame was captured (monotonic ns), over the
    /// sources that contributed and whose pushes carried a capture time; nil when unknown.
    public private(set) var lastFrameCaptureNanos: UInt64?
    private var inputs: [Input]

    /// - Parameters:
    ///   - inputs: how many sources can be mixed (slots 0..<inputs).
    ///   - primeFrames: jitter margin a source buffers beyond one frame before it is heard.
    ///   - maxLatencyFrames: most a source may hold after a mix; older samples are dropped.
    ///   - capacityFrames: ring size per source (more than `maxLatencyFrames` + a burst).
    public init(inputs: Int, primeFrames: Int = 480, maxLatencyFrames: Int = 4_800, capacityFrames: Int = 19_200) {
        precondition(inputs > 0 && primeFrames >= 0 && maxLatencyFrames >= primeFrames + Self.frameLength
                     && capacityFrames >= maxLatencyFrames + Self.frameLength, "inconsistent mixer sizes")
        inputCount = inputs
        self.capacityFrames = capacityFrames
        self.primeFrames = primeFrames
        self.maxLatencyFrames = maxLatencyFrames
        self.inputs = Array(repeating: Input(ring: Array(repeating: 0, count: capacityFrames * Self.channels)), count: inputs)
    }

    /// The linear factor of a gain in decibels: 10^(dB/20).
    public static func linearGain(decibels: Double) -> Float { Float(pow10(decibels / 20)) }

    /// Sets a source's gain in decibels (0 dB: unchanged; -6.02 dB: half the amplitude).
    public mutating func setGain(decibels: Double, input: Int) {
        inputs[input].gain = Self.linearGain(decibels: decibels)
    }

    public func gain(input: Int) -> Float { inputs[input].gain }

    /// Sample frames buffered for a source.
    public func buffered(input: Int) -> Int { inputs[input].count }

    /// Marks a source in use (its samples are mixed) or not (it is emptied and ignored).
    public mutating func setActive(_ active: Bool, input: Int) {
        inputs[input].active = active
        if !active { clear(input: input) }
    }

    public func isActive(input: Int) -> Bool { inputs[input].active }

    /// Forgets what a source has buffered (e.g. when its stream ends).
    public mutating func clear(input: Int) {
        inputs[input].read = 0
        inputs[input].count = 0
        inputs[input].primed = false
        inputs[input].captureEnd = 0
    }

    /// Appends interleaved stereo samples to a source. A trailing odd sample is ignored. When the
    /// ring is full, the oldest samples make room (counted as dropped).
    /// - Parameter capturedAtNanos: when the first of these samples was captured (monotonic ns),
    ///   if known; the mixer then knows the age of every sample it mixes (`lastFrameCaptureNanos`).
    public mutating func push(_ samples: UnsafeBufferPointer<Float>, input: Int, capturedAtNanos: UInt64? = nil) {
        guard inputs[input].active else { return }
        var frames = samples.count / Self.channels
        inputs[input].captureEnd = capturedAtNanos.map { $0 &+ Self.nanos(frames: frames) } ?? 0
        var src = 0
        let cap = capacityFrames
        if frames > cap {  // only the newest `cap` frames can be kept
            counters.droppedFrames += frames - cap
            src = (frames - cap) * Self.channels
            frames = cap
        }
        let overflow = inputs[input].count + frames - cap
        if overflow > 0 { discard(overflow, input: input) }
        var write = (inputs[input].read + inputs[input].count) % cap
        inputs[input].ring.withUnsafeMutableBufferPointer { ring in
            var left = frames
            while left > 0 {
                let run = min(left, cap - write)
                for i in 0..<(run * Self.channels) { ring[write * Self.channels + i] = samples[src + i] }
                src += run * Self.channels
                write = (write + run) % cap
                left -= run
            }
        }
        inputs[input].count += frames
    }

    private mutating func discard(_ frames: Int, input: Int) {
        let n = min(frames, inputs[input].count)
        inputs[input].read = (inputs[input].read + n) % capacityFrames
        inputs[input].count -= n
        counters.droppedFrames += n
    }

    /// Writes one 20 ms frame (960 sample frames, interleaved stereo) into `out`: the sum of the
    /// sources that have data, each times its gain, soft-clipped into (-1, 1). Silence when no
    /// source has data.
    /// - Returns: whether any source contributed.
    @discardableResult
    public mutating func mix(into out: UnsafeMutableBufferPointer<Float>) -> Bool {
        precondition(out.count >= Self.frameSamples, "a mix needs \(Self.frameSamples) samples")
        for i in 0..<Self.frameSamples { out[i] = 0 }
        var any = false
        let cap = capacityFrames
        lastFrameCaptureNanos = nil
        for n in 0..<inputCount where inputs[n].active {
            if !inputs[n].primed {
                guard inputs[n].count >= Self.frameLength + primeFrames else { continue }
                inputs[n].primed = true
            }
            if inputs[n].captureEnd != 0, inputs[n].count > 0 {
                let oldest = inputs[n].captureEnd &- Self.nanos(frames: inputs[n].count)
                lastFrameCaptureNanos = min(lastFrameCaptureNanos ?? oldest, oldest)
            }
            let take = min(Self.frameLength, inputs[n].count)
            if take < Self.frameLength {
                counters.underruns += 1
                inputs[n].primed = false
            }
            let gain = inputs[n].gain
            var read = inputs[n].read
            inputs[n].ring.withUnsafeBufferPointer { ring in
                var dst = 0
                var left = take
                while left > 0 {
                    let run = min(left, cap - read)
                    let base = read * Self.channels
                    for i in 0..<(run * Self.channels) { out[dst + i] += ring[base + i] * gain }
                    dst += run * Self.channels
                    read = (read + run) % cap
                    left -= run
                }
            }
            inputs[n].read = (inputs[n].read + take) % cap
            inputs[n].count -= take
            any = any || take > 0
            if inputs[n].count > maxLatencyFrames { discard(inputs[n].count - primeFrames, input: n) }
        }
        var clipped = false
        for i in 0..<Self.frameSamples {
            let x = out[i]
            if abs(x) > Self.knee {
                clipped = true
                out[i] = Self.softClip(x)
            }
        }
        if clipped { counters.clippedFrames += 1 }
        return any
    }

    /// The duration of `frames` sample frames at 48 kHz, in nanoseconds.
    @inline(__always)
    public static func nanos(frames: Int) -> UInt64 { UInt64(frames) * 1_000_000_000 / UInt64(sampleRate) }

    /// Below this magnitude samples pass unchanged; above it they bend smoothly towards ±1.
    public static let knee: Float = 0.8

    /// Soft clipping: identity up to `knee`, then `knee + (1 - knee)·tanh((|x| - knee)/(1 - knee))`,
    /// continuous with slope 1 at the knee and never beyond ±1 (no wrap-around, no hard edge).
    @inline(__always)
    public static func softClip(_ x: Float) -> Float {
        let m = abs(x)
        guard m > knee else { return x }
        let y = knee + (1 - knee) * tanhf((m - knee) / (1 - knee))
        return x < 0 ? -y : y
    }
}

#if canImport(Glibc)
import Glibc
private func pow10(_ x: Double) -> Double { Glibc.pow(10, x) }
#else
import FoundationEssentials
private func pow10(_ x: Double) -> Double { Foundation.pow(10, x) }
#endif
