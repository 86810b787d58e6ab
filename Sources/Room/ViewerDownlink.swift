import Congestion
import MediaCore
import Basics
import RTCP
import RTPSession

/// When the relay forwarded each packet of a stream, by the presenter's transport-wide number,
/// and how big it was: what a viewer's transport feedback (on the same numbers) is measured
/// against. One per video stream, shared by its viewers; a ring of fixed size.
final class ForwardLog {
    static let capacity = 8192
    private var sequences = [UInt16](repeating: 0, count: ForwardLog.capacity)
    private var times = [UInt64](repeating: 0, count: ForwardLog.capacity)
    private var sizes = [Int32](repeating: 0, count: ForwardLog.capacity)

    func record(_ sequence: UInt16, size: Int, now: UInt64) {
        let i = Int(sequence) & (Self.capacity - 1)
        sequences[i] = sequence
        times[i] = now
        sizes[i] = Int32(truncatingIfNeeded: size)
    }

    func lookup(_ sequence: UInt16) -> (time: UInt64, size: Int)? {
        let i = Int(sequence) & (Self.capacity - 1)
        return sequences[i] == sequence && times[i] != 0 ? (times[i], Int(sizes[i])) : nil
    }
}

/// What a stream carries per temporal layer (bit/s over the last second, in half-second
/// windows), and what it usually carries (over about 4 s), for choosing what fits a viewer's
/// link.
struct LayerRates {
    /// Bytes of the window so far: TL0 (and packets without a layer), TL1, TL2 and above.
    private var bytes = (0, 0, 0)
    private var windowStart: UInt64?
    /// The whole stream, its two lower layers (TL0 and TL1), and its base layer (TL0).
    private(set) var total = 0.0
    private(set) var half = 0.0
    private(set) var base = 0.0
    /// The same, each window weighing an eighth: what the stream usually carries, through the
    /// dip an encoder makes after a keyframe (a third of its rate for a second or two).
    private var usual = (total: 0.0, half: 0.0, base: 0.0)

    mutating func add(_ size: Int, layer: UInt8?, now: UInt64) {
        if windowStart == nil { windowStart = now }
        if now &- windowStart! >= 500_000_000 {
            let seconds = Double(now &- windowStart!) / 1e9
            // Half the last window's measure, half the new one's: a second's worth, smoothed.
            func smooth(_ old: Double, _ bytes: Int) -> Double {
                let new = Double(bytes) * 8 / seconds
                return old == 0 ? new : (old + new) / 2
            }
            func average(_ old: Double, _ bytes: Int) -> Double {
                let new = Double(bytes) * 8 / seconds
                return old == 0 ? new : old + (new - old) / 8
            }
            total = smooth(total, bytes.0 + bytes.1 + bytes.2)
            half = smooth(half, bytes.0 + bytes.1)
            base = smooth(base, bytes.0)
            usual = (average(usual.total, bytes.0 + bytes.1 + bytes.2), average(usual.half, bytes.0 + bytes.1), average(usual.base, bytes.0))
            bytes = (0, 0, 0)
            windowStart = now
        }
        switch layer ?? 0 {
        case 0: bytes.0 += size
        case 1: bytes.1 += size
        default: bytes.2 += size
        }
    }

    /// What a viewer getting `layers` is sent (bit/s).
    func rate(_ layers: LinkLayers) -> Double {
        switch layers {
        case .all: total
        case .half: half
        case .base: base
        case .keyframes: 0
        }
    }

    /// What a viewer getting `layers` is usually sent (bit/s, over about 4 s).
    func usualRate(_ layers: LinkLayers) -> Double {
        switch layers {
        case .all: usual.total
        case .half: usual.half
        case .base: usual.base
        case .keyframes: 0
        }
    }

    /// Whether the stream has a layer between the base and the whole (TL1 alone is not all of
    /// what is above TL0): a stream of two layers has none.
    var hasHalf: Bool { half > base && half < total }
}

/// One viewer's downlink as the relay sees it (a viewer that sends transport feedback): its
/// estimate (``CongestionController``, from the packets' forward times and their arrivals) and
/// what of the stream fits it (``LayerFilter``): every layer, the two lower ones (half the
/// frames), the base layer (a quarter), or keyframes only.
///
/// - Down a step when for a second both the estimate and what arrives are under 90 % of what
///   it gets, or at once when a queue stands or it loses over 10 % (beyond a count's spread at
///   10 %, or for a second on end) while less than that arrives
///   (then to the most that fits what arrives: from every layer straight to the base layer when
///   half the frames do not fit); down to keyframes only when both are under 80 % of the base
///   layer for 2 s.
///   Loss under 10 % with no queue is the link's (Wi-Fi's): repaired, not answered.
///   After a step down 2 s pass before the next is judged, 4 s after a failed trial (the queue
///   it left drains).
/// - Up a step on trial, as a prober would: when the path has been calm for a while (4 s,
///   doubling after each failed trial up to 32 s), the next step for a second (from keyframes
///   only, from the next keyframe, which is asked for) — overuse, a queue of 50 ms or loss over
///   10 % (beyond a count's spread, or for half a second) in that time and it goes back at
///   once; otherwise the estimate is raised to what got through. A trial proves something only while the stream carries its usual rate (at least
///   80 % of its 4 s average): in a dip (an encoder's after a keyframe) it goes on until the
///   stream is back, for up to 4 s more, and then goes back without counting as failed. Taken
///   as passed in a dip, it raised a slow viewer to every layer that drowned it once the stream
///   came back, and its losses asked for the keyframe that made the next dip.
/// - Keyframes only: one is asked for at once and every 5 s, so the viewer still sees the
///   screen change;
///   its trials wait only for a path without loss (each keyframe queues on such a link).
///
/// Resends (answers to its NACKs) share what its link has left: the estimate less what is
/// forwarded, at least a tenth of the estimate (libwebrtc takes NACK overhead from the encoder's
/// budget the same way). Unbudgeted, the repair of a congested link's losses is what buries it.
final class ViewerDownlink {
    /// A trial tests the link with at least this share of what the layers usually carry.
    static let usualShare = 0.8
    /// And it waits for the stream to carry that (ns) at most this long past its end.
    static let longestDipWait: UInt64 = 4_000_000_000
    var controller = CongestionController(minimum: 30_000, maximum: 100_000_000, start: 100_000_000)
    var filter = LayerFilter()
    /// The newest number a feedback reported (a repeated feedback is not counted twice).
    private var newestReported: UInt16?
    /// Numbers of packets not forwarded to this viewer (the layers it did not get): a bit each.
    private var notSent = [UInt64](repeating: 0, count: ForwardLog.capacity / 64)
    /// Numbers a feedback reported lost: a bit each. A browser reports again from a late packet
    /// on (libwebrtc's `RemoteEstimatorProxy`), and a packet reported lost that then arrived
    /// was overtaken, not lost.
    private var reportedLost = [UInt64](repeating: 0, count: ForwardLog.capacity / 64)
    private var results: [PacketResult] = []
    private(set) var trialUntil: UInt64?
    private(set) var nextTrial: UInt64 = 0
    private var backoff: UInt64 = 4_000_000_000
    private var starvedSince: UInt64?
    private var settleUntil: UInt64 = 0
    private var trialFrom = LinkLayers.all
    private var nextKeyframe: UInt64 = 0
    /// When the viewer is next told what it gets again (while it gets fewer layers).
    var nextTell: UInt64 = 0
    private var resends = RateBucket()
    /// What the viewer gets (bit/s), as last chosen.
    private var forwardedRate = 0.0
    /// Layer switches, for stats and tests.
    private(set) var switchesDown = 0
    private(set) var switchesUp = 0

    init() { results.reserveCapacity(512) }

    /// A browser's link: it starts on half the frames (where the stream has such a layer), and
    /// is tried on every layer as soon as its feedback shows a calm path, as libwebrtc starts a
    /// call below the link and probes up, and mediasoup starts a consumer on its lower layers.
    /// Started on every layer, a slow link filled its queue in its first second (600 kbit/s into
    /// 500) and Chromium froze on the resends that queued behind it.
    convenience init(startingOnHalf rates: LayerRates) {
        self.init()
        // Where it starts, not a switch. A stream measured to have no such layer starts whole;
        // one not measured yet (the first half second) is held from TL2, if it has one.
        if rates.hasHalf || rates.total == 0 { filter.maxLayer = 1 }
    }

    /// Whether the packet numbered `sequence` went to this viewer.
    func noteForwarded(_ sequence: UInt16, sent: Bool) {
        let i = Int(sequence) & (ForwardLog.capacity - 1)
        if sent { notSent[i >> 6] &= ~(1 << UInt64(i & 63)) } else { notSent[i >> 6] |= 1 << UInt64(i & 63) }
    }

    /// A feedback from the viewer: its estimate, then the layers it gets.
    func onFeedback(_ feedback: TransportFeedback, log: ForwardLog, rates: LayerRates, now: UInt64) {
        results.removeAll(keepingCapacity: true)
        var newest = newestReported
        for (k, arrival) in feedback.arrivals.enumerated() {
            let sequence = feedback.baseSequence &+ UInt16(truncatingIfNeeded: k)
            let i = Int(sequence) & (ForwardLog.capacity - 1)
            let bit: UInt64 = 1 << UInt64(i & 63)
            var recovered = false
            if let reported = newestReported, Int16(bitPattern: sequence &- reported) <= 0 {
                // Reported before: only a packet reported lost that arrived after all counts again.
                guard arrival != nil, reportedLost[i >> 6] & bit != 0,
                      Int(Int16(bitPattern: reported &- sequence)) < ForwardLog.capacity / 2 else { continue }
                recovered = true
            }
            if arrival == nil { reportedLost[i >> 6] |= bit } else { reportedLost[i >> 6] &= ~bit }
            if newest.map({ Int16(bitPattern: sequence &- $0) > 0 }) ?? true { newest = sequence }
            guard notSent[i >> 6] & bit == 0, let sent = log.lookup(sequence) else { continue }
            let time = arrival.map { TransportHistory.arrivalNanos(feedback, ticks: $0) }
            results.append(PacketResult(sendTime: sent.time, size: sent.size, arrivalTime: time, recovered: recovered))
        }
        newestReported = newest
        guard !results.isEmpty else { return }
        controller.onFeedback(results, now: now)
        choose(rates: rates, now: now)
    }

    /// Whether a resend of `bytes` fits the link's budget now (counted if it does).
    func allowResend(_ bytes: Int, now: UInt64) -> Bool {
        let estimate = controller.target
        let rate = Int(max(0.1 * estimate, estimate - forwardedRate))
        resends.drain(at: now, bitsPerSecond: rate)
        guard resends.levelBits + Double(bytes * 8) <= max(Double(rate) * 0.1, 12_000) else { return false }
        resends.add(bits: bytes * 8)
        return true
    }

    /// What the viewer gets now.
    var layers: LinkLayers {
        filter.keyframesOnly ? .keyframes : filter.maxLayer == 0 ? .base : filter.maxLayer == 1 ? .half : .all
    }

    private func set(_ layers: LinkLayers) {
        let before = self.layers
        filter.keyframesOnly = layers == .keyframes
        filter.maxLayer = switch layers {
        case .all: nil
        case .half: 1
        case .base, .keyframes: 0
        }
        if layers.rank < before.rank { switchesDown += 1 } else if layers.rank > before.rank { switchesUp += 1 }
    }

    /// Timers (the relay's poll): trials and keyframes for a viewer that may get no feedback
    /// to act on (keyframes only: little arrives). Returns whether to ask for a keyframe.
    func poll(rates: LayerRates, now: UInt64) -> Bool {
        guard trialUntil == nil else { return false }
        // Keyframes only: each keyframe is a burst that queues on a slow link, so the queue and
        // the delay trend say nothing here; losses do.
        if layers == .keyframes, controller.lossFraction < 0.05, now >= nextTrial {
            startTrial(.base, now: now)
            return true  // the base layer starts at a keyframe
        }
        if layers == .keyframes, now >= nextKeyframe {
            nextKeyframe = now + 5_000_000_000
            return true
        }
        return false
    }

    private var calm: Bool {
        controller.detector.state == .normal && controller.lossFraction < CongestionController.congestedLoss && (controller.queueDelay ?? 0) < 50_000_000
    }

    /// Since when the loss has been over 10 % (``CongestionController/congestedLoss``).
    private var lossySince: UInt64?

    /// Loss that says the link is overloaded, not Wi-Fi's: over 10 % by more than twice the
    /// spread a count of that many packets has at 10 % (a second of 90 packets: over 16 %), or
    /// over 10 % for `lasting` on end. A link losing 5 % at random loses over 10 % of some
    /// second's packets every few seconds (the count's own spread): read as congestion, a
    /// viewer behind 5 % loss and no bottleneck went down a layer in 6 runs of 8.
    private func congestedByLoss(lasting: UInt64, now: UInt64) -> Bool {
        let loss = controller.lossFraction, limit = CongestionController.congestedLoss
        guard loss > limit else { return false }
        let n = Double(max(controller.lossSamples, CongestionController.lossSamplesMinimum))
        return loss > limit + 2 * (limit * (1 - limit) / n).squareRoot() || lossySince.map { now &- $0 >= lasting } == true
    }

    private func startTrial(_ layers: LinkLayers, now: UInt64) {
        trialFrom = self.layers
        set(layers)
        trialUntil = now + (layers == .base ? 2_000_000_000 : 1_000_000_000)  // the base waits for its keyframe
    }

    private func choose(rates: LayerRates, now: UInt64) {
        defer { forwardedRate = rates.rate(layers) }
        let queue = controller.queueDelay ?? 0
        if controller.lossFraction > CongestionController.congestedLoss { lossySince = lossySince ?? now } else { lossySince = nil }
        if let until = trialUntil {
            let troubled = controller.detector.state == .overusing || congestedByLoss(lasting: 500_000_000, now: now) || queue > 50_000_000
            if troubled {
                set(trialFrom)
                trialUntil = nil
                // The queue the trial built drains only as fast as the link has room to spare
                // over the layers it gets (with the base layer, little): more time to settle.
                settleUntil = now + 4_000_000_000
                backoff = min(backoff * 2, 32_000_000_000)
                nextTrial = now + backoff
            } else if now >= until {
                let offered = rates.rate(layers), usual = rates.usualRate(layers)
                let dipping = offered < Self.usualShare * usual
                if dipping, now < until + Self.longestDipWait { return }  // not yet a test
                trialUntil = nil
                if dipping {  // the stream never came back: nothing learned, nothing failed
                    set(trialFrom)
                    nextTrial = now + backoff
                    return
                }
                backoff = 4_000_000_000
                nextTrial = now + backoff
                if let got = controller.acknowledged { controller.raise(to: got) }
            }
            return
        }
        guard now >= settleUntil else { return }
        let sent = rates.rate(layers)
        let arriving = controller.acknowledged ?? sent
        // Keyframes only is for a link that carries clearly less than the base layer (under
        // 80 % of it), not one that just fills with it.
        let share = layers == .base ? 0.8 : 0.9
        if layers != .keyframes, sent > 0, arriving < share * sent {
            // Drowning (losing, or a queue standing) at once; starved (the estimate low too)
            // after a second.
            // Keyframes only costs the viewer its moving picture: only when starved for 2 s,
            // never on a queue alone (the one the last step left may still be draining).
            let drowning = layers != .base && (congestedByLoss(lasting: 1_000_000_000, now: now) || queue > CongestionController.standingQueueNanos)
            let starved = controller.target < share * sent
            let starvedFor: UInt64 = layers == .base ? 2_000_000_000 : 1_000_000_000
            if drowning || (starved && starvedSince.map { now &- $0 >= starvedFor } == true) {
                starvedSince = nil
                set(Self.stepDown(from: layers, arriving: arriving, rates: rates))
                settleUntil = now + 2_000_000_000
                nextTrial = now + backoff
                nextKeyframe = now  // keyframes only: the first one at once
                return
            }
            if starved, starvedSince == nil { starvedSince = now }
            if !starved { starvedSince = nil }
        } else {
            starvedSince = nil
        }
        if layers == .base || layers == .half, now >= nextTrial, calm {
            startTrial(layers == .base && rates.hasHalf ? .half : .all, now: now)
        }
    }

    /// The step down from `layers`: the most of the stream under 90 % of what arrives, at
    /// least one step and at most to the base layer (keyframes only from the base layer).
    static func stepDown(from layers: LinkLayers, arriving: Double, rates: LayerRates) -> LinkLayers {
        switch layers {
        case .keyframes, .base: return .keyframes
        case .half: return .base
        case .all: return rates.hasHalf && rates.half < 0.9 * arriving ? .half : .base
        }
    }
}

extension LinkLayers {
    /// Its order: keyframes < base < half < all.
    var rank: Int {
        switch self {
        case .keyframes: 0
        case .base: 1
        case .half: 2
        case .all: 3
        }
    }
}
