import Congestion
import SRTP
import Logging
import Room
import RTP
import Synchronization
import Transport
import WebRTC
import NetworkAddress

/// One browser watching through WHEP, from its offer to its end: ICE-lite, DTLS, SRTP, and the
/// payload types and SSRCs of its answer. Made on the HTTP thread, then owned by the relay's.
final class BrowserSession {
    /// The last part of its WHEP resource URL.
    let id: String
    let room: String
    /// `?from=NAME`; nil: the first presenter sharing a screen.
    let presenter: String?
    /// The name its token gives it (nil: `browser-ID`).
    var name: String?
    var ice: ICELiteAgent<PeerAddress>
    let dtls: DTLSTransport
    var srtpOut: SRTPSession?
    var srtpIn: SRTPSession?
    /// The answer's payload types (the browser's numbers) and SSRCs.
    let videoPT: UInt8
    let audioPT: UInt8?
    let videoSSRC: UInt32
    let audioSSRC: UInt32
    /// The transport-wide sequence number's extension ID the browser agreed to (nil: none): the
    /// presenter's numbers are forwarded under it, and the browser's transport feedback on them
    /// is its link's estimate (the layers it gets).
    var transportSequenceID: UInt8?
    /// The presenter's SSRC → what it is here (learned from the room when a packet comes).
    var presenterKinds: [UInt32: StreamKind] = [:]
    /// The answer's two streams, running on across presenters.
    var video = StreamSplicer(clockRate: 90_000)
    var audio = StreamSplicer(clockRate: 48_000)
    /// FEC in RED, when the answer has them (the browser offered both and the relay may send
    /// FEC), and how much of it its link wants now.
    var red: REDProtection?
    var fec = FECPolicy(mode: .off)
    var nextFECUpdate: UInt64 = 0
    /// Where media goes (the ICE-nominated address), once the room has it as a viewer.
    var joinedAt: PeerAddress?
    let createdNanos: UInt64
    /// Holds one of the places of `BrowserLimits.maxConnecting` until it connects or ends.
    var connecting = true

    init(id: String, room: String, presenter: String?, ice: ICELiteAgent<PeerAddress>, dtls: DTLSTransport, videoPT: UInt8,
         audioPT: UInt8?, videoSSRC: UInt32, audioSSRC: UInt32, now: UInt64) {
        self.id = id
        self.room = room
        self.presenter = presenter
        self.ice = ice
        self.dtls = dtls
        self.videoPT = videoPT
        self.audioPT = audioPT
        self.videoSSRC = videoSSRC
        self.audioSSRC = audioSSRC
        createdNanos = now
    }
}

/// Hands sessions from the HTTP thread to the relay's: a new one (`add`), one to end (`end`).
final class BrowserInbox: Sendable {
    /// Sessions on their way: each crosses once, from the thread that made it to the relay's,
    /// which owns it from then on (hence unchecked); the queue itself is guarded by the Mutex.
    struct Handoff: @unchecked Sendable {
        var added: [BrowserSession] = []
        var ended: [String] = []
    }
    private let queue = Mutex(Handoff())
    private let connecting = Atomic<Int>(0)

    /// Takes a place for a session that is connecting; false when `limit` are already.
    func reserve(limit: Int) -> Bool {
        var n = connecting.load(ordering: .relaxed)
        while n < limit {
            let (exchanged, original) = connecting.compareExchange(expected: n, desired: n + 1, ordering: .relaxed)
            if exchanged { return true }
            n = original
        }
        return false
    }
    func release() { connecting.subtract(1, ordering: .relaxed) }
    /// Sessions answered that have not connected yet.
    var connectingCount: Int { connecting.load(ordering: .relaxed) }

    func add(_ session: BrowserSession) {
        let box = Handoff(added: [session])
        queue.withLock { $0.added += box.added }
    }
    func end(_ id: String) { queue.withLock { $0.ended.append(id) } }
    func take() -> Handoff {
        queue.withLock { q in
            let out = q
            q = Handoff()
            return out
        }
    }
}

/// The relay's side of its browsers, on the relay's thread: STUN (0–3) and DTLS (20–63) that
/// arrive on the room's socket go to the session they belong to; SRTCP from a browser is opened
/// and handed to the room as its RTCP; what the room sends a browser is rewritten to the
/// answer's payload types and SSRCs and protected (`egress`).
final class BrowserGateway {
    let inbox = BrowserInbox()
    let limits: BrowserLimits
    private var byUfrag: [String: BrowserSession] = [:]
    private var byID: [String: BrowserSession] = [:]
    /// Addresses that passed an ICE check → their session (DTLS and SRTCP come from these).
    private var byAddress: [PeerAddress: BrowserSession] = [:]
    private let logger: Logger
    private var scratch = [UInt8](repeating: 0, count: 2048)
    private(set) var rejected = 0
    /// The relay loop's time now (set each turn): what the room sends is spliced on it.
    var now: UInt64 = 0

    init(limits: BrowserLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    var isEmpty: Bool { byID.isEmpty }
    var count: Int { byID.count }

    /// Whether `address` is a browser the room sends to (its datagrams need `egress`).
    func isBrowser(_ address: PeerAddress) -> Bool { byAddress[address]?.joinedAt == address }

    /// Takes new and ended sessions from the HTTP side.
    func adopt(core: RelayCore) {
        let handoff = inbox.take()
        let added = handoff.added, ended = handoff.ended
        for s in added {
            byUfrag[s.ice.localUfrag] = s
            byID[s.id] = s
        }
        for id in ended { if let s = byID[id] { close(s, core: core, reason: "left") } }
    }

    /// A datagram from `address` that is STUN, DTLS, or SRTCP from a browser: handled here
    /// (true), or not ours (false: the room's).
    func receive(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, core: RelayCore,
                 send: (UnsafeRawBufferPointer, PeerAddress) -> Void) -> Bool {
        guard let first = bytes.first else { return false }
        switch first {
        case 0...3:
            handleSTUN(bytes, from: address, now: now, core: core, send: send)
            return true
        case 20...63:
            guard let s = byAddress[address] else { return false }  // a room peer's hop
            _ = s.dtls.receive(bytes)
            if let out = s.dtls.takeOutgoing() { out.withUnsafeBytes { send($0, address) } }
            if s.srtpOut == nil, s.dtls.state == .connected { connected(s, at: address, now: now, core: core) }
            if case .failed(let why) = s.dtls.state {
                logger.info("browser \(s.id): \(why)")
                close(s, core: core, reason: "dtls_failed")
            }
            return true
        case 128...191:
            guard let s = byAddress[address] else { return false }  // a room peer's RTP or RTCP
            guard let srtp = s.srtpIn, DatagramKind.of(bytes) == .rtcp, bytes.count <= scratch.count else { rejected += 1; return true }
            scratch.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
            do {
                let n = try scratch.withUnsafeMutableBytes { try srtp.unprotectRTCP($0, length: bytes.count) }
                scratch.withUnsafeMutableBytes { mapFeedback(UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), of: s) }
                scratch.withUnsafeBytes { core.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n]), from: address, now: now, wallNanos: now) }
            } catch {
                rejected += 1
            }
            return true
        default:
            return false
        }
    }

    private func handleSTUN(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, core: RelayCore,
                            send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard let message = try? STUNMessage.parse(bytes), let username = message.username,
              let colon = username.firstIndex(of: ":") else { rejected += 1; return }
        if byUfrag[String(username[..<colon])] == nil { adopt(core: core) }  // its POST may have just been answered
        guard let s = byUfrag[String(username[..<colon])] else {
            logger.debug("STUN for no session: USERNAME '\(username.prefix(64))'")
            rejected += 1
            return
        }
        let mapped = STUNAddress.v4(address: (UInt8(address.ip >> 24), UInt8((address.ip >> 16) & 0xFF),
                                              UInt8((address.ip >> 8) & 0xFF), UInt8(address.ip & 0xFF)), port: address.port)
        switch s.ice.handle(bytes, from: address, mapped: mapped, now: now) {
        case .respond(let response, _):
            byAddress[address] = s
            response.withUnsafeBytes { send($0, address) }
            // Media moves with the nomination once the room has this browser.
            if let selected = s.ice.mediaAddress, let at = s.joinedAt, selected != at, s.srtpOut != nil {
                core.removeExternalViewer(address: at, reason: "moved")
                join(s, at: selected, now: now, core: core)
            }
        case .reject(let response, let reason):
            logger.debug("browser \(s.id): STUN refused: \(reason)")
            response.withUnsafeBytes { send($0, address) }
        case .ignore:
            rejected += 1
        }
    }

    private func connected(_ s: BrowserSession, at address: PeerAddress, now: UInt64, core: RelayCore) {
        guard let keys = s.dtls.keys else { return }
        do {
            // The relay is the DTLS server: it writes with the server key, reads with the client's.
            s.srtpOut = try SRTPSession(profile: keys.profile, direction: .outbound, key: keys.serverKey, salt: keys.serverSalt)
            s.srtpIn = try SRTPSession(profile: keys.profile, direction: .inbound, key: keys.clientKey, salt: keys.clientSalt)
            logger.debug("browser \(s.id): DTLS-SRTP agreed \(keys.profile)")
            doneConnecting(s)
        } catch {
            logger.warning("browser \(s.id): \(error)")
            close(s, core: core, reason: "srtp_failed")
            return
        }
        join(s, at: s.ice.mediaAddress ?? address, now: now, core: core)
    }

    private func join(_ s: BrowserSession, at address: PeerAddress, now: UInt64, core: RelayCore) {
        do {
            _ = try core.addExternalViewer(room: s.room, name: s.name ?? "browser-\(s.id.prefix(6))", address: address, presenter: s.presenter,
                                           now: now)
            s.joinedAt = address
            byAddress[address] = s
        } catch {
            logger.info("browser \(s.id): \(error)")
            close(s, core: core, reason: "refused")
        }
    }

    /// The relay is stopping: each connected browser is sent DTLS close_notify, so its page
    /// knows the end is on purpose (its DTLS transport turns `closed`, not `failed`) and says
    /// the share ended instead of reconnecting.
    func closeAll(core: RelayCore, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        for s in Array(byID.values) {
            if s.srtpOut != nil, let at = s.ice.mediaAddress {
                s.dtls.close()
                if let out = s.dtls.takeOutgoing() { out.withUnsafeBytes { send($0, at) } }
            }
            close(s, core: core, reason: "left")
        }
    }

    /// Whether a session made at `createdNanos` has had its time to connect at `now`. It was
    /// made on the HTTP thread, maybe after this turn of the relay's read its clock: then it is
    /// new, not 584 years old (`now &- createdNanos` wrapped, and a class arriving at once lost
    /// a browser in twenty to an instant "setup_timeout").
    static func setupExpired(createdNanos: UInt64, now: UInt64, timeoutNanos: UInt64) -> Bool {
        now > createdNanos && now - createdNanos > timeoutNanos
    }

    /// Timers: sessions that never connected, and browsers whose consent ran out (RFC 7675).
    func poll(now: UInt64, core: RelayCore, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        adopt(core: core)
        for s in Array(byID.values) {
            if s.srtpOut == nil {
                if Self.setupExpired(createdNanos: s.createdNanos, now: now, timeoutNanos: limits.setupTimeoutNanos) {
                    close(s, core: core, reason: "setup_timeout")
                    continue
                }
                if let ms = s.dtls.timeoutMillis, ms == 0, let at = s.ice.mediaAddress {
                    s.dtls.handleTimeout()
                    if let out = s.dtls.takeOutgoing() { out.withUnsafeBytes { send($0, at) } }
                }
            } else if !s.ice.hasConsent(at: now) {
                close(s, core: core, reason: "consent_lost")
            } else if s.red != nil, now >= s.nextFECUpdate, let at = s.joinedAt {
                // Its link as its transport feedback and receiver reports measure it, every
                // 100 ms (the pace the policy's average expects).
                s.nextFECUpdate = now + 100_000_000
                if let link = core.externalViewerLink(address: at) {
                    s.fec.update(loss: link.loss, rttNanos: link.rttNanos ?? 0, congested: link.congested, now: now)
                } else if s.fec.mode == .on {
                    s.fec.update(loss: 0, rttNanos: 0, now: now)
                }
            }
        }
    }

    private func doneConnecting(_ s: BrowserSession) {
        if s.connecting {
            s.connecting = false
            inbox.release()
        }
    }

    private func close(_ s: BrowserSession, core: RelayCore, reason: String) {
        doneConnecting(s)
        if let at = s.joinedAt { core.removeExternalViewer(address: at, reason: reason) }
        byID[s.id] = nil
        byUfrag[s.ice.localUfrag] = nil
        for (address, session) in byAddress where session === s { byAddress[address] = nil }
    }

    /// Rewrites what the room sends the browser at `address` (RTP and RTCP; the room's own
    /// control messages are not for it) into the answer's payload types, SSRCs, and sequence
    /// numbers and timestamps that run on across presenters; protects it and sends it. Nothing
    /// is allocated.
    func egress(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress, core: RelayCore,
                send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard let s = byAddress[address], let srtp = s.srtpOut, bytes.count >= 12,
              bytes.count + 1 + srtp.profile.rtcpOverhead <= scratch.count else { return }
        let kind = DatagramKind.of(bytes)
        guard kind == .rtp || kind == .rtcp else { return }
        scratch.withUnsafeMutableBytes { $0.copyMemory(from: bytes) }
        let ssrcOffset = 4 + (kind == .rtp ? 4 : 0)
        let ssrc = scratch.withUnsafeMutableBytes { Self.read32($0, at: ssrcOffset) }
        if s.presenterKinds[ssrc] == nil {
            for info in core.externalViewerStreams(address: address) { s.presenterKinds[info.ssrc] = info.kind }
        }
        guard let streamKind = s.presenterKinds[ssrc] else { return }
        let isAudio = streamKind == .audio
        guard !isAudio || s.audioPT != nil else { return }
        let spliced = scratch.withUnsafeMutableBytes { b -> Bool in
            if kind == .rtp {
                let seq = UInt16(b[2]) << 8 | UInt16(b[3]), ts = Self.read32(b, at: 4)
                let out = isAudio ? s.audio.rewrite(ssrc: ssrc, sequence: seq, timestamp: ts, now: now)
                    : s.video.rewrite(ssrc: ssrc, sequence: seq, timestamp: ts, now: now)
                guard let out else { return false }
                b[2] = UInt8(out.sequence >> 8)
                b[3] = UInt8(out.sequence & 0xFF)
                // The presenter's transport-wide number, under the ID the browser gave it.
                if !isAudio, let id = s.transportSequenceID, TransportWideSequence.isStamped(UnsafeRawBufferPointer(b)),
                   b[16] >> 4 == RoomProtocol.transportSequenceID {
                    b[16] = id << 4 | 1
                }
                Self.write32(out.timestamp, into: b, at: 4)
                b[1] = (b[1] & 0x80) | (isAudio ? s.audioPT! : s.videoPT)
            } else if b[1] == 200, bytes.count >= 20 {  // a sender report: its RTP timestamp at +16
                let splicer = isAudio ? s.audio : s.video
                guard let ts = splicer.rewriteReport(ssrc: ssrc, timestamp: Self.read32(b, at: 16)) else { return false }
                Self.write32(ts, into: b, at: 16)
            }
            Self.write32(isAudio ? s.audioSSRC : s.videoSSRC, into: b, at: ssrcOffset)
            return true
        }
        guard spliced else { return }
        // Video to a browser that takes FEC: numbered after the FEC packets sent before it, in
        // RED while FEC is on, and after a frame's last packet the frame's FEC.
        let protected = kind == .rtp && !isAudio && s.red != nil
        var length = bytes.count
        if protected {
            length = scratch.withUnsafeMutableBytes { s.red!.prepare($0, length: bytes.count, protection: s.fec.protection) }
            guard length > 0 else { return }
        }
        protectAndSend(length: length, rtp: kind == .rtp, srtp: srtp, to: address, send: send)
        if protected {
            s.red!.finishFrame(protection: s.fec.protection) { fec in
                guard fec.count + srtp.profile.rtcpOverhead <= scratch.count else { return }
                scratch.withUnsafeMutableBytes { $0.copyMemory(from: fec) }
                protectAndSend(length: fec.count, rtp: true, srtp: srtp, to: address, send: send)
                fecSent += 1
            }
        }
    }

    /// FEC packets sent to browsers.
    private(set) var fecSent = 0

    /// Protects the `length` bytes at the start of `scratch` and sends them.
    private func protectAndSend(length: Int, rtp: Bool, srtp: SRTPSession, to address: PeerAddress,
                                send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        do {
            let n: Int = try scratch.withUnsafeMutableBytes { b in
                rtp ? try srtp.protect(b, length: length) : try srtp.protectRTCP(b, length: length)
            }
            scratch.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), address) }
        } catch {
            rejected += 1
        }
    }

    /// The browser's feedback names the answer's SSRCs and sequence numbers: back to the
    /// presenter's, for the room. Nothing is allocated: feedback (RTPFB 205, PSFB 206) names the
    /// media SSRC at +8, a NACK (205, FMT 1) lists sequence numbers from +12, one every 4 bytes;
    /// a receiver report (201) has 24-byte blocks from +8, each starting with the SSRC and
    /// with the highest sequence number's low 16 bits at +10.
    private func mapFeedback(_ b: UnsafeMutableRawBufferPointer, of s: BrowserSession) {
        func splicer(_ answered: UInt32) -> StreamSplicer? {
            answered == s.videoSSRC ? s.video : answered == s.audioSSRC ? s.audio : nil
        }
        var offset = 0
        while offset + 4 <= b.count {
            let pt = b[offset + 1], fmt = b[offset] & 0x1F
            let length = ((Int(b[offset + 2]) << 8 | Int(b[offset + 3])) + 1) * 4
            guard offset + length <= b.count else { return }
            if pt == 201 {
                var p = offset + 8
                while p + 24 <= offset + length {
                    let answered = Self.read32(b, at: p)
                    if let splicer = splicer(answered), let source = splicer.source {
                        Self.write32(source, into: b, at: p)
                        var highest = UInt16(b[p + 10]) << 8 | UInt16(b[p + 11])
                        if answered == s.videoSSRC, let red = s.red { highest = red.originalOrPreceding(highest) }
                        highest = splicer.original(highest)
                        b[p + 10] = UInt8(highest >> 8)
                        b[p + 11] = UInt8(highest & 0xFF)
                    }
                    p += 24
                }
            } else if (pt == 205 || pt == 206), offset + 12 <= offset + length,
                      let splicer = splicer(Self.read32(b, at: offset + 8)), let source = splicer.source {
                let red = Self.read32(b, at: offset + 8) == s.videoSSRC ? s.red : nil
                Self.write32(source, into: b, at: offset + 8)
                if pt == 205, fmt == 1 {
                    var p = offset + 12
                    while p + 4 <= offset + length {
                        var pid = UInt16(b[p]) << 8 | UInt16(b[p + 1])
                        if let red {
                            // Without the FEC packets' numbers (they are not resent), the rest
                            // closer together: still one PID and bitmask.
                            let (first, mask) = Self.withoutFEC(pid: pid, mask: UInt16(b[p + 2]) << 8 | UInt16(b[p + 3]), red: red)
                            pid = first
                            b[p + 2] = UInt8(mask >> 8)
                            b[p + 3] = UInt8(mask & 0xFF)
                        }
                        pid = splicer.original(pid)
                        b[p] = UInt8(pid >> 8)
                        b[p + 1] = UInt8(pid & 0xFF)
                        p += 4
                    }
                }
            }
            offset += length
        }
    }

    /// A NACK item (RFC 4585 §6.2.1: PID and the bitmask of the 16 after it) in the browser's
    /// numbers → the same packets before FEC's were inserted, FEC packets left out (when all
    /// are FEC, the media packet before them: a harmless resend).
    static func withoutFEC(pid: UInt16, mask: UInt16, red: REDProtection) -> (pid: UInt16, mask: UInt16) {
        var first: UInt16?, out: UInt16 = 0
        for k in 0...16 where k == 0 || mask & (1 << (k - 1)) != 0 {
            guard let original = red.original(pid &+ UInt16(k)) else { continue }
            if let f = first {
                let d = original &- f
                if (1...16).contains(d) { out |= 1 << (d - 1) }
            } else {
                first = original
            }
        }
        return (first ?? red.originalOrPreceding(pid), out)
    }

    private static func read32(_ b: UnsafeMutableRawBufferPointer, at p: Int) -> UInt32 {
        UInt32(b[p]) << 24 | UInt32(b[p + 1]) << 16 | UInt32(b[p + 2]) << 8 | UInt32(b[p + 3])
    }

    private static func write32(_ v: UInt32, into b: UnsafeMutableRawBufferPointer, at p: Int) {
        b[p] = UInt8(v >> 24)
        b[p + 1] = UInt8((v >> 16) & 0xFF)
        b[p + 2] = UInt8((v >> 8) & 0xFF)
        b[p + 3] = UInt8(v & 0xFF)
    }
}
