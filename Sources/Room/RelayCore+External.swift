import Congestion
import NetworkAddress

/// Viewers that speak no room protocol: browsers, whose signalling was WHEP over HTTP and whose
/// media a gateway secures (ICE, DTLS, SRTP) on the relay's socket. To the room they are
/// viewers like any other (`peer_joined`, counted, fed from the same history and keyframe
/// throttle); they follow a presenter by name or the first one sharing a screen, and the next
/// when it leaves, as `watch` does.
extension RelayCore {
    /// Adds a browser at `address` to `room` as `name`, following `presenter` (nil: the first
    /// peer sharing a screen). `client` says what it is in `peer_joined`: `browser`, or `janus`
    /// for a Janus mountpoint (not counted among the browsers). With `capsWithREMB`, its REMB
    /// caps what the presenter sends (the lowest of such viewers'; never by default).
    /// - Returns: its peer id.
    /// - Throws: `RoomProtocolError` for a bad room or name, or a full room or relay.
    public func addExternalViewer(room name: String, name peerName: String, address: PeerAddress, presenter: String?,
                                  client: String = "browser", capsWithREMB: Bool = false, now: UInt64) throws -> UInt32 {
        if let problem = registry.roomNameProblem(name) { throw RoomProtocolError(.badRoom, problem) }
        if let existing = registry.peer(at: address) { remove(existing, reason: "left") }
        let room = try registry.roomWithSpace(name)
        let peer = registry.add(to: room, name: String(peerName.prefix(limits.maxNameLength)), role: "viewer", address: address, now: now,
                                external: true, client: client, canPublish: false, follows: presenter)
        peer.capsWithREMB = capsWithREMB
        broadcast(.peerJoined(version: room.version, peer: peer.info), in: room, except: peer)
        emit(.peerJoined(room: name, peer: peer.info, address: address))
        followPublishers(in: room, now: now)
        return peer.id
    }

    /// Removes the browser at `address` (its session ended: WHEP DELETE, consent lost, DTLS
    /// closed).
    public func removeExternalViewer(address: PeerAddress, reason: String) {
        guard let peer = registry.peer(at: address), peer.external else { return }
        remove(peer, reason: reason)
    }

    /// The streams the browser at `address` receives now (the gateway maps them to the payload
    /// types and SSRCs of its answer).
    public func externalViewerStreams(address: PeerAddress) -> [StreamInfo] {
        guard let peer = registry.peer(at: address), peer.external else { return [] }
        let room = peer.room
        return room.streams.values.filter { $0.subscriberIndex(peer) != nil }.map(\.info)
    }

    /// The link to the browser at `address` as the relay measures it, for its FEC: loss over
    /// the last second of its transport feedback, its round trip (from its receiver reports),
    /// and whether a queue stands or builds on it (loss then is congestion's). Nil until it has
    /// sent transport feedback on the screen it watches.
    public func externalViewerLink(address: PeerAddress) -> (loss: Double, rttNanos: UInt64?, congested: Bool)? {
        guard let peer = registry.peer(at: address), peer.external else { return nil }
        for stream in peer.room.streams.values where stream.info.kind == .screen {
            guard let i = stream.subscriberIndex(peer), let downlink = stream.subscribers[i].downlink else { continue }
            let c = downlink.controller
            let congested = c.detector.state == .overusing || (c.queueDelay ?? 0) > CongestionController.standingQueueNanos
            return (c.lossFraction, stream.subscribers[i].rttNanos, congested)
        }
        return nil
    }

    /// Subscribes each browser in `room` that watches nobody to the presenter it follows, when
    /// that presenter shares a screen.
    func followPublishers(in room: RoomState, now: UInt64) {
        for viewer in room.peers.values where viewer.external && viewer.subscriptions.isEmpty {
            let sharing = room.order.compactMap { room.peers[$0] }.filter { p in
                p !== viewer && p.streams.contains { $0.kind == .screen }
            }
            let chosen = viewer.follows.map { name in sharing.first { $0.name == name } } ?? sharing.first
            guard let publisher = chosen else { continue }
            let kinds: Set<StreamKind> = [.screen, .audio]
            viewer.subscriptions[publisher.id] = kinds
            var changed = false
            for info in publisher.streams where kinds.contains(info.kind) {
                guard let stream = room.streams[info.ssrc], stream.subscriberIndex(viewer) == nil else { continue }
                stream.addSubscriber(viewer)
                changed = true
                RTCPTerminator.requestKeyframe(stream, now: now, wire: &wire)  // a browser needs a keyframe to start
            }
            emit(.subscribed(room: room.name, viewer: viewer.id, publisher: publisher.id, kinds: [.screen, .audio]))
            if changed { notifySubscribers(of: publisher) }
        }
    }
}
