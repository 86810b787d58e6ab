import ArgumentParser
import Broadcast

/// Exit codes, stable and documented in the README.
enum Exit {
    static let usage = ExitCode(64)            // EX_USAGE: a bad flag or value
    static let notBuilt = ExitCode(69)         // EX_UNAVAILABLE: feature not built yet / source unavailable
}

@main
struct Screenshare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screenshare",
        abstract: "Share an X11 screen, window or region as VP8 over RTP.",
        version: "0.1.0-dev",
        subcommands: [Start.self, Watch.self, Serve.self, Sources.self]
    )
}

/// Subcommands whose engine has not landed yet say so plainly and exit 69.
protocol NotBuiltYet: ParsableCommand {
    static var what: String { get }
}

extension NotBuiltYet {
    func run() throws {
        printError("screenshare: \(Self.what) is not built yet; see the README's status section.")
        throw Exit.notBuilt
    }
}

struct Start: NotBuiltYet {
    static let configuration = CommandConfiguration(
        abstract: "Capture, encode and send the screen (not built yet: capture and encode are in progress).")
    static let what = "broadcasting"

    @Option(help: "Send plain RTP to HOST:PORT (RTCP on PORT+1).")
    var to: String?

    @Option(help: "Bit rate, e.g. 2M or 1600k.")
    var bitrate: String = "2M"

    func validate() throws {
        if let to { do { _ = try Endpoint.parse(to) } catch { throw ValidationError("--to: \(error)") } }
        do { _ = try Bitrate.parse(bitrate) } catch { throw ValidationError("--bitrate: \(error)") }
    }
}

struct Watch: NotBuiltYet {
    static let configuration = CommandConfiguration(abstract: "Receive, decode and show a stream (not built yet).")
    static let what = "the viewer"
}

struct Serve: NotBuiltYet {
    static let configuration = CommandConfiguration(abstract: "Run the room relay on its own (not built yet).")
    static let what = "the room relay"
}

struct Sources: NotBuiltYet {
    static let configuration = CommandConfiguration(abstract: "List monitors, windows and audio sources (not built yet).")
    static let what = "source listing"
}

func printError(_ message: String) {
    var stderr = StandardError()
    print(message, to: &stderr)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandleStderr.write(string)
    }
}
