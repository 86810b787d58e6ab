import Foundation
import Testing
import X11TestSupport
import RoomEvents

/// The documented JSON events: every type docs/EVENTS.md lists is produced by one of these
/// scenarios, and every line any of them prints parses and carries its documented fields.
@Suite struct EventTests {
    /// Required fields per event, per command (docs/EVENTS.md).
    static let schema: [String: [String: [String]]] = [
        "start": [
            "started": ["ssrc", "fps", "bitrate_kbps", "content", "destination"],
            "first_frame_sent": ["width", "height", "keyframe", "latency_ms"],
            "connected": ["room", "server", "peer", "peers", "rejoined"],
            "peer_joined": ["peer", "name", "role"],
            "peer_left": ["peer", "name", "reason"],
            "substream_started": ["peer", "name", "kind", "ssrc", "codec", "payload_type"],
            "substream_stopped": ["peer", "name", "kind", "ssrc", "codec", "payload_type"],
            "subscribed": ["viewer", "name", "viewers"],
            "unsubscribed": ["viewer", "name", "viewers"],
            "paused": [], "resumed": [],
            "settings_changed": ["changed", "fps", "bitrate_kbps", "content", "paused", "source"],
            "stats": ["fps", "kbps", "encode_ms_p50", "encode_ms_p95", "capture_ms_p50", "convert_ms_p50", "send_ms_p50",
                      "rtt_ms", "loss", "width", "height", "frames_sent", "frames_captured", "frames_encoded", "send_errors", "quantizer"],
            "warning": ["kind", "message"],
            "error": ["kind", "message"],
            "reconnecting": ["attempt", "of", "retry_in_ms", "reason", "server"],
            "disconnected": ["reason", "server"],
            "stopped": ["reason", "frames_sent", "frames_encoded", "keyframes_sent", "bytes_sent", "packets_sent", "duration_s"],
            "source_restored": ["size"],
            "audio_app_attached": ["sink_input", "app", "binary", "pid"], "audio_app_detached": ["sink_input"],
            "audio_reconnecting": ["attempt", "retry_in_ms"], "audio_resumed": [],
        ],
        "watch": [
            "started": ["rtp_port", "rtcp_port", "payload_type", "window"],
            "connected": ["room", "server", "peer", "peers", "rejoined"],
            "peer_joined": ["peer", "name", "role"],
            "peer_left": ["peer", "name", "reason"],
            "substream_started": ["peer", "name", "kind", "ssrc", "codec"],
            "substream_stopped": ["peer", "name", "kind", "ssrc", "codec"],
            "subscribed": ["publisher", "name", "kinds"],
            "unsubscribed": ["publisher", "name"],
            "share_ended": ["presenter"],
            "first_frame": ["width", "height", "time_to_first_frame_ms"],
            "stats": ["fps", "kbps", "width", "height", "packets_received", "packets_lost", "jitter_ms", "frames_decoded", "freeze_count",
                      "nack_count", "pli_count"],
            "resolution_changed": ["width", "height"],
            "sender_left": ["ssrc"], "sender_changed": ["ssrc"],
            "reconnecting": ["attempt", "of", "retry_in_ms", "reason"], "disconnected": ["reason"],
            "warning": ["kind", "message"], "error": ["kind", "message"],
            "stopped": ["reason", "frames_decoded", "keyframes_decoded", "frames_dropped", "freeze_count", "total_freezes_duration_s",
                        "packets_received", "packets_lost", "jitter_ms", "nack_count", "pli_count", "time_to_first_frame_ms", "duration_s"],
        ],
        "serve": [
            "started": ["listen", "protocol_version", "access"],
            "peer_joined": ["room", "peer", "name", "role", "address"],
            "peer_left": ["room", "peer", "name", "reason"],
            "substream_started": ["room", "peer", "kind", "ssrc", "codec"], "substream_stopped": ["room", "peer", "kind", "ssrc", "codec"],
            "subscribed": ["room", "viewer", "publisher", "kinds"], "unsubscribed": ["room", "viewer", "publisher"],
            "stats": ["rooms", "peers", "packets_in", "packets_out", "kbps_out", "rejected"],
            "stopped": ["rtp_in", "rtp_forwarded", "rejected", "duration_s"],
        ],
    ]

    /// Parses every stdout line of a command and checks it against the schema; returns the
    /// events by name.
    @discardableResult
    static func check(_ child: Child, command: String) -> [String: [[String: Any]]] {
        var seen: [String: [[String: Any]]] = [:]
        let log = EventLog(child)
        for line in log.malformedLines { Issue.record("\(command): not a JSON object: \(line)") }
        for o in log.all {
            let line = "\(o)"
            guard let name = o["event"] as? String else { Issue.record("\(command): no event name: \(line)"); continue }
            #expect(o["time"] is String && o.eventTime != nil, "\(command) \(name): time is not RFC 3339: \(line)")
            guard let fields = schema[command]?[name] else {
                Issue.record("\(command): undocumented event '\(name)': \(line)")
                continue
            }
            for f in fields where o[f] == nil { Issue.record("\(command) \(name): field '\(f)' missing: \(line)") }
            seen[name, default: []].append(o)
        }
        return seen
    }

    static func kinds(_ events: [String: [[String: Any]]], _ name: String) -> Set<String> {
        Set((events[name] ?? []).compactMap { $0["kind"] as? String })
    }

    /// `stats`' `quantizer` is libvpx's for the frames sent: the same moving pictures at 60 kbit/s
    /// are coded far coarser than at 3 Mbit/s, and both stay on libvpx's 0–63 scale.
    @Test func theStatsQuantizerIsCoarserAtALowerBitRate() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let sink = try UDPReceiver(port: freeEvenPort())
        func meanQuantizer(_ bitrate: String) throws -> Double {
            let r = try runScreenshare(["start", "--to", "127.0.0.1:\(sink.port)", "--input", input, "--input-format", "nv12",
                                        "--input-size", "320x240", "--fps", "15", "--content", "motion", "--bitrate", bitrate,
                                        "--no-audio", "--duration", "3", "--json"])
            #expect(r.status == 0, "\(r.stderr)")
            let q = EventLog(r.stdout).events(named: "stats").compactMap { $0["quantizer"] as? Double }
            try #require(!q.isEmpty, "no stats with a quantizer: \(r.stdout.suffix(600))")
            #expect(q.allSatisfy { (0...63).contains($0) }, "\(q)")
            return q.reduce(0, +) / Double(q.count)
        }
        let coarse = try meanQuantizer("60k"), fine = try meanQuantizer("3M")
        #expect(coarse > fine + 10, "60 kbit/s: quantizer \(coarse); 3 Mbit/s: \(fine)")
    }

    /// A room with a presenter (audio on) and a viewer, paused, resumed, changed, stopped.
    @Test func aRoomSessionWithLiveControl() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()
        let serve = try RoomEndToEndTests.serve(dir, port: port)
        let viewer = try RoomEndToEndTests.viewer(dir, "pupil", room: "r", port: port, duration: 30)
        _ = try EventLog.wait(for: "connected", in: viewer)
        let socket = "\(dir)/p.sock"
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "r", "--server", "127.0.0.1:\(port)", "--name", "teacher", "--input", input, "--input-size", "320x240",
            "--fps", "15", "--audio-output", "--no-mic", "--control-socket", socket, "--duration", "8", "--json",
        ], dir: dir, name: "teacher")
        _ = try EventLog.wait(for: "subscribed", in: presenter)
        _ = try EventLog.wait(for: "stats", in: presenter) { $0["viewers"] as? Int == 1 }
        // Someone joins after the presenter: peer_joined on its side too.
        let late = try RoomEndToEndTests.viewer(dir, "late", room: "r", port: port, duration: 1)
        #expect(late.finish(within: 20) == 0)
        Self.check(late, command: "watch")
        for command in [["pause"], ["resume"], ["set", "fps=10"]] {
            let r = try runScreenshare(["ctl", "--socket", socket] + command)
            #expect(r.status == 0, "ctl \(command): \(r.stderr)")
        }
        #expect(presenter.finish(within: 20) == 0, "\(presenter.stderr)")
        // The only presenter stopped: the viewer ends the share by itself (`share_ended`, exit 0).
        #expect(viewer.finish(within: 10, interrupt: false) == 0, "\(viewer.stderr)")
        kill(serve.pid, SIGINT)
        #expect(serve.finish(within: 10) == 130)

        let p = Self.check(presenter, command: "start")
        for name in ["started", "connected", "first_frame_sent", "peer_joined", "subscribed", "paused", "resumed", "settings_changed", "stats", "stopped"] {
            #expect(p[name] != nil, "start printed no \(name): \(presenter.stdout.suffix(1500))")
        }
        #expect(p["stats"]?.contains { $0["audio_kbps"] != nil && $0["viewers"] != nil } == true)
        #expect(p["settings_changed"]?.first?["fps"] as? Int == 10)
        let v = Self.check(viewer, command: "watch")
        for name in ["started", "connected", "peer_joined", "substream_started", "subscribed", "first_frame", "stats",
                     "substream_stopped", "peer_left", "unsubscribed", "stopped"] {
            #expect(v[name] != nil, "watch printed no \(name)")
        }
        #expect(Self.kinds(v, "substream_started") == ["screen", "audio"])
        let s = Self.check(serve, command: "serve")
        for name in ["started", "peer_joined", "peer_left", "substream_started", "substream_stopped", "subscribed", "stats", "stopped"] {
            #expect(s[name] != nil, "serve printed no \(name)")
        }
    }

    /// A relay that is not there: reconnecting three times, then disconnected (exit 68).
    @Test func aMissingRelayGivesReconnectingThenDisconnected() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()  // nobody listens there
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "r", "--server", "127.0.0.1:\(port)", "--input", input, "--input-size", "320x240", "--no-audio", "--json",
        ], dir: dir, name: "presenter")
        // The same for a person at a terminal: what never answered is said once, in words,
        // with what to check — not "lost", and not three lines of the same.
        let viewer = try Child(screenshareBinary(), ["watch", "--room", "r", "--server", "127.0.0.1:\(port)", "--headless"], dir: dir, name: "viewer")
        #expect(presenter.finish(within: 30, interrupt: false) == 68, "\(presenter.stderr)")
        #expect(viewer.finish(within: 30, interrupt: false) == 68, "\(viewer.stderr)")
        let said = viewer.stderr
        #expect(said.contains("the relay at 127.0.0.1:\(port) never answered: is it running there, and is UDP port \(port) open to you?"), "\(said)")
        #expect(!said.contains("lost the") && !said.contains("relay lost") && said.components(separatedBy: "never answered").count == 2, "\(said)")
        let p = Self.check(presenter, command: "start")
        #expect(p["reconnecting"]?.compactMap { $0["attempt"] as? Int } == [1, 2, 3])
        #expect(p["disconnected"]?.count == 1)
        #expect(p["stopped"]?.first?["reason"] as? String == "disconnected")
    }

    /// Warnings and errors: encoder_overshoot, unsupported_resolution, source_resized,
    /// network_busy, source_gone.
    @Test func warningsAndErrors() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        // More than the encoder can hold at 10 kbit/s: encoder_overshoot after 3 s.
        let over = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(freeEvenPort())", "--input", input, "--input-size", "320x240", "--bitrate", "10k",
            "--content", "motion", "--no-audio", "--duration", "5", "--json",
        ], dir: dir, name: "overshoot")
        // A 8x8 region: unsupported_resolution (and nothing sent).
        let xvfb = try PrivateXvfb(width: 1280, height: 720)
        let tiny = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(freeEvenPort())", "--region", "8x8+0+0", "--no-audio", "--duration", "2", "--json",
        ], dir: dir, name: "tiny")
        #expect(over.finish(within: 30) == 0, "\(over.stderr)")
        #expect(tiny.finish(within: 30) == 0, "\(tiny.stderr)")
        let o = Self.check(over, command: "start")
        #expect(Self.kinds(o, "warning").contains("encoder_overshoot"), "\(over.stdout.suffix(800))")
        let t = Self.check(tiny, command: "start")
        #expect(Self.kinds(t, "error") == ["unsupported_resolution"])
        #expect(t["stopped"]?.first?["frames_sent"] as? Int == 0)

        // 25 % loss between sender and viewer: the receiver reports say so → network_busy.
        let viewerPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == viewerPort { proxyPort = freeEvenPort() }
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: viewerPort, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "6", "--json"], dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(viewerPort)",
                                                 "--loss", "0.25", "--seed", "3"], dir: dir, name: "proxy")
        try waitUntilBound(proxyPort)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", input, "--input-size", "320x240", "--content", "motion",
            "--no-audio", "--duration", "5", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "\(sender.stderr)")
        #expect(viewer.finish(within: 30) == 0, "\(viewer.stderr)")
        _ = proxy.finish(within: 0)
        #expect(Self.kinds(Self.check(sender, command: "start"), "warning").contains("network_busy"), "\(sender.stdout.suffix(1500))")
        Self.check(viewer, command: "watch")

        // The screen changes size (RandR): source_resized; the X server goes away: source_gone.
        let screen = try PrivateXvfb(width: 1280, height: 720)
        let resized = try Child(screenshareBinary(), [
            "start", "--display", screen.name, "--to", "127.0.0.1:\(freeEvenPort())", "--no-audio", "--json",
        ], dir: dir, name: "resized")
        _ = try EventLog.wait(for: "first_frame_sent", in: resized)
        // Xvfb resizes its framebuffer (xrandr reports a CRTC error, but the screen changes).
        _ = try run(which("xrandr"), ["-display", screen.name, "--fb", "1024x600"])
        _ = try EventLog.wait(for: "warning", in: resized) { $0["kind"] as? String == "source_resized" }
        screen.stop()
        #expect(resized.finish(within: 20, interrupt: false) == 69, "\(resized.stderr)")
        let r = Self.check(resized, command: "start")
        #expect(Self.kinds(r, "error").contains("source_gone"), "\(resized.stdout.suffix(800))")
        #expect(r["stopped"]?.first?["reason"] as? String == "source_gone")
    }
}
