import RTP
import NetworkAddress

/// Who is where in the relay: its rooms, their peers (by id, in join order, and by address)
/// and what each publishes and receives. It makes and removes, and answers questions; it sends
/// and reports nothing — ``RelayCore`` tells the peers and the caller what changed, from what
/// the registry returns.
struct RelayRegistry {
    let limits: RelayLimits
    private(set) var rooms: [String: RoomState] = [:]
    private var byAddress: [PeerAddress: PeerState] = [:]
    private var nextPeerID: UInt32 = 1
    /// Peers that are browsers.
    private(set) var browserCount = 0
    /// Counts every change of a room's peers or streams (a directory of rooms is stale when it moved).
    private(set) var changes: UInt64 = 0

    init(limits: RelayLimits) { self.limits = limits }

    var peerCount: Int { byAddress.count }

    /// The peer that sends from `address`, if any.
    func peer(at address: PeerAddress) -> PeerState? { byAddress[address] }

    /// Every peer (a copy: removing some while going through them is safe).
    var allPeers: [PeerState] { Array(byAddress.values) }

    /// A room's peers or streams changed: its version moves (peers compare it), and `changes`.
    mutating func changed(_ room: RoomState) {
        room.version += 1
        changes += 1
    }

    // MARK: - Rooms and peers

    /// What is wrong with a room name (nil: nothing).
    func roomNameProblem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= limits.maxNameLength,
              name.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x21 && $0.value != 0x7F }) else {
            return "room name must be 1–\(limits.maxNameLength) bytes without spaces or control characters"
        }
        return nil
    }

    /// The room `name`, made if it does not exist yet, with room for one more peer.
    /// - Throws: `RoomProtocolError` (`limit`) when the relay hosts too many rooms or the room is full.
    mutating func roomWithSpace(_ name: String) throws(RoomProtocolError) -> RoomState {
        let room: RoomState
        if let r = rooms[name] {
            room = r
        } else {
            guard rooms.count < limits.maxRooms else { throw RoomProtocolError(.limit, "this relay already hosts \(limits.maxRooms) rooms") }
            room = RoomState(name: name)
            rooms[name] = room
        }
        guard room.peers.count < limits.maxPeersPerRoom else {
            throw RoomProtocolError(.limit, "room '\(name)' is full (\(limits.maxPeersPerRoom) peers)")
        }
        return room
    }

    /// Adds a peer at `address` to `room` (which ``roomWithSpace(_:)`` gave) under the next id;
    /// an empty name becomes "peer-ID".
    mutating func add(to room: RoomState, name: String, role: String, address: PeerAddress, now: UInt64,
                      external: Bool = false, client: String? = nil, canPublish: Bool = true, follows: String? = nil) -> PeerState {
        let peer = PeerState(id: nextPeerID, name: name.isEmpty ? "peer-\(nextPeerID)" : name, role: role, address: address, room: room, now: now)
        peer.external = external
        peer.client = external ? (client ?? "browser") : nil
        peer.canPublish = canPublish
        peer.follows = follows
        if peer.client == "browser" { browserCount += 1 }
        nextPeerID = nextPeerID == UInt32.max ? 1 : nextPeerID + 1
        room.peers[peer.id] = peer
        room.order.append(peer.id)
        byAddress[address] = peer
        changed(room)
        return peer
    }

    /// What removing a peer changed: the streams it published (stopped now), and the
    /// publishers it received from (their subscriber lists changed).
    struct Removal {
        var stopped: [StreamInfo]
        var publishers: [PeerState]
    }

    /// Removes `peer` from its room (the room too, when it was the last one there), with its
    /// streams and its subscriptions.
    mutating func remove(_ peer: PeerState) -> Removal {
        let room = peer.room
        if peer.client == "browser" { browserCount -= 1 }
        byAddress[peer.address] = nil
        room.peers[peer.id] = nil
        room.order.removeAll { $0 == peer.id }
        for s in peer.streams { room.streams[s.ssrc] = nil }
        var publishers: [PeerState] = []
        for stream in room.streams.values {
            if let i = stream.subscriberIndex(peer) {
                stream.removeSubscriber(at: i)
                if !publishers.contains(where: { $0 === stream.owner }) { publishers.append(stream.owner) }
            }
        }
        for other in room.peers.values { other.subscriptions[peer.id] = nil }
        changed(room)
        if room.peers.isEmpty { rooms[room.name] = nil }
        return Removal(stopped: peer.streams, publishers: publishers)
    }

    // MARK: - Publications

    /// What a new list of a peer's streams changed.
    struct Publication {
        var stopped: [StreamInfo] = []
        var started: [StreamState] = []
    }

    /// Replaces what `peer` publishes with `streams` (checked by the caller): the streams no
    /// longer listed stop, the new ones start with whoever already subscribed to their kind,
    /// and an FEC stream is tied to the screen it protects.
    mutating func publish(_ streams: [StreamInfo], by peer: PeerState) -> Publication {
        let room = peer.room
        var out = Publication()
        let old = peer.streams
        guard old != streams else { return out }
        for s in old where !streams.contains(s) {
            room.streams[s.ssrc] = nil
            out.stopped.append(s)
        }
        for s in streams where !old.contains(s) {
            let stream = StreamState(info: s, owner: peer, history: s.kind == .audio || s.kind == .fec ? limits.audioHistory : limits.videoHistory)
            // Whoever already subscribed to this kind of this publisher receives it at once.
            for viewer in room.peers.values where viewer.subscriptions[peer.id]?.contains(s.kind) == true {
                stream.addSubscriber(viewer)
            }
            room.streams[s.ssrc] = stream
            out.started.append(stream)
        }
        peer.streams = streams
        // With an FEC stream the screen's packets are kept from the first on, so the first FEC
        // packets can already repair; the FEC stream knows its screen (no lookup per packet).
        if let fec = streams.first(where: { $0.kind == .fec }).flatMap({ room.streams[$0.ssrc] }),
           let screen = streams.first(where: { $0.kind == .screen }).flatMap({ room.streams[$0.ssrc] }) {
            if screen.fec == nil { screen.fec = ULPFECDecoder() }
            fec.protects = screen
        }
        changed(room)
        return out
    }

    // MARK: - Inspection (stats, the HTTP side, tests)

    /// What each room holds now, for the relay's HTTP side (a page names the presenter).
    func summaries() -> [RoomSummary] {
        rooms.values.map { room in
            let peers = room.order.compactMap { room.peers[$0] }
            return RoomSummary(name: room.name, presenters: peers.filter { p in p.streams.contains { $0.kind == .screen } }.map(\.name),
                               peers: peers.count, browsers: peers.filter { $0.client == "browser" }.count)
        }
    }

    /// Every stream published now, in every room.
    var allStreams: [StreamState] { rooms.values.flatMap { $0.streams.values } }

    func stream(room: String, ssrc: UInt32) -> StreamState? { rooms[room]?.streams[ssrc] }
}
