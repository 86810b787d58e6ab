import RTCP
import RTP
import RTPSession
import FoundationEssentials
import Glibc
import MediaCore
import Basics
import NetworkAddress

/// The room relay as a pure state machine: datagrams and time in, datagrams and events out.
/// It calls into no I/O: what it decides to send and report is queued until its caller drains
/// it (``drain(into:)``, ``drainEvents(_:)``), and it says when its timers want it next
/// (``nextDeadline``; the caller runs ``poll(now:wallNanos:)`` then).
///
/// An RTP translator/SFU in RFC 7667's words ("Topo-Media-Translator" without transcoding):
/// RTP is forwarded unchanged to the subscribers of its stream; RTCP is terminated per hop —
/// the relay answers viewers' NACKs from its own packet history (so the presenter's uplink does
/// not grow with the audience), sends its own receiver reports to publishers, forwards
/// publishers' sender reports (their NTP↔RTP mapping is what receivers need for A/V sync)
/// and passes keyframe requests (PLI/FIR, and one for every late joiner) to the publisher at
/// most once per 300 ms per stream.
///
/// Its parts, each with one job: ``RelayAdmission`` (return-routability cookies, the budgets
/// of replies and joins), ``RelayRegistry`` (rooms, peers, publications), ``RelayForwarder``
/// (RTP and FEC to the subscribers, per-viewer layers and renumbering), ``RTCPTerminator``
/// (RTCP in, the relay's own RTCP out), all writing to one ``RelayWire``. The core itself
/// speaks the room protocol (join, publish, subscribe) and ties them together.
public final class RelayCore {
    public let limits: RelayLimits
    /// The relay's own SSRC, the sender of its RTCP.
    public let ssrc: UInt32
    public var counters: RelayCounters { wire.counters }
    /// Datagrams decided and not yet handed to the caller's transport, the counters, and the
    /// buffers packets are built in.
    var wire: RelayWire
    /// Events not yet handed to the caller.
    private var pendingEvents: [RelayEvent] = []
    /// When the timers want `poll` next (monotonic ns): 50 ms after the last poll, the grain of
    /// the keyframe-request spacing, the viewers' trials and the presenters' feedback.
    public private(set) var nextDeadline: UInt64 = 0
    public static let pollIntervalNanos: UInt64 = 50_000_000
    /// Rooms, peers and what they publish and receive.
    var registry: RelayRegistry
    /// Cookies and the per-second budgets of replies and joins.
    var admission: RelayAdmission
    /// RTCP terminated per hop. (RTP to the subscribers is ``RelayForwarder``'s, which keeps no
    /// state of its own.)
    var rtcp = RTCPTerminator()
    /// The size of the datagram being handled: what an unproven address may get back at most.
    var received = 0
    /// The datagram being handled is a join with a valid cookie: its address receives what is
    /// sent to it, so a reply (a refusal that names its reason) may be larger than the join.
    var provenNow = false
    /// Who may enter which room (nil: anyone, an open relay).
    public let authorizer: (any RoomAuthorizer)?

    /// - Parameter cookieSecret: the key of the return-routability cookies (random unless a
    ///   test or the fuzzer needs them predictable).
    public init(limits: RelayLimits = RelayLimits(), ssrc: UInt32 = UInt32.random(in: 1...UInt32.max),
                cookieSecret: [UInt8]? = nil, authorizer: (any RoomAuthorizer)? = nil) {
        self.authorizer = authorizer
        self.limits = limits
        self.ssrc = ssrc
        wire = RelayWire(ssrc: ssrc)
        pendingEvents.reserveCapacity(64)
        admission = RelayAdmission(limits: limits, cookieSecret: cookieSecret)
        registry = RelayRegistry(limits: limits)
    }

    // MARK: - Output

    /// Hands what the core decided to send since the last drain to `transport`, in order.
    /// The transport may read the core (a browser's streams) but must not give it input.
    public func drain(into transport: RelayTransport) { wire.outbox.drain(into: transport) }

    /// Datagrams waiting for ``drain(into:)``.
    public var queuedDatagrams: Int { wire.outbox.count }

    /// Hands the events since the last drain to `body`, in order.
    public func drainEvents(_ body: (RelayEvent) -> Void) {
        guard !pendingEvents.isEmpty else { return }
        for e in pendingEvents { body(e) }
        pendingEvents.removeAll(keepingCapacity: true)
    }

    func emit(_ event: RelayEvent) { pendingEvents.append(event) }

    // MARK: - Return routability

    /// How long a cookie stays valid: the epoch it was made in and the next.
    public static let cookieEpochNanos = RelayAdmission.cookieEpochNanos

    /// The cookie `address` must echo in its `join` at `now` (``RelayAdmission``).
    public func cookie(for address: PeerAddress, now: UInt64) -> String { admission.cookie(for: address, now: now) }

    // MARK: - Inspection (stats, tests)

    public var roomCount: Int { registry.rooms.count }
    public var peerCount: Int { registry.peerCount }
    /// Peers that are browsers.
    public var browserCount: Int { registry.browserCount }
    /// Counts every change of a room's peers or streams (a directory of rooms is stale when it moved).
    public var changes: UInt64 { registry.changes }

    /// What each room holds now, for the relay's HTTP side (a page names the presenter).
    public func summaries() -> [RoomSummary] { registry.summaries() }
    public func peers(in room: String) -> [PeerInfo] { registry.rooms[room]?.snapshot() ?? [] }
    /// Where a stream's packets go now.
    public func subscribers(room: String, ssrc: UInt32) -> [PeerAddress] {
        registry.stream(room: room, ssrc: ssrc)?.addresses ?? []
    }

    /// RTP packets missing from what publishers sent the relay (sequence gaps, RFC 3550 A.3),
    /// summed over the streams published now. On loopback they can only be the relay's own
    /// receive queue overflowing.
    public var rtpLostIn: Int {
        registry.allStreams.reduce(0) { $0 + max(0, Int($1.receive.cumulativeLost)) }
    }

    /// What each subscriber of a stream last reported: loss fraction and round-trip time to the relay.
    public func subscriberReports(room: String, ssrc: UInt32) -> [(address: PeerAddress, fractionLost: Double, rttNanos: UInt64?)] {
        registry.stream(room: room, ssrc: ssrc)?.subscribers.map { ($0.address, $0.fractionLost, $0.rttNanos) } ?? []
    }

    /// Viewers that get only the base layer of a stream, or only its keyframes, now (their links
    /// carry no more).
    public var viewersOnBaseLayer: Int {
        registry.allStreams.reduce(0) { n, stream in n + stream.subscribers.filter { $0.downlink.map { $0.layers != .all } ?? false }.count }
    }

    /// The viewers that get fewer layers of a screen than it has, now: "ROOM/PEER-ID" → the
    /// layers they get (`base`, `keyframes`). Viewers that get every layer are not listed.
    public var viewersOnFewerLayers: [String: LinkLayers] {
        var out: [String: LinkLayers] = [:]
        for room in registry.rooms.values {
            for stream in room.streams.values {
                for s in stream.subscribers {
                    if let layers = s.downlink?.layers, layers != .all { out["\(room.name)/\(s.peer.id)"] = layers }
                }
            }
        }
        return out
    }

    /// Each subscriber of a stream that sends transport feedback: its link's estimate and the
    /// layers it gets.
    public func subscriberDownlinks(room: String, ssrc: UInt32)
        -> [(address: PeerAddress, estimate: Double, layers: LinkLayers, switchesDown: Int, switchesUp: Int)] {
        registry.stream(room: room, ssrc: ssrc)?.subscribers.compactMap { s in
            s.downlink.map { (s.address, $0.controller.target, $0.layers, $0.switchesDown, $0.switchesUp) }
        } ?? []
    }

    // MARK: - Input

    /// Takes one datagram that arrived from `address` at `now` (monotonic ns); `wallNanos` is
    /// the wall clock (for RTCP round-trip times).
    /// - Parameter proven: it came through an encrypted hop, whose handshake proved the address
    ///   (no cookie is asked for, and replies need not be smaller than the request).
    /// - Parameter arrival: when the kernel received it (monotonic ns; a datagram read late in a
    ///   turn may have arrived after the turn's `now`), if the socket stamps arrivals: a
    ///   publisher's transport feedback reports that, so a relay busy sending a thousand copies
    ///   of the previous packet does not look like a congested uplink.
    public func receive(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, wallNanos: UInt64, proven: Bool = false,
                        arrival: UInt64? = nil) {
        received = bytes.count
        provenNow = proven
        switch DatagramKind.of(bytes) {
        case .rtp:
            wire.counters.rtpIn += 1
            guard let peer = registry.peer(at: address) else { wire.counters.unknownSource += 1; return }
            peer.lastHeard = now
            RelayForwarder.forwardRTP(bytes, from: peer, now: now, arrival: arrival, wire: &wire)
        case .rtcp:
            wire.counters.rtcpIn += 1
            guard let peer = registry.peer(at: address) else { wire.counters.unknownSource += 1; return }
            peer.lastHeard = now
            rtcp.handle(bytes, from: peer, now: now, wallNanos: wallNanos, wire: &wire)
        case .control:
            wire.counters.controlIn += 1
            let envelope: ControlEnvelope
            do {
                envelope = try ControlEnvelope.parse(bytes)
            } catch let error as RoomProtocolError {
                reject(address, error, now: now)
                return
            } catch {
                return
            }
            handleControl(envelope, from: address, now: now, wallNanos: wallNanos)
        case .unknown:
            wire.counters.rejected += 1
            emit(.rejected(address: address, reason: "not RTP, RTCP or a control message"))
        }
    }

    /// A datagram dropped before it reached the room: media from an address with no hop.
    public func noteUnknownSource() { wire.counters.unknownSource += 1 }

    /// A datagram dropped before it reached the room, for a reason (counted as rejected).
    public func noteRejected(_ address: PeerAddress, reason: String) {
        wire.counters.rejected += 1
        emit(.rejected(address: address, reason: reason))
    }

    /// Timers: removes silent peers; the RTCP the relay owes (``RTCPTerminator/poll(_:now:wire:)``).
    public func poll(now: UInt64, wallNanos: UInt64) {
        nextDeadline = now + Self.pollIntervalNanos
        // External viewers (browsers) speak no room protocol: their gateway ends them.
        for peer in registry.allPeers where !peer.external && now &- peer.lastHeard > RoomProtocol.peerTimeoutNanos
            && now > peer.lastHeard {
            wire.counters.timeouts += 1
            remove(peer, reason: "timeout")
        }
        rtcp.poll(registry.rooms.values, now: now, wire: &wire)
    }

    // MARK: - Control

    func send(_ message: ControlMessage, requestID: UInt32 = 0, to address: PeerAddress) {
        var bytes = ControlEnvelope(requestID: requestID, message).encoded()
        if bytes.count > RoomProtocol.maxRelayMessageSize {
            bytes = Self.fitted(message, requestID: requestID, recipient: registry.peer(at: address)?.id) ?? bytes
        }
        bytes.withUnsafeBytes { wire.outbox.send($0, to: address) }
    }

    /// A room list (`welcome`, `state`) too long for one message, cut to fit: every peer that
    /// publishes and the one it goes to stay; other viewers go from the end until it fits.
    static func fitted(_ message: ControlMessage, requestID: UInt32, recipient: UInt32?) -> [UInt8]? {
        let peers: [PeerInfo]
        let rebuild: ([PeerInfo]) -> ControlMessage
        switch message {
        case let .welcome(peer, room, version, list):
            peers = list
            rebuild = { .welcome(peer: peer, room: room, version: version, peers: $0) }
        case let .state(version, list):
            peers = list
            rebuild = { .state(version: version, peers: $0) }
        default:
            return nil
        }
        let kept = { (p: PeerInfo) in !p.streams.isEmpty || p.id == recipient }
        var others = peers.filter { !kept($0) }.map(\.id)
        while true {
            let allowed = Set(others)
            let bytes = ControlEnvelope(requestID: requestID, rebuild(peers.filter { kept($0) || allowed.contains($0.id) })).encoded()
            if bytes.count <= RoomProtocol.maxRelayMessageSize || others.isEmpty { return bytes }
            others.removeLast(max(1, others.count / 8))
        }
    }

    func broadcast(_ message: ControlMessage, in room: RoomState, except: PeerState?) {
        let bytes = ControlEnvelope(message).encoded()
        let addresses = room.peers.values.compactMap { $0 === except ? nil : $0.address }
        bytes.withUnsafeBytes { wire.outbox.send($0, toEach: addresses) }
    }

    func reject(_ address: PeerAddress, _ error: RoomProtocolError, now: UInt64) {
        wire.counters.rejected += 1
        emit(.rejected(address: address, reason: error.description))
        guard admission.takeReply(to: address, now: now) else { return }
        replyUnproven(.error(code: error.code, message: error.message), requestID: error.requestID, to: address) { wire.counters.errorsSent += 1 }
    }

    /// Sends `message` to `address`; to an address that is in no room and did not echo a valid
    /// cookie in this datagram (it has not proven it receives what is sent to it) only when it is
    /// no larger than the datagram it answers.
    /// An error that does not fit goes without its text (the code alone), if that fits.
    func replyUnproven(_ message: ControlMessage, requestID: UInt32, to address: PeerAddress, sent: () -> Void) {
        var bytes = ControlEnvelope(requestID: requestID, message).encoded()
        let proven = provenNow || registry.peer(at: address) != nil
        if !proven, bytes.count > received, case let .error(code, text) = message, !text.isEmpty {
            bytes = ControlEnvelope(requestID: requestID, .error(code: code, message: "")).encoded()
        }
        guard proven || bytes.count <= received else {
            wire.counters.repliesWithheld += 1
            return
        }
        sent()
        bytes.withUnsafeBytes { wire.outbox.send($0, to: address) }
    }

    func handleControl(_ envelope: ControlEnvelope, from address: PeerAddress, now: UInt64, wallNanos: UInt64) {
        let id = envelope.requestID
        if case let .join(room, name, role, token, cookie) = envelope.message {
            // A new address proves it receives what is sent to it by echoing a cookie before it
            // gets any state, media or room list: a spoofed join reflects one small retry.
            guard provenNow || registry.peer(at: address) != nil || admission.isValid(cookie, from: address, now: now) else {
                guard admission.takeReply(to: address, now: now) else { return }
                replyUnproven(.retry(cookie: self.cookie(for: address, now: now)), requestID: id, to: address) { wire.counters.retriesSent += 1 }
                return
            }
            provenNow = true
            join(room: room, name: name, role: role, token: token, from: address, requestID: id, now: now, wallNanos: wallNanos)
            return
        }
        guard let peer = registry.peer(at: address) else {
            reject(address, RoomProtocolError(.notJoined, "\(envelope.message.type.name) before join (or after this peer was removed)", requestID: id), now: now)
            return
        }
        peer.lastHeard = now
        let room = peer.room
        switch envelope.message {
        case .leave:
            send(.ok(streams: nil), requestID: id, to: address)
            remove(peer, reason: "left")
        case .ping:
            send(.pong(version: room.version, subscribers: room.subscriberIDs(of: peer).count), requestID: id, to: address)
        case .sync:
            send(.state(version: room.version, peers: room.snapshot()), requestID: id, to: address)
        case .publish(let streams):
            publish(streams, by: peer, requestID: id, now: now)
        case let .subscribe(publisherID, kinds):
            guard let publisher = room.peers[publisherID] else {
                reject(address, RoomProtocolError(.unknownPeer, "subscribe: no peer \(publisherID) in room '\(room.name)'", requestID: id), now: now)
                return
            }
            let wanted = Set(kinds.isEmpty ? StreamKind.allCases : kinds)
            let added = wanted.subtracting(peer.subscriptions[publisherID] ?? [])
            let total = peer.subscriptions.values.reduce(0) { $0 + $1.count } + added.count
            guard total <= limits.maxSubscriptionsPerPeer else {
                reject(address, RoomProtocolError(.limit, "subscribe: more than \(limits.maxSubscriptionsPerPeer) subscriptions", requestID: id), now: now)
                return
            }
            peer.subscriptions[publisherID, default: []].formUnion(wanted)
            let streams = publisher.streams.filter { wanted.contains($0.kind) }
            send(.ok(streams: streams), requestID: id, to: address)
            var changed = false
            for info in streams {
                guard let stream = room.streams[info.ssrc], stream.subscriberIndex(peer) == nil else { continue }
                stream.addSubscriber(peer)
                changed = true
                RTCPTerminator.requestKeyframe(stream, now: now, wire: &wire)  // a late joiner needs a keyframe to start
            }
            if !added.isEmpty { emit(.subscribed(room: room.name, viewer: peer.id, publisher: publisherID, kinds: Array(added).sorted { $0.rawValue < $1.rawValue })) }
            if changed { notifySubscribers(of: publisher) }
        case let .unsubscribe(publisherID, kinds):
            let gone = Set(kinds.isEmpty ? StreamKind.allCases : kinds)
            send(.ok(streams: nil), requestID: id, to: address)
            guard var current = peer.subscriptions[publisherID] else { return }
            current.subtract(gone)
            peer.subscriptions[publisherID] = current.isEmpty ? nil : current
            guard let publisher = room.peers[publisherID] else { return }
            var changed = false
            for info in publisher.streams where gone.contains(info.kind) {
                if let stream = room.streams[info.ssrc], let i = stream.subscriberIndex(peer) {
                    stream.removeSubscriber(at: i)
                    changed = true
                }
            }
            if current.isEmpty { emit(.unsubscribed(room: room.name, viewer: peer.id, publisher: publisherID)) }
            if changed { notifySubscribers(of: publisher) }
        default:
            reject(address, RoomProtocolError(.unknownType, "'\(envelope.message.type.name)' is sent by the relay, not to it", requestID: id), now: now)
        }
    }

    func join(room name: String, name peerName: String, role: String, token: String?, from address: PeerAddress, requestID: UInt32,
                      now: UInt64, wallNanos: UInt64) {
        if let problem = registry.roomNameProblem(name) {
            reject(address, RoomProtocolError(.badRoom, problem, requestID: requestID), now: now)
            return
        }
        guard peerName.utf8.count <= limits.maxNameLength, !peerName.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            reject(address, RoomProtocolError(.badMessage, "join: display name must be at most \(limits.maxNameLength) bytes without control characters", requestID: requestID), now: now)
            return
        }
        // The token is checked before anything is made or changed (a refused peer leaves no trace).
        var grant = RoomGrant(room: name, canPublish: true)
        if let authorizer {
            do {
                grant = try authorizer.authorize(token: token, room: name, presenting: role == "presenter", wallNanos: wallNanos)
            } catch {
                wire.counters.unauthorized += 1
                reject(address, RoomProtocolError(.unauthorized, "join: \(error.description)", requestID: requestID), now: now)
                return
            }
        }
        if let existing = registry.peer(at: address) {
            if existing.room.name == name {  // a retransmitted join: same answer
                existing.lastHeard = now
                send(.welcome(peer: existing.id, room: name, version: existing.room.version, peers: existing.room.snapshot()), requestID: requestID, to: address)
                return
            }
            remove(existing, reason: "left")
        }
        guard admission.takeJoin(room: name, now: now) else {
            reject(address, RoomProtocolError(.limit, "join: room '\(name)' takes at most \(limits.maxJoinsPerRoomPerSecond) joins a second; try again", requestID: requestID), now: now)
            return
        }
        let room: RoomState
        do {
            room = try registry.roomWithSpace(name)
        } catch {
            reject(address, RoomProtocolError(.limit, "join: " + error.message, requestID: requestID), now: now)
            return
        }
        let given = grant.name.map { String($0.prefix(limits.maxNameLength)) } ?? peerName
        let peer = registry.add(to: room, name: given, role: role == "presenter" ? "presenter" : "viewer", address: address, now: now,
                                canPublish: grant.canPublish)
        send(.welcome(peer: peer.id, room: name, version: room.version, peers: room.snapshot()), requestID: requestID, to: address)
        broadcast(.peerJoined(version: room.version, peer: peer.info), in: room, except: peer)
        emit(.peerJoined(room: name, peer: peer.info, address: address))
    }

    func publish(_ streams: [StreamInfo], by peer: PeerState, requestID: UInt32, now: UInt64) {
        let room = peer.room
        guard peer.canPublish || streams.isEmpty else {
            wire.counters.unauthorized += 1
            reject(peer.address, RoomProtocolError(.unauthorized, "publish: this peer's token is a viewer's; presenting needs a presenter token", requestID: requestID), now: now)
            return
        }
        guard streams.count <= limits.maxStreamsPerPeer else {
            reject(peer.address, RoomProtocolError(.limit, "publish: more than \(limits.maxStreamsPerPeer) streams", requestID: requestID), now: now)
            return
        }
        for s in streams {
            if s.ssrc == 0 || Set(streams.map(\.ssrc)).count != streams.count {
                reject(peer.address, RoomProtocolError(.badMessage, "publish: SSRCs must be non-zero and distinct", requestID: requestID), now: now)
                return
            }
            if let other = room.streams[s.ssrc], other.owner !== peer {
                reject(peer.address, RoomProtocolError(.ssrcConflict, "publish: SSRC \(s.ssrc) is already published by peer \(other.owner.id)", requestID: requestID), now: now)
                return
            }
        }
        send(.ok(streams: nil), requestID: requestID, to: peer.address)
        guard peer.streams != streams else { return }
        let publication = registry.publish(streams, by: peer)
        for s in publication.stopped { emit(.substreamStopped(room: room.name, peer: peer.id, stream: s)) }
        for stream in publication.started {
            if !stream.subscribers.isEmpty { RTCPTerminator.requestKeyframe(stream, now: now, wire: &wire) }
            emit(.substreamStarted(room: room.name, peer: peer.id, stream: stream.info))
        }
        broadcast(.streams(version: room.version, peer: peer.id, streams: streams), in: room, except: peer)
        notifySubscribers(of: peer)
        followPublishers(in: room, now: now)
    }

    func notifySubscribers(of publisher: PeerState) {
        let ids = publisher.room.subscriberIDs(of: publisher)
        send(.subscribers(peers: ids), to: publisher.address)
    }

    func remove(_ peer: PeerState, reason: String) {
        let room = peer.room
        let removal = registry.remove(peer)
        for s in removal.stopped { emit(.substreamStopped(room: room.name, peer: peer.id, stream: s)) }
        broadcast(.peerLeft(version: room.version, peer: peer.id, reason: reason), in: room, except: nil)
        for p in removal.publishers { notifySubscribers(of: p) }
        emit(.peerLeft(room: room.name, peer: peer.info, reason: reason))
        // Browsers that watched this peer follow the next one sharing a screen.
        if !peer.streams.isEmpty { followPublishers(in: room, now: peer.lastHeard) }
    }
}
