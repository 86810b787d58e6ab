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

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Control a running `screenshare start`: pause, resume, stop, status, set.",
        discussion: """
            With neither --room nor --socket, talks to the only broadcaster this user runs.
            `set` takes KEY=VALUE pairs, applied together without restarting the stream:
              fps=1-60  min-fps=N  bitrate=2M  min-bitrate=300k  max-resolution=720p|1080p|1440p|WxH|none
              content=detail|motion  keyframe-interval=SECONDS|none
              source=screen|region:WxH+X+Y|monitor:NAME|window:ID|TITLE
            Examples:
              screenshare ctl pause
              screenshare ctl set bitrate=1M fps=30 content=motion
              screenshare ctl set source=window:Slides
              screenshare ctl status --json
            """)

    @Option(help: "The room of the broadcaster to control.")
    var room: String?

    @Option(help: ArgumentHelp("The control socket of the broadcaster.", valueName: "path"))
    var socket: String?

    @Flag(help: "Print the answer as JSON.")
    var json = false

    @Argument(help: "pause, resume, stop, status or set.")
    var command: String

    @Argument(help: "KEY=VALUE pairs for set.")
    var settings: [String] = []

    func validate() throws {
        guard ["pause", "resume", "stop", "status", "set"].contains(command) else {
            throw ValidationError("'\(command)' is not a ctl command: use pause, resume, stop, status or set")
        }
        if command == "set" && settings.isEmpty { throw ValidationError("set needs KEY=VALUE pairs, e.g. set bitrate=1M") }
        if command != "set" && !settings.isEmpty { throw ValidationError("\(command) takes no KEY=VALUE pairs") }
        for pair in settings where !pair.contains("=") { throw ValidationError("'\(pair)' is not KEY=VALUE") }
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
                path = try ControlSocket.pickOnly(in: dir, entries: entries)
            }
        } catch {
            printError("screenshare ctl: \(error)")
            throw Exit.sourceUnavailable
        }
        let changes = settings.map { pair -> SettingChange in
            let i = pair.firstIndex(of: "=")!
            return SettingChange(String(pair[..<i]), String(pair[pair.index(after: i)...]))
        }
        let request = ControlRequest(ControlCommand(rawValue: command)!, set: command == "set" ? changes : nil)
        let response: ControlResponse
        do {
            response = try ControlSocket.request(request, socketPath: path)
        } catch {
            printError("screenshare ctl: \(error)")
            throw Exit.sourceUnavailable
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
        } else {
            print("screenshare ctl: \(command): ok")
        }
    }
}
