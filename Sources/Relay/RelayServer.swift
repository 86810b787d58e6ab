import FoundationEssentials
import Logging
import MediaCore
import Basics
import Room
import Synchronization
import WebRTC
#if canImport(Glibc)
import Glibc
import Events
import Transport
import NetworkAddress
import RoomEvents
#endif


/// Sends the relay's datagrams from its socket. Every peer has its own keys, so a fan-out (one
/// packet to every subscriber of its stream) is protected once per subscriber into a slot of
/// its own and sent with one `sendmmsg` per 64; control messages go through the peer's DTLS;
/// browsers' packets are rewritten and protected by their gateway. Nothing is sent in clear.
private final class ListenerTransport: RelayTransport {
    let socket: UDPListener
    let batch: SendBatch
    private var singleErrors = 0
    /// Browsers (WHEP): what the room sends them is rewritten and protected on the way out.
    var browsers: BrowserGateway?
    /// Peers' encrypted hops: what the room sends them is protected on the way out.
    var hops: PeerHops?
    /// Janus mountpoints: what the room sends them is protected with each one's key.
    var janus: JanusCascade?
    weak var core: RelayCore?
    init(_ socket: UDPListener, maxBatch: Int) {
        self.socket = socket
        batch = SendBatch(fd: socket.fd, count: min(maxBatch, 64), slotSize: 1600)
    }
    /// Datagrams the kernel refused (each one a packet some peer lost).
    var errors: Int { singleErrors + batch.errors }
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) {
        if let hops, hops.isSecured(address) {
            hops.egress(bytes, to: address) { sendPlain($0, to: $1) }
            return
        }
        if let browsers, let core, browsers.isBrowser(address) {
            browsers.egress(bytes, to: address, core: core) { sendPlain($0, to: $1) }
            return
        }
        if let janus, janus.isJanus(address) {
            janus.egress(bytes, to: address) { sendPlain($0, to: $1) }
            return
        }
        // An address with neither a hop nor a browser session gets nothing: nothing leaves in clear.
    }
    func sendPlain(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) {
        if !socket.send(bytes, to: address.sockaddr) { singleErrors += 1 }
    }
    func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: ArraySlice<PeerAddress>) {
        let isControl = bytes.first == RoomProtocol.magic
        for address in addresses {
            if let hops, hops.isSecured(address) {
                if isControl {
                    hops.egress(bytes, to: address) { sendPlain($0, to: $1) }
                } else {
                    batch.add(to: address) { hops.protect(bytes, for: address, into: $0) }
                }
            } else if let browsers, let core, browsers.isBrowser(address) {
                // Rewritten and protected in the gateway's buffer, then copied into the batch
                // (a memcpy of a packet costs far less than the system call it saves).
                browsers.egress(bytes, to: address, core: core) { datagram, to in
                    batch.add(to: to) { slot in
                        guard datagram.count <= slot.count else { return nil }
                        slot.copyMemory(from: datagram)
                        return datagram.count
                    }
                }
            } else if let janus, janus.isJanus(address) {
                janus.egress(bytes, to: address) { sendPlain($0, to: $1) }
            }
        }
        batch.flush()
    }
}

/// The room relay on a UDP socket: `screenshare serve`, and the one `start --room` embeds.
///
/// One thread (`run()`): a poll loop that drains the socket into `RelayCore` (`recvmmsg`, 32
/// datagrams a call) and runs its timers every 50 ms. Forwarding allocates nothing per packet:
/// the datagram is read into a buffer allocated once, protected for each subscriber of its
/// stream (each peer's hop and each browser has its own SRTP keys; a browser's copy is also
/// rewritten) into a batch sent with one `sendmmsg` per 64. The socket asks for 8 MiB buffers each way, so a keyframe burst
/// (≈ 80 kB, times the audience on the way out) is not dropped by the kernel.
///
/// (`@unchecked`: the core, the hops, the browsers' gateway and the socket are the run thread's
/// alone; what other threads touch is each guarded — `running` an atomic, `summary` a Mutex,
/// `ranOut` the `finished` lock, the browsers' inbox, the directory and the invitations their own.)
public final class RelayServer: @unchecked Sendable {
    // `core` and `transport` are touched by the run() thread only (after init).
    public let port: UInt16
    public let host: String?
    private let socket: UDPListener
    private let transport: ListenerTransport
    private var core: RelayCore!
    /// Browsers over WHEP (nil: this relay serves no HTTP).
    private let browsers: BrowserGateway?
    private let http: WHEPServer?
    private let events: EventSink?
    private let logger: Logger
    private let clock: MediaClock
    private let running = Atomic<Bool>(true)
    /// Signalled when the thread `start()` made has finished its run (`ranOut`, guarded by it).
    private let finished = ConditionLock()
    private var ranOut = false
    private let summary = Mutex<[String: JSONValue]>([:])
    /// The rooms, for the HTTP side (published when they change).
    let directory = RoomDirectory()
    /// The short codes of invitation links: issued by whoever hosts a room (`start --room`),
    /// exchanged by browsers and `watch` at `POST /invite/ROOM`.
    public let invites = InviteBook()
    /// HTTPS for the browsers' side (`--tls-cert`), nil for plain HTTP.
    public let tls: TLSFiles?
    /// The DTLS certificate's fingerprint (`sha256:…`): peers pin it (`--fingerprint`).
    public let fingerprint: String
    /// Peers' encrypted hops.
    private let hops: PeerHops
    /// The socket buffers the kernel granted (bytes).
    let buffers: (receive: Int, send: Int)
    /// The Janus servers fed each screen shared here (`--janus`).
    private let janus: JanusCascade?
    /// The mountpoints browsers may be sent to (`POST /janus/ROOM`).
    let janusBoard: JanusBoard?
    /// Where the Janus events go (`events`, or a hosted room's presenter's).
    private let janusEvents: EventSink?
    /// Screens started and stopped since Janus was last told (the run thread's).
    private var janusChanges: [RelayEvent] = []

    /// - Parameters:
    ///   - events: where room events go (nil: only logged at debug level, as when embedded).
    /// - Throws: `NetworkError` when the address cannot be bound.
    ///   - fanOutBatch: messages per `sendmmsg` call (tests use small ones to cross batches).
    ///   - browsers: also serve browsers: WHEP and the page over HTTP on TCP at the same port.
    ///   - authorizer: who may enter which room, peers and browsers alike (nil: anyone).
    ///   - certificate: the relay's DTLS certificate (nil: a new one for this run).
    public convenience init(host: String?, port: UInt16, events: EventSink?, logger: Logger, clock: MediaClock = SystemClock(),
                            limits: RelayLimits = RelayLimits(), browsers: Bool = false, browserLimits: BrowserLimits = BrowserLimits(),
                            authorizer: (any RoomAuthorizer)? = nil, certificate: DTLSCertificate? = nil, tls: TLSFiles? = nil,
                            janus: JanusCascade? = nil, janusEvents: EventSink? = nil) throws {
        try self.init(host: host, port: port, events: events, logger: logger, clock: clock, limits: limits, fanOutBatch: 1024,
                      browsers: browsers, browserLimits: browserLimits, authorizer: authorizer, certificate: certificate, tls: tls,
                      janus: janus, janusEvents: janusEvents)
    }

    init(host: String?, port: UInt16, events: EventSink?, logger: Logger, clock: MediaClock = SystemClock(),
         limits: RelayLimits = RelayLimits(), fanOutBatch: Int, browsers enableBrowsers: Bool = false,
         browserLimits: BrowserLimits = BrowserLimits(), authorizer: (any RoomAuthorizer)? = nil, certificate given: DTLSCertificate? = nil,
         tls: TLSFiles? = nil, janus: JanusCascade? = nil, janusEvents: EventSink? = nil) throws {
        self.tls = tls
        self.janus = janus
        self.janusEvents = janusEvents ?? events
        janusBoard = janus.map { JanusBoard(servers: $0.servers.count) }
        socket = try UDPListener(host: host, port: port)
        buffers = socket.setBufferSizes(receive: 8 << 20, send: 8 << 20)
        socket.stampArrivals()
        self.port = socket.port
        self.host = host
        transport = ListenerTransport(socket, maxBatch: fanOutBatch)
        self.events = events
        self.logger = logger
        self.clock = clock
        let certificate = try given ?? DTLSCertificate()
        fingerprint = certificate.fingerprintText
        // One DTLS server context for every peer and browser.
        let context = try DTLSContext(role: .server, certificate: certificate)
        hops = PeerHops(context: context, logger: logger)
        transport.hops = hops
        if enableBrowsers {
            let gateway = BrowserGateway(limits: browserLimits, logger: logger)
            var factory = try WHEPSessionFactory(certificate: certificate, context: context, inbox: gateway.inbox, directory: directory, limits: browserLimits,
                                             udpPort: socket.port, clock: clock)
            factory.authorizer = authorizer
            factory.invites = invites
            factory.janus = janusBoard
            http = try WHEPServer(host: host, port: socket.port, factory: factory, tls: tls, logger: logger)
            browsers = gateway
            transport.browsers = gateway
        } else {
            browsers = nil
            http = nil
        }
        core = RelayCore(limits: limits, authorizer: authorizer)
        transport.core = core
        transport.janus = janus
    }

    public func stop() { running.store(false, ordering: .relaxed) }

    /// Stops the relay `start()` runs and waits (up to `seconds`) for its last turn: the
    /// browsers told the end is on purpose (DTLS close_notify) before the process exits.
    public func stopAndWait(seconds: Double = 1) {
        stop()
        let deadline = SystemClock().nowNanos() + UInt64(seconds * 1e9)
        finished.withLock {
            while !ranOut { if !finished.wait(untilMonotonicNanos: deadline) { break } }
        }
    }

    /// Browsers answered that have not connected yet (any thread).
    var connectingBrowsers: Int { browsers?.inbox.connectingCount ?? 0 }

    /// The totals of the last finished `run` (empty while it runs).
    public var lastSummary: [String: JSONValue] { summary.withLock { $0 } }

    /// Runs on a thread of its own until `stop()`.
    public func start() {
        startThread(named: "screenshare-relay") { [self] in
            _ = run(durationSeconds: nil)
            finished.withLock {
                ranOut = true
                finished.broadcast()
            }
        }
    }

    /// A datagram's arrival on the monotonic clock: `now` less how long before `wall` (the same
    /// instant on the wall clock) the kernel stamped it. nil without a stamp, or with one that
    /// does not fit (ahead of `wall`, or more than a second behind it: a clock set meanwhile,
    /// or a test's manual clock).
    static func arrival(stamp: UInt64?, now: UInt64, wall: UInt64) -> UInt64? {
        guard let stamp, stamp <= wall, wall - stamp < 1_000_000_000, wall - stamp <= now else { return nil }
        return now - (wall - stamp)
    }

    /// Runs until stopped (or for `durationSeconds`); returns the summary (also the `stopped` event).
    public func run(durationSeconds: Double?) -> [String: JSONValue] {
        let start = clock.nowNanos()
        events?.emit(RelayStarted(listen: "\(host ?? "0.0.0.0"):\(port)", protocolVersion: Int(RoomProtocol.version),
                                  receiveBuffer: buffers.receive, sendBuffer: buffers.send,
                                  access: core.authorizer == nil ? "open" : "tokens", fingerprint: fingerprint))
        let batch = ReceiveBatch(count: 32, bufferSize: 2048)
        var nextStats = start + 1_000_000_000
        var last = core.counters
        var published: UInt64? = nil
        var lastErrors = 0
        var lastFEC = 0
        var lastJanus = janus?.totals ?? []
        let deadline = durationSeconds.map { start + UInt64($0 * 1e9) }
        while running.load(ordering: .relaxed) {
            var pfd = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
            // Until a datagram comes or the core's timers are due (at most 50 ms: the stats).
            let due = core.nextDeadline, before = clock.nowNanos()
            _ = poll(&pfd, 1, due > before ? Int32(min(50, (due - before + 999_999) / 1_000_000)) : 0)
            let now = clock.nowNanos()
            if let deadline, now >= deadline { break }
            browsers?.now = now
            if pfd.revents & Int16(POLLIN) != 0 {
                let wall = clock.wallNanos()
                for _ in 0..<8 {  // at most 256 datagrams before the timers get a turn
                    let n = batch.receive(fd: socket.fd)
                    // The clocks as this batch was read, for its arrival stamps.
                    let readAt = clock.nowNanos(), readAtWall = clock.wallNanos()
                    for i in 0..<n {
                        let bytes = batch.datagram(i), source = batch.source(i)
                        let arrival = Self.arrival(stamp: batch.arrivalWallNanos(i), now: readAt, wall: readAtWall)
                        if let browsers, browsers.receive(bytes, from: source, now: now, core: core, send: { transport.sendPlain($0, to: $1) }) {
                            continue
                        }
                        if let janus, janus.receive(bytes, from: source, deliver: { core.receive($0, from: $1, now: now, wallNanos: wall) }) {
                            continue
                        }
                        hops.receive(bytes, from: source, now: now, wallNanos: wall, arrival: arrival, core: core) { transport.sendPlain($0, to: $1) }
                    }
                    flushCore()  // a batch's fan-outs leave together
                    if n < batch.count { break }
                }
            }
            if let janus { feedJanus(janus, now: now) }
            if now >= core.nextDeadline {
                core.poll(now: now, wallNanos: clock.wallNanos())
                browsers?.poll(now: now, core: core) { transport.sendPlain($0, to: $1) }
                hops.poll(now: now, core: core) { transport.sendPlain($0, to: $1) }
                flushCore()
            }
            if browsers != nil, published != core.changes {
                directory.publish(core.summaries())
                published = core.changes
            }
            if now >= nextStats {
                nextStats += 1_000_000_000
                let c = core.counters
                events?.emit(RelayStats(
                    rooms: core.roomCount, peers: core.peerCount, browsers: core.browserCount,
                    packetsIn: c.rtpIn - last.rtpIn, packetsOut: c.rtpForwarded - last.rtpForwarded,
                    kbpsOut: (c.bytesForwarded - last.bytesForwarded) * 8 / 1000,
                    retransmitted: c.retransmitted - last.retransmitted, keyframeRequests: c.keyframeRequests - last.keyframeRequests,
                    rejected: c.rejected + (browsers?.rejected ?? 0) + hops.rejected, unknownSource: c.unknownSource,
                    sendErrors: transport.errors - lastErrors, lostIn: core.rtpLostIn,
                    viewersOnBaseLayer: core.viewersOnBaseLayer, layerSwitches: c.layerSwitches - last.layerSwitches,
                    viewerLayers: core.viewersOnFewerLayers.mapValues(\.rawValue), fecOut: (browsers?.fecSent ?? 0) - lastFEC,
                    resendsNotSent: c.retransmitMissed - last.retransmitMissed,
                    janus: janusStats(since: &lastJanus)))
                last = c
                lastFEC = browsers?.fecSent ?? 0
                lastErrors = transport.errors
            }
        }
        http?.close()
        browsers?.closeAll(core: core) { transport.sendPlain($0, to: $1) }
        flushCore()
        if let janus {
            janus.stop()
            feedJanus(janus, now: clock.nowNanos())
        }
        let c = core.counters
        let stopped = RelayStopped(
            rtpIn: c.rtpIn, rtpForwarded: c.rtpForwarded, bytesForwarded: c.bytesForwarded,
            rtcpIn: c.rtcpIn, controlIn: c.controlIn, retransmitted: c.retransmitted,
            keyframeRequests: c.keyframeRequests, rejected: c.rejected + (browsers?.rejected ?? 0) + hops.rejected, unknownSource: c.unknownSource,
            timeouts: c.timeouts, sendErrors: transport.errors, lostIn: core.rtpLostIn,
            durationSeconds: Double(clock.nowNanos() - start) / 1e9, viewerFeedbacks: c.viewerFeedbacks, layerSwitches: c.layerSwitches,
            fecIn: c.fecIn, fecRecovered: c.fecRecovered, uplinkNacks: c.uplinkNacks, fecOut: browsers?.fecSent ?? 0,
            resendsTooSoon: c.resendsTooSoon, resendsOverBudget: c.resendsOverBudget, resendsGone: c.resendsGone,
            resendsUnmapped: c.resendsUnmapped, lostForGood: c.lostForGood)
        let s = stopped.fields
        summary.withLock { $0 = s }
        events?.emit(stopped)
        return s
    }

    /// Sends what the core queued and reports what happened in it (the run thread's).
    private func flushCore() {
        core.drain(into: transport)
        core.drainEvents { report($0) }
    }

    private func report(_ e: RelayEvent) {
        if janus != nil { janusChanges.append(e) }
        if case let .rejected(address, reason) = e {
            logger.debug("relay: dropped a datagram from \(address): \(reason)")
            return
        }
        guard let event = Self.event(for: e) else { return }
        if let events { events.emit(event) } else { logger.debug("relay: \(event.jsonLine())") }
    }

    /// Tells the Janus servers which screens are shared, and feeds the room's mountpoints:
    /// each made mountpoint joins its room as a viewer of its presenter (at the address of its
    /// video port); a lost or removed one leaves.
    private func feedJanus(_ janus: JanusCascade, now: UInt64) {
        let changes = janusChanges
        janusChanges.removeAll(keepingCapacity: true)
        for e in changes {
            switch e {
            case let .substreamStarted(room, peer, stream) where stream.kind == .screen:
                let info = core.peers(in: room).first { $0.id == peer }
                let audio = info?.streams.first { $0.kind == .audio }?.pt ?? 111
                janus.publish(JanusCascade.Wanted(key: .init(room: room, publisher: peer), presenter: info?.name ?? "peer \(peer)",
                                                  videoPayloadType: stream.pt, audioPayloadType: audio, privateRoom: core.authorizer != nil))
            case let .substreamStopped(room, peer, stream) where stream.kind == .screen:
                let key = JanusCascade.Key(room: room, publisher: peer)
                for address in janus.addresses(of: key) { core.removeExternalViewer(address: address, reason: "the screen is no longer shared") }
                janus.dropRoutes(of: key)
                janus.unpublish(key)
            default:
                break
            }
        }
        var changed = false
        janus.drain { outcome in
            switch outcome {
            case let .created(live, recreated):
                // Not routed when its screen stopped while it was made: it goes again.
                if janus.isJanus(live.video) {
                    do {
                        _ = try core.addExternalViewer(room: live.wanted.key.room, name: "Janus \(janus.servers[live.server].host)",
                                                       address: live.video, presenter: live.wanted.presenter, client: "janus",
                                                       capsWithREMB: janus.capsWithREMB, now: now)
                        changed = true
                    } catch {
                        emit(WarningEvent(.janus(server: "\(janus.servers[live.server])"), "cannot feed Janus's mountpoint \(live.mountpoint): \(error)"))
                    }
                }
                emit(JanusMountpointEvent(server: "\(janus.servers[live.server])", room: live.wanted.key.room, presenter: live.wanted.presenter,
                                          id: live.mountpoint, state: recreated ? "recreated" : "created"))
            case let .lost(live, _), let .removed(live):
                core.removeExternalViewer(address: live.video, reason: "Janus's mountpoint is gone")
                changed = true
                let state = if case .lost = outcome { "lost" } else { "removed" }
                emit(JanusMountpointEvent(server: "\(janus.servers[live.server])", room: live.wanted.key.room, presenter: live.wanted.presenter,
                                          id: live.mountpoint, state: state))
            case let .warning(server, text):
                emit(WarningEvent(.janus(server: "\(janus.servers[server])"), text))
            }
        }
        janus.sendReports(now: now) { transport.sendPlain($0, to: $1) }
        if changed {
            janusBoard?.publish(janus.placements)
            flushCore()
        }
    }

    /// Each Janus server's stats over the last second.
    private func janusStats(since last: inout [JanusCascade.Totals]) -> [RelayStats.JanusStats] {
        guard let janus else { return [] }
        let now = janus.totals
        defer { last = now }
        let sent = janusBoard?.sent ?? []
        return now.indices.map { i in
            RelayStats.JanusStats(server: "\(janus.servers[i])", mountpoints: now[i].mountpoints, packets: now[i].packets - last[i].packets,
                                  kbps: (now[i].bytes - last[i].bytes) * 8 / 1000, keyframeRequests: now[i].keyframeRequests - last[i].keyframeRequests,
                                  browsersSent: i < sent.count ? sent[i] : 0)
        }
    }

    private func emit(_ event: any BroadcastEvent) {
        if let janusEvents { janusEvents.emit(event) } else { logger.info("relay: \(event.humanText)") }
    }

    /// The event a relay event is reported as (nil: only logged).
    static func event(for e: RelayEvent) -> (any BroadcastEvent)? {
        switch e {
        case let .peerJoined(room, peer, address):
            return PeerJoined(room: room, peer: peer.id, peerName: peer.name, role: peer.role, address: address, client: peer.client)
        case let .peerLeft(room, peer, reason):
            return PeerLeft(room: room, peer: peer.id, peerName: peer.name, reason: reason)
        case let .substreamStarted(room, peer, stream):
            // A screen's FEC stream is part of the screen, not a substream to report.
            return stream.kind == .fec ? nil : SubstreamStarted(room: room, peer: peer, stream: stream)
        case let .substreamStopped(room, peer, stream):
            return stream.kind == .fec ? nil : SubstreamStopped(room: room, peer: peer, stream: stream)
        case let .subscribed(room, viewer, publisher, kinds):
            return RelaySubscribed(room: room, viewer: viewer, publisher: publisher, kinds: kinds)
        case let .unsubscribed(room, viewer, publisher):
            return RelayUnsubscribed(room: room, viewer: viewer, publisher: publisher)
        case .rejected:
            return nil
        }
    }
}
