import Access
import ArgumentParser
import AudioIO
import Congestion
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
import RoomHost
import ScreenCapture
import Sender
import Transport
import VP8Codec
import VideoProcessing
import WebRTC
#if canImport(Glibc)
import Glibc
#endif

struct Start: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Capture, encode (VP8) and send the screen, a region or raw frames over RTP.",
        discussion: """
            Two ways to send: to a room (--room; viewers join with `screenshare watch --room`), \
            hosted by this command itself on UDP port 7600 unless --server names a relay \
            (`screenshare serve`), or plain RTP to one receiver (--to; ffmpeg/GStreamer/VLC via --sdp).

            Examples:
              Host a room here; viewers run the `watch` line it prints:
                screenshare start --room class
              Publish to a relay that `screenshare serve` runs, with a presenter token:
                screenshare start --room class --server relay.example:7600 \\
                    --token "$(cat presenter.token)"
              Plain RTP with an SDP for ffplay, ffmpeg, GStreamer or VLC:
                screenshare start --to 127.0.0.1:5004 --sdp stream.sdp
                ffplay -protocol_whitelist file,udp,rtp stream.sdp
              The same, encrypted (SRTP; the keys are in the SDP, readable by you only):
                screenshare start --to 10.0.0.5:5004 --srtp --sdp stream.sdp
                ffplay -protocol_whitelist file,udp,rtp,srtp,crypto stream.sdp
              A region at 30 fps, for moving pictures:
                screenshare start --to 10.0.0.5:5004 --region 1280x720+0+0 \\
                    --fps 30 --content motion
              Raw frames from a file instead of the screen:
                screenshare start --to 127.0.0.1:5004 --input frames.nv12 \\
                    --input-format nv12 --input-size 1280x720
            """)

    @Option(help: ArgumentHelp("Send plain RTP to HOST:PORT (RTCP on PORT+1).", valueName: "host:port"), transform: Parse.endpoint)
    var to: Endpoint?

    @OptionGroup(title: "Room") var join: RoomJoinOptions

    @Option(help: ArgumentHelp("Where the room this command hosts listens: ADDR:PORT or :PORT.", valueName: "addr:port"),
            transform: ListenAddress.init)
    var listen = ListenAddress.default

    @Flag(help: "Do not draw the browser link as a QR code (drawn on a terminal when this command hosts the room).")
    var noQr = false

    @OptionGroup(title: "HTTPS (the room this command hosts)") var https: TLSOptions

    @OptionGroup(title: "Janus (the room this command hosts)") var janus: JanusOptions

    @Option(help: ArgumentHelp("The room this command hosts takes tokens signed with the secret in FILE (made when missing) instead of a secret for this run only.", valueName: "file"))
    var secretFile: String?

    @Flag(help: "The room this command hosts admits anyone who reaches it, without a token.")
    var openRoom = false

    @Option(help: ArgumentHelp("How long the viewer token in the printed `watch` line and link admits (default: 12h).", valueName: "duration"),
            transform: Parse.duration)
    var tokenTtl: Double = 12 * 3600

    @Option(help: ArgumentHelp("Write an SDP file for ffmpeg/ffplay/GStreamer/VLC (with --to).", valueName: "file"))
    var sdp: String?

    @Flag(help: "With --to: encrypt every packet (SRTP, AES_CM_128_HMAC_SHA1_80) with fresh keys written in the --sdp file (mode 0600).")
    var srtp = false

    @Option(help: ArgumentHelp("""
        Forward error correction (ULPFEC, RFC 5109; with --to payload type 117 in the video stream). \
        auto: on when the receiver's feedback shows loss × round trip too high for resends alone (a `watch` sends it); \
        on: always (for GStreamer's rtpulpfecdec too); off: never. A hosted room sends browsers FEC (in RED) the same way.
        """, valueName: "mode"))
    var fec: FECPolicy.Mode = .auto

    @Option(help: ArgumentHelp("Also write what is sent to FILE (WebM: VP8 and Opus as sent, not re-encoded): a recording of the lecture, finished on stop or Ctrl-C, playable to within a second of the end after a crash.", valueName: "file"))
    var record: String?

    @Option(help: ArgumentHelp("Stop cleanly (RTCP BYE) after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("X display to capture (default: $DISPLAY).", valueName: ":N"))
    var display: String?

    @Option(name: .customLong("capture"), help: ArgumentHelp("How to capture: x11, portal (a Wayland desktop: the xdg-desktop-portal asks once which screen or window, then PipeWire), or auto: the portal on a Wayland session, else X11.", valueName: "auto|x11|portal"))
    var captureMethod = CaptureMethod.auto

    @Flag(help: "With the portal: show its dialog again instead of sharing what was chosen last time.")
    var ask = false

    @OptionGroup var capture: CaptureSelection

    @Flag(help: "Do not draw the cursor into the picture.")
    var noCursor = false

    @Option(help: ArgumentHelp("Read raw frames from FILE instead of the screen ('-' for stdin; a file loops).", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("Layout of --input frames: nv12, bgra or i420.", valueName: "format"))
    var inputFormat = RawPixelFormat.nv12

    @Option(help: ArgumentHelp("Size of --input frames.", valueName: "WxH"), transform: Parse.size)
    var inputSize: PixelSize?

    @Option(help: ArgumentHelp("Frame rate of --input (default: --fps).", valueName: "fps"))
    var inputFps: Double?

    @OptionGroup var encoding: EncodingOptions

    @Option(help: ArgumentHelp("libvpx speed, -16 to 16: positive adapts the speed so an encode takes about (16-N)/16 of the frame time, negative fixes it; lower is slower and sharper (default: 8 for motion, 10 for detail).", valueName: "N"))
    var cpuUsed: Int?

    @Option(help: ArgumentHelp("Control socket for `screenshare ctl` (default: $XDG_RUNTIME_DIR/screenshare/pid-PID.sock, or /tmp/screenshare-UID/…).", valueName: "path"))
    var controlSocket: String?

    @Option(help: ArgumentHelp("Share one application's sound: its PulseAudio application.name, its binary, or pid:N (see `screenshare sources`). Waits for it to play; follows it when it restarts.", valueName: "name|pid:N"),
            transform: Parse.app)
    var audioApp: AppMatcher?

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

    @Option(help: ArgumentHelp("Opus bit rate, e.g. 64k (6k to 510k).", valueName: "bitrate"), transform: Parse.bitrate)
    var audioBitrate = Bitrate(kbps: 64)

    @OptionGroup var output: OutputOptions

    /// The audio part of the broadcast, or nil for none.
    func audioConfig() -> AudioSendConfig? {
        if noAudio { return nil }
        let program: AudioCaptureConfig.Program
        if let audioApp { program = .application(audioApp) }
        else if let audioOutput { program = .output(sink: audioOutput == "@default" ? nil : audioOutput) }
        else { program = .none }
        let micSource: String?? = noMic ? nil : .some(mic == "@default" ? nil : mic)
        var capture = AudioCaptureConfig(program: program, mic: micSource)
        capture.programGainDecibels = appGain
        capture.micGainDecibels = micGain
        guard capture.hasSources else { return nil }
        var config = AudioSendConfig(capture: capture)
        config.required = audioApp != nil || audioOutput != nil || (mic != nil && mic != "@default")
        config.bitrate = audioBitrate
        return config
    }

    func validate() throws {
        if join.room != nil, to != nil { throw ValidationError("--room and --to cannot be used together: share in a room, or send plain RTP to one receiver") }
        if join.room != nil {
            if sdp != nil { throw ValidationError("--sdp describes a plain RTP stream: use it with --to, not --room") }
            if srtp { throw ValidationError("--srtp is for plain RTP (--to); in a room every hop is encrypted (DTLS-SRTP) already") }
            if join.server != nil {
                if secretFile != nil || openRoom { throw ValidationError("--secret-file and --open-room are for the room this command hosts, not with --server") }
                if https.tlsCert != nil { throw ValidationError("--tls-cert is for the room this command hosts, not with --server (the relay at --server has its own)") }
                if !janus.servers.isEmpty { throw ValidationError("--janus is for the room this command hosts, not with --server (give it to that relay: serve --janus)") }
            } else if join.token != nil {
                throw ValidationError("--token is for joining a relay (--server HOST:PORT); the room this command hosts makes its own tokens")
            } else if join.fingerprint != nil {
                throw ValidationError("--fingerprint pins the relay at --server HOST:PORT; the room this command hosts is its own relay")
            }
            if secretFile != nil && openRoom { throw ValidationError("--secret-file and --open-room contradict each other") }
        } else {
            if join.server != nil { throw ValidationError("--server needs --room NAME") }
            if join.fingerprint != nil { throw ValidationError("--fingerprint needs --room NAME and --server HOST:PORT") }
            if join.token != nil || secretFile != nil || openRoom { throw ValidationError("--token, --secret-file and --open-room need --room NAME") }
            if https.tlsCert != nil { throw ValidationError("--tls-cert and --tls-key need --room NAME (they serve the hosted room's page)") }
            if !janus.servers.isEmpty { throw ValidationError("--janus needs --room NAME (it fans the hosted room's screen out)") }
            if srtp && sdp == nil { throw ValidationError("--srtp needs --sdp FILE: the receiver reads the keys from it") }
            guard to != nil else { throw ValidationError("missing --room NAME (or --to HOST:PORT for plain RTP)") }
        }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
        if let record, !(record.hasSuffix(".webm") || record.hasSuffix(".mkv")) {
            throw ValidationError("--record '\(record)': the file name must end in .webm (or .mkv)")
        }
        if let cpuUsed, !(-16...16).contains(cpuUsed) { throw ValidationError("--cpu-used \(cpuUsed): must be from -16 to 16") }
        let sourceFlags = capture.given + (input != nil ? ["--input"] : [])
        if sourceFlags.count > 1 { throw ValidationError("\(sourceFlags.joined(separator: " and ")) cannot be used together: choose one source") }
        if usesPortal {
            if display != nil { throw ValidationError("--display is for X11: the portal shares what its dialog chooses (or use --capture x11)") }
            if capture.monitor != nil { throw ValidationError("--monitor is for X11: through the portal its dialog chooses the monitor (or use --capture x11)") }
        } else if ask, input == nil {
            throw ValidationError("--ask is for the portal (--capture portal, or auto on a Wayland session)")
        }
        if input != nil, inputSize == nil { throw ValidationError("--input needs --input-size WxH") }
        if let inputFps, !(inputFps > 0 && inputFps <= 240) { throw ValidationError("--input-fps \(inputFps): must be from 0 to 240") }
        _ = try encoding.settings(source: videoSource())
        try validateAudio()
    }

    func validateAudio() throws {
        let audioFlags = [("--audio-app", audioApp != nil), ("--audio-output", audioOutput != nil), ("--mic", mic != nil),
                          ("--no-mic", noMic)].filter(\.1).map(\.0)
        if noAudio, let first = audioFlags.first { throw ValidationError("--no-audio and \(first) contradict each other") }
        if audioApp != nil && audioOutput != nil { throw ValidationError("--audio-app and --audio-output cannot be used together: choose one") }
        if noMic && mic != nil { throw ValidationError("--mic and --no-mic contradict each other") }
        for (flag, value) in [("--app-gain", appGain), ("--mic-gain", micGain)] where !(value >= -60 && value <= 30) {
            throw ValidationError("\(flag) \(value): must be from -60 to 30 dB")
        }
        guard audioBitrate.bitsPerSecond >= 6_000 && audioBitrate.bitsPerSecond <= 510_000 else {
            throw ValidationError("--audio-bitrate '\(audioBitrate)': Opus takes 6k to 510k")
        }
        if !noAudio, join.room == nil, let to, to.port > 65532 {
            throw ValidationError("--to '\(to)': audio uses PORT+2 and PORT+3, so the port must be at most 65532 (or use --no-audio)")
        }
    }

    /// The pictures' source the flags choose.
    func videoSource() -> VideoSource {
        if let input, let inputSize {
            return .raw(path: input, format: inputFormat, size: inputSize, fps: inputFps ?? Double(encoding.fps ?? 15))
        }
        if usesPortal {
            return .portal(window: capture.window != nil, region: capture.region, drawCursor: !noCursor, ask: ask)
        }
        return .x11(display: display, source: capture.spec ?? .screen, drawCursor: !noCursor)
    }

    /// Whether the screen is captured through the portal: asked for, or `auto` on a Wayland
    /// session (never for --input).
    var usesPortal: Bool {
        guard input == nil else { return false }
        switch captureMethod {
        case .portal: return true
        case .x11: return false
        case .auto: return Self.isWaylandSession
        }
    }

    func run() throws {
        let source = videoSource()
        let (sink, logger) = output.outputs(qrCode: !noQr)
        if case .x11 = source, Self.isWaylandSession {
            logger.warning("this is a Wayland session: only the windows of X11 programs (XWayland) can be captured for now; the rest of the screen shows black")
        }
        var destination: Endpoint
        var hosted: HostedRoom?
        var roomSettings: RoomSettings?
        if let room = join.room {
            if let server = join.server {
                destination = server
                // With a token that names us, the relay shows that name: said so here too.
                let shown = join.token.flatMap { RoomToken.unverifiedName(of: $0) } ?? join.displayName
                roomSettings = RoomSettings(name: room, displayName: shown, server: server.description)
                roomSettings?.token = join.token
                roomSettings?.fingerprint = join.fingerprint
            } else {
                // Host the room here: the relay runs in this process; we publish to it over loopback.
                if openRoom {
                    printError("screenshare: WARNING: --open-room: anyone who can reach this machine may watch room '\(room)', and present in it")
                }
                var options = HostedRoom.Options(room: room, displayName: join.displayName, host: listen.host, port: listen.port)
                options.presenterName = join.name
                options.secretFile = secretFile
                options.open = openRoom
                options.viewerTokenSeconds = tokenTtl
                options.fec = fec
                options.tls = try https.files()
                options.janus = try janus.cascade()
                options.janusEvents = sink
                do throws(HostedRoom.Failure) {
                    let room = try HostedRoom(options, logger: logger)
                    hosted = room
                    destination = room.destination
                    roomSettings = room.settings
                } catch {
                    switch error {
                    case .listen(let why):
                        printError("screenshare: --listen \(listen.text): \(why). Is another `screenshare start --room` or `serve` running? Use --listen :PORT, or --server HOST:PORT to join it.")
                        throw Exit.network
                    case .secretFile(let why):
                        printError("screenshare: \(why)")
                        throw Exit.noInput
                    case .setUp(let why):
                        printError("screenshare: \(why)")
                        throw Exit.failure
                    }
                }
            }
        } else {
            destination = to!
        }
        var config = BroadcastConfig(source: source, destination: destination, cname: Self.cname())
        config.room = roomSettings
        config.invitations = hosted
        let live = try encoding.settings(source: source)
        config.maxResolution = live.maxResolution
        config.fps = live.fps
        config.minFps = live.minFps
        config.bitrate = live.bitrate
        config.minBitrate = live.minBitrate
        config.keyframeIntervalSeconds = live.keyframeIntervalSeconds
        config.content = live.content
        config.cpuUsed = cpuUsed
        config.sdpPath = sdp
        config.srtp = srtp
        config.fec = fec
        config.durationSeconds = duration
        config.recordPath = record
        config.controlSocketPath = controlSocket ?? ControlSocket.path(label: join.room ?? "pid-\(getpid())")
        config.audio = audioConfig()
        defer { hosted?.stop() }

        let broadcaster: Broadcaster
        do {
            broadcaster = try Broadcaster(config: config, events: sink, logger: logger)
        } catch {
            throw Exit.failing(with: error)
        }
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP]) { [hosted, logger] signal in
            switch signal {
            case SIGHUP:
                // A renewed HTTPS certificate: taken without a restart.
                do { try hosted?.reloadTLS() } catch { logger.warning("https: \(error); keeping the certificate in use") }
            case SIGUSR1: broadcaster.setPaused(true)
            case SIGUSR2: broadcaster.setPaused(false)
            default: broadcaster.stop(.requested, detail: "signal \(signal)")
            }
        }
        let result: (reason: StopReason, detail: String, summary: [String: JSONValue])
        do {
            result = try broadcaster.run()
        } catch {
            throw Exit.failing(with: error)
        }
        _ = signals
        let ending: Ending = switch result.reason {
        case .duration, .endOfInput, .control: .clean
        case .requested: .interrupted
        case .sourceGone: .sourceGone("source gone: \(result.detail)")
        case .failed: .failed(result.detail)
        case .disconnected: .network(output.json ? result.detail : nil)
        // On a terminal the `error` event said why, one line; with --json stderr gets the line.
        case .unauthorized: .refused(output.json ? result.detail : nil)
        case .untrusted: .untrusted(output.json ? result.detail : nil)
        }
        try ending.exit()
    }

    /// Whether the desktop is a Wayland session (`WAYLAND_DISPLAY` set, or `XDG_SESSION_TYPE=wayland`).
    static var isWaylandSession: Bool {
        let env = ProcessInfo.processInfo.environment
        return !(env["WAYLAND_DISPLAY"] ?? "").isEmpty || env["XDG_SESSION_TYPE"] == "wayland"
    }

    /// The name a room shows by default: the user's full name (the password database's GECOS
    /// field, as `finger` shows it), else USER@HOST.
    static func userName() -> String {
        if let entry = getpwuid(getuid()), let gecos = entry.pointee.pw_gecos,
           let full = String(cString: gecos).split(separator: ",").first?.trimmed(), !full.isEmpty {
            return full
        }
        return "\(ProcessInfo.processInfo.environment["USER"] ?? "user")@\(hostName())"
    }

    /// The RTCP CNAME (RFC 3550 §6.5.1): one per process, shared by the video and audio streams.
    static func cname() -> String { "screenshare-\(getpid())@\(hostName())" }

    static func hostName() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        return host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
