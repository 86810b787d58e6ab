import Events
import Room
import RoomLink
import RoomEvents

/// The viewer's side of a room: the `RoomClient` in its encrypted hop (`RoomLink`) (join, subscribe, follow the publisher,
/// reconnect) and the events it makes (`RoomEventMapper`), and what a subscription means for
/// the receive path (which SSRCs to take, the screen's payload type and clock).
///
/// No I/O: the caller passes the datagrams in, and ``flush(path:send:emit:)`` hands out what to
/// send and what to report.
struct ViewerRoom {
    /// What ``flush(path:send:emit:)`` found the caller must act on.
    struct Changes {
        /// The screen stream subscribed to is a new one: its first frame is reported again.
        var newScreen = false
        /// The client gave up on the relay (why): the viewer stops.
        var disconnected: String?
        /// The relay refused to admit us (why): the viewer stops.
        var refused: String?
        /// The relay is not the one pinned (why): the viewer stops.
        var untrusted: String?
        /// The presenter watched left on purpose and nobody else shares (its name): the share
        /// is over, and the viewer stops — the relay a presenter hosted goes right after.
        var ended: String?
    }

    /// The encrypted hop to the relay, with the room client in it.
    let link: RoomLink
    private var mapper: RoomEventMapper
    /// The audio stream of the publisher we watch (its packets go to the audio receiver).
    private(set) var audioSSRC: UInt32?

    /// - Throws: `DTLSError` when no DTLS key can be made.
    init(settings: RoomSettings) throws {
        link = try RoomLink(client: RoomClient(room: settings.name, name: settings.displayName, role: "viewer", token: settings.token,
                                               subscribe: settings.target, kinds: [.screen, .audio, .fec]),
                            pinnedFingerprint: settings.fingerprint)
        mapper = RoomEventMapper(server: settings.server)
    }

    /// Starts the handshake and the join (send with ``flush(path:send:emit:)``).
    func start(now: UInt64) { link.start(now: now) }

    /// A datagram from the relay in `buffer[0..<length]`: the plain length of the media packet
    /// it held (opened in place), or nil (DTLS, taken here; a refused packet).
    func receive(_ buffer: UnsafeMutableRawBufferPointer, length: Int, now: UInt64) -> Int? {
        link.receive(buffer, length: length, now: now)
    }

    /// Retries, keep-alives, handshake retransmissions and timeouts due at `now`.
    func poll(now: UInt64) { link.poll(now: now) }

    /// Says goodbye to the relay (send with ``flush(path:send:emit:)``).
    func leave() { link.leave() }

    /// When ``poll(now:)`` next has something to do.
    func nextWakeup(now: UInt64) -> UInt64? { link.nextWakeup(now: now) }

    /// What the viewer waits for while nothing plays: the relay (not in the room yet), or a
    /// presenter (in the room, nobody sharing); nil once it follows one.
    var waitingFor: String? {
        if !link.client.isJoined { return "the relay at \(mapper.server)" }
        return link.client.following == nil ? "a presenter in room \(link.client.room)" : nil
    }

    /// Sends what the room client has to send, tells `path` about subscriptions, and emits the
    /// room's events.
    mutating func flush(path: inout VideoReceivePath, now: UInt64, send: (UnsafeRawBufferPointer) -> Void,
                        emit: (any BroadcastEvent) -> Void) -> Changes {
        var changes = Changes()
        for datagram in link.takeDatagrams() { datagram.withUnsafeBytes { send($0) } }
        var leftOnPurpose: PeerInfo?, endedBy: PeerInfo?
        for e in link.takeEvents() {
            switch e {
            case let .subscribed(_, streams):
                audioSSRC = streams.first { $0.kind == .audio }?.ssrc
                if path.subscribed(to: streams) { changes.newScreen = true }
            case let .peerLeft(info, reason) where reason == "left":
                leftOnPurpose = info
            case let .unsubscribed(publisher):
                path.unsubscribed(now: now)
                if publisher.id == leftOnPurpose?.id { endedBy = publisher }
            default:
                break
            }
            for event in mapper.map(e, client: link.client) { emit(event) }
        }
        if let endedBy, link.client.following == nil { changes.ended = endedBy.name }
        if let reason = mapper.disconnected {
            mapper = RoomEventMapper(server: mapper.server)
            changes.disconnected = reason
        }
        if let reason = mapper.refused {
            mapper = RoomEventMapper(server: mapper.server)
            changes.refused = reason
        }
        if let reason = mapper.untrusted {
            mapper = RoomEventMapper(server: mapper.server)
            changes.untrusted = reason
        }
        return changes
    }
}
