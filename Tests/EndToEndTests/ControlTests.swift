import Foundation
import Testing
import X11TestSupport

/// `screenshare ctl` against a running `start`: pause/resume, live settings, status, stop.
@Suite struct ControlTests {
    func ctl(_ args: [String], dir: String, env: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        let c = try Child(screenshareBinary(), ["ctl"] + args, dir: dir, name: "ctl-\(UUID().uuidString.prefix(6))", environment: env)
        let status = c.finish(within: 10)
        return (status, c.stdout, c.stderr)
    }

    func status(_ socket: String, dir: String) throws -> [String: Any] {
        let r = try ctl(["--socket", socket, "--json", "status"], dir: dir)
        #expect(r.status == 0, "\(r.err)")
        return try parseJSONObject(r.out)
    }

    @Test func pauseHoldsThePictureAndSettingsChangeLive() throws {
        let xvfb = try PrivateXvfb()
        let dir = try makeTempDir()
        let a = try renderSlide(width: 1920, height: 1080, title: "Before the pause", dir: dir)
        let b = try renderSlide(width: 1920, height: 1080, title: "Painted while paused — shown after resume", dir: dir)
        try paintRoot(a, width: 1920, height: 1080, on: xvfb.name)
        let port = freeEvenPort()
        let sdp = "\(dir)/c.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let socket = "\(dir)/ctl.sock"
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--control-socket", socket, "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        let firstFrame = try EventLog.wait(for: "first_frame_sent", in: sender)
        // Past the refinement after the first picture.
        try waitUntilRefined(sender, since: try #require(firstFrame.eventTime))

        #expect(try ctl(["--socket", socket, "pause"], dir: dir).status == 0)
        let before = try #require((try status(socket, dir: dir)["stats"] as? [String: Any])?["frames_sent"] as? Int)
        try paintRoot(b, width: 1920, height: 1080, on: xvfb.name)
        let statsBefore = EventLog(sender).events(named: "stats").count
        // Two more of the sender's stats seconds (the second one entirely after the new slide):
        // unpaused, it would have sent the slide by then.
        try EventLog.wait(for: "stats", in: sender, count: statsBefore + 2)
        let during = try #require((try status(socket, dir: dir)["stats"] as? [String: Any])?["frames_sent"] as? Int)
        // Paused: only keep-alive repeats (1 fps), not the ~22 frames a new slide would bring.
        #expect(during - before <= 3, "frames sent while paused: \(during - before)")
        #expect((try status(socket, dir: dir)["settings"] as? [String: Any])?["paused"] as? Bool == true)

        #expect(try ctl(["--socket", socket, "resume"], dir: dir).status == 0)
        let set = try ctl(["--socket", socket, "set", "max-resolution=720p", "bitrate=1M"], dir: dir)
        #expect(set.status == 0, "\(set.err)")
        let bad = try ctl(["--socket", socket, "set", "volume=11"], dir: dir)
        #expect(bad.status == 64)
        #expect(bad.err.contains("volume"), "\(bad.err)")
        // Applied: reported, and the stream at the new size.
        try EventLog.wait(for: "settings_changed", in: sender)
        try EventLog.wait(for: "stats", in: sender) { $0["width"] as? Int == 1280 && $0["height"] as? Int == 720 }
        let settings = try #require(try status(socket, dir: dir)["settings"] as? [String: Any])
        #expect(settings["max_resolution"] as? String == "720p")
        #expect(settings["bitrate_kbps"] as? Int == 1000)
        #expect(settings["paused"] as? Bool == false)

        #expect(try ctl(["--socket", socket, "stop"], dir: dir).status == 0)
        #expect(sender.finish(within: 15) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket is removed at exit")

        // Events in order; the stream ends at 1280x720 showing the slide painted during the pause.
        let names = EventLog(sender).names.filter { ["paused", "resumed", "settings_changed", "stopped"].contains($0) }
        #expect(names == ["paused", "resumed", "settings_changed", "stopped"], "\(names)")
        let stopped = try EventLog(sender).stopped()
        #expect(stopped["width"] as? Int == 1280 && stopped["height"] as? Int == 720)
        #expect(stopped["reason"] as? String == "ctl_stop")
        let last = try ffmpeg.lastFrame(width: 1920, height: 1080)
        let pa = psnr(last, luma(bgra: a, width: 1920, height: 1080)), pb = psnr(last, luma(bgra: b, width: 1920, height: 1080))
        #expect(pb > pa + 3, "last frame: \(pb) dB to the new slide, \(pa) dB to the old")
    }

    @Test func ctlFindsTheOnlyBroadcasterOrSaysThereIsNone() throws {
        let xvfb = try PrivateXvfb()
        let dir = try makeTempDir()
        let runtime = try makeTempDir()
        let env = ["XDG_RUNTIME_DIR": runtime]
        let none = try ctl(["status"], dir: dir, env: env)
        #expect(none.status == 69)
        #expect(none.err.contains("no screenshare broadcaster is running"))
        let port = freeEvenPort()
        let sender = try Child(screenshareBinary(), ["start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--json"],
                               dir: dir, name: "sender", environment: env)
        try EventLog.wait(for: "started", in: sender)
        let r = try ctl(["status"], dir: dir, env: env)
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.contains("frames_sent"))
        kill(sender.pid, SIGUSR1)
        try EventLog.wait(for: "paused", in: sender)
        kill(sender.pid, SIGUSR2)
        try EventLog.wait(for: "resumed", in: sender)
        #expect(sender.finish(within: 0) == 130)
    }

    @Test func switchingTheSourceLive() throws {
        let xvfb = try PrivateXvfb()
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let sink = try UDPReceiver(port: port)  // bound: the packets are not refused
        defer { sink.stop() }
        let socket = "\(dir)/ctl.sock"
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--control-socket", socket, "--json",
        ], dir: dir, name: "sender")
        try EventLog.wait(for: "first_frame_sent", in: sender)
        // A window that does not exist, with another setting: refused by the capture thread,
        // and `ctl` says so (exit 64, the reason); the screen goes on, and nothing of the set is
        // kept (all or nothing): `status` at once shows the screen at 15 fps.
        let refused = try ctl(["--socket", socket, "set", "source=window:no such window", "fps=30"], dir: dir)
        #expect(refused.status == 64 && refused.err.contains("no window title contains it") && refused.err.contains("nothing changed"),
                "\(refused.status) \(refused.err)")
        let failed = try EventLog.wait(for: "error", in: sender)
        #expect(failed["kind"] as? String == "source_switch_failed", "\(failed)")
        let after = try parseJSONObject(ctl(["--socket", socket, "--json", "status"], dir: dir).out)
        #expect((after["settings"] as? [String: Any])?["source"] as? String == "screen", "\(after)")
        #expect((after["settings"] as? [String: Any])?["fps"] as? Int == 15, "\(after)")
        // A region outside the screen, the same.
        let outside = try ctl(["--socket", socket, "set", "--region", "5000x5000+0+0"], dir: dir)
        #expect(outside.status == 64 && outside.err.contains("outside"), "\(outside.err)")
        #expect(try ctl(["--socket", socket, "set", "source=region:640x480+100+100"], dir: dir).status == 0)
        // The capture thread switches: `ctl status` reports the stream at the region's size.
        var now: JSONObject = [:]
        try waitUntil(seconds: 10, pollMillis: 100, "the stream switched to the 640x480 region: \(now)") {
            now = (try? parseJSONObject(ctl(["--socket", socket, "--json", "status"], dir: dir).out)) ?? [:]
            return (now["stats"] as? [String: Any])?["width"] as? Int == 640
        }
        #expect((now["stats"] as? [String: Any])?["height"] as? Int == 480, "\(now)")
        #expect((now["settings"] as? [String: Any])?["source"] as? String == "region:640x480+100+100", "\(now)")
        #expect(sender.finish(within: 0) == 130)
    }
}

/// Live changes as a receiver sees them (`screenshare watch` decoding the stream).
@Suite struct ControlAtTheReceiverTests {
    @Test func frameRateAndSizeChangeAtTheReceiverWithoutAGap() throws {
        let dir = try makeTempDir()
        let input = "\(dir)/motion.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=960x540:rate=30",
                                          "-frames:v", "30", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", input]) == 0)
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 30, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "16", "--json"], dir: dir, name: "viewer")
        try waitUntilBound(port)
        let socket = "\(dir)/ctl.sock"
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", input, "--input-size", "960x540", "--fps", "30", "--content", "motion",
            "--bitrate", "2M", "--no-audio", "--control-socket", socket, "--duration", "14", "--json",
        ], dir: dir, name: "sender")
        func stats() -> [[String: Any]] { EventLog(viewer).events(named: "stats") }
        func fps(after count: Int) throws -> Int {
            // The second full second after the change (the first may straddle it).
            let s = try EventLog.wait(for: "stats", in: viewer, count: count + 2)
            return s["fps"] as? Int ?? -1
        }
        _ = try EventLog.wait(for: "first_frame", in: viewer)
        _ = try EventLog.wait(for: "stats", in: viewer, count: 2)
        #expect(try runScreenshare(["ctl", "--socket", socket, "set", "fps=5"]).status == 0)
        let slow = try fps(after: stats().count)
        #expect((4...6).contains(slow), "fps after set fps=5: \(slow)")
        #expect(try runScreenshare(["ctl", "--socket", socket, "set", "fps=30"]).status == 0)
        let fast = try fps(after: stats().count)
        #expect(fast >= 27, "fps after set fps=30: \(fast)")

        // 960x540 → 640x360: the decoded size changes within 1 s, and the pictures do not stop.
        let asked = Date()
        #expect(try runScreenshare(["ctl", "--socket", socket, "set", "max-resolution=640x360"]).status == 0)
        let changed = try EventLog.wait(for: "resolution_changed", in: viewer, seconds: 5)
        #expect(Date().timeIntervalSince(asked) <= 1.0, "new size after \(Date().timeIntervalSince(asked)) s")
        #expect(changed["width"] as? Int == 640 && changed["height"] as? Int == 360)
        #expect(sender.finish(within: 30) == 0, "\(sender.stderr)")
        #expect(viewer.finish(within: 30) == 0, "\(viewer.stderr)")
        let summary = try EventLog(viewer).stopped()
        // No gap longer than 500 ms. (A freeze is counted from max(3 × the frame time, +150 ms),
        // about 180 ms at 30 fps: the encoder restart at the new size may cost one, under load.)
        let frozen = summary["total_freezes_duration_s"] as? Double ?? 1
        #expect(frozen < 0.5, "\(summary)")
        #expect((summary["freeze_count"] as? Int ?? 9) <= 1, "\(summary)")
        #expect(summary["width"] as? Int == 640)
    }
}
