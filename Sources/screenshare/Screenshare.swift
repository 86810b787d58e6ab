import ArgumentParser
import AudioIO
import CBuildInfo
import Control
import MediaCore
import Basics
import ScreenCapture
import Sender
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// Exit codes, stable and documented in the README.
enum Exit {
    static let failure = ExitCode(1)           // an unrecoverable runtime failure
    static let usage = ExitCode(64)            // EX_USAGE: a bad flag or value
    static let noInput = ExitCode(66)          // EX_NOINPUT: --input or --sdp file unusable
    static let network = ExitCode(68)          // EX_NOHOST: destination cannot be resolved or reached, a port is in use,
                                                //   or the room relay was lost (3 retries failed)
    static let sourceUnavailable = ExitCode(69) // EX_UNAVAILABLE: display/region/source not available or gone,
                                                //   or audio asked for explicitly and PulseAudio (or that source) unavailable
    static let untrustedRelay = ExitCode(76)    // EX_PROTOCOL: the relay's certificate is not the one --fingerprint pinned
    static let noPermission = ExitCode(77)      // EX_NOPERM: the relay refused to admit us (token missing, expired, wrong room or role)
    static let interrupted = ExitCode(130)     // stopped by SIGINT/SIGTERM (after a clean RTCP BYE)
}

extension Exit {
    /// The one mapping from an error a command cannot recover from to its exit code.
    static func code(for error: any Error) -> ExitCode {
        switch error {
        case is SettingError: return usage
        case is FileError: return noInput
        case is NetworkError: return network
        case is CaptureError, is AudioError, is ControlError: return sourceUnavailable
        default: return failure
        }
    }

    /// Prints what went wrong (naming the part that failed) and returns the exit code to throw.
    static func failing(with error: any Error, command: String = "screenshare") -> ExitCode {
        printError(error is AudioError ? "\(command): audio: \(error)" : "\(command): \(error)")
        return code(for: error)
    }
}

@main
struct Screenshare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screenshare",
        abstract: "Share your screen with a room: viewers watch in a browser or with `screenshare watch`.",
        discussion: """
            Getting started:
              screenshare start --room class    share the screen; prints a link
              screenshare watch LINK            watch it (or open LINK in a browser)
              screenshare ctl stop              stop sharing (or Ctrl-C)
              screenshare serve --open          a relay for many rooms
              screenshare start --to HOST:PORT --sdp s.sdp   plain RTP (ffmpeg, VLC)

            X11 screens, windows and regions are shared; on a Wayland desktop, the screen or \
            window chosen in the desktop's dialog (xdg-desktop-portal and PipeWire, asked once).
            """,
        version: String(cString: screenshare_version()),
        subcommands: [Start.self, Watch.self, Serve.self, Token.self, Sources.self, Ctl.self]
    )

    /// ArgumentParser's `main()`, ending with `_exit` instead of `exit`: when a command is done
    /// (its files closed, its BYE sent, its summary printed), the process ends without running
    /// C and C++ exit destructors while library threads still run. `watch` crashed that way
    /// after its summary (status 139, about 1 run in 7: a dispatch worker locking a mutex that
    /// a destructor had freed, the main thread inside libpcre2's exit-time cleanup).
    /// The first `--option` in `arguments` that its subcommand does not have (its help lists
    /// them all), and the known one nearest to it (edit distance at most 2); nil when all are known.
    static func unknownOption(in arguments: [String]) -> (given: String, nearest: String?)? {
        guard let name = arguments.first,
              let command = configuration.subcommands.first(where: { $0._commandName == name }) else { return nil }
        let help = helpMessage(for: command, columns: 10_000)
        var known = Set(help.matches(of: /--[a-z0-9][a-z0-9-]*/).map { String($0.output) })
        known.formUnion(["--help", "--version"])
        for argument in arguments.dropFirst() {
            if argument == "--" { break }
            guard argument.hasPrefix("--") else { continue }
            let given = String(argument.split(separator: "=", maxSplits: 1).first ?? "")
            if known.contains(given) { continue }
            return (given, nearest(to: given, in: known))
        }
        return nil
    }

    /// The first argument when it is no subcommand (nor an option, nor `help`), and the
    /// subcommand nearest to it: `screenshare strat` reads "unknown command 'strat'. Did you
    /// mean 'start'?" rather than "Unexpected argument".
    static func unknownCommand(in arguments: [String]) -> (given: String, nearest: String?)? {
        guard let name = arguments.first, !name.hasPrefix("-"), name != "help" else { return nil }
        let names = configuration.subcommands.map { $0._commandName }
        return names.contains(name) ? nil : (name, nearest(to: name, in: names))
    }

    /// The candidate nearest to `given` (edit distance at most 2); of those as near, one that
    /// starts as it does (`--rom`: `--room`, not `--from`), then the first in order, so the same
    /// typo always gets the same answer.
    static func nearest(to given: some StringProtocol, in candidates: some Sequence<String>) -> String? {
        func start(_ s: some StringProtocol) -> Character? { s.first { $0 != "-" } }
        return candidates.map { ($0, editDistance(String(given), $0), start($0) == start(given) ? 0 : 1) }
            .filter { $0.1 <= 2 }
            .min { ($0.1, $0.2, $0.0) < ($1.1, $1.2, $1.0) }?.0
    }

    /// Levenshtein distance.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(b.count, 1) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }

    static func main() {
        let status: Int32
        do {
            // An option no subcommand knows is said first, with the nearest one: swift-argument-
            // parser runs the commands' checks before it looks for unknown options, so `--rom
            // class` would otherwise read "missing --room".
            if let (given, nearest) = unknownOption(in: Array(CommandLine.arguments.dropFirst())) {
                printError("Error: unknown option '\(given)'" + (nearest.map { ". Did you mean '\($0)'?" } ?? ""))
                printError("  See 'screenshare \(CommandLine.arguments.dropFirst().first ?? "") --help' for its options.")
                fflush(nil)
                _exit(Exit.usage.rawValue)
            }
            if let (given, nearest) = unknownCommand(in: Array(CommandLine.arguments.dropFirst())) {
                // A link pasted without `watch`: say how to watch it.
                let link = given.contains("://") ? ". To watch a link: screenshare watch '\(given)'" : nil
                printError("Error: unknown command '\(given)'" + (link ?? nearest.map { ". Did you mean '\($0)'?" } ?? ""))
                printError("  See 'screenshare --help' for the commands.")
                fflush(nil)
                _exit(Exit.usage.rawValue)
            }
            var command = try parseAsRoot()
            try command.run()
            status = 0
        } catch {
            status = exitCode(for: error).rawValue
            let message = fullMessage(for: error)
            if !message.isEmpty {
                if status == 0 { print(message) } else { printError(message) }
            }
        }
        fflush(nil)  // every C stream (`print` buffers stdout when it is a pipe)
        _exit(status)
    }
}
