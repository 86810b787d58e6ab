import ArgumentParser
import AudioIO
import Control
import Events
import FoundationEssentials
import Logging
import MediaCore
import Basics
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

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Control a running `screenshare start`: pause, resume, stop, status, set, invite.",
        discussion: """
            With neither --room nor --socket, talks to the only broadcaster this user runs. \
            `set` takes the flags `start` takes (--fps 30 --bitrate 1M …, --region, \
            --monitor, --window), or KEY=VALUE pairs, or both; all are applied together
            without restarting the stream, and checked as `start` checks them:
              fps=1-60  min-fps=N  bitrate=2M  min-bitrate=300k|none
              max-resolution=720p|1080p|1440p|WxH|none  content=detail|motion
              keyframe-interval=SECONDS|none
              source=screen|region:WxH+X+Y|monitor:NAME|window:ID|TITLE
            `invite` makes a new invitation link for the room `start` hosts (the old link no \
            longer admits; viewers in the room stay); `invite --revoke` only revokes it.

            Examples:
              screenshare ctl pause
              screenshare ctl set --fps 30 --bitrate 1M --content motion
              screenshare ctl set bitrate=1M fps=30 content=motion
              screenshare ctl set --window Slides
              screenshare ctl set source=screen max-resolution=none
              screenshare ctl status --json
              screenshare ctl invite
            """)

    @Option(help: "The room of the broadcaster to control.")
    var room: String?

    @Option(help: ArgumentHelp("The control socket of the broadcaster.", valueName: "path"))
    var socket: String?

    @Flag(help: "Print the answer as JSON.")
    var json = false

    @Argument(help: "pause, resume, stop, status, set or invite.")
    var command: String

    @Flag(help: "With invite: revoke the invitation link, and make no new one.")
    var revoke = false

    @Flag(help: "With invite: do not draw the new link as a QR code.")
    var noQr = false

    @Argument(help: "KEY=VALUE pairs for set.")
    var settings: [String] = []

    @OptionGroup(title: "Settings for set (as for start)") var encoding: EncodingOptions

    @OptionGroup(title: "Source for set (as for start)") var capture: CaptureSelection

    /// Everything `set` changes: the flags, then the KEY=VALUE pairs.
    var changes: [SettingChange] {
        var c = encoding.changes
        if let source = capture.settingValue { c.append(SettingChange("source", source)) }
        for pair in settings {
            let i = pair.firstIndex(of: "=")!
            c.append(SettingChange(String(pair[..<i]), String(pair[pair.index(after: i)...])))
        }
        return c
    }

    func validate() throws {
        guard ControlCommand(rawValue: command) != nil else {
            throw ValidationError("'\(command)' is not a ctl command: use pause, resume, stop, status, set or invite")
        }
        if revoke && command != "invite" { throw ValidationError("--revoke is for invite") }
        for pair in settings where !pair.contains("=") { throw ValidationError("'\(pair)' is not KEY=VALUE") }
        if command == "set" && changes.isEmpty { throw ValidationError("set needs settings, e.g. set --bitrate 1M or set bitrate=1M") }
        if command != "set" && !changes.isEmpty { throw ValidationError("\(command) takes no settings") }
        if capture.given.count > 1 { throw ValidationError("\(capture.given.joined(separator: " and ")) cannot be used together: choose one source") }
        if room != nil && socket != nil { throw ValidationError("--room and --socket cannot be used together") }
    }

    func run() throws {
        let path: String
        do {
            if let socket { path = socket }
            else if let room { path = ControlSocket.path(label: room) }
            else {
                let dir = ControlSocket.directory()
                let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
                path = try ControlSocket.pickOnly(in: dir, entries: ControlSocket.listening(in: dir, entries: entries))
            }
        } catch {
            throw Exit.failing(with: error, command: "screenshare ctl")
        }
        let request = ControlRequest(ControlCommand(rawValue: command)!, set: command == "set" ? changes : nil,
                                     revoke: command == "invite" && revoke ? true : nil)
        let response: ControlResponse
        do {
            response = try ControlSocket.request(request, socketPath: path)
        } catch {
            throw Exit.failing(with: error, command: "screenshare ctl")
        }
        guard response.ok else {
            printError("screenshare ctl: \(response.error ?? "the broadcaster refused")")
            throw Exit.usage
        }
        if json || command == "status" {
            if json {
                print(response.jsonText)
            } else {
                for (section, fields) in [("settings", response.settings), ("stats", response.stats)] {
                    guard let fields else { continue }
                    print("\(section):")
                    for key in fields.keys.sorted() { print("  \(key): \(fields[key]!.text)") }
                }
            }
        } else if command == "invite", let link = response.link {
            print(link)
            if !noQr, isatty(1) != 0 { print(HumanSink.qrDrawing(link), terminator: "") }
        } else if command == "invite" {
            print("screenshare ctl: invitation link revoked (viewers in the room stay)")
        } else {
            print("screenshare ctl: \(command): ok")
        }
    }
}
