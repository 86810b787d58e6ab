import Synchronization

/// One SDES-keyed flow (RFC 4568: the key travels in the SDP's `a=crypto`): what we send is
/// protected with the master key, what arrives is checked and decrypted with it. Both ends use
/// the same key, each with its own SSRC (so each its own keystream, RFC 3711 §4.1.1).
///
/// Safe from any thread (the encoder and the RTCP thread both send): each direction is one
/// `SRTPSession` used only while its lock is held, with a buffer made once, so nothing is
/// allocated per packet. (`@unchecked`: the sessions and the buffer are touched under the locks only.)
public final class SRTPFlow: PacketProtection, @unchecked Sendable {
    public let profile: SRTPProfile
    private let outSession: SRTPSession
    private let scratch: UnsafeMutableRawBufferPointer
    private let outLock = Mutex(())
    private let inSession: SRTPSession
    private let inLock = Mutex(())
    /// Packets refused on the way in (a forgery, a replay, garbage).
    private let refusedCount = Atomic<Int>(0)

    /// The largest packet protected (before its tag).
    public static let maxPacket = 1500

    /// - Parameter masterKey: key and salt, `profile.keyLength + profile.saltLength` bytes.
    /// - Throws: `SRTPError` when OpenSSL cannot be loaded or the key has the wrong length.
    public convenience init(profile: SRTPProfile = .aes128CmHmacSha1_80, masterKey: [UInt8]) throws {
        guard masterKey.count == profile.keyLength + profile.saltLength else {
            throw SRTPError("an SRTP master key for \(profile) is \(profile.keyLength + profile.saltLength) bytes, not \(masterKey.count)")
        }
        try self.init(profile: profile, sendKey: masterKey, receiveKey: masterKey)
    }

    /// A flow with a master key (key and salt) for each direction, as DTLS-SRTP exports them
    /// (RFC 5764 §4.2: the client's write key is the server's read key).
    /// - Throws: `SRTPError` when OpenSSL cannot be loaded or a key has the wrong length.
    public init(profile: SRTPProfile, sendKey: [UInt8], receiveKey: [UInt8]) throws {
        let length = profile.keyLength + profile.saltLength
        guard sendKey.count == length, receiveKey.count == length else {
            throw SRTPError("an SRTP master key for \(profile) is \(length) bytes, not \(sendKey.count == length ? receiveKey.count : sendKey.count)")
        }
        self.profile = profile
        outSession = try SRTPSession(profile: profile, direction: .outbound, key: Array(sendKey[..<profile.keyLength]),
                                     salt: Array(sendKey[profile.keyLength...]))
        inSession = try SRTPSession(profile: profile, direction: .inbound, key: Array(receiveKey[..<profile.keyLength]),
                                    salt: Array(receiveKey[profile.keyLength...]))
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.maxPacket + profile.rtcpOverhead, alignment: 16)
    }

    deinit {
        scratch.deallocate()
    }

    /// Packets refused on the way in so far.
    public var refused: Int { refusedCount.load(ordering: .relaxed) }
    public var isKeyed: Bool { true }

    /// Protects a copy of `packet` (RTP, or RTCP when its second octet says so, RFC 5761 §4)
    /// and hands it to `send`; returns what `send` returned, or nil when it could not be
    /// protected (too long, not RTP/RTCP).
    @discardableResult
    public func protect<R: Sendable>(_ packet: UnsafeRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> R) -> R? {
        guard packet.count >= 12, packet.count <= Self.maxPacket else { return nil }
        let rtcp = Self.isRTCP(packet)
        return outLock.withLock { _ in
            scratch.copyMemory(from: packet)
            let length = try? (rtcp ? outSession.protectRTCP(scratch, length: packet.count) : outSession.protect(scratch, length: packet.count))
            guard let length else { return nil }
            return send(UnsafeRawBufferPointer(rebasing: scratch[0..<length]))
        }
    }

    /// Protects `packet` (RTP, or RTCP) into `out` (it needs room for the tag); the protected
    /// length, or nil when it could not be (too long, not RTP/RTCP, `out` too small).
    public func protect(_ packet: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard packet.count >= 12, packet.count <= Self.maxPacket, out.count >= packet.count + profile.rtcpOverhead else { return nil }
        let rtcp = Self.isRTCP(packet)
        return outLock.withLock { _ in
            UnsafeMutableRawBufferPointer(rebasing: out[0..<packet.count]).copyMemory(from: packet)
            return try? (rtcp ? outSession.protectRTCP(out, length: packet.count) : outSession.protect(out, length: packet.count))
        }
    }

    /// Checks and decrypts the SRTP or SRTCP packet in `buffer[0..<length]` in place; returns
    /// the plain length, or nil (counted in `refused`) for a forgery, a replay or garbage.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Int? {
        let rtcp = length >= 2 && Self.isRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
        let plain = inLock.withLock { _ in
            try? (rtcp ? inSession.unprotectRTCP(buffer, length: length) : inSession.unprotect(buffer, length: length))
        }
        if plain == nil { refusedCount.add(1, ordering: .relaxed) }
        return plain
    }

    /// RTCP packet types are 192–223 in the second octet (RFC 5761 §4).
    static func isRTCP(_ packet: UnsafeRawBufferPointer) -> Bool { packet.count >= 2 && (192...223).contains(packet[1]) }
}

/// What protects a flow's packets on the way out and checks them on the way in: an `SRTPFlow`,
/// or a `KeyedLater` one whose keys a handshake has yet to agree.
public protocol PacketProtection: AnyObject, Sendable {
    /// Protects a copy of `packet` and hands it to `send`; nil when it could not be (too
    /// long, not RTP/RTCP, no keys yet).
    func protect<R: Sendable>(_ packet: UnsafeRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> R) -> R?
    /// Checks and decrypts `buffer[0..<length]` in place; the plain length, or nil (refused).
    func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Int?
    /// Packets refused on the way in so far.
    var refused: Int { get }
    /// Whether it has keys (packets pass).
    var isKeyed: Bool { get }
}

/// A flow keyed by a handshake (DTLS-SRTP on a room hop): nothing passes either way until
/// `key(_:)` gives it its keys, and a new handshake (a reconnect) gives it new ones. The
/// threads that send media share it with the one that runs the handshake.
public final class KeyedLater: PacketProtection {
    private let flow = Mutex<SRTPFlow?>(nil)
    /// Refused by flows this one had before (a reconnect replaces the flow).
    private let earlierRefused = Atomic<Int>(0)

    public init() {}

    /// The keys of a finished handshake (nil: none, so nothing passes).
    public func key(_ new: SRTPFlow?) {
        let old = flow.withLock { f in
            defer { f = new }
            return f
        }
        if let old { earlierRefused.add(old.refused, ordering: .relaxed) }
    }

    /// Whether packets pass (a handshake gave keys).
    public var isKeyed: Bool { flow.withLock { $0 != nil } }

    public func protect<R: Sendable>(_ packet: UnsafeRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> R) -> R? {
        guard let current = flow.withLock({ $0 }) else { return nil }
        return current.protect(packet, send)
    }

    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) -> Int? {
        guard let current = flow.withLock({ $0 }) else {
            earlierRefused.add(1, ordering: .relaxed)
            return nil
        }
        return current.unprotect(buffer, length: length)
    }

    public var refused: Int { earlierRefused.load(ordering: .relaxed) + (flow.withLock { $0 }?.refused ?? 0) }
}
