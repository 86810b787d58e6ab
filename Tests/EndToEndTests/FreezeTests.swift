import Foundation
import Testing
import X11TestSupport

/// `watch` counts a freeze while it lasts, not only when pictures come back: moving pictures
/// stop reaching it (the path between is stopped with SIGSTOP), and its `stats` say so within
/// a second or two (the gap since the last picture, the freeze counted, its length so far);
/// a session that ends frozen counts it to the end.
@Suite(.serialized) struct FreezeTests {
    @Test func aFreezeShowsInStatsWhileItLastsAndWhenTheSessionEndsInIt() throws {
        let dir = try makeTempDir()
        let path = "\(dir)/motion.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15",
                                          "-frames:v", "45", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path]) == 0)
        let viewerPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == viewerPort { proxyPort = freeEvenPort() }
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: viewerPort, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "9", "--json"], dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(viewerPort)"],
                              dir: dir, name: "proxy")
        defer { kill(proxy.pid, SIGCONT); _ = proxy.finish(within: 0) }
        try waitUntilBound(proxyPort)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", path, "--input-format", "nv12", "--input-size", "320x240",
            "--fps", "15", "--bitrate", "500k", "--content", "motion", "--duration", "12", "--json",
        ], dir: dir, name: "sender")
        defer { _ = sender.finish(within: 0) }
        _ = try EventLog.wait(for: "first_frame", in: viewer)
        _ = try EventLog.wait(for: "stats", in: viewer, count: 2)
        // The path stops: no picture reaches the viewer from now on.
        kill(proxy.pid, SIGSTOP)
        let stoppedAt = Date()
        let frozen = try EventLog.wait(for: "stats", in: viewer, seconds: 6) { ($0["freeze_count"] as? Int ?? 0) >= 1 }
        let noticedAfter = Date().timeIntervalSince(stoppedAt)
        #expect(noticedAfter < 3.2, "the freeze showed in stats \(noticedAfter) s after the pictures stopped")
        #expect((frozen["frame_gap_ms"] as? Double ?? 0) >= 1150, "\(frozen)")
        #expect((frozen["total_freezes_duration_s"] as? Double ?? 0) > 0, "\(frozen)")
        // It ends frozen.
        #expect(viewer.finish(within: 20, interrupt: false) == 0, "\(viewer.stderr)")
        let summary = try EventLog(viewer).stopped()
        let frozenFor = Date().timeIntervalSince(stoppedAt)
        #expect(summary["freeze_count"] as? Int == 1, "\(summary)")
        let total = summary["total_freezes_duration_s"] as? Double ?? 0
        #expect(total >= frozenFor - 1.5 - 0.5 && total <= frozenFor, "frozen \(total) s of the last \(frozenFor) s: \(summary)")
    }
}
