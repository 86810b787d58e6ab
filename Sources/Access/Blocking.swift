import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Runs async library code (jwt-kit's key collection is an actor) from a thread that is not
/// one of Swift's cooperative threads (a command's `run()` on the main thread, libFuzzer's
/// driver), so waiting cannot starve the task it waits for. Never call it from async code.
public enum Blocking {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }
}
