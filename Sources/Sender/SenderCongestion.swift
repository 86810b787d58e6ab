import Congestion
import MediaCore
import Basics
import RTCP

/// Plain mode's congestion control: each video packet's transport-wide number and send time
/// (``TransportHistory``), the receiver's transport feedback turned into a target bit rate
/// (``CongestionController``, between `--min-bitrate` and `--bitrate`), and when that target
/// has moved enough to say so (`bitrate_changed`). Pure: times in, numbers out; the
/// broadcaster holds it in a Mutex (the encode thread stamps, the RTCP thread takes feedback).
struct SenderCongestion {
    /// The floor when `--min-bitrate` is not given (or the bit rate itself, if lower).
    static let defaultMinimum = 100_000
    /// The target moves this much from the last announced one before `bitrate_changed` says so.
    static let announceChange = 0.2
    /// Loss with a queue over this (ns) is congestion: FEC leaves it out.
    static let fecQueueLimit: Int64 = 50_000_000
    /// And for this long after (ns), plus a round trip: the loss measured covers the last second
    /// of feedback, and after a drop-tail queue overflowed its drops are still in it once the
    /// queue has drained.
    static let fecCongestionMemory: UInt64 = 1_000_000_000
    /// UDP and IPv4 headers, counted in each packet's size on the wire.
    static let overhead = 28

    private(set) var history: TransportHistory
    private(set) var controller: CongestionController
    /// The target last announced (bit/s).
    private(set) var announced: Double
    /// Whether any feedback came (before it the target is `--bitrate`, as without a receiver
    /// that sends feedback: ffmpeg, GStreamer).
    private(set) var hasFeedback = false
    /// Resends take their share of the path (as libwebrtc takes its NACK overhead from the
    /// encoder's rate): bits resent in the current second, and the rate of the last one.
    private var resentBits = 0
    private var resentSecond: UInt64 = 0
    private(set) var resendRate = 0.0
    /// Forward error correction: when and how much, from the loss and round trip of each
    /// feedback. Its share comes off the encoder's rate.
    private(set) var fec: FECPolicy
    /// When a feedback last saw a queue building or standing.
    private var lastCongested: UInt64?

    init(bitrate: Bitrate, minBitrate: Bitrate?, firstSequence: UInt16, fec: FECPolicy.Mode = .off) {
        self.fec = FECPolicy(mode: fec)
        history = TransportHistory(firstSequence: firstSequence)
        controller = Self.makeController(bitrate: bitrate, minBitrate: minBitrate, start: Double(bitrate.bitsPerSecond))
        announced = controller.target
    }

    /// The controller's bounds (bit/s): `--min-bitrate` (or the default floor) to `--bitrate`.
    private static func bounds(bitrate: Bitrate, minBitrate: Bitrate?) -> (minimum: Double, maximum: Double) {
        let maximum = Double(bitrate.bitsPerSecond)
        return (min(Double(minBitrate?.bitsPerSecond ?? defaultMinimum), maximum), maximum)
    }

    private static func makeController(bitrate: Bitrate, minBitrate: Bitrate?, start: Double) -> CongestionController {
        let b = bounds(bitrate: bitrate, minBitrate: minBitrate)
        return CongestionController(minimum: b.minimum, maximum: b.maximum, start: start)
    }

    /// A packet of `size` bytes leaves at `now` (in a probe cluster, or media): its
    /// transport-wide number.
    mutating func sent(size: Int, now: UInt64, probeCluster: Int? = nil) -> UInt16 {
        history.sent(size: size + Self.overhead, now: now, probeCluster: probeCluster)
    }

    /// The probe to send now, if one is due.
    mutating func takeProbe(now: UInt64) -> ProbeCluster? { hasFeedback ? controller.takeProbe(now: now) : nil }

    /// What one feedback changed.
    struct Update: Equatable {
        /// The encoder's new target (bit/s): the path's, less what resends take.
        var target: Double
        /// Set when the target moved by more than 20 % since the last announced one: the previous.
        var announcedFrom: Double?
        /// FEC went on or off.
        var fecChanged = false
    }

    /// `bytes` were resent at `now` (answering NACKs).
    mutating func resent(bytes: Int, now: UInt64) {
        rollResends(now: now)
        resentBits += (bytes + Self.overhead) * 8
    }

    private mutating func rollResends(now: UInt64) {
        let second = now / 1_000_000_000
        guard second != resentSecond else { return }
        resendRate = second == resentSecond + 1 ? Double(resentBits) : 0
        resentBits = 0
        resentSecond = second
    }

    /// What the encoder may use: the path's target less what FEC and resends took in the last
    /// second (never under the minimum).
    var encoderTarget: Double { max(controller.minimum, controller.target / (1 + fec.protection) - resendRate) }

    /// Takes a receiver's feedback at `now`, with the round trip RTCP measured.
    mutating func take(_ feedback: TransportFeedback, rttNanos: UInt64, now: UInt64) -> Update {
        hasFeedback = true
        controller.rttNanos = rttNanos
        controller.onFeedback(history.take(feedback), now: now)
        rollResends(now: now)
        if controller.detector.state == .overusing || (controller.queueDelay ?? 0) > Self.fecQueueLimit { lastCongested = now }
        let congested = lastCongested.map { now &- $0 < Self.fecCongestionMemory + rttNanos } ?? false
        let fecChanged = fec.update(loss: controller.lossFraction, rttNanos: rttNanos, congested: congested, now: now)
        let target = encoderTarget
        var update = Update(target: target, fecChanged: fecChanged)
        if abs(target - announced) > Self.announceChange * announced {
            update.announcedFrom = announced
            announced = target
        }
        return update
    }

    /// A receiver's REMB at `now` (the relay's, passing on a Janus server's lowest viewer's
    /// with `--janus-remb`): caps the target from the next feedback on.
    mutating func takeREMB(bitsPerSecond: Double, now: UInt64) { controller.onREMB(bitsPerSecond, now: now) }

    /// `ctl set bitrate`/`min-bitrate`: new bounds; the estimate carries on within them.
    mutating func setBounds(bitrate: Bitrate, minBitrate: Bitrate?) {
        let b = Self.bounds(bitrate: bitrate, minBitrate: minBitrate)
        controller.setBounds(minimum: b.minimum, maximum: b.maximum)
        if !hasFeedback { controller = Self.makeController(bitrate: bitrate, minBitrate: minBitrate, start: b.maximum) }
    }

    /// What the receiver got over the last 500 ms (bit/s), for `estimate_kbps`.
    var estimate: Double? { hasFeedback ? controller.acknowledged : nil }
}
