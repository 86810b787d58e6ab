import Events
import MediaCore
import Basics
import Room
import Transport
import VP8Codec
import RoomEvents

// The events only `start` prints: the broadcast started, its first frame, stats every second,
// pause and settings changes (`screenshare ctl`, signals), the source coming back, the audio
// capture's events, and the summary. They live here, next to Broadcaster and AudioSender,
// which emit them. The room events a broadcast in a room prints are in Room (RoomEvents.swift);
// `warning` and `error` are in Events (Problems.swift).

/// The 50th and 95th percentiles of a per-frame measurement over the last second (milliseconds).
public struct Quantiles: Sendable, Equatable {
    public var p50: Double
    public var p95: Double
    public init(p50: Double, p95: Double) {
        self.p50 = p50
        self.p95 = p95
    }
}

/// `started`: the broadcast runs. In a room it names the room (and, when this process hosts
/// it, the line viewers run); with audio, the audio stream.
public struct SenderStarted: BroadcastEvent, Equatable {
    public struct Audio: Sendable, Equatable {
        public var ssrc: UInt32
        public var port: UInt16
        public var bitrateKbps: Int
        /// The microphone shared: PulseAudio's description and name (nil: none).
        public var microphone: (description: String, name: String)?
        /// The application (`--audio-app`) or sink (`--audio-output`) shared, as given.
        public var program: String?
        public init(ssrc: UInt32, port: UInt16, bitrateKbps: Int, microphone: (description: String, name: String)? = nil,
                    program: String? = nil) {
            self.ssrc = ssrc
            self.port = port
            self.bitrateKbps = bitrateKbps
            self.microphone = microphone
            self.program = program
        }
        public static func == (a: Audio, b: Audio) -> Bool {
            a.ssrc == b.ssrc && a.port == b.port && a.bitrateKbps == b.bitrateKbps && a.microphone?.description == b.microphone?.description
                && a.microphone?.name == b.microphone?.name && a.program == b.program
        }
    }


    public var destination: Endpoint
    public var ssrc: UInt32
    public var fps: Int
    public var bitrateKbps: Int
    public var content: ContentPreference
    /// The `screenshare ctl` socket (nil: it could not be opened).
    public var controlSocket: String?
    public var room: RoomSettings?
    public var audio: Audio?
    /// What is shared, in words: "the screen", "window 'Slides'", "region 1280x720+0+0", …
    public var shared: String = "the screen"

    public var name: String { "started" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "destination": .string(destination.description), "ssrc": .int(Int(ssrc)),
            "fps": .int(fps), "bitrate_kbps": .int(bitrateKbps), "content": .string(content.rawValue),
            "control_socket": controlSocket.map { .string($0) } ?? .null,
        ]
        if let room {
            f["room"] = .string(room.name)
            f["server"] = .string(room.server)
            f["name"] = .string(room.displayName)
            if let w = room.watchCommand { f["watch_command"] = .string(w) }
            if let u = room.browserURL { f["browser_url"] = .string(u) }
            if let u = room.browserTokenURL { f["browser_url_token"] = .string(u) }
        }
        f["shared"] = .string(shared)
        if let audio {
            f["audio_ssrc"] = .int(Int(audio.ssrc))
            f["audio_port"] = .int(Int(audio.port))
            f["audio_bitrate_kbps"] = .int(audio.bitrateKbps)
            if let mic = audio.microphone { f["microphone"] = .string(mic.name) }
            if let program = audio.program { f["audio_program"] = .string(program) }
        }
        return f
    }
    /// In a room: what is shared and where, the sound (the microphone named, with the flag that
    /// leaves it out), the link for browsers and the line for a terminal when this process hosts
    /// the room, and how to stop — in lines that fit an 80-column terminal with the QR code
    /// under them in 24 rows.
    public var humanText: String {
        if let room {
            let hosted = room.browserURL != nil
            // "screenshare: " and this line fit 80 columns; a hosted room is ours (the name
            // students see is in the JSON line), a relay's is said with the name it knows us by.
            var lines = ["sharing \(Self.clip(shared, 28)) in room \(Self.clip(room.name, 20))"]
            if !hosted { lines.append("  via \(Self.clip(room.server, 32)) as \(Self.clip(room.displayName, 24))") }
            lines.append("  sound: " + soundText)
            if let link = room.browserURL {
                lines.append("  browsers: \(link)")
                lines.append("  terminal: screenshare watch \(link)")
                lines.append("  stop: Ctrl-C  ·  a new link: screenshare ctl invite")
            } else {
                // Through a relay: its page for the room (viewers need a token from its admin,
                // unless the relay is open).
                lines.append("  browsers: http://\(room.server)/\(PercentEncoding.encodePath(room.name)) (with #token=… unless the relay is open)")
                lines.append("  stop: Ctrl-C")
            }
            return lines.joined(separator: "\n")
        }
        return "sending to \(destination.description) (ssrc \(ssrc), \(fps) fps max, \(bitrateKbps) kbps); control: \(controlSocket ?? "-")"
    }
}

extension SenderStarted {
    /// What is heard, in words: the microphone by its description, the application or sink.
    var soundText: String {
        guard let audio else { return "none" }
        var parts: [String] = []
        if let mic = audio.microphone { parts.append("microphone \"\(Self.clip(mic.description, 32))\" (--no-mic leaves it out)") }
        if let program = audio.program { parts.append(program) }
        return parts.isEmpty ? "none" : parts.joined(separator: " and ")
    }

    /// `text`, cut to `limit` characters with an ellipsis (a 300-character room name is not echoed whole).
    static func clip(_ text: String, _ limit: Int) -> String {
        text.count <= limit ? text : String(text.prefix(limit - 1)) + "…"
    }
}

/// `invitation`: `ctl invite` made a new link for the room this process hosts (the old one no
/// longer admits), or revoked it (`link` null). Viewers already in the room stay.
public struct InvitationChanged: BroadcastEvent, Equatable {
    public var link: String?
    public init(link: String?) { self.link = link }
    public var name: String { "invitation" }
    public var fields: [String: JSONValue] { ["link": link.map { .string($0) } ?? .null] }
    public var humanText: String {
        link.map { "new invitation link (the old one no longer admits): \($0)" }
            ?? "the invitation link was revoked: nobody new can join with it (viewers in the room stay)"
    }
}

/// `first_frame_sent`: the first encoded frame left, `latencyMillis` after it was captured.
public struct FirstFrameSent: BroadcastEvent, Equatable {
    public var size: PixelSize
    public var keyframe: Bool
    public var latencyMillis: Double

    public var name: String { "first_frame_sent" }
    public var fields: [String: JSONValue] {
        ["width": .int(size.width), "height": .int(size.height), "keyframe": .bool(keyframe), "latency_ms": .double(latencyMillis)]
    }
    public var humanText: String { "first frame sent: \(size.width)x\(size.height) after \(HumanText.decimal(latencyMillis)) ms" }
}

/// `stats`, every second: the last second's rates and per-frame times, and running totals.
public struct SenderStats: BroadcastEvent, Equatable {
    public struct Audio: Sendable, Equatable {
        public var packetsSent: Int
        public var bytesSent: Int
        public var kbps: Int
        /// Capture to send over the last second; nil before the first frame.
        public var latencyP50Millis: Double?
        public var latencyP95Millis: Double?
    }

    public var fps: Int
    public var kbps: Int
    public var framesSent: Int
    public var keyframesSent: Int
    public var encodeMillis: Quantiles
    public var captureMillis: Quantiles
    public var convertMillis: Quantiles
    public var sendMillis: Quantiles
    public var size: PixelSize
    public var sendErrors: Int
    /// Round trip from receiver reports; nil until one came.
    public var rttMillis: Double?
    /// The fraction lost receivers report; nil until one came.
    public var loss: Double?
    public var retransmitted: Int
    /// How many watch (in a room only).
    public var viewers: Int?
    public var audio: Audio?
    /// The bit rate the encoder aims at: `--bitrate`, or less when congestion control says so.
    public var targetKbps: Int = 0
    /// What the receiver got over the last 500 ms, from its transport feedback; nil without one.
    public var estimateKbps: Int?
    /// Forward error correction sent in the last second (kbit/s; 0 when off), and its
    /// protection now (FEC packets per media packet).
    public var fecKbps: Int = 0
    public var fecProtection: Double = 0
    /// Since the start: pictures grabbed (or read), and frames the encoder made of them
    /// (`frames_sent` counts those sent; the latest picture wins, so captured ≥ encoded when the
    /// encoder cannot keep up, and encoded > captured on a still screen's refinements).
    public var framesCaptured: Int = 0
    public var framesEncoded: Int = 0
    /// The mean quantizer of the frames sent in the last second (libvpx's 0–63: higher is
    /// coarser); nil when none was sent. At a steady bit rate, a jump tells the encoder is
    /// coding the same pictures coarser (libvpx's adaptive speed gone fast, say).
    public var quantizer: Double?

    public var name: String { "stats" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "fps": .int(fps), "kbps": .int(kbps), "frames_sent": .int(framesSent), "keyframes_sent": .int(keyframesSent),
            "frames_captured": .int(framesCaptured), "frames_encoded": .int(framesEncoded),
            "encode_ms_p50": .double(encodeMillis.p50), "encode_ms_p95": .double(encodeMillis.p95),
            "capture_ms_p50": .double(captureMillis.p50), "capture_ms_p95": .double(captureMillis.p95),
            "convert_ms_p50": .double(convertMillis.p50), "convert_ms_p95": .double(convertMillis.p95),
            "send_ms_p50": .double(sendMillis.p50), "send_ms_p95": .double(sendMillis.p95),
            "width": .int(size.width), "height": .int(size.height), "send_errors": .int(sendErrors),
            "rtt_ms": rttMillis.map { .double($0) } ?? .null, "loss": loss.map { .double($0) } ?? .null,
            "retransmitted": .int(retransmitted),
            "target_kbps": .int(targetKbps), "estimate_kbps": estimateKbps.map { .int($0) } ?? .null,
            "fec_kbps": .int(fecKbps), "fec_protection": .double(fecProtection),
            "quantizer": quantizer.map { .double(($0 * 10).rounded() / 10) } ?? .null,
        ]
        if let viewers { f["viewers"] = .int(viewers) }
        if let audio {
            f["audio_packets_sent"] = .int(audio.packetsSent)
            f["audio_bytes_sent"] = .int(audio.bytesSent)
            f["audio_kbps"] = .int(audio.kbps)
            f["audio_latency_ms_p50"] = audio.latencyP50Millis.map { .double($0) } ?? .null
            f["audio_latency_ms_p95"] = audio.latencyP95Millis.map { .double($0) } ?? .null
        }
        return f
    }
    public var humanText: String {
        // The live status line: what a presenter watches, within 80 columns (the encode times
        // are in the JSON line).
        let viewers = viewers.map { "  \($0) viewer\($0 == 1 ? "" : "s")" } ?? ""
        return "\(size.width)x\(size.height)  \(fps) fps  \(kbps)/\(targetKbps) kbps"
            + "  rtt \(HumanText.decimal(rttMillis)) ms  loss \(HumanText.percent(loss))\(viewers)"
    }
}

/// `bitrate_changed`: congestion control moved the target by more than 20 % since the last
/// time it said so (the path carries less, or more again).
public struct BitrateChanged: BroadcastEvent, Equatable {
    public var targetKbps: Int
    public var previousKbps: Int
    /// What the receiver got over the last 500 ms; nil until measured.
    public var estimateKbps: Int?
    /// The fraction lost over the last second of feedback.
    public var loss: Double
    public var rttMillis: Double

    public var name: String { "bitrate_changed" }
    public var fields: [String: JSONValue] {
        ["target_kbps": .int(targetKbps), "previous_kbps": .int(previousKbps), "estimate_kbps": estimateKbps.map { .int($0) } ?? .null,
         "loss": .double(loss), "rtt_ms": .double(rttMillis)]
    }
    public var humanText: String {
        "bit rate \(previousKbps) → \(targetKbps) kbps (the receiver gets \(estimateKbps.map(String.init) ?? "?") kbps, loss \(HumanText.percent(loss)), rtt \(HumanText.decimal(rttMillis)) ms)"
    }
}

/// `stopped`: the broadcast's totals (the audio's too, when there was audio).
public struct SenderStopped: BroadcastEvent, Equatable {
    public struct Audio: Sendable, Equatable {
        public var frames: Int
        public var packetsSent: Int
        public var bytesSent: Int
        public var dtxFrames: Int
        public var silentFrames: Int
        public var cpuSeconds: Double
        public var underruns: Int
        public var droppedFrames: Int
        public var clippedFrames: Int
        public var latencyP50Millis: Double?
        public var latencyP95Millis: Double?
    }

    public var reason: StopReason
    public var framesCaptured: Int
    public var framesEncoded: Int
    public var framesSent: Int
    public var keyframesSent: Int
    public var packetsSent: Int
    public var bytesSent: Int
    public var sendErrors: Int
    public var encodeErrors: Int
    public var nacksReceived: Int
    public var retransmitted: Int
    public var receiverReports: Int
    /// Malformed RTCP packets and room messages the sender dropped.
    public var packetsRejected: Int
    public var rttMillis: Double?
    /// The cumulative loss receivers report; nil until one came.
    public var packetsLost: Int?
    public var size: PixelSize
    public var durationSeconds: Double
    /// FEC packets sent and their bytes.
    public var fecPackets = 0
    public var fecBytes = 0
    public var audio: Audio?

    public var name: String { "stopped" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "reason": .string(reason.rawValue), "frames_captured": .int(framesCaptured),
            "frames_encoded": .int(framesEncoded), "frames_sent": .int(framesSent),
            "keyframes_sent": .int(keyframesSent), "packets_sent": .int(packetsSent),
            "bytes_sent": .int(bytesSent), "send_errors": .int(sendErrors), "encode_errors": .int(encodeErrors),
            "nacks_received": .int(nacksReceived), "retransmitted": .int(retransmitted),
            "receiver_reports": .int(receiverReports), "packets_rejected": .int(packetsRejected), "rtt_ms": rttMillis.map { .double($0) } ?? .null,
            "packets_lost": packetsLost.map { .int($0) } ?? .null,
            "width": .int(size.width), "height": .int(size.height),
            "duration_s": .double(durationSeconds), "fec_packets": .int(fecPackets), "fec_bytes": .int(fecBytes),
        ]
        if let a = audio {
            f["audio_frames"] = .int(a.frames)
            f["audio_packets_sent"] = .int(a.packetsSent)
            f["audio_bytes_sent"] = .int(a.bytesSent)
            f["audio_dtx_frames"] = .int(a.dtxFrames)
            f["audio_silent_frames"] = .int(a.silentFrames)
            f["audio_cpu_s"] = .double(a.cpuSeconds)
            f["audio_underruns"] = .int(a.underruns)
            f["audio_dropped_frames"] = .int(a.droppedFrames)
            f["audio_clipped_frames"] = .int(a.clippedFrames)
            f["audio_latency_ms_p50"] = a.latencyP50Millis.map { .double($0) } ?? .null
            f["audio_latency_ms_p95"] = a.latencyP95Millis.map { .double($0) } ?? .null
        }
        return f
    }
    public var humanText: String {
        "stopped (\(reason.words)): \(framesSent) frames, \(bytesSent) bytes in \(HumanText.decimal(durationSeconds)) s"
    }
}

/// `paused`: video holds the last picture (keep-alive only).
public struct BroadcastPaused: BroadcastEvent, Equatable {
    public var name: String { "paused" }
    public var fields: [String: JSONValue] { [:] }
    public var humanText: String { "paused: the last picture is held (keep-alive only)" }
}

/// `resumed`.
public struct BroadcastResumed: BroadcastEvent, Equatable {
    public var name: String { "resumed" }
    public var fields: [String: JSONValue] { [:] }
    public var humanText: String { "resumed" }
}

/// `settings_changed`: `ctl set` changed the live settings; all of them, and which `changed`.
public struct SettingsChanged: BroadcastEvent, Equatable {
    public var settings: LiveSettings
    /// The names of the fields that changed.
    public var changed: [String]

    public var name: String { "settings_changed" }
    public var fields: [String: JSONValue] {
        var f = settings.fields
        f["changed"] = .array(changed.map { .string($0) })
        return f
    }
    public var humanText: String {
        let f = settings.fields
        return "settings changed: " + changed.map { "\($0)=\(f[$0]?.humanText ?? "-")" }.joined(separator: " ")
    }
}

/// `source_restored`: the window is back (after `source_unavailable`).
public struct SourceRestored: BroadcastEvent, Equatable {
    public var size: PixelSize

    public var name: String { "source_restored" }
    public var fields: [String: JSONValue] { ["size": .string(size.description)] }
    public var humanText: String { "the source is back (\(size))" }
}

// MARK: - Audio capture

/// `audio_app_attached`: the application (`--audio-app`) plays: its sink input is captured.
public struct AudioAppAttached: BroadcastEvent, Equatable {
    public var sinkInput: UInt32
    public var app: String
    public var binary: String
    public var pid: String

    public var name: String { "audio_app_attached" }
    public var fields: [String: JSONValue] {
        ["sink_input": .int(Int(sinkInput)), "app": .string(app), "binary": .string(binary), "pid": .string(pid)]
    }
    public var humanText: String { "hearing \(app.isEmpty ? binary : app)\(pid.isEmpty ? "" : " (pid \(pid))")" }
}

/// `audio_app_detached`: the sink input went away.
public struct AudioAppDetached: BroadcastEvent, Equatable {
    public var sinkInput: UInt32

    public var name: String { "audio_app_detached" }
    public var fields: [String: JSONValue] { ["sink_input": .int(Int(sinkInput))] }
    public var humanText: String { "the application's sound stopped (sink input \(sinkInput)); waiting for it to play again" }
}

/// `audio_reconnecting`: PulseAudio went away; trying again.
public struct AudioReconnecting: BroadcastEvent, Equatable {
    public var attempt: Int
    public var retryInMillis: Int

    public var name: String { "audio_reconnecting" }
    public var fields: [String: JSONValue] { ["attempt": .int(attempt), "retry_in_ms": .int(retryInMillis)] }
    public var humanText: String { "reconnecting to PulseAudio (attempt \(attempt)) in \(retryInMillis) ms" }
}

/// `audio_resumed`: the audio capture is back.
public struct AudioResumed: BroadcastEvent, Equatable {
    public var name: String { "audio_resumed" }
    public var fields: [String: JSONValue] { [:] }
    public var humanText: String { "PulseAudio is back: the sound goes on" }
}
