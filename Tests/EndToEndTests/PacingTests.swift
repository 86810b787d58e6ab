import Foundation
import Testing
import X11TestSupport

/// Big frames leave paced: a 1080p keyframe is spread at about 4 × the bit rate (at least
/// 8 Mbit/s) after its first 16 kB, instead of one burst that a router queue would drop; with
/// no transport feedback (a plain RTP receiver) the first 16 kB leave at once.
@Suite struct PacingTests {
    @Test func aBigKeyframeIsPaced() throws {
        let dir = try makeTempDir()
        let input = "\(dir)/hard.nv12"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "nullsrc=s=1920x1080:r=15,geq=lum='random(1)*255':cb=128:cr=128",
                                          "-frames:v", "2", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", input]) == 0)
        let port = freeEvenPort()
        let sink = try UDPReceiver(port: port)
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--input", input, "--input-size", "1920x1080", "--bitrate", "2M",
            "--no-audio", "--duration", "2", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 20) == 0, "\(sender.stderr)")
        // The first frame's packets (one RTP timestamp) and when each arrived.
        let video = sink.stop().filter { $0.rtp?.header.payloadType == 96 }
        let firstTimestamp = video.first?.rtp?.header.timestamp
        let arrivals = video.prefix { $0.rtp?.header.timestamp == firstTimestamp }.map { ($0.arrival.timeIntervalSince1970, $0.bytes.count) }
        let bytes = arrivals.reduce(0) { $0 + $1.1 }
        #expect(bytes > 40_000, "the keyframe is \(bytes) bytes: too small to show pacing")
        let span = (arrivals.last?.0 ?? 0) - (arrivals.first?.0 ?? 0)
        let expected = Double(bytes - 16_000) * 8 / 8_000_000
        #expect(span >= expected * 0.8, "\(bytes) bytes arrived within \(span * 1000) ms; paced they take ≥ \(expected * 1000) ms")
        #expect(span <= expected * 3 + 0.05, "pacing too slow: \(span * 1000) ms for \(bytes) bytes")
        // No transport feedback from this receiver, so no congestion control's pacer: the first
        // 16 kB leave at once (at 2.5 × the bit rate, 15 kB would take 20 ms).
        var sum = 0
        let burst = arrivals.prefix { sum += $0.1; return sum <= 15_000 }
        let burstSpan = (burst.last?.0 ?? 0) - (arrivals.first?.0 ?? 0)
        #expect(burstSpan < 0.008, "the first \(sum) bytes took \(burstSpan * 1000) ms")
    }
}
