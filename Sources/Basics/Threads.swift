#if canImport(Glibc)
import Glibc
#endif

/// Starts a detached thread running `body`. The kernel knows it by `name` with "screenshare-"
/// shortened to "ss-" (15 bytes at most: `screenshare-audio` is `ss-audio`), so `top -H` and
/// /proc/PID/task/*/comm (the bench) tell the threads apart. Traps if the system has no thread
/// left to give, as Foundation's `Thread` does.
public func startThread(named name: String, _ body: @escaping @Sendable () -> Void) {
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

private final class ThreadStart: Sendable {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
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
