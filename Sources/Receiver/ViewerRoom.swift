import Events
import Room

/// The viewer's side of a room: the `RoomClient` (join, subscribe, follow the publisher,
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
    }

    private var client: RoomClient
    private var mapper: RoomEventMapper
    /// The audio stream of the publisher we watch (its packets go to the audio receiver).
    private(set) var audioSSRC: UInt32?

    init(settings: RoomSettings) {
        client = RoomClient(room: settings.name, name: settings.displayName, role: "viewer", token: settings.token, subscribe: settings.target)
        mapper = RoomEventMapper(server: settings.server)
    }

    /// Starts joining (send with ``flush(path:send:emit:)``).
    mutating func start(now: UInt64) { client.start(now: now) }

    /// A datagram (of any kind) came from the relay: it is alive.
    mutating func heard(now: UInt64) { client.heard(now: now) }

    /// A control message from the relay.
    mutating func receive(_ envelope: ControlEnvelope, now: UInt64) { client.receive(envelope, now: now) }

    /// Retries, keep-alives and timeouts due at `now`.
    mutating func poll(now: UInt64) { client.poll(now: now) }

    /// Says goodbye to the relay (send with ``flush(path:send:emit:)``).
    mutating func leave() { client.leave() }

    /// When ``poll(now:)`` next has something to do.
    var nextWakeup: UInt64? { client.nextWakeup }

    /// Sends what the room client has to send, tells `path` about subscriptions, and emits the
    /// room's events.
    mutating func flush(path: inout VideoReceivePath, send: (UnsafeRawBufferPointer) -> Void,
                        emit: (any BroadcastEvent) -> Void) -> Changes {
        var changes = Changes()
        for message in client.takeOutgoing() { message.withUnsafeBytes { send($0) } }
        for e in client.takeEvents() {
            switch e {
            case let .subscribed(_, streams):
                audioSSRC = streams.first { $0.kind == .audio }?.ssrc
                if path.subscribed(to: streams) { changes.newScreen = true }
            case .unsubscribed:
                path.unsubscribed()
            default:
                break
            }
            for event in mapper.map(e, client: client) { emit(event) }
        }
        if let reason = mapper.disconnected {
            mapper = RoomEventMapper(server: mapper.server)
            changes.disconnected = reason
        }
        if let reason = mapper.refused {
            mapper = RoomEventMapper(server: mapper.server)
            changes.refused = reason
        }
        return changes
    }
}
