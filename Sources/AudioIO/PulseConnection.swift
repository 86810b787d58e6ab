internal import CPulse
import FoundationEssentials
import Glibc
import MediaCore
import Basics
import Synchronization

/// One client connection to PulseAudio: a threaded mainloop (started at init) and its context.
/// What `PulsePlayback` and `PulseCapture` each stand on.
///
/// Every callback runs on the mainloop's thread with its lock held; other threads take that lock
/// (`lock()`/`unlock()`) before touching the context or anything created on it. That lock guards
/// `context` (and, by the owners' rule, their own state), which makes the `@unchecked Sendable`
/// true. `close()` must run before the process exits: a mainloop thread still running during
/// `exit` was seen to crash it.
final class PulseConnection: @unchecked Sendable {
    /// The server asked for (nil: `$PULSE_SERVER` or the default).
    let server: String?
    /// The client's `application.name`, also the context's name.
    let applicationName: String
    /// The time the waits below keep.
    let clock: any MediaClock
    private let mainloop: OpaquePointer
    /// The context (lock held): nil before `startConnect` and after `disconnect`.
    private(set) var context: OpaquePointer?
    private let closed = Atomic<Bool>(false)

    /// Creates and starts the mainloop thread; nothing is connected until `connect` or `startConnect`.
    /// - Parameter threadName: the mainloop thread's name (in top -H and /proc), or nil for libpulse's.
    /// - Throws: `AudioError` when the mainloop cannot be created or started.
    init(applicationName: String, server: String?, threadName: String? = nil, clock: any MediaClock = SystemClock()) throws {
        guard let ml = pa_threaded_mainloop_new() else { throw AudioError("cannot create a PulseAudio mainloop") }
        if let threadName { pa_threaded_mainloop_set_name(ml, threadName) }
        guard pa_threaded_mainloop_start(ml) >= 0 else {
            pa_threaded_mainloop_free(ml)
            throw AudioError("cannot start the PulseAudio mainloop thread")
        }
        mainloop = ml
        self.server = server
        self.applicationName = applicationName
        self.clock = clock
    }

    deinit { close() }

    /// The server as an error message names it.
    var serverDescription: String { server ?? ProcessInfo.processInfo.environment["PULSE_SERVER"] ?? "the default PulseAudio server" }

    func lock() { pa_threaded_mainloop_lock(mainloop) }
    func unlock() { pa_threaded_mainloop_unlock(mainloop) }

    /// Waits with the lock held (released while sleeping) until `done` or the deadline.
    func wait(seconds: Double, until done: () -> Bool) -> Bool {
        let deadline = clock.nowNanos() + UInt64(seconds * 1e9)
        while !done() {
            let now = clock.nowNanos()
            if now >= deadline { return false }
            unlock()
            clock.sleep(untilNanos: min(deadline, now + 2_000_000))
            lock()
        }
        return true
    }

    /// The last error on the context, as PulseAudio words it ("no context" without one; lock held).
    var lastError: String {
        guard let context else { return "no context" }
        return String(cString: pa_strerror(pa_context_errno(context)))
    }

    /// Creates a context and starts connecting it, without waiting (lock held).
    /// - Parameter configure: called with the new context before it connects (to set its callbacks).
    /// - Returns: false when the context could not be created (`context` stays nil) or
    ///   connecting failed at once (`lastError` says why).
    func startConnect(configure: (OpaquePointer) -> Void = { _ in }) -> Bool {
        let api = pa_threaded_mainloop_get_api(mainloop)
        let props = pa_proplist_new()
        pa_proplist_sets(props, cpulse_prop_application_name(), applicationName)
        defer { pa_proplist_free(props) }
        guard let ctx = pa_context_new_with_proplist(api, applicationName, props) else { return false }
        context = ctx
        configure(ctx)
        return pa_context_connect(ctx, server, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0
    }

    /// Connects and waits (lock held) until the context is ready.
    /// - Parameter configure: as for `startConnect`.
    /// - Throws: `AudioError` when the context cannot be created, or naming the server when it
    ///   cannot be reached, refuses, or does not answer within `timeoutSeconds`.
    func connect(timeoutSeconds: Double, configure: (OpaquePointer) -> Void = { _ in }) throws {
        guard startConnect(configure: configure), let ctx = context else {
            throw AudioError(context == nil ? "cannot create a PulseAudio context" : "cannot connect to \(serverDescription): \(lastError)")
        }
        let ok = wait(seconds: timeoutSeconds) {
            let s = pa_context_get_state(ctx)
            return s == PA_CONTEXT_READY || s == PA_CONTEXT_FAILED || s == PA_CONTEXT_TERMINATED
        }
        guard ok, pa_context_get_state(ctx) == PA_CONTEXT_READY else {
            throw AudioError("cannot connect to \(serverDescription): \(ok ? lastError : "timed out")")
        }
    }

    /// Clears the context's state and subscription callbacks, disconnects and releases it
    /// (lock held; nothing without a context). Streams on it should be closed first.
    func disconnect() {
        if let ctx = context {
            pa_context_set_state_callback(ctx, nil, nil)
            pa_context_set_subscribe_callback(ctx, nil, nil)
            pa_context_disconnect(ctx)
            pa_context_unref(ctx)
        }
        context = nil
    }

    /// Runs `beforeDisconnect` and `disconnect()` with the lock held, then stops the mainloop
    /// thread (gone when this returns) and frees the mainloop. Idempotent (later calls do
    /// nothing, `beforeDisconnect` included); not from a mainloop callback.
    func close(beforeDisconnect: () -> Void = {}) {
        guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        lock()
        beforeDisconnect()
        disconnect()
        unlock()
        pa_threaded_mainloop_stop(mainloop)
        pa_threaded_mainloop_free(mainloop)
    }
}
