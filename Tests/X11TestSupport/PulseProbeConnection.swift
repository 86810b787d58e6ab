internal import CPulse
import Foundation
import Synchronization

/// CLOCK_MONOTONIC now, in nanoseconds: the one clock the A/V probe's timestamps use.
public func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Sleeps until CLOCK_MONOTONIC reaches `nanos` (at once if it has).
func sleepUntil(_ nanos: UInt64) {
    var ts = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

/// A wall-clock time (as PulseAudio's timing snapshots carry it) on CLOCK_MONOTONIC.
/// Both clocks are read here, bracketed, so the offset is good to a microsecond or so.
func monotonicNanos(fromWallClock tv: timeval) -> Int64 {
    var before = timespec(), wall = timespec(), after = timespec()
    clock_gettime(CLOCK_MONOTONIC, &before)
    clock_gettime(CLOCK_REALTIME, &wall)
    clock_gettime(CLOCK_MONOTONIC, &after)
    func ns(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }
    let offset = ns(wall) - (ns(before) + ns(after)) / 2
    return Int64(tv.tv_sec) * 1_000_000_000 + Int64(tv.tv_usec) * 1000 - offset
}

/// The median of `values` (nil when empty).
func median<T: BinaryInteger>(_ values: [T]) -> T? {
    guard !values.isEmpty else { return nil }
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// One PulseAudio connection for the A/V probe: a threaded mainloop and a connected context, and
/// (`startTimingSnapshots`) the timing snapshots of a stream that both ends of the probe aim by.
///
/// Every callback runs on the mainloop's thread with its lock held; other threads take that
/// lock (`withLock`) before touching the context or a stream. That lock is what makes the
/// `@unchecked Sendable` true.
final class PulseProbeConnection: @unchecked Sendable {
    let mainloop: OpaquePointer
    let context: OpaquePointer
    private let closed = Atomic<Bool>(false)
    // Timing snapshots (lock held): the timer, the stream asked about, where each snapshot goes.
    private var snapshotTimer: OpaquePointer?
    private var snapshotStream: OpaquePointer?
    private var onSnapshot: ((pa_timing_info) -> Void)?

    /// Connects (bounded: 5 s) to `server` (nil: $PULSE_SERVER or the default).
    /// - Parameter name: the client's `application.name`.
    init(server: String?, name: String) throws {
        guard let ml = pa_threaded_mainloop_new() else { throw TestFailure("cannot create a PulseAudio mainloop") }
        guard pa_threaded_mainloop_start(ml) >= 0 else {
            pa_threaded_mainloop_free(ml)
            throw TestFailure("cannot start a PulseAudio mainloop")
        }
        pa_threaded_mainloop_lock(ml)
        let props = pa_proplist_new()
        pa_proplist_sets(props, cpulse_prop_application_name(), name)
        let ctx = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(ml), name, props)
        pa_proplist_free(props)
        guard let ctx else {
            pa_threaded_mainloop_unlock(ml)
            pa_threaded_mainloop_stop(ml)
            pa_threaded_mainloop_free(ml)
            throw TestFailure("cannot create a PulseAudio context")
        }
        mainloop = ml
        context = ctx
        var state = PA_CONTEXT_UNCONNECTED
        if pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 {
            _ = wait(seconds: 5) {
                state = pa_context_get_state(ctx)
                return state == PA_CONTEXT_READY || state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
            }
        }
        let reason = String(cString: pa_strerror(pa_context_errno(ctx)))
        pa_threaded_mainloop_unlock(ml)
        guard state == PA_CONTEXT_READY else {
            close()
            throw TestFailure("cannot connect to PulseAudio \(server ?? "(default)"): \(reason)")
        }
    }

    deinit { close() }

    /// Disconnects and stops the mainloop thread (idempotent; not from a callback).
    func close() {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        pa_threaded_mainloop_lock(mainloop)
        stopTimingSnapshots()
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_unlock(mainloop)
        pa_threaded_mainloop_stop(mainloop)
        pa_threaded_mainloop_free(mainloop)
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body()
    }

    /// With the lock held: waits (releasing it while sleeping) until `done` or the deadline.
    func wait(seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        while !done() {
            if monotonicNanos() >= deadline { return false }
            pa_threaded_mainloop_unlock(mainloop)
            usleep(1_000)
            pa_threaded_mainloop_lock(mainloop)
        }
        return true
    }

    /// The last error on the context, as PulseAudio words it (lock held).
    var lastError: String { String(cString: pa_strerror(pa_context_errno(context))) }

    /// With the lock held: waits until `stream` is ready (or failed).
    func waitReady(_ stream: OpaquePointer, what: String) throws {
        var state = PA_STREAM_UNCONNECTED
        _ = wait(seconds: 5) {
            state = pa_stream_get_state(stream)
            return state == PA_STREAM_READY || state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED
        }
        guard state == PA_STREAM_READY else { throw TestFailure("PulseAudio \(what) did not start: \(lastError)") }
    }

    /// With the lock held: from now on, every 20 ms, asks PulseAudio for a timing snapshot of
    /// `stream` and hands each one that comes to `onSnapshot` (on the mainloop thread, lock held).
    /// One stream at a time, until `stopTimingSnapshots()` (or `close()`).
    func startTimingSnapshots(of stream: OpaquePointer, _ onSnapshot: @escaping (pa_timing_info) -> Void) {
        stopTimingSnapshots()
        snapshotStream = stream
        self.onSnapshot = onSnapshot
        snapshotTimer = pa_context_rttime_new(context, pa_rtclock_now() + 20_000, { _, e, _, ud in
            Unmanaged<PulseProbeConnection>.fromOpaque(ud!).takeUnretainedValue().tick(e!)
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// With the lock held: stops the timing snapshots (idempotent). Before their stream is disconnected.
    func stopTimingSnapshots() {
        if let snapshotTimer { pa_threaded_mainloop_get_api(mainloop).pointee.time_free?(snapshotTimer) }
        snapshotTimer = nil
        snapshotStream = nil
        onSnapshot = nil
    }

    /// Every 20 ms: asks for a timing snapshot (while the stream is ready).
    private func tick(_ e: OpaquePointer) {
        pa_context_rttime_restart(context, e, pa_rtclock_now() + 20_000)
        guard let stream = snapshotStream, pa_stream_get_state(stream) == PA_STREAM_READY else { return }
        if let op = pa_stream_update_timing_info(stream, { s, ok, ud in
            guard ok != 0, let s, let info = pa_stream_get_timing_info(s)?.pointee else { return }
            Unmanaged<PulseProbeConnection>.fromOpaque(ud!).takeUnretainedValue().onSnapshot?(info)
        }, Unmanaged.passUnretained(self).toOpaque()) { pa_operation_unref(op) }
    }
}
