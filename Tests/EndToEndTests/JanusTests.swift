import Foundation
import Testing
import X11TestSupport

/// Debian's Janus (1.1.2) with a configuration of the test's own (`janus -F DIR`): the streaming
/// plugin with an `admin_key`, the HTTP transport on the host's address, nothing else loaded.
/// It runs in a network namespace of its own (``VirtualHost``): Janus gathers no loopback ICE
/// candidates, so its viewers reach it there, and the relay feeds it across the veth pair.
final class JanusInstance {
    let lan: VirtualHost
    let dir: String
    let httpPort: Int
    let adminKey: String
    private(set) var child: Child

    /// `slot` keeps two servers in one namespace on separate ports.
    init(on lan: VirtualHost, dir parent: String, slot: Int = 0, adminKey: String = "the-admin-key") throws {
        self.lan = lan
        self.adminKey = adminKey
        httpPort = 18_088 + slot
        dir = "\(parent)/janus-\(slot)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let lib = "/usr/lib/x86_64-linux-gnu/janus"
        let unused = ["audiobridge", "duktape", "echotest", "lua", "nosip", "recordplay", "sip", "textroom", "videocall", "videoroom", "voicemail"]
        let files = [
            "janus.jcfg": """
                general: { configs_folder = "\(dir)", plugins_folder = "\(lib)/plugins", transports_folder = "\(lib)/transports",
                  events_folder = "\(lib)/events", loggers_folder = "\(lib)/loggers", debug_level = 4 }
                media: { rtp_port_range = "\(30_000 + slot * 1000)-\(30_499 + slot * 1000)" }
                nat: { }
                plugins: { disable = "\(unused.map { "libjanus_\($0).so" }.joined(separator: ","))" }
                transports: { disable = "libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_pfunix.so,libjanus_rabbitmq.so,libjanus_websockets.so" }
                events: { broadcast = false }
                loggers: { disable = "libjanus_jsonlog.so" }
                """,
            "janus.plugin.streaming.jcfg": """
                general: { admin_key = "\(adminKey)", rtp_port_range = "\(30_500 + slot * 1000)-\(30_999 + slot * 1000)" }
                """,
            "janus.transport.http.jcfg": """
                general: { json = "compact", base_path = "/janus", http = true, port = \(httpPort), ip = "\(lan.address)", https = false }
                admin: { admin_http = false }
                """,
        ]
        for (name, text) in files { try text.write(toFile: "\(dir)/\(name)", atomically: true, encoding: .utf8) }
        child = try Self.launch(lan, dir)
        try waitReady()
    }

    deinit { _ = child.finish(within: 0) }

    var url: String { "http://\(lan.address):\(httpPort)/janus" }

    private static func launch(_ lan: VirtualHost, _ dir: String) throws -> Child {
        try lan.run(which("janus"), ["-F", dir, "-C", "\(dir)/janus.jcfg", "--disable-colors"], dir: dir, name: "janus")
    }

    /// Until its HTTP transport says it listens.
    func waitReady() throws {
        try waitUntil(seconds: 20, "Janus's HTTP transport started: \(child.stdout.suffix(1500))") {
            guard child.isRunning else { throw TestFailure("janus exited: \(child.stdout.suffix(1500)) \(child.stderr.suffix(500))") }
            return child.stdout.contains("HTTP webserver started")
        }
    }

    /// Kills it (SIGKILL: as a crash) and, when `restart`, starts it again.
    func kill(restart: Bool) throws {
        if child.isRunning {
            Glibc.kill(child.pid, SIGKILL)
            _ = child.finish(within: 5)
        }
        if restart { try self.restart() }
    }

    /// Starts it again (with the same configuration and ports).
    func restart() throws {
        child = try Self.launch(lan, dir)
        try waitReady()
    }

    /// The streaming plugin's `list`: the ids of its mountpoints (a session of the test's own).
    func mountpoints() throws -> [Int] {
        let session = try post("", #"{"janus":"create","transaction":"l1"}"#)
        guard let sid = ((session["data"] as? [String: Any])?["id"]) as? Int else { throw TestFailure("no session: \(session)") }
        let handle = try post("/\(sid)", #"{"janus":"attach","plugin":"janus.plugin.streaming","transaction":"l2"}"#)
        guard let hid = ((handle["data"] as? [String: Any])?["id"]) as? Int else { throw TestFailure("no handle: \(handle)") }
        let list = try post("/\(sid)/\(hid)", #"{"janus":"message","transaction":"l3","body":{"request":"list","admin_key":"\#(adminKey)"}}"#)
        _ = try? post("/\(sid)", #"{"janus":"destroy","transaction":"l4"}"#)
        let data = ((list["plugindata"] as? [String: Any])?["data"] as? [String: Any])
        return (data?["list"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
    }

    private func post(_ path: String, _ body: String) throws -> [String: Any] {
        let c = try Child(which("curl"), ["-s", "--max-time", "5", "-X", "POST", url + path, "-d", body], dir: dir, name: "curl")
        guard c.finish(within: 10) == 0, let object = try JSONSerialization.jsonObject(with: Data(c.stdout.utf8)) as? [String: Any] else {
            throw TestFailure("Janus at \(url) did not answer \(body): \(c.stdout) \(c.stderr)")
        }
        return object
    }
}

/// The relay fans a room's screen out through Janus (`serve --janus`): a mountpoint per screen
/// shared, fed as SRTP, watched by viewers that are not ours through Janus's own API.
@Suite(.serialized) struct JanusTests {
    /// A still slide (ffmpeg's test card), as NV12 and its Y plane.
    static func slide(_ dir: String) throws -> (path: String, luma: [UInt8]) {
        let path = "\(dir)/slide-640x360.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=640x360:rate=1",
                                           "-frames:v", "1", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path]) == 0)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return (path, Array(bytes[0..<(640 * 360)]))
    }

    static func serve(_ dir: String, port: UInt16, janus: [JanusInstance], adminKey: String? = nil, duration: Double = 40,
                      extra: [String] = []) throws -> Child {
        var args = ["serve", "--listen", ":\(port)", "--open", "--duration", String(duration), "--json"] + extra
        for j in janus { args += ["--janus", j.url] }
        args += ["--janus-admin-key", adminKey ?? janus[0].adminKey]
        let c = try Child(screenshareBinary(), args, dir: dir, name: "serve")
        try waitUntilBound(port)
        _ = try EventLog.wait(for: "started", in: c)
        return c
    }

    /// A network namespace with one Janus, and `serve --janus` feeding it (`extra`: more flags).
    static func relayWithOneJanus(extra: [String] = []) throws -> (lan: VirtualHost, dir: String, janus: JanusInstance, port: UInt16, serve: Child) {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let janus = try JanusInstance(on: lan, dir: dir)
        let port = freeEvenPort()
        return (lan, dir, janus, port, try serve(dir, port: port, janus: [janus], extra: extra))
    }

    /// `audio`: [] for none, else the sound flags (`--audio-app NAME --no-mic`) with `environment`'s PulseAudio.
    static func presenter(_ dir: String, port: UInt16, input: String, content: String = "detail", duration: Int,
                          audio: [String] = ["--no-audio"], environment: [String: String] = [:], extra: [String] = []) throws -> Child {
        try Child(screenshareBinary(), ["start", "--room", "class", "--server", "127.0.0.1:\(port)", "--name", "teacher", "--input", input,
                                        "--input-size", "640x360", "--input-fps", "10", "--content", content] + audio + extra
                  + ["--duration", String(duration), "--json"], dir: dir, name: "teacher", environment: environment)
    }

    /// aiortc watching a mountpoint through Janus's HTTP API, in Janus's namespace.
    static func viewer(_ lan: VirtualHost, _ janus: JanusInstance, id: Int, seconds: Int, dir: String, name: String = "aiortc") throws -> Child {
        try lan.run(BrowserWHEPTests.python, [scriptPath("lib/janus-watch.py"), janus.url, String(seconds), "--id", String(id),
                                              "--save-y", "\(dir)/\(name).y"], dir: dir, name: name)
    }

    /// The presenter shares a slide; the relay makes a mountpoint on Janus and feeds it; aiortc
    /// watches it through Janus: Janus's keyframe request reaches the presenter, the slide
    /// arrives sharp (Y-PSNR against what was drawn). The presenter leaving removes the
    /// mountpoint from Janus.
    @Test func aViewerThroughJanusWatchesTheSlideAndTheMountpointGoesWithThePresenter() throws {
        let (lan, dir, janus, port, serve) = try Self.relayWithOneJanus()
        defer { _ = serve.finish(within: 0) }
        let slide = try Self.slide(dir)
        // With sound: an application's tone, from a private PulseAudio.
        let pulse = try PrivatePulse()
        let tone = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        defer { tone.finish(within: 0, interrupt: false) }
        let presenter = try Self.presenter(dir, port: port, input: slide.path, duration: 14, audio: ["--audio-app", "lecture-app", "--no-mic"],
                                           environment: pulse.environment)
        defer { _ = presenter.finish(within: 0) }
        let created = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "created" }
        #expect(created["room"] as? String == "class" && created["presenter"] as? String == "teacher" && created["server"] as? String == janus.url,
                "\(created)")
        let id = try #require(created["id"] as? Int)
        #expect(try janus.mountpoints().contains(id))
        let viewer = try Self.viewer(lan, janus, id: id, seconds: 6, dir: dir)
        #expect(viewer.finish(within: 40) == 0, "\(viewer.stdout.suffix(1500)) \(viewer.stderr.suffix(1500))")
        let done = try #require(EventLog(viewer).last(named: "done"), "\(viewer.stdout.suffix(1500))")
        #expect(done["width"] as? Int == 640 && done["height"] as? Int == 360, "\(done)")
        // The sound too: Opus at 50 frames a second.
        #expect((done["audio_frames"] as? Int ?? 0) >= 150, "\(done)")
        // A still slide: its keyframe (asked for by Janus when the viewer came, through the
        // relay's throttle) and the refinements after it.
        #expect((done["video_frames"] as? Int ?? 0) >= 3, "\(done)")
        let got = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/aiortc.y")))
        let quality = psnr(slide.luma[...], got)
        print("through Janus: \(done["video_frames"] ?? "-") pictures and \(done["audio_frames"] ?? "-") audio frames in 6 s, first after \(EventLog(viewer).first(named: "first_picture")?["seconds"] ?? "-") s, Y-PSNR \(String(format: "%.1f", quality)) dB")
        #expect(quality >= 40, "Y-PSNR \(quality) dB")
        // Janus asked for the keyframe (its viewer came after the first one).
        let janusStats = EventLog(serve).events(named: "stats").compactMap { ($0["janus"] as? [[String: Any]])?.first }
        #expect(janusStats.contains { ($0["keyframe_requests"] as? Int ?? 0) > 0 }, "\(janusStats)")
        #expect(janusStats.contains { ($0["packets"] as? Int ?? 0) > 0 && $0["mountpoints"] as? Int == 1 }, "\(janusStats)")
        // The mountpoint is in the room as what it is, not as a browser.
        let joined = EventLog(serve).events(named: "peer_joined").filter { $0["role"] as? String == "viewer" }
        #expect(joined.map { $0["client"] as? String } == ["janus"], "\(joined)")
        #expect(EventLog(serve).events(named: "stats").allSatisfy { $0["browsers"] as? Int == 0 })

        #expect(presenter.finish(within: 30) == 0, "\(presenter.stderr)")
        let removed = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "removed" }
        #expect(removed["id"] as? Int == id)
        #expect(try !janus.mountpoints().contains(id))
        // Neither the pin nor the secret is in the relay's output.
        #expect(!serve.stdout.contains("secret") && !serve.stdout.contains("pin\""))
    }

    /// A wrong admin key: a warning naming Janus's refusal, retried with backoff (not once a
    /// turn), and the room unaffected — `watch` still gets the presenter's pictures.
    @Test func aWrongAdminKeyIsAWarningAndTheRoomGoesOn() throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let janus = try JanusInstance(on: lan, dir: dir)
        let port = freeEvenPort()
        let serve = try Self.serve(dir, port: port, janus: [janus], adminKey: "not-the-key", duration: 30)
        defer { _ = serve.finish(within: 0) }
        let slide = try Self.slide(dir)
        let presenter = try Self.presenter(dir, port: port, input: slide.path, duration: 10)
        defer { _ = presenter.finish(within: 0) }
        let warning = try EventLog.wait(for: "warning", in: serve) { $0["kind"] as? String == "janus" }
        #expect(warning["server"] as? String == janus.url && (warning["message"] as? String ?? "").contains("wrong admin_key"), "\(warning)")
        let watcher = try Child(screenshareBinary(), ["watch", "--room", "class", "--server", "127.0.0.1:\(port)", "--headless",
                                                      "--duration", "4", "--json"], dir: dir, name: "watch")
        #expect(watcher.finish(within: 30) == 0, "\(watcher.stderr)")
        let stopped = try EventLog(watcher).stopped()
        #expect((stopped["frames_decoded"] as? Int ?? 0) >= 3 && stopped["width"] as? Int == 640, "\(stopped)")
        #expect(EventLog(serve).events(named: "janus_mountpoint").isEmpty)
        // The same refusal is said once, not at every retry.
        #expect(EventLog(serve).events(named: "warning").filter { $0["kind"] as? String == "janus" }.count == 1, "\(serve.stdout.suffix(3000))")
        #expect(try janus.mountpoints().isEmpty)
    }

    /// Two Janus servers fed at once; one is killed mid-stream and started again. Its
    /// mountpoint is `lost`, then `recreated` within 3 s of Janus answering again, and a viewer
    /// of the new one has pictures within 5 s of the restart; the other server's viewer never
    /// stops getting pictures.
    @Test func aJanusKilledAndRestartedGetsItsMountpointBackAndTheOtherIsNotInterrupted() throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let first = try JanusInstance(on: lan, dir: dir, slot: 0), second = try JanusInstance(on: lan, dir: dir, slot: 1)
        let port = freeEvenPort()
        let serve = try Self.serve(dir, port: port, janus: [first, second], duration: 60)
        defer { _ = serve.finish(within: 0) }
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Self.presenter(dir, port: port, input: input, content: "motion", duration: 40)
        defer { _ = presenter.finish(within: 0) }
        func mountpoint(_ j: JanusInstance, _ state: String, count: Int = 1) throws -> Int {
            let e = try EventLog.wait(for: "janus_mountpoint", in: serve, count: count) { $0["server"] as? String == j.url && $0["state"] as? String == state }
            return try #require(e["id"] as? Int)
        }
        let steady = try Self.viewer(lan, second, id: try mountpoint(second, "created"), seconds: 16, dir: dir, name: "steady")
        defer { _ = steady.finish(within: 0) }
        let doomed = try Self.viewer(lan, first, id: try mountpoint(first, "created"), seconds: 16, dir: dir, name: "doomed")
        defer { _ = doomed.finish(within: 0) }
        _ = try EventLog.wait(for: "stats", in: doomed, seconds: 20) { ($0["video_frames"] as? Int ?? 0) > 0 }
        _ = try EventLog.wait(for: "stats", in: steady, count: 3, seconds: 20) { ($0["video_frames"] as? Int ?? 0) > 0 }

        try first.kill(restart: false)
        let lost = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["server"] as? String == first.url && $0["state"] as? String == "lost" }
        #expect(lost["presenter"] as? String == "teacher")
        let warning = try EventLog.wait(for: "warning", in: serve) { $0["kind"] as? String == "janus" }
        #expect(warning["server"] as? String == first.url, "\(warning)")
        let restartedAt = Date()
        try first.restart()
        let recreated = try EventLog.wait(for: "janus_mountpoint", in: serve, seconds: 10) {
            $0["server"] as? String == first.url && $0["state"] as? String == "recreated"
        }
        let recreatedAfter = (recreated.eventTime ?? Date()).timeIntervalSince(restartedAt)
        #expect(recreatedAfter < 3, "recreated \(recreatedAfter) s after the restart")
        let id = try #require(recreated["id"] as? Int)
        #expect(try first.mountpoints() == [id])
        let back = try Self.viewer(lan, first, id: id, seconds: 4, dir: dir, name: "back")
        let picture = try EventLog.wait(for: "first_picture", in: back, seconds: 10)
        let backAfter = Date().timeIntervalSince(restartedAt)
        print("Janus restarted: mountpoint recreated after \(String(format: "%.2f", recreatedAfter)) s, a viewer's first picture \(picture["seconds"] ?? "-") s after asking, \(String(format: "%.1f", backAfter)) s after the restart")
        #expect(backAfter < 5, "\(backAfter) s")
        #expect(back.finish(within: 20) == 0, "\(back.stdout.suffix(1000))")

        // The other server's viewer got pictures every second throughout.
        #expect(steady.finish(within: 30) == 0, "\(steady.stdout.suffix(1500))")
        let counts = EventLog(steady).events(named: "stats").compactMap { $0["video_frames"] as? Int }
        let gains = zip(counts.dropFirst(), counts).map { $0 - $1 }
        #expect(counts.count >= 14 && gains.dropFirst(2).allSatisfy { $0 >= 5 }, "frames each second: \(gains)")
    }

    /// `start --room` hosting the room takes the same flags: its own relay feeds Janus, and the
    /// presenter says so (`janus_mountpoint`). Its room admits by token, so the mountpoint has
    /// a pin: a viewer of Janus without it is refused.
    @Test func aHostedRoomFeedsJanusBehindAPin() throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let janus = try JanusInstance(on: lan, dir: dir)
        let port = freeEvenPort()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Child(screenshareBinary(), ["start", "--room", "class", "--listen", ":\(port)", "--input", input,
                                                        "--input-size", "640x360", "--input-fps", "10", "--content", "motion", "--no-audio",
                                                        "--janus", janus.url, "--janus-admin-key-file", try Self.keyFile(dir, janus.adminKey),
                                                        "--duration", "8", "--json"], dir: dir, name: "teacher")
        defer { _ = presenter.finish(within: 0) }
        let created = try EventLog.wait(for: "janus_mountpoint", in: presenter) { $0["state"] as? String == "created" }
        let id = try #require(created["id"] as? Int)
        #expect(try janus.mountpoints() == [id])
        let viewer = try Self.viewer(lan, janus, id: id, seconds: 3, dir: dir)
        #expect(viewer.finish(within: 30) == 2, "\(viewer.stdout.suffix(1500))")
        let refused = try #require(EventLog(viewer).last(named: "refused"), "\(viewer.stdout.suffix(1500))")
        #expect((refused["error"] as? String ?? "").contains("pin"), "\(refused)")
        #expect(presenter.finish(within: 30) == 0, "\(presenter.stderr)")
        // Leaving, the hosted relay removes what it made.
        #expect(try janus.mountpoints().isEmpty)
    }

    /// `--janus-remb`: Janus's REMB (the lowest of its viewers' estimates, once a second; here
    /// aiortc's, from the abs-send-time Janus stamps) caps what the presenter sends; without
    /// the flag the same viewer leaves the presenter's rate alone (one slow Janus viewer must
    /// not slow the room).
    @Test(arguments: [true, false]) func janusREMBCapsThePresenterOnlyWhenAskedTo(_ capped: Bool) throws {
        let (lan, dir, janus, port, serve) = try Self.relayWithOneJanus(extra: capped ? ["--janus-remb"] : [])
        defer { _ = serve.finish(within: 0) }
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Self.presenter(dir, port: port, input: input, content: "motion", duration: 20, extra: ["--bitrate", "4M"])
        defer { _ = presenter.finish(within: 0) }
        let created = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "created" }
        let viewer = try Self.viewer(lan, janus, id: try #require(created["id"] as? Int), seconds: 10, dir: dir)
        #expect(viewer.finish(within: 40) == 0, "\(viewer.stdout.suffix(1500)) \(viewer.stderr.suffix(1500))")
        #expect(presenter.finish(within: 30) == 0, "\(presenter.stderr)")
        let targets = EventLog(presenter).events(named: "stats").compactMap { $0["target_kbps"] as? Int }
        print("--janus-remb \(capped): the presenter's target each second \(targets) kbit/s")
        if capped {
            // Capped while Janus's viewer watched (aiortc estimates well under 4 Mbit/s of a
            // 640×360 stream), and free again once its REMB stopped (it lapses after 3 s).
            #expect(targets.contains { $0 < 3000 }, "\(targets)")
            #expect(targets.suffix(2).allSatisfy { $0 == 4000 }, "\(targets)")
        } else {
            #expect(targets.count >= 15 && targets.allSatisfy { $0 == 4000 }, "\(targets)")
        }
    }

    static func keyFile(_ dir: String, _ key: String) throws -> String {
        let path = "\(dir)/janus-admin-key"
        try (key + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Done when: a room behind tokens, two Janus servers, and browsers that open the relay's
    /// link are sent through both — the relay admits each by its token, then hands its page a
    /// mountpoint and its pin, on the server it has sent the fewest browsers to. Chromium plays
    /// the slide from Janus, sharp.
    @Test func browsersOfATokenRoomAreSentThroughBothJanusServers() throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let first = try JanusInstance(on: lan, dir: dir, slot: 0), second = try JanusInstance(on: lan, dir: dir, slot: 1)
        let secret = "\(dir)/secret"
        let port = freeEvenPort()
        let args = ["serve", "--listen", ":\(port)", "--secret-file", secret, "--duration", "90", "--json",
                    "--janus", first.url, "--janus", second.url, "--janus-admin-key", first.adminKey]
        let serve = try Child(screenshareBinary(), args, dir: dir, name: "serve")
        defer { _ = serve.finish(within: 0) }
        try waitUntilBound(port)
        _ = try EventLog.wait(for: "started", in: serve)
        let slide = try Self.slide(dir)
        let presenterToken = try AccessEndToEndTests.token(secret, room: "class", role: "presenter", extra: ["--name", "teacher"])
        let presenter = try Child(screenshareBinary(), ["start", "--room", "class", "--server", "127.0.0.1:\(port)", "--token", presenterToken,
                                                        "--input", slide.path, "--input-size", "640x360", "--input-fps", "10", "--no-audio",
                                                        "--duration", "80", "--json"], dir: dir, name: "teacher")
        defer { _ = presenter.finish(within: 0) }
        for j in [first, second] {
            _ = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["server"] as? String == j.url && $0["state"] as? String == "created" }
        }
        let viewerToken = try AccessEndToEndTests.token(secret, room: "class", role: "viewer")
        let url = "http://\(lan.relayAddress):\(port)/class#token=\(viewerToken)"
        for name in ["first-browser", "second-browser"] {
            let dump = "\(dir)/\(name).y"
            let page = try lan.run(BrowserWHEPTests.python, [BrowserWHEPTests.script("browser-watch.py"), url, "6", "--no-loopback", "--dump-luma", dump],
                                   dir: dir, name: name)
            #expect(page.finish(within: 90) == 0, "\(page.stderr.suffix(2000))")
            let log = EventLog(page.stdout)
            let last = try #require(log.last(named: "page"), "\(page.stdout.suffix(1500))")
            #expect(last["via"] as? String == "janus" && last["state"] as? String == "connected", "\(last)")
            #expect(last["width"] as? Int == 640 && (last["frames"] as? Int ?? 0) >= 2, "\(last)")
            let shown = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dump)))
            let quality = psnr(shown[...], slide.luma)
            print("\(name) through Janus: first picture \(log.first(named: "first_picture")?["seconds"] ?? "?") s after asking for the page, Y-PSNR \(String(format: "%.1f", quality)) dB")
            #expect(quality >= 35, "Y-PSNR \(quality) dB")
        }
        // One browser sent to each server, and each server's viewer's keyframe request came back.
        let stats = try EventLog.wait(for: "stats", in: serve) { e in
            (e["janus"] as? [[String: Any]] ?? []).map { $0["browsers_sent"] as? Int ?? 0 } == [1, 1]
        }
        #expect((stats["browsers"] as? Int ?? -1) >= 0)
    }

    /// A moving screen through Janus to Chromium: the `<video>`'s frame count grows every second
    /// (not a picture that arrived once and froze).
    @Test func chromiumThroughJanusPlaysAMovingScreen() throws {
        let (lan, dir, janus, port, serve) = try Self.relayWithOneJanus()
        defer { _ = serve.finish(within: 0) }
        defer { withExtendedLifetime(janus) {} }  // its deinit stops Janus
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Self.presenter(dir, port: port, input: input, content: "motion", duration: 30)
        defer { _ = presenter.finish(within: 0) }
        _ = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "created" }
        let page = try lan.run(BrowserWHEPTests.python, [BrowserWHEPTests.script("browser-watch.py"), "http://\(lan.relayAddress):\(port)/class",
                                                         "7", "--no-loopback"], dir: dir, name: "chromium")
        #expect(page.finish(within: 90) == 0, "\(page.stderr.suffix(2000))")
        let pages = EventLog(page.stdout).events(named: "page").filter { ($0["frames"] as? Int ?? 0) > 0 }
        #expect(pages.last?["via"] as? String == "janus", "\(pages.last ?? [:])")
        // The page is sampled 4 times a second: the count at the end of each whole second.
        var bySecond: [Int: Int] = [:]
        for p in pages { if let t = p["t"] as? Double, let f = p["frames"] as? Int { bySecond[Int(t)] = f } }
        let frames = bySecond.keys.sorted().dropFirst().dropLast().map { bySecond[$0]! }  // whole seconds only
        let gains = zip(frames.dropFirst(), frames).map { $0 - $1 }
        print("Chromium through Janus, a moving screen at 10 fps: frames each second \(gains)")
        #expect(gains.count >= 4 && gains.allSatisfy { $0 >= 5 }, "frames each second: \(gains)")
    }

    /// Every Janus down: the relay sends no browser there, and the page watches from the relay.
    @Test func withItsJanusDownABrowserWatchesFromTheRelay() throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let janus = try JanusInstance(on: lan, dir: dir)
        let port = freeEvenPort()
        let serve = try Self.serve(dir, port: port, janus: [janus], duration: 60)
        defer { _ = serve.finish(within: 0) }
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Self.presenter(dir, port: port, input: input, content: "motion", duration: 50)
        defer { _ = presenter.finish(within: 0) }
        _ = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "created" }
        try janus.kill(restart: false)
        _ = try EventLog.wait(for: "janus_mountpoint", in: serve) { $0["state"] as? String == "lost" }
        let page = try lan.run(BrowserWHEPTests.python, [BrowserWHEPTests.script("browser-watch.py"), "http://\(lan.relayAddress):\(port)/class", "4",
                                                         "--no-loopback", "--no-luma"], dir: dir, name: "chromium")
        #expect(page.finish(within: 90) == 0, "\(page.stderr.suffix(2000))")
        let last = try #require(EventLog(page.stdout).last(named: "page"), "\(page.stdout.suffix(1500))")
        #expect(last["via"] as? String == "relay" && last["state"] as? String == "connected" && (last["frames"] as? Int ?? 0) >= 10, "\(last)")
    }

    /// What claims to be Janus and is not: one server that accepts and never answers, one that
    /// answers a web page. Each is one warning saying what is wrong (every request has a
    /// deadline), retried; the relay's own thread never waits for them (its stats come every
    /// second) and the room goes on.
    @Test func aJanusThatHangsOrAnswersGarbageIsAWarningAndTheRoomGoesOn() throws {
        let dir = try makeTempDir()
        let hanging = freeEvenPort(), garbage = freeEvenPort()
        let fake = """
            import socket, sys, threading, time
            def serve(port, answer):
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port)); s.listen(64)
                held = []
                while True:
                    c, _ = s.accept()
                    if answer is None:
                        held.append(c)  # read nothing, answer nothing
                    else:
                        c.recv(65536); c.sendall(answer); c.close()
            page = b"HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\nContent-Length: 21\\r\\nConnection: close\\r\\n\\r\\n<html>not janus</html>"
            threading.Thread(target=serve, args=(int(sys.argv[1]), None), daemon=True).start()
            threading.Thread(target=serve, args=(int(sys.argv[2]), page), daemon=True).start()
            print("ready", flush=True)
            time.sleep(120)
            """
        let server = try Child(which("python3"), ["-c", fake, String(hanging), String(garbage)], dir: dir, name: "fake-janus")
        defer { _ = server.finish(within: 0) }
        try waitUntil(seconds: 10, "the fake servers listen") { server.stdout.contains("ready") }
        let port = freeEvenPort()
        let serve = try Child(screenshareBinary(), ["serve", "--listen", "127.0.0.1:\(port)", "--open", "--duration", "30", "--json",
                                                    "--janus", "http://127.0.0.1:\(hanging)/janus", "--janus", "http://127.0.0.1:\(garbage)/janus",
                                                    "--janus-admin-key", "k"], dir: dir, name: "serve")
        defer { _ = serve.finish(within: 0) }
        try waitUntilBound(port)
        _ = try EventLog.wait(for: "started", in: serve)
        let input = try PlainSession.motion(width: 640, height: 360, fps: 10, frames: 40, in: dir)
        let presenter = try Self.presenter(dir, port: port, input: input, content: "motion", duration: 20)
        defer { _ = presenter.finish(within: 0) }
        let notJanus = try EventLog.wait(for: "warning", in: serve) { ($0["server"] as? String ?? "").contains(":\(garbage)/") }
        #expect((notJanus["message"] as? String ?? "").contains("not JSON"), "\(notJanus)")
        let silent = try EventLog.wait(for: "warning", in: serve, seconds: 20) { ($0["server"] as? String ?? "").contains(":\(hanging)/") }
        #expect((silent["message"] as? String ?? "").contains("timed out"), "\(silent)")
        let watcher = try Child(screenshareBinary(), ["watch", "--room", "class", "--server", "127.0.0.1:\(port)", "--headless",
                                                      "--duration", "5", "--json"], dir: dir, name: "watch")
        #expect(watcher.finish(within: 30) == 0, "\(watcher.stderr)")
        let stopped = try EventLog(watcher).stopped()
        #expect((stopped["frames_decoded"] as? Int ?? 0) >= 30, "\(stopped)")
        // The relay's thread never waited on them: a stats line every second.
        let times = EventLog(serve).events(named: "stats").compactMap(\.eventTime)
        let gaps = zip(times.dropFirst(), times).map { $0.timeIntervalSince($1) }
        #expect(times.count >= 8 && gaps.allSatisfy { $0 < 1.5 }, "\(gaps)")
        #expect(EventLog(serve).events(named: "janus_mountpoint").isEmpty)
        // Said once each, not at every retry.
        #expect(EventLog(serve).events(named: "warning").count == 2, "\(serve.stdout.suffix(3000))")
    }
}
