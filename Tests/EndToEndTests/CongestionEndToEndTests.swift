import Foundation
import Testing
import X11TestSupport

/// Congestion control end to end (RMCAT-style, RFC 8867, with the issue's pass bars): `start
/// --to` a `watch --sdp` that sends transport feedback, through `Scripts/lossy-proxy` as a
/// bottleneck with a drop-tail queue. The proxy measures what crossed it itself, second by
/// second; the sender's rate is never taken from the sender's own account.
@Suite(.serialized) struct CongestionEndToEndTests {
    /// A number field of one of the proxy's lines (JSON gives Int or Double).
    static func number(_ line: JSONObject, _ key: String) -> Double { (line[key] as? Double) ?? Double(line[key] as? Int ?? 0) }

    /// The proxy's seconds, one line each, for a failure's message.
    /// With the sender's `stats`, its target and size each second too.
    static func report(_ seconds: [JSONObject], sender: Child? = nil) -> String {
        let proxy = seconds.map { "\($0["t"] ?? "?"): \(number($0, "delivered_kbps")) kbit/s, queue p95 \(number($0, "queue_ms_p95")) ms, dropped \(number($0, "dropped"))" }
            .joined(separator: "\n")
        guard let sender else { return proxy }
        let stats = EventLog(sender).events(named: "stats").map {
            "target \(number($0, "target_kbps")) rtt \(number($0, "rtt_ms")) estimate \(number($0, "estimate_kbps")) sent \(number($0, "kbps")) "
                + "\(number($0, "width"))x\(number($0, "height")) \(number($0, "fps")) fps, keyframes \(number($0, "keyframes_sent")), "
                + "resent \(number($0, "retransmitted")), fec \(number($0, "fec_kbps")) kbit/s"
        }
        return proxy + "\nsender, each second:\n" + stats.joined(separator: "\n")
    }

    /// 720p motion at 30 fps asking for up to 3 Mbit/s (200 kbit/s at least), 25 ms each way,
    /// a 300 ms queue; the capacity is 1 Mbit/s, rises to 4 Mbit/s at 20 s and falls to
    /// 500 kbit/s at 35 s. Before this was built the sender kept 3 Mbit/s: the queue sat at
    /// 298 ms and 92 % of the packets were dropped.
    @Test func theSenderFillsTheBottleneckWithoutFloodingItAndFollowsIt() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 1280, height: 720, fps: 30, frames: 60, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 1280, height: 720, fps: 30, transportFeedback: true,
                                       viewerSeconds: 47,
                                       proxyArguments: ["--rate", "1M", "--queue-ms", "300", "--delay", "25",
                                                        "--rate-schedule", "0:1M,20:4M,35:500k"],
                                       senderArguments: ["--bitrate", "3M", "--min-bitrate", "200k", "--content", "motion",
                                                         "--duration", "45"])
        let exits = session.finish(within: 70)
        #expect(exits.sender == 0, "\(session.sender.stderr)")
        #expect(exits.viewer == 0, "\(session.viewer.stderr)")
        let seconds = session.seconds
        func at(_ range: ClosedRange<Int>) -> [JSONObject] { seconds.filter { range.contains($0["t"] as? Int ?? -1) } }
        let number = Self.number, report = Self.report(seconds, sender: session.sender)
        print("bottleneck 1 → 4 → 0.5 Mbit/s, second by second (the proxy's own):\n\(report)")
        #expect(seconds.count >= 44, "\(session.proxy.stdout)")

        // 1 Mbit/s, after 10 s: 0.7–1.0 × the capacity delivered, queue p95 ≤ 200 ms, < 2 % dropped.
        let steady = at(11...20)
        let delivered = steady.map { number($0, "delivered_kbps") }.reduce(0, +) / Double(max(steady.count, 1))
        #expect(delivered >= 700 && delivered <= 1010, "\(delivered) kbit/s delivered of 1000\n\(report)")
        #expect(steady.allSatisfy { number($0, "queue_ms_p95") <= 200 }, "\(report)")
        let arrived = steady.map { number($0, "arrived_kbps") * 1000 / 8 / 1200 }.reduce(0, +)  // ~packets
        let dropped = steady.map { number($0, "dropped") }.reduce(0, +)
        #expect(dropped < 0.02 * arrived, "\(dropped) of about \(Int(arrived)) packets dropped\n\(report)")

        // 4 Mbit/s from 20 s: past 2 Mbit/s within 10 s.
        #expect(at(21...30).contains { number($0, "delivered_kbps") > 2000 }, "\(report)")

        // 500 kbit/s from 35 s: the queue back under 200 ms within 5 s, and staying there.
        #expect(at(36...40).contains { number($0, "queue_ms_p95") < 200 }, "\(report)")
        #expect(at(41...44).allSatisfy { number($0, "queue_ms_p95") < 200 }, "\(report)")

        // The viewer: frozen less than 2 % of the steady 1 Mbit/s phase (its running total
        // between the proxy's seconds 11 and 20), and the sender said what it did.
        let viewerStats = EventLog(session.viewer).events(named: "stats")
        func frozen(at line: JSONObject?) -> Double? {
            guard let line, let when = EventLog.time(of: line) else { return nil }
            return viewerStats.last { (EventLog.time(of: $0) ?? .distantFuture) <= when }?["total_freezes_duration_s"] as? Double
        }
        let before = try #require(frozen(at: at(11...11).first)), after = try #require(frozen(at: at(20...20).first))
        #expect(after - before < 0.2, "frozen \(after - before) s of 9 s at 1 Mbit/s")
        let sender = EventLog(session.sender)
        #expect(sender.events(named: "bitrate_changed").contains { ($0["target_kbps"] as? Int ?? .max) < 1000 }, "\(sender.all.suffix(10))")
        #expect(sender.events(named: "stats").contains { ($0["estimate_kbps"] as? Int) != nil })
    }

    /// Issue 38: a path with no bottleneck but a busy Wi-Fi's delay, 40–60 ms each way with
    /// every datagram on its own (reordered), both ways, 1280x720 at 15 fps, 1 Mbit/s asked.
    /// Before, `motion` averaged 593 kbit/s (437 at least) and went down to 640 wide, and
    /// `detail` fell to 120 kbit/s every ~12 s with whole seconds of 0 fps. Now after the first
    /// 3 s: the target ≥ 0.9 × on average and never under 0.7 ×, the picture at full size,
    /// the viewer decoding ≥ 95 % of the frames sent with no freeze over 500 ms. With 5 % loss
    /// both ways on top, FEC and resends take their share of the same rate: what is sent stays
    /// ≥ 0.9 × on average and never under 0.7 × in a second, the encoder's share of it never
    /// under 0.6 × (about 0.82 × on average: FEC takes 15–19 %, resends up to 10 %), and
    /// `motion` may go one step down (960 wide) at that share on this content, not further.
    /// Frozen: under 1 % of the time without loss; with it under 5 % (measured 0.2–0.9 s of
    /// 20 s): a packet whose NACK or resend is lost too comes back after a second round trip,
    /// ~250 ms late at this 100 ms RTT, which is a freeze by WebRTC's measure (150 ms past the
    /// frame's due time). The viewer's end is not one: the sender's BYE comes three times, and a
    /// last frame it overtook does not make the silence after it count.
    @Test(arguments: [("motion", 0.0), ("detail", 0.0), ("motion", 0.05)])
    func jitterAndReorderingWithoutABottleneckKeepTheRate(content: String, loss: Double) throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 1280, height: 720, fps: 15, frames: 60, in: dir)
        var proxy = ["--delay", "40", "--jitter", "20", "--symmetric", "--seed", "3"]
        if loss > 0 { proxy += ["--loss", "\(loss)", "--all"] }
        let session = try PlainSession(dir: dir, input: input, width: 1280, height: 720, fps: 15, transportFeedback: true,
                                       viewerSeconds: 23, proxyArguments: proxy,
                                       senderArguments: ["--bitrate", "1M", "--content", content, "--duration", "20"])
        let exits = session.finish(within: 45)
        #expect(exits.sender == 0 && exits.viewer == 0, "\(session.sender.stderr)\(session.viewer.stderr)")
        let stats = EventLog(session.sender).events(named: "stats")
        let report = Self.report([], sender: session.sender)
        let after = Array(stats.dropFirst(3))
        #expect(after.count >= 15, "\(report)")
        #expect(after.allSatisfy { $0["estimate_kbps"] is Int }, "transport feedback did not reach the sender\n\(report)")
        let targets = after.map { Self.number($0, "target_kbps") }, sent = after.map { Self.number($0, "kbps") }
        let mean = targets.reduce(0, +) / Double(max(targets.count, 1)), sentMean = sent.reduce(0, +) / Double(max(sent.count, 1))
        print("\(content), 40-60 ms jitter, loss \(loss): target mean \(Int(mean)) (min \(Int(targets.min() ?? 0))), sent \(Int(sentMean)) kbit/s")
        if loss == 0 {
            #expect(mean >= 900, "target mean \(mean)\n\(report)")
        } else {
            #expect(sentMean >= 900, "sent \(sentMean)\n\(report)")
        }
        if loss == 0 {
            #expect(targets.allSatisfy { $0 >= 700 }, "\(report)")
        } else {
            // The path's rate is what is sent; the encoder's share is that less FEC (15-19 %)
            // and resends (up to 10 %), so it dips under 0.7 × with any dip of the path's.
            #expect(sent.allSatisfy { $0 >= 700 } && targets.allSatisfy { $0 >= 600 }, "\(report)")
        }
        #expect(stats.allSatisfy { ($0["width"] as? Int ?? 0) >= (loss > 0 ? 960 : 1280) }, "\(report)")
        let got = try EventLog(session.viewer).stopped()
        let framesSent = stats.last.map { Int(Self.number($0, "frames_sent")) } ?? 0
        let decoded = got["frames_decoded"] as? Int ?? 0
        #expect(Double(decoded) >= 0.95 * Double(framesSent), "decoded \(decoded) of \(framesSent)\n\(got)")
        let freezes = got["freeze_count"] as? Int ?? 99, frozen = got["total_freezes_duration_s"] as? Double ?? 99
        let seconds = EventLog(session.viewer).all.compactMap { e -> String? in
            switch e["event"] as? String {
            case "stats": "fps \(e["fps"] ?? "-") decoded \(e["frames_decoded"] ?? "-") gap \(e["frame_gap_ms"] ?? "-") ms freezes \(e["freeze_count"] ?? "-") pli \(e["pli_count"] ?? "-")"
            case let name?: name
            default: nil
            }
        }.joined(separator: "\n")
        #expect(frozen <= Double(freezes) * 0.5 && frozen < (loss > 0 ? 0.05 : 0.01) * 20, "\(got)\n\(seconds)\n\(report)")
    }

    /// 10 % random loss on a 1 Mbit/s link: no collapse (at least half of it used after 10 s),
    /// the losses repaired, and the frame rate kept (at least 80 % of the 750 frames decoded).
    /// Before libvpx was given the capture's frame rate (``EncoderTimeline``) a run in three
    /// fell to 9-15 fps once FEC came on: 295-320 frames.
    @Test func randomLossDoesNotCollapseTheRate() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 1280, height: 720, fps: 30, frames: 60, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 1280, height: 720, fps: 30, transportFeedback: true,
                                       viewerSeconds: 27,
                                       proxyArguments: ["--rate", "1M", "--queue-ms", "300", "--delay", "25", "--loss", "0.1", "--seed", "3"],
                                       senderArguments: ["--bitrate", "3M", "--min-bitrate", "200k", "--content", "motion",
                                                         "--duration", "25"])
        let exits = session.finish(within: 50)
        #expect(exits.sender == 0 && exits.viewer == 0, "\(session.sender.stderr)\(session.viewer.stderr)")
        let late = session.seconds.filter { ($0["t"] as? Int ?? 0) > 10 }
        let delivered = late.map { ($0["delivered_kbps"] as? Double) ?? 0 }.reduce(0, +) / Double(max(late.count, 1))
        #expect(late.count >= 12 && delivered >= 500, "\(delivered) kbit/s delivered of 1000 through 10 % loss")
        let got = try EventLog(session.viewer).stopped()
        let decoded = got["frames_decoded"] as? Int ?? 0
        print("10 % loss at 1 Mbit/s: \(Int(delivered)) kbit/s delivered after 10 s, \(decoded) frames decoded")
        #expect(decoded >= 25 * 30 * 8 / 10, "\(got)\n\(Self.report(session.seconds, sender: session.sender))")
    }

    /// In a room the presenter's uplink to the relay is congestion controlled the same way:
    /// the relay answers its packets with transport feedback. A 1 Mbit/s bottleneck between
    /// presenter and relay is filled, not flooded, and the viewer keeps watching.
    @Test func aPresentersUplinkToTheRelayIsFilledNotFlooded() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 1280, height: 720, fps: 30, frames: 60, in: dir)
        let relayPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == relayPort || proxyPort == relayPort + 1 || proxyPort + 1 == relayPort { proxyPort = freeEvenPort() }
        let relay = try RoomEndToEndTests.serve(dir, port: relayPort, duration: 40)
        defer { relay.finish(within: 0) }
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(relayPort)",
                                                 "--rate", "1M", "--queue-ms", "300", "--delay", "25"], dir: dir, name: "proxy")
        try waitUntilBound(proxyPort)
        let viewer = try Child(screenshareBinary(), ["watch", "--room", "class", "--server", "127.0.0.1:\(relayPort)", "--headless",
                                                     "--duration", "26", "--json"], dir: dir, name: "viewer")
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "class", "--server", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", "nv12",
            "--input-size", "1280x720", "--fps", "30", "--bitrate", "3M", "--min-bitrate", "200k", "--content", "motion",
            "--no-audio", "--duration", "24", "--json",
        ], dir: dir, name: "presenter")
        #expect(presenter.finish(within: 45) == 0, "\(presenter.stderr)")
        #expect(viewer.finish(within: 20) == 0, "\(viewer.stderr)")
        proxy.finish(within: 0)
        let seconds = EventLog(proxy).events(named: "second")
        let number = Self.number, report = Self.report(seconds, sender: presenter)
        print("room uplink at 1 Mbit/s, second by second (the proxy's own):\n\(report)")
        let steady = seconds.filter { (11...22).contains($0["t"] as? Int ?? -1) }
        #expect(steady.count >= 10, "\(proxy.stdout)")
        let delivered = steady.map { number($0, "delivered_kbps") }.reduce(0, +) / Double(max(steady.count, 1))
        #expect(delivered >= 700 && delivered <= 1010, "\(delivered) kbit/s delivered of 1000\n\(report)")
        #expect(steady.allSatisfy { number($0, "queue_ms_p95") <= 200 && number($0, "dropped") <= 2 }, "\(report)")
        #expect(EventLog(presenter).events(named: "bitrate_changed").contains { ($0["target_kbps"] as? Int ?? .max) < 1000 })
        let got = try EventLog(viewer).stopped()
        #expect((got["frames_decoded"] as? Int ?? 0) >= 20 * 30 / 2, "\(got)")
    }

    /// A room with two viewers, one behind a 500 kbit/s bottleneck (300 ms queue, 25 ms; the
    /// issue's slow viewer): the relay estimates each one's link from its transport feedback and
    /// gives the slow one the two lower of the three temporal layers (half the frames, 60 % of
    /// the bits), sharp and without freezes, while the other
    /// decodes every frame and the presenter keeps the rate its own link allows. Before the
    /// relay chose layers the slow viewer's queue was full and most of its packets dropped.
    /// (Behind 400 kbit/s, where half the frames fill the link to 90 % or more, the slow viewer
    /// froze 0–3.7 s in 30 s with three layers, over the bar in 1 of 3 runs: open in issue 38.
    /// Since a trial in the stream's dip no longer counts, 0.6, 0.8 and 1.1 s in 3 runs: what
    /// is left is the queue a failed trial leaves, which half the frames drain slowly.)
    /// In CI (stop 53) at 500 kbit/s it froze 1.8 s: raised to every layer in each dip the
    /// presenter's encoder made after a keyframe, drowned when the stream came back, and its
    /// losses asked for the keyframe that made the next dip; now 0–0.34 s in 3 runs.
    @Test func aSlowViewerGetsFewerLayersAndTheOthersAreNotTouched() throws {
        let run = try SlowViewerRoom(rate: "500k", queueMs: 300)
        let (framesSent, fastGot, slowGot, seconds, report) = (run.framesSent, run.fastGot, run.slowGot, run.seconds, run.report)
        // The fast viewer: every frame sent once it was subscribed (the first half second's may
        // have gone before), none lost, no freeze.
        #expect((fastGot["frames_decoded"] as? Int ?? 0) >= framesSent - 15, "\(fastGot)")
        #expect(fastGot["packets_lost"] as? Int == 0 && (fastGot["total_freezes_duration_s"] as? Double ?? 99) == 0, "\(fastGot)")
        // The slow one: about half the frames (TL0 and TL1), frozen under 5 % of the time.
        let slowFrames = slowGot["frames_decoded"] as? Int ?? 0
        #expect(slowFrames >= framesSent * 4 / 10 && slowFrames <= framesSent * 8 / 10, "\(slowFrames) of \(framesSent)\n\(report)")
        #expect((slowGot["total_freezes_duration_s"] as? Double ?? 99) < 0.05 * 30, "\(slowGot)\n\(report)")
        // Told it gets half the frames (the first word may be lost on that link: it is said again).
        #expect(run.slowLinks.contains("half") && !run.slowLinks.contains("keyframes"), "\(run.slowLinks)")
        // Its link is not flooded once the relay has chosen (after 5 s): the queue short, few drops.
        let steady = seconds.filter { (6...28).contains($0["t"] as? Int ?? -1) }
        let dropped = steady.map { Self.number($0, "dropped") }.reduce(0, +)
        let delivered = steady.map { Self.number($0, "delivered_kbps") * 1000 / 8 / 1100 }.reduce(0, +)
        #expect(dropped < 0.05 * delivered, "\(dropped) of about \(Int(delivered)) packets dropped\n\(report)")
        // The presenter kept its rate: the relay's estimate of its uplink is not the slow viewer's.
        #expect(run.targets.suffix(20).allSatisfy { $0 >= 540 }, "\(run.targets)")
    }

    /// A viewer behind 150 kbit/s of a 600 kbit/s stream (its base layer alone is 240): the relay
    /// sends it keyframes only, asking for one every 5 s, and tells it (`link` … `keyframes` and
    /// a `network_busy` warning); it still sees the screen change, and the other viewer and the
    /// presenter are not touched. (The queue is 2 s deep: a keyframe must fit in it.)
    @Test func aLinkThatCarriesLessThanTheBaseGetsKeyframesAndIsTold() throws {
        let run = try SlowViewerRoom(rate: "150k", queueMs: 2000)
        #expect(run.slowLinks.contains("keyframes"), "\(run.slowLinks)")
        let busy = EventLog(run.slow).events(named: "warning").filter { $0["kind"] as? String == "network_busy" }
        #expect(!busy.isEmpty, "\(EventLog(run.slow).events(named: "warning"))")
        let keyframes = run.slowGot["keyframes_decoded"] as? Int ?? 0, frames = run.slowGot["frames_decoded"] as? Int ?? 0
        #expect(keyframes >= 3, "\(run.slowGot)\n\(run.report)")
        #expect(frames < run.framesSent / 4, "\(frames) of \(run.framesSent) frames reached a 150 kbit/s link")
        #expect((run.fastGot["frames_decoded"] as? Int ?? 0) >= run.framesSent - 15, "\(run.fastGot)")
        #expect(run.targets.suffix(20).allSatisfy { $0 >= 540 }, "\(run.targets)")
    }

    /// Slides (`detail`) behind a 500 kbit/s bottleneck, 3 Mbit/s asked for: the picture keeps
    /// its full size, and once the slide has been still a few seconds the text is sharp at
    /// the viewer (Y-PSNR of its last picture against the slide drawn ≥ 40 dB).
    @Test func slidesUnderACapKeepTheirSizeAndSharpness() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Congestion control keeps text sharp", dir: dir)
        let session = try PlainSession(dir: dir, input: "\(dir)/slide.bgra", format: "bgra", width: 1920, height: 1080, fps: 15,
                                       transportFeedback: true, viewerSeconds: 16, viewerArguments: ["--record", "\(dir)/got.webm"],
                                       proxyArguments: ["--rate", "500k", "--queue-ms", "300", "--delay", "25"],
                                       senderArguments: ["--bitrate", "3M", "--content", "detail", "--duration", "14"])
        let exits = session.finish(within: 40)
        #expect(exits.sender == 0 && exits.viewer == 0, "\(session.sender.stderr)\(session.viewer.stderr)")
        let stats = EventLog(session.sender).events(named: "stats")
        #expect(stats.count >= 12 && stats.allSatisfy { $0["width"] as? Int == 1920 && $0["height"] as? Int == 1080 }, "\(stats)")
        #expect(stats.contains { ($0["target_kbps"] as? Int ?? .max) <= 600 }, "the target never came down to the link: \(stats.map { $0["target_kbps"] ?? "?" })")
        let got = try EventLog(session.viewer).stopped()
        #expect(got["width"] as? Int == 1920 && got["height"] as? Int == 1080, "\(got)")
        // The recording's last second as I420 (its luma as coded: `gray` would stretch it to
        // full range): the last picture's luma against the slide's.
        let raw = "\(dir)/last.yuv"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-sseof", "-1", "-i", "\(dir)/got.webm",
                                          "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", raw]) == 0)
        let pictures = try [UInt8](Data(contentsOf: URL(fileURLWithPath: raw)))
        let size = 1920 * 1080, frame = size * 3 / 2
        #expect(pictures.count >= frame, "ffmpeg gave \(pictures.count) bytes")
        guard pictures.count >= frame else { return }
        let last = pictures.count / frame - 1
        let p = psnr(pictures[(last * frame)..<(last * frame + size)], luma(bgra: slide, width: 1920, height: 1080))
        print("slides behind 500 kbit/s: the last picture \(String(format: "%.1f", p)) dB; targets \(stats.map { $0["target_kbps"] ?? "?" })")
        #expect(p >= 40, "the last picture is \(p) dB from the slide")
    }

    /// A receiver that sends no transport feedback (an SDP without the extension, as ffmpeg and
    /// GStreamer are): the sender keeps `--bitrate`, as before congestion control.
    @Test func withoutFeedbackTheRateIsTheOneAskedFor() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 320, height: 240, fps: 15, frames: 30, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 320, height: 240, fps: 15, viewerSeconds: 5,
                                       senderArguments: ["--bitrate", "700k", "--duration", "4"])
        let exits = session.finish(within: 20)
        #expect(exits.sender == 0 && exits.viewer == 0)
        let stats = EventLog(session.sender).events(named: "stats")
        #expect(stats.count >= 3)
        #expect(stats.allSatisfy { $0["target_kbps"] as? Int == 700 && $0["estimate_kbps"] is NSNull }, "\(stats)")
        #expect(!EventLog(session.sender).contains("bitrate_changed"))
    }
}

/// A room for the per-viewer tests: a relay, a presenter (640x360 motion at 30 fps, 600 kbit/s)
/// and two viewers, one straight to the relay and one behind `Scripts/lossy-proxy --reverse`
/// (`rate`, `queueMs`, 25 ms), for 30 s.
struct SlowViewerRoom {
    let presenter: Child, fast: Child, slow: Child, proxy: Child, relay: Child
    let framesSent: Int
    let fastGot: JSONObject, slowGot: JSONObject
    let seconds: [JSONObject]
    let report: String
    /// The slow viewer's `link` events' layers, in order; the presenter's targets.
    let slowLinks: [String]
    let targets: [Int]

    init(rate: String, queueMs: Int) throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 30, frames: 60, in: dir)
        let relayPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == relayPort || proxyPort == relayPort + 1 || proxyPort + 1 == relayPort { proxyPort = freeEvenPort() }
        relay = try RoomEndToEndTests.serve(dir, port: relayPort, duration: 50)
        proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(relayPort)",
                                             "--reverse", "--rate", rate, "--queue-ms", "\(queueMs)", "--delay", "25"], dir: dir, name: "proxy")
        try waitUntilBound(proxyPort)
        func viewer(_ name: String, _ port: UInt16) throws -> Child {
            try Child(screenshareBinary(), ["watch", "--room", "class", "--server", "127.0.0.1:\(port)", "--headless", "--name", name,
                                            "--duration", "32", "--json"], dir: dir, name: name)
        }
        fast = try viewer("fast", relayPort)
        slow = try viewer("slow", proxyPort)
        presenter = try Child(screenshareBinary(), [
            "start", "--room", "class", "--server", "127.0.0.1:\(relayPort)", "--input", input, "--input-format", "nv12",
            "--input-size", "640x360", "--fps", "30", "--bitrate", "600k", "--content", "motion", "--no-audio", "--duration", "30", "--json",
        ], dir: dir, name: "presenter")
        #expect(presenter.finish(within: 50) == 0, "\(presenter.stderr)")
        let fastExit = fast.finish(within: 20), slowExit = slow.finish(within: 20)
        proxy.finish(within: 0)
        relay.finish(within: 5)
        #expect(fastExit == 0 && slowExit == 0, "\(fast.stderr)\(slow.stderr)")
        seconds = EventLog(proxy).events(named: "second")
        report = CongestionEndToEndTests.report(seconds, sender: presenter)
        print("a viewer behind \(rate) (queue \(queueMs) ms), its link second by second (the proxy's own):\n\(report)")
        framesSent = try EventLog(presenter).stopped()["frames_sent"] as? Int ?? 0
        fastGot = try EventLog(fast).stopped()
        slowGot = try EventLog(slow).stopped()
        slowLinks = EventLog(slow).events(named: "link").compactMap { $0["layers"] as? String }
        targets = EventLog(presenter).events(named: "stats").compactMap { $0["target_kbps"] as? Int }
        let relayStats = EventLog(relay).events(named: "stats").map { "\($0["viewers_base_layer"] ?? "?")/\($0["layer_switches"] ?? "?")/\($0["retransmitted"] ?? "?")" }
        print("presenter \(framesSent) frames; fast \(fastGot); slow \(slowGot), told \(slowLinks)\n"
              + "relay (viewers on fewer layers/switches/resent) \(relayStats)\n\(EventLog(relay).last(named: "stopped") ?? [:])")
    }
}
