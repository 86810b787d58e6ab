import Foundation
import Testing
import X11TestSupport

/// Issue 40: `start --room … --record lecture.webm` keeps a recording of the lecture on the
/// presenter's machine — what the room receives (VP8 and Opus as sent, not re-encoded) — that
/// is finished on a clean stop and still plays to within a second of the end after `kill -9`.
/// The sound is the default microphone of the test's PulseAudio (Scripts/test starts it).
@Suite(.serialized) struct PresenterRecordingTests {
    /// A slide (testsrc2's first picture, 640x360) as raw NV12 frames, and its luma plane.
    static func slide(_ dir: String) throws -> (path: String, luma: [UInt8]) {
        let path = try PlainSession.motion(width: 640, height: 360, fps: 1, frames: 1, in: dir)
        return (path, Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(640 * 360)))
    }

    static func presenter(_ dir: String, port: UInt16, slide: String, record: String, duration: Int) throws -> Child {
        try Child(screenshareBinary(), [
            "start", "--room", "lecture", "--listen", "127.0.0.1:\(port)", "--input", slide, "--input-size", "640x360",
            "--input-fps", "5", "--record", record, "--duration", String(duration), "--json",
        ], dir: dir, name: "presenter")
    }

    /// The packets' times of one stream (`v` or `a`), from ffprobe.
    static func packetTimes(_ file: String, _ stream: String, dir: String) throws -> [Double] {
        let p = try Child(which("ffprobe"), ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", file],
                          dir: dir, name: "ffprobe-\(stream)")
        #expect(p.finish(within: 20) == 0, "\(p.stderr)")
        return p.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    @Test func aCleanStopLeavesTheLectureWithItsSlideAndSound() throws {
        let dir = try makeTempDir()
        let (slide, luma) = try Self.slide(dir)
        let file = "\(dir)/lecture.webm"
        let presenter = try Self.presenter(dir, port: freeEvenPort(), slide: slide, record: file, duration: 6)
        #expect(presenter.finish(within: 30) == 0, "\(presenter.stderr)")
        #expect(EventLog(presenter).events(named: "error").isEmpty, "\(presenter.stdout.suffix(1000))")
        let probe = try Child(which("ffprobe"), ["-v", "error", "-show_entries", "format=duration:stream=codec_name,width,height", "-of", "json", file],
                              dir: dir, name: "ffprobe")
        #expect(probe.finish(within: 20) == 0, "\(probe.stderr)")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any], "\(probe.stdout)")
        let codecs = ((info["streams"] as? [[String: Any]]) ?? []).compactMap { $0["codec_name"] as? String }
        #expect(codecs.sorted() == ["opus", "vp8"], "\(probe.stdout)")
        // The session's length: 6 s from its first keyframe (less the first picture's start).
        let duration = Double((info["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        #expect(duration > 5 && duration < 6.5, "\(probe.stdout)")
        // The last picture is the slide, sharp.
        let yuv = "\(dir)/decoded.yuv"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-i", file, "-map", "0:v", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", yuv]) == 0)
        let decoded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuv)))
        let size = 640 * 360 * 3 / 2
        #expect(decoded.count >= size, "\(decoded.count) bytes decoded")
        let last = decoded[(decoded.count / size - 1) * size..<(decoded.count / size - 1) * size + 640 * 360]
        let db = psnr(last, luma)
        #expect(db >= 38, "the last picture's Y-PSNR against the slide: \(db) dB")
        print("recording: \(String(format: "%.2f", duration)) s, VP8 + Opus, \(decoded.count / size) pictures, the last at \(String(format: "%.1f", db)) dB")
    }

    @Test func killedTheRecordingStillPlaysToWithinASecondOfTheEnd() throws {
        let dir = try makeTempDir()
        // Moving pictures, so that something is sent all the time (a still slide is sent once a
        // second, and its last second may hold no packet to lose).
        let moving = try PlainSession.motion(width: 640, height: 360, fps: 5, frames: 25, in: dir)
        let file = "\(dir)/crash.webm"
        let presenter = try Self.presenter(dir, port: freeEvenPort(), slide: moving, record: file, duration: 60)
        defer { _ = presenter.finish(within: 0) }
        let first = try #require(try EventLog.wait(for: "first_frame_sent", in: presenter).eventTime)
        hold(5, "the lecture runs 5 s before the presenter's machine fails")
        let killed = Date()
        kill(presenter.pid, SIGKILL)
        _ = presenter.finish(within: 10, interrupt: false)
        let expected = killed.timeIntervalSince(first)
        let video = try Self.packetTimes(file, "v", dir: dir), audio = try Self.packetTimes(file, "a", dir: dir)
        let end = max(video.last ?? 0, audio.last ?? 0)
        #expect(!video.isEmpty && !audio.isEmpty, "\(video.count) video and \(audio.count) audio packets")
        #expect(end >= expected - 1, "the file plays to \(end) s of the \(expected) s recorded")
        // ffmpeg decodes it to the end (it may say the last cluster was cut short).
        let decode = try Child(which("ffmpeg"), ["-nostdin", "-v", "error", "-i", file, "-f", "null", "-"], dir: dir, name: "decode")
        #expect(decode.finish(within: 30) == 0, "\(decode.stderr)")
        print("killed after \(String(format: "%.2f", expected)) s: the file plays to \(String(format: "%.2f", end)) s")
    }
}
