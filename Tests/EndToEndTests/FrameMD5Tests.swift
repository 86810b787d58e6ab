import Foundation
import Testing
import X11TestSupport

/// `watch --frames-md5` writes ffmpeg's framemd5 layout; its per-picture checksums agree with
/// ffmpeg's own decoding of the same frames (the recording), picture for picture.
@Suite struct FrameMD5Tests {
    static func hashes(_ text: String) -> [String] {
        text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    @Test func ourDecodeMatchesFFmpegsFrameByFrame() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 15, to: sdp)
        let viewer = try Child(screenshareBinary(), [
            "watch", "--sdp", sdp, "--headless", "--record", "\(dir)/got.webm", "--frames-md5", "\(dir)/ours.md5", "--duration", "5", "--json",
        ], dir: dir, name: "viewer")
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", input, "--input-size", "320x240", "--content", "motion",
            "--no-audio", "--duration", "3", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 20) == 0, "\(sender.stderr)")
        #expect(viewer.finish(within: 20) == 0, "\(viewer.stderr)")
        let ours = Self.hashes(try String(contentsOfFile: "\(dir)/ours.md5", encoding: .utf8))
        let ffmpeg = try Child(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-i", "\(dir)/got.webm", "-map", "0:v",
                                                 "-fps_mode", "passthrough", "-pix_fmt", "yuv420p", "-f", "framemd5", "-"],
                               dir: dir, name: "ffmpeg")
        #expect(ffmpeg.finish(within: 20) == 0, "\(ffmpeg.stderr)")
        let theirs = Self.hashes(ffmpeg.stdout)
        let decoded = try #require(try EventLog(viewer).stopped()["frames_decoded"] as? Int)
        #expect(ours.count == decoded && decoded > 30, "\(ours.count) lines for \(decoded) frames")
        #expect(ours == theirs, "first difference at \(zip(ours, theirs).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(ours.count, theirs.count)) of \(ours.count)/\(theirs.count)")
    }
}
