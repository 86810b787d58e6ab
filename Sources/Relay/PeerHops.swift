import Logging
import Room
import SRTP
import Transport
import WebRTC
import NetworkAddress

/// Bounds on the encrypted hops the relay keeps, so a flood of handshakes costs bounded memory.
public struct HopLimits: Sendable {
    /// Handshakes in progress at once; a ClientHello from a new address beyond this is dropped.
    public var maxHandshaking = 256
    /// A handshake not finished in this long is dropped.
    public var handshakeTimeoutNanos: UInt64 = 10_000_000_000
    /// A hop not heard from for this long is dropped (its peer has long timed out of the room).
    public var idleTimeoutNanos: UInt64 = 2 * RoomProtocol.peerTimeoutNanos
    public init() {}
}

/// One peer's encrypted hop, the relay's end: DTLS (we are the server) and SRTP both ways.
final class PeerHop {
    var dtls: DTLSTransport
    /// SRTP once the handshake is done: send with the server's key, read with the client's.
    var srtp: SRTPFlow?
    /// A new handshake from the same address (the peer reconnected): it replaces this one
    /// when it finishes, so a forged ClientHello cannot end a working hop.
    var next: DTLSTransport?
    /// When the current handshake started.
    var startedNanos: UInt64
    var nextStartedNanos: UInt64 = 0
    var lastHeard: UInt64

    init(dtls: DTLSTransport, now: UInt64) {
        self.dtls = dtls
        startedNanos = now
        lastHeard = now
    }
}

/// The relay's side of its peers' encrypted hops (room protocol v3), on the relay's thread.
///
/// DTLS (first octet 20–63, RFC 7983) from a peer is its handshake or its control messages,
/// which go to the room as they were; SRTP and SRTCP from a peer whose handshake is done are
/// checked and opened once, and what the room sends a peer is protected for it (`egress`):
/// control messages as DTLS application data, RTP and RTCP as SRTP and SRTCP. The relay's
/// HelloVerifyRequest (RFC 6347 §4.2.1) proves a peer's address before any certificate or state
/// beyond the handshake is sent, so the room's own return-routability cookie is not needed.
final class PeerHops {
    let limits: HopLimits
    /// The relay's DTLS server context (its certificate), shared by every hop.
    private let context: DTLSContext
    private let logger: Logger
    private var hops: [PeerAddress: PeerHop] = [:]
    private var handshaking = 0
    private var scratch = [UInt8](repeating: 0, count: 2048)
    /// Datagrams dropped here: DTLS that starts no handshake, SRTP that fails its check
    /// (forged, replayed), hellos beyond the limit. (Plain datagrams count in the room's.)
    private(set) var rejected = 0
    /// Hops whose handshake finished.
    private(set) var established = 0

    init(context: DTLSContext, limits: HopLimits = HopLimits(), logger: Logger) {
        self.context = context
        self.limits = limits
        self.logger = logger
    }

    var count: Int { hops.count }

    /// Whether `address` has a finished hop (what the room sends it must go through `egress`).
    func isSecured(_ address: PeerAddress) -> Bool { hops[address]?.srtp != nil }

    /// A datagram from `address` that is not a browser's: DTLS, SRTP or SRTCP from a peer,
    /// handed to `core` opened, or dropped. Plain room messages and RTP are dropped: every
    /// peer's hop is encrypted.
    func receive(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, wallNanos: UInt64, arrival: UInt64? = nil,
                 core: RelayCore, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard let first = bytes.first else { return }
        switch first {
        case 20...63:
            receiveDTLS(bytes, from: address, now: now, wallNanos: wallNanos, core: core, send: send)
        case 128...191:
            guard let hop = hops[address], let srtp = hop.srtp, bytes.count <= scratch.count else {
                core.noteUnknownSource()
                return
            }
            let n = scratch.withUnsafeMutableBytes { s -> Int? in
                s.copyMemory(from: bytes)
                return srtp.unprotect(s, length: bytes.count)
            }
            guard let n else { rejected += 1; return }
            hop.lastHeard = now
            scratch.withUnsafeBytes { core.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n]), from: address, now: now, wallNanos: wallNanos, proven: true,
                                                arrival: arrival) }
        default:
            core.noteRejected(address, reason: "not DTLS, SRTP or SRTCP (room protocol v3 encrypts every hop)")
        }
    }

    private func receiveDTLS(_ bytes: UnsafeRawBufferPointer, from address: PeerAddress, now: UInt64, wallNanos: UInt64, core: RelayCore,
                             send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        let hello = Self.isClientHello(bytes)
        guard let hop = hops[address] else {
            // Only a ClientHello starts a hop; the first one is answered with a HelloVerifyRequest.
            guard hello, handshaking < limits.maxHandshaking, let dtls = makeServer() else { rejected += 1; return }
            _ = dtls.receive(bytes)
            // A real ClientHello is answered (a HelloVerifyRequest); anything else is dropped,
            // and nothing is kept for it.
            guard dtls.state == .handshaking, let answer = dtls.takeOutgoing() else {
                rejected += 1
                return
            }
            hops[address] = PeerHop(dtls: dtls, now: now)
            handshaking += 1
            answer.withUnsafeBytes { send($0, address) }
            flush(dtls, to: address, send: send)
            return
        }
        if hello, hop.srtp != nil {
            // A hop is working and the peer starts again (a new run, or its room client lost
            // us): the new handshake runs beside it until its hello comes back with our cookie,
            // which proves the address; then it replaces the old one. A forged hello ends nothing.
            if hop.next == nil {
                guard handshaking < limits.maxHandshaking, let dtls = makeServer() else { rejected += 1; return }
                hop.next = dtls
                hop.nextStartedNanos = now
                handshaking += 1
            }
            let next = hop.next!
            _ = next.receive(bytes)
            guard let out = next.takeOutgoing() else { return }
            out.withUnsafeBytes { send($0, address) }
            if out.count > 13, out[0] == 22, out[13] == 2 {  // a ServerHello: the cookie was ours
                hop.dtls = next
                hop.next = nil
                hop.srtp = nil
                hop.startedNanos = now
                flush(next, to: address, send: send)
            }
            return
        }
        let wasConnected = hop.dtls.state == .connected
        let messages = hop.dtls.receive(bytes)
        flush(hop.dtls, to: address, send: send)
        switch hop.dtls.state {
        case .connected:
            hop.lastHeard = now
            if !wasConnected { finish(hop, at: address, core: core) }
            for message in messages {
                message.withUnsafeBytes { core.receive($0, from: address, now: now, wallNanos: wallNanos, proven: true) }
            }
        case .failed(let why):
            logger.debug("relay: DTLS with \(address) failed: \(why)")
            drop(address, hop)
        case .closed:
            // close_notify: the peer left (its `leave` came first, when it could).
            drop(address, hop)
        case .handshaking:
            break
        }
    }

    /// The handshake is done: SRTP keys, and the hop counts as established.
    private func finish(_ hop: PeerHop, at address: PeerAddress, core: RelayCore) {
        handshaking -= 1
        guard let keys = hop.dtls.keys else { return }
        do {
            hop.srtp = try SRTPFlow(profile: keys.profile, sendKey: keys.serverKey + keys.serverSalt, receiveKey: keys.clientKey + keys.clientSalt)
            established += 1
        } catch {
            logger.warning("relay: cannot key SRTP for \(address): \(error)")
            hops[address] = nil
        }
    }

    /// Forgets a hop (its handshakes in progress no longer count).
    private func drop(_ address: PeerAddress, _ hop: PeerHop) {
        if hop.srtp == nil { handshaking -= 1 }
        if hop.next != nil { handshaking -= 1 }
        hops[address] = nil
    }

    private func flush(_ dtls: DTLSTransport, to address: PeerAddress, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        while let out = dtls.takeOutgoing() { out.withUnsafeBytes { send($0, address) } }
    }

    private func makeServer() -> DTLSTransport? {
        do { return try DTLSTransport(context: context, remoteFingerprint: nil) } catch {
            logger.warning("relay: cannot start DTLS: \(error)")
            return nil
        }
    }

    /// Sends what the room sends `address` through its hop: a control message as DTLS
    /// application data, RTP and RTCP protected. Nothing goes to an address without a hop.
    func egress(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        guard let hop = hops[address], hop.srtp != nil else { return }
        if bytes.first == RoomProtocol.magic {
            guard bytes.count <= DTLSTransport.maxMessage else {
                logger.warning("relay: a \(bytes.count)-byte message to \(address) is larger than a DTLS record; not sent")
                return
            }
            do { try hop.dtls.send(bytes) } catch { return }
            flush(hop.dtls, to: address, send: send)
            return
        }
        // One datagram: protected as a fan-out's are (``protect(_:for:into:)``), into the scratch.
        guard bytes.count + 16 <= scratch.count,
              let n = scratch.withUnsafeMutableBytes({ protect(bytes, for: address, into: $0) }) else { return }
        scratch.withUnsafeBytes { send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), address) }
    }

    /// Protects a packet of a fan-out (RTP, RTCP) for `address` into `out`: its length, or nil
    /// (no hop there, or it could not be protected).
    func protect(_ bytes: UnsafeRawBufferPointer, for address: PeerAddress, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard let srtp = hops[address]?.srtp else { return nil }
        return srtp.protect(bytes, into: out)
    }

    /// Timers: handshake retransmissions, and hops that never finished or went silent.
    func poll(now: UInt64, core: RelayCore, send: (UnsafeRawBufferPointer, PeerAddress) -> Void) {
        for (address, hop) in hops {
            if hop.srtp == nil {
                if now &- hop.startedNanos > limits.handshakeTimeoutNanos {
                    drop(address, hop)
                    continue
                }
                if let ms = hop.dtls.timeoutMillis, ms == 0 {
                    hop.dtls.handleTimeout()
                    flush(hop.dtls, to: address, send: send)
                }
            } else if now &- hop.lastHeard > limits.idleTimeoutNanos {
                drop(address, hop)
                continue
            }
            if let next = hop.next {
                if now &- hop.nextStartedNanos > limits.handshakeTimeoutNanos {
                    hop.next = nil
                    handshaking -= 1
                } else if let ms = next.timeoutMillis, ms == 0 {
                    next.handleTimeout()
                    flush(next, to: address, send: send)
                }
            }
        }
    }

    /// A DTLS record of epoch 0 holding a ClientHello (RFC 6347 §4.1, §4.2.2): the start of
    /// a handshake (the first hello, or the one with the cookie).
    static func isClientHello(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count > 13 && bytes[0] == 22 && epoch(bytes) == 0 && bytes[13] == 1
    }

    /// The record's epoch (octets 3–4).
    static func epoch(_ bytes: UnsafeRawBufferPointer) -> UInt16 {
        bytes.count >= 5 ? UInt16(bytes[3]) << 8 | UInt16(bytes[4]) : 0
    }
}
