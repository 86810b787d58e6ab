#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A source of time, passed in so tests advance time instead of sleeping.
public protocol MediaClock: Sendable {
    /// Monotonic time in nanoseconds (arbitrary origin).
    func nowNanos() -> UInt64
    /// Wall-clock time in nanoseconds since the Unix epoch (for RTCP NTP timestamps).
    func wallNanos() -> UInt64
    /// Blocks the calling thread until `nowNanos()` reaches `deadline`, or less (at once when
    /// it has): the media threads' pacing waits, so a test clock decides when they end. It may
    /// return early (a signal, a test clock's short nap), so callers look at the time again.
    func sleep(untilNanos deadline: UInt64)
}

/// The system clocks: CLOCK_MONOTONIC and CLOCK_REALTIME.
public struct SystemClock: MediaClock {
    public init() {}
    public func nowNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
    public func wallNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
    public func sleep(untilNanos deadline: UInt64) {
        let now = nowNanos()
        if deadline > now { sleepNanos(deadline - now) }
    }
}

/// A clock that moves only when told to; for tests.
public final class ManualClock: MediaClock {
    private let now: Mutex<UInt64>
    private let wallOffset: UInt64
    public init(startNanos: UInt64 = 1_000_000_000, wallOffsetNanos: UInt64 = 1_700_000_000_000_000_000) {
        now = Mutex(startNanos)
        wallOffset = wallOffsetNanos
    }
    public func nowNanos() -> UInt64 { now.withLock { $0 } }
    public func wallNanos() -> UInt64 { now.withLock { $0 } &+ wallOffset }
    public func advance(nanos: UInt64) { now.withLock { $0 += nanos } }
    /// Naps 1 ms of real time unless the clock already reached `deadline`: the caller looks at
    /// the time again, so it waits for the test to advance the clock while still noticing,
    /// between naps, that it was asked to stop.
    public func sleep(untilNanos deadline: UInt64) {
        if nowNanos() < deadline { sleepNanos(1_000_000) }
    }
    public func advance(milliseconds: Double) { advance(nanos: UInt64(milliseconds * 1_000_000)) }
}

/// Sleeps the calling thread for `nanos` (the media threads' pacing waits).
public func sleepNanos(_ nanos: UInt64) {
    var ts = timespec(tv_sec: Int(nanos / 1_000_000_000), tv_nsec: Int(nanos % 1_000_000_000))
    nanosleep(&ts, nil)
}
