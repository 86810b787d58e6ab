import ArgumentParser
import AudioIO
import Broadcast
import Foundation
import Logging
import MediaCore
import RTP
import Room
import ScreenCapture
import Synchronization
import VP8Codec
import VideoProcessing
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
    static let interrupted = ExitCode(130)     // stopped by SIGINT/SIGTERM (after a clean RTCP BYE)
}

@main
struct Screenshare: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screenshare",
        abstract: "Share an X11 screen, window or region as VP8 over RTP.",
        version: "0.1.0-dev",
        subcommands: [Start.self, Watch.self, Serve.self, Sources.self, Ctl.self]
    )
}

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture, encode (VP8) and send the screen, a region or raw frames over RTP.",
        discussion: """
            Two ways to send: to a room (--room; viewers join with `screenshare watch --room`),
            hosted by this command itself on UDP port 7600 unless --server names a relay
            (`screenshare serve`), or plain RTP to one receiver (--to; ffmpeg/GStreamer/VLC via --sdp).
            Examples:
              screenshare start --room class                              # then, anywhere: screenshare watch --room class --server THIS-HOST:7600
              screenshare start --room class --server relay.example:7600 --name "Ms Smith"
              screenshare start --to 127.0.0.1:5004 --sdp stream.sdp     # then: ffplay -protocol_whitelist file,udp,rtp stream.sdp
              screenshare start --to 10.0.0.5:5004 --region 1280x720+0+0 --fps 30 --content motion
              screenshare start --to 127.0.0.1:5004 --input frames.nv12 --input-format nv12 --input-size 1280x720
            """)

    @Option(help: ArgumentHelp("Send plain RTP to HOST:PORT (RTCP on PORT+1).", valueName: "host:port"))
    var to: String?

    @Option(help: ArgumentHelp("Share in this room. Hosts the room here (see --listen) unless --server is given.", valueName: "name"))
    var room: String?

    @Option(help: ArgumentHelp("Publish to the room relay at HOST:PORT (`screenshare serve`) instead of hosting the room.", valueName: "host:port"))
    var server: String?

    @Option(help: ArgumentHelp("Where the room this command hosts listens: ADDR:PORT or :PORT.", valueName: "addr:port"))
    var listen: String = "0.0.0.0:7600"

    @Option(help: ArgumentHelp("Your display name in the room (default: USER@HOST).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Write an SDP file for ffmpeg/ffplay/GStreamer/VLC (with --to).", valueName: "file"))
    var sdp: String?

    @Option(help: ArgumentHelp("Stop cleanly (RTCP BYE) after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("X display to capture (default: $DISPLAY).", valueName: ":N"))
    var display: String?

    @Option(help: ArgumentHelp("Capture a region, X11 geometry WxH+X+Y.", valueName: "geometry"))
    var region: String?

    @Option(help: ArgumentHelp("Capture one RandR monitor, by name or index (see `screenshare sources`).", valueName: "name|index"))
    var monitor: String?

    @Option(help: ArgumentHelp("Capture one window, by id (0x…) or part of its title. Follows moves and resizes; never falls back to the screen (a placeholder is sent while it is hidden).", valueName: "id|title"))
    var window: String?

    @Flag(help: "Do not draw the cursor into the picture.")
    var noCursor = false

    @Option(help: ArgumentHelp("Read raw frames from FILE instead of the screen ('-' for stdin; a file loops).", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("Layout of --input frames: nv12, bgra or i420.", valueName: "format"))
    var inputFormat: String = "nv12"

    @Option(help: ArgumentHelp("Size of --input frames.", valueName: "WxH"))
    var inputSize: String?

    @Option(help: ArgumentHelp("Frame rate of --input (default: --fps).", valueName: "fps"))
    var inputFps: Double?

    @Option(help: ArgumentHelp("Largest picture sent: 720p, 1080p, 1440p or WxH (default: long side ≤ 1920).", valueName: "res"))
    var maxResolution: String?

    @Option(help: "Maximum frame rate (1-60).")
    var fps: Int = 15

    @Option(help: "Keep-alive frame rate of a still screen (0-fps).")
    var minFps: Double = 1

    @Option(help: "Target bit rate, e.g. 2M or 1600k.")
    var bitrate: String = "2M"

    @Option(help: "Lowest bit rate under congestion, e.g. 300k.")
    var minBitrate: String?

    @Option(help: ArgumentHelp("Seconds between periodic keyframes (default: only at start and on request).", valueName: "seconds"))
    var keyframeInterval: Double?

    @Option(help: "Content preference: detail (keep resolution; slides) or motion (keep frame rate).")
    var content: String = "detail"

    @Option(help: ArgumentHelp("libvpx speed, -16 to 16: positive adapts the speed so an encode takes about (16-N)/16 of the frame time, negative fixes it; lower is slower and sharper (default: 8 for motion, 10 for detail).", valueName: "N"))
    var cpuUsed: Int?

    @Option(help: ArgumentHelp("Control socket for `screenshare ctl` (default: $XDG_RUNTIME_DIR/screenshare/pid-PID.sock, or /tmp/screenshare-UID/…).", valueName: "path"))
    var controlSocket: String?

    @Option(help: ArgumentHelp("Share one application's sound: its PulseAudio application.name, its binary, or pid:N (see `screenshare sources`). Waits for it to play; follows it when it restarts.", valueName: "name|pid:N"))
    var audioApp: String?

    @Option(defaultAsFlag: "@default", parsing: .next,
            help: ArgumentHelp("Share everything a sink plays (its monitor) instead of one application (default: the default sink).", valueName: "sink"))
    var audioOutput: String? = nil

    @Option(defaultAsFlag: "@default", parsing: .next,
            help: ArgumentHelp("Microphone: a PulseAudio source name or index (default: the default source; on unless --no-mic).", valueName: "source"))
    var mic: String? = nil

    @Flag(help: "No microphone.")
    var noMic = false

    @Flag(help: "No audio stream at all.")
    var noAudio = false

    @Option(parsing: .unconditional, help: ArgumentHelp("Gain of the application (or output) sound in dB (e.g. -6).", valueName: "dB"))
    var appGain: Double = 0

    @Option(parsing: .unconditional, help: ArgumentHelp("Gain of the microphone in dB (e.g. -6).", valueName: "dB"))
    var micGain: Double = 0

    @Option(help: "Opus bit rate, e.g. 64k (6k to 510k).")
    var audioBitrate: String = "64k"

    @OptionGroup var output: OutputOptions

    /// The audio part of the broadcast, or nil for none.
    func audioConfig() throws -> AudioSendConfig? {
        if noAudio { return nil }
        let program: AudioCaptureConfig.Program
        if let audioApp { program = .application(try AppMatcher(audioApp)) }
        else if let audioOutput { program = .output(sink: audioOutput == "@default" ? nil : audioOutput) }
        else { program = .none }
        let micSource: String?? = noMic ? nil : .some(mic == "@default" ? nil : mic)
        var capture = AudioCaptureConfig(program: program, mic: micSource)
        capture.programGainDecibels = appGain
        capture.micGainDecibels = micGain
        guard capture.hasSources else { return nil }
        var config = AudioSendConfig(capture: capture)
        config.required = audioApp != nil || audioOutput != nil || (mic != nil && mic != "@default")
        config.bitrate = try Bitrate.parse(audioBitrate)
        return config
    }

    func validate() throws {
        if room != nil, to != nil { throw ValidationError("--room and --to cannot be used together: share in a room, or send plain RTP to one receiver") }
        if let room {
            do { try validateRoomName(room) } catch { throw ValidationError("--room: \(error)") }
            if sdp != nil { throw ValidationError("--sdp describes a plain RTP stream: use it with --to, not --room") }
            if let server { do { _ = try Endpoint.parse(server) } catch { throw ValidationError("--server: \(error)") } }
            do { _ = try parseListen(listen) } catch { throw ValidationError("--listen: \(error)") }
        } else {
            if server != nil { throw ValidationError("--server needs --room NAME") }
            guard let to else { throw ValidationError("missing --room NAME (or --to HOST:PORT for plain RTP)") }
            do { _ = try Endpoint.parse(to) } catch { throw ValidationError("--to: \(error)") }
        }
        do { _ = try Bitrate.parse(bitrate) } catch { throw ValidationError("--bitrate: \(error)") }
        if let minBitrate { do { _ = try Bitrate.parse(minBitrate) } catch { throw ValidationError("--min-bitrate: \(error)") } }
        guard (1...60).contains(fps) else { throw ValidationError("--fps \(fps): must be from 1 to 60") }
        guard minFps >= 0, minFps <= Double(fps) else { throw ValidationError("--min-fps \(minFps): must be from 0 to --fps (\(fps))") }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
        if let keyframeInterval, !(keyframeInterval > 0) { throw ValidationError("--keyframe-interval \(keyframeInterval): must be more than 0") }
        if let cpuUsed, !(-16...16).contains(cpuUsed) { throw ValidationError("--cpu-used \(cpuUsed): must be from -16 to 16") }
        guard ContentPreference(rawValue: content) != nil else { throw ValidationError("--content '\(content)': use detail or motion") }
        if let maxResolution { do { _ = try MaxResolution.parse(maxResolution) } catch { throw ValidationError("--max-resolution: \(error)") } }
        if let region { do { _ = try CaptureSourceSpec.parseRegion(region) } catch { throw ValidationError("--region: \(error)") } }
        let sourceFlags = [("--region", region), ("--monitor", monitor), ("--window", window), ("--input", input)].filter { $0.1 != nil }.map(\.0)
        if sourceFlags.count > 1 { throw ValidationError("\(sourceFlags.joined(separator: " and ")) cannot be used together: choose one source") }
        if let window, window.allSatisfy({ $0 == " " }) { throw ValidationError("--window: give a window id or part of its title") }
        if input != nil {
            guard RawPixelFormat(rawValue: inputFormat) != nil else { throw ValidationError("--input-format '\(inputFormat)': use nv12, bgra or i420") }
            guard let inputSize else { throw ValidationError("--input needs --input-size WxH") }
            guard parseSize(inputSize) != nil else { throw ValidationError("--input-size '\(inputSize)': expected WxH, e.g. 1280x720") }
        }
        if let inputFps, !(inputFps > 0 && inputFps <= 240) { throw ValidationError("--input-fps \(inputFps): must be from 0 to 240") }
        try validateAudio()
    }

    func validateAudio() throws {
        let audioFlags = [("--audio-app", audioApp != nil), ("--audio-output", audioOutput != nil), ("--mic", mic != nil),
                          ("--no-mic", noMic)].filter(\.1).map(\.0)
        if noAudio, let first = audioFlags.first { throw ValidationError("--no-audio and \(first) contradict each other") }
        if audioApp != nil && audioOutput != nil { throw ValidationError("--audio-app and --audio-output cannot be used together: choose one") }
        if noMic && mic != nil { throw ValidationError("--mic and --no-mic contradict each other") }
        if let audioApp { do { _ = try AppMatcher(audioApp) } catch { throw ValidationError("--audio-app: \(error)") } }
        for (flag, value) in [("--app-gain", appGain), ("--mic-gain", micGain)] where !(value >= -60 && value <= 30) {
            throw ValidationError("\(flag) \(value): must be from -60 to 30 dB")
        }
        let rate: Bitrate
        do { rate = try Bitrate.parse(audioBitrate) } catch { throw ValidationError("--audio-bitrate: \(error)") }
        guard rate.bitsPerSecond >= 6_000 && rate.bitsPerSecond <= 510_000 else {
            throw ValidationError("--audio-bitrate '\(audioBitrate)': Opus takes 6k to 510k")
        }
        if !noAudio, room == nil, let to, let endpoint = try? Endpoint.parse(to), endpoint.port > 65532 {
            throw ValidationError("--to '\(to)': audio uses PORT+2 and PORT+3, so the port must be at most 65532 (or use --no-audio)")
        }
    }

    func parseSize(_ text: String) -> PixelSize? {
        let p = text.lowercased().split(separator: "x")
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w > 0, h > 0 else { return nil }
        return PixelSize(width: w, height: h)
    }

    func run() throws {
        let source: VideoSource
        if let input {
            source = .raw(path: input, format: RawPixelFormat(rawValue: inputFormat)!, size: parseSize(inputSize!)!, fps: inputFps ?? Double(fps))
        } else {
            let spec: CaptureSourceSpec
            if let region { spec = .region(try CaptureSourceSpec.parseRegion(region)) }
            else if let monitor { spec = .monitor(monitor) }
            else if let window { spec = .window(window) }
            else { spec = .screen }
            source = .x11(display: display, source: spec, drawCursor: !noCursor)
        }
        let logger = output.logger()
        let sink = output.sink()
        var destination: Endpoint
        var relay: RelayServer?
        var roomSettings: RoomSettings?
        if let room {
            if let server {
                destination = try Endpoint.parse(server)
                roomSettings = RoomSettings(name: room, displayName: name ?? Self.userName(), server: server)
            } else {
                // Host the room here: the relay runs in this process; we publish to it over loopback.
                let listenAt = try parseListen(listen)
                do {
                    relay = try RelayServer(host: listenAt.host, port: listenAt.port, events: nil, logger: logger)
                } catch let error as NetworkError {
                    printError("screenshare: --listen \(listen): \(error). Is another `screenshare start --room` or `serve` running? Use --listen :PORT, or --server HOST:PORT to join it.")
                    throw Exit.network
                }
                relay!.start()
                let local = listenAt.host == "0.0.0.0" ? "127.0.0.1" : listenAt.host
                destination = Endpoint(host: local, port: listenAt.port)
                let reachable = listenAt.host == "0.0.0.0" ? (localIPv4Addresses().first ?? "127.0.0.1") : listenAt.host
                var settings = RoomSettings(name: room, displayName: name ?? Self.userName(), server: "\(reachable):\(listenAt.port)")
                settings.watchCommand = "screenshare watch --room \(room) --server \(reachable):\(listenAt.port)"
                roomSettings = settings
            }
        } else {
            destination = try Endpoint.parse(to!)
        }
        var config = BroadcastConfig(source: source, destination: destination, cname: Self.cname())
        config.room = roomSettings
        config.maxResolution = try maxResolution.map(MaxResolution.parse)
        config.fps = fps
        config.minFps = minFps
        config.bitrate = try Bitrate.parse(bitrate)
        config.minBitrate = try minBitrate.map(Bitrate.parse)
        config.keyframeIntervalSeconds = keyframeInterval
        config.content = ContentPreference(rawValue: content)!
        config.cpuUsed = cpuUsed
        config.sdpPath = sdp
        config.durationSeconds = duration
        config.controlSocketPath = controlSocket ?? ControlSocket.path(label: room ?? "pid-\(getpid())")
        config.audio = try audioConfig()
        defer { relay?.stop() }

        let broadcaster: Broadcaster
        do {
            broadcaster = try Broadcaster(config: config, events: sink, logger: logger)
        } catch let error as NetworkError {
            printError("screenshare: \(error)")
            throw Exit.network
        }
        let signals = SignalWatcher { signal in
            switch signal {
            case SIGUSR1: broadcaster.setPaused(true)
            case SIGUSR2: broadcaster.setPaused(false)
            default: broadcaster.stop(.requested, detail: "signal \(signal)")
            }
        }
        let result: (reason: StopReason, detail: String, summary: [String: JSONValue])
        do {
            result = try broadcaster.run()
        } catch let error as CaptureError {
            printError("screenshare: \(error)")
            throw Exit.sourceUnavailable
        } catch let error as SettingsError {
            printError("screenshare: \(error)")
            throw Exit.noInput
        } catch let error as AudioError {
            printError("screenshare: audio: \(error)")
            throw Exit.sourceUnavailable
        } catch let error as NetworkError {
            printError("screenshare: \(error)")
            throw Exit.network
        }
        _ = signals
        switch result.reason {
        case .duration, .endOfInput, .control: return
        case .requested: throw Exit.interrupted
        case .sourceGone:
            printError("screenshare: source gone: \(result.detail)")
            throw Exit.sourceUnavailable
        case .failed:
            printError("screenshare: \(result.detail)")
            throw Exit.failure
        case .disconnected:
            printError("screenshare: \(result.detail)")
            throw Exit.network
        }
    }

    static func userName() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let h = host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let user = ProcessInfo.processInfo.environment["USER"] ?? "user"
        return "\(user)@\(h)"
    }

    static func cname() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let name = host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "screenshare-\(getpid())@\(name)"
    }
}

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Join a room (or receive a plain stream from an SDP file), decode and show or record it.",
        discussion: """
            Sends RTCP back (receiver reports, NACK for lost packets, PLI when a picture cannot be
            repaired): to the room relay, or to the sender of a plain stream.
            Examples:
              screenshare watch --room class --server 192.168.1.20:7600
              screenshare watch --room class --server relay.example:7600 --from "Ms Smith" --headless --record class.webm
              screenshare watch --sdp stream.sdp
              screenshare watch --sdp stream.sdp --headless --record talk.webm --duration 60 --json
            """)

    @Option(help: ArgumentHelp("The SDP `screenshare start --sdp` wrote.", valueName: "file"))
    var sdp: String?

    @Option(help: ArgumentHelp("Join this room.", valueName: "name"))
    var room: String?

    @Option(help: ArgumentHelp("The room relay: the host running `screenshare start --room` or `serve`.", valueName: "host:port"))
    var server: String = "127.0.0.1:7600"

    @Option(help: ArgumentHelp("Your display name in the room (default: USER@HOST).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("Watch this presenter (name or peer id; default: the first one sharing a screen).", valueName: "peer"))
    var from: String?

    @Flag(help: "No window: decode, record and report only.")
    var headless = false

    @Option(help: ArgumentHelp("X display for the window (default: $DISPLAY).", valueName: ":N"))
    var display: String?

    @Option(help: ArgumentHelp("Write what arrived to a WebM file (VP8 and Opus as received, not re-encoded).", valueName: "file"))
    var record: String?

    @Option(help: ArgumentHelp("Write one MD5 per decoded picture to FILE, as ffmpeg's `-f framemd5` does for yuv420p.", valueName: "file"))
    var framesMd5: String?

    @Flag(help: "Do not play the audio (it is still received, reported and recorded).")
    var noAudioPlayback = false

    @Option(help: ArgumentHelp("Play the audio to this PulseAudio sink (default: the default sink).", valueName: "sink"))
    var audioSink: String?

    @Flag(help: "Do not line the audio up with the pictures (lip sync): each plays as soon as it can, so the pictures are never held back for the sound.")
    var noAvSync = false

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if room != nil && sdp != nil { throw ValidationError("--room and --sdp cannot be used together: join a room, or receive a plain stream") }
        if let room {
            do { try validateRoomName(room) } catch { throw ValidationError("--room: \(error)") }
            do { _ = try Endpoint.parse(server) } catch { throw ValidationError("--server: \(error)") }
        } else {
            guard sdp != nil else { throw ValidationError("missing --room NAME (or --sdp FILE written by `screenshare start --sdp FILE`)") }
            if from != nil { throw ValidationError("--from needs --room NAME") }
        }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
        if let record, !(record.hasSuffix(".webm") || record.hasSuffix(".mkv")) {
            throw ValidationError("--record '\(record)': the file name must end in .webm (or .mkv)")
        }
    }

    func viewerConfig() throws -> ViewerConfig {
        if let room {
            let target: SubscriptionTarget = from.map { .peer($0) } ?? .auto
            return ViewerConfig(room: RoomSettings(name: room, displayName: name ?? Start.userName(), server: server, target: target),
                                server: try Endpoint.parse(server), cname: Start.cname())
        }
        let text: String
        do { text = try String(contentsOfFile: sdp!, encoding: .utf8) } catch {
            printError("screenshare: --sdp '\(sdp!)': cannot read it: \(error.localizedDescription)")
            throw Exit.noInput
        }
        let description: ReceiveDescription
        do { description = try ReceiveDescription.parse(text) } catch {
            printError("screenshare: --sdp '\(sdp!)': \(error)")
            throw Exit.noInput
        }
        return ViewerConfig(description: description, cname: Start.cname())
    }

    func run() throws {
        var config = try viewerConfig()
        config.window = !headless
        config.display = display
        config.recordPath = record
        config.audioPlayback = !noAudioPlayback
        config.framesMD5Path = framesMd5
        config.audioSink = audioSink
        config.avSync = !noAvSync
        config.durationSeconds = duration
        let logger = output.logger()
        let sink = output.sink()
        let viewer: Viewer
        do {
            viewer = try Viewer(config: config, events: sink, logger: logger)
        } catch let error as NetworkError {
            printError("screenshare: \(error)")
            throw Exit.network
        } catch let error as SettingsError {
            printError("screenshare: --sdp '\(sdp ?? "")': \(error)")
            throw Exit.noInput
        } catch {
            printError("screenshare: \(error)")
            throw Exit.sourceUnavailable
        }
        let signals = SignalWatcher { _ in viewer.stop(.requested) }
        let result = viewer.run()
        _ = signals
        switch result.reason {
        case .duration, .windowClosed: return
        case .requested: throw Exit.interrupted
        case .failed: throw Exit.failure
        case .disconnected:
            printError("screenshare: lost the room relay at \(server) (3 retries failed)")
            throw Exit.network
        }
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the room relay on its own, for any number of rooms.",
        discussion: """
            Presenters publish with `screenshare start --room NAME --server THIS-HOST:PORT`;
            viewers join with `screenshare watch --room NAME --server THIS-HOST:PORT`.
            The relay forwards RTP without re-encoding, answers viewers' NACKs from its own
            history and passes keyframe requests to the presenter (at most one per 300 ms).
            Examples:
              screenshare serve
              screenshare serve --listen :7700 --json
            """)

    @Option(help: ArgumentHelp("Where to listen: ADDR:PORT or :PORT.", valueName: "addr:port"))
    var listen: String = "0.0.0.0:7600"

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        do { _ = try parseListen(listen) } catch { throw ValidationError("--listen: \(error)") }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
    }

    func run() throws {
        let logger = output.logger()
        let sink = output.sink()
        let at = try parseListen(listen)
        let relay: RelayServer
        do {
            relay = try RelayServer(host: at.host, port: at.port, events: sink, logger: logger)
        } catch {
            printError("screenshare: --listen \(listen): \(error)")
            throw Exit.network
        }
        let stopped = Atomic<Bool>(false)
        let signals = SignalWatcher { signal in
            guard signal == SIGINT || signal == SIGTERM else { return }
            stopped.store(true, ordering: .relaxed)
            relay.stop()
        }
        _ = relay.run(durationSeconds: duration)
        _ = signals
        if stopped.load(ordering: .relaxed) { throw Exit.interrupted }
    }
}

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

struct Sources: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the monitors, windows and audio sources that can be shared.",
        discussion: """
            Use a monitor's name or index with `start --monitor`, a window's id (or part of its
            title) with `start --window`, an application's name, binary or pid:N with
            `start --audio-app`, a source's name with `start --mic`, a sink's name with
            `start --audio-output`. Without PulseAudio the audio part says it is unavailable.
            """)

    @Option(help: ArgumentHelp("X display (default: $DISPLAY).", valueName: ":N"))
    var display: String?

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    func run() throws {
        let list: DisplaySources
        do {
            list = try listDisplaySources(display: display)
        } catch let error as CaptureError {
            printError("screenshare: \(error)")
            throw Exit.sourceUnavailable
        }
        var logger = Logger(label: "screenshare")
        logger.logLevel = .error
        let audio = Result { try PulseCapture.inventory(logger: logger) }
        if json {
            func rect(_ r: PixelRect) -> JSONValue {
                .object(["x": .int(r.x), "y": .int(r.y), "width": .int(r.width), "height": .int(r.height)])
            }
            let value: JSONValue = .object([
                "display": .string(list.display),
                "screen": .object(["width": .int(list.screen.width), "height": .int(list.screen.height)]),
                "monitors": .array(list.monitors.map { m in
                    .object(["index": .int(m.index), "name": .string(m.name), "primary": .bool(m.primary), "geometry": rect(m.rect)])
                }),
                "windows": .array(list.windows.map { w in
                    .object(["id": .string("0x" + String(w.id, radix: 16)), "title": .string(w.title),
                             "mapped": .bool(w.mapped), "geometry": rect(w.rect)])
                }),
                "audio": Self.audioJSON(audio),
            ])
            print(value.jsonText)
            return
        }
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

func printError(_ message: String) {
    var stderr = StandardError()
    print(message, to: &stderr)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandleStderr.write(string)
    }
}

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
        var request: [String: Any] = ["cmd": command]
        if command == "set" {
            request["set"] = settings.map { pair -> [String] in
                let i = pair.firstIndex(of: "=")!
                return [String(pair[..<i]), String(pair[pair.index(after: i)...])]
            }
        }
        let response: [String: Any]
        do {
            response = try ControlSocket.request(request, socketPath: path)
        } catch {
            printError("screenshare ctl: \(error)")
            throw Exit.sourceUnavailable
        }
        guard response["ok"] as? Bool == true else {
            printError("screenshare ctl: \(response["error"] as? String ?? "the broadcaster refused")")
            throw Exit.usage
        }
        if json || command == "status" {
            if json {
                let data = try JSONSerialization.data(withJSONObject: response, options: [.sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                for section in ["settings", "stats"] {
                    guard let dict = response[section] as? [String: Any] else { continue }
                    print("\(section):")
                    for key in dict.keys.sorted() { print("  \(key): \(dict[key] is NSNull ? "-" : "\(dict[key]!)")") }
                }
            }
        } else {
            print("screenshare ctl: \(command): ok")
        }
    }
}
