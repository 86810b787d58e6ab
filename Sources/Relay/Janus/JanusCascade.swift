import Basics
import Events
import MediaCore
import NetworkAddress
import SRTP
import Transport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The relay's Janus servers (`--janus`): for every screen shared in a room, a streaming
/// mountpoint on each server, fed the presenter's screen and sound as SRTP.
///
/// Each server has a thread of its own that talks to it over its HTTP API (``JanusClient``) and
/// makes what it has match what the relay wants: a mountpoint for each publication (created
/// with a fresh secret, SRTP key and — in a room admitting by token — pin), none for a
/// publication that ended. It keeps the session alive every second; when Janus does not answer
/// or has forgotten the session (a restart), the mountpoints are lost and made again as soon as
/// it answers (retrying after 0.25 s, doubling up to 2 s). A refusal (a wrong admin key, an id
/// taken) is a warning, retried with the same backoff. Nothing here blocks the relay's thread:
/// it hands over what it wants (``publish(_:)``, ``unpublish(_:)``) and collects what happened
/// (``drain(_:)``).
///
/// (`@unchecked`: the servers' shared parts are behind their locks; `routes` is the relay
/// thread's alone.)
public final class JanusCascade: @unchecked Sendable {
    /// A publication: a presenter's screen in a room.
    public struct Key: Hashable, Sendable {
        public var room: String
        public var publisher: UInt32
        public init(room: String, publisher: UInt32) {
            self.room = room
            self.publisher = publisher
        }
    }

    /// What the relay wants on every server for a publication.
    public struct Wanted: Equatable, Sendable {
        public var key: Key
        public var presenter: String
        public var videoPayloadType: UInt8
        public var audioPayloadType: UInt8
        /// Whether the room admits by token (its mountpoints get a pin).
        public var privateRoom: Bool
        public init(key: Key, presenter: String, videoPayloadType: UInt8, audioPayloadType: UInt8 = 111, privateRoom: Bool) {
            self.key = key
            self.presenter = presenter
            self.videoPayloadType = videoPayloadType
            self.audioPayloadType = audioPayloadType
            self.privateRoom = privateRoom
        }
    }

    /// A mountpoint as one server holds it for a publication.
    public struct Live: Sendable, Equatable {
        public var server: Int
        public var wanted: Wanted
        public var mountpoint: UInt64
        /// Where its RTP goes.
        public var video: PeerAddress
        public var audio: PeerAddress?
        /// Where Janus takes the video's RTCP and sends its viewers' keyframe requests from.
        public var videoRTCP: PeerAddress?
        public var pin: String?
        var secret: String
        var srtpKey: [UInt8]
    }

    /// What happened on a server.
    public enum Outcome: Sendable, Equatable {
        case created(Live, recreated: Bool)
        /// The server stopped answering, or forgot its session: its mountpoints are gone.
        case lost(Live, why: String)
        case removed(Live)
        case warning(server: Int, String)
    }

    public let servers: [JanusServer]
    /// Whether each server's REMB (the lowest of its viewers') caps what the presenter sends
    /// (`--janus-remb`); by default Janus's viewers never slow the room.
    public let capsWithREMB: Bool
    private let workers: [Worker]

    /// The routes of the mountpoints being fed, by the address the room knows each as (the
    /// server's video port): the relay thread's.
    private var routes: [PeerAddress: Route] = [:]
    /// The same routes by the address Janus's RTCP comes from.
    private var byRTCP: [PeerAddress: Route] = [:]
    private var nextReports: UInt64 = 0
    /// The screens shared now, as the relay thread last said (``publish(_:)``).
    private var published: Set<Key> = []
    /// Routes made so far (each route's `order`).
    private var made = 0

    /// Starts a thread per server.
    /// - Parameters:
    ///   - adminKey: the streaming plugin's `admin_key` (nil: its `create` is open).
    ///   - capsWithREMB: `--janus-remb`.
    public init(servers: [JanusServer], adminKey: String?, capsWithREMB: Bool = false, timeoutSeconds: Int64 = 3) throws {
        self.servers = servers
        self.capsWithREMB = capsWithREMB
        workers = try servers.enumerated().map { i, s in try Worker(index: i, client: JanusClient(server: s, timeoutSeconds: timeoutSeconds), adminKey: adminKey) }
        for w in workers { startThread(named: "screenshare-janus") { w.run() } }
    }

    /// Stops the threads, removing the mountpoints they made (each server given a moment).
    public func stop() {
        for w in workers { w.stop() }
        for w in workers { w.waitStopped(seconds: 2) }
    }

    // MARK: The relay thread

    /// A screen is shared: a mountpoint on every server.
    public func publish(_ wanted: Wanted) {
        published.insert(wanted.key)
        for w in workers { w.want(wanted) }
    }

    /// A screen is no longer shared: its mountpoints go.
    public func unpublish(_ key: Key) {
        published.remove(key)
        for w in workers { w.unwant(key) }
    }

    /// The addresses (as the room knows them) of `key`'s mountpoints being fed.
    public func addresses(of key: Key) -> [PeerAddress] { routes.filter { $0.value.live.wanted.key == key }.map(\.key) }

    /// Hands over what happened since the last call; a created mountpoint is routed from here
    /// (``isJanus(_:)``), a lost or removed one no longer.
    /// A mountpoint created for a screen that stopped while it was being made is not routed
    /// (its server removes it on its next turn, and says `removed`).
    public func drain(_ body: (Outcome) -> Void) {
        for w in workers {
            for outcome in w.takeOutcomes() {
                switch outcome {
                case .created(let live, _):
                    if published.contains(live.wanted.key), let flow = try? SRTPFlow(masterKey: live.srtpKey) {
                        made += 1
                        let route = Route(live: live, flow: flow, order: made)
                        routes[live.video] = route
                        if let rtcp = live.videoRTCP { byRTCP[rtcp] = route }
                        nextReports = 0  // Janus learns where to send keyframe requests at once
                    }
                case .lost(let live, _), .removed(let live):
                    if routes[live.video]?.live.mountpoint == live.mountpoint { forget(live.video) }
                case .warning:
                    break
                }
                body(outcome)
            }
        }
    }

    /// Forgets the routes of `key` at once (the publication ended: nothing more goes there).
    public func dropRoutes(of key: Key) {
        for (address, route) in routes where route.live.wanted.key == key { forget(address) }
    }

    private func forget(_ address: PeerAddress) {
        guard let route = routes.removeValue(forKey: address) else { return }
        if let rtcp = route.live.videoRTCP { byRTCP[rtcp] = nil }
    }

    /// Sends each mountpoint an empty receiver report every 2 s: Janus sends its viewers'
    /// keyframe requests to where the video's RTCP comes from, and only once some came. Janus
    /// 1.1's streaming plugin keeps this channel in clear both ways (it neither checks SRTCP
    /// there nor protects its PLIs), so the report carries nothing but a random SSRC.
    public func sendReports(now: UInt64, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard now >= nextReports else { return }
        nextReports = now + 2_000_000_000
        for route in routes.values {
            guard let rtcp = route.live.videoRTCP else { continue }
            // RTCP RR (RFC 3550 §6.4.2) with no report blocks, from the route's own SSRC.
            let ssrc = route.reporterSSRC
            let rr: [UInt8] = [0x80, 201, 0, 1, UInt8(ssrc >> 24), UInt8(ssrc >> 16 & 0xFF), UInt8(ssrc >> 8 & 0xFF), UInt8(ssrc & 0xFF)]
            rr.withUnsafeBytes { send($0, rtcp) }
        }
    }

    /// RTCP from a mountpoint's Janus (its viewers' keyframe requests, in clear: see
    /// ``sendReports(now:send:)``) handed to the room as from the mountpoint's viewer, so it
    /// reaches the presenter through the room's keyframe throttle. Whether it was from Janus.
    public func receive(_ bytes: UnsafeRawBufferPointer, from source: PeerAddress, deliver: (UnsafeRawBufferPointer, PeerAddress) -> Void) -> Bool {
        guard let route = byRTCP[source] else { return false }
        guard bytes.count >= 8, bytes.count <= 1500, bytes[0] >> 6 == 2, (192...223).contains(bytes[1]) else {
            counted[route.live.server].refused += 1
            return true
        }
        counted[route.live.server].keyframeRequests += Self.keyframeRequests(in: bytes)
        deliver(bytes, route.live.video)
        return true
    }

    /// PLIs and FIRs in a compound RTCP packet (RFC 4585 §6.3.1, RFC 5104 §4.3.1).
    static func keyframeRequests(in packet: UnsafeRawBufferPointer) -> Int {
        var count = 0, at = 0
        while at + 4 <= packet.count {
            let length = (Int(packet[at + 2]) << 8 | Int(packet[at + 3]) + 1) * 4
            if packet[at + 1] == 206 && (packet[at] & 0x1F == 1 || packet[at] & 0x1F == 4) { count += 1 }
            at += length
        }
        return count
    }

    /// The mountpoints being fed, as browsers may be sent to them, oldest first.
    public var placements: [JanusBoard.Placement] {
        routes.values.sorted { $0.order < $1.order }.map { r in
            JanusBoard.Placement(server: r.live.server, url: "\(servers[r.live.server])", room: r.live.wanted.key.room,
                                 presenter: r.live.wanted.presenter, id: r.live.mountpoint, pin: r.live.pin)
        }
    }

    /// Whether `address` is a mountpoint being fed.
    public func isJanus(_ address: PeerAddress) -> Bool { routes[address] != nil }

    /// Sends what the room sends the mountpoint at `address`: its video and audio packets,
    /// protected with the mountpoint's key, to the ports Janus gave; RTCP and anything else
    /// (FEC) stays here.
    public func egress(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard let route = routes[address], bytes.count >= 12, bytes[0] >> 6 == 2 else { return }
        let pt = bytes[1] & 0x7F
        let destination: PeerAddress
        if (72...79).contains(pt) { return }  // RTCP (RFC 5761 §4)
        if pt == route.live.wanted.videoPayloadType {
            destination = route.live.video
        } else if pt == route.live.wanted.audioPayloadType, let audio = route.live.audio {
            destination = audio
        } else {
            return
        }
        let sent = route.flow.protect(bytes) { protected -> Bool in
            send(protected, destination)
            return true
        }
        if sent == true {
            counted[route.live.server].packets += 1
            counted[route.live.server].bytes += bytes.count
        }
    }

    /// What went to each server and came back since the start, for the relay's stats.
    public struct Totals: Equatable, Sendable {
        public var packets = 0
        public var bytes = 0
        public var keyframeRequests = 0
        /// RTCP from a mountpoint's address that was not RTCP.
        public var refused = 0
        /// Mountpoints being fed now.
        public var mountpoints = 0
    }

    /// Per server (the relay thread's).
    private lazy var counted = [Totals](repeating: Totals(), count: servers.count)

    /// The totals so far, per server.
    public var totals: [Totals] {
        var t = counted
        for route in routes.values { t[route.live.server].mountpoints += 1 }
        return t
    }

    /// A mountpoint being fed, the relay thread's.
    private final class Route {
        let live: Live
        let flow: SRTPFlow
        let reporterSSRC = UInt32.random(in: 1...UInt32.max)
        let order: Int
        init(live: Live, flow: SRTPFlow, order: Int) {
            self.live = live
            self.flow = flow
            self.order = order
        }
    }
}

extension JanusCascade {
    /// One server's thread: makes its mountpoints match what is wanted.
    final class Worker: @unchecked Sendable {
        // `shared` under `lock`; the rest is the worker thread's.
        private struct Shared {
            var wanted: [Key: Wanted] = [:]
            var outcomes: [Outcome] = []
            var running = true
            var stopped = false
        }
        private let lock = ConditionLock()
        private var shared = Shared()

        let index: Int
        private let client: JanusClient
        private let adminKey: String?
        private var live: [Key: Live] = [:]
        /// Publications whose mountpoint was lost (their next is a re-creation).
        private var lost: Set<Key> = []
        private var backoffNanos: UInt64 = 0
        private var retryAt: UInt64 = 0
        private var keepaliveAt: UInt64 = 0
        /// The last warning, not repeated while it stays the same.
        private var lastWarning = ""
        private var hostIP: UInt32?

        static let keepaliveNanos: UInt64 = 1_000_000_000
        static let firstBackoffNanos: UInt64 = 250_000_000
        static let maxBackoffNanos: UInt64 = 2_000_000_000

        init(index: Int, client: JanusClient, adminKey: String?) {
            self.index = index
            self.client = client
            self.adminKey = adminKey
        }

        func want(_ w: Wanted) { lock.withLock { shared.wanted[w.key] = w; lock.signal() } }
        func unwant(_ key: Key) { lock.withLock { shared.wanted[key] = nil; lock.signal() } }
        func takeOutcomes() -> [Outcome] {
            lock.withLock {
                defer { shared.outcomes.removeAll(keepingCapacity: true) }
                return shared.outcomes
            }
        }
        func stop() { lock.withLock { shared.running = false; lock.signal() } }
        func waitStopped(seconds: Double) {
            let deadline = SystemClock().nowNanos() + UInt64(seconds * 1e9)
            lock.withLock { while !shared.stopped { if !lock.wait(untilMonotonicNanos: deadline) { break } } }
        }

        private func report(_ o: Outcome) { lock.withLock { shared.outcomes.append(o) } }

        private func warn(_ text: String) {
            guard text != lastWarning else { return }
            lastWarning = text
            report(.warning(server: index, text))
        }

        func run() {
            let clock = SystemClock()
            while true {
                let (wanted, running) = lock.withLock { (shared.wanted, shared.running) }
                if !running { break }
                let now = clock.nowNanos()
                if now >= retryAt { turn(wanted: wanted, now: now) }
                let wake = min(retryAt > now ? retryAt : now + Self.keepaliveNanos, keepaliveAt > now ? keepaliveAt : now + Self.keepaliveNanos)
                lock.withLock {
                    if shared.running && shared.wanted == wanted { _ = lock.wait(untilMonotonicNanos: wake) }
                }
            }
            // On the way out: the mountpoints go with the relay.
            if client.isConnected {
                for l in live.values {
                    try? client.destroy(id: l.mountpoint, secret: l.secret)
                    report(.removed(l))
                }
                client.close()
            }
            lock.withLock { shared.stopped = true; lock.broadcast() }
        }

        /// One pass: connect if need be, remove what is not wanted, create what is missing,
        /// keep the session alive.
        private func turn(wanted: [Key: Wanted], now: UInt64) {
            do {
                if !client.isConnected {
                    try client.connect()
                    if hostIP == nil { hostIP = try? UDPListener.resolve(client.server.host).sin_addr.s_addr.bigEndian }
                    keepaliveAt = now + Self.keepaliveNanos
                } else if now >= keepaliveAt {
                    try client.keepalive()
                    keepaliveAt = now + Self.keepaliveNanos
                }
                for (key, l) in live where wanted[key] == nil {
                    do {
                        try client.destroy(id: l.mountpoint, secret: l.secret)
                    } catch .refused(let f) where f.isNoSuchMountpoint {
                        // Already gone.
                    }
                    live[key] = nil
                    report(.removed(l))
                }
                lost = lost.filter { wanted[$0] != nil }
                for (key, w) in wanted where live[key] == nil {
                    try create(w)
                }
                backoffNanos = 0
                lastWarning = ""
            } catch {
                fail(error, now: now)
            }
        }

        private func create(_ w: Wanted) throws(JanusError) {
            guard let ip = hostIP else {
                throw .unreachable("cannot resolve \(client.server.host) to an IPv4 address")
            }
            let secret = Self.randomText(24)
            let pin = w.privateRoom ? Self.randomText(12) : nil
            var key = [UInt8](repeating: 0, count: 30)
            for i in key.indices { key[i] = UInt8.random(in: 0...255) }
            let request = JanusAPI.MountpointRequest(description: w.key.room, secret: secret, pin: pin, videoPayloadType: w.videoPayloadType,
                                                     audioPayloadType: w.audioPayloadType, srtpKey: key, adminKey: adminKey)
            let m = try client.create(request)
            let l = Live(server: index, wanted: w, mountpoint: m.id, video: PeerAddress(ip: ip, port: m.videoPort),
                         audio: m.audioPort.map { PeerAddress(ip: ip, port: $0) }, videoRTCP: m.videoRTCPPort.map { PeerAddress(ip: ip, port: $0) },
                         pin: pin, secret: secret, srtpKey: key)
            live[w.key] = l
            report(.created(l, recreated: lost.remove(w.key) != nil))
        }

        private func fail(_ error: JanusError, now: UInt64) {
            let gone: Bool
            switch error {
            case .unreachable: gone = true
            case .refused(let f): gone = f.isSessionGone || f.isHandleGone
            }
            if gone {
                // Janus restarted, or is away: whatever it held is lost.
                for (key, l) in live {
                    lost.insert(key)
                    report(.lost(l, why: "\(error)"))
                }
                live.removeAll()
                client.forget()
            }
            warn("Janus at \(client.server): \(error)")
            backoffNanos = backoffNanos == 0 ? Self.firstBackoffNanos : min(backoffNanos * 2, Self.maxBackoffNanos)
            retryAt = now + backoffNanos
        }

        static func randomText(_ count: Int) -> String {
            let alphabet = Array("abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count)] })
        }
    }
}
