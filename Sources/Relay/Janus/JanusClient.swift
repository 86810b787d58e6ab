import Basics
import Events
import FoundationEssentials
import NIOCore
import NIOSSL

/// A Janus server as `--janus` names it: `http://10.0.0.7:8088/janus` (its HTTP transport's
/// address and base path; `https://` over TLS).
public struct JanusServer: Sendable, Equatable, CustomStringConvertible {
    public var secure: Bool
    public var host: String
    public var port: Int
    public var path: String

    init(secure: Bool, host: String, port: Int, path: String) {
        self.secure = secure
        self.host = host
        self.port = port
        self.path = path
    }

    /// Reads a `--janus` URL; the error names what is wrong with it.
    public init(parsing text: String) throws(SettingError) {
        let t = text.trimmed()
        secure = t.hasPrefix("https://")
        guard secure || t.hasPrefix("http://") else {
            throw SettingError("--janus '\(t.prefix(80))' is not an http:// or https:// URL (e.g. http://10.0.0.7:8088/janus)")
        }
        let rest = t.dropFirst(secure ? 8 : 7)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        var p = String(rest[slash...])
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        path = p.isEmpty ? "/janus" : p
        guard !path.contains("?"), !path.contains("#"), !path.contains(" ") else {
            throw SettingError("--janus '\(t.prefix(80))': the path is Janus's base path alone (e.g. /janus)")
        }
        if let colon = authority.lastIndex(of: ":") {
            guard let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port) else {
                throw SettingError("--janus '\(t.prefix(80))': the port is not a number from 1 to 65535")
            }
            self.port = port
            host = String(authority[..<colon])
        } else {
            port = secure ? 8089 : 8088  // Janus's own defaults
            host = String(authority)
        }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }) else {
            throw SettingError("--janus '\(t.prefix(80))' names no host")
        }
    }

    public var description: String { "\(secure ? "https" : "http")://\(host):\(port)\(path)" }
}

/// Why a call to Janus failed.
enum JanusError: Error, Equatable, CustomStringConvertible {
    /// No answer (refused, timed out, not HTTP, TLS failed).
    case unreachable(String)
    /// An answer, and it said no (or could not be read).
    case refused(JanusAPI.Failure)

    var description: String {
        switch self {
        case .unreachable(let why): "no answer (\(why))"
        case .refused(let f): "\(f)"
        }
    }
}

/// One Janus server's session and streaming-plugin handle over its HTTP API: blocking calls,
/// each with a deadline, made from the server's own thread (``JanusCascade``).
final class JanusClient {
    let server: JanusServer
    let timeoutSeconds: Int64
    private let http = HTTPExchange()
    private let tls: NIOSSLContext?
    private var session: UInt64?
    private var handle: UInt64?
    private var transaction = UInt64.random(in: 0...UInt64(UInt32.max))

    init(server: JanusServer, timeoutSeconds: Int64 = 3) throws {
        self.server = server
        self.timeoutSeconds = timeoutSeconds
        if server.secure {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.minimumTLSVersion = .tlsv12
            tls = try NIOSSLContext(configuration: configuration)
        } else {
            tls = nil
        }
    }

    /// Whether a session with the streaming plugin is open.
    var isConnected: Bool { handle != nil }

    /// Opens a session and attaches the streaming plugin.
    func connect() throws(JanusError) {
        forget()
        let created = try post("", JanusAPI.createSession(transaction: next()))
        let s = try JanusError.reading { () throws(JanusAPI.Failure) in try JanusAPI.readID(created) }
        session = s
        let attached = try post("/\(s)", JanusAPI.attachStreaming(transaction: next()))
        handle = try JanusError.reading { () throws(JanusAPI.Failure) in try JanusAPI.readID(attached) }
    }

    /// Keeps the session alive (Janus drops one silent for 60 s); fails when Janus forgot it.
    func keepalive() throws(JanusError) {
        guard let s = session else { throw .refused(JanusAPI.Failure(code: 458, reason: "no session")) }
        let answer = try post("/\(s)", JanusAPI.keepalive(transaction: next()))
        try JanusError.reading { () throws(JanusAPI.Failure) in try JanusAPI.readAck(answer) }
    }

    /// Creates a mountpoint.
    func create(_ request: JanusAPI.MountpointRequest) throws(JanusError) -> JanusAPI.Mountpoint {
        let answer = try message(JanusAPI.create(request))
        return try JanusError.reading { () throws(JanusAPI.Failure) in try JanusAPI.readCreated(answer) }
    }

    /// Destroys a mountpoint.
    func destroy(id: UInt64, secret: String) throws(JanusError) {
        let answer = try message(JanusAPI.destroy(id: id, secret: secret))
        _ = try JanusError.reading { () throws(JanusAPI.Failure) in try JanusAPI.readPluginData(answer) }
    }

    /// Ends the session (its mountpoints stay: they are the server's, not the session's).
    func close() {
        if let s = session { _ = try? post("/\(s)", JanusAPI.destroySession(transaction: next())) }
        forget()
    }

    /// Forgets the session without telling Janus (it is gone, or Janus is).
    func forget() {
        session = nil
        handle = nil
    }

    private func message(_ body: [String: JSONValue]) throws(JanusError) -> String {
        guard let s = session, let h = handle else { throw .refused(JanusAPI.Failure(code: 458, reason: "no session")) }
        return try post("/\(s)/\(h)", JanusAPI.message(body, transaction: next()))
    }

    private func next() -> String {
        transaction &+= 1
        return "ss\(transaction)"
    }

    /// POSTs `body` to the base path + `suffix`; Janus answers 200 with JSON, its errors included.
    private func post(_ suffix: String, _ body: String) throws(JanusError) -> String {
        let answer: HTTPExchange.Answer
        do {
            answer = try http.request(.POST, host: server.host, port: server.port, path: server.path + suffix, body: body,
                                      contentType: "application/json", tls: tls, timeoutSeconds: timeoutSeconds)
        } catch {
            throw .unreachable(InvitationLink.words(for: error))
        }
        guard answer.status == 200 else {
            throw .refused(JanusAPI.Failure(reason: "HTTP \(answer.status) from \(server.path + suffix): is it Janus's HTTP transport?"))
        }
        return answer.body
    }
}

extension JanusError {
    /// Runs a reading of an answer, its failure a refusal.
    static func reading<T>(_ body: () throws(JanusAPI.Failure) -> T) throws(JanusError) -> T {
        do { return try body() } catch { throw .refused(error) }
    }
}
