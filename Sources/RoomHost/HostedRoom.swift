import Access
import Congestion
import Control
import Events
import Logging
import MediaCore
import Basics
import Relay
import Room
import Transport
import WebRTC

/// The room `start --room` hosts itself (no `--server`): the relay in this process, who may
/// enter (a secret and the tokens made with it, or an open room), and what the presenter hands
/// out — the `watch` line, the browser link with its short invitation code, and the same link
/// with the token itself for scripts. `ctl invite` renews or revokes the code through it.
public final class HostedRoom: RoomInvitations {
    /// Why a room cannot be hosted; the CLI maps each to its exit code.
    public enum Failure: Error, CustomStringConvertible {
        /// The address cannot be listened on (in use, not ours).
        case listen(String)
        /// The secret file cannot be read or made.
        case secretFile(String)
        /// Tokens or the relay's certificate could not be made.
        case setUp(String)

        public var description: String {
            switch self {
            case .listen(let why), .secretFile(let why), .setUp(let why): why
            }
        }
    }

    /// Where the room listens and who may enter.
    public struct Options: Sendable {
        public var room: String
        /// The address given (`--listen`): "0.0.0.0" for every interface, or one address.
        public var host: String
        /// 0: the system picks one.
        public var port: UInt16
        /// Our name in the room.
        public var displayName: String
        /// The name our presenter token gives us (`--name`; nil: the token names nobody).
        public var presenterName: String?
        /// Tokens signed with the secret in this file (made when missing); nil: a secret for
        /// this run only.
        public var secretFile: String?
        /// Anyone who reaches the relay enters, without a token.
        public var open = false
        /// How long the viewers' token (and so the link's code) admits.
        public var viewerTokenSeconds: Double = 12 * 3600
        /// FEC for the room's browsers.
        public var fec: FECPolicy.Mode = .auto
        /// HTTPS for the page and the links (`--tls-cert`/`--tls-key`); nil: plain HTTP.
        public var tls: TLSFiles?
        /// The Janus servers the room's screen is fanned out through (`--janus`), and where
        /// their events go (the relay's other events are the presenter's own).
        public var janus: JanusCascade?
        public var janusEvents: EventSink?

        public init(room: String, displayName: String, host: String, port: UInt16) {
            self.room = room
            self.displayName = displayName
            self.host = host
            self.port = port
        }
    }

    public let relay: RelayServer
    /// How our own broadcaster joins the room: over loopback (or the one address listened on),
    /// with the presenter token, pinning the relay's certificate; the lines viewers are given.
    public let settings: RoomSettings
    /// Where the broadcaster sends (the relay in this process).
    public let destination: Endpoint
    private let options: Options
    private let viewerToken: String?
    private let viewerTokenExpires: UInt64
    /// The page's address without the fragment: `http://HOST:PORT/ROOM`.
    private let page: String
    private let clock: any MediaClock

    /// Starts the relay and makes the tokens and the first invitation code.
    public init(_ options: Options, logger: Logger, clock: any MediaClock = SystemClock()) throws(Failure) {
        self.options = options
        self.clock = clock
        var access: (authority: TokenAuthority, presenter: String, viewer: String)?
        if !options.open {
            access = try Self.tokens(options)
        }
        var browserLimits = BrowserLimits()
        browserLimits.fec = options.fec
        do {
            relay = try RelayServer(host: options.host, port: options.port, events: nil, logger: logger, clock: clock, browsers: true,
                                    browserLimits: browserLimits, authorizer: access?.authority, tls: options.tls, janus: options.janus,
                                    janusEvents: options.janusEvents)
        } catch let error as NetworkError {
            throw .listen("\(error)")
        } catch {
            throw .setUp("\(error)")
        }
        relay.start()
        let port = relay.port  // the one the system picked for ADDR:0
        let local = options.host == "0.0.0.0" ? "127.0.0.1" : options.host
        destination = Endpoint(host: local, port: port)
        let reachable = options.host == "0.0.0.0" ? (localIPv4Addresses().first ?? "127.0.0.1") : options.host
        // With HTTPS the link names the certificate's host (what a browser checks it against).
        page = (options.tls.map { "https://\($0.hostName ?? reachable):\(port)" } ?? "http://\(reachable):\(port)")
            + "/\(PercentEncoding.encodePath(options.room))"
        viewerToken = access?.viewer
        // The viewers' token was made just now: it lapses this long from now, and so do its codes.
        let expires = clock.wallNanos() + UInt64(options.viewerTokenSeconds * 1e9)
        viewerTokenExpires = expires
        let (relay, page) = (relay, page)
        var settings = RoomSettings(name: options.room, displayName: options.displayName, server: "\(reachable):\(port)")
        settings.token = access?.presenter
        settings.fingerprint = DTLSCertificate.parseFingerprint(relay.fingerprint)
        settings.watchCommand = "screenshare watch --room \(Self.shellQuoted(options.room)) --server \(reachable):\(port)"
            + " --fingerprint \(relay.fingerprint)" + (access.map { " --token \($0.viewer)" } ?? "")
        settings.browserTokenURL = page + (access.map { "#token=\($0.viewer)&fp=" } ?? "#fp=") + relay.fingerprint
        // An open room's page needs no code: its link is the page itself.
        if let viewer = access?.viewer {
            settings.browserURL = Self.invite(relay.invites, room: options.room, page: page, token: viewer, expires: expires)
        } else {
            settings.browserURL = page
        }
        self.settings = settings
    }

    /// A new invitation link (a fresh code for the viewers' token); the old code stops working.
    /// An open room has no code: its link is the page.
    public func renew() -> String {
        guard let viewerToken else { return page }
        return Self.invite(relay.invites, room: options.room, page: page, token: viewerToken, expires: viewerTokenExpires)
    }

    /// Issues a code for `token` that lapses when the token does, and returns the link with it
    /// (a renewed code stands for the same token: the code is renewed, not the token).
    private static func invite(_ book: InviteBook, room: String, page: String, token: String, expires: UInt64) -> String {
        page + "#k=" + book.issue(InviteBook.Invite(room: room, token: token, expiresWallNanos: expires))
    }

    /// The invitation code stops working; viewers in the room stay.
    public func revoke() {
        relay.invites.revoke(room: options.room)
    }

    /// Reads the HTTPS certificate and key again (SIGHUP); an error leaves the one in use.
    public func reloadTLS() throws(FileError) { try options.tls?.reload() }

    /// Stops the relay, its browsers told the end is on purpose.
    public func stop() { relay.stopAndWait() }

    /// The secret (read or made, or one for this run), the relay's authority, our presenter
    /// token and the viewers' token.
    private static func tokens(_ options: Options) throws(Failure) -> (authority: TokenAuthority, presenter: String, viewer: String) {
        let secret: [UInt8]
        if let file = options.secretFile {
            do { secret = try SecretFile.readOrCreate(file).secret } catch {
                throw .secretFile("--secret-file: \(error)")
            }
        } else {
            secret = SecretFile.random()
        }
        let (room, name, ttl) = (options.room, options.presenterName, options.viewerTokenSeconds)
        do {
            return try Blocking.run {
                let authority = try await TokenAuthority(secret: secret)
                // Ours never leaves this process; it must outlast any run (rejoins check it again).
                let presenter = try await authority.mint(room: room, role: .presenter, name: name, ttl: 366 * 86_400)
                let viewer = try await authority.mint(room: room, role: .viewer, ttl: ttl)
                return (authority, presenter, viewer)
            }
        } catch {
            throw .setUp("cannot make the room's tokens: \(error)")
        }
    }

    /// `text` as one shell word (single quotes when it needs any).
    public static func shellQuoted(_ text: String) -> String {
        let plain = text.allSatisfy { $0.isLetter || $0.isNumber || "-_.,:@%+=/".contains($0) }
        return plain ? text : "'" + text.replacing("'", with: "'\\''") + "'"
    }
}
