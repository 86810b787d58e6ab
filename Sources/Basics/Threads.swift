#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached thread running `body`. The kernel knows it by `name` with "screenshare-"
/// shortened to "ss-" (15 bytes at most: `screenshare-audio` is `ss-audio`), so `top -H` and
/// /proc/PID/task/*/comm (the bench) tell the threads apart. Traps if the system has no thread
/// left to give, as Foundation's `Thread` does.
///
/// `body` is `sending`: what it holds becomes the new thread's alone (a capturer, a socket), so
/// it need not be `Sendable`, and the caller can no longer touch it.
public func startThread(named name: String, _ body: sending @escaping () -> Void) {
    let kernelName = name.hasPrefix("screenshare-") ? "ss-" + name.dropFirst("screenshare-".count) : name
    let start = ThreadStart(name: String(decoding: kernelName.utf8.prefix(15), as: UTF8.self), body: body)
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { argument in
        let start = Unmanaged<ThreadStart>.fromOpaque(argument!).takeRetainedValue()
        setThreadName(start.name)
        start.body()
        return nil
    }, Unmanaged.passRetained(start).toOpaque())
    precondition(rc == 0, "cannot start thread \(name): error \(rc)")
    pthread_detach(thread)
}

/// What the new thread runs, handed over through pthread_create's argument (it goes from the
/// starting thread to the new one, never shared).
private final class ThreadStart {
    let name: String
    let body: () -> Void
    init(name: String, body: sending @escaping () -> Void) { self.name = name; self.body = body }
}

/// Names the calling thread for the kernel (pthread_setname_np and prctl are not visible to
/// Swift here; /proc/thread-self/comm is the same thing). Best effort.
public func setThreadName(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    var n = name
    n.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
