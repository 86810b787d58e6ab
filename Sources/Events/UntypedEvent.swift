import Foundation

/// An event given as a name and string-keyed fields, with the text the CLI's HumanSink guessed
/// from which fields are present. Transitional: the emitters move to typed events (one type per
/// event, next to its emitter) one module at a time; this goes when the last one has.
public struct UntypedEvent: BroadcastEvent, Equatable {
    public var name: String
    public var fields: [String: JSONValue]
    public init(_ name: String, _ fields: [String: JSONValue] = [:]) {
        self.name = name
        self.fields = fields
    }

    public var humanText: String {
        let f = fields
        func v(_ k: String) -> String {
            switch f[k] {
            case .string(let s)?: return s
            case .int(let i)?: return String(i)
            case .double(let d)?: return String(format: "%.1f", d)
            case .bool(let b)?: return String(b)
            default: return "-"
            }
        }
        switch name {
        case "started" where f["listen"] != nil: return "relay listening on \(v("listen")) (protocol v\(v("protocol_version")))"
        case "started" where f["room"] != nil && f["ssrc"] != nil:
            let join = f["watch_command"] != nil ? "; viewers join with: \(v("watch_command"))" : ""
            return "sharing in room \(v("room")) via \(v("server")) as \(v("name"))\(join)"
        case "started" where f["room"] != nil: return "joining room \(v("room")) at \(v("server"))"
        case "connected": return "connected to room \(v("room")) at \(v("server")) as peer \(v("peer")) (\(v("peers")) others here)"
        case "peer_joined": return "\(v("name")) joined\(f["room"] != nil ? " room \(v("room"))" : "") (peer \(v("peer")))"
        case "peer_left": return "\(v("name")) left\(f["room"] != nil ? " room \(v("room"))" : "") (\(v("reason")))"
        case "substream_started": return "peer \(v("peer")) started sharing \(v("kind"))"
        case "substream_stopped": return "peer \(v("peer")) stopped sharing \(v("kind"))"
        case "subscribed" where f["viewer"] != nil && f["publisher"] == nil: return "\(v("name")) is watching (\(v("viewers")) viewers)"
        case "unsubscribed" where f["viewer"] != nil && f["publisher"] == nil: return "\(v("name")) stopped watching (\(v("viewers")) viewers)"
        case "subscribed": return "watching \(v("name")) (peer \(v("publisher")))"
        case "unsubscribed": return "no longer watching peer \(v("publisher"))"
        case "reconnecting": return "lost the relay \(v("server")) (\(v("reason"))); retry \(v("attempt"))/\(v("of")) in \(v("retry_in_ms")) ms"
        case "disconnected": return "gave up on the relay \(v("server")): \(v("reason"))"
        case "stats" where f["rooms"] != nil:
            return "\(v("rooms")) rooms  \(v("peers")) peers  \(v("packets_in")) pkt/s in  \(v("packets_out")) pkt/s out  \(v("kbps_out")) kbps out"
        case "started": return "sending to \(v("destination")) (ssrc \(v("ssrc")), \(v("fps")) fps max, \(v("bitrate_kbps")) kbps); control: \(v("control_socket"))"
        case "first_frame_sent": return "first frame sent: \(v("width"))x\(v("height")) after \(v("latency_ms")) ms"
        case "stats" where f["frames_decoded"] != nil:
            return "\(v("width"))x\(v("height"))  \(v("fps")) fps  \(v("kbps")) kbps  lost \(v("packets_lost"))  jitter \(v("jitter_ms")) ms  freezes \(v("freeze_count"))"
        case "stats":
            let loss: String
            if case .double(let l)? = f["loss"] { loss = String(format: "%.1f%%", l * 100) } else { loss = "-" }
            let viewers = f["viewers"] != nil ? "  viewers \(v("viewers"))" : ""
            return "\(v("width"))x\(v("height"))  \(v("fps")) fps  \(v("kbps")) kbps  encode \(v("encode_ms_p50"))/\(v("encode_ms_p95")) ms  rtt \(v("rtt_ms")) ms  loss \(loss)\(viewers)"
        case "paused": return "paused: the last picture is held (keep-alive only)"
        case "resumed": return "resumed"
        case "settings_changed":
            var changed = ""
            if case .array(let keys)? = f["changed"] {
                changed = keys.compactMap { if case .string(let k) = $0 { return "\(k)=\(v(k))" } else { return nil } }.joined(separator: " ")
            }
            return "settings changed: \(changed)"
        case "first_frame": return "first frame: \(v("width"))x\(v("height")) after \(v("time_to_first_frame_ms")) ms"
        case "stopped" where f["frames_decoded"] != nil:
            return "stopped (\(v("reason"))): \(v("frames_decoded")) frames decoded, \(v("packets_lost")) packets lost, \(v("freeze_count")) freezes"
        case "stopped" where f["rtp_forwarded"] != nil:
            return "relay stopped: \(v("rtp_forwarded")) packets forwarded, \(v("rejected")) rejected"
        case "stopped": return "stopped (\(v("reason"))): \(v("frames_sent")) frames, \(v("bytes_sent")) bytes in \(v("duration_s")) s"
        default: return "\(name): \(v("kind")) \(v("message"))"
        }
    }
}
