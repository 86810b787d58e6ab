import ArgumentParser
import AudioIO
import Control
import Events
import FoundationEssentials
import Logging
import MediaCore
import Basics
import Portal
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

struct Sources: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the monitors, windows and audio sources that can be shared.",
        discussion: """
            Use a monitor's name or index with `start --monitor`, a window's id (or part of its \
            title) with `start --window`, an application's name, binary or pid:N with \
            `start --audio-app`, a source's name with `start --mic`, a sink's name with \
            `start --audio-output`. Without PulseAudio the audio part says it is unavailable.
            """)

    @Option(help: ArgumentHelp("X display (default: $DISPLAY).", valueName: ":N"))
    var display: String?

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    func run() throws {
        // What a Wayland desktop's portal offers (asked without a dialog).
        let portal = Result { () throws(PortalError) in try ScreenCastSession.availability() }
        // A Wayland session without X (no XWayland) still shares through the portal: the X
        // display's absence is said, not fatal, unless nothing can be shared at all.
        let x11: Result<DisplaySources, CaptureError>
        do {
            x11 = .success(try listDisplaySources(display: display))
        } catch let error as CaptureError {
            x11 = .failure(error)
        }
        if case .failure(let error) = x11, case .failure(let why) = portal {
            printError("screenshare: \(error); and no portal either (\(why))")
            throw Exit.sourceUnavailable
        }
        var logger = Logger(label: "screenshare")
        logger.logLevel = .error
        let audio = Result { try PulseCapture.inventory(logger: logger) }
        if json {
            func rect(_ r: PixelRect) -> JSONValue {
                .object(["x": .int(r.x), "y": .int(r.y), "width": .int(r.width), "height": .int(r.height)])
            }
            var value: [String: JSONValue] = ["audio": Self.audioJSON(audio), "portal": Self.portalJSON(portal)]
            switch x11 {
            case .success(let list):
                value["display"] = .string(list.display)
                value["screen"] = .object(["width": .int(list.screen.width), "height": .int(list.screen.height)])
                value["monitors"] = .array(list.monitors.map { m in
                    .object(["index": .int(m.index), "name": .string(m.name), "primary": .bool(m.primary), "geometry": rect(m.rect)])
                })
                value["windows"] = .array(list.windows.map { w in
                    .object(["id": .string("0x" + String(w.id, radix: 16)), "title": .string(w.title),
                             "mapped": .bool(w.mapped), "geometry": rect(w.rect)])
                })
            case .failure(let error):
                value["display"] = .null
                value["display_error"] = .string("\(error)")
                value["monitors"] = .array([])
                value["windows"] = .array([])
            }
            print(JSONValue.object(value).jsonText)
            return
        }
        switch x11 {
        case .success(let list):
            print("display \(list.display): screen \(list.screen)")
            print("monitors:")
            if list.monitors.isEmpty { print("  (none reported by RandR)") }
            for m in list.monitors {
                print("  \(m.index)  \(m.name)  \(m.rect)\(m.primary ? "  primary" : "")")
            }
            print("windows:")
            if list.windows.isEmpty { print("  (none with a title)") }
            for w in list.windows {
                print("  0x\(String(w.id, radix: 16))  \(w.rect)\(w.mapped ? "" : "  (not mapped)")  \(w.title)")
            }
        case .failure(let error):
            print("X11: unavailable (\(error)); the portal below shares the screen")
        }
        switch portal {
        case .failure(let error): print("portal (Wayland): unavailable (\(error))")
        case .success(let offered): print("portal (Wayland): \(Self.portalWords(offered))")
        }
        switch audio {
        case .failure(let error):
            print("audio: unavailable (\(error))")
        case .success(let inv):
            print("audio applications (PulseAudio sink inputs at \(inv.server); start --audio-app NAME|BINARY|pid:N):")
            if inv.applications.isEmpty { print("  (none playing)") }
            for a in inv.applications {
                let media = a.mediaName.isEmpty ? "" : "  \"\(a.mediaName)\""
                print("  #\(a.index)  \(a.name.isEmpty ? "(no name)" : a.name)  binary \(a.binary.isEmpty ? "-" : a.binary)  pid \(a.pid.isEmpty ? "-" : a.pid)\(media)")
            }
            print("audio sources (microphones; start --mic NAME):")
            if inv.sources.isEmpty { print("  (none)") }
            for d in inv.sources {
                let monitor = d.monitor.map { "  (monitor of \($0))" } ?? ""
                print("  \(d.name)  \(d.description)\(monitor)\(d.isDefault ? "  default" : "")")
            }
            print("audio outputs (sinks; start --audio-output SINK):")
            if inv.sinks.isEmpty { print("  (none)") }
            for d in inv.sinks {
                print("  \(d.name)  \(d.description)\(d.isDefault ? "  default" : "")")
            }
        }
    }

    /// What the portal offers, in words: "monitors and windows, the pointer drawn (ScreenCast v4)".
    static func portalWords(_ offered: ScreenCastAvailability) -> String {
        let kinds = portalSourceTypes(offered).map { $0 == "monitor" ? "monitors" : $0 == "window" ? "windows" : $0 }
        let pointer = offered.cursorModes & 6 != 0 ? "the pointer drawn" : "no pointer"
        return "\(kinds.joined(separator: " and ")), \(pointer) (ScreenCast v\(offered.version))"
    }

    static func portalSourceTypes(_ offered: ScreenCastAvailability) -> [String] {
        [(1, "monitor"), (2, "window"), (4, "virtual")].filter { offered.sourceTypes & $0.0 != 0 }.map(\.1)
    }

    /// The `portal` member of `sources --json` (docs/COMMANDS.md).
    static func portalJSON(_ portal: Result<ScreenCastAvailability, PortalError>) -> JSONValue {
        switch portal {
        case .failure(let error):
            return .object(["available": .bool(false), "error": .string(error.message)])
        case .success(let offered):
            return .object([
                "available": .bool(true), "version": .int(Int(offered.version)),
                "source_types": .array(portalSourceTypes(offered).map { .string($0) }),
                "cursor_modes": .array([(1, "hidden"), (2, "embedded"), (4, "metadata")].filter { offered.cursorModes & $0.0 != 0 }.map { .string($0.1) }),
            ])
        }
    }

    /// The `audio` member of `sources --json` (documented in the README).
    static func audioJSON(_ audio: Result<AudioInventory, any Error>) -> JSONValue {
        switch audio {
        case .failure(let error):
            return .object(["available": .bool(false), "error": .string("\(error)")])
        case .success(let inv):
            let sinkNames = Dictionary(inv.sinks.map { ($0.index, $0.name) }, uniquingKeysWith: { a, _ in a })
            return .object([
                "available": .bool(true),
                "server": .string(inv.server),
                "applications": .array(inv.applications.map { a in
                    .object(["index": .int(Int(a.index)), "name": .string(a.name), "binary": .string(a.binary),
                             "pid": Int(a.pid).map { .int($0) } ?? .null, "media_name": .string(a.mediaName),
                             "sink": sinkNames[a.sink].map { .string($0) } ?? .null])
                }),
                "sources": .array(inv.sources.map { d in
                    .object(["index": .int(Int(d.index)), "name": .string(d.name), "description": .string(d.description),
                             "default": .bool(d.isDefault), "monitor_of": d.monitor.map { .string($0) } ?? .null])
                }),
                "sinks": .array(inv.sinks.map { d in
                    .object(["index": .int(Int(d.index)), "name": .string(d.name), "description": .string(d.description),
                             "default": .bool(d.isDefault)])
                }),
            ])
        }
    }
}
