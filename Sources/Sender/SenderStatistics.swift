import Events
import FoundationEssentials
import Glibc
import MediaCore
import Basics

/// The sender's once-a-second `stats` event, and what a second's numbers warn about: packets
/// resent often (the path loses them) and an encoder that cannot hold its bit rate. Owned by
/// the thread that reports (run()); time is passed in.
struct SenderStatistics {
    /// What one second gives.
    struct Second {
        var stats: SenderStats
        /// A `network_busy` message (sent through the sender's shared 10 s throttle).
        var networkBusy: String?
        /// `encoder_overshoot`, at most once per 10 s.
        var overshoot: WarningEvent?
    }

    /// The counters at the last report.
    private var last: SenderCounters
    private var lastAudio: AudioCounters?
    /// Seconds in a row the encoder sent more than 1.5 × the target.
    private var overshootSeconds = 0
    private var overshootWarnedAt: UInt64?

    init(start: SenderCounters, audio: AudioCounters?) {
        last = start
        lastAudio = audio
    }

    /// The report for the second that ends with counters `c` and `audio` at `now`; `targetKbps`
    /// is the bit rate asked for, `inRoom` whether viewers are counted.
    mutating func second(_ c: SenderCounters, audio: AudioCounters?, targetKbps: Int, estimateKbps: Int? = nil,
                         fecProtection: Double = 0, inRoom: Bool, now: UInt64) -> Second {
        let p = last
        defer { last = c; lastAudio = audio }
        var audioStats: SenderStats.Audio?
        if let audio {
            let recent = lastAudio.map { audio.latency.since($0.latency) } ?? audio.latency
            audioStats = SenderStats.Audio(
                packetsSent: Int(audio.packetsSent), bytesSent: audio.bytesSent,
                kbps: (audio.bytesSent - (lastAudio?.bytesSent ?? 0)) * 8 / 1000,
                latencyP50Millis: recent.quantile(0.5), latencyP95Millis: recent.quantile(0.95))
        }
        let kbps = (c.bytesSent - p.bytesSent) * 8 / 1000
        var second = Second(stats: SenderStats(
            fps: c.framesSent - p.framesSent, kbps: kbps,
            framesSent: c.framesSent, keyframesSent: c.keyframesSent,
            encodeMillis: Self.quantiles(c.encodeMillis), captureMillis: Self.quantiles(c.captureMillis),
            convertMillis: Self.quantiles(c.convertMillis), sendMillis: Self.quantiles(c.sendMillis),
            size: c.outputSize, sendErrors: c.sendErrors, rttMillis: c.rttMillis, loss: c.fractionLost,
            retransmitted: c.retransmitted, viewers: inRoom ? c.viewers : nil, audio: audioStats,
            targetKbps: targetKbps, estimateKbps: estimateKbps, fecKbps: (c.fecBytes - p.fecBytes) * 8 / 1000,
            fecProtection: fecProtection, framesCaptured: c.framesCaptured, framesEncoded: c.framesEncoded,
            quantizer: c.quantizerFrames > p.quantizerFrames
                ? Double(c.quantizerSum - p.quantizerSum) / Double(c.quantizerFrames - p.quantizerFrames) : nil))
        // Receivers asked for many packets again: the path is losing them (even if the
        // retransmissions repair it, it is a sign of congestion).
        let sentPackets = Int(c.packetsSent &- p.packetsSent), resent = c.retransmitted - p.retransmitted
        if sentPackets >= 20 && resent * 20 >= sentPackets {
            second.networkBusy = "\(resent) of \(sentPackets) packets sent in the last second were lost on the way and resent ("
                + cFormat("%.0f %%", Double(resent) * 100 / Double(sentPackets)) + ")"
        }
        // The encoder cannot hold the bit rate (content too hard for it even at the coarsest
        // quantizer): say so after 3 s in a row above 1.5 × the target.
        overshootSeconds = kbps * 2 > targetKbps * 3 ? overshootSeconds + 1 : 0
        if overshootSeconds >= 3, overshootWarnedAt.map({ now &- $0 >= 10_000_000_000 }) ?? true {
            overshootWarnedAt = now
            second.overshoot = .warning(.encoderOvershoot(kbps: kbps, targetKbps: targetKbps),
                "sending \(kbps) kbps for a \(targetKbps) kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution")
        }
        return second
    }

    /// The median and 95th percentile of a second's timings (0 when there were none).
    static func quantiles(_ values: [Double]) -> Quantiles {
        func pct(_ sorted: [Double], _ q: Double) -> Double {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
        }
        let sorted = values.sorted()
        return Quantiles(p50: pct(sorted, 0.5), p95: pct(sorted, 0.95))
    }
}
