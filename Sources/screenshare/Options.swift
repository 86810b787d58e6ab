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

    /// Where a command's events and log lines go, one format: JSON lines on stdout (`--json`)
    /// or lines for people on stderr, the log lines among the events, above the live status.
    /// - Parameter qrCode: on a terminal, draw a browser link (`start`'s) as a QR code.
    func outputs(qrCode: Bool = false) -> (events: EventSink, logger: Logger) {
        let level = quiet ? Logger.Level.error : (Logger.Level(rawValue: logLevel) ?? .info)
        let human = json ? nil : HumanSink(quiet: quiet, qrCode: qrCode)
        let logger = Logger(label: "screenshare") { _ in HumanLogHandler(sink: human, level: level) }
        return (human ?? JSONLineSink(), logger)
    }
}

/// How `start` and `watch` name a room and its relay: the same flags, parsed, checked and
/// worded once.
struct RoomJoinOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The room: `start` shares in it (hosted here unless --server names a relay), `watch` joins it.", valueName: "name"),
            )
    var room: String?

    @Option(help: ArgumentHelp("The room relay: the host running `screenshare start --room` or `serve` (`watch`'s default: 127.0.0.1:7600).", valueName: "host:port"),
            transform: Parse.endpoint)
    var server: Endpoint?

    @Option(help: ArgumentHelp("The room token the relay at --server asks for (in the `watch` line the presenter printed, or from `screenshare token`).", valueName: "token"),
            transform: Parse.token)
    var token: String?

    @Option(help: ArgumentHelp("The relay at --server must show this certificate (in the `watch` line the presenter printed, or `serve`'s started event); any other is refused (exit 76).", valueName: "sha256:hex"),
            transform: Parse.fingerprint)
    var fingerprint: [UInt8]?

    @Option(help: ArgumentHelp("Your display name in the room (default: your full name, else USER@HOST).", valueName: "name"))
    var name: String?

    /// The room name is checked here rather than by a transform: swift-argument-parser would
    /// echo a refused value whole (a 300-character name), this says it short.
    func validate() throws {
        if let room {
            do { _ = try Parse.room(room) } catch { throw ValidationError("--room \(error)") }
        }
    }

    /// The name the room shows: --name, or USER@HOST.
    var displayName: String { name ?? Start.userName() }
}

/// HTTPS for the relay's page, WHEP and room API (`serve`, and `start` when it hosts the room).
struct TLSOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Serve the browsers' side over HTTPS with this certificate chain (PEM, e.g. certbot's fullchain.pem); plain HTTP is redirected to it; read again on SIGHUP.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("The private key of --tls-cert (PEM, e.g. certbot's privkey.pem).", valueName: "file"))
    var tlsKey: String?

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together: give both, or neither") }
    }

    /// The files read, or nil without them; an unreadable one is said and exits 66.
    func files() throws -> TLSFiles? {
        guard let tlsCert, let tlsKey else { return nil }
        do { return try TLSFiles(certificate: tlsCert, key: tlsKey) } catch {
            printError("screenshare: \(error)")
            throw Exit.noInput
        }
    }
}

/// How a long-running command (`start`, `watch`) ended: the one mapping to an exit code, and
/// the line on stderr that says why when it did not end cleanly.
enum Ending {
    /// Its duration, the end of its input, `ctl stop`, a closed window, the share ended: 0.
    case clean
    /// SIGINT/SIGTERM: 130.
    case interrupted
    /// A failure the events already explained (nil) or this line explains: 1.
    case failed(String?)
    /// The screen or source is gone: 69.
    case sourceGone(String)
    /// The relay or the destination was lost or never reached: 68 (nil: the events said why).
    case network(String?)
    /// The relay refused to admit us: 77 (nil: the `error` event said why).
    case refused(String?)
    /// The relay is not the one pinned: 76 (nil: the `error` event said why).
    case untrusted(String?)

    /// Returns for a clean end; otherwise prints the line (after "screenshare: ") and throws
    /// the exit code.
    func exit() throws {
        let (code, line): (ExitCode, String?) = switch self {
        case .clean: (.success, nil)
        case .interrupted: (Exit.interrupted, nil)
        case .failed(let why): (Exit.failure, why)
        case .sourceGone(let why): (Exit.sourceUnavailable, why)
        case .network(let why): (Exit.network, why)
        case .refused(let why): (Exit.noPermission, why)
        case .untrusted(let why): (Exit.untrustedRelay, why)
        }
        if let line { printError("screenshare: \(line)") }
        if code != .success { throw code }
    }
}

/// The encoding settings a running broadcast can change: flags of `start` and of `ctl set`
/// (same names, same parsers, same checks: `LiveSettings.validate()`). Unset flags keep the
/// current value (`ctl set`) or the default (`start`).
struct EncodingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Largest picture sent: 720p, 1080p, 1440p or WxH (default: long side ≤ 1920).", valueName: "res"),
            transform: Parse.resolution)
    var maxResolution: MaxResolution?

    @Option(help: "Maximum frame rate, 1-60 (default: 15).")
    var fps: Int?

    @Option(help: "Keep-alive frame rate of a still screen, 0-fps (default: 1).")
    var minFps: Double?

    @Option(help: ArgumentHelp("Target bit rate, e.g. 2M or 1600k (default: 2M).", valueName: "bitrate"), transform: Parse.bitrate)
    var bitrate: Bitrate?

    @Option(help: ArgumentHelp("Lowest bit rate under congestion, e.g. 300k.", valueName: "bitrate"), transform: Parse.bitrate)
    var minBitrate: Bitrate?

    @Option(help: ArgumentHelp("Seconds between periodic keyframes, up to 3600 (default: only at start and on request).", valueName: "seconds"))
    var keyframeInterval: Double?

    @Option(help: "Content preference: detail (keep resolution; slides) or motion (keep frame rate) (default: detail).")
    var content: ContentPreference?

    /// `start`'s settings: these flags over the defaults, checked.
    func settings(source: VideoSource) throws -> LiveSettings {
        let s = LiveSettings(fps: fps ?? 15, minFps: minFps ?? 1, bitrate: bitrate ?? Bitrate(bitsPerSecond: 2_000_000),
                             minBitrate: minBitrate, maxResolution: maxResolution, content: content ?? .detail,
                             keyframeIntervalSeconds: keyframeInterval, source: source)
        do { try s.validate() } catch let error as SettingError { throw ValidationError(error.flagDescription) }
        return s
    }

    /// The flags given, as `ctl set` changes (KEY, VALUE), in the order of `LiveSettings.keys`.
    var changes: [SettingChange] {
        var c: [SettingChange] = []
        if let fps { c.append(SettingChange("fps", "\(fps)")) }
        if let minFps { c.append(SettingChange("min-fps", "\(minFps)")) }
        if let bitrate { c.append(SettingChange("bitrate", "\(bitrate.bitsPerSecond)")) }
        if let minBitrate { c.append(SettingChange("min-bitrate", "\(minBitrate.bitsPerSecond)")) }
        if let maxResolution { c.append(SettingChange("max-resolution", "\(maxResolution)")) }
        if let content { c.append(SettingChange("content", content.rawValue)) }
        if let keyframeInterval { c.append(SettingChange("keyframe-interval", "\(keyframeInterval)")) }
        return c
    }
}

/// Which part of the X screen to capture: one of `--region`, `--monitor` or `--window`
/// (none: the whole screen). Flags of `start` and of `ctl set`.
/// `start --capture`: how the screen is captured.
enum CaptureMethod: String, ExpressibleByArgument, CaseIterable {
    case auto, x11, portal
}

struct CaptureSelection: ParsableArguments {
    @Option(help: ArgumentHelp("Capture a region, X11 geometry WxH+X+Y.", valueName: "geometry"), transform: Parse.region)
    var region: PixelRect?

    @Option(help: ArgumentHelp("Capture one RandR monitor, by name or index (see `screenshare sources`).", valueName: "name|index"))
    var monitor: String?

    @Option(help: ArgumentHelp("Capture one window, by id (0x…) or part of its title. Follows moves and resizes; never falls back to the screen (a placeholder is sent while it is hidden).", valueName: "id|title"),
            transform: Parse.window)
    var window: String?

    /// The flags given, by name (to say which ones clash).
    var given: [String] {
        [("--region", region != nil), ("--monitor", monitor != nil), ("--window", window != nil)].filter(\.1).map(\.0)
    }

    /// The source these flags choose; nil when none was given.
    var spec: CaptureSourceSpec? {
        if let region { return .region(region) }
        if let monitor { return .monitor(monitor) }
        if let window { return .window(window) }
        return nil
    }

    /// As a `ctl set source=…` value.
    var settingValue: String? {
        if let region { return "region:\(region)" }
        if let monitor { return "monitor:\(monitor)" }
        if let window { return "window:\(window)" }
        return nil
    }
}

/// The Janus servers a relay feeds (`serve`, and `start --room` when it hosts the room).
struct JanusOptions: ParsableArguments {
    @Option(name: .customLong("janus"), parsing: .singleValue, help: ArgumentHelp("""
        Also fan each shared screen out through this Janus server's streaming plugin (its HTTP API's URL, \
        e.g. http://10.0.0.7:8088/janus); repeat for more servers.
        """, valueName: "url"), transform: { text in
            do throws(SettingError) { return try JanusServer(parsing: text) } catch { throw ValidationError(error.description) }
        })
    var servers: [JanusServer] = []

    @Option(help: ArgumentHelp("The streaming plugin's admin_key (its janus.plugin.streaming.jcfg).", valueName: "key"))
    var janusAdminKey: String?

    @Option(help: ArgumentHelp("Read the streaming plugin's admin_key from FILE (first line).", valueName: "file"))
    var janusAdminKeyFile: String?

    @Flag(name: .customLong("janus-remb"), help: ArgumentHelp("""
        Let each Janus server's REMB (its slowest viewer's estimate) cap what the presenter sends. \
        Off by default: one slow viewer behind Janus would slow the whole room.
        """))
    var janusREMB = false

    func validate() throws {
        if janusAdminKey != nil && janusAdminKeyFile != nil {
            throw ValidationError("--janus-admin-key and --janus-admin-key-file: give one of them")
        }
        if servers.isEmpty && (janusAdminKey != nil || janusAdminKeyFile != nil) {
            throw ValidationError("--janus-admin-key goes with --janus URL: which Janus server is it for?")
        }
        if servers.isEmpty && janusREMB { throw ValidationError("--janus-remb goes with --janus URL: there is no Janus server to listen to") }
        if Set(servers.map(\.description)).count != servers.count { throw ValidationError("--janus: the same server is named twice") }
    }

    /// The servers' threads, started; nil without `--janus`. An unreadable key file is said
    /// and exits 66.
    func cascade() throws -> JanusCascade? {
        guard !servers.isEmpty else { return nil }
        var key = janusAdminKey
        if let file = janusAdminKeyFile {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8),
                  let line = text.split(whereSeparator: \.isNewline).first.map(String.init)?.trimmed(), !line.isEmpty else {
                printError("screenshare: --janus-admin-key-file \(file): cannot be read, or is empty")
                throw Exit.noInput
            }
            key = line
        }
        return try JanusCascade(servers: servers, adminKey: key, capsWithREMB: janusREMB)
    }
}
