import Events
import NetworkAddress
import Room

// Room and peer events: what `start --room` and `watch --room` report of the room (from their
// room client, through `RoomEventMapper`), and what `serve` reports of its rooms (the peer and
// substream events, with the room and the peer's address). The room client and the relay core
// produce plain values (`RoomClientEvent`, `RelayEvent`); this module, at the edge, renders them
// as events with JSON fields and text. The events that only `serve` prints (started, stats,
// stopped, and its subscriptions) are in Relay (RelayEvents.swift).

/// Turns room client events into the events `start` and `watch` print.
public struct RoomEventMapper {
    public let server: String
    public private(set) var viewers: [UInt32] = []
    private var names: [UInt32: String] = [:]
    /// Set when the client gave up: the caller stops.
    public private(set) var disconnected: String?
    /// Set when the relay refused to admit us (why): the caller stops (exit 77).
    public private(set) var refused: String?
    /// Set when the relay is not the one pinned (why): the caller stops (exit 76).
    public private(set) var untrusted: String?
    /// What the relay last said our link carries, per publisher (it repeats itself).
    private var links: [UInt32: LinkLayers] = [:]

    /// Whether the relay was reached once (a retry after that has lost it; before, it never answered).
    private var wasConnected = false

    public init(server: String) { self.server = server }

    public mutating func map(_ e: RoomClientEvent, client: RoomClient) -> [any BroadcastEvent] {
        switch e {
        case let .connected(id, room, peers, rejoined):
            wasConnected = true
            return [RoomConnected(room: room, server: server, peer: id, peers: peers.count, rejoined: rejoined)]
        case .peerJoined(let p):
            return [PeerJoined(peer: p.id, peerName: p.name, role: p.role, client: p.client)]
        case let .peerLeft(p, reason):
            return [PeerLeft(peer: p.id, peerName: p.name, reason: reason)]
        case let .substreamStarted(p, s):
            // A screen's FEC stream is part of the screen, not a substream of its own to report.
            return s.kind == .fec ? [] : [SubstreamStarted(peer: p.id, peerName: p.name, stream: s)]
        case let .substreamStopped(p, s):
            return s.kind == .fec ? [] : [SubstreamStopped(peer: p.id, peerName: p.name, stream: s)]
        case let .subscribed(p, streams):
            return [Subscribed(publisher: p.id, publisherName: p.name, kinds: streams.map(\.kind))]
        case .unsubscribed(let p):
            return [Unsubscribed(publisher: p.id, publisherName: p.name)]
        case .subscribers(let ids):
            // Our audience changed: one event per viewer who came or went.
            var out: [any BroadcastEvent] = []
            for id in ids where !viewers.contains(id) {
                names[id] = client.peers[id]?.name ?? ""
                out.append(ViewerJoined(viewer: id, viewerName: names[id]!, viewers: ids.count))
            }
            for id in viewers where !ids.contains(id) {
                out.append(ViewerLeft(viewer: id, viewerName: names.removeValue(forKey: id) ?? "", viewers: ids.count))
            }
            viewers = ids
            return out
        case let .reconnecting(attempt, delay, reason):
            viewers = []
            return [Reconnecting(attempt: attempt, of: RoomClient.retries, retryInMillis: Int(delay / 1_000_000), reason: reason,
                                 server: server, wasConnected: wasConnected)]
        case .disconnected(let reason):
            disconnected = reason
            return [Disconnected(reason: reason, server: server, wasConnected: wasConnected)]
        case let .error(code, message):
            return [WarningEvent(.roomError(code: code.rawValue), message)]
        case .refused(let message):
            refused = message
            return [ErrorEvent(.unauthorized, message)]
        case .untrusted(let message):
            untrusted = message
            return [ErrorEvent(.untrustedRelay, message)]
        case let .link(publisher, layers, estimate):
            guard links[publisher] != layers else { return [] }  // said again: nothing new
            links[publisher] = layers
            let name = client.peers[publisher]?.name ?? ""
            var out: [any BroadcastEvent] = [LinkChanged(publisher: publisher, publisherName: name, layers: layers, estimateKbps: estimate)]
            if layers == .keyframes {
                out.append(WarningEvent(.networkBusy, "this viewer's link carries less than \(name.isEmpty ? "the presenter" : name)'s base layer"
                    + (estimate.map { " (about \($0) kbit/s, the relay estimates)" } ?? "") + ": only keyframes come until it carries more"))
            }
            return out
        }
    }
}

/// `link` (watch, in a room): what this viewer's link carries of the presenter's screen, as the
/// relay estimates it, and so what the relay forwards: `all` layers, `half` (the two lower
/// layers: half the frames, each as sharp), the `base` layer (a quarter of the frames) or only
/// `keyframes` (with a `network_busy` warning).
public struct LinkChanged: BroadcastEvent, Equatable {
    public var publisher: UInt32
    public var publisherName: String
    public var layers: LinkLayers
    public var estimateKbps: Int?
    public init(publisher: UInt32, publisherName: String, layers: LinkLayers, estimateKbps: Int?) {
        self.publisher = publisher
        self.publisherName = publisherName
        self.layers = layers
        self.estimateKbps = estimateKbps
    }

    public var name: String { "link" }
    public var fields: [String: JSONValue] {
        ["publisher": .int(Int(publisher)), "publisher_name": .string(publisherName), "layers": .string(layers.rawValue),
         "estimate_kbps": estimateKbps.map { .int($0) } ?? .null]
    }
    public var humanText: String {
        let what = switch layers {
        case .all: "every frame"
        case .half: "every other frame"
        case .base: "every fourth frame (the base layer)"
        case .keyframes: "keyframes only"
        }
        return "your link carries \(what) of \(publisherName.isEmpty ? "peer \(publisher)" : publisherName)'s screen"
            + (estimateKbps.map { " (about \($0) kbit/s)" } ?? "")
    }
}

extension StreamInfo {
    /// The stream as event fields.
    public var fields: [String: JSONValue] {
        ["kind": .string(kind.rawValue), "ssrc": .int(Int(ssrc)), "codec": .string(codec), "payload_type": .int(Int(pt))]
    }
}

// MARK: - The room client's events (start and watch)

/// `connected`: joined the room (again, after a reconnect, with `rejoined`).
public struct RoomConnected: BroadcastEvent, Equatable {
    public var room: String
    /// The relay, as given.
    public var server: String
    /// Our peer id.
    public var peer: UInt32
    /// How many others are in the room.
    public var peers: Int
    public var rejoined: Bool
    public init(room: String, server: String, peer: UInt32, peers: Int, rejoined: Bool) {
        self.room = room
        self.server = server
        self.peer = peer
        self.peers = peers
        self.rejoined = rejoined
    }

    public var name: String { "connected" }
    public var fields: [String: JSONValue] {
        ["room": .string(room), "server": .string(server), "peer": .int(Int(peer)), "peers": .int(peers), "rejoined": .bool(rejoined)]
    }
    public var humanText: String { "connected to room \(room) at \(server) as peer \(peer) (\(peers == 0 ? "nobody else" : peers == 1 ? "1 other" : "\(peers) others") here)" }
}

/// `subscribed` (watch): the relay confirmed that we receive `publisher`'s streams of `kinds`.
public struct Subscribed: BroadcastEvent, Equatable {
    public var publisher: UInt32
    /// The publisher's display name.
    public var publisherName: String
    public var kinds: [StreamKind]
    public init(publisher: UInt32, publisherName: String, kinds: [StreamKind]) {
        self.publisher = publisher
        self.publisherName = publisherName
        self.kinds = kinds
    }

    public var name: String { "subscribed" }
    public var fields: [String: JSONValue] {
        ["publisher": .int(Int(publisher)), "name": .string(publisherName), "kinds": .array(kinds.map { .string($0.rawValue) })]
    }
    public var humanText: String { "watching \(publisherName) (peer \(publisher))" }
}

/// `unsubscribed` (watch): we no longer receive `publisher`.
public struct Unsubscribed: BroadcastEvent, Equatable {
    public var publisher: UInt32
    /// The publisher's display name.
    public var publisherName: String
    public init(publisher: UInt32, publisherName: String) {
        self.publisher = publisher
        self.publisherName = publisherName
    }

    public var name: String { "unsubscribed" }
    public var fields: [String: JSONValue] { ["publisher": .int(Int(publisher)), "name": .string(publisherName)] }
    public var humanText: String { "no longer watching peer \(publisher)" }
}

/// `subscribed` (start): a viewer receives our streams; `viewers` is how many do now.
public struct ViewerJoined: BroadcastEvent, Equatable {
    public var viewer: UInt32
    /// The viewer's display name ("" when the room did not say).
    public var viewerName: String
    public var viewers: Int
    public init(viewer: UInt32, viewerName: String, viewers: Int) {
        self.viewer = viewer
        self.viewerName = viewerName
        self.viewers = viewers
    }

    public var name: String { "subscribed" }
    public var fields: [String: JSONValue] { ["viewer": .int(Int(viewer)), "name": .string(viewerName), "viewers": .int(viewers)] }
    public var humanText: String { "\(viewerName) is watching (\(viewers) viewer\(viewers == 1 ? "" : "s"))" }
}

/// `unsubscribed` (start): a viewer no longer receives our streams.
public struct ViewerLeft: BroadcastEvent, Equatable {
    public var viewer: UInt32
    public var viewerName: String
    public var viewers: Int
    public init(viewer: UInt32, viewerName: String, viewers: Int) {
        self.viewer = viewer
        self.viewerName = viewerName
        self.viewers = viewers
    }

    public var name: String { "unsubscribed" }
    public var fields: [String: JSONValue] { ["viewer": .int(Int(viewer)), "name": .string(viewerName), "viewers": .int(viewers)] }
    public var humanText: String { "\(viewerName) stopped watching (\(viewers) viewer\(viewers == 1 ? "" : "s"))" }
}

/// `reconnecting`: lost the relay (or never reached it); trying again.
public struct Reconnecting: BroadcastEvent, Equatable {
    public var attempt: Int
    /// How many attempts there are.
    public var of: Int
    public var retryInMillis: Int
    public var reason: String
    public var server: String
    /// Whether the relay was ever reached (else it is not "lost", it never answered).
    public var wasConnected: Bool
    public init(attempt: Int, of: Int, retryInMillis: Int, reason: String, server: String, wasConnected: Bool = true) {
        self.attempt = attempt
        self.of = of
        self.retryInMillis = retryInMillis
        self.reason = reason
        self.server = server
        self.wasConnected = wasConnected
    }

    public var name: String { "reconnecting" }
    public var fields: [String: JSONValue] {
        ["attempt": .int(attempt), "of": .int(of), "retry_in_ms": .int(retryInMillis), "reason": .string(reason), "server": .string(server)]
    }
    public var humanText: String {
        wasConnected ? "lost the relay \(server) (\(reason)); retry \(attempt)/\(of) in \(retryInMillis) ms"
            : "no answer yet from the relay at \(server); trying again (\(attempt)/\(of)) in \(retryInMillis) ms"
    }
}

/// `disconnected`: gave up on the relay after the retries; the command stops.
public struct Disconnected: BroadcastEvent, Equatable {
    public var reason: String
    public var server: String
    /// Whether the relay had been reached: if not, it never answered (a wrong address, a relay
    /// not running, a firewall), which the words say rather than "lost".
    public var wasConnected: Bool
    public init(reason: String, server: String, wasConnected: Bool = true) {
        self.reason = reason
        self.server = server
        self.wasConnected = wasConnected
    }

    public var name: String { "disconnected" }
    public var fields: [String: JSONValue] { ["reason": .string(reason), "server": .string(server)] }
    public var humanText: String {
        guard !wasConnected else { return "gave up on the relay \(server): \(reason)" }
        let port = server.split(separator: ":").last.map { " UDP port \($0)" } ?? " its UDP port"
        return "the relay at \(server) never answered: is it running there, and is\(port) open to you?"
    }
}

// MARK: - Peers and their streams (start, watch, and serve with `room`)

/// `peer_joined`. `serve` adds the room and the peer's address.
public struct PeerJoined: BroadcastEvent, Equatable {
    /// The room (serve only).
    public var room: String?
    public var peer: UInt32
    /// The peer's display name.
    public var peerName: String
    public var role: String
    /// Where the peer's datagrams come from (serve only).
    public var address: PeerAddress?
    /// "screenshare" (`start`, `watch`) or "browser" (WHEP).
    public var client: String
    public init(room: String? = nil, peer: UInt32, peerName: String, role: String, address: PeerAddress? = nil,
                client: String? = nil) {
        self.room = room
        self.peer = peer
        self.peerName = peerName
        self.role = role
        self.address = address
        self.client = client ?? "screenshare"
    }

    public var name: String { "peer_joined" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = ["peer": .int(Int(peer)), "name": .string(peerName), "role": .string(role),
                                      "client": .string(client)]
        if let room { f["room"] = .string(room) }
        if let address { f["address"] = .string(address.description) }
        return f
    }
    public var humanText: String { "\(peerName) joined\(room.map { " room \($0)" } ?? "") (peer \(peer))" }
}

/// `peer_left` (`reason`: left, timeout, ...). `serve` adds the room.
public struct PeerLeft: BroadcastEvent, Equatable {
    public var room: String?
    public var peer: UInt32
    public var peerName: String
    public var reason: String
    public init(room: String? = nil, peer: UInt32, peerName: String, reason: String) {
        self.room = room
        self.peer = peer
        self.peerName = peerName
        self.reason = reason
    }

    public var name: String { "peer_left" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = ["peer": .int(Int(peer)), "name": .string(peerName), "reason": .string(reason)]
        if let room { f["room"] = .string(room) }
        return f
    }
    public var humanText: String {
        let why = switch reason {
        case "left": ""
        case "timeout": " (no word from it for a while)"
        default: " (\(reason))"
        }
        return "\(peerName) left\(room.map { " room \($0)" } ?? "")\(why)"
    }
}

/// `substream_started`: a peer publishes a stream. The clients name the peer; `serve` gives the room.
public struct SubstreamStarted: BroadcastEvent, Equatable {
    public var room: String?
    public var peer: UInt32
    /// The peer's display name (start and watch).
    public var peerName: String?
    public var stream: StreamInfo
    public init(room: String? = nil, peer: UInt32, peerName: String? = nil, stream: StreamInfo) {
        self.room = room
        self.peer = peer
        self.peerName = peerName
        self.stream = stream
    }

    public var name: String { "substream_started" }
    public var fields: [String: JSONValue] { substreamFields(room: room, peer: peer, name: peerName, stream: stream) }
    public var humanText: String { "\(sharerText(peer: peer, name: peerName)) started sharing \(kindText(stream.kind))\(room.map { " in room \($0)" } ?? "")" }
}

/// `substream_stopped`: a peer no longer publishes a stream.
public struct SubstreamStopped: BroadcastEvent, Equatable {
    public var room: String?
    public var peer: UInt32
    public var peerName: String?
    public var stream: StreamInfo
    public init(room: String? = nil, peer: UInt32, peerName: String? = nil, stream: StreamInfo) {
        self.room = room
        self.peer = peer
        self.peerName = peerName
        self.stream = stream
    }

    public var name: String { "substream_stopped" }
    public var fields: [String: JSONValue] { substreamFields(room: room, peer: peer, name: peerName, stream: stream) }
    public var humanText: String { "\(sharerText(peer: peer, name: peerName)) stopped sharing \(kindText(stream.kind))\(room.map { " in room \($0)" } ?? "")" }
}

/// "ann@laptop (peer 1)", or "peer 1" when the name is not known.
private func sharerText(peer: UInt32, name: String?) -> String {
    guard let name, !name.isEmpty else { return "peer \(peer)" }
    return "\(name) (peer \(peer))"
}

/// What a stream of this kind is, in words.
private func kindText(_ kind: StreamKind) -> String {
    switch kind {
    case .screen: "the screen"
    case .audio: "sound"
    case .main: "a camera"
    case .fec: "FEC"
    }
}

private func substreamFields(room: String?, peer: UInt32, name: String?, stream: StreamInfo) -> [String: JSONValue] {
    var f = stream.fields
    f["peer"] = .int(Int(peer))
    if let name { f["name"] = .string(name) }
    if let room { f["room"] = .string(room) }
    return f
}
