import Synchronization

/// One SDES-keyed flow (RFC 4568: the key travels in the SDP's `a=crypto`): what we send is
/// protected with the master key, what arrives is checked and decrypted with it. Both ends use
/// the same key, each with its own SSRC (so each its own keystream, RFC 3711 §4.1.1).
///
/// Safe from any thread (the encoder and the RTCP thread both send): each direction is one
/// libsrtp2 session used only while its lock is held, with a buffer made once, so nothing is
/// allocated per packet. (`@unchecked`: the sessions and the buffer are touched under the locks only.)
public final class SRTPFlow: @unchecked Sendable {
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
    /// - Throws: `SRTPError` when libsrtp2 refuses the profile or the key has the wrong length.
    public init(profile: SRTPProfile = .aes128CmHmacSha1_80, masterKey: [UInt8]) throws {
        guard masterKey.count == profile.keyLength + profile.saltLength else {
            throw SRTPError("an SRTP master key for \(profile) is \(profile.keyLength + profile.saltLength) bytes, not \(masterKey.count)")
        }
        self.profile = profile
        let key = Array(masterKey[..<profile.keyLength]), salt = Array(masterKey[profile.keyLength...])
        outSession = try SRTPSession(profile: profile, direction: .outbound, key: key, salt: salt)
        inSession = try SRTPSession(profile: profile, direction: .inbound, key: key, salt: salt)
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.maxPacket + profile.rtcpOverhead, alignment: 16)
    }

    deinit {
        scratch.deallocate()
    }

    /// Packets refused on the way in so far.
    public var refused: Int { refusedCount.load(ordering: .relaxed) }

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
