import MediaCore
import Basics

/// The capture thread's verdicts on the sources `ctl set` asks for, so that `set` answers with
/// what the broadcaster did, not what it was asked: each source change takes a ticket; the
/// capture thread, having tried to open the source (or given up on it), answers every ticket up
/// to the one it saw with the outcome.
///
/// The ticket and the settings it belongs to are taken together under the live settings' lock
/// (by `apply` and by the capture thread), so a verdict always names the source it tried.
final class SourceSwitches: @unchecked Sendable {
    // `asked`, `answered` and `failure` are guarded by `lock`: the `@unchecked` is that lock.
    private let lock = ConditionLock()
    private var asked = 0
    private var answered = 0
    private var failure: String?

    /// A new ticket for a source change (call with the live settings' lock held).
    func ask() -> Int { lock.withLock { asked += 1; return asked } }

    /// The latest ticket asked for (call with the live settings' lock held, with the settings read).
    var latest: Int { lock.withLock { asked } }

    /// The capture thread tried the source of `ticket` (and so every earlier one: a later
    /// source replaced them): nil when it is in use, else why not.
    func answer(_ ticket: Int, failure: String?) {
        lock.withLock {
            guard ticket > answered else { return }
            answered = ticket
            self.failure = failure
            lock.broadcast()
        }
    }

    /// Waits until `ticket` is answered or `deadlineNanos` (CLOCK_MONOTONIC) passes.
    /// - Returns: `.some(nil)` when the source is in use, `.some(why)` when it was refused (or a
    ///   later request superseded it and that one was), nil at the deadline.
    func wait(for ticket: Int, untilMonotonicNanos deadlineNanos: UInt64) -> String?? {
        lock.withLock {
            while answered < ticket {
                if !lock.wait(untilMonotonicNanos: deadlineNanos) && answered < ticket { return nil }
            }
            return .some(failure)
        }
    }
}
