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
import WebRTC
import VP8Codec
import VideoProcessing
#if canImport(Glibc)
import Glibc
#endif

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Join a room (or receive a plain stream from an SDP file), decode and show or record it.",
        discussion: """
            Sends RTCP back (receiver reports, NACK for lost packets, PLI when a picture cannot be \
            repaired): to the room relay, or to the sender of a plain stream.

            Examples:
              Watch the room a presenter hosts, from the link it printed:
                screenshare watch http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4
              The same with the room flags (the long line it printed):
                screenshare watch --room class --server 192.168.1.20:7600 --token eyJhbGciOi…
              Record one presenter of a room, without a window:
                screenshare watch --room class --server relay.example:7600 \\
                    --from "Ms Smith" --headless --record class.webm
              A plain stream, from the SDP `start --to … --sdp` wrote:
                screenshare watch --sdp stream.sdp
                screenshare watch --sdp stream.sdp --headless \\
                    --record talk.webm --duration 60 --json
            """)

    @Argument(help: ArgumentHelp("The link the presenter gave (http://HOST:PORT/ROOM#k=CODE): joins that room through that relay.", valueName: "link"))
    var link: String?

    @Option(help: ArgumentHelp("For an https:// link: trust this CA (PEM) besides the system's (a school's own CA).", valueName: "file"))
    var caFile: String?

    @Option(help: ArgumentHelp("The SDP `screenshare start --sdp` wrote.", valueName: "file"))
    var sdp: String?

    @OptionGroup(title: "Room") var join: RoomJoinOptions

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
        if let link {
            do { _ = try InvitationLink(parsing: link) } catch { throw ValidationError("\(error)") }
            let others = [("--room", join.room != nil), ("--server", join.server != nil), ("--token", join.token != nil),
                          ("--fingerprint", join.fingerprint != nil), ("--sdp", sdp != nil)].filter(\.1).map(\.0)
            if let first = others.first { throw ValidationError("the link names the room, the relay and the access: leave out \(first)") }
        }
        if join.room != nil && sdp != nil { throw ValidationError("--room and --sdp cannot be used together: join a room, or receive a plain stream") }
        if join.room == nil && link == nil {
            guard sdp != nil else {
                throw ValidationError("missing the link the presenter gave (or --room NAME, or --sdp FILE written by `screenshare start --sdp FILE`)")
            }
            if from != nil { throw ValidationError("--from needs --room NAME") }
            if join.server != nil { throw ValidationError("--server needs --room NAME") }
            if join.token != nil { throw ValidationError("--token needs --room NAME") }
            if join.fingerprint != nil { throw ValidationError("--fingerprint needs --room NAME") }
        }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
        if let record, !(record.hasSuffix(".webm") || record.hasSuffix(".mkv")) {
            throw ValidationError("--record '\(record)': the file name must end in .webm (or .mkv)")
        }
    }

    /// The relay: the link's, --server, or this machine's port 7600.
    var server: Endpoint {
        if let parsed = parsedLink { return Endpoint(host: parsed.host, port: parsed.port) }
        return join.server ?? Endpoint(host: "127.0.0.1", port: 7600)
    }

    /// The room joined: the link's or --room.
    var roomName: String { parsedLink?.room ?? join.room ?? "" }

    /// The link given, read (`validate` has refused one that cannot be).
    var parsedLink: InvitationLink? { link.flatMap { try? InvitationLink(parsing: $0) } }

    func viewerConfig() throws -> ViewerConfig {
        if let parsed = parsedLink {
            var token = parsed.token, fingerprint = parsed.fingerprint
            if parsed.code != nil, token == nil {
                do {
                    let grant = try parsed.redeem(caFile: caFile)
                    (token, fingerprint) = (grant.token, grant.fingerprint)
                } catch {
                    switch error {
                    case .refused(let why):
                        printError("screenshare: the relay at \(parsed.host):\(parsed.port) did not take the link: \(why)")
                        throw Exit.noPermission
                    case .unreachable(let why):
                        printError("screenshare: \(why)")
                        throw Exit.network
                    case .untrusted(let why):
                        printError("screenshare: \(why)")
                        throw Exit.untrustedRelay
                    }
                }
            }
            let server = Endpoint(host: parsed.host, port: parsed.port)
            let target: SubscriptionTarget = from.map { .peer($0) } ?? .auto
            var settings = RoomSettings(name: parsed.room, displayName: join.displayName, server: server.description, target: target)
            settings.token = token
            settings.fingerprint = fingerprint.flatMap { DTLSCertificate.parseFingerprint($0) }
            return ViewerConfig(room: settings, server: server, cname: Start.cname())
        }
        if let room = join.room {
            let target: SubscriptionTarget = from.map { .peer($0) } ?? .auto
            var settings = RoomSettings(name: room, displayName: join.displayName, server: server.description, target: target)
            settings.token = join.token
            settings.fingerprint = join.fingerprint
            return ViewerConfig(room: settings, server: server, cname: Start.cname())
        }
        let text: String
        do { text = try PrivateFile.readText(sdp!, what: "--sdp") } catch {
            printError("screenshare: \(error)")
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
        let (sink, logger) = output.outputs()
        let viewer: Viewer
        do {
            viewer = try Viewer(config: config, events: sink, logger: logger)
        } catch let error as FileError {
            printError("screenshare: --sdp '\(sdp ?? "")': \(error)")
            throw Exit.noInput
        } catch let error as NetworkError {
            throw Exit.failing(with: error)
        } catch {
            // The window (X display), the decoder, the recording or the MD5 file.
            printError("screenshare: \(error)")
            throw Exit.sourceUnavailable
        }
        let signals = SignalWatcher { _ in viewer.stop(.requested) }
        let result = viewer.run()
        _ = signals
        // The recording could not be finished (the `error` event said why): a failure, unless
        // losing the relay already is one.
        if result.recordingFailed, result.reason != .disconnected, result.reason != .unauthorized, result.reason != .untrusted { throw Exit.failure }
        let ending: Ending = switch result.reason {
        case .duration, .windowClosed, .ended: .clean
        case .requested: .interrupted
        case .failed: .failed(nil)
        // The `disconnected` event said why on a terminal; with --json stderr gets the line.
        case .disconnected: .network(output.json ? "no answer from the room relay at \(server) (3 retries failed)" : nil)
        // On a terminal the `error` event said why, one line; with --json it is in the JSON
        // line, and stderr gets the line.
        case .unauthorized:
            .refused(output.json ? "the relay at \(server) refused to admit you to room '\(roomName)': \(result.refusal ?? "unauthorized")" : nil)
        case .untrusted: .untrusted(output.json ? "will not watch through the relay at \(server): \(result.refusal ?? "untrusted")" : nil)
        }
        try ending.exit()
    }
}
