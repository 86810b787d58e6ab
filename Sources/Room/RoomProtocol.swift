import FoundationEssentials
import Glibc
import NetworkAddress

/// The room protocol, version 3 (docs/PROTOCOL.md is the reference).
///
/// Everything between a peer and the relay shares one UDP flow, encrypted: a DTLS 1.2
/// handshake (the peer is the client), then these control messages as DTLS application data
/// and RTP and RTCP (RFC 5761 multiplexing) as SRTP and SRTCP with the keys it exported (RFC
/// 5764). A datagram is told apart by its first octet (RFC 7983): DTLS starts with 20–63, SRTP
/// and SRTCP with 128–191. Inside DTLS a control message starts with 'S' (0x53).
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |  'S' (0x53)   |  'S' (0x53)   |  version = 2  |     type      |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                      request id (big endian)                  |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |          body: one UTF-8 JSON object (at most 1192 octets)    |
/// ```
public enum RoomProtocol {
    /// 3: every hop is DTLS-SRTP (`RoomLink`, the relay's `PeerHops`); nothing is sent in clear.
    /// (2: `join` carries the relay's return-routability cookie, which `retry` hands out, and
    /// requests are padded to `minimumRequestSize`; the relay core still does both for a peer
    /// whose address no handshake proved.)
    public static let version: UInt8 = 3
    /// What a peer sends the relay is padded (JSON whitespace after the body) to at least this
    /// many octets: the relay answers an address that has not proven it receives (it is in no
    /// room yet) with no more bytes than it got, and a `retry` or an error code must fit in that
    /// (as QUIC pads its Initial packets).
    public static let minimumRequestSize = 80
    /// A presenter's RTP may carry the transport-wide sequence number as the RFC 8285 one-byte
    /// header extension with this ID; the relay then answers with transport feedback every
    /// 100 ms (congestion control of the presenter's uplink).
    public static let transportSequenceID: UInt8 = 3
    public static let magic: UInt8 = 0x53
    public static let headerSize = 8
    /// The longest message a peer may send (the relay rejects longer ones).
    public static let maxMessageSize = 1200
    /// The longest message a peer accepts from the relay: `welcome` and `state` list the room
    /// (about 60 octets per peer), so they outgrow `maxMessageSize` past about 20 peers. One
    /// DTLS record's plaintext (RFC 6347 §4.1, 2^14), room for about 250 peers; the relay lists
    /// every publisher and as many viewers as fit.
    public static let maxRelayMessageSize = 16_384
    /// How often a peer sends `ping` (any datagram also counts as a sign of life).
    public static let keepaliveNanos: UInt64 = 1_000_000_000
    /// The relay removes a peer it has not heard from for this long.
    public static let peerTimeoutNanos: UInt64 = 4_000_000_000
    /// A peer that has not heard from the relay for this long starts reconnecting.
    public static let relayTimeoutNanos: UInt64 = 3_000_000_000
    /// Unanswered requests are sent again after this long.
    public static let retransmitNanos: UInt64 = 300_000_000
    /// Keyframe requests to a publisher: at most one per this interval (per stream).
    public static let keyframeRequestIntervalNanos: UInt64 = 300_000_000
    /// The default relay port.
    public static let defaultPort: UInt16 = 7600
}

/// What a datagram on a room flow is.
public enum DatagramKind: Sendable, Equatable {
    case control, rtp, rtcp, unknown

    /// Classifies by the first two octets (RFC 7983 §7, RFC 5761 §4).
    public static func of(_ bytes: UnsafeRawBufferPointer) -> DatagramKind {
        guard bytes.count >= 2 else { return .unknown }
        let b0 = bytes[0]
        if b0 == RoomProtocol.magic { return .control }
        guard b0 >= 128 && b0 <= 191 else { return .unknown }
        let pt = bytes[1]
        return pt >= 192 && pt <= 223 ? .rtcp : .rtp
    }
}

/// The message types.
public enum MessageType: UInt8, Sendable, CaseIterable {
    case join = 1, welcome = 2, leave = 3, ping = 4, pong = 5, publish = 6, subscribe = 7, unsubscribe = 8
    case ok = 9, error = 10, peerJoined = 11, peerLeft = 12, streams = 13, sync = 14, state = 15, subscribers = 16
    case retry = 17, link = 18

    public var name: String {
        switch self {
        case .join: "join"
        case .welcome: "welcome"
        case .leave: "leave"
        case .ping: "ping"
        case .pong: "pong"
        case .publish: "publish"
        case .subscribe: "subscribe"
        case .unsubscribe: "unsubscribe"
        case .ok: "ok"
        case .error: "error"
        case .peerJoined: "peer_joined"
        case .peerLeft: "peer_left"
        case .streams: "streams"
        case .sync: "sync"
        case .state: "state"
        case .subscribers: "subscribers"
        case .retry: "retry"
        case .link: "link"
        }
    }
}

/// A stream kind: the screen substream, the "main" stream (reserved for a camera) or audio.
public enum StreamKind: String, Codable, Sendable, CaseIterable {
    case screen, main, audio
    /// ULPFEC (RFC 5109) protecting the publisher's screen stream, in a stream of its own (its
    /// SSRC and sequence numbers; its packets name the screen's sequence numbers they cover).
    case fec
}

/// What of a screen a viewer's link carries (``ControlMessage/link(publisher:layers:estimateKbps:)``).
public enum LinkLayers: String, Codable, Sendable, CaseIterable {
    /// Every temporal layer: the whole stream.
    case all
    /// The base layer and the first above it (TL0 and TL1): half the frames.
    case half
    /// The base layer: a quarter of the frames (of a stream of three temporal layers).
    case base
    /// Only keyframes: the link carries less than the base layer.
    case keyframes
}

/// One published RTP stream.
public struct StreamInfo: Codable, Sendable, Equatable, Hashable {
    public var kind: StreamKind
    public var ssrc: UInt32
    /// The RTP payload type.
    public var pt: UInt8
    /// "VP8" or "opus".
    public var codec: String
    /// RTP clock rate (90000 for video, 48000 for Opus).
    public var clock: UInt32
    public var channels: UInt8?

    public init(kind: StreamKind, ssrc: UInt32, pt: UInt8, codec: String, clock: UInt32, channels: UInt8? = nil) {
        self.kind = kind
        self.ssrc = ssrc
        self.pt = pt
        self.codec = codec
        self.clock = clock
        self.channels = channels
    }
}

/// A peer as the room sees it.
public struct PeerInfo: Codable, Sendable, Equatable {
    public var id: UInt32
    public var name: String
    /// "presenter" or "viewer" (informative; any peer may publish).
    public var role: String
    public var streams: [StreamInfo]
    /// What the peer runs: absent for our own peers (`start`, `watch`), "browser" for a
    /// browser watching over WHEP, "janus" for a Janus mountpoint the relay feeds.
    public var client: String?

    public init(id: UInt32, name: String, role: String, streams: [StreamInfo] = [], client: String? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.streams = streams
        self.client = client
    }
}

/// Error codes the relay answers with (`error` message, field `code`).
public enum RoomErrorCode: String, Codable, Sendable, CaseIterable {
    /// The datagram is not a well-formed message (bad JSON, missing field, too long).
    case badMessage = "bad_message"
    /// The version octet is not one the relay speaks.
    case unsupportedVersion = "unsupported_version"
    /// The type octet is not a known request.
    case unknownType = "unknown_type"
    /// A request other than `join` from an address that has not joined (or was removed).
    case notJoined = "not_joined"
    /// `join` names no room or an invalid one.
    case badRoom = "bad_room"
    /// `subscribe`/`unsubscribe` names a peer not in the room.
    case unknownPeer = "unknown_peer"
    /// `publish` uses an SSRC another peer of the room already publishes.
    case ssrcConflict = "ssrc_conflict"
    /// Too many rooms, peers, streams or subscriptions.
    case limit
    /// Reserved for authentication (room secrets, tokens).
    case unauthorized
}

/// The bodies, one per message type.
public enum ControlMessage: Sendable, Equatable {
    /// peer → relay: enter a room. `token` is reserved for authentication. `cookie` echoes the
    /// relay's `retry`: proof that this address receives what is sent to it.
    case join(room: String, name: String, role: String, token: String?, cookie: String? = nil)
    /// relay → peer: the answer to `join`: your id and the room as it is.
    case welcome(peer: UInt32, room: String, version: UInt64, peers: [PeerInfo])
    /// peer → relay: leaving.
    case leave
    /// peer → relay: keep-alive, with the room version the peer has seen.
    case ping(version: UInt64)
    /// relay → peer: the answer to ping: the room version, and how many peers subscribe to you.
    case pong(version: UInt64, subscribers: Int)
    /// peer → relay: the full set of streams this peer publishes (replaces the previous set).
    case publish(streams: [StreamInfo])
    /// peer → relay: receive these kinds of a publisher's streams.
    case subscribe(publisher: UInt32, kinds: [StreamKind])
    /// peer → relay: stop receiving these kinds (all when empty).
    case unsubscribe(publisher: UInt32, kinds: [StreamKind])
    /// relay → peer: a request succeeded; `streams` answers subscribe.
    case ok(streams: [StreamInfo]?)
    /// relay → peer: a request failed.
    case error(code: RoomErrorCode, message: String)
    /// relay → peers: someone joined.
    case peerJoined(version: UInt64, peer: PeerInfo)
    /// relay → peers: someone left ("left", "timeout").
    case peerLeft(version: UInt64, peer: UInt32, reason: String)
    /// relay → peers: a peer's published streams changed.
    case streams(version: UInt64, peer: UInt32, streams: [StreamInfo])
    /// peer → relay: send me the whole room (after a gap in versions).
    case sync
    /// relay → peer: the whole room (the answer to sync).
    case state(version: UInt64, peers: [PeerInfo])
    /// relay → publisher: who receives your streams now.
    case subscribers(peers: [UInt32])
    /// relay → peer: the answer to a `join` without a valid cookie: send it again with this one.
    /// No larger than the join it answers, so a spoofed join reflects nothing bigger.
    case retry(cookie: String)
    /// Relay → viewer: what the viewer's link carries of `publisher`'s screen, as the relay
    /// estimates it from the viewer's transport feedback, and so what it forwards: every layer,
    /// the base layer (half the frames), or only keyframes (the link carries less than the base).
    case link(publisher: UInt32, layers: LinkLayers, estimateKbps: Int?)

    /// Whether a peer sends it to the relay (and pads it).
    public var isRequest: Bool {
        switch self {
        case .join, .leave, .ping, .publish, .subscribe, .unsubscribe, .sync: true
        default: false
        }
    }

    public var type: MessageType {
        switch self {
        case .join: .join
        case .welcome: .welcome
        case .leave: .leave
        case .ping: .ping
        case .pong: .pong
        case .publish: .publish
        case .subscribe: .subscribe
        case .unsubscribe: .unsubscribe
        case .retry: .retry
        case .ok: .ok
        case .error: .error
        case .peerJoined: .peerJoined
        case .peerLeft: .peerLeft
        case .streams: .streams
        case .sync: .sync
        case .state: .state
        case .subscribers: .subscribers
        case .link: .link
        }
    }
}

/// A message and its request id (0 for notifications; replies copy the request's id).
public struct ControlEnvelope: Sendable, Equatable {
    public var requestID: UInt32
    public var message: ControlMessage
    public init(requestID: UInt32 = 0, _ message: ControlMessage) {
        self.requestID = requestID
        self.message = message
    }
}

/// Why a datagram is not a message we take.
public struct RoomProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: RoomErrorCode
    public var message: String
    /// The request id, when the header was readable (so an error reply can name it).
    public var requestID: UInt32
    public init(_ code: RoomErrorCode, _ message: String, requestID: UInt32 = 0) {
        self.code = code
        self.message = message
        self.requestID = requestID
    }
    public var description: String { "\(code.rawValue): \(message)" }
}

// MARK: - Coding

private struct Body: Codable {
    var room: String?
    var name: String?
    var role: String?
    var token: String?
    var cookie: String?
    var peer: UInt32?
    var version: UInt64?
    var peers: [PeerInfo]?
    var subscribers: Int?
    var streams: [StreamInfo]?
    var publisher: UInt32?
    var kinds: [StreamKind]?
    var code: RoomErrorCode?
    var message: String?
    var reason: String?
    var peerInfo: PeerInfo?
    var subscriberIDs: [UInt32]?
    var layers: LinkLayers?
    var estimateKbps: Int?

    enum CodingKeys: String, CodingKey {
        case room, name, role, token, cookie, peer, version, peers, subscribers, streams, publisher, kinds, code, message, reason, layers
        case peerInfo = "peer_info", subscriberIDs = "subscriber_ids", estimateKbps = "estimate_kbps"
    }
}

extension ControlEnvelope {
    /// Encodes header and body. Messages longer than `RoomProtocol.maxMessageSize` (a room
    /// too big for one datagram) are the caller's to avoid; see `RelayLimits`.
    public func encoded() -> [UInt8] {
        var b = Body()
        switch message {
        case let .join(room, name, role, token, cookie): b.room = room; b.name = name; b.role = role; b.token = token; b.cookie = cookie
        case let .retry(cookie): b.cookie = cookie
        case let .welcome(peer, room, version, peers): b.peer = peer; b.room = room; b.version = version; b.peers = peers
        case .leave, .sync: break
        case let .ping(version): b.version = version
        case let .pong(version, subscribers): b.version = version; b.subscribers = subscribers
        case let .publish(streams): b.streams = streams
        case let .subscribe(publisher, kinds), let .unsubscribe(publisher, kinds): b.publisher = publisher; b.kinds = kinds
        case let .ok(streams): b.streams = streams
        case let .error(code, message): b.code = code; b.message = message.isEmpty ? nil : message
        case let .peerJoined(version, peer): b.version = version; b.peerInfo = peer
        case let .peerLeft(version, peer, reason): b.version = version; b.peer = peer; b.reason = reason
        case let .streams(version, peer, streams): b.version = version; b.peer = peer; b.streams = streams
        case let .state(version, peers): b.version = version; b.peers = peers
        case let .subscribers(peers): b.subscriberIDs = peers
        case let .link(publisher, layers, estimate): b.publisher = publisher; b.layers = layers; b.estimateKbps = estimate
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = (try? encoder.encode(b)) ?? Data("{}".utf8)
        var out: [UInt8] = [RoomProtocol.magic, RoomProtocol.magic, RoomProtocol.version, message.type.rawValue]
        out.reserveCapacity(RoomProtocol.headerSize + json.count)
        out += [UInt8(requestID >> 24), UInt8((requestID >> 16) & 0xFF), UInt8((requestID >> 8) & 0xFF), UInt8(requestID & 0xFF)]
        out += json
        if message.isRequest, out.count < RoomProtocol.minimumRequestSize {
            out += [UInt8](repeating: 0x20, count: RoomProtocol.minimumRequestSize - out.count)
        }
        return out
    }

    /// Parses one control datagram of at most `maxSize` octets: the relay takes
    /// `RoomProtocol.maxMessageSize` from peers, peers take `maxRelayMessageSize` from the relay.
    /// - Throws: `RoomProtocolError` naming what is wrong (never crashes on any input).
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxSize: Int = RoomProtocol.maxMessageSize) throws -> ControlEnvelope {
        guard bytes.count >= RoomProtocol.headerSize else {
            throw RoomProtocolError(.badMessage, "control message of \(bytes.count) bytes is shorter than its 8-byte header")
        }
        guard bytes[0] == RoomProtocol.magic, bytes[1] == RoomProtocol.magic else {
            throw RoomProtocolError(.badMessage, "not a control message (no 'SS' magic)")
        }
        let id = UInt32(bytes[4]) << 24 | UInt32(bytes[5]) << 16 | UInt32(bytes[6]) << 8 | UInt32(bytes[7])
        guard bytes[2] == RoomProtocol.version else {
            throw RoomProtocolError(.unsupportedVersion, "protocol version \(bytes[2]); this relay speaks \(RoomProtocol.version)", requestID: id)
        }
        guard bytes.count <= maxSize else {
            throw RoomProtocolError(.badMessage, "control message of \(bytes.count) bytes is longer than \(maxSize)", requestID: id)
        }
        guard let type = MessageType(rawValue: bytes[3]) else {
            throw RoomProtocolError(.unknownType, "unknown message type \(bytes[3])", requestID: id)
        }
        let data = Data(bytes[RoomProtocol.headerSize...])
        let b: Body
        do {
            b = try JSONDecoder().decode(Body.self, from: data.isEmpty ? Data("{}".utf8) : data)
        } catch {
            throw RoomProtocolError(.badMessage, "\(type.name): body is not a valid JSON object of this protocol", requestID: id)
        }
        func need<T>(_ value: T?, _ field: String) throws -> T {
            guard let value else { throw RoomProtocolError(.badMessage, "\(type.name): field '\(field)' missing", requestID: id) }
            return value
        }
        let message: ControlMessage
        switch type {
        case .join:
            message = .join(room: try need(b.room, "room"), name: b.name ?? "", role: b.role ?? "viewer", token: b.token, cookie: b.cookie)
        case .retry: message = .retry(cookie: try need(b.cookie, "cookie"))
        case .welcome:
            message = .welcome(peer: try need(b.peer, "peer"), room: try need(b.room, "room"), version: try need(b.version, "version"),
                               peers: try need(b.peers, "peers"))
        case .leave: message = .leave
        case .ping: message = .ping(version: b.version ?? 0)
        case .pong: message = .pong(version: try need(b.version, "version"), subscribers: b.subscribers ?? 0)
        case .publish: message = .publish(streams: try need(b.streams, "streams"))
        case .subscribe: message = .subscribe(publisher: try need(b.publisher, "publisher"), kinds: b.kinds ?? StreamKind.allCases)
        case .unsubscribe: message = .unsubscribe(publisher: try need(b.publisher, "publisher"), kinds: b.kinds ?? [])
        case .ok: message = .ok(streams: b.streams)
        case .error: message = .error(code: try need(b.code, "code"), message: b.message ?? "")
        case .peerJoined: message = .peerJoined(version: try need(b.version, "version"), peer: try need(b.peerInfo, "peer_info"))
        case .peerLeft:
            message = .peerLeft(version: try need(b.version, "version"), peer: try need(b.peer, "peer"), reason: b.reason ?? "left")
        case .streams:
            message = .streams(version: try need(b.version, "version"), peer: try need(b.peer, "peer"), streams: try need(b.streams, "streams"))
        case .sync: message = .sync
        case .state: message = .state(version: try need(b.version, "version"), peers: try need(b.peers, "peers"))
        case .subscribers: message = .subscribers(peers: try need(b.subscriberIDs, "subscriber_ids"))
        case .link: message = .link(publisher: try need(b.publisher, "publisher"), layers: try need(b.layers, "layers"), estimateKbps: b.estimateKbps)
        }
        return ControlEnvelope(requestID: id, message)
    }

    public static func parse(_ bytes: [UInt8], maxSize: Int = RoomProtocol.maxMessageSize) throws -> ControlEnvelope {
        try bytes.withUnsafeBytes { try parse($0, maxSize: maxSize) }
    }
}
