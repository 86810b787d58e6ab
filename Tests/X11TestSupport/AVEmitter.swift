internal import CPulse
import CX11
import Foundation
import Synchronization

/// The "source app" of an audio/video sync test: a black X window and a PulseAudio stream of
/// silence that, about once a `period`, beep and flash together.
///
/// Each event is a beep (a cosine burst, so its first sample is already loud) in the audio and a
/// white window for `flashMillis`. The gaps between events follow `intervals` (in periods, over
/// and over; uneven by default, so a flash can be told from its neighbours' beeps even when
/// sound and picture are more than half a period apart: see `AVSyncReport`). The audio is a fixed
/// function of the stream position: the k-th beep starts at frame `first + start(k)`, `first`
/// being `firstEvent` after the frame
/// written when the stream was first seen playing (a null sink that has been idle starts a new
/// stream only when the block it rendered ahead, up to 2 s, has played out). The flash is drawn
/// at the instant the sink plays that frame, found from PulseAudio's timing snapshots of the
/// playback stream (see `PlaybackClock`), plus `videoDelayMillis` (0 for a true source; non-zero
/// to prove the measurement can fail).
///
/// Threads: PulseAudio's mainloop writes the audio on request; one flash thread draws (it is the
/// only user of the X connection once started).
public final class AVEmitter: @unchecked Sendable {  // X: the flash thread only; PA: the mainloop lock; the rest: `state`
    public struct Configuration: Sendable {
        /// X display (nil: $DISPLAY).
        public var display: String?
        public var title = "av-emitter"
        public var x = 0, y = 0, width = 320, height = 240
        /// PulseAudio server (nil: $PULSE_SERVER) and sink (nil: the default one).
        public var pulseServer: String?
        public var sink: String?
        /// The stream's `application.name` (what `screenshare start --audio-app` matches).
        public var applicationName = "av-emitter"
        public var period = 1.0
        /// The gaps between events, in periods, repeated. With the default ones (found by a search),
        /// flashes matched to beeps 1 to 6 events away line up (within 0.1 period) for at most a
        /// quarter of them; the right events line up for all.
        public var intervals = [0.96, 0.9, 0.78, 1.1, 1.29, 1.46, 1.45, 0.71]
        /// Time from the stream playing to the first event, seconds.
        public var firstEvent = 0.3
        public var beepMillis = 60
        public var beepFrequency = 1000.0
        public var beepAmplitude: Float = 0.5
        public var flashMillis = 200
        /// White noise under the beeps (0: digital silence, which an Opus sender may not send at
        /// all: DTX).
        public var noiseAmplitude: Float = 0
        /// The target length of the server-side buffer (tlength): what is queued ahead of the sink.
        public var latencyMillis = 20
        /// Draws each flash this much after its beep is played (negative: before).
        public var videoDelayMillis = 0.0

        public init(display: String? = nil, pulseServer: String? = nil, sink: String? = nil) {
            self.display = display
            self.pulseServer = pulseServer
            self.sink = sink
        }
    }

    /// One beep-and-flash, CLOCK_MONOTONIC nanoseconds.
    public struct Event: Sendable, Equatable {
        public var index: Int
        /// When the sink plays the beep's first sample (the estimate the flash was aimed by).
        public var beepNanos: UInt64
        /// `beepNanos` + `videoDelayMillis`: when the flash was to appear.
        public var intendedNanos: UInt64
        /// When the white fill had been done by the X server (XSync returned).
        public var drawnNanos: UInt64
    }

    public let config: Configuration
    private let display: OpaquePointer
    private let window: Window
    private let white: GC
    private let black: GC

    private struct State {
        var clock = PlaybackClock()
        /// The first beep's frame: set when the clock first has an origin.
        var firstFrame: Int?
        var events: [Event] = []
        var missed = 0
        var underflows = 0
    }
    private let state = Mutex(State())
    private let running = Atomic<Bool>(false)
    private let flashDone = DispatchSemaphore(value: 0)
    private var pulse: PulseProbeConnection?
    private var stream: OpaquePointer?
    /// Frames written so far (mainloop lock).
    private var written = 0
    /// Where each event of a cycle of `intervals` starts, frames; the last entry is the cycle's length.
    private let starts: [Int]
    private static let rate = 48_000

    /// Opens the window (black, mapped, waited for). Nothing is played until `start`.
    public init(_ config: Configuration) throws {
        precondition(!config.intervals.isEmpty && config.intervals.allSatisfy { $0 > 0 }, "intervals must be positive")
        self.config = config
        var sum = 0.0
        starts = [0] + config.intervals.map { sum += $0; return Int((sum * config.period * Double(Self.rate)).rounded()) }
        let name = config.display ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
        guard let d = XOpenDisplay(name) else { throw TestFailure("AVEmitter: cannot open display \(name)") }
        display = d
        let screen = cx11_default_screen(d)
        let root = cx11_root_window(d, screen)
        window = XCreateSimpleWindow(d, root, Int32(config.x), Int32(config.y), UInt32(config.width), UInt32(config.height), 0, 0, 0)
        XStoreName(d, window, config.title)
        XSelectInput(d, window, StructureNotifyMask)
        white = XCreateGC(d, window, 0, nil)
        XSetForeground(d, white, 0xFFFFFF)
        black = XCreateGC(d, window, 0, nil)
        XSetForeground(d, black, 0)
        XMapRaised(d, window)
        XSync(d, 0)
        var event = XEvent()
        let deadline = monotonicNanos() + 5_000_000_000
        while XCheckTypedWindowEvent(d, window, MapNotify, &event) == 0 {
            guard monotonicNanos() < deadline else { throw TestFailure("AVEmitter: window never mapped") }  // deinit cleans up
            usleep(2_000)
        }
        fill(black)
    }

    deinit {
        stop()
        XFreeGC(display, white)
        XFreeGC(display, black)
        XDestroyWindow(display, window)
        XSync(display, 0)
        XCloseDisplay(display)
    }

    /// The window's X id (for `screenshare start --window`).
    public var windowID: UInt { UInt(window) }

    /// Connects to PulseAudio, starts the stream and the flash thread.
    /// - Throws: `TestFailure` naming PulseAudio's reason.
    public func start() throws {
        guard !running.load(ordering: .relaxed) else { return }
        let pulse = try PulseProbeConnection(server: config.pulseServer, name: config.applicationName)
        self.pulse = pulse
        try pulse.withLock {
            var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.rate), channels: 2)
            guard let s = pa_stream_new(pulse.context, "av-emitter beeps", &spec, nil) else {
                throw TestFailure("AVEmitter: cannot create a stream: \(pulse.lastError)")
            }
            stream = s
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_stream_set_write_callback(s, { s, n, ud in
                Unmanaged<AVEmitter>.fromOpaque(ud!).takeUnretainedValue().write(s!, bytes: n)
            }, me)
            pa_stream_set_underflow_callback(s, { _, ud in
                Unmanaged<AVEmitter>.fromOpaque(ud!).takeUnretainedValue().state.withLock { $0.underflows += 1; $0.clock.reset() }
            }, me)
            let bytesPerMs = UInt32(Self.rate / 1000 * 8)
            var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: bytesPerMs * UInt32(config.latencyMillis),
                                      prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
            guard pa_stream_connect_playback(s, config.sink, &attr, PA_STREAM_ADJUST_LATENCY, nil, nil) >= 0 else {
                throw TestFailure("AVEmitter: cannot play to \(config.sink ?? "the default sink"): \(pulse.lastError)")
            }
            try pulse.waitReady(s, what: "playback to \(config.sink ?? "the default sink")")
            pulse.startTimingSnapshots(of: s) { [weak self] in self?.snapshot($0) }
        }
        running.store(true, ordering: .relaxed)
        let t = Thread { [self] in flashLoop(); flashDone.signal() }
        t.name = "av-emitter-flash"
        t.start()
    }

    /// Stops the flash thread and the stream (idempotent) and returns the events drawn.
    @discardableResult
    public func stop() -> [Event] {
        if running.exchange(false, ordering: .relaxed) { flashDone.wait() }
        if let pulse {
            pulse.withLock {
                pulse.stopTimingSnapshots()
                if let stream {
                    pa_stream_set_write_callback(stream, nil, nil)
                    pa_stream_set_underflow_callback(stream, nil, nil)
                    pa_stream_disconnect(stream)
                    pa_stream_unref(stream)
                }
            }
            stream = nil
            pulse.close()
            self.pulse = nil
        }
        return events
    }

    public var events: [Event] { state.withLock { $0.events } }
    /// Events whose instant had passed before the flash thread got to them (not drawn).
    public var missed: Int { state.withLock { $0.missed } }
    /// Times the playback stream ran dry (the clock restarts after each).
    public var underflows: Int { state.withLock { $0.underflows } }

    // MARK: - Audio (mainloop thread, lock held)

    /// Where event k starts, frames after the first one.
    private func start(_ k: Int) -> Int {
        let n = starts.count - 1
        return k / n * starts[n] + starts[k % n]
    }

    /// How far `frame` (frames after the first event's start) is into its event.
    private func into(_ frame: Int) -> Int {
        let r = frame % starts[starts.count - 1]
        return r - starts[starts.lastIndex { $0 <= r }!]
    }

    private func write(_ s: OpaquePointer, bytes: Int) {
        var left = bytes
        while left > 0 {
            var data: UnsafeMutableRawPointer?
            var n = left
            guard pa_stream_begin_write(s, &data, &n) >= 0, let data, n > 0 else { return }
            let frames = n / 8
            let out = data.bindMemory(to: Float.self, capacity: frames * 2)
            let beepFrames = config.beepMillis * Self.rate / 1000
            let firstFrame = state.withLock { $0.firstFrame } ?? Int.max
            let w = 2 * Double.pi * config.beepFrequency / Double(Self.rate)
            for i in 0..<frames {
                var v = config.noiseAmplitude == 0 ? 0 : Float.random(in: -config.noiseAmplitude...config.noiseAmplitude)
                if written + i >= firstFrame {
                    let into = into(written + i - firstFrame)
                    if into < beepFrames { v += config.beepAmplitude * Float(cos(w * Double(into))) }
                }
                out[2 * i] = v
                out[2 * i + 1] = v
            }
            pa_stream_write(s, data, frames * 8, nil, 0, PA_SEEK_RELATIVE)
            written += frames
            left -= frames * 8
        }
    }

    /// Each timing snapshot (every 20 ms, `PulseProbeConnection.startTimingSnapshots`).
    private func snapshot(_ info: pa_timing_info) {
        guard info.read_index_corrupt == 0, info.playing != 0 else { return }
        // The sink plays read_index sink_usec after the snapshot (sink_usec: what the sink and the
        // sink input hold that it has not played yet), and each frame 1/rate after the one before.
        let at = monotonicNanos(fromWallClock: info.timestamp)
        let origin = at + Int64(info.sink_usec) * 1000 - Int64(info.read_index) / 8 * 1_000_000_000 / Int64(Self.rate)
        let lead = Int((config.firstEvent * Double(Self.rate)).rounded())
        state.withLock {
            $0.clock.add(origin: origin)
            if $0.firstFrame == nil && $0.clock.origin != nil { $0.firstFrame = written + lead }
        }
    }

    // MARK: - Video (flash thread)

    private func fill(_ gc: GC) {
        XFillRectangle(display, window, gc, 0, 0, UInt32(config.width), UInt32(config.height))
        XSync(display, 0)
    }

    /// Sleeps until `nanos`, waking at least every 20 ms to see whether it should stop.
    /// - Returns: false when stopped.
    private func nap(until nanos: UInt64) -> Bool {
        while running.load(ordering: .relaxed) {
            let now = monotonicNanos()
            if now >= nanos { return true }
            sleepUntil(min(nanos, now + 20_000_000))
        }
        return false
    }

    private func flashLoop() {
        var k = 0
        let delay = Int64(config.videoDelayMillis * 1e6)
        while running.load(ordering: .relaxed) {
            let (origin, first) = state.withLock { ($0.clock.origin, $0.firstFrame) }
            guard let origin, let first else {
                _ = nap(until: monotonicNanos() + 5_000_000)
                continue
            }
            let frame = first + start(k)
            let beep = origin + Int64(frame) * 1_000_000_000 / Int64(Self.rate)
            let target = beep + delay
            let now = Int64(monotonicNanos())
            if target < now - 5_000_000 {
                state.withLock { $0.missed += 1 }
                k += 1
                continue
            }
            // Aim again 30 ms ahead, with the freshest snapshots; then sleep to the instant.
            if target - now > 30_000_000 {
                _ = nap(until: UInt64(target - 30_000_000))
                continue
            }
            guard nap(until: UInt64(max(target, 0))) else { break }
            fill(white)
            let drawn = monotonicNanos()
            state.withLock {
                $0.events.append(Event(index: k, beepNanos: UInt64(beep), intendedNanos: UInt64(target), drawnNanos: drawn))
            }
            _ = nap(until: UInt64(target) + UInt64(config.flashMillis) * 1_000_000)
            fill(black)
            k += 1
        }
    }
}

/// Where a playback stream's frame 0 is (or would be) played, from timing snapshots: each one
/// gives an estimate; the median of the last few since the stream last ran dry is the answer.
/// (After an underflow the stream resumes later than its position says, so older estimates are
/// thrown away.)
struct PlaybackClock {
    private var recent: [Int64] = []
    static let window = 9

    mutating func add(origin: Int64) {
        recent.append(origin)
        if recent.count > Self.window { recent.removeFirst(recent.count - Self.window) }
    }

    mutating func reset() { recent.removeAll() }

    /// Nanoseconds (CLOCK_MONOTONIC) when frame 0 is played; nil until 3 snapshots came.
    var origin: Int64? { recent.count >= 3 ? median(recent) : nil }
}
