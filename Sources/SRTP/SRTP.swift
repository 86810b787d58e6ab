import COpenSSL

/// The SRTP protection profiles (DTLS-SRTP's names, RFC 5764 §4.1.2, RFC 7714 §14.2; with SDES,
/// RFC 4568, `AES_CM_128_HMAC_SHA1_80` is the first).
public enum SRTPProfile: Int, Sendable {
    case aes128CmHmacSha1_80 = 0x0001
    case aeadAes128Gcm = 0x0007

    /// The profiles offered and taken, preferred first: AES-GCM (one AES-NI pass that also
    /// authenticates; what browsers prefer), then AES-CM with HMAC-SHA1-80, which every
    /// browser takes. Both need OpenSSL's libcrypto; without it, none.
    public static let usable: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmHmacSha1_80].filter(SRTPSession.supports)

    /// Master key and salt lengths.
    public var keyLength: Int { 16 }
    public var saltLength: Int { self == .aeadAes128Gcm ? 12 : 14 }
}

/// One direction of SRTP and SRTCP (RFC 3711; AES-GCM, RFC 7714) keyed from a DTLS-SRTP
/// handshake or SDES: `protect` what we send with our write key, `unprotect` what arrives with
/// the peer's. The transforms are Sources/COpenSSL/srtp_evp.c, over OpenSSL's libcrypto (AES-NI).
///
/// In place, no allocation: the caller's buffer holds the packet and has room for the tag
/// (`SRTPProfile.rtpOverhead`, `rtcpOverhead`). Replays (a sequence number or SRTCP index seen
/// before, RFC 3711 §3.3.2) and forgeries (a wrong tag) are refused. Sent packets may repeat a
/// sequence number: the relay resends lost packets as they were (NACK, no RTX).
///
/// Not thread-safe: one owner.
public final class SRTPSession {
    public enum Direction: Sendable { case outbound, inbound }

    public let profile: SRTPProfile
    public let direction: Direction
    private let context: OpaquePointer

    /// Whether `profile` can be run here (OpenSSL's libcrypto loads).
    public static func supports(_ profile: SRTPProfile) -> Bool {
        (try? SRTPSession(profile: profile, direction: .outbound,
                          key: [UInt8](repeating: 1, count: profile.keyLength),
                          salt: [UInt8](repeating: 2, count: profile.saltLength))) != nil
    }

    /// - Throws: `SRTPError` when OpenSSL cannot be loaded.
    public init(profile: SRTPProfile, direction: Direction, key: [UInt8], salt: [UInt8]) throws {
        precondition(key.count == profile.keyLength && salt.count == profile.saltLength, "SRTP key or salt of the wrong length")
        self.profile = profile
        self.direction = direction
        var error: UnsafePointer<CChar>?
        guard let made = copenssl_srtp_new(Int32(profile.rawValue), key, salt, &error) else {
            throw SRTPError("cannot key SRTP: \(error.map { String(cString: $0) } ?? "unknown")")
        }
        context = made
    }

    /// A session keyed with session keys directly, not derived (the RFCs' test vectors): for
    /// RTP then RTCP, a 16-byte key, the salt and (AES-CM) a 20-byte authentication key.
    public init(profile: SRTPProfile, direction: Direction, sessionKeys rtp: (key: [UInt8], salt: [UInt8], auth: [UInt8]),
                rtcp: (key: [UInt8], salt: [UInt8], auth: [UInt8])) throws {
        precondition(rtp.key.count == 16 && rtcp.key.count == 16 && rtp.salt.count == profile.saltLength
                     && rtcp.salt.count == profile.saltLength, "SRTP session key or salt of the wrong length")
        let auth = profile == .aeadAes128Gcm ? [UInt8](repeating: 0, count: 20) : rtp.auth
        let rtcpAuth = profile == .aeadAes128Gcm ? [UInt8](repeating: 0, count: 20) : rtcp.auth
        precondition(auth.count == 20 && rtcpAuth.count == 20, "SRTP authentication key of the wrong length")
        self.profile = profile
        self.direction = direction
        var error: UnsafePointer<CChar>?
        guard let made = copenssl_srtp_new_with_session_keys(Int32(profile.rawValue), rtp.key, rtp.salt, auth,
                                                             rtcp.key, rtcp.salt, rtcpAuth, &error) else {
            throw SRTPError("cannot key SRTP: \(error.map { String(cString: $0) } ?? "unknown")")
        }
        context = made
    }

    deinit {
        copenssl_srtp_free(context)
    }

    /// The SRTCP index the next RTCP packet of `ssrc` is sent with (tests: the RFCs' vectors).
    public func setRTCPIndex(_ index: UInt32, ssrc: UInt32) {
        copenssl_srtp_set_rtcp_index(context, ssrc, index)
    }

    /// Encrypts and signs the RTP packet in `buffer[0..<length]` in place; returns the new
    /// length. The buffer must have `profile.rtpOverhead` bytes to spare.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, "protect RTP") { copenssl_srtp_protect(context, $0, $1, $2) }
    }

    /// Checks and decrypts the SRTP packet in `buffer[0..<length]` in place; returns the RTP
    /// length. Throws on a forgery, a replay or garbage.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, "unprotect SRTP") { b, _, n in copenssl_srtp_unprotect(context, b, n) }
    }

    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, "protect RTCP") { copenssl_srtp_protect_rtcp(context, $0, $1, $2) }
    }

    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, "unprotect SRTCP") { b, _, n in copenssl_srtp_unprotect_rtcp(context, b, n) }
    }

    private func run(_ buffer: UnsafeMutableRawBufferPointer, _ length: Int, _ what: String,
                     _ call: (UnsafeMutablePointer<UInt8>, Int, UnsafeMutablePointer<Int>) -> copenssl_srtp_status) throws -> Int {
        guard length >= 8, length <= buffer.count, let base = buffer.baseAddress else {
            throw SRTPError("\(what): \(length) bytes in a \(buffer.count)-byte buffer")
        }
        var n = length
        let status = call(base.assumingMemoryBound(to: UInt8.self), buffer.count, &n)
        guard status == COPENSSL_SRTP_OK else { throw SRTPError.status(status, what) }
        return n
    }
}

extension SRTPProfile {
    /// Bytes SRTP adds to an RTP packet (the tag).
    public var rtpOverhead: Int { self == .aeadAes128Gcm ? 16 : 10 }
    /// Bytes SRTCP adds (the E flag and index, and the tag).
    public var rtcpOverhead: Int { 4 + rtpOverhead }
}

/// An SRTP failure: what was refused and why (a replay, a forgery).
public struct SRTPError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }

    static func status(_ status: copenssl_srtp_status, _ what: String) -> SRTPError {
        switch status {
        case COPENSSL_SRTP_REPLAY: return SRTPError("\(what): a replayed packet")
        case COPENSSL_SRTP_AUTH_FAIL: return SRTPError("\(what): the authentication tag is wrong (forged or damaged)")
        case COPENSSL_SRTP_MALFORMED: return SRTPError("\(what): not a packet it can read (too short, or a header longer than the packet)")
        case COPENSSL_SRTP_NO_ROOM: return SRTPError("\(what): no room for the tag")
        default: return SRTPError("\(what): OpenSSL failed")
        }
    }
}
