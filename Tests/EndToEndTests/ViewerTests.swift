import Foundation
import Testing
import X11TestSupport

/// `screenshare watch` against `screenshare start`, directly and through a lossy proxy.
@Suite struct ViewerTests {
    @Test func watchShowsDecodesAndRecordsEveryFrame() throws {
        let xvfb = try PrivateXvfb()
        let screen = try PrivateXvfb(width: 1280, height: 720)  // the viewer's, not the one shared
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Watched and recorded", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), [
            "watch", "--sdp", sdp, "--display", screen.name, "--record", "\(dir)/got.webm", "--duration", "6", "--json",
        ], dir: dir, name: "viewer")
        try waitUntilBound(port)
        // libavformat is opened by the viewer that records when it starts, before anything
        // arrives (opened at the first keyframe, its ~100 libraries held the pictures up for a
        // second on a busy machine: a freeze), and never by the sender (linked, it and its ~130
        // dependencies cost every process about 25 MB). Nor, by a sender of plain RTP, OpenSSL and
        // libsrtp2 (with NSS), opened when DTLS or SRTP is first used (about 2.3 MB).
        func maps(_ child: Child) -> String {  // read to the end: /proc files say they are empty
            let fd = open("/proc/\(child.pid)/maps", O_RDONLY)
            guard fd >= 0 else { return "" }
            defer { close(fd) }
            var all = [UInt8](), chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                all += chunk[0..<n]
            }
            return String(decoding: all, as: UTF8.self)
        }
        try EventLog.wait(for: "started", in: viewer)
        #expect(maps(viewer).contains("libavformat.so"), "the recording viewer had not opened libavformat when it started")
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--duration", "4", "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        // The viewer's window is on the display while it plays.
        try EventLog.wait(for: "first_frame", in: viewer)
        let senderMaps = maps(sender)
        #expect(senderMaps.contains("libvpx.so") && !senderMaps.contains("libavformat.so") && !senderMaps.contains("libavcodec.so"),
                "\(senderMaps.split(separator: "\n").filter { $0.contains(".so") }.count) mappings")
        for library in ["libssl.so", "libcrypto.so", "libsrtp2.so", "libnss3.so"] {
            #expect(!senderMaps.contains(library), "a sender of plain RTP mapped \(library)")
        }
        let listing = try Child(screenshareBinary(), ["sources", "--display", screen.name], dir: dir, name: "sources")
        #expect(listing.finish(within: 10) == 0)
        #expect(listing.stdout.contains("screenshare watch"), "\(listing.stdout)")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 30) == 0, "viewer: \(viewer.stderr)")

        let sent = try #require(try EventLog(sender).stopped()["frames_sent"] as? Int)
        let summary = try EventLog(viewer).stopped()
        #expect(summary["frames_decoded"] as? Int == sent, "\(summary)")
        #expect(summary["packets_lost"] as? Int == 0)
        #expect(summary["freeze_count"] as? Int == 0)
        #expect((summary["time_to_first_frame_ms"] as? Double).map { $0 > 0 } == true)
        // The sender heard our receiver reports (RTT measured).
        #expect((try EventLog(sender).stopped()["receiver_reports"] as? Int ?? 0) >= 2)

        // The recording: every decoded frame, VP8 at 1920x1080, and the slide at full quality.
        let recorded = try #require(summary["recorded_frames"] as? Int)
        #expect(recorded == sent)
        let yuv = "\(dir)/got.yuv"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-i", "\(dir)/got.webm", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", yuv]) == 0)
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuv)))
        let size = 1920 * 1080 * 3 / 2
        #expect(data.count / size == recorded, "frames in the file")
        let lastY = data[(data.count / size - 1) * size..<((data.count / size - 1) * size + 1920 * 1080)]
        let p = psnr(lastY, luma(bgra: slide, width: 1920, height: 1080))
        #expect(p >= 40, "recorded slide PSNR \(p) dB")
    }

    /// A recording that cannot be written is an `error` event naming the file and why, and a
    /// failed `watch` (exit 1): not a file silently left without its end. (What is written goes
    /// out at once — the header, then a cluster every half second, so that a crash loses little —
    /// so a device that is always full fails it at its first write, not at the trailer.)
    @Test func aRecordingThatCannotBeFinishedFailsTheViewer() throws {
        let dir = try makeTempDir()
        let input = try smallInput(in: dir)
        let record = "\(dir)/full.webm"
        try FileManager.default.createSymbolicLink(atPath: record, withDestinationPath: "/dev/full")
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--record", record, "--duration", "4", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(port)
        let sender = try smallSender(input, port: port, dir: dir)
        try EventLog.wait(for: "first_frame", in: viewer)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 30) == 1, "viewer: \(viewer.stderr)")

        let log = EventLog(viewer)
        let errors = log.events(named: "error")
        #expect(errors.count == 1, "\(errors)")
        let error = try #require(errors.first)
        #expect(error["kind"] as? String == "record_failure")
        let message = error["message"] as? String ?? ""
        #expect(message.contains(record) && message.contains("No space left on device"), "\(message)")
        let summary = try log.stopped()
        #expect(summary["reason"] as? String == "duration")
        #expect(summary["recorded_frames"] as? Int == 0, "\(summary)")
        #expect(log.names.firstIndex(of: "error")! < log.names.lastIndex(of: "stopped")!)
    }

    /// A viewer that cannot open libavformat says so when it starts (an `error` event naming
    /// the library and the file, after `started`, before any picture), goes on watching, and
    /// fails (exit 1).
    @Test func aRecordingWithoutLibavformatIsAnErrorAtTheStart() throws {
        let dir = try makeTempDir()
        // The loader looks in LD_LIBRARY_PATH first, and finds there a libavformat that is no library.
        let libs = "\(dir)/libs"
        try FileManager.default.createDirectory(atPath: libs, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: "\(libs)/libavformat.so.59", contents: Data("not a library".utf8)))
        let input = try smallInput(in: dir)
        let record = "\(dir)/got.webm"
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--record", record, "--duration", "4", "--json"],
                               dir: dir, name: "viewer", environment: ["LD_LIBRARY_PATH": libs])
        try waitUntilBound(port)
        let error = try EventLog.wait(for: "error", in: viewer)
        #expect(error["kind"] as? String == "record_failure")
        let message = error["message"] as? String ?? ""
        #expect(message.contains(record) && message.contains("cannot load libavformat") && message.contains("libavformat.so.59"), "\(message)")
        let sender = try smallSender(input, port: port, dir: dir)
        try EventLog.wait(for: "first_frame", in: viewer)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(viewer.finish(within: 30) == 1, "viewer: \(viewer.stderr)")

        let log = EventLog(viewer)
        #expect(log.events(named: "error").count == 1, "\(log.events(named: "error"))")
        #expect(log.names.firstIndex(of: "started")! < log.names.firstIndex(of: "error")!)
        #expect(log.names.firstIndex(of: "error")! < log.names.firstIndex(of: "first_frame")!)
        let summary = try log.stopped()
        #expect((summary["frames_decoded"] as? Int ?? 0) > 0, "\(summary)")
        #expect((summary["recorded_frames"] as? Int ?? 0) == 0, "\(summary)")
        #expect(!FileManager.default.fileExists(atPath: record))
    }

    @Test func lostPacketsAreRepairedByNACK() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 1280, height: 720, fps: 15, frames: 30, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 1280, height: 720, fps: 15, viewerSeconds: 7,
                                       proxyArguments: ["--loss", "0.05", "--seed", "7"],
                                       senderArguments: ["--bitrate", "1M", "--content", "motion", "--duration", "5"])
        let (sender, viewer, proxy) = (session.sender, session.viewer, session.proxy)
        let exits = session.finish(within: 30)
        #expect(exits.sender == 0, "sender: \(sender.stderr)")
        #expect(exits.viewer == 0, "viewer: \(viewer.stderr)")

        let sent = try EventLog(sender).stopped()
        let got = try EventLog(viewer).stopped()
        let dropped = try #require(EventLog(proxy).first(named: "stopped")?["dropped"] as? Int)
        let framesSent = try #require(sent["frames_sent"] as? Int)
        let decoded = try #require(got["frames_decoded"] as? Int)
        #expect(dropped >= 10, "the proxy dropped \(dropped) packets")
        #expect((got["nack_count"] as? Int ?? 0) > 0, "\(got)")
        #expect((sent["retransmitted"] as? Int ?? 0) > 0, "\(sent)")
        // Repaired: nearly every frame decoded, and far fewer packets lost than were dropped.
        #expect(Double(decoded) >= 0.9 * Double(framesSent), "decoded \(decoded) of \(framesSent)")
        #expect((got["packets_lost"] as? Int ?? .max) * 2 <= dropped, "\(got)")
    }
}

/// A second of ffmpeg's test picture, 320x240 NV12 at 15 fps, for `start --input`.
private func smallInput(in dir: String) throws -> String {
    let input = "\(dir)/small.nv12"
    #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15",
                                      "-frames:v", "15", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", input]) == 0)
    return input
}

/// `start` sending ``smallInput(in:)``'s picture to 127.0.0.1:`port` for a second.
private func smallSender(_ input: String, port: UInt16, dir: String) throws -> Child {
    try Child(screenshareBinary(), [
        "start", "--to", "127.0.0.1:\(port)", "--input", input, "--input-format", "nv12", "--input-size", "320x240",
        "--fps", "15", "--duration", "1", "--json",
    ], dir: dir, name: "sender")
}

/// A script in the repository's Scripts folder.
func scriptPath(_ name: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Scripts/\(name)").path
}
