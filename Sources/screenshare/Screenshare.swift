import ArgumentParser
import AudioIO
import CBuildInfo
import Control
import MediaCore
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
        abstract: "Share an X11 screen, window or region as VP8 over RTP.",
        version: String(cString: screenshare_version()),
        subcommands: [Start.self, Watch.self, Serve.self, Token.self, Sources.self, Ctl.self]
    )

    /// ArgumentParser's `main()`, ending with `_exit` instead of `exit`: when a command is done
    /// (its files closed, its BYE sent, its summary printed), the process ends without running
    /// C and C++ exit destructors while library threads still run. `watch` crashed that way
    /// after its summary (status 139, about 1 run in 7: a dispatch worker locking a mutex that
    /// a destructor had freed, the main thread inside libpcre2's exit-time cleanup).
    static func main() {
        let status: Int32
        do {
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
