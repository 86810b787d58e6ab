import Foundation
#if canImport(Glibc)
import Glibc
import Events
import MediaCore
import Transport
#endif

/// Moves a single-thread object to the thread that will own it from then on.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Names the calling thread for the kernel (pthread_setname_np and prctl are not visible to
/// Swift here; /proc/thread-self/comm is the same thing). Best effort.
func setThreadName(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY)
    guard fd >= 0 else { return }
    var n = name
    n.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
    close(fd)
}
