import COpenSSL
import SRTP
import Crypto
import FoundationEssentials
import MediaCore
import Basics
#if canImport(Glibc)
import Glibc
#endif

/// A DTLS certificate as WebRTC uses one: an ECDSA P-256 key, self-signed, known to the peer
/// only by its SHA-256 fingerprint in the SDP (RFC 8122, RFC 8827 §6.5).
///
/// (`@unchecked`: its OpenSSL key and certificate are made in `init` and only read after, which
/// OpenSSL allows from any thread; nothing in it changes.)
public final class DTLSCertificate: @unchecked Sendable {
    // Immutable after init: OpenSSL's key and certificate objects are only read (and reference
    // counted) by the contexts that use them, which OpenSSL allows from any thread.
    let key: OpaquePointer
    let x509: OpaquePointer
    /// SHA-256 of the certificate's DER encoding.
    public let fingerprint: [UInt8]

    /// Makes a new key and a certificate for it, valid from a day ago for `validDays`.
    /// - Throws: `DTLSError` with OpenSSL's reason.
    public init(commonName: String = "screenshare", validDays: Int = 30) throws {
        try DTLSError.loadOpenSSL()
        guard let key = shim_EVP_EC_gen_P256() else { throw DTLSError.openSSL("cannot make an ECDSA P-256 key") }
        guard let x509 = X509_new() else {
            EVP_PKEY_free(key)
            throw DTLSError.openSSL("cannot make a certificate")
        }
        var serial = UInt32.random(in: 1...UInt32.max >> 1)
        let ok = X509_set_version(x509, 2) == 1
            && ASN1_INTEGER_set(X509_get_serialNumber(x509), Int(serial)) == 1
            && X509_gmtime_adj(X509_getm_notBefore(x509), -86_400) != nil
            && X509_gmtime_adj(X509_getm_notAfter(x509), validDays * 86_400) != nil
            && X509_set_pubkey(x509, key) == 1
            && X509_NAME_add_entry_by_txt(X509_get_subject_name(x509), "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1
            && X509_set_issuer_name(x509, X509_get_subject_name(x509)) == 1
            && X509_sign(x509, key, EVP_sha256()) > 0
        serial = 0
        guard ok, let fingerprint = Self.fingerprint(of: x509) else {
            X509_free(x509)
            EVP_PKEY_free(key)
            throw DTLSError.openSSL("cannot sign the certificate")
        }
        self.key = key
        self.x509 = x509
        self.fingerprint = fingerprint
    }

    deinit {
        X509_free(x509)
        EVP_PKEY_free(key)
    }

    /// Reads a key and its certificate from PEM text (what `pem` writes).
    /// - Throws: `DTLSError` when either is missing or they do not belong together.
    public init(pem: String) throws {
        try DTLSError.loadOpenSSL()
        let bytes = Array(pem.utf8)
        func read<T>(_ body: (OpaquePointer) -> T?) -> T? {
            guard let bio = bytes.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { return nil }
            defer { BIO_free(bio) }
            return body(bio)
        }
        guard let key = read({ PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw DTLSError.openSSL("no private key in the PEM text: \(DTLSError.lastOpenSSLError())")
        }
        guard let x509 = read({ PEM_read_bio_X509($0, nil, nil, nil) }) else {
            EVP_PKEY_free(key)
            throw DTLSError.openSSL("no certificate in the PEM text: \(DTLSError.lastOpenSSLError())")
        }
        guard X509_check_private_key(x509, key) == 1, let fingerprint = Self.fingerprint(of: x509) else {
            X509_free(x509)
            EVP_PKEY_free(key)
            throw DTLSError.openSSL("the key is not the certificate's")
        }
        self.key = key
        self.x509 = x509
        self.fingerprint = fingerprint
    }

    /// The key (PKCS#8) and the certificate as PEM text.
    public func pem() -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1, PEM_write_bio_X509(bio, x509) == 1 else { return "" }
        var pointer: UnsafeMutablePointer<CChar>?
        let n = shim_BIO_get_mem_data(bio, &pointer)
        guard n > 0, let pointer else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: n), as: UTF8.self)
    }

    /// The certificate kept in `path`, or a new one written there (mode 0600) when no file is
    /// there, so a relay keeps its fingerprint across restarts.
    /// - Throws: `DTLSError` naming the file: unreadable, readable by anyone (o+r: it holds a
    ///   private key), not a key and certificate, or not writable.
    public static func loadOrCreate(file path: String) throws -> (certificate: DTLSCertificate, created: Bool) {
        if PrivateFile.exists(path) {
            let pem: [UInt8]
            do { pem = try PrivateFile.read(path, what: "certificate file") } catch { throw DTLSError.openSSL(error.description) }
            do { return (try DTLSCertificate(pem: String(decoding: pem, as: UTF8.self)), false) } catch {
                throw DTLSError.openSSL("certificate file '\(path)': \(error)")
            }
        }
        // Ten years: peers know it by its fingerprint, and WebRTC does not check its dates.
        let certificate = try DTLSCertificate(validDays: 3650)
        do { try PrivateFile.create(path, contents: Array(certificate.pem().utf8), what: "certificate file") } catch {
            throw DTLSError.openSSL(error.description)
        }
        return (certificate, true)
    }

    /// The fingerprint as the relay prints it: `sha256:` and 64 hex digits.
    public var fingerprintText: String { Self.text(fingerprint) }

    /// A SHA-256 fingerprint as `serve` prints it and `--fingerprint` takes it: `sha256:` and hex.
    public static func text(_ fingerprint: [UInt8]) -> String {
        "sha256:" + fingerprint.hexString
    }

    /// Reads what `text` writes (any case; colons between pairs allowed, as SDP writes them).
    /// Nil when it is not `sha256:` and 32 bytes of hex.
    public static func parseFingerprint(_ text: String) -> [UInt8]? {
        let lower = text.lowercased()
        guard lower.hasPrefix("sha256:") else { return nil }
        let hex = Array(lower.dropFirst(7).filter { $0 != ":" }.utf8)
        guard hex.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let b = UInt8(String(decoding: hex[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
        }
        return out
    }

    static func fingerprint(of x509: OpaquePointer) -> [UInt8]? {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(x509, EVP_sha256(), &digest, &length) == 1, length == 32 else { return nil }
        return Array(digest.prefix(32))
    }
}

extension SRTPProfile {
    /// The profile's name in OpenSSL's `SSL_set_tlsext_use_srtp` list.
    var openSSLName: String {
        switch self {
        case .aes128CmHmacSha1_80: return "SRTP_AES128_CM_SHA1_80"
        case .aeadAes128Gcm: return "SRTP_AEAD_AES_128_GCM"
        }
    }
}

/// What the DTLS transports of one role and certificate share: OpenSSL's context (the
/// certificate and key, DTLS 1.2 only, the cipher suites, the SRTP profiles, and for a server
/// the cookie exchange). Made once: a relay's peers and browsers each add only their own
/// association to it.
///
/// (`@unchecked`: the SSL_CTX is configured in `init` and never changed after; OpenSSL lets
/// threads make their SSL objects from one such context at once.)
public final class DTLSContext: @unchecked Sendable {
    // Immutable after init; OpenSSL allows SSL_new on a context from any thread.
    let ctx: OpaquePointer
    public let role: DTLSTransport.Role
    private let certificate: DTLSCertificate

    /// - Parameter profiles: SRTP profiles, preferred first (by default `SRTPProfile.usable`: AES-GCM, then AES-CM).
    /// - Throws: `DTLSError` with OpenSSL's reason.
    public init(role: DTLSTransport.Role, certificate: DTLSCertificate, profiles: [SRTPProfile] = SRTPProfile.usable) throws {
        self.role = role
        self.certificate = certificate
        guard let ctx = SSL_CTX_new(DTLS_method()) else { throw DTLSError.openSSL("SSL_CTX_new") }
        guard shim_SSL_CTX_set_min_proto_version(ctx, shim_DTLS1_2_VERSION()) == 1,
              shim_SSL_CTX_set_max_proto_version(ctx, shim_DTLS1_2_VERSION()) == 1,
              SSL_CTX_use_certificate(ctx, certificate.x509) == 1,
              SSL_CTX_use_PrivateKey(ctx, certificate.key) == 1,
              SSL_CTX_check_private_key(ctx) == 1,
              SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305") == 1,
              shim_SSL_CTX_set1_groups_list(ctx, "X25519:P-256") == 1,
              // 0 is success here.
              SSL_CTX_set_tlsext_use_srtp(ctx, profiles.map(\.openSSLName).joined(separator: ":")) == 0
        else {
            let reason = DTLSError.lastOpenSSLError()
            SSL_CTX_free(ctx)
            throw DTLSError.openSSL("cannot set up DTLS: \(reason)")
        }
        // The peer's certificate is self-signed: accept it here, check its fingerprint after.
        shim_SSL_CTX_verify_peer_any(ctx)
        _ = shim_SSL_CTX_set_options(ctx, shim_SSL_OP_NO_QUERY_MTU())
        // No session resumption (DTLS-SRTP peers do not resume): a shared context keeps no
        // cache that grows with every handshake.
        _ = SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
        if role == .server {
            // A server answers a ClientHello without our cookie with a HelloVerifyRequest (RFC
            // 6347 §4.2.1), smaller than the hello: a spoofed ClientHello draws no certificate flight.
            _ = shim_SSL_CTX_set_options(ctx, shim_SSL_OP_COOKIE_EXCHANGE())
            SSL_CTX_set_cookie_generate_cb(ctx, { ssl, cookie, length in
                guard let ssl, let cookie, let length else { return 0 }
                let mac = DTLSTransport.cookie(for: ssl)
                mac.withUnsafeBufferPointer { cookie.update(from: $0.baseAddress!, count: $0.count) }
                length.pointee = UInt32(mac.count)
                return 1
            })
            SSL_CTX_set_cookie_verify_cb(ctx, { ssl, cookie, length in
                guard let ssl, let cookie else { return 0 }
                return DTLSTransport.constantTimeEqual(Array(UnsafeBufferPointer(start: cookie, count: Int(length))),
                                                       DTLSTransport.cookie(for: ssl)) ? 1 : 0
            })
        }
        self.ctx = ctx
    }

    deinit {
        SSL_CTX_free(ctx)
    }
}

/// The SRTP master keys a DTLS handshake exported (RFC 5764 §4.2): one key and salt per
/// direction, named by who writes with them.
public struct SRTPKeyMaterial: Sendable, Equatable {
    public var profile: SRTPProfile
    public var clientKey: [UInt8], clientSalt: [UInt8]
    public var serverKey: [UInt8], serverSalt: [UInt8]
}

/// One DTLS 1.2 association over OpenSSL with memory BIOs, sans-I/O in str0m's and mediasoup's
/// shape: datagrams in (`receive`), datagrams out (`takeOutgoing`), a retransmission deadline
/// (`timeoutMillis`, `handleTimeout`). After the handshake the peer's certificate must match the
/// fingerprint its SDP gave, and the SRTP keys are exported.
///
/// Not thread-safe: one owner (a session's thread) drives it.
public final class DTLSTransport {
    public enum Role: Sendable { case client, server }

    public enum State: Sendable, Equatable {
        case handshaking
        case connected
        /// The handshake failed or the peer is not who the SDP said; the reason says which.
        case failed(String)
        /// The peer sent close_notify.
        case closed
    }

    /// Flights are cut to fit this (a 1280-byte IPv6 minimum MTU less UDP/IP headers and room).
    public static let mtu = 1200
    /// The largest application message: one record's plaintext (RFC 6347 §4.1, 2^14), which
    /// goes as one datagram however large (IP fragments it past the MTU).
    public static let maxMessage = 16_384

    public let role: Role
    public private(set) var state: State = .handshaking
    public private(set) var keys: SRTPKeyMaterial?
    /// The peer certificate's SHA-256, once the handshake is done.
    public private(set) var peerFingerprint: [UInt8]?

    private let expectedFingerprint: [UInt8]?
    /// Shared by every transport made from it (a relay's thousand peers hold one).
    private let context: DTLSContext
    private let ssl: OpaquePointer
    private let rbio: OpaquePointer
    private let wbio: OpaquePointer

    /// - Parameters:
    ///   - role: `.server` answers the ClientHello (the relay: `a=setup:passive`).
    ///   - certificate: ours.
    ///   - remoteFingerprint: the SHA-256 the peer's SDP gave (nil: not checked, tests only).
    ///   - profiles: SRTP profiles, preferred first (by default `SRTPProfile.usable`: AES-GCM, then AES-CM).
    public convenience init(role: Role, certificate: DTLSCertificate, remoteFingerprint: [UInt8]?,
                            profiles: [SRTPProfile] = SRTPProfile.usable) throws {
        try self.init(context: DTLSContext(role: role, certificate: certificate, profiles: profiles), remoteFingerprint: remoteFingerprint)
    }

    /// A transport of `context`'s role, with its certificate and profiles.
    public init(context: DTLSContext, remoteFingerprint: [UInt8]?) throws {
        role = context.role
        self.context = context
        expectedFingerprint = remoteFingerprint
        guard let ssl = SSL_new(context.ctx), let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            throw DTLSError.openSSL("SSL_new")
        }
        // An empty read BIO means "no datagram yet", not end of file.
        _ = shim_BIO_set_mem_eof_return(rbio, -1)
        _ = shim_BIO_set_mem_eof_return(wbio, -1)
        SSL_set_bio(ssl, rbio, wbio)
        _ = shim_SSL_set_mtu(ssl, Self.mtu)
        shim_DTLS_set_short_timer(ssl)
        if role == .server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
        self.ssl = ssl
        self.rbio = rbio
        self.wbio = wbio
    }

    deinit {
        SSL_free(ssl)  // frees the BIOs too
    }

    /// Client: sends the ClientHello (then `takeOutgoing`). Server: nothing until one arrives.
    public func start() {
        if role == .client { advanceHandshake() }
    }

    /// Takes a datagram from the peer; returns the application data it carried (after the
    /// handshake). Records that are not valid DTLS are dropped by OpenSSL, as DTLS requires.
    @discardableResult
    public func receive(_ datagram: UnsafeRawBufferPointer) -> [[UInt8]] {
        guard state == .handshaking || state == .connected, datagram.count > 0 else { return [] }
        _ = BIO_write(rbio, datagram.baseAddress, Int32(datagram.count))
        if state == .handshaking { advanceHandshake() }
        var messages: [[UInt8]] = []
        guard state == .connected else { return messages }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = SSL_read(ssl, &buffer, Int32(buffer.count))
            if n > 0 {
                messages.append(Array(buffer.prefix(Int(n))))
                continue
            }
            let error = SSL_get_error(ssl, n)
            if error == SSL_ERROR_ZERO_RETURN { state = .closed }
            else if error != SSL_ERROR_WANT_READ { ERR_clear_error() }
            break
        }
        _ = shim_BIO_reset(rbio)
        return messages
    }

    /// Sends application data (after the handshake): `takeOutgoing` then has the record.
    public func send(_ data: UnsafeRawBufferPointer) throws {
        guard state == .connected else { throw DTLSError.notConnected }
        guard SSL_write(ssl, data.baseAddress, Int32(data.count)) == Int32(data.count) else {
            throw DTLSError.openSSL("SSL_write: \(DTLSError.lastOpenSSLError())")
        }
    }

    /// What DTLS has to send, as one datagram (a flight's records may share one; RFC 6347
    /// §4.1.1 allows it), or nil.
    public func takeOutgoing() -> [UInt8]? {
        var pointer: UnsafeMutablePointer<CChar>?
        let n = shim_BIO_get_mem_data(wbio, &pointer)
        guard n > 0, let pointer else { return nil }
        let datagram = Array(UnsafeRawBufferPointer(start: pointer, count: n))
        _ = shim_BIO_reset(wbio)
        return datagram
    }

    /// Milliseconds until a flight must be sent again (nil: no retransmission pending).
    /// OpenSSL keeps this timer on the system clock.
    public var timeoutMillis: Int? {
        guard state == .handshaking else { return nil }
        var tv = timeval()
        guard shim_DTLSv1_get_timeout(ssl, &tv) == 1 else { return nil }
        return Int(tv.tv_sec) * 1000 + Int(tv.tv_usec) / 1000
    }

    /// Resends the last flight when its timer ran out (then `takeOutgoing`).
    public func handleTimeout() {
        guard state == .handshaking else { return }
        if shim_DTLSv1_handle_timeout(ssl) < 0 {
            state = .failed("the handshake timed out: \(DTLSError.lastOpenSSLError())")
        }
    }

    /// Sends close_notify (then `takeOutgoing`).
    public func close() {
        if state == .connected { _ = SSL_shutdown(ssl) }
        state = .closed
    }

    private func advanceHandshake() {
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            finishHandshake()
            return
        }
        let error = SSL_get_error(ssl, rc)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        state = .failed("the DTLS handshake failed: \(DTLSError.lastOpenSSLError())")
    }

    private func finishHandshake() {
        guard let peer = SSL_get1_peer_certificate(ssl) else {
            state = .failed("the peer sent no certificate")
            return
        }
        defer { X509_free(peer) }
        guard let fingerprint = DTLSCertificate.fingerprint(of: peer) else {
            state = .failed("cannot hash the peer's certificate")
            return
        }
        peerFingerprint = fingerprint
        if let expected = expectedFingerprint, !Self.constantTimeEqual(expected, fingerprint) {
            state = .failed("the peer's certificate is not the one its SDP named (fingerprint mismatch): not the browser that asked")
            return
        }
        guard let selected = SSL_get_selected_srtp_profile(ssl), let profile = SRTPProfile(rawValue: Int(selected.pointee.id)) else {
            state = .failed("no SRTP profile was agreed (the peer offered none of AEAD_AES_128_GCM, AES_CM_128_HMAC_SHA1_80)")
            return
        }
        let k = profile.keyLength, s = profile.saltLength
        var material = [UInt8](repeating: 0, count: 2 * (k + s))
        let label = "EXTRACTOR-dtls_srtp"
        guard SSL_export_keying_material(ssl, &material, material.count, label, label.utf8.count, nil, 0, 0) == 1 else {
            state = .failed("cannot export the SRTP keys: \(DTLSError.lastOpenSSLError())")
            return
        }
        keys = SRTPKeyMaterial(profile: profile, clientKey: Array(material[0..<k]), clientSalt: Array(material[(2 * k)..<(2 * k + s)]),
                               serverKey: Array(material[k..<(2 * k)]), serverSalt: Array(material[(2 * k + s)...]))
        state = .connected
    }

    /// The cookie of one handshake: an HMAC of its SSL object's address under a key made once
    /// per process (valid for that handshake only; nothing is stored per handshake).
    static func cookie(for ssl: OpaquePointer) -> [UInt8] {
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ssl)))
        let input = withUnsafeBytes(of: address.bigEndian) { Array($0) }
        return Array(HMAC<SHA256>.authenticationCode(for: input, using: cookieKey).prefix(20))
    }
    private static let cookieKey = SymmetricKey(size: .bits256)

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in a.indices { diff |= a[i] ^ b[i] }
        return diff == 0
    }

    /// Whether a datagram is DTLS (RFC 7983 §7: first octet 20–63).
    public static func isDTLS(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first else { return false }
        return (20...63).contains(first)
    }
}

/// A DTLS failure with its reason.
public enum DTLSError: Error, CustomStringConvertible, Equatable {
    case openSSL(String)
    case notConnected

    public var description: String {
        switch self {
        case .openSSL(let message): return "DTLS: \(message)"
        case .notConnected: return "DTLS: not connected"
        }
    }

    /// Opens OpenSSL, which is loaded when DTLS is first used (Sources/COpenSSL).
    /// - Throws: `openSSL` with the loader's reason when it cannot be.
    static func loadOpenSSL() throws {
        if let reason = copenssl_load() { throw DTLSError.openSSL("cannot load OpenSSL: \(String(cString: reason))") }
    }

    /// OpenSSL's queued errors as text (and the queue emptied).
    static func lastOpenSSLError() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [UInt8](repeating: 0, count: 256)
            buffer.withUnsafeMutableBufferPointer { b in
                b.withMemoryRebound(to: CChar.self) { ERR_error_string_n(code, $0.baseAddress, $0.count) }
            }
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self))
        }
        return reasons.isEmpty ? "no reason given" : reasons.joined(separator: "; ")
    }
}
