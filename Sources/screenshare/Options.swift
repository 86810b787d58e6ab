import ArgumentParser
import AudioIO
import Control
import Events
import Foundation
import Logging
import MediaCore
import RTP
import Receiver
import Relay
import Room
import ScreenCapture
import Sender
import Transport
import VP8Codec
import VideoProcessing
#if canImport(Glibc)
import Glibc
#endif

/// `--json`, `--quiet` and `--log-level`, shared by the long-running commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print events as JSON lines on stdout.")
    var json = false

    @Flag(help: "Print nothing but errors.")
    var quiet = false

    @Option(help: ArgumentHelp("Log detail on stderr: debug, info, warning or error.", valueName: "level"))
    var logLevel: String = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level '\(logLevel)': use debug, info, warning or error")
        }
    }

    func logger() -> Logger {
        var logger = Logger(label: "screenshare")
        logger.logLevel = quiet ? .error : (Logger.Level(rawValue: logLevel) ?? .info)
        return logger
    }

    func sink() -> EventSink { json ? JSONLineSink() : HumanSink(quiet: quiet) }
}

/// `--listen`: ADDR:PORT, or :PORT for all addresses.
func parseListen(_ text: String) throws -> Endpoint {
    try Endpoint.parse(text.hasPrefix(":") ? "0.0.0.0" + text : text)
}

/// Room names: 1–64 bytes, no spaces or control characters (the relay checks the same).
func validateRoomName(_ name: String) throws {
    guard !name.isEmpty, name.utf8.count <= 64,
          name.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x21 && $0.value != 0x7F }) else {
        throw SettingsError("'\(name)': a room name is 1 to 64 characters without spaces")
    }
}
