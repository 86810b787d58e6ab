import Foundation
import MediaCore
import Basics
import Testing
import VP8Codec
@testable import Recording

/// WebM files checked by an independent reader (ffprobe/ffmpeg), not by ourselves.
@Suite struct WebMRecorderTests {
    func tempPath(_ name: String) -> String {
        NSTemporaryDirectory() + "rec-\(UUID().uuidString.prefix(8))-\(name)"
    }

    /// Runs a tool and returns its standard output.
    func output(_ tool: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/\(tool)")
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Encodes `count` moving-gradient frames and writes them 1/15 s apart.
    func writeFrames(_ rec: WebMRecorder, size: PixelSize, count: Int) throws {
        var cfg = VP8EncoderConfig(size: size)
        cfg.content = .motion
        let enc = try VP8Encoder(config: cfg)
        let frame = VideoFrame(width: size.width, height: size.height)
        for i in 0..<count {
            for y in 0..<size.height { for x in 0..<size.width { frame.y[y * frame.strideY + x] = UInt8(truncatingIfNeeded: x + y + i * 8) } }
            let ts = UInt64(1_000_000_000) + UInt64(i) * 66_666_667
            try enc.encode(frame, pts: Int64(i) * 6000, duration: 6000) { data, info in
                try? rec.writeVideo(data, keyframe: info.isKeyframe, timestampNanos: ts)
            }
        }
    }

    @Test func videoOnlyFileHasEveryFrameAtItsSizeAndDuration() throws {
        let path = tempPath("v.webm")
        let rec = try WebMRecorder(path: path, video: PixelSize(width: 320, height: 240), audio: false)
        try writeFrames(rec, size: PixelSize(width: 320, height: 240), count: 30)
        try rec.finish()
        #expect(rec.videoFramesWritten == 30)
        let probe = try output("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                           "stream=codec_name,width,height,nb_read_frames:format=format_name,duration", "-of", "default=nw=1", path])
        #expect(probe.contains("codec_name=vp8"))
        #expect(probe.contains("width=320") && probe.contains("height=240"))
        #expect(probe.contains("nb_read_frames=30"), "\(probe)")
        #expect(probe.contains("format_name=matroska,webm"))
        let duration = probe.split(separator: "\n").first { $0.hasPrefix("duration=") }.flatMap { Double($0.dropFirst(9)) } ?? 0
        #expect(abs(duration - 2.0) < 0.15, "duration \(duration) s for 30 frames at 15 fps")
    }

    @Test func audioAndVideoTogether() throws {
        let path = tempPath("av.webm")
        let rec = try WebMRecorder(path: path, video: PixelSize(width: 160, height: 120), audio: true)
        // A 20 ms stereo CELT silence packet (TOC 0xFC: config 31, stereo, one frame).
        let silence: [UInt8] = [0xFC, 0xFF, 0xFE]
        for i in 0..<100 {
            try silence.withUnsafeBytes { try rec.writeAudio($0, timestampNanos: 1_000_000_000 + UInt64(i) * 20_000_000) }
        }
        try writeFrames(rec, size: PixelSize(width: 160, height: 120), count: 30)
        try rec.finish()
        #expect(rec.audioPacketsWritten == 100)
        let streams = try output("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,sample_rate,channels", "-of", "csv=p=0", path])
        #expect(streams.contains("vp8"))
        #expect(streams.contains("opus,48000,2"), "\(streams)")
        let packets = try output("ffprobe", ["-v", "error", "-select_streams", "a:0", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", path])
        #expect(packets.trimmingCharacters(in: .whitespacesAndNewlines) == "100")
    }

    @Test func unwritablePathIsNamed() {
        do {
            _ = try WebMRecorder(path: "/nonexistent-dir/x.webm", video: PixelSize(width: 16, height: 16), audio: false)
            Issue.record("no error")
        } catch {
            #expect("\(error)".contains("/nonexistent-dir/x.webm"))
        }
    }
}
