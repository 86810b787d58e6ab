import RTP
import Congestion
import FoundationEssentials
import Events
import Glibc
import Logging
import MediaCore
import Basics
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Room
import Transport
import WebRTC

/// Makes browser sessions from WHEP offers (on the HTTP thread) and hands them to the relay's
/// thread: the answer names this relay's one ICE-lite candidate (the address the request came
/// in on, which the browser can reach), its DTLS certificate and fresh ICE credentials.
struct WHEPSessionFactory: Sendable {
    let certificate: DTLSCertificate
    /// The relay's DTLS server context (shared with its peers' hops).
    let context: DTLSContext
    let inbox: BrowserInbox
    let directory: RoomDirectory
    let limits: BrowserLimits
    let udpPort: UInt16
    let clock: MediaClock
    /// Who may watch which room (nil: anyone); tokens come as `Authorization: Bearer`.
    var authorizer: (any RoomAuthorizer)? = nil
    /// The short codes of invitation links, exchanged at `POST /invite/ROOM` for the token.
    var invites = InviteBook()
    /// The Janus mountpoints browsers are sent to (`POST /janus/ROOM`); nil: no `--janus`.
    var janus: JanusBoard? = nil

    /// - Parameter context: a server context for `certificate` (nil: one is made).
    init(certificate: DTLSCertificate, context: DTLSContext? = nil, inbox: BrowserInbox, directory: RoomDirectory, limits: BrowserLimits,
         udpPort: UInt16, clock: MediaClock) throws {
        self.certificate = certificate
        self.context = try context ?? DTLSContext(role: .server, certificate: certificate)
        self.inbox = inbox
        self.directory = directory
        self.limits = limits
        self.udpPort = udpPort
        self.clock = clock
    }

    enum Failure: Error {
        /// A malformed offer (400).
        case badOffer(String)
        /// No such room here (404).
        case noRoom(String)
        /// An offer the relay cannot serve: no VP8, no Opus… (406).
        case cannotServe(String)
        /// Too many browsers connecting at once (503).
        case busy(String)
        case internalError(String)
    }

    /// Checks the request's bearer token for watching `room` (RFC 6750); nil: no authorizer.
    func authorize(_ headers: HTTPHeaders, room: String) throws(AccessRefusal) -> RoomGrant? {
        guard let authorizer else { return nil }
        var token: String?
        if let value = headers["authorization"].first {
            let parts = value.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw AccessRefusal(.malformed, "the Authorization header is not 'Bearer TOKEN'")
            }
            token = parts[1].trimmed()
        }
        return try authorizer.authorize(token: token, room: room, presenting: false, wallNanos: clock.wallNanos())
    }

    /// Answers an offer: what is wrong with the offer first (400, 406), then the room (404),
    /// then a place among the connecting browsers (503); only then a DTLS context is made.
    func create(room: String, presenter: String?, name: String? = nil, offer text: String, localHost: String) throws(Failure) -> (id: String, answer: String) {
        let offer: SDPOffer
        do { offer = try SDPOffer(parsing: text) } catch { throw .badOffer("\(error)") }
        let videoSSRC = UInt32.random(in: 1...UInt32.max), audioSSRC = UInt32.random(in: 1...UInt32.max)
        let answer: WHEPAnswer
        do { answer = try WHEPAnswer(offer: offer, videoSSRC: videoSSRC, audioSSRC: audioSSRC, fec: limits.fec != .off) } catch { throw .cannotServe("\(error)") }
        // The answer accepts video only in a payload type the offer gave VP8 (it throws
        // otherwise); said again here, from the answer itself, so nothing rests on that.
        let video = answer.media.first { $0.kind == "video" && $0.payloadType != nil }
        let audio = answer.media.first { $0.kind == "audio" && $0.payloadType != nil }
        guard let video, let videoPT = video.payloadType else { throw .cannotServe("the offer has no VP8 video this relay can send") }
        guard directory.room(room) != nil else {
            throw .noRoom("no room '\(room)' on this relay: nobody has joined it (yet)")
        }
        guard inbox.reserve(limit: limits.maxConnecting) else {
            throw .busy("\(limits.maxConnecting) browsers are connecting already; try again in a few seconds")
        }
        let dtls: DTLSTransport
        do {
            dtls = try DTLSTransport(context: context, remoteFingerprint: offer.fingerprint.bytes)
        } catch {
            inbox.release()
            throw .internalError("\(error)")
        }
        let id = Self.random(hexBytes: 16)
        let ufrag = Self.random(alphanumeric: 8), password = Self.random(alphanumeric: 24)
        let session = BrowserSession(
            id: id, room: room, presenter: presenter,
            ice: ICELiteAgent(localUfrag: ufrag, localPassword: password, remoteUfrag: offer.iceUfrag), dtls: dtls,
            videoPT: videoPT, audioPT: audio?.payloadType, videoSSRC: videoSSRC, audioSSRC: audioSSRC,
            now: clock.nowNanos())
        session.name = name
        session.transportSequenceID = video.transportSequenceID
        if let red = video.redPT, let ulpfec = video.ulpfecPT {
            session.red = REDProtection(redPT: red, fecPT: ulpfec)
            session.fec = FECPolicy(mode: limits.fec)
        }
        let sdp = answer.render(iceUfrag: ufrag, icePassword: password,
                                fingerprint: SDPOffer.Fingerprint(algorithm: "sha-256", bytes: certificate.fingerprint),
                                host: localHost, port: udpPort, cname: "screenshare-relay", sessionID: UInt64.random(in: 1...UInt64.max >> 1))
        inbox.add(session)
        return (id, sdp)
    }

    static func random(hexBytes n: Int) -> String {
        (0..<n).map { _ in UInt8.random(in: 0...255) }.hexString
    }

    static func random(alphanumeric n: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<n).map { _ in alphabet.randomElement()! })
    }
}

/// The relay's HTTP side, on TCP at the room port: WHEP (RFC 9725) — `POST /whep/ROOM`
/// (`?from=NAME`), `DELETE` on the session's URL — the page a browser opens, `GET /ROOM`, who
/// is in a room, `GET /rooms/ROOM` (JSON: presenters sharing a screen, peers, browsers), and an
/// invitation link's code exchanged for its token, `POST /invite/ROOM` (the code as the body;
/// JSON: the token and the relay's certificate fingerprint).
/// CORS allows pages served elsewhere. Bad requests get a status and a line saying why.
public final class WHEPServer: Sendable {
    /// Request bodies larger than this are refused (413): an offer is a few kB.
    static let maxBody = 64 * 1024

    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel
    public let port: Int
    /// The connection caps (their counts, for tests).
    let gate: ConnectionGate

    /// - Parameter tls: serve HTTPS (and redirect plain HTTP to it); nil: plain HTTP.
    init(host: String?, port: UInt16, factory: WHEPSessionFactory, tls: TLSFiles? = nil, logger: Logger) throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // As many connections as half the open-file limit allows (raised as far as it goes).
        var httpLimits = factory.limits.http
        httpLimits.maxConnections = min(httpLimits.maxConnections, max(64, raiseOpenFileLimit() / 2))
        let limits = httpLimits
        let gate = ConnectionGate(limits: limits, logger: logger)
        self.gate = gate
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let address = channel.remoteAddress?.ipAddress ?? "unknown"
                guard gate.admit(address) else { return channel.close() }
                channel.closeFuture.whenComplete { _ in gate.release(address) }
                // On the channel's event loop: the handlers are made and added there, and live
                // there only (not Sendable).
                do {
                    let sync = channel.pipeline.syncOperations
                    if let tls {
                        // HTTPS: TLS, then HTTP (plain HTTP is redirected to it).
                        try sync.addHandler(HTTPSOrRedirect(tls: tls, timeoutNanos: limits.requestTimeoutNanos) { sync, after in
                            try sync.configureHTTPServerPipeline(position: .after(after))
                            try sync.addHandlers([RequestDeadline(timeoutNanos: limits.requestTimeoutNanos),
                                                  WHEPHandler(factory: factory, logger: logger)], position: .last)
                        })
                    } else {
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandlers([RequestDeadline(timeoutNanos: limits.requestTimeoutNanos),
                                              WHEPHandler(factory: factory, logger: logger)])
                    }
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
            .childChannelOption(.maxMessagesPerRead, value: 4)
        do {
            channel = try bootstrap.bind(host: host ?? "0.0.0.0", port: Int(port)).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw NetworkError("cannot listen on TCP \(host ?? "port") \(port) for browsers (in use by another program?): \(error)")
        }
        self.port = channel.localAddress?.port ?? Int(port)
    }

    public func close() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// What the server answers `request`, the bytes one TCP connection sends, through the same
    /// pipeline (swift-nio's HTTP/1.1 parser, then the WHEP handler) on an in-memory channel:
    /// for fuzzing and tests. The room `class` exists; sessions made are dropped.
    public static func respond(to request: [UInt8]) -> [UInt8] {
        let directory = RoomDirectory()
        directory.publish([RoomSummary(name: "class", presenters: ["teacher"], peers: 1, browsers: 0)])
        guard let certificate = fuzzCertificate else { return [] }
        guard var factory = try? WHEPSessionFactory(certificate: certificate, inbox: BrowserInbox(), directory: directory, limits: BrowserLimits(),
                                                    udpPort: 7600, clock: SystemClock()) else { return [] }
        factory.invites = InviteBook { fuzzInviteBits }
        _ = factory.invites.issue(InviteBook.Invite(room: "class", token: "eyJ.fuzz.token", expiresWallNanos: SystemClock().wallNanos() + 86_400_000_000_000))
        let channel = EmbeddedChannel()
        var out: [UInt8] = []
        do {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline()
            try channel.pipeline.syncOperations.addHandler(WHEPHandler(factory: factory, logger: Logger(label: "whep-fuzz") { _ in SwiftLogNoOpLogHandler() }))
            try channel.writeInbound(channel.allocator.buffer(bytes: request))
        } catch {
            // A request the HTTP parser refuses: the connection is closed (what it wrote is below).
        }
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
        _ = try? channel.finish(acceptAlreadyClosed: true)  // closed already when the parser refused the bytes
        return out
    }

    /// The invitation code `respond(to:)` knows: room `class`, a day long.
    public static let fuzzInviteCode = InviteBook.encode(fuzzInviteBits)
    private static let fuzzInviteBits: UInt64 = 0x5EED_1234_ABCD_0042

    /// One certificate for every `respond(to:)` (making an ECDSA key per input would be most of
    /// the work).
    private static let fuzzCertificate = try? DTLSCertificate()
}

private final class WHEPHandler: ChannelInboundHandler {
    // One per connection, made and used on its event loop only.
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let factory: WHEPSessionFactory
    private let logger: Logger
    private var head: HTTPRequestHead?
    private var body = ByteBuffer()
    private var tooLarge = false

    init(factory: WHEPSessionFactory, logger: Logger) {
        self.factory = factory
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.clear()
            tooLarge = false
        case .body(var chunk):
            if body.readableBytes + chunk.readableBytes > WHEPServer.maxBody { tooLarge = true } else { body.writeBuffer(&chunk) }
        case .end:
            guard let head else { return }
            self.head = nil
            let response = tooLarge ? Response(.payloadTooLarge, "the offer is over \(WHEPServer.maxBody) bytes")
                : route(head, body: body, localHost: context.channel.localAddress?.ipAddress ?? "127.0.0.1")
            write(response, keepAlive: head.isKeepAlive, context: context)
        }
    }

    struct Response {
        var status: HTTPResponseStatus
        var body: String
        var contentType = "text/plain; charset=utf-8"
        var headers: [(String, String)] = []
        init(_ status: HTTPResponseStatus, _ body: String) {
            self.status = status
            self.body = body + (body.hasSuffix("\n") ? "" : "\n")
        }
    }

    private func route(_ head: HTTPRequestHead, body: ByteBuffer, localHost: String) -> Response {
        let (path, query) = Self.split(head.uri)
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map { PercentEncoding.decode($0) ?? String($0) }
        if head.method == .OPTIONS { return Response(.noContent, "") }
        if parts.first == "whep" {
            switch (head.method, parts.count) {
            case (.POST, 2):
                let grant: RoomGrant?
                do { grant = try factory.authorize(head.headers, room: parts[1]) } catch { return Self.unauthorized(error) }
                let type = head.headers["content-type"].first?.lowercased() ?? ""
                guard type.hasPrefix("application/sdp") else {
                    return Response(.unsupportedMediaType, "POST an SDP offer with Content-Type: application/sdp (got '\(type.prefix(60))')")
                }
                let offer = String(buffer: body)
                do throws(WHEPSessionFactory.Failure) {
                    let (id, answer) = try factory.create(room: parts[1], presenter: query["from"], name: grant?.name, offer: offer, localHost: localHost)
                    var r = Response(.created, answer)
                    r.body = answer
                    r.contentType = "application/sdp"
                    r.headers = [("Location", "/whep/\(Self.escape(parts[1]))/\(id)")]
                    logger.info("whep: browser session \(id) for room '\(parts[1])'")
                    return r
                } catch {
                    switch error {
                    case .badOffer(let why): return Response(.badRequest, "the offer is not usable: \(why)")
                    case .noRoom(let why): return Response(.notFound, why)
                    case .cannotServe(let why): return Response(.notAcceptable, why)
                    case .busy(let why):
                        var r = Response(.serviceUnavailable, why)
                        r.headers = [("Retry-After", "2")]
                        return r
                    case .internalError(let why): return Response(.internalServerError, why)
                    }
                }
            case (.DELETE, 3):
                factory.inbox.end(parts[2])
                return Response(.ok, "session ended")
            case (_, 2), (_, 3):
                return Response(.methodNotAllowed, "\(head.method) is not WHEP: POST /whep/ROOM, DELETE /whep/ROOM/SESSION")
            default:
                return Response(.notFound, "WHEP lives at /whep/ROOM")
            }
        }
        if parts.first == "invite" {
            guard head.method == .POST, parts.count == 2 else {
                return Response(.methodNotAllowed, "POST the invitation code to /invite/ROOM")
            }
            let code = String(buffer: body).trimmed()
            guard InviteBook.isWellFormed(code) else {
                return Response(.badRequest, "an invitation code is \(InviteBook.codeLength) letters and digits (the part after #k= in the link)")
            }
            do throws(InviteBook.Refusal) {
                let invite = try factory.invites.redeem(code, room: parts[1], wallNanos: factory.clock.wallNanos())
                var fields: [String: JSONValue] = ["room": .string(invite.room), "fingerprint": .string(factory.certificate.fingerprintText)]
                if let token = invite.token { fields["token"] = .string(token) }
                var r = Response(.ok, JSONValue.object(fields).jsonText)
                r.contentType = "application/json"
                return r
            } catch {
                return Response(error == .expired ? .gone : .notFound, error.description)
            }
        }
        if parts.first == "janus" {
            // A browser the relay admits is sent to a Janus mountpoint of the room, when one
            // serves it: the server's URL, the mountpoint and its pin (JSON). 404: none (the
            // browser watches from the relay, over WHEP).
            guard head.method == .POST, parts.count == 2 else { return Response(.methodNotAllowed, "POST /janus/ROOM") }
            do { _ = try factory.authorize(head.headers, room: parts[1]) } catch { return Self.unauthorized(error) }
            guard let p = factory.janus?.assign(room: parts[1], presenter: query["from"]) else {
                return Response(.notFound, "no Janus server serves room '\(parts[1])' now: watch from the relay (WHEP)")
            }
            var fields: [String: JSONValue] = ["url": .string(p.url), "id": .int(Int(truncatingIfNeeded: p.id)), "presenter": .string(p.presenter)]
            if let pin = p.pin { fields["pin"] = .string(pin) }
            var r = Response(.ok, JSONValue.object(fields).jsonText)
            r.contentType = "application/json"
            return r
        }
        if head.method == .GET, parts.count == 2, parts[0] == "rooms" {
            do { _ = try factory.authorize(head.headers, room: parts[1]) } catch { return Self.unauthorized(error) }
            let summary = factory.directory.room(parts[1])
            let json: JSONValue = .object(["room": .string(parts[1]), "presenters": .array((summary?.presenters ?? []).map { .string($0) }),
                                           "peers": .int(summary?.peers ?? 0), "browsers": .int(summary?.browsers ?? 0)])
            var r = Response(summary == nil ? .notFound : .ok, json.jsonText)
            r.contentType = "application/json"
            return r
        }
        if head.method == .GET, parts.count == 1 {
            var r = Response(.ok, WatchPage.html(room: parts[0]))
            r.contentType = "text/html; charset=utf-8"
            return r
        }
        return Response(.notFound, "open /ROOM in a browser to watch a room, POST a WHEP offer to /whep/ROOM, GET /rooms/ROOM, or POST an invitation code to /invite/ROOM")
    }

    /// 401 with the reason, and the challenge RFC 6750 §3 describes.
    static func unauthorized(_ refusal: AccessRefusal) -> Response {
        var r = Response(.unauthorized, "unauthorized: \(refusal.description)")
        let challenge = refusal.reason == .missing
            ? #"Bearer realm="screenshare""#
            : #"Bearer realm="screenshare", error="invalid_token", error_description=""# + refusal.description.replacing("\"", with: "'") + #"""#
        r.headers = [("WWW-Authenticate", challenge)]
        return r
    }

    private func write(_ r: Response, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: r.contentType)
        headers.add(name: "Content-Length", value: String(r.body.utf8.count))
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        headers.add(name: "Access-Control-Allow-Methods", value: "GET, POST, DELETE, OPTIONS")
        headers.add(name: "Access-Control-Allow-Headers", value: "Content-Type, Authorization")
        headers.add(name: "Access-Control-Expose-Headers", value: "Location, WWW-Authenticate")
        headers.add(name: "Cache-Control", value: "no-store")
        for (name, value) in r.headers { headers.add(name: name, value: value) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: r.status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: r.body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    static func split(_ uri: String) -> (String, [String: String]) {
        guard let q = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: q)...].split(separator: "&").prefix(16) {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { query[String(kv[0])] = PercentEncoding.decode(kv[1].replacing("+", with: " ")) }
        }
        return (String(uri[..<q]), query)
    }

    static func escape(_ s: String) -> String { PercentEncoding.encodePath(s, keepSlash: true) }
}
