import Events

/// The control protocol between `screenshare ctl` and a running `start`: one JSON request
/// line in, one JSON response line out, on a UNIX stream socket (see ``ControlServer``).
///
/// Version 1 (`"v":1`; a request without `v` is version 1, as sent before versioning):
///
///     {"v":1,"cmd":"pause"}                 → {"v":1,"ok":true,"paused":true}
///     {"v":1,"cmd":"resume"}                → {"v":1,"ok":true,"paused":false}
///     {"v":1,"cmd":"stop"}                  → {"v":1,"ok":true}
///     {"v":1,"cmd":"status"}                → {"v":1,"ok":true,"settings":{…},"stats":{…}}
///     {"v":1,"cmd":"set","set":[["bitrate","1M"],["fps","30"]]}
///                                           → {"v":1,"ok":true,"settings":{…}}
///     {"v":1,"cmd":"invite"}                → {"v":1,"ok":true,"link":"http://…/class#k=…"}
///     {"v":1,"cmd":"invite","revoke":true}  → {"v":1,"ok":true}
///     anything wrong                        → {"v":1,"ok":false,"error":"…"}
public enum ControlProtocol {
    /// The version this build speaks.
    public static let version = 1
    /// Longest request line the server reads.
    public static let maxRequestBytes = 65_536
}

/// What `ctl` asks for.
public enum ControlCommand: String, Codable, Sendable, CaseIterable {
    case pause, resume, stop, status, set, invite
}

/// The invitation links of the room a broadcaster hosts (`ctl invite`): a new one replaces the
/// old, or the current one is revoked. Viewers already in the room stay.
public protocol RoomInvitations: Sendable {
    /// A new link; the old one stops working.
    func renew() -> String
    /// The current link stops working; none replaces it.
    func revoke()
}

/// One setting to change: a `ctl set` KEY=VALUE (on the wire, a `[KEY, VALUE]` pair).
public struct SettingChange: Codable, Sendable, Equatable {
    public var key: String
    public var value: String
    public init(_ key: String, _ value: String) {
        self.key = key
        self.value = value
    }

    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        key = try c.decode(String.self)
        value = try c.decode(String.self)
        guard c.isAtEnd else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "a setting is a [KEY, VALUE] pair")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(key)
        try c.encode(value)
    }
}

/// A request line.
public struct ControlRequest: Codable, Sendable, Equatable {
    /// Protocol version; nil (absent) is read as 1.
    public var v: Int?
    /// The command, as sent (checked by ``command``, so an unknown one gets a clear answer).
    public var cmd: String
    /// The changes of a `set`.
    public var set: [SettingChange]?
    /// For `invite`: revoke the link instead of making a new one.
    public var revoke: Bool?

    public init(_ command: ControlCommand, set: [SettingChange]? = nil, revoke: Bool? = nil) {
        v = ControlProtocol.version
        cmd = command.rawValue
        self.set = set
        self.revoke = revoke
    }

    /// The command, or an error text naming what is wrong with the request.
    public var command: Result<ControlCommand, ControlError> {
        if let v, v != ControlProtocol.version {
            return .failure(ControlError("control protocol version \(v) is not supported (this broadcaster speaks \(ControlProtocol.version))"))
        }
        guard let c = ControlCommand(rawValue: cmd) else {
            let all = ControlCommand.allCases.map(\.rawValue)
            return .failure(ControlError("unknown command '\(cmd)'; use \(all.dropLast().joined(separator: ", ")) or \(all.last!)"))
        }
        if c == .set, (set ?? []).isEmpty {
            return .failure(ControlError("set: expected \"set\": [[KEY, VALUE], ...]"))
        }
        return .success(c)
    }
}

/// A response line.
public struct ControlResponse: Codable, Sendable, Equatable {
    public var v: Int = ControlProtocol.version
    public var ok: Bool
    public var error: String?
    /// Whether the broadcast is paused now (answers to pause and resume).
    public var paused: Bool?
    /// The live settings (status, set).
    public var settings: [String: JSONValue]?
    /// Counters of the running broadcast (status).
    public var stats: [String: JSONValue]?
    /// The new invitation link (invite).
    public var link: String?

    public init(ok: Bool = true, error: String? = nil, paused: Bool? = nil,
                settings: [String: JSONValue]? = nil, stats: [String: JSONValue]? = nil, link: String? = nil) {
        self.ok = ok
        self.error = error
        self.paused = paused
        self.settings = settings
        self.stats = stats
        self.link = link
    }

    /// The response as one line of JSON (sorted keys), as it crosses the socket.
    public var jsonText: String { (try? ControlCoding.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}" }

    /// A refusal naming why.
    public static func failure(_ message: String) -> ControlResponse { ControlResponse(ok: false, error: message) }
}

/// The control socket cannot be used: none there, several, unreachable, or a garbled answer.
public struct ControlError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
