import FoundationEssentials
import MediaCore
import Basics
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Room

/// The link a presenter hands out (`http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4`, or the long
/// form `…#token=…&fp=sha256:…`), read by `watch LINK`: the relay's address, the room, and what
/// admits — an invitation code to exchange, or the token and the certificate itself.
public struct InvitationLink: Sendable, Equatable {
    /// Whether the relay's HTTP side is HTTPS (`https://`).
    public var secure: Bool
    public var host: String
    public var port: UInt16
    public var room: String
    /// The short link's code (exchanged at `POST /invite/ROOM` for the token).
    public var code: String?
    /// The long link's token and pinned certificate.
    public var token: String?
    public var fingerprint: String?

    /// Reads a link; the error names what is wrong with it.
    public init(parsing text: String) throws(SettingError) {
        let trimmed = text.trimmed()
        secure = trimmed.hasPrefix("https://")
        guard secure || trimmed.hasPrefix("http://") else {
            throw SettingError("'\(trimmed.prefix(80))' is not a screenshare link (http://HOST:PORT/ROOM#k=CODE, as `start --room` prints it)")
        }
        let rest = trimmed.dropFirst(secure ? "https://".count : "http://".count)
        let (beforeFragment, fragment) = rest.firstIndex(of: "#").map { (rest[..<$0], String(rest[rest.index(after: $0)...])) } ?? (rest, "")
        guard let slash = beforeFragment.firstIndex(of: "/") else { throw SettingError("the link names no room (http://HOST:PORT/ROOM)") }
        let authority = String(beforeFragment[..<slash])
        let path = beforeFragment[beforeFragment.index(after: slash)...].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard let colon = authority.lastIndex(of: ":"), let port = UInt16(authority[authority.index(after: colon)...]), port > 0 else {
            throw SettingError("the link's address '\(authority.prefix(80))' has no port (HOST:PORT)")
        }
        host = String(authority[..<colon])
        guard !host.isEmpty else { throw SettingError("the link's address has no host") }
        self.port = port
        guard !path.isEmpty, !path.contains("/"), let room = PercentEncoding.decode(path), !room.isEmpty else {
            throw SettingError("the link names no room (http://HOST:PORT/ROOM)")
        }
        self.room = room
        var fields: [String: String] = [:]
        for pair in fragment.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = PercentEncoding.decode(kv[1]) ?? String(kv[1]) }
        }
        code = fields["k"]
        token = fields["token"]
        fingerprint = fields["fp"]
        if let code, token == nil, !InviteBook.isWellFormed(code) {
            throw SettingError("the link's code '\(code.prefix(20))' is not \(InviteBook.codeLength) letters and digits: copy the whole link")
        }
    }

    /// What the relay gave for the code: the token (nil: an open room) and its certificate.
    public struct Grant: Sendable, Equatable {
        public var token: String?
        public var fingerprint: String
    }

    /// Exchanges the link's code with the relay (`POST /invite/ROOM`), waiting up to `timeoutSeconds`.
    /// - Throws: `AccessRefusal`-worded `InvitationError.refused` for a code the relay does not
    ///   take (its words: not valid, expired), `.unreachable` when no answer comes.
    /// - Parameter caFile: for an `https://` link, a CA to trust besides the system's (PEM).
    public func redeem(timeoutSeconds: Int64 = 5, caFile: String? = nil) throws(InvitationError) -> Grant {
        guard let code else { throw .refused("the link carries no invitation code") }
        let (status, body): (Int, String)
        do {
            (status, body) = try Self.post(host: host, port: Int(port), path: "/invite/" + PercentEncoding.encodePath(room), body: code,
                                           tls: secure ? try Self.clientTLS(caFile: caFile) : nil, timeoutSeconds: timeoutSeconds)
        } catch {
            if Self.isCertificateRefusal(error) {
                throw .untrusted("the relay at \(host):\(port) shows a certificate this machine does not trust for \(host)"
                    + "; for one from a private CA, give the CA with --ca-file")
            }
            throw .unreachable("no answer from \(host):\(port) (\(Self.words(for: error))): is the presenter still sharing, and is TCP port \(port) open?")
        }
        // The relay's answers for a code it does not take: 400 (malformed), 404 (not valid), 410 (expired).
        if [400, 404, 410].contains(status), !body.trimmed().isEmpty { throw .refused(body.trimmed()) }
        guard status == 200 else {
            throw .unreachable("\(host):\(port) answered the invitation with HTTP \(status), not as a screenshare relay does: is it the presenter's address?")
        }
        let answer = Self.fields(in: body)
        guard let fingerprint = answer?["fingerprint"] else {
            throw .unreachable("\(host):\(port) answered the invitation with something that is not a screenshare relay's answer")
        }
        return Grant(token: answer?["token"], fingerprint: fingerprint)
    }

    /// A connection error in the system's words ("Connection refused"), not NIO's structure.
    static func words(for error: any Error) -> String {
        if let e = error as? NIOConnectionError, let io = e.connectionErrors.first?.error as? IOError { return SystemError.message(io.errnoCode) }
        if let io = error as? IOError { return SystemError.message(io.errnoCode) }
        if error is NIOSSLError || error is BoringSSLError { return "TLS handshake failed" }
        if case ChannelError.connectTimeout = error { return "timed out" }
        return "\(error)"
    }

    /// Whether the TLS handshake failed because the relay's certificate was not trusted (or
    /// not for that name).
    static func isCertificateRefusal(_ error: any Error) -> Bool {
        let text = "\(error)"
        return (error is NIOSSLError || error is BoringSSLError) && (text.contains("CERTIFICATE_VERIFY_FAILED") || text.contains("unableToValidateCertificate"))
    }

    /// A string field of a flat JSON object (the relay's answer: `{"fingerprint":"sha256:…","room":…,"token":"…"}`).
    public static func field(_ name: String, in json: String) -> String? { fields(in: json)?[name] }

    /// A flat JSON object of strings, decoded once (nil: not one).
    static func fields(in json: String) -> [String: String]? {
        try? JSONDecoder().decode([String: String].self, from: Data(json.utf8))
    }

    /// TLS for an `https://` link: the system's CAs, and `caFile`'s.
    static func clientTLS(caFile: String?) throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        if let caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        return try NIOSSLContext(configuration: configuration)
    }

    /// One HTTP/1.1 POST on a fresh connection (over TLS when given): the status and body.
    static func post(host: String, port: Int, path: String, body: String, tls: NIOSSLContext? = nil, timeoutSeconds: Int64) throws -> (Int, String) {
        let answer = try HTTPExchange.once(.POST, host: host, port: port, path: path, body: body, tls: tls, timeoutSeconds: timeoutSeconds)
        return (answer.status, answer.body)
    }
}

/// Why an invitation was not exchanged.
public enum InvitationError: Error, CustomStringConvertible, Equatable {
    /// The relay answered: the code is not valid, or no longer.
    case refused(String)
    /// No (usable) answer.
    case unreachable(String)
    /// The relay's HTTPS certificate is not trusted here.
    case untrusted(String)
    public var description: String {
        switch self {
        case .refused(let why), .unreachable(let why), .untrusted(let why): why
        }
    }
}
