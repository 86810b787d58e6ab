import CX11
import Foundation

/// A child process with its output collected to files.
///
/// Spawned with posix_spawn and an empty signal mask with default dispositions: the test
/// runner's threads block SIGINT/SIGTERM, and a child started through Foundation's `Process`
/// inherits that mask and then never sees the signals tests send it.
public final class Child {
    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
    private var status: Int32?

    /// - Parameter environment: variables to set (or override) for the child.
    public init(_ executable: String, _ arguments: [String], dir: String, name: String, environment: [String: String] = [:]) throws {
        stdoutPath = "\(dir)/\(name).out"
        stderrPath = "\(dir)/\(name).err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        let rc = posix_spawn(&child, executable, &actions, &attr, argv, envp)
        guard rc == 0 else { throw TestFailure("cannot start \(executable): \(String(cString: strerror(rc)))") }
        pid = child
    }

    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    public var isRunning: Bool {
        if status != nil { return false }
        var s: Int32 = 0
        if waitpid(pid, &s, WNOHANG) == pid { status = Self.decode(s); return false }
        return true
    }

    private static func decode(_ s: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros; decode by hand. A signal death is 128+N.
        let sig = s & 0x7f
        return sig == 0 ? (s >> 8) & 0xff : 128 + sig
    }

    /// Waits for exit up to `seconds`; then interrupts (SIGINT), then kills. Returns the status.
    @discardableResult
    public func finish(within seconds: Double, interrupt: Bool = true) -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning && Date() < deadline { usleep(20_000) }
        if isRunning && interrupt {
            kill(pid, SIGINT)
            let d2 = Date().addingTimeInterval(5)
            while isRunning && Date() < d2 { usleep(20_000) }
        }
        if isRunning {
            kill(pid, SIGKILL)
            var s: Int32 = 0
            waitpid(pid, &s, 0)
            status = Self.decode(s)
        }
        return status ?? -1
    }
}

/// A private Xvfb (1920x1080x24, MIT-SHM, DAMAGE, XFIXES, RANDR) for one test, so that
/// suites running in parallel and painting their own display never see each other's pixels.
/// Stopped when the value goes away.
public final class PrivateXvfb {
    public let name: String
    private let child: Child

    public init(width: Int = 1920, height: Int = 1080) throws {
        let dir = try makeTempDir()
        // A display number nobody holds: no lock file and no socket.
        var n = 100 + Int(getpid() % 400) * 4 + Int.random(in: 0..<400)
        while FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock") || FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") {
            n += 1
        }
        name = ":\(n)"
        child = try Child(which("Xvfb"), [
            name, "-screen", "0", "\(width)x\(height)x24", "-noreset", "-nolisten", "tcp",
            "+extension", "MIT-SHM", "+extension", "DAMAGE", "+extension", "XFIXES", "+extension", "RANDR",
        ], dir: dir, name: "xvfb")
        let deadline = Date().addingTimeInterval(15)
        while true {
            if let d = XOpenDisplay(name) { XCloseDisplay(d); break }
            guard child.isRunning, Date() < deadline else {
                throw TestFailure("private Xvfb on \(name) did not start: \(child.stderr)")
            }
            usleep(20_000)
        }
    }

    /// Stops the server now (clients see their display go away).
    public func stop() {
        kill(child.pid, SIGTERM)
        child.finish(within: 5, interrupt: false)
    }

    deinit { stop() }
}

public func which(_ name: String) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin", "/sbin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") {
        return "\(dir)/\(name)"
    }
    return name
}

/// Where this test process keeps its files: one directory, removed with everything in it when
/// the process exits (a test run made dozens, some of hundreds of MB, and left them in /tmp).
/// `SCREENSHARE_KEEP_TEST_FILES=1` keeps it, to look at a failed test's logs and captures.
let testFilesRoot: String = {
    let root = NSTemporaryDirectory() + "screenshare-tests-\(getpid())"
    if ProcessInfo.processInfo.environment["SCREENSHARE_KEEP_TEST_FILES"] != "1" {
        atexit { try? FileManager.default.removeItem(atPath: testFilesRoot) }
    }
    return root
}()

/// A new directory for one test's files, inside ``testFilesRoot``.
public func makeTempDir() throws -> String {
    let dir = testFilesRoot + "/e2e-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

