import Events

/// How `start` and `watch` join a room.
public struct RoomSettings: Sendable, Equatable {
    /// The room's name.
    public var name: String
    /// Our display name in the room.
    public var displayName: String
    /// The relay, as given (for messages).
    public var server: String
    /// Whom a viewer receives.
    public var target: SubscriptionTarget
    /// For the presenter hosting the room: the line viewers run to join.
    public var watchCommand: String?
    public init(name: String, displayName: String, server: String, target: SubscriptionTarget = .auto) {
        self.name = name
        self.displayName = displayName
        self.server = server
        self.target = target
    }
}

/// Turns room client events into the events `start` and `watch` print.
public struct RoomEventMapper {
    public let server: String
    public private(set) var viewers: [UInt32] = []
    private var names: [UInt32: String] = [:]
    /// Set when the client gave up: the caller stops.
    public private(set) var disconnected: String?

    public init(server: String) { self.server = server }

    public mutating func map(_ e: RoomClientEvent, client: RoomClient) -> [UntypedEvent] {
        func peer(_ p: PeerInfo) -> [String: JSONValue] { ["peer": .int(Int(p.id)), "name": .string(p.name)] }
        switch e {
        case let .connected(id, room, peers, rejoined):
            return [UntypedEvent("connected", ["room": .string(room), "server": .string(server), "peer": .int(Int(id)),
                                                 "peers": .int(peers.count), "rejoined": .bool(rejoined)])]
        case .peerJoined(let p):
            return [UntypedEvent("peer_joined", peer(p).merging(["role": .string(p.role)]) { a, _ in a })]
        case let .peerLeft(p, reason):
            return [UntypedEvent("peer_left", peer(p).merging(["reason": .string(reason)]) { a, _ in a })]
        case let .substreamStarted(p, s):
            return [UntypedEvent("substream_started", peer(p).merging(s.fields) { a, _ in a })]
        case let .substreamStopped(p, s):
            return [UntypedEvent("substream_stopped", peer(p).merging(s.fields) { a, _ in a })]
        case let .subscribed(p, streams):
            return [UntypedEvent("subscribed", [
                "publisher": .int(Int(p.id)), "name": .string(p.name),
                "kinds": .array(streams.map { .string($0.kind.rawValue) }),
            ])]
        case .unsubscribed(let p):
            return [UntypedEvent("unsubscribed", ["publisher": .int(Int(p.id)), "name": .string(p.name)])]
        case .subscribers(let ids):
            // Our audience changed: one event per viewer who came or went.
            var out: [UntypedEvent] = []
            for id in ids where !viewers.contains(id) {
                names[id] = client.peers[id]?.name ?? ""
                out.append(UntypedEvent("subscribed", ["viewer": .int(Int(id)), "name": .string(names[id]!), "viewers": .int(ids.count)]))
            }
            for id in viewers where !ids.contains(id) {
                out.append(UntypedEvent("unsubscribed", ["viewer": .int(Int(id)), "name": .string(names.removeValue(forKey: id) ?? ""), "viewers": .int(ids.count)]))
            }
            viewers = ids
            return out
        case let .reconnecting(attempt, delay, reason):
            viewers = []
            return [UntypedEvent("reconnecting", ["attempt": .int(attempt), "of": .int(RoomClient.retries),
                                                    "retry_in_ms": .int(Int(delay / 1_000_000)), "reason": .string(reason),
                                                    "server": .string(server)])]
        case .disconnected(let reason):
            disconnected = reason
            return [UntypedEvent("disconnected", ["reason": .string(reason), "server": .string(server)])]
        case let .error(code, message):
            return [UntypedEvent("warning", ["kind": "room_error", "code": .string(code.rawValue), "message": .string(message)])]
        }
    }
}

extension StreamInfo {
    /// The stream as event fields.
    public var fields: [String: JSONValue] {
        ["kind": .string(kind.rawValue), "ssrc": .int(Int(ssrc)), "codec": .string(codec), "payload_type": .int(Int(pt))]
    }
}
