import Foundation
import Testing
import X11TestSupport

/// `start` and `ctl set` take the same settings under the same names and refuse the same values
/// (one validator), and `ctl set` takes `start`'s flags as well as KEY=VALUE.
@Suite struct SettingsAgreementTests {
    func run(_ args: [String], dir: String) throws -> (status: Int32, out: String, err: String) {
        let c = try Child(screenshareBinary(), args, dir: dir, name: "cmd-\(UUID().uuidString.prefix(6))")
        let status = c.finish(within: 10)
        return (status, c.stdout, c.stderr)
    }

    /// Raw 64x64 NV12 frames that change every frame, so the sender keeps encoding.
    func frames(dir: String) throws -> String {
        let path = "\(dir)/frames.nv12"
        var bytes = [UInt8]()
        for f in 0..<8 { bytes += [UInt8](repeating: UInt8(f * 30), count: 64 * 64 * 3 / 2) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The settings `start` refuses, each with the flag the message must name.
    static let refused: [([String], String)] = [
        (["--min-bitrate", "3M"], "--min-bitrate 3M: must not be above bitrate (2M)"),
        (["--bitrate", "500k", "--min-bitrate", "600k"], "--min-bitrate 600k: must not be above bitrate (500k)"),
        (["--keyframe-interval", "4000"], "--keyframe-interval 4000"),
        (["--fps", "5", "--min-fps", "10"], "--min-fps 10: must not be above fps (5)"),
        (["--fps", "61"], "--fps 61"),
    ]

    @Test(arguments: refused)
    func startRefusesWhatCtlRefuses(flags: [String], message: String) throws {
        let dir = try makeTempDir()
        let r = try run(["start", "--to", "127.0.0.1:\(freeEvenPort())", "--input", try frames(dir: dir), "--input-size", "64x64",
                         "--no-audio", "--duration", "1"] + flags, dir: dir)
        #expect(r.status == 64, "\(flags): \(r.err)")
        #expect(r.err.contains(message), "\(r.err)")
    }

    @Test func ctlSetTakesStartsFlagsAndTheSameChecks() throws {
        let dir = try makeTempDir()
        let socket = "\(dir)/ctl.sock"
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(freeEvenPort())", "--input", try frames(dir: dir), "--input-size", "64x64",
            "--input-fps", "10", "--no-audio", "--control-socket", socket, "--json",
        ], dir: dir, name: "sender")
        defer { _ = sender.finish(within: 10) }
        try EventLog.wait(for: "first_frame_sent", in: sender)

        // The flags a user who just typed `start --fps 15` would try first.
        let set = try run(["ctl", "--socket", socket, "set", "--fps", "5", "--bitrate", "1M", "--content", "motion"], dir: dir)
        #expect(set.status == 0, "\(set.err)")
        let status = try run(["ctl", "--socket", socket, "--json", "status"], dir: dir)
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(status.out.utf8)) as? [String: Any])
        let settings = try #require(answer["settings"] as? [String: Any])
        #expect(settings["fps"] as? Int == 5)
        #expect(settings["bitrate_kbps"] as? Int == 1000)
        #expect(settings["content"] as? String == "motion")
        #expect(answer["v"] as? Int == 1)
        try EventLog.wait(for: "settings_changed", in: sender, seconds: 5) { $0["fps"] as? Int == 5 }

        // Flags and KEY=VALUE together.
        let both = try run(["ctl", "--socket", socket, "set", "--fps", "8", "keyframe-interval=2"], dir: dir)
        #expect(both.status == 0, "\(both.err)")

        // What `start` refuses, `ctl set` refuses, in the same words (and nothing changes).
        let above = try run(["ctl", "--socket", socket, "set", "--min-bitrate", "3M"], dir: dir)
        #expect(above.status == 64)
        #expect(above.err.contains("min-bitrate=3M: must not be above bitrate (1M)"), "\(above.err)")
        let long = try run(["ctl", "--socket", socket, "set", "keyframe-interval=4000"], dir: dir)
        #expect(long.status == 64)
        #expect(long.err.contains("keyframe-interval=4000: must be seconds from 0 to 3600"), "\(long.err)")
        let badFlag = try run(["ctl", "--socket", socket, "set", "--bitrate", "fast"], dir: dir)
        #expect(badFlag.status == 64)
        #expect(badFlag.err.contains("'fast' is not a bit rate"), "\(badFlag.err)")
        let after = try run(["ctl", "--socket", socket, "--json", "status"], dir: dir)
        let kept = try #require((try JSONSerialization.jsonObject(with: Data(after.out.utf8)) as? [String: Any])?["settings"] as? [String: Any])
        #expect(kept["fps"] as? Int == 8 && kept["keyframe_interval_s"] as? Double == 2 && kept["min_bitrate_kbps"] is NSNull)

        #expect(try run(["ctl", "--socket", socket, "stop"], dir: dir).status == 0)
        #expect(sender.finish(within: 10) == 0, "sender: \(sender.stderr)")
    }
}
