import Foundation
import Testing
import X11TestSupport

/// The whole sender, checked by independent decoders (ffmpeg, GStreamer) under the real Xvfb.
@Suite(.serialized) struct VideoEndToEndTests {
    /// Each test gets its own X server (Swift Testing makes a new suite value per test).
    let xvfb: PrivateXvfb
    init() throws { xvfb = try PrivateXvfb() }

    @Test func ffmpegDecodesASharpSlideAt1080p() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "End-to-end slide: sharp text and fine lines", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)
        let port = freeEvenPort()
        let sdp = "\(dir)/stream.sdp"
        try writeSDP(port: port, fps: 15, transportFeedback: true, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--sdp", "\(dir)/sender.sdp", "--duration", "4",
            "--bitrate", "2M", "--fps", "15", "--no-cursor", "--json",
            "--no-audio",  // the SDP compared below is video-only
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        let stopped = try EventLog(sender).stopped()
        let sent = try #require(stopped["frames_sent"] as? Int)
        // A still slide: the first frame, refinement, then at least the 1 fps keep-alive
        // (rate control may drop refinement frames after a large keyframe in detail mode).
        #expect(sent >= 4, "frames sent: \(sent)")
        let r = try ffmpeg.results()
        #expect(Double(r.frames) >= 0.95 * Double(sent), "ffmpeg decoded \(r.frames) of \(sent); \(ffmpeg.child.stderr)")
        #expect(r.width == 1920 && r.height == 1080)
        let p = psnr(try ffmpeg.lastFrame(width: 1920, height: 1080), luma(bgra: slide, width: 1920, height: 1080))
        // The opening slide, refined while it stands still (issue 43: ≥ 60 dB; 66.9 here).
        #expect(p >= 60, "PSNR \(p) dB")
        // The SDP the sender wrote is the one the receiver used.
        #expect(try String(contentsOfFile: "\(dir)/sender.sdp", encoding: .utf8) == String(contentsOfFile: sdp, encoding: .utf8))
    }

    @Test func gstreamerDecodesTheSameStream() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "GStreamer receiver slide", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)
        let port = freeEvenPort()
        let gst = try Child(which("gst-launch-1.0"), [
            "-e", "-q", "udpsrc", "port=\(port)",
            "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=VP8,payload=96",
            "!", "rtpjitterbuffer", "latency=50", "!", "rtpvp8depay", "!", "vp8dec", "!", "checksumsink",
        ], dir: dir, name: "gst")
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--duration", "3", "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        gst.finish(within: 1)
        let sent = try #require(try EventLog(sender).stopped()["frames_sent"] as? Int)
        let decoded = gst.stdout.split(separator: "\n").filter { !$0.isEmpty }.count
        #expect(decoded >= Int(0.9 * Double(sent)) && decoded > 0, "GStreamer decoded \(decoded) of \(sent): \(gst.stderr)")
    }

    @Test func regionAndMaxResolution() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Region capture", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)

        // A 640x480 region stays 640x480 and shows exactly that part of the screen.
        let port = freeEvenPort()
        let sdp = "\(dir)/r.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--region", "640x480+100+120", "--max-resolution", "720p",
            "--duration", "2", "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        let r = try ffmpeg.results()
        #expect(r.width == 640 && r.height == 480)
        let p = psnr(try ffmpeg.lastFrame(width: 640, height: 480),
                     luma(bgra: slide, width: 1920, height: 1080, crop: (100, 120, 640, 480)))
        #expect(p >= 38, "region PSNR \(p) dB")

        // --max-resolution 720p on the 1080p screen gives 1280x720 frames.
        let port2 = freeEvenPort()
        let sdp2 = "\(dir)/m.sdp"
        try writeSDP(port: port2, fps: 15, to: sdp2)
        let dir2 = try makeTempDir()
        let ffmpeg2 = try FFmpegReceiver(sdpPath: sdp2, dir: dir2)
        try waitUntilBound(port2)
        let sender2 = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port2)", "--max-resolution", "720p", "--duration", "2", "--no-cursor", "--json",
        ], dir: dir2, name: "sender")
        #expect(sender2.finish(within: 30) == 0, "sender: \(sender2.stderr)")
        ffmpeg2.child.finish(within: 5)
        let r2 = try ffmpeg2.results()
        #expect(r2.width == 1280 && r2.height == 720, "got \(r2.width)x\(r2.height)")
        #expect(r2.frames > 0)
    }

    @Test func rawNV12InputDecodesToTheExpectedPicture() throws {
        let dir = try makeTempDir()
        let w = 640, h = 360
        // A picture of horizontal luma bands and flat chroma, as NV12.
        var nv12 = [UInt8](repeating: 128, count: w * h * 3 / 2)
        for y in 0..<h { for x in 0..<w { nv12[y * w + x] = UInt8(16 + ((y / 30) * 19 + (x / 80) * 7) % 220) } }
        let path = "\(dir)/in.nv12"
        try Data(nv12).write(to: URL(fileURLWithPath: path))
        let port = freeEvenPort()
        let sdp = "\(dir)/n.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--input", path, "--input-format", "nv12", "--input-size", "\(w)x\(h)",
            "--duration", "2", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        let r = try ffmpeg.results()
        #expect(r.width == w && r.height == h)
        let p = psnr(try ffmpeg.lastFrame(width: w, height: h), Array(nv12[0..<(w * h)]))
        #expect(p >= 40, "NV12 PSNR \(p) dB")
    }

    @Test func unreachableDisplayIsAClearErrorWithItsExitCode() throws {
        let dir = try makeTempDir()
        let sender = try Child(screenshareBinary(), ["start", "--to", "127.0.0.1:5998", "--display", ":93", "--duration", "1"],
                               dir: dir, name: "sender")
        #expect(sender.finish(within: 10) == 69)
        #expect(sender.stderr.contains("\":93\""), "stderr: \(sender.stderr)")
    }

    @Test func unresolvableDestinationIsANetworkError() throws {
        let dir = try makeTempDir()
        let sender = try Child(screenshareBinary(), ["start", "--display", xvfb.name, "--to", "no-such-host.invalid:5004", "--duration", "1"],
                               dir: dir, name: "sender")
        #expect(sender.finish(within: 10) == 68)
        #expect(sender.stderr.contains("no-such-host.invalid"))
    }

    @Test func sigintStopsCleanlyWithBye() throws {
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let sender = try Child(screenshareBinary(), ["start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--json"], dir: dir, name: "sender")
        // Wait for the first frame (bounded), then interrupt.
        try EventLog.wait(for: "first_frame_sent", in: sender)
        kill(sender.pid, SIGINT)
        #expect(sender.finish(within: 10, interrupt: false) == 130)
        let stopped = try EventLog(sender).stopped()
        #expect(stopped["reason"] as? String == "requested")
    }

    @Test func windowIsFollowedAndNothingElseEverShows() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Window capture", dir: dir)
        let first = crop(slide, width: 1920, x: 100, y: 100, w: 640, h: 360)
        let second = crop(slide, width: 1920, x: 900, y: 500, w: 640, h: 360)
        // The desktop behind is green and a window in front, covering part of ours, is red; our
        // window shows a grey slide. Any leak would colour the frames.
        try paintRoot([UInt8](repeating: 0, count: 1920 * 1080 * 4).enumerated().map { $0.offset % 4 == 1 || $0.offset % 4 == 3 ? 255 : 0 },
                      width: 1920, height: 1080, on: xvfb.name)
        let shared = try TestWindow(displayName: xvfb.name, title: "Shared Slides", x: 200, y: 150, width: 640, height: 360)
        shared.paint(first)
        let cover = try TestWindow(displayName: xvfb.name, title: "Chat", x: 500, y: 300, width: 400, height: 300)
        cover.paint((0..<(400 * 300)).flatMap { _ in [0, 0, 255, 255] as [UInt8] })

        let port = freeEvenPort()
        let sdp = "\(dir)/w.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let socket = "\(dir)/ctl.sock"
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--window", "shared slides",
            "--control-socket", socket, "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        defer { sender.finish(within: 0) }
        try EventLog.wait(for: "first_frame_sent", in: sender)
        // The sender asked the window to repaint (Expose) when it redirected it; so does an app.
        // Each step once the sender has finished refining the one before.
        shared.paint(first)
        try waitUntilRefined(sender, since: Date())
        try shared.move(x: 1100, y: 650)
        shared.paint(second)
        try waitUntilRefined(sender, since: Date())
        try shared.unmap()
        try waitUntilRefined(sender, since: Date())
        #expect(try runScreenshare(["ctl", "--socket", socket, "stop"]).status == 0)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)

        let r = try ffmpeg.results()
        #expect(r.width == 640 && r.height == 360, "got \(r.width)x\(r.height)")
        let frames = try ffmpeg.allFrames(width: 640, height: 360)
        let best1 = frames.map { psnr($0, luma(bgra: first, width: 640, height: 360)) }.max() ?? 0
        let best2 = frames.map { psnr($0, luma(bgra: second, width: 640, height: 360)) }.max() ?? 0
        #expect(best1 >= 38, "window before the move: best PSNR \(best1) dB")
        #expect(best2 >= 38, "window after the move: best PSNR \(best2) dB")
        // Never the window in front (red) nor the desktop (green): every frame stays grey.
        for (i, c) in try ffmpeg.chromaPerFrame(width: 640, height: 360).enumerated() {
            #expect(c < 6, "frame \(i) is coloured (\(c)): something else than the window shows")
        }
        // Hidden: a flat placeholder, not the screen behind.
        let last = try #require(frames.last)
        #expect((last.max() ?? 0) - (last.min() ?? 0) <= 4, "last frame is not a flat placeholder")
        #expect(EventLog(sender).events(named: "warning").contains { $0["kind"] as? String == "source_unavailable" }, "\(sender.stdout)")
    }

    @Test func oneRandRMonitorIsSentAtItsOwnSize() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Monitor capture: the right-hand lower quarter", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)
        #expect(try run(which("xrandr"), ["--display", xvfb.name, "--setmonitor", "lower-right", "960/254x540/143+960+540", "none"]) == 0)
        let port = freeEvenPort()
        let sdp = "\(dir)/m.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--monitor", "lower-right",
            "--duration", "3", "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        let r = try ffmpeg.results()
        #expect(r.width == 960 && r.height == 540, "got \(r.width)x\(r.height)")
        let p = psnr(try ffmpeg.lastFrame(width: 960, height: 540),
                     luma(bgra: slide, width: 1920, height: 1080, crop: (960, 540, 960, 540)))
        #expect(p >= 38, "monitor PSNR \(p) dB")
    }

    @Test func aResizedScreenIsFollowedWithANewKeyframe() throws {
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let sdp = "\(dir)/s.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir)
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--duration", "3", "--json",
        ], dir: dir, name: "sender")
        try EventLog.wait(for: "first_frame_sent", in: sender)
        // Xvfb resizes its framebuffer (xrandr reports a CRTC error, but the screen changes).
        _ = try run(which("xrandr"), ["--display", xvfb.name, "--fb", "1280x720"])
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        ffmpeg.child.finish(within: 5)
        let stopped = try EventLog(sender).stopped()
        #expect(stopped["width"] as? Int == 1280 && stopped["height"] as? Int == 720, "\(stopped)")
        #expect(stopped["keyframes_sent"] as? Int == 2)
        #expect(EventLog(sender).events(named: "warning").contains { $0["kind"] as? String == "source_resized" }, "\(sender.stdout)")
        let md5 = try String(contentsOfFile: ffmpeg.md5Path, encoding: .utf8)
        #expect(md5.contains("3110400") && md5.contains("1382400"), "ffmpeg decoded frames of both sizes")
    }

    @Test func sourcesListsWindowsAndMonitorsAsJSON() throws {
        let w = try TestWindow(displayName: xvfb.name, title: "Listed Window ✓", x: 30, y: 40, width: 300, height: 200)
        let dir = try makeTempDir()
        let child = try Child(screenshareBinary(), ["sources", "--display", xvfb.name, "--json"], dir: dir, name: "sources")
        #expect(child.finish(within: 10) == 0, "\(child.stderr)")
        let obj = try parseJSONObject(child.stdout)
        let windows = try #require(obj["windows"] as? [[String: Any]])
        let mine = try #require(windows.first { $0["id"] as? String == "0x" + String(w.id, radix: 16) })
        #expect(mine["title"] as? String == "Listed Window ✓")
        let g = try #require(mine["geometry"] as? [String: Int])
        #expect(g == ["x": 30, "y": 40, "width": 300, "height": 200])
        let monitors = try #require(obj["monitors"] as? [[String: Any]])
        #expect(!monitors.isEmpty)
    }
}

/// Copies a w×h BGRA rectangle out of a picture `width` pixels wide.
func crop(_ bgra: [UInt8], width: Int, x: Int, y: Int, w: Int, h: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: w * h * 4)
    for row in 0..<h {
        let src = ((y + row) * width + x) * 4
        out[(row * w * 4)..<((row + 1) * w * 4)] = bgra[src..<(src + w * 4)]
    }
    return out
}

/// RTCP feedback reaches the sender: a PLI (RFC 4585 §6.3.1) sent back to the address the
/// sender reports come from gives a new keyframe.
@Suite struct KeyframeRequestTests {
    @Test func pictureLossIndicationGivesAKeyframe() throws {
        let xvfb = try PrivateXvfb()
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let rtcp = try UDPReceiver(port: port + 1)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--duration", "3", "--json",
        ], dir: dir, name: "sender")
        // The first sender report tells where the sender's RTCP comes from, and its SSRC.
        let first = try rtcp.receive(timeoutSeconds: 10)
        let report = first.bytes
        #expect(report.count >= 28 && report[1] == 200, "first RTCP packet is an SR")
        let mediaSSRC = Array(report[4..<8])
        // PLI: V=2 FMT=1, PT=206, length 2; sender SSRC (ours), media SSRC (theirs).
        rtcp.send([0x81, 206, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44] + mediaSSRC, to: first.from)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        let stopped = try EventLog(sender).stopped()
        #expect(stopped["keyframes_sent"] as? Int == 2, "keyframes: \(stopped["keyframes_sent"] ?? "none")")
    }
}

/// Malformed RTCP reaching the sender is dropped and counted (`packets_rejected`), and the
/// feedback after it still works.
@Suite struct MalformedFeedbackTests {
    @Test func malformedRTCPIsCountedAndFeedbackGoesOn() throws {
        let dir = try makeTempDir()
        let path = "\(dir)/frames.nv12"
        var bytes = [UInt8]()
        for f in 0..<8 { bytes += [UInt8](repeating: UInt8(f * 30), count: 64 * 64 * 3 / 2) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let port = freeEvenPort()
        let media = try UDPReceiver(port: port)  // bound: the packets are not refused
        defer { media.stop() }
        let rtcp = try UDPReceiver(port: port + 1)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", path, "--input-size", "64x64", "--input-fps", "10",
            "--no-audio", "--duration", "3", "--json",
        ], dir: dir, name: "sender")
        let first = try rtcp.receive(timeoutSeconds: 10)
        #expect(first.bytes.count >= 28 && first.bytes[1] == 200, "first RTCP packet is an SR")
        let mediaSSRC = Array(first.bytes[4..<8])
        // Too short for a header; version 1; a length longer than the datagram.
        rtcp.send([0x81], to: first.from)
        rtcp.send([0x41, 206, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44] + mediaSSRC, to: first.from)
        rtcp.send([0x81, 206, 0x00, 0x09, 0x11, 0x22, 0x33, 0x44] + mediaSSRC, to: first.from)
        rtcp.send([0x81, 206, 0x00, 0x02, 0x11, 0x22, 0x33, 0x44] + mediaSSRC, to: first.from)  // a good PLI
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        let stopped = try EventLog(sender).stopped()
        #expect(stopped["packets_rejected"] as? Int == 3, "\(stopped)")
        #expect(stopped["keyframes_sent"] as? Int == 2, "the PLI after the bad packets: \(stopped)")
    }
}

/// Rate control: `--content motion` keeps the frame rate and still holds the bit rate asked
/// for on hard content (it may use the coarsest quantizer; detail drops frames instead).
@Suite struct RateControlTests {
    /// `detail` under no pressure sends every picture: hard content at a generous bit rate
    /// must not lose frames (libvpx's own dropper used to drop most of them).
    @Test func detailSendsEveryPictureWhenTheBudgetAllows() throws {
        let dir = try makeTempDir()
        let path = "\(dir)/hard.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=15",
                                          "-frames:v", "30", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path]) == 0)
        let port = freeEvenPort()
        let sink = try UDPReceiver(port: port)  // bound: the packets are not refused
        defer { sink.stop() }
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", path, "--input-format", "nv12", "--input-size", "1280x720",
            "--fps", "15", "--bitrate", "4M", "--content", "detail", "--duration", "4", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 60) == 0, "sender: \(sender.stderr)")
        let stopped = try EventLog(sender).stopped()
        let captured = try #require(stopped["frames_captured"] as? Int)
        let sent = try #require(stopped["frames_sent"] as? Int)
        #expect(Double(sent) >= 0.8 * Double(captured), "sent \(sent) of \(captured) pictures")
    }

    @Test func motionHoldsItsBitrateOnHardContent() throws {
        let dir = try makeTempDir()
        let path = "\(dir)/motion.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30",
                                          "-frames:v", "45", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path]) == 0)
        let port = freeEvenPort()
        let sink = try UDPReceiver(port: port)  // bound: the packets are not refused
        defer { sink.stop() }
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", path, "--input-format", "nv12", "--input-size", "1280x720",
            "--fps", "30", "--bitrate", "1M", "--content", "motion", "--duration", "5", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 60) == 0, "sender: \(sender.stderr)")
        let rates = EventLog(sender).events(named: "stats").compactMap { $0["kbps"] as? Int }
        // Over the whole run, keyframe included: within 25 % of the target (it was 43 % over
        // when the quantizer was capped at 56).
        let stopped = try EventLog(sender).stopped()
        let bytes = try #require(stopped["bytes_sent"] as? Int)
        let seconds = try #require(stopped["duration_s"] as? Double)
        let mean = Double(bytes) * 8 / seconds / 1000
        #expect(mean <= 1250, "motion at 1 Mbps sent \(mean) kbps on average (per second: \(rates))")
    }
}
