/// What a room client reports.
public enum RoomClientEvent: Sendable, Equatable {
    /// Joined (or joined again after a reconnect): our id and the room as it is.
    case connected(peer: UInt32, room: String, peers: [PeerInfo], rejoined: Bool)
    case peerJoined(PeerInfo)
    case peerLeft(PeerInfo, reason: String)
    case substreamStarted(peer: PeerInfo, stream: StreamInfo)
    case substreamStopped(peer: PeerInfo, stream: StreamInfo)
    /// The relay confirmed our subscription: these streams will arrive.
    case subscribed(publisher: PeerInfo, streams: [StreamInfo])
    case unsubscribed(publisher: PeerInfo)
    /// Who receives our streams (publishers only).
    case subscribers([UInt32])
    /// What our link carries of a publisher's screen, as the relay estimates it (viewers only).
    case link(publisher: UInt32, layers: LinkLayers, estimateKbps: Int?)
    /// Lost the relay (or never reached it): trying again.
    case reconnecting(attempt: Int, delayNanos: UInt64, reason: String)
    /// Gave up after the retries; the caller should stop.
    case disconnected(reason: String)
    /// The relay refused a request.
    case error(code: RoomErrorCode, message: String)
    /// The relay refused to admit us (`unauthorized`: no token, or one that does not let us in;
    /// the message says why). The client stops; trying again cannot help.
    case refused(message: String)
    /// The relay is not the one pinned (its certificate's fingerprint differs), or the hop
    /// could not be encrypted: the caller stops; trying again cannot help.
    case untrusted(message: String)
}

/// Whom a viewer receives.
public enum SubscriptionTarget: Sendable, Equatable {
    /// The first peer (in join order) that publishes a screen substream; another one when it leaves.
    case auto
    /// A peer by name or by numeric id.
    case peer(String)
}

/// The peer side of the room protocol as a pure state machine: messages and time in,
/// messages and events out (`takeOutgoing`, `takeEvents`). Used by `start` (publishing) and
/// `watch` (subscribing).
///
/// Requests (join, publish, subscribe, unsubscribe, sync) are sent again every 300 ms until
/// answered. Notifications carry the room version; a gap (a lost notification) is repaired
/// with `sync`. Without any datagram from the relay for 3 s — or when it says we are not
/// joined (it restarted) — the client reconnects: 3 retries with backoff (0.5, 1, 2 s, each
/// waiting 1.5 s for the welcome), then `disconnected`.
public struct RoomClient: Sendable {
    public enum State: Sendable, Equatable {
        case idle
        /// Sending join; `attempt` 0 is the first connect.
        case joining(attempt: Int, since: UInt64)
        /// Waiting before the next join attempt.
        case backoff(attempt: Int, until: UInt64)
        case joined
        case disconnected
    }

    public static let retries = 3
    public static let joinTimeoutNanos: UInt64 = 1_500_000_000
    public static func backoffNanos(attempt: Int) -> UInt64 { 500_000_000 << UInt64(max(0, attempt - 1)) }

    public let room: String
    public let name: String
    public let role: String
    /// The room token the relay asks for (nil: an open relay).
    public let token: String?
    public private(set) var state: State = .idle
    public private(set) var peerID: UInt32?
    public private(set) var peers: [UInt32: PeerInfo] = [:]
    /// Join order of `peers`.
    public private(set) var order: [UInt32] = []
    public private(set) var version: UInt64 = 0
    /// What we publish (sent again after every (re)join).
    public private(set) var publishing: [StreamInfo] = []
    /// Whom we want to receive; nil: nobody.
    public private(set) var target: SubscriptionTarget?
    public let kinds: [StreamKind]
    /// The publisher we receive (once the relay confirmed).
    public private(set) var subscribedTo: UInt32?
    public private(set) var subscribers: [UInt32] = []

    private var pending: [UInt32: (envelope: ControlEnvelope, sentAt: UInt64, attempts: Int)] = [:]
    private var nextRequestID: UInt32 = 1
    private var joinRequestID: UInt32 = 0
    /// The relay's return-routability cookie for this address (from its `retry`), echoed in joins.
    private var cookie: String?
    private var requestedPublisher: UInt32?
    /// The publisher followed now: subscribed to, or asked for (nil: none).
    public var following: UInt32? { requestedPublisher ?? subscribedTo }
    private var lastHeard: UInt64 = 0
    private var lastPing: UInt64 = 0
    private var joinedOnce = false
    private var outgoing: [[UInt8]] = []
    private var events: [RoomClientEvent] = []

    public init(room: String, name: String, role: String, token: String? = nil, subscribe target: SubscriptionTarget? = nil,
                kinds: [StreamKind] = [.screen, .audio]) {
        self.room = room
        self.token = token
        self.name = name
        self.role = role
        self.target = target
        self.kinds = kinds
    }

    public var isJoined: Bool { state == .joined }

    /// The publisher we receive, as the room describes it.
    public var publisher: PeerInfo? { subscribedTo.flatMap { peers[$0] } }

    // MARK: - Driving

    public mutating func start(now: UInt64) {
        guard state == .idle else { return }
        sendJoin(attempt: 0, now: now)
    }

    /// Any datagram from the relay (media too) shows it is alive.
    public mutating func heard(now: UInt64) { lastHeard = now }

    public mutating func takeOutgoing() -> [[UInt8]] {
        defer { outgoing.removeAll(keepingCapacity: true) }
        return outgoing
    }

    public mutating func takeEvents() -> [RoomClientEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// When `poll` next has something to do.
    public var nextWakeup: UInt64? {
        switch state {
        case .idle, .disconnected: return nil
        case .backoff(_, let until): return until
        case .joining(_, let since): return min(since + Self.joinTimeoutNanos, (pending.values.map(\.sentAt).min() ?? since) + RoomProtocol.retransmitNanos)
        case .joined:
            var t = min(lastPing + RoomProtocol.keepaliveNanos, lastHeard + RoomProtocol.relayTimeoutNanos)
            if let p = pending.values.map(\.sentAt).min() { t = min(t, p + RoomProtocol.retransmitNanos) }
            return t
        }
    }

    /// Timers: retransmissions, keep-alive, liveness, reconnect.
    public mutating func poll(now: UInt64) {
        switch state {
        case .idle, .disconnected:
            return
        case let .backoff(attempt, until):
            if now >= until { sendJoin(attempt: attempt, now: now) }
            return
        case let .joining(attempt, since):
            if now >= since + Self.joinTimeoutNanos {
                failAttempt(attempt, now: now, reason: "no answer from the relay")
                return
            }
        case .joined:
            if now > lastHeard + RoomProtocol.relayTimeoutNanos {
                lostRelay(now: now, reason: "no word from the relay for \(RoomProtocol.relayTimeoutNanos / 1_000_000_000) s")
                return
            }
            if now >= lastPing + RoomProtocol.keepaliveNanos {
                lastPing = now
                outgoing.append(ControlEnvelope(.ping(version: version)).encoded())
            }
        }
        for (id, p) in pending where now >= p.sentAt + RoomProtocol.retransmitNanos {
            pending[id] = (p.envelope, now, p.attempts + 1)
            outgoing.append(p.envelope.encoded())
        }
    }

    /// Publishes this set of streams (empty: stop publishing).
    public mutating func publish(_ streams: [StreamInfo], now: UInt64) {
        publishing = streams
        if state == .joined { request(.publish(streams: streams), now: now) }
    }

    /// Receives another publisher (or nobody).
    public mutating func subscribe(_ target: SubscriptionTarget?, now: UInt64) {
        self.target = target
        reconsiderSubscription(now: now, force: true)
    }

    /// Leaves the room (best effort, one datagram).
    public mutating func leave() {
        if state == .joined { outgoing.append(ControlEnvelope(requestID: allocateID(), .leave).encoded()) }
        state = .disconnected
        pending.removeAll()
    }

    // MARK: - Messages

    public mutating func receive(_ envelope: ControlEnvelope, now: UInt64) {
        lastHeard = now
        let id = envelope.requestID
        switch envelope.message {
        case let .welcome(peer, roomName, version, peers):
            guard id == joinRequestID, roomName == room else { return }
            if case .joined = state { return }  // a duplicate answer
            let rejoined = joinedOnce
            joinedOnce = true
            state = .joined
            peerID = peer
            pending.removeAll()
            subscribedTo = nil
            requestedPublisher = nil
            lastPing = now
            // A rejoin starts from the new room: old ids mean nothing any more.
            let previous = self.peers
            self.peers = [:]
            order = []
            self.version = version
            for p in peers where p.id != peer {
                self.peers[p.id] = p
                order.append(p.id)
            }
            events.append(.connected(peer: peer, room: room, peers: order.compactMap { self.peers[$0] }, rejoined: rejoined))
            if !rejoined || previous.isEmpty {
                for p in order.compactMap({ self.peers[$0] }) { for s in p.streams { events.append(.substreamStarted(peer: p, stream: s)) } }
            }
            if !publishing.isEmpty { request(.publish(streams: publishing), now: now) }
            reconsiderSubscription(now: now, force: false)
        case let .retry(cookie):
            guard id == joinRequestID else { return }
            echoCookie(cookie, now: now)
        case let .pong(version, _):
            if version > self.version { request(.sync, now: now) }
        case let .ok(streams):
            guard let p = pending.removeValue(forKey: id) else { return }
            if case let .subscribe(publisherID, _) = p.envelope.message, publisherID == requestedPublisher {
                subscribedTo = publisherID
                if let info = peers[publisherID] { events.append(.subscribed(publisher: info, streams: streams ?? [])) }
            }
        case let .error(code, message):
            if code == .unauthorized, id == joinRequestID, case .joining = state {
                pending.removeAll()
                state = .disconnected
                events.append(.refused(message: message))
                return
            }
            let p = pending.removeValue(forKey: id)
            if code == .notJoined, state == .joined {
                lostRelay(now: now, reason: "the relay no longer knows us (restarted?)")
                return
            }
            if case let .subscribe(publisherID, _)? = p?.envelope.message, publisherID == requestedPublisher { requestedPublisher = nil }
            events.append(.error(code: code, message: message))
        case let .peerJoined(version, peer):
            guard accept(version, now: now) else { return }
            guard peer.id != peerID else { return }
            if peers[peer.id] == nil { order.append(peer.id) }
            peers[peer.id] = peer
            events.append(.peerJoined(peer))
            for s in peer.streams { events.append(.substreamStarted(peer: peer, stream: s)) }
            reconsiderSubscription(now: now, force: false)
        case let .peerLeft(version, peerID, reason):
            guard accept(version, now: now) else { return }
            removePeer(peerID, reason: reason)
            reconsiderSubscription(now: now, force: false)
        case let .streams(version, peerID, streams):
            guard accept(version, now: now) else { return }
            guard var info = peers[peerID] else { return }
            let old = info.streams
            info.streams = streams
            peers[peerID] = info
            for s in old where !streams.contains(s) { events.append(.substreamStopped(peer: info, stream: s)) }
            for s in streams where !old.contains(s) { events.append(.substreamStarted(peer: info, stream: s)) }
            if peerID == subscribedTo, streams.contains(where: { kinds.contains($0.kind) }), streams != old {
                events.append(.subscribed(publisher: info, streams: streams.filter { kinds.contains($0.kind) }))
            }
            reconsiderSubscription(now: now, force: false)
        case let .state(version, peers):
            pending.removeValue(forKey: id)
            guard version >= self.version else { return }
            self.version = version
            apply(snapshot: peers)
            reconsiderSubscription(now: now, force: false)
        case let .subscribers(ids):
            subscribers = ids
            events.append(.subscribers(ids))
        case let .link(publisher, layers, estimate):
            events.append(.link(publisher: publisher, layers: layers, estimateKbps: estimate))
        case .join, .leave, .ping, .publish, .subscribe, .unsubscribe, .sync:
            break  // requests are the relay's to answer, not ours
        }
    }

    // MARK: - Internals

    private mutating func allocateID() -> UInt32 {
        defer { nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1 }
        return nextRequestID
    }

    private mutating func request(_ message: ControlMessage, now: UInt64) {
        let envelope = ControlEnvelope(requestID: allocateID(), message)
        // A newer request of the same kind replaces an unanswered older one.
        for (id, p) in pending where p.envelope.message.type == message.type && message.type != .subscribe && message.type != .unsubscribe {
            pending[id] = nil
        }
        pending[envelope.requestID] = (envelope, now, 1)
        outgoing.append(envelope.encoded())
    }

    private mutating func sendJoin(attempt: Int, now: UInt64) {
        joinRequestID = allocateID()
        state = .joining(attempt: attempt, since: now)
        pending.removeAll()
        let envelope = ControlEnvelope(requestID: joinRequestID, .join(room: room, name: name, role: role, token: token, cookie: cookie))
        pending[joinRequestID] = (envelope, now, 1)
        outgoing.append(envelope.encoded())
    }

    /// The relay asked for proof of this address: the join again, at once, with its cookie
    /// (retransmitted with it from now on). A cookie that goes stale is answered by a new retry.
    private mutating func echoCookie(_ cookie: String, now: UInt64) {
        guard case .joining = state else { return }
        self.cookie = cookie
        let envelope = ControlEnvelope(requestID: joinRequestID, .join(room: room, name: name, role: role, token: token, cookie: cookie))
        pending[joinRequestID] = (envelope, now, 1)
        outgoing.append(envelope.encoded())
    }

    private mutating func failAttempt(_ attempt: Int, now: UInt64, reason: String) {
        if attempt >= Self.retries {
            state = .disconnected
            pending.removeAll()
            events.append(.disconnected(reason: "\(reason) after \(Self.retries) retries"))
            return
        }
        let next = attempt + 1
        let delay = Self.backoffNanos(attempt: next)
        events.append(.reconnecting(attempt: next, delayNanos: delay, reason: reason))
        state = .backoff(attempt: next, until: now + delay)
    }

    private mutating func lostRelay(now: UInt64, reason: String) {
        subscribedTo = nil
        requestedPublisher = nil
        failAttempt(0, now: now, reason: reason)
    }

    /// Applies a notification's version; false when it is old (already applied). A gap means
    /// a lost notification: the state is asked for, and this one applied meanwhile.
    private mutating func accept(_ v: UInt64, now: UInt64) -> Bool {
        guard state == .joined else { return false }
        if v <= version { return false }
        if v > version + 1 { request(.sync, now: now) }
        version = v
        return true
    }

    private mutating func removePeer(_ id: UInt32, reason: String) {
        guard let info = peers.removeValue(forKey: id) else { return }
        order.removeAll { $0 == id }
        for s in info.streams { events.append(.substreamStopped(peer: info, stream: s)) }
        events.append(.peerLeft(info, reason: reason))
        if subscribedTo == id {
            subscribedTo = nil
            events.append(.unsubscribed(publisher: info))
        }
        if requestedPublisher == id { requestedPublisher = nil }
    }

    private mutating func apply(snapshot: [PeerInfo]) {
        let incoming = Dictionary(snapshot.filter { $0.id != peerID }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        for id in order where incoming[id] == nil { removePeer(id, reason: "left") }
        for p in snapshot where p.id != peerID {
            if let old = peers[p.id] {
                peers[p.id] = p
                for s in old.streams where !p.streams.contains(s) { events.append(.substreamStopped(peer: p, stream: s)) }
                for s in p.streams where !old.streams.contains(s) { events.append(.substreamStarted(peer: p, stream: s)) }
            } else {
                peers[p.id] = p
                order.append(p.id)
                events.append(.peerJoined(p))
                for s in p.streams { events.append(.substreamStarted(peer: p, stream: s)) }
            }
        }
    }

    /// Picks the publisher the target names and (re)subscribes when it changed.
    private mutating func reconsiderSubscription(now: UInt64, force: Bool) {
        guard state == .joined else { return }
        let current = requestedPublisher ?? subscribedTo
        var wanted: UInt32?
        switch target {
        case nil:
            wanted = nil
        case .peer(let key)?:
            wanted = order.first { id in peers[id].map { String($0.id) == key || $0.name == key } ?? false }
        case .auto?:
            // Stay with the current publisher while it is in the room; else the first that shares a screen.
            if let current, peers[current] != nil, !force {
                wanted = current
            } else {
                wanted = order.first { peers[$0]?.streams.contains { $0.kind == .screen } ?? false }
            }
        }
        guard wanted != current else { return }
        if let current, let info = peers[current] {
            request(.unsubscribe(publisher: current, kinds: []), now: now)
            if subscribedTo == current { events.append(.unsubscribed(publisher: info)) }
        }
        subscribedTo = nil
        requestedPublisher = wanted
        if let wanted { request(.subscribe(publisher: wanted, kinds: kinds), now: now) }
    }
}
