import Room
import SRTP
import WebRTC

/// A peer's hop to the relay, encrypted: the room client's messages travel as DTLS 1.2
/// application data and its media as SRTP and SRTCP, with the keys the handshake exported
/// (RFC 5764), on the one UDP flow the room already uses (RFC 7983 tells DTLS, 20–63, from
/// RTP and RTCP, 128–191).
///
/// We are the DTLS client; the relay is known by its certificate's fingerprint, checked after
/// the handshake when one is pinned (`--fingerprint`, the printed line and link). A reconnect
/// of the room client (the relay restarted, or lost us) starts a new handshake: new keys.
///
/// No I/O: datagrams in (`receive`), datagrams out (`takeDatagrams`), timers (`poll`,
/// `nextWakeup`). One owner thread drives it; `media` is shared with the threads that send
/// media (it lets nothing through until a handshake gave it keys).
public final class RoomLink {
    /// The room client this hop carries.
    public private(set) var client: RoomClient
    /// SRTP both ways, keyed by the current handshake.
    public let media: KeyedLater
    /// The relay certificate's SHA-256 this hop must find (nil: not checked).
    public let pinned: [UInt8]?
    /// The relay certificate's SHA-256, once a handshake ended.
    public private(set) var relayFingerprint: [UInt8]?
    /// Control datagrams that were not room messages (counted, dropped).
    public private(set) var rejected = 0
    /// Handshakes started (1 + reconnects).
    public private(set) var handshakes = 0

    /// Our DTLS client context (a key and certificate for this run), shared by every handshake.
    private let context: DTLSContext
    private var dtls: DTLSTransport?
    /// Messages the room client sent while no handshake was finished (the last few: the
    /// client sends its requests again until answered).
    private var held: [[UInt8]] = []
    private var datagrams: [[UInt8]] = []
    private var events: [RoomClientEvent] = []
    private var failed = false

    /// - Parameters:
    ///   - client: the room client, not started.
    ///   - pinnedFingerprint: the relay's certificate SHA-256 (nil: accept any, encrypted all
    ///     the same but open to a man in the middle).
    ///   - media: where the keys go (the media threads hold it too).
    /// - Throws: `DTLSError` when no key can be made.
    public init(client: RoomClient, pinnedFingerprint: [UInt8]?, media: KeyedLater = KeyedLater()) throws {
        self.client = client
        self.media = media
        pinned = pinnedFingerprint
        context = try DTLSContext(role: .client, certificate: DTLSCertificate())
    }

    /// Starts the handshake and the join (which goes once the handshake is done).
    public func start(now: UInt64) {
        handshake()
        client.start(now: now)
        pump(now: now)
    }

    /// Whether the current handshake is done (control and media flow).
    public var isConnected: Bool { dtls?.state == .connected }

    /// A datagram from the relay in `buffer[0..<length]`. DTLS is taken here (a handshake
    /// moves on; its messages go to the room client); SRTP and SRTCP are checked and opened in
    /// place. Returns the plain length of the media packet now in `buffer` for the caller, or
    /// nil when there is none (DTLS, a refused packet, anything else).
    public func receive(_ buffer: UnsafeMutableRawBufferPointer, length: Int, now: UInt64) -> Int? {
        guard length > 0 else { return nil }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
        if DTLSTransport.isDTLS(bytes) {
            guard let dtls else { return nil }
            let wasConnected = dtls.state == .connected
            let messages = dtls.receive(bytes)
            if !wasConnected { settle(now: now) }
            for message in messages {
                message.withUnsafeBytes { m in
                    guard let envelope = try? ControlEnvelope.parse(m, maxSize: RoomProtocol.maxRelayMessageSize) else {
                        rejected += 1
                        return
                    }
                    client.receive(envelope, now: now)
                }
            }
            flushTransport()
            pump(now: now)
            return nil
        }
        guard DatagramKind.of(bytes) == .rtp || DatagramKind.of(bytes) == .rtcp else {
            rejected += 1
            return nil
        }
        guard let plain = media.unprotect(buffer, length: length) else { return nil }
        client.heard(now: now)
        return plain
    }

    /// Timers: the room client's (retries, keep-alive, reconnect) and the handshake's
    /// retransmissions.
    public func poll(now: UInt64) {
        if let dtls, let t = dtls.timeoutMillis, t == 0 {
            dtls.handleTimeout()
            settle(now: now)
            flushTransport()
        }
        client.poll(now: now)
        pump(now: now)
    }

    /// When `poll` next has something to do: the room client's next timer, or the
    /// handshake's retransmission.
    public func nextWakeup(now: UInt64) -> UInt64? {
        let handshake = dtls?.timeoutMillis.map { now + UInt64(max(0, $0)) * 1_000_000 }
        guard let r = client.nextWakeup else { return handshake }
        return min(r, handshake ?? r)
    }

    /// Publishes these streams (empty: stop publishing).
    public func publish(_ streams: [StreamInfo], now: UInt64) {
        client.publish(streams, now: now)
        pump(now: now)
    }

    /// Says goodbye (one datagram, then close_notify).
    public func leave() {
        client.leave()
        pump(now: 0)
        if let dtls, dtls.state == .connected {
            dtls.close()
            flushTransport()
        }
    }

    /// What to send to the relay.
    public func takeDatagrams() -> [[UInt8]] {
        defer { datagrams.removeAll(keepingCapacity: true) }
        return datagrams
    }

    /// What the room client (and the hop) reported.
    public func takeEvents() -> [RoomClientEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    // MARK: - Internals

    private func handshake() {
        guard !failed else { return }
        media.key(nil)
        held.removeAll()
        do {
            let transport = try DTLSTransport(context: context, remoteFingerprint: pinned)
            transport.start()
            dtls = transport
            handshakes += 1
            flushTransport()
        } catch {
            dtls = nil
            fail("cannot start DTLS: \(error)")
        }
    }

    /// After the handshake moved: keys on success; a failure ends the hop when it is a wrong
    /// certificate (the room client would otherwise keep trying a relay we do not trust).
    private func settle(now: UInt64) {
        guard let dtls else { return }
        switch dtls.state {
        case .connected:
            guard !media.isKeyed, let keys = dtls.keys else { return }
            relayFingerprint = dtls.peerFingerprint
            do {
                media.key(try SRTPFlow(profile: keys.profile, sendKey: keys.clientKey + keys.clientSalt,
                                       receiveKey: keys.serverKey + keys.serverSalt))
            } catch {
                fail("cannot key SRTP: \(error)")
                return
            }
            client.heard(now: now)
            for message in held { send(message) }
            held.removeAll()
        case .failed(let reason):
            if let pinned, let seen = dtls.peerFingerprint, seen != pinned {
                fail("the relay's certificate is \(DTLSCertificate.text(seen)), not the \(DTLSCertificate.text(pinned)) pinned with --fingerprint: "
                     + "this is not the relay the link named (or someone is in between)")
            } else {
                // Any other failure: the room client's retries start a new handshake.
                self.dtls = nil
                _ = reason
            }
        case .handshaking, .closed:
            break
        }
    }

    private func fail(_ message: String) {
        guard !failed else { return }
        failed = true
        dtls = nil
        media.key(nil)
        client.leave()
        _ = client.takeOutgoing()
        events.append(.untrusted(message: message))
    }

    /// Sends the room client's messages (or holds them until the handshake is done) and passes
    /// its events on; a reconnect starts a new handshake.
    private func pump(now: UInt64) {
        for message in client.takeOutgoing() {
            if isConnected { send(message) } else {
                held.append(message)
                if held.count > 8 { held.removeFirst() }
            }
        }
        for e in client.takeEvents() {
            if case .reconnecting = e { handshake() }
            events.append(e)
        }
    }

    private func send(_ message: [UInt8]) {
        guard let dtls else { return }
        do { try message.withUnsafeBytes { try dtls.send($0) } } catch { return }
        flushTransport()
    }

    private func flushTransport() {
        while let d = dtls?.takeOutgoing() { datagrams.append(d) }
    }
}
