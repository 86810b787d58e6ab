import Access
import Foundation
import Relay
import SRTP
import Synchronization
import Room
import Congestion
import RTCP
import RTP
import Transport
import WebRTC
import NetworkAddress
import RTPSession
import VP8Codec

/// Every parser of network input, each behind one entry point that takes arbitrary bytes:
/// libFuzzer drives them (`Scripts/fuzz`), the tests replay the committed corpus through them.
/// An entry point may throw away what it parsed; it must never crash, hang or grow without bound.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// An RTP packet (RFC 3550) and, in its payload, the VP8 descriptor (RFC 7741).
    case rtp
    /// A compound RTCP packet (SR, RR, SDES, BYE, NACK, PLI, FIR, XR, REMB…).
    case rtcp
    /// A VP8 payload descriptor alone, both readers.
    case vp8
    /// One room control message (docs/PROTOCOL.md).
    case room
    /// A whole relay fed a sequence of datagrams (2-byte length, 1-byte sender, datagram; repeated):
    /// joins, publishes, RTP, RTCP and garbage from four addresses, in any order.
    case relay
    /// A STUN message, parsed and handed to an ICE-lite agent (whose credentials the seeds use).
    case stun
    /// A browser's SDP offer, and the answer made to it.
    case sdp
    /// The bytes of one TCP connection to the relay's HTTP side (WHEP, the page, the directory).
    case http
    /// DTLS records arriving at the relay's DTLS server (OpenSSL's record and handshake parsing).
    case dtls
    /// A room token (a JWT) checked for joining room `class` (jwt-kit's parser, the HMAC, the
    /// claims). Needs `prepare()` first: it is not accepted before.
    case token
    /// SRTP and SRTCP packets arriving on a `--srtp` flow (srtp_evp.c's header parsing, replay windows and tags).
    case srtp
    /// RTCP a receiver sends back (2-byte big-endian length, then the compound packet, repeated),
    /// its transport feedback fed to a sender's congestion control after 2000 packets went
    /// out (some of them probes): matching, delays, loss, probes and queue must never trap.
    case congestion
    /// RTP packets of one stream (2-byte big-endian length, then the packet, repeated): ULPFEC
    /// packets (payload type 117) and media, to a receiver's FEC decoder, which recovers what it
    /// can after each. A recovered packet must be a whole RTP packet of at most 1500 bytes.
    /// The same packets go to a browser's RED + ULPFEC (the relay's side, FEC on and off by
    /// turns): a packet grows by at most its RED byte, an FEC packet fits 1500 bytes and its
    /// RED byte.
    case fec
    /// An invitation link as a viewer is given it (the first line: `watch LINK`'s parser) and the
    /// relay's answer to its code (the rest: the JSON `watch` reads the token and certificate
    /// from). A seed is a link that parses and an answer with a fingerprint.
    case invitation
    /// An answer from what claims to be Janus's HTTP API (`--janus`): the session and handle
    /// ids, acknowledgements, the streaming plugin's answers and errors. A seed is Janus 1.1.2's
    /// answer to `create`.
    case janus
    /// RTP packets of a screen stream as `watch` receives them (2-byte big-endian length, then
    /// the packet, repeated): frames assembled (``VP8FrameAssembler``) and each decoded by both
    /// VP8 decoders, libvpx's and libavcodec's (where it loads), which take at most 640x480
    /// here. A picture yielded is never empty nor over that bound.
    case frames

    /// Makes what the targets need that only async code can make (the token authority: jwt-kit's
    /// key collection is an actor). Call once before `run` (`prepareBlocking` off Swift's
    /// cooperative threads).
    public static func prepare() async {
        guard tokens.withLock({ $0 }) == nil, let authority = try? await TokenAuthority(secret: tokenSecret) else { return }
        tokens.withLock { $0 = authority }
    }

    /// `prepare()` from a plain thread (libFuzzer's driver, the replay command): never from async code.
    public static func prepareBlocking() {
        _ = try? Blocking.run { await prepare() }
    }

    /// The SRTP target's master key and salt (its seeds are protected with it).
    static let srtpKey = (0..<30).map { UInt8($0) }

    /// The token target's secret (its seeds are signed with it).
    static let tokenSecret = Array("the fuzz target's token secret, 32+ bytes".utf8)
    private static let tokens = Mutex<TokenAuthority?>(nil)

    /// Runs one input; whether it was accepted as what the target reads (a seed must be).
    @discardableResult
    public func run(_ bytes: UnsafeRawBufferPointer) -> Bool {
        switch self {
        case .rtp:
            _ = TransportWideSequence.find(id: TransportWideSequence.defaultID, in: bytes)
            guard let (_, offset, length) = try? RTPHeader.parse(bytes) else { return false }
            if length > 0 { _ = try? VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])) }
            return true
        case .rtcp:
            return (try? RTCPPacket.parseCompound(bytes))?.isEmpty == false
        case .vp8:
            let a = try? VP8PayloadDescriptor.parse(bytes)
            let b = try? VP8Packetizer.parseDescriptor(bytes)
            return a != nil && b != nil
        case .room:
            return (try? ControlEnvelope.parse(bytes, maxSize: RoomProtocol.maxRelayMessageSize)) != nil
        case .relay:
            return Self.relay(bytes)
        case .stun:
            var agent = ICELiteAgent<PeerAddress>(localUfrag: Self.ufrag, localPassword: Self.password, remoteUfrag: "remote")
            let source = PeerAddress(ip: 0x7F00_0001, port: 50000)
            if case .respond = agent.handle(bytes, from: source, mapped: .v4(address: (127, 0, 0, 1), port: 50000), now: 1_000_000_000) {
                return true
            }
            return false
        case .sdp:
            guard let offer = try? SDPOffer(parsing: String(decoding: bytes, as: UTF8.self)),
                  let answer = try? WHEPAnswer(offer: offer, videoSSRC: 1, audioSSRC: 2) else { return false }
            let sdp = answer.render(iceUfrag: "abcd", icePassword: Self.password,
                                    fingerprint: SDPOffer.Fingerprint(algorithm: "sha-256", bytes: [UInt8](repeating: 0xAB, count: 32)),
                                    host: "127.0.0.1", port: 7600, cname: "fuzz", sessionID: 1)
            return !sdp.isEmpty
        case .invitation:
            let text = String(decoding: bytes, as: UTF8.self)
            let (line, answer) = text.firstIndex(of: "\n").map { (String(text[..<$0]), String(text[text.index(after: $0)...])) } ?? (text, "")
            let link = try? InvitationLink(parsing: line)
            if let link { precondition(link.port > 0 && !link.room.isEmpty && !link.host.isEmpty) }
            return link != nil && InvitationLink.field("fingerprint", in: answer) != nil
        case .janus:
            return JanusAnswerReader.read(String(decoding: bytes, as: UTF8.self))
        case .http:
            // Every response is 2xx (a seed) or says what was wrong; none is a 5xx.
            let response = String(decoding: WHEPServer.respond(to: Array(bytes)), as: UTF8.self)
            return response.hasPrefix("HTTP/1.1 2")
        case .dtls:
            guard let certificate = Self.certificate,
                  let dtls = try? DTLSTransport(role: .server, certificate: certificate, remoteFingerprint: nil) else { return false }
            dtls.receive(bytes)
            return dtls.takeOutgoing() != nil  // a ServerHello flight answers a ClientHello
        case .token:
            guard let authority = Self.tokens.withLock({ $0 }) else { return false }
            let text = String(decoding: bytes, as: UTF8.self)
            return (try? authority.authorize(token: text, room: "class", presenting: false, wallNanos: 1_800_000_000_000_000_000)) != nil
        case .srtp:
            // A fresh flow each time, so a seed is never refused as a replay of an earlier input.
            guard let flow = try? SRTPFlow(masterKey: Self.srtpKey), bytes.count <= 2048 else { return false }
            var buffer = [UInt8](repeating: 0, count: 2048)
            buffer.replaceSubrange(0..<bytes.count, with: bytes)
            return buffer.withUnsafeMutableBytes { flow.unprotect($0, length: bytes.count) } != nil
        case .congestion:
            return Self.congestion(bytes)
        case .fec:
            return Self.fec(bytes)
        case .frames:
            return Self.frames(bytes)
        }
    }

    /// Calls `body` with each record of `bytes` (a 2-byte big-endian length, then that many
    /// bytes), in order, until one runs past the end.
    private static func forEachLengthPrefixed(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var offset = 0
        while offset + 2 <= bytes.count {
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            offset += 2
            guard offset + length <= bytes.count else { return }
            body(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]))
            offset += length
        }
    }

    /// See ``FuzzTarget/frames``: whether a picture came out.
    private static func frames(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let bound = 640 * 480
        let decoders = VP8Decoder.Implementation.allCases.compactMap { try? VP8Decoder($0, maxPixels: bound) }
        var assembler = VP8FrameAssembler(capacity: 64, maxPayloadSize: 1400)
        var pictures = 0, now: UInt64 = 1_000_000_000
        forEachLengthPrefixed(bytes) { packet in
            now += 1_000_000
            assembler.insert(packet: packet, now: now) { frame in
                for decoder in decoders {
                    try? decoder.decode(frame.data) { p in
                        precondition(p.width > 0 && p.height > 0 && p.width * p.height <= bound, "a picture of \(p.width)x\(p.height)")
                        pictures += 1
                    }
                }
            }
        }
        return pictures > 0
    }

    /// See ``FuzzTarget/fec``: whether something was recovered.
    private static func fec(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var decoder = ULPFECDecoder(mediaSlots: 64, fecSlots: 8)
        var red = REDProtection(redPT: 123, fecPT: 127)
        var recovered = 0, count = 0
        return withUnsafeTemporaryAllocation(byteCount: ULPFEC.maxPacketSize + 1, alignment: 16) { buffer in
            forEachLengthPrefixed(bytes) { packet in
                let length = packet.count
                if length < buffer.count {
                    count += 1
                    let protection = count % 7 == 0 ? 0 : 0.3
                    UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]).copyMemory(from: packet)
                    let n = red.prepare(buffer, length: length, protection: protection)
                    precondition(n == 0 || n == length || n == length + 1, "RED made \(n) bytes of \(length)")
                    if n > 0 { _ = red.originalOrPreceding(UInt16(buffer[2]) << 8 | UInt16(buffer[3])) }
                    red.finishFrame(protection: protection) { fec in
                        precondition(fec.count > RTPHeader.fixedSize + 1 && fec.count <= ULPFEC.maxPacketSize + 1, "FEC of \(fec.count) bytes")
                    }
                }
                guard let (header, payloadOffset, payloadLength) = try? RTPHeader.parse(packet) else { return }
                if header.payloadType == ULPFEC.payloadType {
                    decoder.addFEC(packet, payloadOffset: payloadOffset, payloadLength: payloadLength)
                } else {
                    decoder.addMedia(packet)
                }
                while let n = decoder.recoverOne(into: buffer) {
                    precondition(n >= RTPHeader.fixedSize && n <= ULPFEC.maxPacketSize, "recovered \(n) bytes")
                    recovered += 1
                }
            }
            return recovered > 0
        }
    }

    /// See ``FuzzTarget/congestion``.
    private static func congestion(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var history = TransportHistory(firstSequence: 65_000)
        var controller = CongestionController(minimum: 100_000, maximum: 5_000_000, start: 2_000_000)
        var now: UInt64 = 10_000_000_000
        for i in 0..<2000 { _ = history.sent(size: 1200, now: now + UInt64(i) * 1_000_000, probeCluster: i % 100 < 6 ? i / 100 : nil) }
        now += 2_000_000_000
        var fed = 0
        forEachLengthPrefixed(bytes) { datagram in
            guard let packets = try? RTCPPacket.parseCompound(datagram) else { return }
            for case .transportFeedback(let feedback) in packets {
                controller.onFeedback(history.take(feedback), now: now)
                _ = controller.takeProbe(now: now)
                now += 100_000_000
                fed += 1
            }
        }
        return fed > 0 && controller.target >= controller.minimum && controller.target <= controller.maximum
    }

    /// The ICE-lite agent's credentials (the STUN seeds are signed with them).
    public static let ufrag = "abcd", password = "abcdefghijklmnopqrstuvwx"
    private static let certificate = try? DTLSCertificate()

    /// Splits `bytes` into datagrams (2-byte big-endian length, 1-byte sender 0–3, datagram) and
    /// hands them to one fresh relay, 10 ms apart; then runs its timers.
    private static func relay(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let core = RelayCore(ssrc: 0xF00D, cookieSecret: relayCookieSecret)
        let wire = NullTransport()
        var offset = 0
        var now: UInt64 = 1_000_000_000
        while offset + 3 <= bytes.count {
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            let sender = PeerAddress(ip: 0x7F00_0001, port: 40000 + UInt16(bytes[offset + 2] & 3))
            offset += 3
            let end = min(bytes.count, offset + length)
            core.receive(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]), from: sender, now: now, wallNanos: now)
            core.drain(into: wire)
            core.drainEvents { _ in }
            offset = end
            now += 10_000_000
        }
        core.poll(now: now + 5_000_000_000, wallNanos: now)
        core.drain(into: wire)
        return core.counters.rejected == 0
    }

    /// The relay target's cookie key: fixed, so the seeds can carry valid cookies.
    static let relayCookieSecret = [UInt8](repeating: 7, count: 32)

    /// The cookie the relay target expects from sender `n` (0–3) in its first 30 s.
    public static func relayCookie(sender n: UInt8) -> String {
        RelayCore(cookieSecret: relayCookieSecret)
            .cookie(for: PeerAddress(ip: 0x7F00_0001, port: 40000 + UInt16(n & 3)), now: 1_000_000_000)
    }

    /// One relay datagram as the relay target reads it.
    public static func relayDatagram(_ bytes: [UInt8], from sender: UInt8) -> [UInt8] {
        [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF), sender] + bytes
    }
}

/// Sends nowhere.
private final class NullTransport: RelayTransport {
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) {}
}
