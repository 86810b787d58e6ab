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
