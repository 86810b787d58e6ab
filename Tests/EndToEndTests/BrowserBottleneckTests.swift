import Foundation
import Testing
import X11TestSupport

/// Issue 38: a browser behind a real bottleneck — the kernel's token bucket (`tc qdisc … tbf`)
/// on the veth pair to a network namespace of its own — gets what a native viewer gets: the
/// relay estimates its link from Chromium's transport-wide feedback and forwards it the layers
/// that fit, while another browser on an unshaped link of its own decodes every frame.
@Suite(.serialized) struct BrowserBottleneckTests {
    /// The browser's own counts (getStats) over its page lines from `from` seconds on: frames
    /// decoded a second, Chromium's freeze total since its start, the seconds of it frozen from
    /// `from` on, the last line, and the wall-clock span measured.
    static func decodedRate(_ log: EventLog, from: Double)
        -> (fps: Double, freezes: Double, frozenSince: Double, last: JSONObject, span: ClosedRange<Date>)? {
        let pages = log.events(named: "page").filter { $0["video_decoded"] != nil }
        guard let first = pages.first(where: { ($0["t"] as? Double ?? 0) >= from }), let last = pages.last,
              let t0 = first["t"] as? Double, let t1 = last["t"] as? Double, t1 > t0 + 5,
              let w0 = first.eventTime, let w1 = last.eventTime else { return nil }
        let d0 = first["video_decoded"] as? Int ?? 0, d1 = last["video_decoded"] as? Int ?? 0
        let total = last["freeze_s"] as? Double ?? 99
        return (Double(d1 - d0) / (t1 - t0), total, total - (first["freeze_s"] as? Double ?? 0), last, w0...w1)
    }

    /// The frames a second the presenter sent over `span` (wall clock), from its `stats` lines'
    /// running `frames_sent`, read linearly between two lines (up to its last line). Over the browsers' own span: on a
    /// loaded machine the presenter sends fewer while two Chromiums decode than after they close
    /// (a CI run: 18.3 fps over its whole run, 16.4 while the pages were open, every one decoded).
    static func sentRate(_ presenter: EventLog, over span: ClosedRange<Date>) -> Double? {
        let points = presenter.events(named: "stats").compactMap { e -> (Date, Double)? in
            guard let when = e.eventTime, let sent = e["frames_sent"] as? Int else { return nil }
            return (when, Double(sent))
        }
        func sent(at date: Date) -> Double? {
            guard let after = points.firstIndex(where: { $0.0 >= date }), after > 0 else { return nil }
            let (d0, f0) = points[after - 1], (d1, f1) = points[after]
            return f0 + (f1 - f0) * date.timeIntervalSince(d0) / max(d1.timeIntervalSince(d0), 0.001)
        }
        // The presenter is still running: its last line may come before the page's last one.
        guard let lastLine = points.last?.0 else { return nil }
        let from = span.lowerBound, to = min(span.upperBound, lastLine)
        guard to.timeIntervalSince(from) > 5, let f0 = sent(at: from), let f1 = sent(at: to) else { return nil }
        return (f1 - f0) / to.timeIntervalSince(from)
    }

    /// 640x360 motion at 30 fps, 600 kbit/s in three temporal layers; one Chromium behind
    /// 500 kbit/s with a 300 ms queue (tbf; the issue's slow viewer), another unshaped. The slow
    /// one gets half the frames (TL0 + TL1: 360 kbit/s) or at least the base layer, frozen under
    /// 5 % of the time measured (Chromium's own count; under 10 % with the start-up); the other
    /// decodes at least 90 % of the frames the presenter sent meanwhile. (Behind 400 kbit/s half the frames fill the link to 90 %: a CI run froze 5.4 s
    /// in 7 freezes there, as the relay went half → base → half.)
    @Test func aBrowserBehindAKernelBottleneckGetsFewerLayersAndTheOtherEveryFrame() throws {
        let slowHost = try VirtualHost(), fastHost = try VirtualHost()
        try slowHost.shape(rate: "500kbit", queueMs: 300)
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 30, frames: 60, in: dir)
        let port = freeEvenPort()
        let relay = try RoomEndToEndTests.serve(dir, port: port, duration: 70)
        defer { relay.finish(within: 5) }
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "class", "--server", "127.0.0.1:\(port)", "--input", input, "--input-format", "nv12",
            "--input-size", "640x360", "--fps", "30", "--bitrate", "600k", "--content", "motion", "--no-audio", "--duration", "55", "--json",
        ], dir: dir, name: "presenter")
        defer { presenter.finish(within: 0) }
        _ = try EventLog.wait(for: "substream_started", in: relay)
        let script = BrowserWHEPTests.script("browser-watch.py")
        func page(_ host: VirtualHost, _ name: String) throws -> Child {
            try host.run(BrowserWHEPTests.python, [script, "http://\(host.relayAddress):\(port)/class", "34", "--no-loopback", "--no-luma"],
                         dir: dir, name: name)
        }
        let slow = try page(slowHost, "slow"), fast = try page(fastHost, "fast")
        #expect(slow.finish(within: 90) == 0, "\(slow.stderr.suffix(2000))")
        #expect(fast.finish(within: 30) == 0, "\(fast.stderr.suffix(2000))")
        let slowLog = EventLog(slow.stdout), fastLog = EventLog(fast.stdout)
        let relayStats = EventLog(relay).events(named: "stats").map { "\($0["viewer_layers"] ?? "-")" }
        print("relay, viewers on fewer layers each second: \(relayStats)")
        print("relay, layer switches each second: \(EventLog(relay).events(named: "stats").map { "\($0["layer_switches"] ?? "-")" })")
        print("relay, asks not resent each second: \(EventLog(relay).events(named: "stats").map { "\($0["resends_not_sent"] ?? "-")" })")
        // The slow page each second: when it froze, lost, asked again and for keyframes.
        print("slow page each second (t freeze_s nacks lost plis): \(EventLog(slow.stdout).events(named: "page").map { p in ["t", "freeze_s", "nacks", "video_lost", "plis"].map { "\(p[$0] ?? "-")" }.joined(separator: " ") })")
        let sent = EventLog(presenter).events(named: "stats").map { "\($0["width"] ?? "?")/\($0["target_kbps"] ?? "?")/\($0["quantizer"] ?? "?")" }
        print("presenter each second (width/target/quantizer): \(sent)")
        // Measured from 4 s after each page's first picture (Chromium's own start-up aside).
        let slowStart = (slowLog.first(named: "first_picture")?["seconds"] as? Double ?? 99) + 4
        let fastStart = (fastLog.first(named: "first_picture")?["seconds"] as? Double ?? 99) + 4
        let slowGot = try #require(Self.decodedRate(slowLog, from: slowStart), "\(slow.stdout.suffix(1500))")
        let fastGot = try #require(Self.decodedRate(fastLog, from: fastStart), "\(fast.stdout.suffix(1500))")
        print("slow browser (500 kbit/s, 300 ms): \(String(format: "%.1f", slowGot.fps)) fps, \(slowGot.last)")
        print("fast browser: \(String(format: "%.1f", fastGot.fps)) fps, \(fastGot.last)")
        // Against what the presenter sent while each page measured (a loaded machine may not
        // keep 30 fps while two browsers decode).
        let presenterLog = EventLog(presenter)
        let fps = try #require(Self.sentRate(presenterLog, over: fastGot.span), "\(presenterLog.events(named: "stats").suffix(3))")
        let slowFPS = try #require(Self.sentRate(presenterLog, over: slowGot.span))
        let whole = presenterLog.events(named: "stats").dropFirst(3).compactMap { $0["fps"] as? Int }
        print("presenter: \(String(format: "%.1f", fps)) fps sent while the fast page measured, \(String(format: "%.1f", slowFPS)) while the slow one did, \(String(format: "%.1f", Double(whole.reduce(0, +)) / Double(max(whole.count, 1)))) over its whole run")
        // The presenter keeps its 30 fps: under the send budget libvpx is given the capture's
        // rate (before, in rooms it read the budget's waits as a lower rate and fell to 16–22
        // fps at 320x180 in 11 of 15 runs here; since, 29.6–29.9 in 6 of 6).
        #expect(fps >= 24, "the presenter sent \(fps) fps of 30 while the pages measured")
        #expect(fastGot.fps >= 0.9 * fps, "the unshaped browser: \(fastGot.fps) fps of \(fps)")
        #expect(fastGot.freezes < 0.5, "\(fastGot.last)")
        #expect(slowGot.fps >= 0.9 * slowFPS / 4 && slowGot.fps < 0.75 * slowFPS, "the slow browser: \(slowGot.fps) fps of \(slowFPS)")
        // Frozen under 5 % of the time measured, and under 10 % of its 34 s with the start-up:
        // before the relay has the link's feedback it sends every layer, and a 300 ms queue of
        // 500 kbit/s can lose the presenter's opening keyframes (21 runs here: at most 1.56 s
        // frozen, 3 of them over 1 s, all of it in the page's first 4 s and none after).
        let measured = slowGot.span.upperBound.timeIntervalSince(slowGot.span.lowerBound)
        #expect(slowGot.frozenSince < 0.05 * measured, "the slow browser froze \(slowGot.frozenSince) s in \(measured) s: \(slowGot.last)")
        #expect(slowGot.freezes < 0.1 * 34, "the slow browser froze \(slowGot.freezes) s in all: \(slowGot.last)")
        // The relay chose for it: it is listed on fewer layers.
        #expect(relayStats.contains { $0.contains("half") || $0.contains("base") }, "\(relayStats)")
    }
}
