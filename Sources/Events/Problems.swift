// The `warning` and `error` events, shared by every command (the sender, the viewer and the
// room client report them), so they live here in the events target. Their `kind`s are the
// documented set (README, "Warnings"): one enum case each, with the fields a kind adds.

/// `warning`: something is wrong but the command goes on (`kind`, `message`, and the fields
/// the kind adds). Emit with `events.emit(.warning(.networkBusy, message))`.
public struct WarningEvent: BroadcastEvent, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Receivers report loss (≥ 5 % of the packets resent) or the local send queue is full.
        case networkBusy
        /// Packets are refused (nobody listens at the destination).
        case sendFailed
        /// The source changed size: the encoder restarts with a keyframe.
        case sourceResized
        /// The window is unmapped or gone: a placeholder is sent.
        case sourceUnavailable
        /// The encoder could not take new settings: it is re-created.
        case encoderReconfigure
        /// The encoder sends well above the target bit rate.
        case encoderOvershoot(kbps: Int, targetKbps: Int)
        /// The control socket could not be opened: `screenshare ctl` cannot reach the broadcast.
        case controlUnavailable
        /// No PulseAudio (or no such source): video only.
        case audioUnavailable
        /// The audio source went away: silence is sent while it reconnects.
        case audioSourceLost
        /// A PulseAudio stream failed.
        case audioStreamFailed
        /// The viewer cannot play the audio.
        case audioPlaybackUnavailable
        /// The viewer was sent a keyframe larger than it takes (forged, or not a screen): refused
        /// before decoding; it waits for the next keyframe.
        case pictureTooLarge(width: Int, height: Int)
        /// The relay refused a request (`code` is its error code).
        case roomError(code: String)
        /// A Janus server (`--janus`) does not answer, or refuses: retried with backoff.
        case janus(server: String)

        /// The `kind` field.
        public var name: String {
            switch self {
            case .networkBusy: "network_busy"
            case .sendFailed: "send_failed"
            case .sourceResized: "source_resized"
            case .sourceUnavailable: "source_unavailable"
            case .encoderReconfigure: "encoder_reconfigure"
            case .encoderOvershoot: "encoder_overshoot"
            case .controlUnavailable: "control_unavailable"
            case .audioUnavailable: "audio_unavailable"
            case .audioSourceLost: "audio_source_lost"
            case .audioStreamFailed: "audio_stream_failed"
            case .audioPlaybackUnavailable: "audio_playback_unavailable"
            case .pictureTooLarge: "picture_too_large"
            case .roomError: "room_error"
            case .janus: "janus"
            }
        }

        /// The fields the kind adds to `kind` and `message`.
        var extraFields: [String: JSONValue] {
            switch self {
            case let .encoderOvershoot(kbps, target): ["kbps": .int(kbps), "target_kbps": .int(target)]
            case .roomError(let code): ["code": .string(code)]
            case .janus(let server): ["server": .string(server)]
            case let .pictureTooLarge(width, height): ["width": .int(width), "height": .int(height)]
            default: [:]
            }
        }
    }

    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var name: String { "warning" }
    public var fields: [String: JSONValue] { problemFields(kind: kind.name, extra: kind.extraFields, message: message) }
    // People read the message; the kind is for machines (the JSON line).
    public var humanText: String { "warning: \(message)" }
}

/// `error`: something failed; the command may go on without it (`source_switch_failed`,
/// `record_failure`) or stop (`source_gone`). Emit with `events.emit(.error(.sourceGone, message))`.
public struct ErrorEvent: BroadcastEvent, Equatable {
    public enum Kind: Sendable, Equatable {
        /// `ctl set source=...` could not open the new source: the previous one goes on.
        case sourceSwitchFailed
        /// The source is too small to encode: the last picture is held.
        case unsupportedResolution(width: Int, height: Int)
        /// The source ended for good.
        case sourceGone
        /// The encoder failed.
        case encodeFailure
        /// The viewer could not create, write or finish its recording: it stops recording, goes
        /// on watching, and `watch` exits with 1.
        case recordFailure
        /// The relay refused to admit us to the room (the message says why: no token, expired,
        /// another room's, a viewer's used to present…); the command exits with 77.
        case unauthorized
        /// The relay's DTLS certificate is not the one pinned (`--fingerprint`, the printed
        /// line and link): not the relay named, or someone in between; the command exits with 76.
        case untrustedRelay

        /// The `kind` field.
        public var name: String {
            switch self {
            case .sourceSwitchFailed: "source_switch_failed"
            case .unsupportedResolution: "unsupported_resolution"
            case .sourceGone: "source_gone"
            case .encodeFailure: "encode_failure"
            case .recordFailure: "record_failure"
            case .unauthorized: "unauthorized"
            case .untrustedRelay: "untrusted_relay"
            }
        }

        /// The fields the kind adds to `kind` and `message`.
        var extraFields: [String: JSONValue] {
            switch self {
            case let .unsupportedResolution(width, height): ["width": .int(width), "height": .int(height)]
            default: [:]
            }
        }
    }

    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var name: String { "error" }
    public var fields: [String: JSONValue] { problemFields(kind: kind.name, extra: kind.extraFields, message: message) }
    public var humanText: String { "error: \(message)" }
}

/// A `warning`'s or an `error`'s fields: what its kind adds, then `kind` and `message`.
private func problemFields(kind: String, extra: [String: JSONValue], message: String) -> [String: JSONValue] {
    var f = extra
    f["kind"] = .string(kind)
    f["message"] = .string(message)
    return f
}

extension BroadcastEvent where Self == WarningEvent {
    /// A `warning` event: `events.emit(.warning(.networkBusy, message))`.
    public static func warning(_ kind: WarningEvent.Kind, _ message: String) -> WarningEvent { WarningEvent(kind, message) }
}

extension BroadcastEvent where Self == ErrorEvent {
    /// An `error` event: `events.emit(.error(.sourceGone, message))`.
    public static func error(_ kind: ErrorEvent.Kind, _ message: String) -> ErrorEvent { ErrorEvent(kind, message) }
}
