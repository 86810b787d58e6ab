internal import CPulse
import FoundationEssentials
import Glibc
import Synchronization

/// A PulseAudio playback stream: 48 kHz stereo float, fed by one thread with `write(_:)`.
///
/// Push model: the caller writes each 20 ms frame when it is due (its jitter buffer decides
/// when) and PulseAudio plays it after what it already holds. The stream asks for a short
/// buffer (`targetLatencyMillis`, starting once two frames are in) so what is written is heard
/// soon, and reports the whole delay to the speaker (`latencyNanos`: its buffer plus the sink's
/// own latency) so the caller can line the sound up with the pictures.
///
/// Uses a threaded mainloop (`PulseConnection`); `write` takes its lock. `stop()` (or deinit)
/// must run before the process exits: a mainloop thread still running during `exit` was seen to
/// crash it. When the server goes away the stream fails and `write` returns false (the caller
/// stops playing; no reconnect).
///
/// (`@unchecked`: the stream and the counters are touched with the mainloop lock held only:
/// in its callbacks, in `write` and in `stop`.)
public final class PulsePlayback: @unchecked Sendable {
    public static let sampleRate = 48_000
    public static let channels = 2

    /// The sink played to (its name), as PulseAudio reports it once connected.
    public private(set) var sinkName = ""
    private let pulse: PulseConnection
    // Guarded by the mainloop lock.
    private var stream: OpaquePointer?
    private let released = Atomic<Bool>(false)
    private var floorNanos: UInt64 = .max
    private var floorWrites = 0
    // Read without the mainloop lock, so they stay valid after `stop()` (a summary reads them
    // once playback is stopped). `UInt64.max`: no latency measured yet.
    private let latency = Atomic<UInt64>(.max)
    private let flushes = Atomic<Int>(0)
    static let prebufferNanos: UInt64 = 40_000_000
    static let maxExcessNanos: UInt64 = 60_000_000

    /// Connects and opens the stream; returns when it is ready to play.
    /// - Parameters:
    ///   - sink: a sink name or index, or nil for the default sink.
    ///   - server: a PulseAudio server (nil: `$PULSE_SERVER` or the default).
    ///   - targetLatencyMillis: how much PulseAudio should buffer ahead of the sink.
    /// - Throws: `AudioError` naming the server or the sink when either cannot be used.
    public init(sink: String?, server: String? = nil, streamName: String = "screenshare watch",
                targetLatencyMillis: Int = 80) throws {
        pulse = try PulseConnection(applicationName: "screenshare watch", server: server)
        pulse.lock()
        do {
            try pulse.connect(timeoutSeconds: 5)
            try openStream(sink: sink, name: streamName, latencyMillis: targetLatencyMillis)
            pulse.unlock()
        } catch {
            pulse.unlock()
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Closes the stream and the connection; the mainloop thread is gone when it returns. Idempotent.
    public func stop() {
        guard !released.exchange(true, ordering: .sequentiallyConsistent) else { return }
        pulse.close {
            if let s = stream {
                pa_stream_disconnect(s)
                pa_stream_unref(s)
            }
            stream = nil
        }
    }

    private func openStream(sink: String?, name: String, latencyMillis: Int) throws {
        guard let ctx = pulse.context else { throw AudioError("not connected") }
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: UInt32(Self.sampleRate), channels: UInt8(Self.channels))
        var map = pa_channel_map()
        pa_channel_map_init_stereo(&map)
        guard let s = pa_stream_new(ctx, name, &spec, &map) else { throw AudioError("cannot create a playback stream: \(pulse.lastError)") }
        stream = s
        let bytesPerMilli = UInt32(Self.sampleRate / 1000 * Self.channels * MemoryLayout<Float>.size)
        // Start playing once two 20 ms frames are in: frames are written as they fall due, so
        // PulseAudio then keeps about that much in hand and a late write is not an underrun.
        var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32(latencyMillis) * bytesPerMilli, prebuf: UInt32(Self.prebufferNanos / 1_000_000) * bytesPerMilli,
                                  minreq: 10 * bytesPerMilli, fragsize: UInt32.max)
        var flags = PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue
        if sink != nil { flags |= PA_STREAM_DONT_MOVE.rawValue }
        guard pa_stream_connect_playback(s, sink, &attr, pa_stream_flags_t(rawValue: flags), nil, nil) >= 0 else {
            throw AudioError(sinkMessage(sink))
        }
        let ok = pulse.wait(seconds: 5) {
            let st = pa_stream_get_state(s)
            return st == PA_STREAM_READY || st == PA_STREAM_FAILED || st == PA_STREAM_TERMINATED
        }
        guard ok, pa_stream_get_state(s) == PA_STREAM_READY else {
            throw AudioError(ok ? sinkMessage(sink) : "the playback stream did not become ready within 5 s")
        }
        if let n = pa_stream_get_device_name(s) { sinkName = String(cString: n) }
    }

    private func sinkMessage(_ sink: String?) -> String {
        let reason = pulse.lastError
        if let sink { return "--audio-sink '\(sink)': cannot play to it: \(reason) (see `pactl list short sinks`)" }
        return "cannot play to the default sink: \(reason)"
    }

    /// Whether the stream still plays (false after the server went away).
    public var isPlaying: Bool {
        guard !released.load(ordering: .sequentiallyConsistent) else { return false }
        pulse.lock()
        defer { pulse.unlock() }
        return stream.map { pa_stream_get_state($0) == PA_STREAM_READY } ?? false
    }

    /// Queues interleaved stereo samples for playback (PulseAudio copies them).
    /// - Returns: false when the stream has failed (the server went away).
    @discardableResult
    public func write(_ pcm: UnsafeBufferPointer<Float>) -> Bool {
        guard let base = pcm.baseAddress, pcm.count > 0 else { return true }
        guard !released.load(ordering: .sequentiallyConsistent) else { return false }
        pulse.lock()
        defer { pulse.unlock() }
        guard let s = stream, pa_stream_get_state(s) == PA_STREAM_READY else { return false }
        var usec: pa_usec_t = 0
        var negative: Int32 = 0
        guard pa_stream_get_latency(s, &usec, &negative) == 0 else {
            return pa_stream_write(s, base, pcm.count * MemoryLayout<Float>.size, nil, 0, PA_SEEK_RELATIVE) >= 0
        }
        let total = negative != 0 ? 0 : usec * 1000
        latency.store(total, ordering: .relaxed)
        // The stream's own buffer should hold about the prebuffer. It grows for good when the
        // sink does not read for a while (a PulseAudio null sink sleeps through a block of up to
        // 2 s before it takes a new client's latency), after an underrun, or when the sink's
        // clock runs slower than the sender's; the sound would then stay that much late. Sinks
        // read in blocks, so the level swings: when even its floor over half a second is more
        // than `maxExcessNanos` above the target, the buffer is flushed (one short gap) and
        // playback restarts at the target.
        //
        // The level is the interpolated latency less the sink's part: the raw write and read
        // indices are not comparable between timing updates (PulseAudio sends them at most every
        // 1.5 s; the read index is as old as the last one, the write index is current), which
        // read as a full buffer and flushed one that was not.
        if let t = pa_stream_get_timing_info(s) {
            let sink = t.pointee.sink_usec * 1000
            floorNanos = min(floorNanos, total > sink ? total - sink : 0)
            floorWrites += 1
            if floorWrites >= 25 {
                let excess = floorNanos > Self.prebufferNanos + Self.maxExcessNanos
                floorNanos = .max
                floorWrites = 0
                if excess, let op = pa_stream_flush(s, nil, nil) {
                    pa_operation_unref(op)
                    flushes.add(1, ordering: .relaxed)
                }
            }
        }
        return pa_stream_write(s, base, pcm.count * MemoryLayout<Float>.size, nil, 0, PA_SEEK_RELATIVE) >= 0
    }

    /// Times the stream's buffer was flushed because it held too much (see `write`).
    public var flushCount: Int { flushes.load(ordering: .relaxed) }

    /// How long until a sample written now is heard (PulseAudio's buffer plus the sink's
    /// latency), as of the last `write`; nil before PulseAudio has timing information.
    /// Still readable after `stop()` (the last value).
    public var latencyNanos: UInt64? {
        let l = latency.load(ordering: .relaxed)
        return l == .max ? nil : l
    }
}
