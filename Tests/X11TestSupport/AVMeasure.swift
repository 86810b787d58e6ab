internal import CPulse
import CX11
import Foundation
import Synchronization

/// The "eyes and ears" of an audio/video sync test: when a region of an X window turns bright
/// (flash onsets) and when a PulseAudio source carries a beep's first sample as the sink played
/// it (beep onsets), both on CLOCK_MONOTONIC.
///
/// Video: XGetImage of a small region every `pollMillis`; an onset is the midpoint between the
/// last dark and the first bright poll (each poll timed at the middle of its round trip).
///
/// Audio: a record stream with small fragments. The k-th frame it delivers was played at
/// `origin + k / rate`; `origin` comes from PulseAudio timing snapshots (every 20 ms; the median
/// of those within a second of the beep):
///
///     position played at the snapshot = write_index + source_usec − sink_usec
///
/// write_index: what the server had queued for this stream; source_usec: what was on its way to
/// that queue; sink_usec (a monitor only): what the sink has rendered but not yet played. This is
/// PulseAudio's own accounting (`pa_stream_get_time`), without the transport estimate, and it can
/// put the played position *behind* what has been delivered: a null sink renders a block ahead
/// (its configured latency, the smallest any of its streams asked for, 2 s if none did) and its
/// monitor passes the block on at once (a monitor's source output holds back what the sink may
/// still rewind, but module-null-sink advances its clock only after rendering, so it never holds
/// anything). The latency of such a stream is negative; `pa_simple_get_latency` returns 0 instead.
/// A sink rewind (a stream joining or leaving) renders some frames again, and the monitor passes
/// them on again: positions jump, which is why only snapshots near each beep are used.
public final class AVMeasure: @unchecked Sendable {  // X: the poll thread only; PA: the mainloop lock; results: `results`
    public struct Configuration: Sendable {
        /// X display (nil: $DISPLAY) and window (nil: the root window, unless `windowTitle`).
        public var display: String?
        public var window: UInt?
        /// Watch the first window whose name contains this, once it appears (it need not exist at
        /// `start`: start listening before the app being watched opens its window).
        public var windowTitle: String?
        /// The region's top-left corner in the window (nil: centred).
        public var x: Int?, y: Int?
        public var regionSize = 16
        public var pollMillis = 1.0
        /// Mean luma (0–255) above which the region is bright; dark again below it minus 32.
        public var brightLuma = 128.0
        /// PulseAudio server (nil: $PULSE_SERVER) and the source to record, e.g. "speakers.monitor".
        public var pulseServer: String?
        public var source: String
        public var fragmentMillis = 5
        /// A beep starts at the first sample this loud after at least `quietMillis` below it.
        public var audioThreshold: Float = 0.2
        public var quietMillis = 200

        public init(display: String? = nil, window: UInt? = nil, windowTitle: String? = nil, pulseServer: String? = nil, source: String) {
            self.display = display
            self.window = window
            self.windowTitle = windowTitle
            self.pulseServer = pulseServer
            self.source = source
        }
    }

    public let config: Configuration
    private let display: OpaquePointer
    /// The window watched (poll thread; nil until a window titled `windowTitle` is found).
    private var drawable: Window?

    private struct Results {
        var flashes: [UInt64] = []
        var flashUncertainty: [UInt64] = []
        /// Beep onsets as record-stream frames, with the time their data arrived.
        var beepFrames: [(frame: Int, arrival: UInt64, pulseLatencyEstimate: Int64?)] = []
        /// Timing snapshots: when, and where frame 0 was played (ns, CLOCK_MONOTONIC).
        var origins: [(at: Int64, origin: Int64)] = []
        /// Data arrivals: when, and the first frame that came (one per read callback).
        var arrivals: [(at: Int64, first: Int)] = []
        var polls = 0
        var pollErrors = 0
    }
    private let results = Mutex(Results())
    private let running = Atomic<Bool>(false)
    private let pollDone = DispatchSemaphore(value: 0)
    private var pulse: PulseProbeConnection?
    private var stream: OpaquePointer?
    // Mainloop thread only (lock held).
    private var frames = 0
    private var quiet = 0
    private static let rate = 48_000
    /// Bounds on what is kept (several minutes at the default rates).
    private static let keep = 60_000

    /// Opens the X connection (the region is checked at once, unless found by title later).
    /// Nothing is measured until `start`.
    public init(_ config: Configuration) throws {
        self.config = config
        let name = config.display ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
        guard let d = XOpenDisplay(name) else { throw TestFailure("AVMeasure: cannot open display \(name)") }
        display = d
        cx11_install_error_handler()  // a window going away must not end the test process
        if let window = config.window {
            drawable = Window(window)
        } else if config.windowTitle == nil {
            drawable = cx11_root_window(d, cx11_default_screen(d))
        }
        if let drawable {
            guard let at = region(), luma(x: at.x, y: at.y) != nil else {
                throw TestFailure("AVMeasure: cannot read the region of window \(drawable) on \(name)")
            }
        }
    }

    deinit {
        stop()
        XCloseDisplay(display)
    }

    /// Starts recording and polling.
    /// - Throws: `TestFailure` naming PulseAudio's reason.
    public func start() throws {
        guard !running.load(ordering: .relaxed) else { return }
        let pulse = try PulseProbeConnection(server: config.pulseServer, name: "av-measure")
        self.pulse = pulse
        try pulse.withLock {
            var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.rate), channels: 2)
            guard let s = pa_stream_new(pulse.context, "av-measure", &spec, nil) else {
                throw TestFailure("AVMeasure: cannot create a stream: \(pulse.lastError)")
            }
            stream = s
            let me = Unmanaged.passUnretained(self).toOpaque()
            pa_stream_set_read_callback(s, { s, _, ud in
                Unmanaged<AVMeasure>.fromOpaque(ud!).takeUnretainedValue().read(s!)
            }, me)
            let fragment = UInt32(Self.rate / 1000 * 8 * config.fragmentMillis)
            var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max, fragsize: fragment)
            let flags = PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
            guard pa_stream_connect_record(s, config.source, &attr, pa_stream_flags_t(rawValue: flags)) >= 0 else {
                throw TestFailure("AVMeasure: cannot record \(config.source): \(pulse.lastError)")
            }
            try pulse.waitReady(s, what: "recording from \(config.source)")
            pulse.startTimingSnapshots(of: s) { [weak self] in self?.snapshot($0) }
        }
        running.store(true, ordering: .relaxed)
        let t = Thread { [self] in pollLoop(); pollDone.signal() }
        t.name = "av-measure-poll"
        t.start()
    }

    /// Stops (idempotent) and returns what was seen and heard.
    @discardableResult
    public func stop() -> AVRecording {
        if running.exchange(false, ordering: .relaxed) { pollDone.wait() }
        if let pulse {
            pulse.withLock {
                pulse.stopTimingSnapshots()
                if let stream {
                    pa_stream_set_read_callback(stream, nil, nil)
                    pa_stream_disconnect(stream)
                    pa_stream_unref(stream)
                }
            }
            stream = nil
            pulse.close()
            self.pulse = nil
        }
        return recording
    }

    /// What has been measured so far.
    public var recording: AVRecording {
        results.withLock { r in
            var out = AVRecording()
            out.flashOnsets = r.flashes
            out.flashUncertaintyNanos = r.flashUncertainty
            out.polls = r.polls
            out.pollErrors = r.pollErrors
            for beep in r.beepFrames {
                let t = Int64(beep.arrival)
                let offset = Int64(beep.frame) * 1_000_000_000 / Int64(Self.rate)
                let origins = r.origins.filter { abs($0.at - t) <= 1_000_000_000 }.map(\.origin)
                guard let origin = median(origins.isEmpty ? r.origins.map(\.origin) : origins) else { continue }
                // Only data that came before the beep: a rewind later (a stream leaving the sink)
                // makes the sink render some frames again, which shifts this stream's positions.
                let bound = r.arrivals.filter { $0.at <= t && $0.at >= t - 1_000_000_000 }
                    .map { $0.at - Int64($0.first) * 1_000_000_000 / Int64(Self.rate) }.min()
                out.beeps.append(AVRecording.Beep(onset: UInt64(origin + offset), arrival: beep.arrival,
                                                  upperBound: bound.map { UInt64($0 + offset) },
                                                  byPulseLatency: beep.pulseLatencyEstimate.map { UInt64($0) }))
            }
            return out
        }
    }

    // MARK: - Video (poll thread)

    /// The region's top-left corner: as configured, or centred in the window as it is now.
    private func region() -> (x: Int, y: Int)? {
        guard let drawable else { return nil }
        let size = config.regionSize
        if let x = config.x, let y = config.y { return (x, y) }
        var attributes = XWindowAttributes()
        guard XGetWindowAttributes(display, drawable, &attributes) != 0 else { return nil }
        return (config.x ?? Int(attributes.width) / 2 - size / 2, config.y ?? Int(attributes.height) / 2 - size / 2)
    }

    /// The region's mean luma (BT.601), or nil when it cannot be read (window gone, off screen).
    private func luma(x: Int, y: Int) -> Double? {
        guard let drawable else { return nil }
        let size = config.regionSize
        guard let image = XGetImage(display, drawable, Int32(x), Int32(y), UInt32(size), UInt32(size), UInt.max, ZPixmap) else {
            return nil
        }
        defer { _ = cx11_destroy_image(image) }
        let img = image.pointee
        guard img.bits_per_pixel == 32, let data = img.data else { return nil }
        func shift(_ mask: UInt) -> UInt { UInt(mask.trailingZeroBitCount) }
        let (rm, gm, bm) = (img.red_mask, img.green_mask, img.blue_mask)
        let (rs, gs, bs) = (shift(rm), shift(gm), shift(bm))
        var sum = 0.0
        for row in 0..<size {
            let line = UnsafeRawPointer(data).advanced(by: row * Int(img.bytes_per_line))
            for col in 0..<size {
                let p = UInt(line.load(fromByteOffset: col * 4, as: UInt32.self))
                let r = Double((p & rm) >> rs), g = Double((p & gm) >> gs), b = Double((p & bm) >> bs)
                sum += 0.299 * r + 0.587 * g + 0.114 * b
            }
        }
        return sum / Double(size * size)
    }

    private func pollLoop() {
        var bright = true  // not an onset until it has been seen dark
        var lastDark: UInt64?
        let period = UInt64(config.pollMillis * 1e6)
        var next = monotonicNanos()
        var at = region()
        var polls = 0
        while running.load(ordering: .relaxed) {
            polls += 1
            if drawable == nil, polls % 20 == 1, let title = config.windowTitle {
                drawable = findWindow(titleContaining: title, on: display)
            }
            if at == nil || polls % 100 == 0 { at = region() }  // the window may be resized
            let before = monotonicNanos()
            let value = at.flatMap { luma(x: $0.x, y: $0.y) }
            let after = monotonicNanos()
            let time = (before + after) / 2
            results.withLock { $0.polls += 1; if value == nil { $0.pollErrors += 1 } }
            if let value {
                if !bright && value >= config.brightLuma {
                    bright = true
                    if let dark = lastDark {
                        results.withLock { r in
                            if r.flashes.count < Self.keep {
                                r.flashes.append((dark + time) / 2)
                                r.flashUncertainty.append((time - dark) / 2)
                            }
                        }
                    }
                } else if value < config.brightLuma - 32 {
                    bright = false
                }
                if !bright { lastDark = time }
            }
            next += period
            let now = monotonicNanos()
            if next < now { next = now }  // fell behind: no burst of catch-up polls
            sleepUntil(next)
        }
    }

    // MARK: - Audio (mainloop thread, lock held)

    private func read(_ s: OpaquePointer) {
        let arrival = monotonicNanos()
        let first = frames
        let threshold = config.audioThreshold
        let quietFrames = config.quietMillis * Self.rate / 1000
        while pa_stream_readable_size(s) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(s, &data, &bytes) >= 0, bytes > 0 else { return }
            // PulseAudio's own view, for comparison: how long ago the chunk's first frame was captured.
            var usec: pa_usec_t = 0
            var negative: Int32 = 0
            let latency: Int64? = pa_stream_get_latency(s, &usec, &negative) == 0 ? (negative != 0 ? -1 : 1) * Int64(usec) * 1000 : nil
            let n = bytes / 8
            if let data {
                let samples = data.bindMemory(to: Float.self, capacity: n * 2)
                for i in 0..<n {
                    if abs(samples[2 * i]) >= threshold || abs(samples[2 * i + 1]) >= threshold {
                        if quiet >= quietFrames {
                            let frame = frames + i
                            let pulseEstimate = latency.map { Int64(arrival) - $0 + Int64(i) * 1_000_000_000 / Int64(Self.rate) }
                            results.withLock { r in
                                if r.beepFrames.count < Self.keep { r.beepFrames.append((frame, arrival, pulseEstimate)) }
                            }
                        }
                        quiet = 0
                    } else {
                        quiet += 1
                    }
                }
            } else {
                quiet += n  // a hole: silence
            }
            frames += n
            pa_stream_drop(s)
        }
        guard frames > first else { return }
        results.withLock { r in
            r.arrivals.append((Int64(arrival), first))
            if r.arrivals.count > Self.keep { r.arrivals.removeFirst(r.arrivals.count - Self.keep / 2) }
        }
    }

    /// Each timing snapshot (every 20 ms, `PulseProbeConnection.startTimingSnapshots`).
    private func snapshot(_ info: pa_timing_info) {
        guard info.write_index_corrupt == 0, info.playing != 0 else { return }
        let at = monotonicNanos(fromWallClock: info.timestamp)
        let played = Int64(info.write_index) / 8 * 1_000_000_000 / Int64(Self.rate)
            + Int64(info.source_usec) * 1000 - Int64(info.sink_usec) * 1000
        results.withLock { r in
            r.origins.append((at, at - played))
            if r.origins.count > Self.keep { r.origins.removeFirst(r.origins.count - Self.keep / 2) }
        }
    }
}

/// What an `AVMeasure` saw and heard (CLOCK_MONOTONIC nanoseconds).
public struct AVRecording: Sendable {
    public struct Beep: Sendable {
        /// When the sink played the beep's first sample.
        public var onset: UInt64
        /// When its data reached the measurer.
        public var arrival: UInt64
        /// Cross-checks, not for assertions. From arrival times alone, a bound: no later than this
        /// (the data had been rendered when it arrived, and a null sink renders nothing before the
        /// time it plays it from; the tightest bound in the second before). From
        /// `pa_stream_get_latency` at the read.
        public var upperBound: UInt64?
        public var byPulseLatency: UInt64?
    }
    public var flashOnsets: [UInt64] = []
    /// Half the gap between the last dark and the first bright poll, per flash.
    public var flashUncertaintyNanos: [UInt64] = []
    public var beeps: [Beep] = []
    public var beepOnsets: [UInt64] { beeps.map(\.onset) }
    public var polls = 0
    public var pollErrors = 0

    public init() {}

    /// Pairs flashes with beeps (see `AVSyncReport`).
    public func sync(maxOffsetMillis: Double = 3000, toleranceMillis: Double = 100) -> AVSyncReport {
        AVSyncReport(flashes: flashOnsets, beeps: beepOnsets, maxOffsetMillis: maxOffsetMillis, toleranceMillis: toleranceMillis)
    }
}

/// Flashes paired with beeps: offsets are audio minus video, milliseconds (positive: the sound is
/// heard after the picture is seen).
///
/// Not each flash with the nearest beep: with events a period apart, sound 0.8 periods late would
/// pair each flash with the *next* beep and read as 0.2 periods early. Instead the offset is the
/// one (up to `maxOffsetMillis` either way) that lines up the most flashes with beeps within
/// `toleranceMillis`; the emitter's uneven gaps make the right one stand out (`AVEmitter`'s
/// `intervals`). Then each flash is paired with the beep nearest that offset, within the tolerance.
public struct AVSyncReport: Sendable, CustomStringConvertible {
    public struct Pair: Sendable {
        public var flash: UInt64
        public var beep: UInt64
        public var offsetMillis: Double { (Double(beep) - Double(flash)) / 1e6 }
    }
    public var pairs: [Pair] = []
    public var unpairedFlashes = 0
    public var unpairedBeeps = 0

    public init(flashes: [UInt64], beeps: [UInt64], maxOffsetMillis: Double = 3000, toleranceMillis: Double = 100) {
        let beeps = beeps.sorted()
        let tolerance = toleranceMillis * 1e6
        /// The beep nearest `t` (ns) not yet used, within the tolerance.
        func nearest(_ t: Double, excluding used: Set<Int>) -> Int? {
            var lo = 0, hi = beeps.count
            while lo < hi { let mid = (lo + hi) / 2; if Double(beeps[mid]) < t { lo = mid + 1 } else { hi = mid } }
            var best: Int?
            for i in max(0, lo - 2)..<min(beeps.count, lo + 2) where !used.contains(i) && abs(Double(beeps[i]) - t) <= tolerance {
                if best == nil || abs(Double(beeps[i]) - t) < abs(Double(beeps[best!]) - t) { best = i }
            }
            return best
        }
        func pair(shift: Double) -> [(flash: UInt64, beep: Int)] {
            var used = Set<Int>()
            return flashes.compactMap { f in
                guard let b = nearest(Double(f) + shift, excluding: used) else { return nil }
                used.insert(b)
                return (f, b)
            }
        }
        var best: [(flash: UInt64, beep: Int)] = []
        var bestResidual = Double.infinity
        for f in flashes {
            for b in beeps where abs(Double(b) - Double(f)) <= maxOffsetMillis * 1e6 {
                let shift = Double(b) - Double(f)
                let candidate = pair(shift: shift)
                let residual = candidate.map { abs(Double(beeps[$0.beep]) - Double($0.flash) - shift) }.reduce(0, +)
                if candidate.count > best.count || (candidate.count == best.count && residual < bestResidual) {
                    best = candidate
                    bestResidual = residual
                }
            }
        }
        // Once more around the median of the chosen pairs (not one pair's own offset).
        if let m = Self.median(best.map { Double(beeps[$0.beep]) - Double($0.flash) }) {
            let again = pair(shift: m)
            if again.count >= best.count { best = again }
        }
        pairs = best.map { Pair(flash: $0.flash, beep: beeps[$0.beep]) }
        unpairedFlashes = flashes.count - pairs.count
        unpairedBeeps = beeps.count - pairs.count
    }

    public var offsetsMillis: [Double] { pairs.map(\.offsetMillis) }
    public var medianMillis: Double? { Self.median(offsetsMillis) }

    public static func median(_ values: [Double]) -> Double? {
        let s = values.sorted()
        guard !s.isEmpty else { return nil }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
    public var maxAbsMillis: Double? { offsetsMillis.map(abs).max() }

    public var description: String {
        let list = offsetsMillis.map { String(format: "%+.1f", $0) }.joined(separator: " ")
        return "\(pairs.count) pairs (unpaired: \(unpairedFlashes) flashes, \(unpairedBeeps) beeps); offsets ms: [\(list)]; "
            + "median \(medianMillis.map { String(format: "%+.1f", $0) } ?? "-"), max |offset| \(maxAbsMillis.map { String(format: "%.1f", $0) } ?? "-")"
    }
}

/// The first window on `display` whose name contains `title` (depth-first from the root), or nil.
public func findWindow(titleContaining title: String, display name: String?) -> UInt? {
    let shown = name ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
    guard let d = XOpenDisplay(shown) else { return nil }
    defer { XCloseDisplay(d) }
    cx11_install_error_handler()  // a window destroyed while the tree is walked must not end the process
    return findWindow(titleContaining: title, on: d).map { UInt($0) }
}

func findWindow(titleContaining title: String, on d: OpaquePointer) -> Window? {
    func search(_ w: Window) -> Window? {
        var windowName: UnsafeMutablePointer<CChar>?
        if XFetchName(d, w, &windowName) != 0, let windowName {
            defer { XFree(windowName) }
            if String(cString: windowName).contains(title) { return w }
        }
        var root: Window = 0, parent: Window = 0
        var children: UnsafeMutablePointer<Window>?
        var count: UInt32 = 0
        guard XQueryTree(d, w, &root, &parent, &children, &count) != 0, let children else { return nil }
        defer { XFree(children) }
        for i in 0..<Int(count) { if let found = search(children[i]) { return found } }
        return nil
    }
    return search(cx11_root_window(d, cx11_default_screen(d)))
}

/// Waits (bounded) for a window whose name contains `title` to appear on `display`.
public func waitForWindow(titleContaining title: String, display: String?, seconds: Double = 10) throws -> UInt {
    let deadline = monotonicNanos() + UInt64(seconds * 1e9)
    while true {
        if let w = findWindow(titleContaining: title, display: display) { return w }
        guard monotonicNanos() < deadline else { throw TestFailure("no window titled \"…\(title)…\" on \(display ?? "$DISPLAY") within \(seconds) s") }
        usleep(20_000)
    }
}
