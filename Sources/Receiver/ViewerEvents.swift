import Events
import MediaCore
import Basics
import Room
import RoomEvents

// The events only `watch` prints: the viewer started, its first frame, resolution and sender
// changes, stats every second and the summary. They live here, next to Viewer, which emits
// them. The room events a viewer in a room prints are in Room (RoomEvents.swift); `warning`
// and `error` are in Events (Problems.swift).

/// `started`: the viewer listens (in a room: is joining it).
public struct ViewerStarted: BroadcastEvent, Equatable {
    public struct Audio: Sendable, Equatable {
        /// The audio RTP port (nil in a room: one socket carries everything).
        public var port: UInt16?
        /// Whether the audio plays.
        public var playback: Bool
    }

    public var rtpPort: UInt16
    public var rtcpPort: UInt16
    public var payloadType: UInt8
    /// Whether a window shows the video.
    public var window: Bool
    /// The recording's path (`--record`).
    public var record: String?
    public var room: RoomSettings?
    public var audio: Audio?

    public var name: String { "started" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "rtp_port": .int(Int(rtpPort)), "rtcp_port": .int(Int(rtcpPort)),
            "payload_type": .int(Int(payloadType)), "window": .bool(window),
            "record": record.map { .string($0) } ?? .null,
        ]
        if let room {
            f["room"] = .string(room.name)
            f["server"] = .string(room.server)
        }
        if let audio {
            f["audio_port"] = audio.port.map { .int(Int($0)) } ?? .null
            f["audio_playback"] = .bool(audio.playback)
        }
        return f
    }
    public var humanText: String {
        if let room { return "joining room \(room.name) at \(room.server)" }
        // The line a plain `watch` has always printed (the sender's, with nothing filled in).
        return "sending to - (ssrc -, - fps max, - kbps); control: -"
    }
}

/// `first_frame`: the first picture was decoded (`sinceSubscribedMillis`: in a room, since the
/// relay confirmed the subscription).
public struct FirstFrame: BroadcastEvent, Equatable {
    public var size: PixelSize
    public var timeToFirstFrameMillis: Double
    public var sinceSubscribedMillis: Double?

    public var name: String { "first_frame" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "width": .int(size.width), "height": .int(size.height), "time_to_first_frame_ms": .double(timeToFirstFrameMillis),
        ]
        if let sinceSubscribedMillis { f["since_subscribed_ms"] = .double(sinceSubscribedMillis) }
        return f
    }
    public var humanText: String {
        "first frame: \(size.width)x\(size.height) after \(HumanText.decimal(timeToFirstFrameMillis)) ms"
    }
}

/// `resolution_changed`: the pictures have a new size.
public struct ResolutionChanged: BroadcastEvent, Equatable {
    public var size: PixelSize

    public var name: String { "resolution_changed" }
    public var fields: [String: JSONValue] { ["width": .int(size.width), "height": .int(size.height)] }
    public var humanText: String { "the picture is now \(size.width)x\(size.height)" }
}

/// `sender_changed`: another sender (or the same one restarted) took over.
public struct SenderChanged: BroadcastEvent, Equatable {
    public var ssrc: UInt32

    public var name: String { "sender_changed" }
    public var fields: [String: JSONValue] { ["ssrc": .int(Int(ssrc))] }
    public var humanText: String { "another sender took over (ssrc \(ssrc))" }
}

/// `share_ended`: the presenter this viewer watched left the room on purpose (it stopped
/// sharing: `leave`, not a timeout) and nobody else shares a screen there; the viewer ends.
public struct ShareEnded: BroadcastEvent, Equatable {
    public var presenter: String

    public var name: String { "share_ended" }
    public var fields: [String: JSONValue] { ["presenter": .string(presenter)] }
    public var humanText: String { "\(presenter.isEmpty ? "the presenter" : presenter) ended the share" }
}

/// `sender_left`: the sender said goodbye (RTCP BYE).
public struct SenderLeft: BroadcastEvent, Equatable {
    public var ssrc: UInt32

    public var name: String { "sender_left" }
    public var fields: [String: JSONValue] { ["ssrc": .int(Int(ssrc))] }
    public var humanText: String { "the sender said goodbye (ssrc \(ssrc))" }
}

/// The audio's part of the viewer's `stats` and `stopped` (when the stream has audio).
/// Times are in milliseconds to 0.1; nil is `null` (not measured yet).
public struct ViewerAudioStats: Sendable, Equatable {
    /// How far the sound is ahead of the picture.
    public var avOffsetMillis: Double?
    /// Whether lip sync is on (`--no-av-sync`).
    public var avSync: Bool
    public var videoSyncDelayMillis: Double?
    public var audioSyncDelayMillis: Double?
    public var outputLatencyMillis: Double?
    public var outputFlushes: Int
    public var jitterDelayMillis: Double?
    public var targetDelayMillis: Double?
    public var packets: Int
    public var decoded: Int
    public var fecRecovered: Int
    public var concealed: Int
    public var late: Int
    public var silenceFrames: Int
    public var packetsLost: Int
    public var playing: Bool

    var fields: [String: JSONValue] {
        func ms(_ v: Double?) -> JSONValue { v.map { .double($0) } ?? .null }
        return [
            "av_offset_ms": ms(avOffsetMillis), "av_sync": .bool(avSync),
            "video_sync_delay_ms": ms(videoSyncDelayMillis), "audio_sync_delay_ms": ms(audioSyncDelayMillis),
            "audio_output_latency_ms": ms(outputLatencyMillis), "audio_output_flushes": .int(outputFlushes),
            "audio_jitter_delay_ms": ms(jitterDelayMillis), "audio_target_delay_ms": ms(targetDelayMillis),
            "audio_packets": .int(packets), "audio_decoded": .int(decoded), "audio_fec_recovered": .int(fecRecovered),
            "audio_concealed": .int(concealed), "audio_late": .int(late), "audio_silence_frames": .int(silenceFrames),
            "audio_packets_lost": .int(packetsLost), "audio_playing": .bool(playing),
        ]
    }
}

/// `stats`, every second: the last second's rates, the stream's state and running totals.
public struct ViewerStats: BroadcastEvent, Equatable {
    public var fps: Int
    public var kbps: Int
    public var size: PixelSize
    public var packetsReceived: Int
    public var packetsLost: Int
    public var jitterMillis: Double
    public var bufferMillis: Double
    public var framesDecoded: Int
    /// Freezes so far, the one in progress included.
    public var freezeCount: Int
    /// How long since the last picture was shown, to 0.1 ms; nil before the first.
    public var frameGapMillis: Double?
    /// Seconds frozen so far, the freeze in progress included.
    public var freezesDurationSeconds: Double
    public var nackCount: Int
    public var pliCount: Int
    /// Round trip to the sender or relay (RTCP XR), to 0.01 ms; nil until answered.
    public var rttMillis: Double?
    public var audio: ViewerAudioStats?

    public var name: String { "stats" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "fps": .int(fps), "kbps": .int(kbps), "width": .int(size.width), "height": .int(size.height),
            "packets_received": .int(packetsReceived), "packets_lost": .int(packetsLost),
            "jitter_ms": .double(jitterMillis), "buffer_ms": .double(bufferMillis),
            "frames_decoded": .int(framesDecoded), "freeze_count": .int(freezeCount),
            "frame_gap_ms": frameGapMillis.map { .double($0) } ?? .null, "total_freezes_duration_s": .double(freezesDurationSeconds),
            "nack_count": .int(nackCount), "pli_count": .int(pliCount),
            "rtt_ms": rttMillis.map { .double($0) } ?? .null,
        ]
        if let audio { f.merge(audio.fields) { a, _ in a } }
        return f
    }
    /// What the viewer waits for while no picture has come ("a presenter", "the relay"); the
    /// status line says so instead of an empty picture's numbers.
    public var waitingFor: String?

    public var humanText: String {
        if let waitingFor, framesDecoded == 0 { return "waiting for \(waitingFor)…" }
        return "\(size.width)x\(size.height)  \(fps) fps  \(kbps) kbps  lost \(packetsLost)  jitter \(HumanText.decimal(jitterMillis)) ms  freezes \(freezeCount)"
    }
}

/// `stopped`: the viewer's totals (the audio's too, when the stream had audio).
public struct ViewerStopped: BroadcastEvent, Equatable {
    public var reason: ViewerStopReason
    public var framesDecoded: Int
    public var keyframesDecoded: Int
    public var framesDropped: Int
    public var framesReceived: Int
    public var freezeCount: Int
    public var totalFreezesDurationSeconds: Double
    public var packetsReceived: Int
    public var packetsLost: Int
    public var jitterMillis: Double
    public var nackCount: Int
    public var pliCount: Int
    public var idleProbes: Int
    public var rttMillis: Double?
    public var packetsRejected: Int
    /// SRTP packets refused (forged, replayed; counted in `packetsRejected` too); nil without SRTP.
    public var srtpRejected: Int? = nil
    public var decodeErrors: Int
    public var packetsForeign: Int
    /// nil: no picture came.
    public var timeToFirstFrameMillis: Double?
    public var size: PixelSize
    public var recordedFrames: Int
    public var durationSeconds: Double
    public var recordedAudioPackets: Int
    public var audio: ViewerAudioStats?
    /// Transport feedback packets sent (to the sender's congestion control, or in a room to
    /// the relay's estimate of this viewer's link).
    public var transportFeedbacks = 0
    /// FEC packets received, and the packets they recovered (with no resend).
    public var fecPackets = 0
    public var fecRecovered = 0

    public var name: String { "stopped" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "reason": .string(reason.rawValue),
            "frames_decoded": .int(framesDecoded), "keyframes_decoded": .int(keyframesDecoded),
            "frames_dropped": .int(framesDropped), "frames_received": .int(framesReceived),
            "freeze_count": .int(freezeCount), "total_freezes_duration_s": .double(totalFreezesDurationSeconds),
            "packets_received": .int(packetsReceived), "packets_lost": .int(packetsLost),
            "jitter_ms": .double(jitterMillis),
            "nack_count": .int(nackCount), "pli_count": .int(pliCount), "idle_probes": .int(idleProbes),
            "rtt_ms": rttMillis.map { .double($0) } ?? .null,
            "packets_rejected": .int(packetsRejected), "decode_errors": .int(decodeErrors), "packets_foreign": .int(packetsForeign),
            "time_to_first_frame_ms": timeToFirstFrameMillis.map { .double($0) } ?? .null,
            "width": .int(size.width), "height": .int(size.height),
            "recorded_frames": .int(recordedFrames),
            "duration_s": .double(durationSeconds),
            "recorded_audio_packets": .int(recordedAudioPackets),
            "transport_feedbacks": .int(transportFeedbacks),
            "fec_packets": .int(fecPackets), "fec_recovered": .int(fecRecovered),
        ]
        if let srtpRejected { f["srtp_rejected"] = .int(srtpRejected) }
        if let audio { f.merge(audio.fields) { a, _ in a } }
        return f
    }
    public var humanText: String {
        "stopped (\(reason.words)): \(framesDecoded) frames decoded, \(packetsLost) packets lost, \(freezeCount) freeze\(freezeCount == 1 ? "" : "s")"
    }
}
