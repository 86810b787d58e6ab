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
        let input = try PlainSession.motion(width: 320, height: 240, fps: 15, frames: 45, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 320, height: 240, fps: 15, viewerSeconds: 9,
                                       senderArguments: ["--bitrate", "500k", "--content", "motion", "--duration", "12"])
        let viewer = session.viewer, proxy = session.proxy
        defer { _ = session.finish(within: 0) }
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
