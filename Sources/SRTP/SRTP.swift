import CSRTP
import Synchronization

/// The SRTP protection profiles (DTLS-SRTP's names, RFC 5764 §4.1.2, RFC 7714 §14.2; with SDES,
/// RFC 4568, `AES_CM_128_HMAC_SHA1_80` is the first).
public enum SRTPProfile: Int, Sendable {
    case aes128CmHmacSha1_80 = 0x0001
    case aeadAes128Gcm = 0x0007

    /// The profiles this machine's libsrtp2 can run, preferred first: AES-GCM when it was built
    /// with OpenSSL (Debian's is not), then AES-CM with HMAC-SHA1-80, which every browser takes.
    public static let usable: [SRTPProfile] = [.aeadAes128Gcm, .aes128CmHmacSha1_80].filter(SRTPSession.supports)

    /// Master key and salt lengths.
    public var keyLength: Int { 16 }
    public var saltLength: Int { self == .aeadAes128Gcm ? 12 : 14 }
}

/// One direction of SRTP and SRTCP (RFC 3711) over libsrtp2, keyed from a DTLS-SRTP handshake:
/// `protect` what we send with our write key, `unprotect` what arrives with the peer's.
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
    private var session: srtp_t?

    /// Whether this libsrtp2 can do `profile` (Debian's is built without OpenSSL: no AES-GCM).
    public static func supports(_ profile: SRTPProfile) -> Bool {
        initialize()
        return (try? SRTPSession(profile: profile, direction: .outbound,
                                 key: [UInt8](repeating: 1, count: profile.keyLength),
                                 salt: [UInt8](repeating: 2, count: profile.saltLength))) != nil
    }

    /// - Throws: `SRTPError` when libsrtp2 cannot be loaded or refuses the policy (an unsupported
    ///   profile).
    public init(profile: SRTPProfile, direction: Direction, key: [UInt8], salt: [UInt8]) throws {
        if let reason = Self.loadLibrary() { throw SRTPError("cannot load libsrtp2: \(reason)") }
        Self.initialize()
        precondition(key.count == profile.keyLength && salt.count == profile.saltLength, "SRTP key or salt of the wrong length")
        self.profile = profile
        self.direction = direction
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CmHmacSha1_80:
            shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp)
            shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp)
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .outbound ? ssrc_any_outbound : ssrc_any_inbound
        policy.window_size = 1024
        policy.allow_repeat_tx = 1
        var master = key + salt
        var created: srtp_t?
        let status = master.withUnsafeMutableBufferPointer { buffer in
            policy.key = buffer.baseAddress
            return srtp_create(&created, &policy)
        }
        master.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
        guard status == srtp_err_status_ok, let created else {
            throw SRTPError("libsrtp2 refuses \(profile) (status \(status.rawValue))")
        }
        session = created
    }

    deinit {
        if let session { srtp_dealloc(session) }
    }

    /// Encrypts and signs the RTP packet in `buffer[0..<length]` in place; returns the new
    /// length. The buffer must have `profile.rtpOverhead` bytes to spare.
    public func protect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, overhead: profile.rtpOverhead, srtp_protect, "protect RTP")
    }

    /// Checks and decrypts the SRTP packet in `buffer[0..<length]` in place; returns the RTP
    /// length. Throws on a forgery, a replay or garbage.
    public func unprotect(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, overhead: 0, srtp_unprotect, "unprotect SRTP")
    }

    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, overhead: profile.rtcpOverhead, srtp_protect_rtcp, "protect RTCP")
    }

    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws -> Int {
        try run(buffer, length, overhead: 0, srtp_unprotect_rtcp, "unprotect SRTCP")
    }

    private func run(_ buffer: UnsafeMutableRawBufferPointer, _ length: Int, overhead: Int,
                     _ call: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t,
                     _ what: String) throws -> Int {
        guard length >= 12, length + overhead <= buffer.count else {
            throw SRTPError("\(what): \(length) bytes in a \(buffer.count)-byte buffer")
        }
        var n = Int32(length)
        let status = call(session, buffer.baseAddress, &n)
        guard status == srtp_err_status_ok else { throw SRTPError.status(status, what) }
        return Int(n)
    }

    /// Opens libsrtp2, which is loaded when SRTP is first used (Sources/CSRTP): nil, or why it
    /// cannot be.
    private static func loadLibrary() -> String? {
        csrtp_load().map { String(cString: $0) }
    }

    private static let initialized = Mutex(false)

    private static func initialize() {
        initialized.withLock { done in
            if !done { done = srtp_init() == srtp_err_status_ok }
        }
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

    static func status(_ status: srtp_err_status_t, _ what: String) -> SRTPError {
        switch status {
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: return SRTPError("\(what): a replayed packet")
        case srtp_err_status_auth_fail: return SRTPError("\(what): the authentication tag is wrong (forged or damaged)")
        default: return SRTPError("\(what): libsrtp2 status \(status.rawValue)")
        }
    }
}
