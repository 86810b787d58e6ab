internal import CPulse
import FoundationEssentials
import Glibc
import Logging
import MediaCore
import Basics
import Synchronization

/// A mixer shared between PulseAudio's thread (which pushes samples) and the audio thread
/// (which mixes a frame every 20 ms).
public final class SharedMixer: Sendable {
    public let state: Mutex<AudioMixer>
    public init(_ mixer: AudioMixer) { state = Mutex(mixer) }
}

/// What the capture reports as it goes; the broadcaster turns these into events.
public enum AudioCaptureEvent: Sendable, Equatable {
    case appAttached(index: UInt32, name: String, binary: String, pid: String)
    case appDetached(index: UInt32)
    case sourceLost(reason: String)
    case reconnecting(attempt: Int, delayMillis: Int)
    case resumed
    case streamFailed(what: String, reason: String)
}

/// Mixer slots: the microphone in slot 0, application or output streams after it.
public enum MixerSlot {
    public static let mic = 0
    public static let firstProgram = 1
    public static let count = 9
}

/// Captures audio from PulseAudio into a `SharedMixer`: the microphone, and either one
/// application's streams (each sink input's own monitor, `pa_stream_set_monitor_stream`, so no
/// other application's sound gets in) or a sink's monitor. Follows the application as it starts
/// and stops streams (sink-input subscription). When the server goes away it reports it and
/// reconnects with backoff, driven by `supervise(now:)` from the audio thread.
///
/// Uses a PulseAudio threaded mainloop (`PulseConnection`): every callback runs on its thread
/// with the mainloop lock held; the public methods take that lock. That lock guards all mutable
/// state here.
public final class PulseCapture: @unchecked Sendable {
    public let config: AudioCaptureConfig
    private let mixer: SharedMixer
    private let onEvent: @Sendable (AudioCaptureEvent) -> Void
    private let logger: Logger
    private let pulse: PulseConnection
    /// The microphone captured, as the server named it when this capture connected (the default
    /// source resolved): what `start` tells the presenter it shares. Nil without a microphone.
    public private(set) var microphone: AudioDevice?
    private let clock: any MediaClock

    // Guarded by the mainloop lock.
    private var contextState = PA_CONTEXT_UNCONNECTED
    private var streams: [RecordStream] = []
    private var sinkMonitors: [UInt32: UInt32] = [:]
    private var scanApps: [AudioApplication] = []
    private var reconciling = false
    private var reconcileAgain = false
    private var lost = false
    private var attempt = 0
    private var nextAttemptNanos: UInt64 = 0
    private var stopped = false
    private let released = Atomic<Bool>(false)

    /// Connects to PulseAudio and starts capturing.
    /// - Throws: `AudioError` when the server cannot be reached, or a named mic or sink does not exist.
    /// - Parameter clock: what the samples' capture times are read on (the sender's clock).
    public init(config: AudioCaptureConfig, mixer: SharedMixer, logger: Logger, clock: any MediaClock = SystemClock(),
                onEvent: @escaping @Sendable (AudioCaptureEvent) -> Void) throws {
        self.config = config
        self.mixer = mixer
        self.logger = logger
        self.onEvent = onEvent
        // "ss-pulse": the thread's name in top -H and /proc (bench/audio.sh).
        self.clock = clock
        // The connection's own waits (connecting, listing) are on the system clock: they bound
        // time the server takes, whatever clock the samples are stamped on.
        pulse = try PulseConnection(applicationName: "screenshare", server: config.server, threadName: "ss-pulse")
        mixer.state.withLock { m in
            m.setGain(decibels: config.micGainDecibels, input: MixerSlot.mic)
            for s in MixerSlot.firstProgram..<MixerSlot.count { m.setGain(decibels: config.programGainDecibels, input: s) }
        }
        pulse.lock()
        do {
            try connectAndWait(timeoutSeconds: 5)
            let inventory = try pulse.fetchInventory(timeoutSeconds: 5)
            if case .some(let name) = config.mic {
                microphone = inventory.sources.first { source in
                    name.map { source.name == $0 || String(source.index) == $0 } ?? source.isDefault
                }
            }
            try check(against: inventory)
            setUpStreams()
            pulse.unlock()
        } catch {
            pulse.unlock()
            stop()
            throw error
        }
    }

    deinit {
        stop()
    }

    /// Stops capturing and closes the connection; the mainloop thread is gone when it returns. Idempotent.
    public func stop() {
        guard !released.exchange(true, ordering: .sequentiallyConsistent) else { return }
        pulse.close {
            stopped = true
            teardownContext()
        }
    }

    /// Reconnects after the server went away, with backoff (0.25 s, 0.5 s, then every 1 s).
    /// Non-blocking: called from the audio thread on each tick.
    public func supervise(now: UInt64) {
        pulse.lock()
        defer { pulse.unlock() }
        guard !stopped, lost, now >= nextAttemptNanos else { return }
        attempt += 1
        let delay = min(250 << min(attempt - 1, 2), 1000)
        nextAttemptNanos = now + UInt64(delay) * 1_000_000
        onEvent(.reconnecting(attempt: attempt, delayMillis: delay))
        teardownContext()
        lost = false  // set again by the state callback if this attempt fails
        if !pulse.startConnect(configure: watch) { lost = true }
    }

    // MARK: - Connection

    private var unmanagedSelf: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
    private static func from(_ p: UnsafeMutableRawPointer?) -> PulseCapture { Unmanaged<PulseCapture>.fromOpaque(p!).takeUnretainedValue() }

    private func connectAndWait(timeoutSeconds: Double) throws {
        try pulse.connect(timeoutSeconds: timeoutSeconds, configure: watch)
        lost = false
    }

    /// Sets up a new context (lock held): follows its state (`contextStateChanged`) and, once
    /// subscribed to, its sinks and sink inputs (`reconcile`).
    private func watch(_ ctx: OpaquePointer) {
        contextState = PA_CONTEXT_UNCONNECTED
        pa_context_set_state_callback(ctx, { c, ud in
            PulseCapture.from(ud).contextStateChanged(pa_context_get_state(c))
        }, unmanagedSelf)
        pa_context_set_subscribe_callback(ctx, { _, type, _, ud in
            let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
            if facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue || facility == PA_SUBSCRIPTION_EVENT_SINK.rawValue {
                PulseCapture.from(ud).reconcile()
            }
        }, unmanagedSelf)
    }

    private func contextStateChanged(_ state: pa_context_state_t) {
        let wasReady = contextState == PA_CONTEXT_READY
        contextState = state
        switch state {
        case PA_CONTEXT_READY:
            if attempt > 0 {
                logger.info("PulseAudio: reconnected to \(pulse.serverDescription)")
                attempt = 0
                setUpStreams()
                onEvent(.resumed)
            }
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            guard !stopped else { return }
            if wasReady {
                // The server went away: forget its streams (the mixer sends silence) and retry.
                let reason = pulse.lastError
                dropAllStreams()
                onEvent(.sourceLost(reason: "PulseAudio connection lost: \(reason)"))
                attempt = 0
                nextAttemptNanos = 0
            }
            lost = true
        default:
            break
        }
    }

    private func teardownContext() {
        dropAllStreams()
        pulse.disconnect()
        contextState = PA_CONTEXT_UNCONNECTED
    }

    // MARK: - Checking names

    private func check(against inventory: AudioInventory) throws {
        if case .some(.some(let name)) = config.mic, !inventory.sources.contains(where: { $0.name == name || String($0.index) == name }) {
            throw AudioError("--mic '\(name)': no such PulseAudio source (see `screenshare sources`)")
        }
        if case .output(.some(let sink)) = config.program, !inventory.sinks.contains(where: { $0.name == sink || String($0.index) == sink }) {
            throw AudioError("--audio-output '\(sink)': no such PulseAudio sink (see `screenshare sources`)")
        }
    }

    // MARK: - Streams

    private func setUpStreams() {
        guard let ctx = pulse.context else { return }
        if case .some(let source) = config.mic {
            openStream(slot: MixerSlot.mic, device: source, monitorOf: nil, what: "microphone \(source ?? "(default source)")")
        }
        switch config.program {
        case .none:
            break
        case .output(let sink):
            // A sink's monitor source is named "<sink>.monitor"; @DEFAULT_MONITOR@ follows the default sink.
            openStream(slot: MixerSlot.firstProgram, device: sink.map { "\($0).monitor" } ?? "@DEFAULT_MONITOR@", monitorOf: nil,
                       what: "output \(sink ?? "(default sink)")")
        case .application:
            openAnchor(device: "@DEFAULT_MONITOR@")
            let mask = pa_subscription_mask_t(rawValue: PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue | PA_SUBSCRIPTION_MASK_SINK.rawValue)
            if let op = pa_context_subscribe(ctx, mask, nil, nil) { pa_operation_unref(op) }
            reconcile()
        }
    }

    /// Keeps a sink rendering in small blocks: a low-latency record stream on its monitor whose
    /// samples are thrown away (they hold every application's sound).
    ///
    /// A sink renders as far ahead as its clients allow; players such as pacat or mpv ask for
    /// up to 2 s. A sink-input monitor stream opened then gets a 2 s burst and nothing more until
    /// that block is played out. With this anchor in place from the start, the sink already runs
    /// at a 10 ms latency when the application (re)starts, so its sound is tapped within tens of
    /// milliseconds.
    private func openAnchor(device: String) {
        guard !streams.contains(where: { $0.slot == RecordStream.discard && $0.device == device }) else { return }
        openStream(slot: RecordStream.discard, device: device, monitorOf: nil, what: "latency anchor on \(device)")
    }

    /// Opens a record stream into a mixer slot: 48 kHz stereo float (PulseAudio resamples and
    /// remixes), 10 ms fragments.
    private func openStream(slot: Int, device: String?, monitorOf sinkInput: UInt32?, what: String) {
        guard let ctx = pulse.context else { return }
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(AudioMixer.sampleRate), channels: 2)
        var map = pa_channel_map()
        pa_channel_map_init_stereo(&map)
        guard let s = pa_stream_new(ctx, "screenshare: \(what)", &spec, &map) else {
            onEvent(.streamFailed(what: what, reason: pulse.lastError))
            return
        }
        let record = RecordStream(stream: s, slot: slot, sinkInput: sinkInput, device: device, what: what, owner: self)
        streams.append(record)
        if slot != RecordStream.discard { mixer.state.withLock { $0.setActive(true, input: slot) } }
        let ud = Unmanaged.passUnretained(record).toOpaque()
        pa_stream_set_read_callback(s, { s, _, ud in
            Unmanaged<RecordStream>.fromOpaque(ud!).takeUnretainedValue().readAvailable()
        }, ud)
        pa_stream_set_state_callback(s, { s, ud in
            let state = pa_stream_get_state(s)
            if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
                let r = Unmanaged<RecordStream>.fromOpaque(ud!).takeUnretainedValue()
                r.owner?.streamEnded(r)
            }
        }, ud)
        // Timing updates let each read know how old its samples are (the capture-to-send latency).
        var flags = PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
        if let sinkInput {
            pa_stream_set_monitor_stream(s, sinkInput)
            flags |= PA_STREAM_DONT_MOVE.rawValue
        }
        let frameBytes = UInt32(AudioMixer.channels * MemoryLayout<Float>.size)
        var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                                  fragsize: UInt32(AudioMixer.sampleRate / 100) * frameBytes)
        if pa_stream_connect_record(s, device, &attr, pa_stream_flags_t(rawValue: flags)) < 0 {
            onEvent(.streamFailed(what: what, reason: pulse.lastError))
            close(record)
        }
    }

    fileprivate func streamEnded(_ record: RecordStream) {
        guard streams.contains(where: { $0 === record }) else { return }
        let reason = pulse.lastError
        close(record)
        if let index = record.sinkInput {
            onEvent(.appDetached(index: index))
        } else if contextState == PA_CONTEXT_READY && record.slot != RecordStream.discard {
            onEvent(.streamFailed(what: record.what, reason: reason))
        }
    }

    private func close(_ record: RecordStream) {
        streams.removeAll { $0 === record }
        let s = record.stream
        pa_stream_set_read_callback(s, nil, nil)
        pa_stream_set_state_callback(s, nil, nil)
        if pa_stream_get_state(s) == PA_STREAM_READY || pa_stream_get_state(s) == PA_STREAM_CREATING { pa_stream_disconnect(s) }
        pa_stream_unref(s)
        record.owner = nil
        if record.slot != RecordStream.discard && !streams.contains(where: { $0.slot == record.slot }) {
            mixer.state.withLock { $0.setActive(false, input: record.slot) }
        }
    }

    private func dropAllStreams() {
        for r in streams { close(r) }
    }

    func push(_ samples: UnsafeBufferPointer<Float>, slot: Int, capturedAtNanos: UInt64?) {
        guard slot != RecordStream.discard else { return }
        mixer.state.withLock { $0.push(samples, input: slot, capturedAtNanos: capturedAtNanos) }
    }

    /// Now on the capture's clock (called on the mainloop thread, lock held).
    func clockNow() -> UInt64 { clock.nowNanos() }

    // MARK: - Following the application

    /// Lists sinks (for their monitors) and sink inputs, then taps every sink input of the
    /// application that is not tapped yet. Re-entrant requests coalesce.
    private func reconcile() {
        guard case .application = config.program, let ctx = pulse.context, contextState == PA_CONTEXT_READY else { return }
        if reconciling { reconcileAgain = true; return }
        reconciling = true
        reconcileAgain = false
        sinkMonitors.removeAll(keepingCapacity: true)
        scanApps.removeAll(keepingCapacity: true)
        let op = pa_context_get_sink_info_list(ctx, { _, info, eol, ud in
            let me = PulseCapture.from(ud)
            if let info { me.sinkMonitors[info.pointee.index] = info.pointee.monitor_source }
            if eol != 0 { me.listSinkInputs() }
        }, unmanagedSelf)
        if let op { pa_operation_unref(op) } else { reconciling = false }
    }

    private func listSinkInputs() {
        guard let ctx = pulse.context else { reconciling = false; return }
        let op = pa_context_get_sink_input_info_list(ctx, { _, info, eol, ud in
            let me = PulseCapture.from(ud)
            if let info { me.scanApps.append(AudioApplication(info.pointee)) }
            if eol != 0 { me.applyScan() }
        }, unmanagedSelf)
        if let op { pa_operation_unref(op) } else { reconciling = false }
    }

    private func applyScan() {
        reconciling = false
        guard case .application(let matcher) = config.program else { return }
        for app in scanApps where matcher.matches(applicationName: app.name, binary: app.binary, pid: app.pid) {
            guard !streams.contains(where: { $0.sinkInput == app.index }), let monitor = sinkMonitors[app.sink] else { continue }
            openAnchor(device: String(monitor))
            guard let slot = (MixerSlot.firstProgram..<MixerSlot.count).first(where: { s in !streams.contains { $0.slot == s } }) else {
                logger.warning("audio: more than \(MixerSlot.count - 1) streams of '\(matcher)'; ignoring sink input \(app.index)")
                continue
            }
            openStream(slot: slot, device: String(monitor), monitorOf: app.index, what: "\(app.name) (sink input \(app.index))")
            onEvent(.appAttached(index: app.index, name: app.name, binary: app.binary, pid: app.pid))
        }
        if reconcileAgain { reconcile() }
    }
}
