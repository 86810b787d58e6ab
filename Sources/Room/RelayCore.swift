import RTCP
import RTP
import RTPSession
import Crypto
import FoundationEssentials
import Glibc
import MediaCore
import Transport

/// Bounds on what one relay keeps, so memory stays bounded whatever peers send.
public struct RelayLimits: Sendable {
    public var maxRooms = 1000
    public var maxPeersPerRoom = 500
    public var maxStreamsPerPeer = 4
    public var maxSubscriptionsPerPeer = 16
    public var maxNameLength = 64
    /// Error replies per second, all peers together (an error is never an amplifier).
    public var maxErrorsPerSecond = 100
    /// Error replies per second to one address.
    public var maxErrorsPerAddressPerSecond = 10
    /// Joins per second into one room (a flood of joins is refused with `limit`).
    public var maxJoinsPerRoomPerSecond = 250
    /// Packets kept per video stream to answer NACKs (power of two).
    public var videoHistory = 1024
    public var audioHistory = 64
    public init() {}
}

/// A room as the relay's directory shows it.
public struct RoomSummary: Sendable, Equatable {
    public let name: String
    /// The peers sharing a screen, in the order they joined (a browser without `?from=` watches the first).
    public let presenters: [String]
    public let peers: Int
    public let browsers: Int
    public init(name: String, presenters: [String], peers: Int, browsers: Int) {
        self.name = name
        self.presenters = presenters
        self.peers = peers
        self.browsers = browsers
    }
}

/// What the relay reports as it goes.
public enum RelayEvent: Sendable, Equatable {
    case peerJoined(room: String, peer: PeerInfo, address: PeerAddress)
    case peerLeft(room: String, peer: PeerInfo, reason: String)
    case substreamStarted(room: String, peer: UInt32, stream: StreamInfo)
    case substreamStopped(room: String, peer: UInt32, stream: StreamInfo)
    case subscribed(room: String, viewer: UInt32, publisher: UInt32, kinds: [StreamKind])
    case unsubscribed(room: String, viewer: UInt32, publisher: UInt32)
    /// A datagram was dropped: malformed, unknown type, wrong version, from a stranger.
    case rejected(address: PeerAddress, reason: String)
}

/// Counters for stats events and tests.
public struct RelayCounters: Sendable, Equatable {
    public var rtpIn = 0
    public var rtpForwarded = 0
    public var bytesForwarded = 0
    public var rtcpIn = 0
    public var controlIn = 0
    public var retransmitted = 0
    public var retransmitMissed = 0
    public var keyframeRequests = 0
    /// Malformed or unexpected datagrams (bad control messages, RTP of unpublished SSRCs…).
    public var rejected = 0
    /// Datagrams from addresses that are not in any room.
    public var unknownSource = 0
    public var errorsSent = 0
    /// Joins and publishes refused for want of a valid token (`unauthorized`).
    public var unauthorized = 0
    /// `retry` answers: joins that came without a valid cookie.
    public var retriesSent = 0
    /// Replies not sent to an address that has not proven it receives (larger than what it sent).
    public var repliesWithheld = 0
    public var timeouts = 0
    /// Transport feedback sent to presenters (their congestion control).
    public var transportFeedbacks = 0
    /// FEC packets from presenters, and the packets of theirs the relay recovered with them
    /// (lost on the way in; forwarded as if they had arrived).
    public var fecIn = 0
    public var fecRecovered = 0
    /// NACKs the relay sent presenters for packets their uplinks lost.
    public var uplinkNacks = 0
    /// Transport feedback from viewers (their downlinks' estimates), and the layer switches
    /// it led to (down to the base layer, or up to all).
    public var viewerFeedbacks = 0
    public var layerSwitches = 0
    public init() {}
}

/// Where the relay's datagrams go (a UDP socket in production, an array in unit tests).
public protocol RelayTransport: AnyObject {
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress)
    /// Sends the same datagram to each address, in order: one forwarded packet's fan-out.
    /// A socket sends them with one `sendmmsg`; the default calls `send(_:to:)` for each.
    func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: [PeerAddress])
}

extension RelayTransport {
    public func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: [PeerAddress]) {
        for a in addresses { send(bytes, to: a) }
    }
}

/// The room relay as a pure state machine: datagrams and time in, datagrams and events out.
///
/// An RTP translator/SFU in RFC 7667's words ("Topo-Media-Translator" without transcoding):
/// RTP is forwarded unchanged to the subscribers of its stream; RTCP is terminated per hop —
/// the relay answers viewers' NACKs from its own packet history (so the presenter's uplink does
/// not grow with the audience), sends its own receiver reports to publishers, forwards
/// publishers' sender reports (their NTP↔RTP mapping is what receivers need for A/V sync)
/// and passes keyframe requests (PLI/FIR, and one for every late joiner) to the publisher at
/// most once per 300 ms per stream.
public final class RelayCore {
    public let limits: RelayLimits
    /// The relay's own SSRC, the sender of its RTCP.
    public let ssrc: UInt32
    public private(set) var counters = RelayCounters()
    private let transport: RelayTransport
    let onEvent: (RelayEvent) -> Void
    var rooms: [String: RoomState] = [:]
    var byAddress: [PeerAddress: PeerState] = [:]
    var nextPeerID: UInt32 = 1
    private var errorBudget = 0
    private var errorBudgetSecond: UInt64 = 0
    /// Per second: error replies per address, joins per room (cleared each second, bounded).
    private var errorsByAddress: [PeerAddress: Int] = [:]
    private var joinsByRoom: [String: Int] = [:]
    private var nextReport: UInt64 = 0
    private var rtcpBuffer = [UInt8](repeating: 0, count: 1500)
    /// A packet renumbered for one viewer (``sendEdited``).
    private var editBuffer = [UInt8](repeating: 0, count: 1500)
    /// The size of the datagram being handled: what an unproven address may get back at most.
    private var received = 0
    /// The datagram being handled is a join with a valid cookie: its address receives what is
    /// sent to it, so a reply (a refusal that names its reason) may be larger than the join.
    private var provenNow = false
    private let cookieKey: SymmetricKey
    /// Who may enter which room (nil: anyone, an open relay).
    public let authorizer: (any RoomAuthorizer)?

    /// - Parameter cookieSecret: the key of the return-routability cookies (random unless a
    ///   test or the fuzzer needs them predictable).
    public init(limits: RelayLimits = RelayLimits(), ssrc: UInt32 = UInt32.random(in: 1...UInt32.max),
                transport: RelayTransport, cookieSecret: [UInt8]? = nil, authorizer: (any RoomAuthorizer)? = nil,
                onEvent: @escaping (RelayEvent) -> Void = { _ in }) {
        self.authorizer = authorizer
        self.limits = limits
        self.ssrc = ssrc
        self.transport = transport
        self.onEvent = onEvent
        cookieKey = cookieSecret.map { SymmetricKey(data: $0) } ?? SymmetricKey(size: .bits256)
    }

    // MARK: - Return routability

    /// How long a cookie stays valid: the epoch it was made in and the next.
    public static let cookieEpochNanos: UInt64 = 30_000_000_000

    /// The cookie `address` must echo in its `join` at `now` (stateless, as QUIC's Retry and
    /// DTLS's HelloVerifyRequest: an HMAC of the address, the port and the time).
    public func cookie(for address: PeerAddress, now: UInt64) -> String {
        cookie(address, epoch: now / Self.cookieEpochNanos)
    }

    private func cookie(_ address: PeerAddress, epoch: UInt64) -> String {
        var input = [UInt8](repeating: 0, count: 14)
        for i in 0..<4 { input[i] = UInt8(truncatingIfNeeded: address.ip >> (24 - 8 * i)) }
        input[4] = UInt8(address.port >> 8)
        input[5] = UInt8(address.port & 0xFF)
        for i in 0..<8 { input[6 + i] = UInt8(truncatingIfNeeded: epoch >> (56 - 8 * i)) }
        let mac = HMAC<SHA256>.authenticationCode(for: input, using: cookieKey)
        return mac.prefix(12).hexString
    }

    private func isValid(_ cookie: String?, from address: PeerAddress, now: UInt64) -> Bool {
        guard let cookie else { return false }
        let epoch = now / Self.cookieEpochNanos
        return cookie == self.cookie(address, epoch: epoch) || (epoch > 0 && cookie == self.cookie(address, epoch: epoch - 1))
    }

    // MARK: - Inspection (stats, tests)

    public var roomCount: Int { rooms.count }
    public var peerCount: Int { byAddress.count }
    /// Peers that are browsers.
    public internal(set) var browserCount = 0
    /// Counts every change of a room's peers or streams (a directory of rooms is stale when it moved).
    public private(set) var changes: UInt64 = 0

    /// A room's peers or streams changed: its version moves (peers compare it), and `changes`.
    func changed(_ room: RoomState) {
        room.version += 1
        changes += 1
    }

    /// What each room holds now, for the relay's HTTP side (a page names the presenter).
    public func summaries() -> [RoomSummary] {
        rooms.values.map { room in
            let peers = room.order.compactMap { room.peers[$0] }
            return RoomSummary(name: room.name, presenters: peers.filter { p in p.streams.contains { $0.kind == .screen } }.map(\.name),
                               peers: peers.count, browsers: peers.filter(\.external).count)
        }
    }
    public func peers(in room: String) -> [PeerInfo] { rooms[room]?.snapshot() ?? [] }
    /// Where a stream's packets go now.
    public func subscribers(room: String, ssrc: UInt32) -> [PeerAddress] {
        rooms[room]?.streams[ssrc]?.addresses ?? []
    }

    /// RTP packets missing from what publishers sent the relay (sequence gaps, RFC 3550 A.3),
    /// summed over the streams published now. On loopback they can only be the relay's own
    /// receive queue overflowing.
    public var rtpLostIn: Int {
        rooms.values.reduce(0) { sum, room in
            room.streams.values.reduce(sum) { $0 + max(0, Int($1.receive.cumulativeLost)) }
        }
    }

    /// What each subscriber of a stream last reported: loss fraction and round-trip time to the relay.
    public func subscriberReports(room: String, ssrc: UInt32) -> [(address: PeerAddress, fractionLost: Double, rttNanos: UInt64?)] {
        rooms[room]?.streams[ssrc]?.subscribers.map { ($0.address, $0.fractionLost, $0.rttNanos) } ?? []
    }

    /// Viewers that get only the base layer of a stream, or only its keyframes, now (their links
    /// carry no more).
    public var viewersOnBaseLayer: Int {
        rooms.values.reduce(0) { sum, room in
            room.streams.values.reduce(sum) { n, stream in n + stream.subscribers.filter { $0.downlink.map { $0.layers != .all } ?? false }.count }
        }
    }

    /// The viewers that get fewer layers of a screen than it has, now: "ROOM/PEER-ID" → the
    /// layers they get (`base`, `keyframes`). Viewers that get every layer are not listed.
    public var viewersOnFewerLayers: [String: LinkLayers] {
        var out: [String: LinkLayers] = [:]
        for room in rooms.values {
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
        rooms[room]?.streams[ssrc]?.subscribers.compactMap { s in
            s.downlink.map { (s.address, $0.controller.target, $0.layers, $0.switchesDown, $0.switchesUp) }
        } ?? []
    }

    // MARK: - Input

    /// Takes one datagram that arrived from `address` at `now` (monotonic ns); `wallNanos` is
    /// the wall clock (for RTCP round-trip times).
    /// - Parameter proven: it came through an encrypted hop, whose handshake proved the address
    ///   (no cookie is asked for, and replies need not be smaller than the request).
    public func receive(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, wallNanos: UInt64, proven: Bool = false) {
        received = bytes.count
        provenNow = proven
        switch DatagramKind.of(bytes) {
        case .rtp:
            counters.rtpIn += 1
            guard let peer = byAddress[address] else { counters.unknownSource += 1; return }
            peer.lastHeard = now
            forwardRTP(bytes, from: peer, now: now)
        case .rtcp:
            counters.rtcpIn += 1
            guard let peer = byAddress[address] else { counters.unknownSource += 1; return }
            peer.lastHeard = now
            handleRTCP(bytes, from: peer, now: now, wallNanos: wallNanos)
        case .control:
            counters.controlIn += 1
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
            counters.rejected += 1
            onEvent(.rejected(address: address, reason: "not RTP, RTCP or a control message"))
        }
    }

    /// A datagram dropped before it reached the room: media from an address with no hop.
    public func noteUnknownSource() { counters.unknownSource += 1 }

    /// A datagram dropped before it reached the room, for a reason (counted as rejected).
    public func noteRejected(_ address: PeerAddress, reason: String) {
        counters.rejected += 1
        onEvent(.rejected(address: address, reason: reason))
    }

    /// Timers: removes silent peers, sends due keyframe requests and receiver reports.
    public func poll(now: UInt64, wallNanos: UInt64) {
        // External viewers (browsers) speak no room protocol: their gateway ends them.
        for peer in Array(byAddress.values) where !peer.external && now &- peer.lastHeard > RoomProtocol.peerTimeoutNanos
            && now > peer.lastHeard {
            counters.timeouts += 1
            remove(peer, reason: "timeout")
        }
        for room in rooms.values {
            for stream in room.streams.values where stream.keyframePending && stream.keyframeRequestDue(now: now) {
                sendKeyframeRequest(stream, now: now)
            }
            // The publishers' uplinks: what did not arrive (nor was rebuilt from FEC) is asked
            // for again, as a receiver would.
            for stream in room.streams.values where stream.uplinkNacks != nil {
                askAgain(stream, now: now)
            }
        }
        // Viewers' links: trials, and keyframes for those that get only keyframes.
        for room in rooms.values {
            for stream in room.streams.values where stream.downlinks > 0 {
                for s in stream.subscribers {
                    guard let downlink = s.downlink else { continue }
                    let before = downlink.layers
                    if downlink.poll(rates: stream.layerRates, now: now) { requestKeyframe(stream, now: now) }
                    tellIfChanged(downlink, was: before, stream: stream, viewer: s.peer, now: now)
                }
            }
        }
        // Presenters' congestion control: what arrived of theirs, every 100 ms.
        for room in rooms.values {
            for peer in room.peers.values where peer.transportFeedback != nil {
                guard let fb = peer.transportFeedback?.poll(now: now, senderSSRC: ssrc, mediaSSRC: peer.streams.first?.ssrc ?? 0) else { continue }
                let n = rtcpBuffer.withUnsafeMutableBytes { RTCPPacket.transportFeedback(fb).marshal(into: $0) }
                rtcpBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: peer.address) }
                counters.transportFeedbacks += 1
            }
        }
        if now >= nextReport {
            nextReport = now + 1_000_000_000
            for room in rooms.values {
                for stream in room.streams.values where stream.receive.packetsReceived > 0 {
                    let block = stream.receive.makeReport(now: now)
                    let n = rtcpBuffer.withUnsafeMutableBytes {
                        RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: [block], cname: "screenshare-relay", into: $0)
                    }
                    rtcpBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: stream.owner.address) }
                }
            }
        }
    }

    // MARK: - RTP

    /// - Parameter recovered: rebuilt here from the publisher's FEC, not received: forwarded and
    ///   kept for resends, but not counted as an arrival.
    private func forwardRTP(_ bytes: UnsafeRawBufferPointer, from peer: PeerState, now: UInt64, recovered: Bool = false) {
        guard bytes.count >= 12 else { counters.rejected += 1; return }
        let ssrc = UInt32(bytes[8]) << 24 | UInt32(bytes[9]) << 16 | UInt32(bytes[10]) << 8 | UInt32(bytes[11])
        guard let stream = peer.room.streams[ssrc], stream.owner === peer else {
            counters.rejected += 1  // not published (yet): nobody asked for it
            return
        }
        guard let (header, offset, length) = try? RTPHeader.parse(bytes) else { counters.rejected += 1; return }
        let transportSequence = TransportWideSequence.find(id: RoomProtocol.transportSequenceID, in: bytes)
        if let sequence = transportSequence, !recovered {
            if peer.transportFeedback == nil { peer.transportFeedback = TransportFeedbackRecorder() }
            peer.transportFeedback?.onPacket(sequence: sequence, now: now)
        }
        if stream.info.kind == .fec {
            forwardFEC(bytes, header: header, payloadOffset: offset, payloadLength: length, transportSequence: transportSequence,
                       stream: stream, from: peer, now: now)
            return
        }
        if !recovered {
            stream.receive.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now, payloadBytes: length)
        }
        stream.uplinkNacks?.onPacket(sequenceNumber: header.sequenceNumber, now: now, endsFrame: header.marker, recovered: recovered)
        stream.history.store(bytes, now: now)
        defer { if !recovered, stream.fec != nil { stream.fec?.addMedia(bytes); recover(stream, from: peer, now: now) } }
        var descriptor: VP8PayloadDescriptor?
        var keyframe = false
        if stream.info.kind != .audio, length > 0 {
            let payload = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
            descriptor = try? VP8PayloadDescriptor.parse(payload)
            if let d = descriptor, d.startsFrame, d.size < payload.count,
               VP8PayloadDescriptor.isKeyframe(vp8Data: UnsafeRawBufferPointer(rebasing: payload[d.size...])) {
                stream.keyframePending = false  // whoever asked gets this one
                keyframe = true
            }
        }
        guard stream.downlinks > 0, let d = descriptor else {
            transport.send(bytes, toEach: stream.addresses)
            counters.rtpForwarded += stream.addresses.count
            counters.bytesForwarded += stream.addresses.count * bytes.count
            return
        }
        forwardPerViewer(bytes, header: header, payloadOffset: offset, descriptor: d, keyframe: keyframe,
                         transportSequence: transportSequence, stream: stream, now: now)
    }

    /// A video packet of a stream some viewers of which send transport feedback: each of those
    /// gets the layers its link carries (``ViewerDownlink``), renumbered when some were left
    /// out; the others, and those whose numbers are still the source's, share one fan-out.
    private func forwardPerViewer(_ bytes: UnsafeRawBufferPointer, header: RTPHeader, payloadOffset: Int, descriptor d: VP8PayloadDescriptor,
                                  keyframe: Bool, transportSequence: UInt16?, stream: StreamState, now: UInt64) {
        if let t = transportSequence { stream.forwardLog.record(t, size: bytes.count + Self.srtpOverhead, now: now) }
        stream.layerRates.add(bytes.count, layer: d.temporalLayer, now: now)
        stream.shared.removeAll(keepingCapacity: true)
        for i in stream.subscribers.indices {
            guard let downlink = stream.subscribers[i].downlink else {
                stream.shared.append(stream.subscribers[i].address)
                continue
            }
            let out = downlink.filter.forward(sequence: header.sequenceNumber, pictureID: d.pictureID, temporalLayer: d.temporalLayer,
                                              layerSync: d.layerSync, startsFrame: d.start, keyframe: keyframe)
            if let t = transportSequence { downlink.noteForwarded(t, sent: out != nil) }
            guard let out else { continue }
            if out.sequence == header.sequenceNumber && out.pictureID == d.pictureID {
                stream.shared.append(stream.subscribers[i].address)
            } else {
                sendEdited(bytes, sequence: out.sequence, pictureID: out.pictureID, pictureOffset: payloadOffset + 2, to: stream.subscribers[i].address)
            }
        }
        transport.send(bytes, toEach: stream.shared)
        counters.rtpForwarded += stream.shared.count
        counters.bytesForwarded += stream.shared.count * bytes.count
    }

    /// An FEC packet of a publisher's screen (its `fec` stream): the relay recovers what its
    /// own uplink lost at once (every viewer then gets the packet without a resend from the
    /// presenter), and forwards it to the viewers whose numbers are still the source's (it names
    /// the source's; a viewer left some layers gets renumbered packets, which it cannot repair).
    private func forwardFEC(_ bytes: UnsafeRawBufferPointer, header: RTPHeader, payloadOffset: Int, payloadLength: Int,
                            transportSequence: UInt16?, stream: StreamState, from peer: PeerState, now: UInt64) {
        guard let screen = stream.protects else {
            counters.rejected += 1
            return
        }
        counters.fecIn += 1
        screen.fec?.addFEC(bytes, payloadOffset: payloadOffset, payloadLength: payloadLength, protectedSSRC: screen.info.ssrc)
        recover(screen, from: peer, now: now)
        if let t = transportSequence, screen.downlinks > 0 { screen.forwardLog.record(t, size: bytes.count + Self.srtpOverhead, now: now) }
        stream.shared.removeAll(keepingCapacity: true)
        for s in stream.subscribers {
            let downlink = screen.subscriberIndex(s.peer).flatMap { screen.subscribers[$0].downlink }
            let send = !(downlink?.filter.isShifted ?? false)
            if let t = transportSequence { downlink?.noteForwarded(t, sent: send) }
            if send { stream.shared.append(s.address) }
        }
        transport.send(bytes, toEach: stream.shared)
        counters.rtpForwarded += stream.shared.count
        counters.bytesForwarded += stream.shared.count * bytes.count
    }

    /// NACKs the publisher for the stream's holes that are due (the NACK generator's timing:
    /// after the reordering wait, then once per measured round trip).
    private func askAgain(_ stream: StreamState, now: UInt64) {
        guard let rtt = stream.uplinkNacks.map({ $0.measuredRTT ?? 100_000_000 }) else { return }
        stream.uplinkNackList.removeAll(keepingCapacity: true)
        stream.uplinkNacks?.poll(now: now, rtt: rtt, into: &stream.uplinkNackList)  // in place: no copy of its list
        _ = stream.uplinkNacks?.takeLoss()
        guard !stream.uplinkNackList.isEmpty else { return }
        let n = rtcpBuffer.withUnsafeMutableBytes {
            RTCPPacket.buildNACK(senderSSRC: ssrc, mediaSSRC: stream.info.ssrc, sequenceNumbers: stream.uplinkNackList, into: $0)
        }
        guard n > 0 else { return }
        rtcpBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: stream.owner.address) }
        counters.uplinkNacks += 1
    }

    /// Forwards what `screen`'s FEC packets can rebuild of what the publisher's uplink lost.
    private func recover(_ screen: StreamState, from peer: PeerState, now: UInt64) {
        guard screen.fec?.hasPending == true else { return }
        withUnsafeTemporaryAllocation(byteCount: ULPFEC.maxPacketSize, alignment: 16) { buffer in
            while let n = screen.fec?.recoverOne(into: buffer) {
                counters.fecRecovered += 1
                forwardRTP(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), from: peer, now: now, recovered: true)
            }
        }
    }

    /// What SRTP adds to a packet on a hop (its authentication tag), counted in what a viewer's
    /// link carries.
    static let srtpOverhead = 10

    /// Sends a copy of a VP8 packet with its sequence number and picture ID (15 or 7 bits, at
    /// `pictureOffset`, as the descriptor had it) replaced.
    private func sendEdited(_ bytes: UnsafeRawBufferPointer, sequence: UInt16, pictureID: UInt16?, pictureOffset: Int, to address: PeerAddress) {
        guard bytes.count <= editBuffer.count else { return }
        editBuffer.withUnsafeMutableBytes { b in
            b.copyMemory(from: bytes)
            b[2] = UInt8(sequence >> 8)
            b[3] = UInt8(sequence & 0xFF)
            if let pictureID, pictureOffset + 1 < bytes.count, b[pictureOffset - 1] & 0x80 != 0 {  // X byte: I
                if b[pictureOffset] & 0x80 != 0 {
                    b[pictureOffset] = 0x80 | UInt8((pictureID >> 8) & 0x7F)
                    b[pictureOffset + 1] = UInt8(pictureID & 0xFF)
                } else {
                    b[pictureOffset] = UInt8(pictureID & 0x7F)
                }
            }
        }
        editBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<bytes.count]), to: address) }
        counters.rtpForwarded += 1
        counters.bytesForwarded += bytes.count
    }

    // MARK: - RTCP

    private func handleRTCP(_ bytes: UnsafeRawBufferPointer, from peer: PeerState, now: UInt64, wallNanos: UInt64) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { counters.rejected += 1; return }
        let room = peer.room
        var forwardTo: StreamState?
        for packet in packets {
            switch packet {
            case .senderReport(let sr):
                // A publisher's report: kept for our receiver reports, forwarded to its
                // subscribers (with the rest of the compound: SDES, BYE).
                if let stream = room.streams[sr.ssrc], stream.owner === peer {
                    stream.receive.onSenderReport(sr, arrival: now)
                    stream.noteForwardedReport(middle: sr.ntp.middle32, wallNanos: wallNanos)
                    forwardTo = stream
                }
            case .goodbye(let bye):
                if forwardTo == nil, let first = bye.sources.first, let stream = room.streams[first], stream.owner === peer {
                    forwardTo = stream
                }
            case .receiverReport(let rr):
                for block in rr.reports {
                    guard let stream = room.streams[block.ssrc], let i = stream.subscriberIndex(peer) else { continue }
                    var s = stream.subscribers[i]
                    s.fractionLost = Double(block.fractionLost) / 256
                    if block.lastSenderReport != 0, let sent = stream.forwardTime(middle: block.lastSenderReport) {
                        let delay = NTPTimestamp.nanos(fromShort: block.delaySinceLastSenderReport)
                        let elapsed = wallNanos &- sent
                        if wallNanos >= sent, elapsed >= delay { s.rttNanos = elapsed - delay }
                    }
                    stream.subscribers[i] = s
                }
            case .nack(let nack):
                guard let stream = room.streams[nack.mediaSSRC], let i = stream.subscriberIndex(peer) else { continue }
                let downlink = stream.subscribers[i].downlink
                let filter = downlink?.filter
                // A viewer whose link is estimated gets resends within what its link has left.
                let allow: (Int) -> Bool = { downlink?.allowResend($0, now: now) ?? true }
                nack.forEachSequenceNumber { seq in
                    // Each viewer's NackGenerator spaces its own retries, so each request is
                    // answered (no cross-viewer RTT gate). A viewer that was left some layers
                    // names its own numbers: the source's packet goes back under them.
                    guard let filter, filter.isShifted else {
                        let outcome = stream.history.retransmit(sequenceNumber: seq, now: now, rtt: 0, allow: allow) {
                            transport.send(UnsafeRawBufferPointer($0), to: peer.address)
                        }
                        if outcome == .sent { counters.retransmitted += 1 } else { counters.retransmitMissed += 1 }
                        return
                    }
                    guard let source = filter.original(seq) else { counters.retransmitMissed += 1; return }
                    let outcome = stream.history.retransmit(sequenceNumber: source, now: now, rtt: 0, allow: allow) { stored in
                        let packet = UnsafeRawBufferPointer(stored)
                        var picture: UInt16?, pictureOffset = 0
                        if let (_, offset, length) = try? RTPHeader.parse(packet), length > 0,
                           let d = try? VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: packet[offset..<(offset + length)])) {
                            picture = d.pictureID.flatMap { filter.outgoingPicture($0) }
                            pictureOffset = offset + 2
                        }
                        sendEdited(packet, sequence: seq, pictureID: picture, pictureOffset: pictureOffset, to: peer.address)
                    }
                    if outcome == .sent { counters.retransmitted += 1 } else { counters.retransmitMissed += 1 }
                }
            case .transportFeedback(let feedback):
                // A viewer's arrivals of a stream it receives: its downlink's estimate, and so
                // the layers it gets.
                guard let stream = room.streams[feedback.mediaSSRC], stream.info.kind != .audio,
                      let i = stream.subscriberIndex(peer) else { continue }
                if stream.subscribers[i].downlink == nil {
                    stream.subscribers[i].downlink = ViewerDownlink()
                    stream.downlinks += 1
                }
                let downlink = stream.subscribers[i].downlink!
                let before = downlink.layers
                downlink.onFeedback(feedback, log: stream.forwardLog, rates: stream.layerRates, now: now)
                counters.viewerFeedbacks += 1
                tellIfChanged(downlink, was: before, stream: stream, viewer: peer, now: now)
            case .extendedReport(let xr):
                // A viewer's RRTR (RFC 3611 §4.4): answered at once with a DLRR, so it learns
                // its round trip to this relay (which answers its NACKs).
                guard let t = xr.referenceTime else { break }
                let item = ExtendedReport.DLRRItem(ssrc: xr.ssrc, lastReceiverReport: t.middle32, delaySinceLastReceiverReport: 0)
                let n = rtcpBuffer.withUnsafeMutableBytes {
                    RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: [], cname: "screenshare-relay", dlrr: [item], into: $0)
                }
                rtcpBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: peer.address) }
            case .pli(_, let media):
                if let stream = room.streams[media], stream.subscriberIndex(peer) != nil { requestKeyframe(stream, now: now) }
            case .fir(let fir):
                for entry in fir.entries {
                    if let stream = room.streams[entry.ssrc], stream.subscriberIndex(peer) != nil { requestKeyframe(stream, now: now) }
                }
            default:
                break
            }
        }
        if let stream = forwardTo {
            transport.send(bytes, toEach: stream.addresses)
        }
    }

    /// A viewer's link carries more or less of a stream than before: it is told (`link`). A
    /// viewer that gets fewer layers is told again every 5 s (the message may be lost on the
    /// very link that is short; the viewer says only what changed).
    private func tellIfChanged(_ downlink: ViewerDownlink, was before: LinkLayers, stream: StreamState, viewer: PeerState, now: UInt64) {
        let changed = downlink.layers != before
        if changed { counters.layerSwitches += 1 }
        guard changed || (downlink.layers != .all && now >= downlink.nextTell) else { return }
        downlink.nextTell = now + 5_000_000_000
        send(.link(publisher: stream.owner.id, layers: downlink.layers, estimateKbps: Int(downlink.controller.target / 1000)), to: viewer.address)
    }

    func requestKeyframe(_ stream: StreamState, now: UInt64) {
        guard stream.info.kind == .screen || stream.info.kind == .main else { return }
        if stream.keyframeRequestDue(now: now) {
            sendKeyframeRequest(stream, now: now)
        } else {
            stream.keyframePending = true
        }
    }

    private func sendKeyframeRequest(_ stream: StreamState, now: UInt64) {
        stream.lastKeyframeRequest = now
        stream.keyframePending = false
        counters.keyframeRequests += 1
        let n = rtcpBuffer.withUnsafeMutableBytes { RTCPPacket.buildPLI(senderSSRC: ssrc, mediaSSRC: stream.info.ssrc, into: $0) }
        rtcpBuffer.withUnsafeBytes { transport.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: stream.owner.address) }
    }

    // MARK: - Control

    private func send(_ message: ControlMessage, requestID: UInt32 = 0, to address: PeerAddress) {
        var bytes = ControlEnvelope(requestID: requestID, message).encoded()
        if bytes.count > RoomProtocol.maxRelayMessageSize {
            bytes = Self.fitted(message, requestID: requestID, recipient: byAddress[address]?.id) ?? bytes
        }
        bytes.withUnsafeBytes { transport.send($0, to: address) }
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
        bytes.withUnsafeBytes { transport.send($0, toEach: addresses) }
    }

    private func reject(_ address: PeerAddress, _ error: RoomProtocolError, now: UInt64) {
        counters.rejected += 1
        onEvent(.rejected(address: address, reason: error.description))
        guard takeReplyBudget(for: address, now: now) else { return }
        replyUnproven(.error(code: error.code, message: error.message), requestID: error.requestID, to: address) { counters.errorsSent += 1 }
    }

    /// A new second: the per-second budgets start again.
    private func rollSecond(_ now: UInt64) {
        let second = now / 1_000_000_000
        guard second != errorBudgetSecond else { return }
        errorBudgetSecond = second
        errorBudget = 0
        errorsByAddress.removeAll(keepingCapacity: true)
        joinsByRoom.removeAll(keepingCapacity: true)
    }

    /// Whether one more reply (an error, a retry) may go out this second: to all, and to `address`.
    private func takeReplyBudget(for address: PeerAddress, now: UInt64) -> Bool {
        rollSecond(now)
        guard errorBudget < limits.maxErrorsPerSecond, errorsByAddress[address, default: 0] < limits.maxErrorsPerAddressPerSecond
        else { return false }
        errorBudget += 1
        errorsByAddress[address, default: 0] += 1
        return true
    }

    /// Sends `message` to `address`; to an address that is in no room and did not echo a valid
    /// cookie in this datagram (it has not proven it receives what is sent to it) only when it is
    /// no larger than the datagram it answers.
    /// An error that does not fit goes without its text (the code alone), if that fits.
    private func replyUnproven(_ message: ControlMessage, requestID: UInt32, to address: PeerAddress, sent: () -> Void) {
        var bytes = ControlEnvelope(requestID: requestID, message).encoded()
        let proven = provenNow || byAddress[address] != nil
        if !proven, bytes.count > received, case let .error(code, text) = message, !text.isEmpty {
            bytes = ControlEnvelope(requestID: requestID, .error(code: code, message: "")).encoded()
        }
        guard proven || bytes.count <= received else {
            counters.repliesWithheld += 1
            return
        }
        sent()
        bytes.withUnsafeBytes { transport.send($0, to: address) }
    }

    private func handleControl(_ envelope: ControlEnvelope, from address: PeerAddress, now: UInt64, wallNanos: UInt64) {
        let id = envelope.requestID
        if case let .join(room, name, role, token, cookie) = envelope.message {
            // A new address proves it receives what is sent to it by echoing a cookie before it
            // gets any state, media or room list: a spoofed join reflects one small retry.
            guard provenNow || byAddress[address] != nil || isValid(cookie, from: address, now: now) else {
                guard takeReplyBudget(for: address, now: now) else { return }
                replyUnproven(.retry(cookie: self.cookie(for: address, now: now)), requestID: id, to: address) { counters.retriesSent += 1 }
                return
            }
            provenNow = true
            join(room: room, name: name, role: role, token: token, from: address, requestID: id, now: now, wallNanos: wallNanos)
            return
        }
        guard let peer = byAddress[address] else {
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
                requestKeyframe(stream, now: now)  // a late joiner needs a keyframe to start
            }
            if !added.isEmpty { onEvent(.subscribed(room: room.name, viewer: peer.id, publisher: publisherID, kinds: Array(added).sorted { $0.rawValue < $1.rawValue })) }
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
            if current.isEmpty { onEvent(.unsubscribed(room: room.name, viewer: peer.id, publisher: publisherID)) }
            if changed { notifySubscribers(of: publisher) }
        default:
            reject(address, RoomProtocolError(.unknownType, "'\(envelope.message.type.name)' is sent by the relay, not to it", requestID: id), now: now)
        }
    }

    private func join(room name: String, name peerName: String, role: String, token: String?, from address: PeerAddress, requestID: UInt32,
                      now: UInt64, wallNanos: UInt64) {
        if let problem = roomNameProblem(name) {
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
                counters.unauthorized += 1
                reject(address, RoomProtocolError(.unauthorized, "join: \(error.description)", requestID: requestID), now: now)
                return
            }
        }
        if let existing = byAddress[address] {
            if existing.room.name == name {  // a retransmitted join: same answer
                existing.lastHeard = now
                send(.welcome(peer: existing.id, room: name, version: existing.room.version, peers: existing.room.snapshot()), requestID: requestID, to: address)
                return
            }
            remove(existing, reason: "left")
        }
        rollSecond(now)
        guard joinsByRoom[name, default: 0] < limits.maxJoinsPerRoomPerSecond else {
            reject(address, RoomProtocolError(.limit, "join: room '\(name)' takes at most \(limits.maxJoinsPerRoomPerSecond) joins a second; try again", requestID: requestID), now: now)
            return
        }
        joinsByRoom[name, default: 0] += 1
        let room: RoomState
        do {
            room = try roomWithSpace(name)
        } catch {
            reject(address, RoomProtocolError(.limit, "join: " + error.message, requestID: requestID), now: now)
            return
        }
        let given = grant.name.map { String($0.prefix(limits.maxNameLength)) } ?? peerName
        let peer = PeerState(id: nextPeerID, name: given.isEmpty ? "peer-\(nextPeerID)" : given,
                             role: role == "presenter" ? "presenter" : "viewer", address: address, room: room, now: now)
        peer.canPublish = grant.canPublish
        nextPeerID = nextPeerID == UInt32.max ? 1 : nextPeerID + 1
        room.peers[peer.id] = peer
        room.order.append(peer.id)
        byAddress[address] = peer
        changed(room)
        send(.welcome(peer: peer.id, room: name, version: room.version, peers: room.snapshot()), requestID: requestID, to: address)
        broadcast(.peerJoined(version: room.version, peer: peer.info), in: room, except: peer)
        onEvent(.peerJoined(room: name, peer: peer.info, address: address))
    }

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
    func roomWithSpace(_ name: String) throws(RoomProtocolError) -> RoomState {
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

    private func publish(_ streams: [StreamInfo], by peer: PeerState, requestID: UInt32, now: UInt64) {
        let room = peer.room
        guard peer.canPublish || streams.isEmpty else {
            counters.unauthorized += 1
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
        let old = peer.streams
        guard old != streams else { return }
        for s in old where !streams.contains(s) {
            room.streams[s.ssrc] = nil
            onEvent(.substreamStopped(room: room.name, peer: peer.id, stream: s))
        }
        for s in streams where !old.contains(s) {
            let stream = StreamState(info: s, owner: peer, history: s.kind == .audio || s.kind == .fec ? limits.audioHistory : limits.videoHistory)
            // Whoever already subscribed to this kind of this publisher receives it at once.
            for viewer in room.peers.values where viewer.subscriptions[peer.id]?.contains(s.kind) == true {
                stream.addSubscriber(viewer)
            }
            room.streams[s.ssrc] = stream
            if !stream.subscribers.isEmpty { requestKeyframe(stream, now: now) }
            onEvent(.substreamStarted(room: room.name, peer: peer.id, stream: s))
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
        if peer.external { browserCount -= 1 }
        byAddress[peer.address] = nil
        room.peers[peer.id] = nil
        room.order.removeAll { $0 == peer.id }
        for s in peer.streams {
            room.streams[s.ssrc] = nil
            onEvent(.substreamStopped(room: room.name, peer: peer.id, stream: s))
        }
        var publishers: [PeerState] = []
        for stream in room.streams.values {
            if let i = stream.subscriberIndex(peer) {
                stream.removeSubscriber(at: i)
                if !publishers.contains(where: { $0 === stream.owner }) { publishers.append(stream.owner) }
            }
        }
        for other in room.peers.values { other.subscriptions[peer.id] = nil }
        changed(room)
        broadcast(.peerLeft(version: room.version, peer: peer.id, reason: reason), in: room, except: nil)
        for p in publishers { notifySubscribers(of: p) }
        onEvent(.peerLeft(room: room.name, peer: peer.info, reason: reason))
        if room.peers.isEmpty { rooms[room.name] = nil }
        // Browsers that watched this peer follow the next one sharing a screen.
        if !peer.streams.isEmpty { followPublishers(in: room, now: peer.lastHeard) }
    }
}

// MARK: - State

final class RoomState {
    let name: String
    var version: UInt64 = 0
    var peers: [UInt32: PeerState] = [:]
    /// Join order, for snapshots.
    var order: [UInt32] = []
    var streams: [UInt32: StreamState] = [:]
    init(name: String) { self.name = name }

    func snapshot() -> [PeerInfo] { order.compactMap { peers[$0]?.info } }

    func subscriberIDs(of publisher: PeerState) -> [UInt32] {
        var ids = Set<UInt32>()
        for s in publisher.streams { for sub in streams[s.ssrc]?.subscribers ?? [] { ids.insert(sub.peer.id) } }
        return ids.sorted()
    }
}

final class PeerState {
    let id: UInt32
    let name: String
    let role: String
    let address: PeerAddress
    unowned let room: RoomState
    var lastHeard: UInt64
    var streams: [StreamInfo] = []
    /// A viewer that speaks no room protocol (a browser over WHEP): it never times out, and it
    /// follows a presenter by name (`follows`) or the first one sharing a screen.
    var external = false
    var follows: String?
    /// Whether its token lets it publish (always on an open relay; never for browsers).
    var canPublish = true
    /// What this peer asked to receive: publisher id → kinds (kept across the publisher's
    /// stream restarts).
    var subscriptions: [UInt32: Set<StreamKind>] = [:]
    /// A presenter whose RTP carries the transport-wide sequence number: its arrivals, for the
    /// transport feedback the relay sends it (made with its first such packet).
    var transportFeedback: TransportFeedbackRecorder?

    init(id: UInt32, name: String, role: String, address: PeerAddress, room: RoomState, now: UInt64) {
        self.id = id
        self.name = name
        self.role = role
        self.address = address
        self.room = room
        lastHeard = now
    }

    var info: PeerInfo { PeerInfo(id: id, name: name, role: role, streams: streams, client: external ? "browser" : nil) }
}

struct Subscriber {
    unowned let peer: PeerState
    let address: PeerAddress
    var fractionLost = 0.0
    var rttNanos: UInt64?
    /// Its link's estimate and the layers it gets, once it sends transport feedback.
    var downlink: ViewerDownlink?
    init(peer: PeerState) {
        self.peer = peer
        address = peer.address
    }
}

final class StreamState {
    let info: StreamInfo
    unowned let owner: PeerState
    /// Change with `addSubscriber` and `removeSubscriber(at:)`, which keep `addresses` in step.
    var subscribers: [Subscriber] = []
    /// `subscribers`' addresses in the same order: the fan-out list, handed to the transport
    /// as it is (no array built per packet).
    private(set) var addresses: [PeerAddress] = []
    var history: PacketHistory
    var receive: ReceiveStatistics
    var lastKeyframeRequest: UInt64?
    var keyframePending = false
    /// Subscribers with a ``ViewerDownlink`` (0: one fan-out for all, nothing parsed per viewer).
    var downlinks = 0
    /// When each packet was forwarded (made with the first downlink), the layers' rates, and
    /// the addresses one packet goes to unchanged (reused).
    lazy var forwardLog = ForwardLog()
    var layerRates = LayerRates()
    var shared: [PeerAddress] = []
    /// The screen's FEC decoder, made when the publisher publishes an FEC stream.
    var fec: ULPFECDecoder?
    /// An FEC stream's screen, set when both are published (nil: its FEC is refused).
    weak var protects: StreamState?
    /// A video stream's holes on the publisher's uplink, asked for again from the publisher
    /// (viewers' NACKs for them find nothing in the history until the resend comes); and the
    /// list each poll fills (reused).
    var uplinkNacks: NackGenerator?
    var uplinkNackList: [UInt16] = []
    /// The last sender reports forwarded: NTP middle 32 bits → wall clock when forwarded.
    private var forwarded: [(middle: UInt32, wall: UInt64)] = Array(repeating: (0, 0), count: 8)
    private var forwardedNext = 0

    init(info: StreamInfo, owner: PeerState, history capacity: Int) {
        self.info = info
        self.owner = owner
        history = PacketHistory(capacity: capacity, maxPacketSize: 1500, maxAge: 2_000_000_000)
        if info.kind == .screen || info.kind == .main {
            // Holes only, found from later packets: no tail probes. A presenter's pacer and send
            // budget may hold the rest of a frame for a while; asking for its next packet then
            // would have it sent twice, on the uplink and to every viewer.
            var c = NackGenerator.Configuration()
            c.tailDelay = nil
            uplinkNacks = NackGenerator(configuration: c)
            uplinkNackList.reserveCapacity(256)
        }
        var config = ReceiveStatistics.Configuration()
        config.clockRate = info.clock
        receive = ReceiveStatistics(ssrc: info.ssrc, configuration: config)
    }

    func keyframeRequestDue(now: UInt64) -> Bool {
        guard let last = lastKeyframeRequest else { return true }
        return now &- last >= RoomProtocol.keyframeRequestIntervalNanos
    }

    func subscriberIndex(_ peer: PeerState) -> Int? { subscribers.firstIndex { $0.peer === peer } }

    func addSubscriber(_ peer: PeerState) {
        subscribers.append(Subscriber(peer: peer))
        addresses.append(peer.address)
    }

    func removeSubscriber(at i: Int) {
        if subscribers[i].downlink != nil { downlinks -= 1 }
        subscribers.remove(at: i)
        addresses.remove(at: i)
    }

    func noteForwardedReport(middle: UInt32, wallNanos: UInt64) {
        forwarded[forwardedNext] = (middle, wallNanos)
        forwardedNext = (forwardedNext + 1) % forwarded.count
    }

    func forwardTime(middle: UInt32) -> UInt64? { forwarded.first { $0.middle == middle && $0.wall != 0 }?.wall }
}
