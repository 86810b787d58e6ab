import Events
import FoundationEssentials

/// Janus's HTTP API (its REST transport: sessions, plugin handles, messages) and the requests of
/// its streaming plugin the relay makes: bodies out, answers in. Pure: nothing here does I/O,
/// so every answer Janus (or something pretending to be it) may give is read here and fuzzed.
enum JanusAPI {
    /// Why Janus said no, or why its answer could not be read.
    struct Failure: Error, Equatable, CustomStringConvertible {
        /// Janus's code (`error.code` of the API, `error_code` of the plugin), when it gave one.
        var code: Int?
        var reason: String
        var description: String { code.map { "\(reason) (Janus error \($0))" } ?? reason }

        /// The API's "no such session" (the session timed out, or Janus restarted).
        var isSessionGone: Bool { code == 458 }
        /// The API's "no such handle".
        var isHandleGone: Bool { code == 459 }
        /// The streaming plugin's "unauthorized" (a wrong `admin_key` or `secret`).
        var isUnauthorized: Bool { code == 457 }
        /// The streaming plugin's "no such mountpoint".
        var isNoSuchMountpoint: Bool { code == 455 }
        /// The streaming plugin's "mountpoint exists" (an id taken).
        var isIdTaken: Bool { code == 456 && reason.contains("already exists") }
    }

    /// A mountpoint as Janus made it: its id and the ports it listens on for our RTP.
    struct Mountpoint: Equatable, Sendable {
        var id: UInt64
        var videoPort: UInt16
        var audioPort: UInt16?
        /// Where Janus takes the video's RTCP (and sends its keyframe requests from).
        var videoRTCPPort: UInt16? = nil
    }

    /// What the relay asks a mountpoint to be (VP8 and Opus with our payload types, SRTP).
    struct MountpointRequest: Equatable, Sendable {
        var description: String
        var secret: String
        var pin: String?
        var videoPayloadType: UInt8
        var audioPayloadType: UInt8?
        /// AES_CM_128_HMAC_SHA1_80's master key and salt, 30 bytes.
        var srtpKey: [UInt8]
        var adminKey: String?
    }

    // MARK: Requests

    static func createSession(transaction: String) -> String { text(["janus": "create", "transaction": .string(transaction)]) }

    static func attachStreaming(transaction: String) -> String {
        text(["janus": "attach", "plugin": "janus.plugin.streaming", "transaction": .string(transaction)])
    }

    static func keepalive(transaction: String) -> String { text(["janus": "keepalive", "transaction": .string(transaction)]) }

    static func destroySession(transaction: String) -> String { text(["janus": "destroy", "transaction": .string(transaction)]) }

    static func message(_ body: [String: JSONValue], transaction: String) -> String {
        text(["janus": "message", "transaction": .string(transaction), "body": .object(body)])
    }

    /// The streaming plugin's `create` (a live `rtp` mountpoint; Janus picks the ports).
    static func create(_ r: MountpointRequest) -> [String: JSONValue] {
        // `rtcpport`: where Janus takes our RTCP and, once some came, sends its viewers' keyframe
        // requests back (not `bufferkf`: a kept keyframe without the frames after it decodes to
        // a wrong picture until the next one).
        var media: [JSONValue] = [.object([
            "type": "video", "mid": "v", "port": 0, "rtcpport": 0, "pt": .int(Int(r.videoPayloadType)), "codec": "vp8",
        ])]
        if let pt = r.audioPayloadType {
            media.append(.object(["type": "audio", "mid": "a", "port": 0, "pt": .int(Int(pt)), "codec": "opus"]))
        }
        var body: [String: JSONValue] = [
            "request": "create", "type": "rtp", "description": .string(r.description), "secret": .string(r.secret),
            "is_private": true, "permanent": false, "media": .array(media),
            "srtpsuite": 80, "srtpcrypto": .string(Data(r.srtpKey).base64EncodedString()),
        ]
        if let pin = r.pin { body["pin"] = .string(pin) }
        if let key = r.adminKey { body["admin_key"] = .string(key) }
        return body
    }

    /// The streaming plugin's `destroy`.
    static func destroy(id: UInt64, secret: String) -> [String: JSONValue] {
        ["request": "destroy", "id": .int(Int(id)), "secret": .string(secret), "permanent": false]
    }

    // MARK: Answers

    /// The id a `create` or `attach` answered (`{"janus":"success","data":{"id":N}}`).
    static func readID(_ answer: String) throws(Failure) -> UInt64 {
        let top = try success(answer)
        guard case .object(let data)? = top["data"], let id = unsigned(data["id"]) else {
            throw Failure(reason: "Janus's answer has no id")
        }
        return id
    }

    /// A `keepalive`'s or `destroy`'s answer (`ack` or `success`).
    static func readAck(_ answer: String) throws(Failure) {
        _ = try success(answer, acceptAck: true)
    }

    /// A plugin answer's data (`plugindata.data`); the plugin's own error thrown.
    static func readPluginData(_ answer: String) throws(Failure) -> [String: JSONValue] {
        let top = try success(answer)
        guard case .object(let plugin)? = top["plugindata"], case .object(let data)? = plugin["data"] else {
            throw Failure(reason: "Janus's answer carries no plugin data")
        }
        if let code = data["error_code"], case .int(let c) = code {
            throw Failure(code: c, reason: string(data["error"]) ?? "the streaming plugin refused")
        }
        return data
    }

    /// A `create`'s answer: the mountpoint's id and ports.
    static func readCreated(_ answer: String) throws(Failure) -> Mountpoint {
        let data = try readPluginData(answer)
        guard string(data["streaming"]) == "created", case .object(let stream)? = data["stream"], let id = unsigned(stream["id"]) else {
            throw Failure(reason: "the streaming plugin's answer to create names no mountpoint")
        }
        var video: UInt16?, audio: UInt16?, rtcp: UInt16?
        if case .array(let ports)? = stream["ports"] {
            for case .object(let p) in ports {
                guard let port = unsigned(p["port"]), (1...65535).contains(port) else { continue }
                switch string(p["type"]) {
                case "video" where video == nil:
                    video = UInt16(port)
                    if let r = unsigned(p["rtcp_port"]), (1...65535).contains(r) { rtcp = UInt16(r) }
                case "audio": audio = audio ?? UInt16(port)
                default: break
                }
            }
        }
        guard let video else { throw Failure(reason: "the streaming plugin made mountpoint \(id) with no video port") }
        return Mountpoint(id: id, videoPort: video, audioPort: audio, videoRTCPPort: rtcp)
    }

    /// The top level of an answer: `success` (or `ack`), else Janus's error.
    private static func success(_ answer: String, acceptAck: Bool = false) throws(Failure) -> [String: JSONValue] {
        guard answer.utf8.count <= 256 * 1024,
              let value = try? JSONDecoder().decode(JSONValue.self, from: Data(answer.utf8)), case .object(let top) = value else {
            throw Failure(reason: "Janus's answer is not JSON: '\(answer.prefix(60))'")
        }
        switch string(top["janus"]) {
        case "success": return top
        case "ack" where acceptAck: return top
        case "error":
            if case .object(let e)? = top["error"] {
                let code: Int? = if case .int(let c)? = e["code"] { c } else { nil }
                throw Failure(code: code, reason: string(e["reason"]) ?? "Janus refused")
            }
            throw Failure(reason: "Janus refused")
        case let other?: throw Failure(reason: "Janus answered '\(other.prefix(30))', not success")
        case nil: throw Failure(reason: "the answer is not Janus's (no \"janus\" field)")
        }
    }

    private static func string(_ v: JSONValue?) -> String? { if case .string(let s)? = v { s } else { nil } }

    private static func unsigned(_ v: JSONValue?) -> UInt64? {
        switch v {
        case .int(let i)? where i >= 0: UInt64(i)
        case .double(let d)? where d >= 0 && d < 9.007e15 && d == d.rounded(): UInt64(d)
        default: nil
        }
    }

    private static func text(_ o: [String: JSONValue]) -> String { JSONValue.object(o).jsonText }
}

/// What the fuzz target reads: an answer from (what claims to be) Janus.
public enum JanusAnswerReader {
    /// Reads `answer` every way the relay does; whether it was a mountpoint made (a seed is).
    /// What it reads is checked: a mountpoint has a video port, an id is Janus's.
    public static func read(_ answer: String) -> Bool {
        if let id = try? JanusAPI.readID(answer) { precondition(id <= UInt64(Int.max)) }
        _ = try? JanusAPI.readAck(answer)
        _ = try? JanusAPI.readPluginData(answer)
        guard let m = try? JanusAPI.readCreated(answer) else { return false }
        precondition(m.videoPort > 0 && m.audioPort != 0 && m.videoRTCPPort != 0)
        return true
    }
}
