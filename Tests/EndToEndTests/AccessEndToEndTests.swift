import Foundation
import Testing
import X11TestSupport

/// Who gets in, with real processes on loopback: `serve --secret-file` and tokens from
/// `screenshare token`; `start --room` hosting with a secret for the run; `--open-room`.
/// A refused `watch` or `start` exits 77 naming why, and no picture or sound reaches it.
@Suite(.serialized) struct AccessEndToEndTests {
    static func token(_ secretFile: String, room: String, role: String, extra: [String] = []) throws -> String {
        let r = try runScreenshare(["token", "--room", room, "--role", role, "--secret-file", secretFile] + extra)
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A token another implementation signs with the same secret (Python's hmac, as LiveKit's
    /// server SDKs do), with the claims given: for what `screenshare token` will not make (one
    /// already expired).
    static func pythonToken(_ secretFile: String, claims: String, dir: String) throws -> String {
        let script = """
        import base64, hashlib, hmac, json, sys
        b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        secret = open(sys.argv[1], "rb").read().rstrip(b"\\r\\n ")
        signing = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(sys.argv[2].encode())
        print(signing + "." + b64(hmac.new(secret, signing.encode(), hashlib.sha256).digest()))
        """
        let c = try Child(which("python3"), ["-c", script, secretFile, claims], dir: dir, name: "jwt-\(UUID().uuidString.prefix(6))")
        #expect(c.finish(within: 10) == 0, "\(c.stderr)")
        return c.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `watch` for 3 s; its exit status, stderr and `stopped` event.
    static func watch(_ dir: String, port: UInt16, room: String = "class", token: String?) throws -> (status: Int32, stderr: String, stopped: [String: Any]) {
        let v = try RoomEndToEndTests.viewer(dir, "v-\(UUID().uuidString.prefix(4))", room: room, port: port, duration: 3, token: token)
        let status = v.finish(within: 20, interrupt: false)
        return (status, v.stderr, EventLog(v.stdout).last(named: "stopped") ?? [:])
    }

    @Test func theTokenMatrixAgainstServe() throws {
        let dir = try makeTempDir()
        let secret = "\(dir)/secret"
        let port = freeEvenPort()
        let serve = try RoomEndToEndTests.serve(dir, port: port, duration: 60, access: ["--secret-file", secret])
        defer { _ = serve.finish(within: 0) }
        let started = try EventLog.wait(for: "started", in: serve)
        #expect(started["access"] as? String == "tokens")
        var mode = stat()
        #expect(stat(secret, &mode) == 0 && mode.st_mode & 0o777 == 0o600, "serve made its secret file, private")

        // A presenter with its token shares moving pictures.
        let presenterToken = try Self.token(secret, room: "class", role: "presenter", extra: ["--name", "Ms Smith"])
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let presenter = try RoomEndToEndTests.presenter(dir, "teacher", room: "class", ["--server", "127.0.0.1:\(port)", "--token", presenterToken],
                                                        input: input, size: "320x240", duration: 50)
        defer { _ = presenter.finish(within: 0) }
        let connected = try EventLog.wait(for: "connected", in: presenter)
        #expect(connected["room"] as? String == "class")
        _ = try EventLog.wait(for: "substream_started", in: serve)
        let joined = try #require(EventLog(serve.stdout).last(named: "peer_joined"))
        #expect(joined["name"] as? String == "Ms Smith", "the token names the presenter: \(joined)")

        // With a viewer token: pictures.
        let viewerToken = try Self.token(secret, room: "class", role: "viewer")
        let ok = try Self.watch(dir, port: port, token: viewerToken)
        #expect(ok.status == 0 && (ok.stopped["frames_decoded"] as? Int ?? 0) >= 20, "\(ok.stderr)")

        let now = Int(Date().timeIntervalSince1970)
        let expired = try Self.pythonToken(secret, claims: #"{"exp":\#(now - 60),"video":{"room":"class","roomJoin":true,"canSubscribe":true}}"#, dir: dir)
        let fromPython = try Self.pythonToken(secret, claims: #"{"exp":\#(now + 600),"video":{"room":"class","roomJoin":true,"canSubscribe":true}}"#, dir: dir)
        let otherSecret = "\(dir)/other"
        let foreign = try Self.pythonToken({ () -> String in
            _ = FileManager.default.createFile(atPath: otherSecret, contents: Data(String(repeating: "x", count: 40).utf8), attributes: [.posixPermissions: 0o600])
            return otherSecret
        }(), claims: #"{"exp":\#(now + 600),"video":{"room":"class","roomJoin":true}}"#, dir: dir)
        let cases: [(what: String, room: String, token: String?, says: String)] = [
            ("missing", "class", nil, "no token"),
            ("malformed", "class", "abc.def.ghi", "not a room token"),
            ("expired", "class", expired, "expired at"),
            ("another relay's", "class", foreign, "does not match this relay's secret"),
            ("another room's", "lab", viewerToken, "for room 'class', not 'lab'"),
        ]
        for c in cases {
            let r = try Self.watch(dir, port: port, room: c.room, token: c.token)
            #expect(r.status == 77, "\(c.what): exit \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("refused to admit you") && r.stderr.contains(c.says), "\(c.what): \(r.stderr)")
            #expect(r.stopped["packets_received"] as? Int == 0 && r.stopped["frames_decoded"] as? Int == 0, "\(c.what): \(r.stopped)")
        }
        // A token another implementation made is taken.
        let python = try Self.watch(dir, port: port, token: fromPython)
        #expect(python.status == 0 && (python.stopped["frames_decoded"] as? Int ?? 0) >= 20, "\(python.stderr)")

        // A viewer's token used to present: refused, 77, and the room never lists its streams.
        let intruder = try RoomEndToEndTests.presenter(dir, "intruder", room: "class", ["--server", "127.0.0.1:\(port)", "--token", viewerToken],
                                                       input: input, size: "320x240", duration: 10)
        #expect(intruder.finish(within: 20, interrupt: false) == 77, "\(intruder.stderr)")
        #expect(intruder.stderr.contains("a viewer token cannot present"), "\(intruder.stderr)")
        #expect(EventLog(serve.stdout).all.filter { $0["event"] as? String == "substream_started" }.count == 1, "only the teacher's screen")
        #expect(!serve.stdout.contains("intruder"))
        #expect(serve.isRunning)
    }

    @Test func aHostedRoomNeedsThePrintedTokenUnlessOpen() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()
        let presenter = try RoomEndToEndTests.presenter(dir, "teacher", room: "class", ["--listen", "127.0.0.1:\(port)"], input: input,
                                                        size: "320x240", duration: 30)
        defer { _ = presenter.finish(within: 0) }
        try waitUntilBound(port)
        let started = try EventLog.wait(for: "started", in: presenter)
        let token = try RoomEndToEndTests.viewerToken(started)
        #expect((started["browser_url_token"] as? String)?.contains("/class#token=\(token)&fp=sha256:") == true, "\(started)")
        #expect((started["browser_url"] as? String)?.contains("/class#k=") == true, "\(started)")

        let bare = try Self.watch(dir, port: port, token: nil)
        #expect(bare.status == 77 && bare.stderr.contains("no token"), "\(bare.stderr)")
        #expect(bare.stopped["packets_received"] as? Int == 0)
        let admitted = try Self.watch(dir, port: port, token: token)
        #expect(admitted.status == 0 && (admitted.stopped["frames_decoded"] as? Int ?? 0) >= 20, "\(admitted.stderr)")

        // --open-room: said loudly, and anyone joins.
        let openPort = freeEvenPort()
        let open = try RoomEndToEndTests.presenter(dir, "teacher2", room: "class", ["--listen", "127.0.0.1:\(openPort)", "--open-room"],
                                                   input: input, size: "320x240", duration: 30)
        defer { _ = open.finish(within: 0) }
        try waitUntilBound(openPort)
        let openStarted = try EventLog.wait(for: "started", in: open)
        #expect((openStarted["watch_command"] as? String)?.contains("--token") == false)
        #expect(open.stderr.contains("WARNING: --open-room"), "\(open.stderr)")
        let anyone = try Self.watch(dir, port: openPort, token: nil)
        #expect(anyone.status == 0 && (anyone.stopped["frames_decoded"] as? Int ?? 0) >= 20, "\(anyone.stderr)")
    }

    /// The claims of a JWT (its middle part, base64url), unverified.
    static func claims(_ token: String) throws -> [String: Any] {
        let parts = token.split(separator: ".")
        try #require(parts.count == 3, "\(token)")
        var b64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64 += "=" }
        let data = try #require(Data(base64Encoded: b64))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// `start --room --secret-file F --token-ttl`: the printed viewer token lives as long as
    /// asked, and a token `screenshare token --secret-file F --ttl` mints (its own lifetime)
    /// is admitted by the hosted room, since both use F's secret.
    @Test func aHostedRoomWithASecretFileAdmitsTokensMintedWithIt() throws {
        let dir = try makeTempDir()
        let secret = "\(dir)/secret"
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()
        let presenter = try RoomEndToEndTests.presenter(dir, "teacher", room: "class",
                                                        ["--listen", "127.0.0.1:\(port)", "--secret-file", secret, "--token-ttl", "45m"],
                                                        input: input, size: "320x240", duration: 30)
        defer { _ = presenter.finish(within: 0) }
        try waitUntilBound(port)
        let started = try EventLog.wait(for: "started", in: presenter)
        let printed = try Self.claims(try RoomEndToEndTests.viewerToken(started))
        let printedLife = (printed["exp"] as? Int ?? 0) - (printed["nbf"] as? Int ?? 0)
        #expect(printedLife == 45 * 60, "--token-ttl 45m: \(printed)")
        #expect((printed["video"] as? [String: Any])?["canPublish"] as? Bool != true, "a viewer token: \(printed)")

        let minted = try Self.token(secret, room: "class", role: "viewer", extra: ["--ttl", "90m"])
        let claims = try Self.claims(minted)
        #expect((claims["exp"] as? Int ?? 0) - (claims["nbf"] as? Int ?? 0) == 90 * 60, "--ttl 90m: \(claims)")
        let admitted = try Self.watch(dir, port: port, token: minted)
        #expect(admitted.status == 0 && (admitted.stopped["frames_decoded"] as? Int ?? 0) >= 20, "\(admitted.stderr)")
        // One minted with another secret is not.
        let other = "\(dir)/other"
        _ = FileManager.default.createFile(atPath: other, contents: Data(String(repeating: "y", count: 40).utf8), attributes: [.posixPermissions: 0o600])
        let stranger = try Self.token(other, room: "class", role: "viewer")
        let refused = try Self.watch(dir, port: port, token: stranger)
        #expect(refused.status == 77 && refused.stderr.contains("does not match this relay's secret"), "\(refused.stderr)")
    }
}
