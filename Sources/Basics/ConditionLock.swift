#if canImport(Glibc)
import Glibc
#endif

/// A mutex with a condition variable whose timed waits run on CLOCK_MONOTONIC, so a change of
/// the wall clock neither cuts a wait short nor stretches it (Foundation's NSCondition waits on
/// the wall clock, and pulls in all of Foundation).
public final class ConditionLock: @unchecked Sendable {
    // Both live at fixed addresses for the lock's lifetime, as pthreads requires.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (the lock held) until signalled, or spuriously.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits (the lock held) until signalled, or spuriously, or until CLOCK_MONOTONIC (`SystemClock`'s
    /// `nowNanos`) reaches `deadlineNanos`. Returns false when the deadline has passed.
    public func wait(untilMonotonicNanos deadlineNanos: UInt64) -> Bool {
        var deadline = timespec(tv_sec: Int(deadlineNanos / 1_000_000_000), tv_nsec: Int(deadlineNanos % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    /// Runs `body` with the lock held.
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
