import Foundation
import Testing
import X11TestSupport

/// `screenshare watch` on a bad network (through `Scripts/lossy-proxy`), fed by GStreamer, and
/// seen on screen: the "Must show" list of the viewer issue. Real processes and decoders; every
/// wait is a poll with a deadline.
///
/// The issue's sessions: 60 s of slides through 5 % loss; motion through 10 % loss for 15 s then
/// clean (20 s). The bounds are the issue's.
@Suite(.serialized) struct ViewerRobustnessTests {
    // MARK: - Helpers

    /// Two ports for the viewer and the proxy (each with its RTCP port +1) that do not collide.
    static func ports() -> (viewer: UInt16, proxy: UInt16) {
        let viewer = freeEvenPort()
        var proxy = freeEvenPort()
        while proxy == viewer { proxy = freeEvenPort() }
        return (viewer, proxy)
    }

    static func proxy(_ dir: String, listen: UInt16, to viewer: UInt16, _ impairments: [String]) throws -> Child {
        let child = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(listen)", "--to", "127.0.0.1:\(viewer)"]
                              + impairments, dir: dir, name: "proxy")
        try waitUntilBound(listen)
        try waitUntilBound(listen + 1)
        return child
    }

    /// `frames` frames of ffmpeg's moving test pattern as raw NV12 (the sender loops the file).
    static func motion(_ dir: String, width: Int, height: Int, frames: Int = 30) throws -> String {
        let path = "\(dir)/motion-\(width)x\(height).nv12"
        let status = try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height):rate=15",
                                               "-frames:v", "\(frames)", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path])
        guard status == 0 else { throw TestFailure("ffmpeg could not make the motion input (\(status))") }
        return path
    }

    /// A deck of slides that differ everywhere: background, title, bullets, a figure.
    static func deck(width: Int, height: Int, count: Int, dir: String) throws -> [[UInt8]] {
        let backgrounds = ["white", "lightyellow", "aliceblue", "mistyrose", "honeydew", "lavender"]
        return try (0..<count).map { i in
            let raw = "\(dir)/deck-\(i).bgra"
            let status = try run(which("convert"), [
                "-size", "\(width)x\(height)", "xc:\(backgrounds[i % backgrounds.count])",
                "-fill", "black", "-font", "DejaVu-Sans", "-pointsize", "36",
                "-annotate", "+60+90", "Slide \(i + 1): loss, delay and jitter",
                "-pointsize", "22",
                "-annotate", "+60+170", "• point \(i * 3 + 1): NACK repairs what the network drops",
                "-annotate", "+60+220", "• point \(i * 3 + 2): PLI asks for a keyframe when it cannot",
                "-annotate", "+60+270", "• point \(i * 3 + 3): the jitter buffer absorbs \(10 * (i + 1)) ms",
                "-fill", "none", "-stroke", ["navy", "darkred", "darkgreen", "purple"][i % 4], "-strokewidth", "3",
                "-draw", "rectangle \(60 + 40 * i),340 \(560 + 40 * i),\(height - 60)",
                "-draw", "circle \(900 - 30 * i),\(height / 2 + 120) \(900 - 30 * i),\(height / 2 + 120 + 80 + 10 * i)",
                "-depth", "8", "bgra:\(raw)",
            ])
            guard status == 0 else { throw TestFailure("ImageMagick convert failed (\(status))") }
            let data = try Data(contentsOf: URL(fileURLWithPath: raw))
            guard data.count == width * height * 4 else { throw TestFailure("slide has \(data.count) bytes") }
            return [UInt8](data)
        }
    }

    /// The loss fraction left after repair, from the viewer's summary.
    static func residualLoss(_ summary: [String: Any]) -> Double {
        let lost = Double(summary["packets_lost"] as? Int ?? 0), received = Double(summary["packets_received"] as? Int ?? 0)
        return lost / max(1, lost + received)
    }

    // MARK: - 5 % loss, 50 ± 10 ms, changing slides

    /// Changing slides (a new one every 2 s, each refined and then kept alive, as a presenter
    /// does) captured from a private Xvfb, through 5 % random loss and 40–60 ms of delay
    /// (uniform, so packets also reorder). NACK must repair nearly everything, and the
    /// picture must keep flowing: residual loss < 0.5 %, no freeze over 500 ms, freezes < 1 %
    /// of the session, over the issue's 60 s.
    @Test func fivePercentLossWithDelayIsRepairedWithoutFreezes() throws {
        let dir = try makeTempDir()
        let (w, h) = (1280, 720)
        let xvfb = try PrivateXvfb(width: w, height: h)
        let slides = try Self.deck(width: w, height: h, count: 4, dir: dir)
        try paintRoot(slides[0], width: w, height: h, on: xvfb.name)
        let (viewerPort, proxyPort) = Self.ports()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: viewerPort, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "120", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        let proxy = try Self.proxy(dir, listen: proxyPort, to: viewerPort,
                                   ["--loss", "0.05", "--delay", "40", "--jitter", "20", "--seed", "11"])
        let session = 60.0
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(proxyPort)", "--duration", "\(Int(session))",
            "--fps", "15", "--no-cursor", "--no-audio", "--json",
        ], dir: dir, name: "sender")
        // The presenter: the next slide every 2 s while the sender runs.
        var next = Date().addingTimeInterval(2), shown = 0
        let end = Date().addingTimeInterval(session + 20)
        while sender.isRunning, Date() < end {
            if Date() >= next {
                shown += 1
                try paintRoot(slides[shown % slides.count], width: w, height: h, on: xvfb.name)
                next = next.addingTimeInterval(2)
            }
            usleep(10_000)
        }
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        // Let the last NACKs be answered and the last frames play out, then stop the viewer.
        #expect(viewer.finish(within: 1) == 130, "viewer: \(viewer.stderr)")
        proxy.finish(within: 0)

        let sent = try EventLog(sender).stopped()
        let got = try EventLog(viewer).stopped()
        let proxied = try EventLog(proxy).stopped()
        let framesSent = try #require(sent["frames_sent"] as? Int)
        let decoded = try #require(got["frames_decoded"] as? Int)
        let dropped = try #require(proxied["dropped"] as? Int), forwarded = try #require(proxied["forwarded"] as? Int)
        let duration = try #require(sent["duration_s"] as? Double)
        let freezes = try #require(got["total_freezes_duration_s"] as? Double)
        let residual = Self.residualLoss(got)
        let record = "sent \(framesSent) frames in \(duration) s, decoded \(decoded); proxy dropped \(dropped) of \(dropped + forwarded); "
            + "residual loss \(residual * 100) %; freezes \(got["freeze_count"] ?? "?") totalling \(freezes) s; viewer \(got); sender \(sent)"
        print("fivePercentLoss:", record)
        #expect(shown >= 10, "slides shown: \(shown)")
        // The impairment was real, and repair happened through NACK.
        #expect(Double(dropped) >= 0.035 * Double(dropped + forwarded), "\(record)")
        #expect((got["nack_count"] as? Int ?? 0) > 0 && (sent["retransmitted"] as? Int ?? 0) > 0, "\(record)")
        #expect(residual < 0.005, "\(record)")
        // RTCP XR: the sender answered the viewer's reference times; the proxy delays its reports
        // 40–60 ms on their way back, so that is the round trip.
        let rtt = try #require(got["rtt_ms"] as? Double, "no rtt_ms: \(record)")
        #expect(rtt >= 35 && rtt <= 80, "rtt \(rtt) ms")
        // Fixed: a frame repaired late no longer raises the jitter buffer's target delay
        // (repaired frames are left out of its estimate; it once jumped 118 → 478 ms and froze
        // the picture up to 1.4 s), and retries now wait one measured RTT. Fixed too: a
        // keep-alive frame lost whole on a still slide went unnoticed until the next one a
        // second later (a ~1 s freeze in some runs); idle probes now ask for it every 100 ms.
        #expect(freezes < 0.5 && freezes < 0.01 * duration, "\(record)")
        #expect((got["idle_probes"] as? Int ?? 0) > 0, "\(record)")
        #expect(Double(decoded) >= 0.97 * Double(framesSent), "\(record)")
        #expect(got["width"] as? Int == w && got["height"] as? Int == h)
    }

    // MARK: - 10 % loss, then recovery

    /// 10 % random loss (and 40–60 ms delay) for the first 15 s of a motion stream, then a clean
    /// network for 5 s. Freezes must stay under 5 % of the lossy period, and within 1 s of the
    /// loss stopping the viewer must play at the sender's rate again with no further freeze
    /// (checked on every 1-s stats interval that starts 1 s or more after the loss stopped).
    @Test func tenPercentLossFreezesLittleAndRecoversWithinOneSecond() throws {
        let dir = try makeTempDir()
        let input = try Self.motion(dir, width: 640, height: 360)
        let (viewerPort, proxyPort) = Self.ports()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: viewerPort, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "60", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        let lossy = 15.0
        let proxy = try Self.proxy(dir, listen: proxyPort, to: viewerPort,
                                   ["--loss", "0.10", "--loss-until", "\(lossy)", "--delay", "40", "--jitter", "20", "--seed", "5"])
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", "nv12", "--input-size", "640x360",
            "--fps", "15", "--bitrate", "1M", "--content", "motion", "--duration", "20", "--no-audio", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 40) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 1) == 130, "viewer: \(viewer.stderr)")
        proxy.finish(within: 0)

        let sent = try EventLog(sender).stopped()
        let got = try EventLog(viewer).stopped()
        let proxyEvents = EventLog(proxy)
        let lossStopped = try #require(proxyEvents.first(named: "loss_stopped")?.eventTime, "\(proxy.stdout)")
        let proxied = try proxyEvents.stopped()
        let dropped = try #require(proxied["dropped"] as? Int), forwarded = try #require(proxied["forwarded"] as? Int)
        let freezes = try #require(got["total_freezes_duration_s"] as? Double)
        let framesSent = try #require(sent["frames_sent"] as? Int), duration = try #require(sent["duration_s"] as? Double)
        let fps = Double(framesSent) / duration
        let stats = EventLog(viewer).events(named: "stats")
        let time = stats.map { $0.eventTime ?? .distantPast }
        // Stats intervals (t − 1 s, t] that start ≥ 1 s after the loss stopped and end before the
        // sender stopped.
        let senderStopped = try #require(try EventLog(sender).stopped().eventTime)
        let after = stats.indices.filter { i in
            i > 0 && time[i].timeIntervalSince(lossStopped) >= 2 && time[i] <= senderStopped
        }
        let record = "dropped \(dropped) of \(dropped + forwarded) (during the loss), sent \(framesSent) frames at \(fps) fps; "
            + "freezes \(got["freeze_count"] ?? "?") totalling \(freezes) s; after the loss: "
            + after.map { "\(stats[$0]["fps"] as? Int ?? -1) fps/\(stats[$0]["freeze_count"] as? Int ?? -1) freezes" }.joined(separator: ", ")
            + "; viewer \(got)"
        print("tenPercentLoss:", record)
        #expect(Double(dropped) >= 0.05 * Double(dropped + forwarded), "\(record)")
        #expect(freezes < 0.05 * lossy, "\(record)")
        #expect(after.count >= 2, "\(record)")
        for i in after {
            #expect(Double(stats[i]["fps"] as? Int ?? 0) >= 0.8 * fps, "not recovered 1 s after the loss stopped: \(record)")
            #expect(stats[i]["freeze_count"] as? Int == stats[i - 1]["freeze_count"] as? Int, "a freeze after the loss stopped: \(record)")
        }
        #expect(Self.residualLoss(got) < 0.02, "\(record)")
    }

    // MARK: - Retransmissions never arrive

    /// Every retransmission is dropped (`--drop-resent`) while 3 % of the packets are lost for
    /// 4 s: NACK cannot repair, so the viewer must ask for a keyframe (PLI), decode it, and go on
    /// decoding once the loss stops.
    @Test func whenRetransmissionsAreLostPLIBringsAKeyframe() throws {
        let dir = try makeTempDir()
        let input = try Self.motion(dir, width: 640, height: 360)
        let (viewerPort, proxyPort) = Self.ports()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: viewerPort, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "60", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        let proxy = try Self.proxy(dir, listen: proxyPort, to: viewerPort, ["--loss", "0.03", "--loss-until", "4", "--drop-resent", "--seed", "3"])
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", "nv12", "--input-size", "640x360",
            "--fps", "15", "--bitrate", "1M", "--content", "motion", "--duration", "8", "--no-audio", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 1) == 130, "viewer: \(viewer.stderr)")
        proxy.finish(within: 0)

        let sent = try EventLog(sender).stopped()
        let got = try EventLog(viewer).stopped()
        let proxyEvents = EventLog(proxy)
        let lossStopped = try #require(proxyEvents.first(named: "loss_stopped")?.eventTime, "\(proxy.stdout)")
        let proxied = try proxyEvents.stopped()
        let stats = EventLog(viewer).events(named: "stats")
        func time(_ e: JSONObject) -> Date { e.eventTime ?? .distantPast }
        let record = "proxy \(proxied); viewer \(got); sender \(sent)"
        print("retransmissionsLost:", record)
        // The sender did resend, and none of it got through: the loss stayed unrepaired.
        #expect((sent["retransmitted"] as? Int ?? 0) > 0 && (proxied["dropped_resent"] as? Int ?? 0) > 0, "\(record)")
        #expect((got["packets_lost"] as? Int ?? 0) > 0, "\(record)")
        #expect((got["pli_count"] as? Int ?? 0) > 0, "\(record)")
        #expect((sent["keyframes_sent"] as? Int ?? 0) >= 2, "\(record)")
        #expect((got["keyframes_decoded"] as? Int ?? 0) >= 2, "\(record)")
        // Decoding goes on after the loss: frames decoded in every second from 1 s after it.
        let decodedAtStop = try #require(stats.last { time($0) <= lossStopped.addingTimeInterval(1) }?["frames_decoded"] as? Int)
        let decodedLater = try #require(got["frames_decoded"] as? Int)
        #expect(decodedLater - decodedAtStop >= 30, "frames decoded after the loss: \(decodedLater - decodedAtStop); \(record)")
        let after = stats.filter { time($0).timeIntervalSince(lossStopped) >= 2 && time($0).timeIntervalSince(lossStopped) < 4 }
        #expect(!after.isEmpty && after.allSatisfy { ($0["fps"] as? Int ?? 0) >= 8 },
                "fps after the loss: \(after.map { $0["fps"] as? Int ?? -1 }); \(record)")
    }

    // MARK: - GStreamer as the sender

    /// GStreamer encodes (vp8enc) and packetizes (rtpvp8pay, its defaults) a test pattern; our
    /// viewer must decode ≥ 90 % of the frames GStreamer sent (counted from a copy of the
    /// encoded stream muxed to WebM) at the right size.
    @Test func watchDecodesAStreamGStreamerSends() throws {
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "60", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(port)
        let frames = 60
        let gst = try Child(which("gst-launch-1.0"), [
            "-e", "-q", "videotestsrc", "is-live=true", "num-buffers=\(frames)", "pattern=smpte", "horizontal-speed=8",
            "!", "video/x-raw,width=960,height=540,framerate=15/1", "!", "vp8enc", "deadline=1", "target-bitrate=3000000",
            "!", "tee", "name=t",
            "t.", "!", "queue", "!", "rtpvp8pay", "pt=96", "!", "udpsink", "host=127.0.0.1", "port=\(port)",
            "t.", "!", "queue", "!", "webmmux", "!", "filesink", "location=\(dir)/sent.webm",
        ], dir: dir, name: "gst")
        #expect(gst.finish(within: 30) == 0, "gst: \(gst.stderr)")
        // The viewer has decoded what it will decode once a stats second after GStreamer ended
        // decoded nothing (the checks below say what is missing if that does not come).
        let gstEnded = Date()
        _ = try? EventLog.wait(for: "stats", in: viewer, seconds: 5) {
            $0["fps"] as? Int == 0 && ($0.eventTime ?? .distantPast) > gstEnded
        }
        #expect(viewer.finish(within: 0) == 130, "viewer: \(viewer.stderr)")
        let got = try EventLog(viewer).stopped()
        let probe = try Self.ffprobe("\(dir)/sent.webm", dir: dir)
        let sentFrames = try #require(probe.frames, "ffprobe: \(probe)")
        print("gstreamer:", "GStreamer sent \(sentFrames) frames; viewer \(got)")
        #expect(sentFrames >= frames - 2, "GStreamer encoded \(sentFrames) frames")
        let decodedFrames = try #require(got["frames_decoded"] as? Int)
        #expect(Double(decodedFrames) >= 0.9 * Double(sentFrames), "decoded \(decodedFrames) of \(sentFrames): \(got)")
        #expect(decodedFrames <= sentFrames)
        #expect(got["width"] as? Int == 960 && got["height"] as? Int == 540, "\(got)")
        // Frames of several packets each: GStreamer's packetization, not just single packets.
        #expect((got["packets_received"] as? Int ?? 0) >= 3 * decodedFrames, "\(got)")
        #expect(got["decode_errors"] as? Int == 0 && got["packets_lost"] as? Int == 0, "\(got)")
    }

    // MARK: - The window and the recording

    struct Probe {
        var codec: String?, width: Int?, height: Int?, duration: Double?, frames: Int?
    }

    /// ffprobe's view of a file's first video stream (frames counted by decoding).
    static func ffprobe(_ path: String, dir: String) throws -> Probe {
        let child = try Child(which("ffprobe"), ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                                 "stream=codec_name,width,height,nb_read_frames:format=duration", "-of", "json", path],
                              dir: dir, name: "ffprobe-\(UUID().uuidString.prefix(4))")
        guard child.finish(within: 30) == 0,
              let o = try? parseJSONObject(child.stdout) else {
            throw TestFailure("ffprobe \(path): \(child.stderr)")
        }
        let s = (o["streams"] as? [[String: Any]])?.first ?? [:]
        let f = o["format"] as? [String: Any] ?? [:]
        return Probe(codec: s["codec_name"] as? String, width: s["width"] as? Int, height: s["height"] as? Int,
                     duration: (f["duration"] as? String).flatMap(Double.init), frames: (s["nb_read_frames"] as? String).flatMap { Int($0) })
    }

    /// The viewer's window on its own Xvfb, read back with XGetImage through `xwd`-free Xlib
    /// (ImageMagick `import`), must show the shared slide scaled into the window: PSNR of the
    /// window's picture against the slide scaled by ImageMagick ≥ 32 dB (43 dB measured), and well above the
    /// PSNR against another slide. The `--record` file must open in ffprobe as VP8 at the sent
    /// size with a duration within 10 % of the session.
    @Test func theWindowShowsTheSlideAndTheRecordingProbesRight() throws {
        let dir = try makeTempDir()
        let (sw, sh) = (1920, 1080)
        let shared = try PrivateXvfb(width: sw, height: sh)
        let screen = try PrivateXvfb(width: 1280, height: 720)  // the viewer's
        let slides = try Self.deck(width: sw, height: sh, count: 2, dir: dir)
        try paintRoot(slides[0], width: sw, height: sh, on: shared.name)
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), [
            "watch", "--sdp", sdp, "--display", screen.name, "--record", "\(dir)/got.webm", "--duration", "60", "--json",
        ], dir: dir, name: "viewer")
        try waitUntilBound(port)
        // --min-fps 5: a still slide still gives a frame every 200 ms, so the recording's
        // duration follows the session closely.
        let session = 8.0
        let sender = try Child(screenshareBinary(), [
            "start", "--display", shared.name, "--to", "127.0.0.1:\(port)", "--duration", "\(Int(session))", "--min-fps", "5",
            "--no-cursor", "--no-audio", "--json",
        ], dir: dir, name: "sender")
        try EventLog.wait(for: "first_frame", in: viewer)

        // Where the window is and how big (no window manager: where the viewer put it).
        let listing = try Child(screenshareBinary(), ["sources", "--display", screen.name, "--json"], dir: dir, name: "sources")
        #expect(listing.finish(within: 10) == 0)
        let windows = try #require(try parseJSONObject(listing.stdout)["windows"] as? [[String: Any]])
        let window = try #require(windows.first { ($0["title"] as? String)?.hasPrefix("screenshare watch") == true }, "\(listing.stdout)")
        let g = try #require(window["geometry"] as? [String: Int])
        let (wx, wy, ww, wh) = (g["x"]!, g["y"]!, g["width"]!, g["height"]!)
        // The picture keeps its aspect ratio (16:9) inside the window, centred, even-sized.
        let scale = min(Double(ww) / Double(sw), Double(wh) / Double(sh))
        let pw = Int((Double(sw) * scale).rounded()) & ~1, ph = Int((Double(sh) * scale).rounded()) & ~1
        let px = wx + (ww - pw) / 2, py = wy + (wh - ph) / 2
        #expect(pw >= 640 && px >= 0 && py >= 0 && px + pw <= 1280 && py + ph <= 720, "picture \(pw)x\(ph)+\(px)+\(py) off screen")
        let expected = try Self.scaledLuma(slides[0], width: sw, height: sh, to: (pw, ph), dir: dir, name: "expected")
        let other = try Self.scaledLuma(slides[1], width: sw, height: sh, to: (pw, ph), dir: dir, name: "other")
        // Poll the screen until the slide is there (the first frames are still refining).
        var best = 0.0, againstOther = 0.0
        let deadline = Date().addingTimeInterval(6)
        while Date() < deadline && sender.isRunning {
            let shot = try Self.screenshotLuma(display: screen.name, x: px, y: py, width: pw, height: ph, dir: dir)
            let p = psnr(shot[...], expected)
            if p > best { best = p; againstOther = psnr(shot[...], other) }
            if best >= 40 { break }
            usleep(200_000)
        }
        print("window:", "window \(ww)x\(wh)+\(wx)+\(wy), picture \(pw)x\(ph)+\(px)+\(py): PSNR \(best) dB vs the slide, \(againstOther) dB vs another")
        #expect(best >= 32, "window picture vs slide: \(best) dB")
        #expect(best >= againstOther + 8, "vs slide \(best) dB, vs another slide \(againstOther) dB")

        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 1) == 130, "viewer: \(viewer.stderr)")
        let sent = try EventLog(sender).stopped()
        let got = try EventLog(viewer).stopped()
        let probe = try Self.ffprobe("\(dir)/got.webm", dir: dir)
        let duration = try #require(sent["duration_s"] as? Double)
        print("recording:", "\(probe); session \(duration) s; viewer \(got)")
        #expect(probe.codec == "vp8" && probe.width == sw && probe.height == sh, "\(probe)")
        #expect(abs((probe.duration ?? 0) - duration) <= 0.1 * duration, "recording \(probe.duration ?? -1) s, session \(duration) s")
        #expect(probe.frames == got["recorded_frames"] as? Int, "\(probe) \(got)")
    }

    /// BGRA pixels scaled to `size` by ImageMagick (a good, independent filter), as luma.
    static func scaledLuma(_ bgra: [UInt8], width: Int, height: Int, to size: (Int, Int), dir: String, name: String) throws -> [UInt8] {
        let src = "\(dir)/\(name).bgra", dst = "\(dir)/\(name)-scaled.bgra"
        try Data(bgra).write(to: URL(fileURLWithPath: src))
        let status = try run(which("convert"), ["-size", "\(width)x\(height)", "-depth", "8", "bgra:\(src)", "-resize", "\(size.0)x\(size.1)!",
                                                "-depth", "8", "bgra:\(dst)"])
        guard status == 0 else { throw TestFailure("convert -resize failed (\(status))") }
        return luma(bgra: [UInt8](try Data(contentsOf: URL(fileURLWithPath: dst))), width: size.0, height: size.1)
    }

    /// A rectangle of the display's root window (what is on screen), as luma.
    static func screenshotLuma(display: String, x: Int, y: Int, width: Int, height: Int, dir: String) throws -> [UInt8] {
        let out = "\(dir)/shot.bgra"
        let child = try Child(which("import"), ["-display", display, "-window", "root", "-crop", "\(width)x\(height)+\(x)+\(y)",
                                                "-depth", "8", "bgra:\(out)"], dir: dir, name: "import")
        guard child.finish(within: 20) == 0 else { throw TestFailure("import: \(child.stderr)") }
        let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        guard data.count == width * height * 4 else { throw TestFailure("screenshot has \(data.count) bytes") }
        return luma(bgra: data, width: width, height: height)
    }
}
