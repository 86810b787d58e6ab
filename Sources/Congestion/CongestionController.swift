/// The send-side bandwidth estimate of a sender, in GoogCC's shape (libwebrtc, pion's
/// `interceptor/pkg/gcc`): a delay-based rate (``DelayBasedDetector`` driving an AIMD
/// controller) and a loss-based one, from transport-wide feedback; REMB, when a receiver sends
/// it, caps both. The target is the smallest, between `minimum` and `maximum`.
///
/// - Delay: on overuse the rate drops to 0.85 × what the receiver got in the last 500 ms; while
///   normal it grows 8 % a second, or by about one packet per two response times once the
///   link's capacity is known (``LinkCapacity``: what got through at the decreases), until
///   more than that gets through; underuse holds it.
/// - Loss (over the feedback of the last second): under 2 % it may grow 8 % a second; over 10 %
///   it drops by half the loss above 10 %; in between it creeps up while the delay says no
///   queue builds (random loss, as on Wi-Fi, is not congestion).
///
/// Pure: packet results and time in (ns), a target out. Memory is fixed.
public struct CongestionController: Sendable {
    public private(set) var minimum: Double
    public private(set) var maximum: Double
    /// The rate the delay-based controller allows (bit/s).
    public private(set) var delayBased: Double
    /// The rate the loss-based controller allows (bit/s).
    public private(set) var lossBased: Double
    /// A receiver's REMB (bit/s), nil when none sent one in the last ``rembLifetime``.
    public private(set) var remb: Double?
    private var rembAt: UInt64 = 0
    /// A REMB caps for this long unless renewed (receivers send one a second; one that stops
    /// sending them, or leaves, no longer caps).
    public static let rembLifetime: UInt64 = 3_000_000_000
    /// What the receiver got over the last 500 ms (bit/s), nil until measured.
    public private(set) var acknowledged: Double?
    /// The loss fraction over the last second of feedback (once it holds
    /// ``lossSamplesMinimum`` packets; until then the last such measure).
    public private(set) var lossFraction = 0.0
    /// How many packets ``lossFraction`` was measured over.
    public private(set) var lossSamples = 0
    public static let lossSamplesMinimum = 20
    public private(set) var detector = DelayBasedDetector()

    private var lastDelayUpdate: UInt64?
    private var lastLossUpdate: UInt64?
    /// What got through at the decreases (smoothed): while known, the controller creeps
    /// (additive) instead of growing 8 % a second.
    public private(set) var linkCapacity = LinkCapacity()
    /// Received bytes by arrival, for `acknowledged` (the last 500 ms).
    private var arrivals: [(time: UInt64, bytes: Int)] = []
    private var arrivalsHead = 0
    /// Sent and lost packets of the last second of feedback, for `lossFraction`.
    private var lossWindow: [(time: UInt64, sent: UInt64, lost: Bool)] = []
    private var lossHead = 0
    /// The round trip (ns), for the additive increase; 100 ms until told.
    public var rttNanos: UInt64 = 100_000_000

    /// Probing (libwebrtc's `ProbeController`, simplified): every 5 s while the path is calm
    /// and the target below the maximum, a probe at 2 × the target; after a probe that found
    /// at least 70 % of its rate, another at 2 × what it found, until the maximum.
    public static let probeInterval: UInt64 = 5_000_000_000
    public private(set) var probes = ProbeEstimator()
    /// The probe waiting to be sent, and the one sent whose result is awaited.
    private var pendingProbe: ProbeCluster?
    private var probing: (cluster: ProbeCluster, at: UInt64)?
    private var nextProbeID = 1
    private var lastProbeAt: UInt64?
    /// What the last probe found (bit/s), for stats and tests.
    public private(set) var lastProbeResult: Double?

    /// A standing queue: the least one-way delay of a feedback's packets over the least of the
    /// last 10 s (the path's own delay; the clocks' offset cancels out). A delay gradient says
    /// nothing once a queue is full and steady (after a capacity drop, say), so a queue of
    /// more than ``standingQueueNanos`` is drained directly: the rate goes to 0.8 × what gets
    /// through, once per response time, and does not grow, until it is gone.
    public static let standingQueueNanos: Int64 = 100_000_000
    /// Loss above this is congestion's (GoogCC's loss-based part acts only above it); under it,
    /// with no queue building, it is the link's (a Wi-Fi's), for NACK and FEC to repair.
    public static let congestedLoss = 0.10
    /// The queue the last feedback saw (ns), nil before one.
    public private(set) var queueDelay: Int64?
    private var delayMinima = [Int64](repeating: .max, count: 10)
    private var delaySecond: UInt64 = 0
    private var lastQueueCut: UInt64?
    private var lastLeast: Int64?

    /// - Parameters:
    ///   - start: the first target (bit/s), e.g. `--bitrate`.
    public init(minimum: Double, maximum: Double, start: Double) {
        self.minimum = minimum
        self.maximum = maximum
        let s = min(max(start, minimum), maximum)
        delayBased = s
        lossBased = s
        arrivals.reserveCapacity(1024)
        lossWindow.reserveCapacity(1024)
    }

    /// The target bit rate now.
    public var target: Double {
        var t = min(delayBased, lossBased)
        if let remb { t = min(t, remb) }
        return min(max(t, minimum), maximum)
    }

    /// New bounds (a user changed the bit rate): the estimates carry on, clamped to them.
    public mutating func setBounds(minimum: Double, maximum: Double) {
        self.minimum = min(minimum, maximum)
        self.maximum = maximum
        delayBased = min(max(delayBased, self.minimum), maximum)
        lossBased = min(max(lossBased, self.minimum), maximum)
    }

    /// A receiver's REMB (draft-alvestrand-rmcat-remb) at `now`: a cap, until ``rembLifetime``
    /// passes without another.
    public mutating func onREMB(_ bitsPerSecond: Double, now: UInt64) {
        remb = max(bitsPerSecond, minimum)
        rembAt = now
    }

    /// One transport-wide feedback's packets, in send order, received at `now`.
    public mutating func onFeedback(_ results: [PacketResult], now: UInt64) {
        if remb != nil, now &- rembAt > Self.rembLifetime { remb = nil }
        guard !results.isEmpty else { return }
        detector.update(results)
        var least = Int64.max
        for r in results where r.probeCluster == nil {  // probes are measured on their own
            if r.recovered {
                // Reported lost before, arrived late (reordered): not a loss after all.
                if let k = lossWindow[lossHead...].lastIndex(where: { $0.lost && $0.sent == r.sendTime }) { lossWindow[k].lost = false }
            } else {
                lossWindow.append((now, r.sendTime, r.arrivalTime == nil))
            }
            if let a = r.arrivalTime {
                // The receiver's clock went back a second or more, or ahead by a minute (it
                // restarted: a new relay, a new viewer): its earlier arrivals mean nothing now.
                if let newest = arrivals.last?.time, a &+ 1_000_000_000 < newest || a > newest &+ 60_000_000_000 {
                    arrivals.removeAll(keepingCapacity: true)
                    arrivalsHead = 0
                    delayMinima = [Int64](repeating: .max, count: delayMinima.count)
                    queueDelay = nil
                }
                arrivals.append((a, r.size))
                least = min(least, Int64(bitPattern: a &- r.sendTime))
            }
        }
        measureQueue(least: least, now: now)
        measureAcknowledged()
        measureLoss(now: now)
        updateDelayBased(now: now)
        updateLossBased(now: now)
        if let found = probes.take(results, now: now) { onProbe(found, now: now) }
        scheduleProbe(now: now)
    }

    /// A probe found the path carries `found` bit/s: the delay-based rate jumps there (not
    /// while the path is overused), and the capacity is unknown again.
    private mutating func onProbe(_ found: Double, now: UInt64) {
        lastProbeResult = found
        let probed = probing?.cluster.bitsPerSecond ?? found
        probing = nil
        guard detector.state != .overusing else { return }
        if found > delayBased {
            delayBased = min(found, maximum)
            // A probe into a full link finds the link (and must not make the rate race again);
            // one that found clearly more than the link seemed to carry: the link grew.
            if let upper = linkCapacity.upperBound, found > upper { linkCapacity.reset() }
            if lossFraction < 0.02 { lossBased = max(lossBased, delayBased) }
        }
        // It found most of what it tried: try further.
        if found >= 0.7 * probed, probed < maximum, delayBased < maximum {
            queueProbe(min(2 * found, maximum), now: now)
        }
    }

    private mutating func scheduleProbe(now: UInt64) {
        if let p = probing, now - p.at > 1_000_000_000 { probing = nil }  // its result never came
        guard pendingProbe == nil, probing == nil else { return }
        let calm = detector.state == .normal && lossFraction < 0.02
        guard calm, target < 0.95 * maximum, lastProbeAt.map({ now - $0 >= Self.probeInterval }) ?? true else { return }
        queueProbe(min(2 * target, maximum), now: now)
    }

    private mutating func queueProbe(_ rate: Double, now: UInt64) {
        pendingProbe = ProbeCluster(id: nextProbeID, bitsPerSecond: rate)
        nextProbeID += 1
        lastProbeAt = now
    }

    /// Something other than a probe found the path carries `rate` (bit/s): a relay forwarded
    /// a viewer more for a while and no queue built. The estimate goes there if it was lower.
    public mutating func raise(to rate: Double) {
        guard detector.state != .overusing, rate > delayBased else { return }
        delayBased = min(rate, maximum)
        if let upper = linkCapacity.upperBound, rate > upper { linkCapacity.reset() }
        if lossFraction < 0.02 { lossBased = max(lossBased, delayBased) }
    }

    /// The probe to send now, if one is due (the sender sends it and tags its packets).
    public mutating func takeProbe(now: UInt64) -> ProbeCluster? {
        guard let p = pendingProbe else { return nil }
        pendingProbe = nil
        probing = (p, now)
        return p
    }

    private mutating func measureAcknowledged() {
        guard let newest = arrivals.last?.time else { return }
        // Signed: a reordered packet may have arrived before the oldest of the window.
        while arrivalsHead < arrivals.count, Int64(bitPattern: newest &- arrivals[arrivalsHead].time) > 500_000_000 { arrivalsHead += 1 }
        if arrivalsHead > 512 {
            arrivals.removeFirst(arrivalsHead)
            arrivalsHead = 0
        }
        let window = arrivals[arrivalsHead...]
        guard let first = window.first?.time, newest > first, window.count >= 4 else { return }
        let bytes = window.dropFirst().reduce(0) { $0 + $1.bytes }
        acknowledged = Double(bytes) * 8 / (Double(newest - first) / 1e9)
    }

    private mutating func measureQueue(least: Int64, now: UInt64) {
        guard least != .max else { return }
        // No queue grows or drains by 2 s between two feedbacks: the receiver's clock jumped
        // (it restarted), and the path's least delay is to be learnt again.
        if let last = lastLeast, abs(least - last) > 2_000_000_000 {
            delayMinima = [Int64](repeating: .max, count: delayMinima.count)
        }
        lastLeast = least
        let second = now / 1_000_000_000
        if second != delaySecond {
            // New seconds start empty (any skipped are forgotten too).
            for s in (delaySecond + 1)...max(delaySecond + 1, min(second, delaySecond + 10)) { delayMinima[Int(s % 10)] = .max }
            delaySecond = second
        }
        let i = Int(second % 10)
        delayMinima[i] = min(delayMinima[i], least)
        queueDelay = least - delayMinima.min()!
    }

    private mutating func measureLoss(now: UInt64) {
        while lossHead < lossWindow.count, now - lossWindow[lossHead].time > 1_000_000_000 { lossHead += 1 }
        if lossHead > 512 {
            lossWindow.removeFirst(lossHead)
            lossHead = 0
        }
        let window = lossWindow[lossHead...]
        // A fraction of a few packets says little (one of 8 lost is "12 %"): as libwebrtc's
        // SendSideBandwidthEstimation, at least 20 packets before the loss counts.
        guard window.count >= Self.lossSamplesMinimum else { return }
        lossFraction = Double(window.reduce(0) { $0 + ($1.lost ? 1 : 0) }) / Double(window.count)
        lossSamples = window.count
    }

    private mutating func updateDelayBased(now: UInt64) {
        let elapsed = Double(now - (lastDelayUpdate ?? now)) / 1e9
        lastDelayUpdate = now
        if let queue = queueDelay, queue > Self.standingQueueNanos {
            let response = rttNanos + 100_000_000
            if lastQueueCut.map({ now - $0 >= response }) ?? true, let got = acknowledged {
                lastQueueCut = now
                delayBased = max(min(delayBased, 0.8 * got), minimum)
                linkCapacity.onDecrease(got)
            }
            return
        }
        switch detector.state {
        case .overusing:
            let measured = acknowledged ?? delayBased
            let next = 0.85 * measured
            if next < delayBased {
                // Far below what the link seemed to carry: it shrank, and is unknown again.
                if let lower = linkCapacity.lowerBound, measured < lower { linkCapacity.reset() }
                linkCapacity.onDecrease(measured)
                delayBased = max(next, minimum)
            }
        case .underusing:
            break  // the queue drains: hold
        case .normal:
            // Never far above what actually gets through (1.5 × acknowledged + 10 kbit/s).
            let ceiling = acknowledged.map { 1.5 * $0 + 10_000 } ?? maximum
            // More gets through than the link carried at the decreases (beyond their usual
            // spread): it grew, and is unknown again.
            if let upper = linkCapacity.upperBound, let got = acknowledged, got > upper { linkCapacity.reset() }
            let next = linkCapacity.estimate == nil ? delayBased * pow108(elapsed) : delayBased + nearCapacityIncrease * min(elapsed, 1)
            delayBased = min(max(min(next, max(ceiling, delayBased)), minimum), maximum)
        }
    }

    private mutating func updateLossBased(now: UInt64) {
        let elapsed = Double(now - (lastLossUpdate ?? now)) / 1e9
        lastLossUpdate = now
        if lossFraction < 0.02 {
            lossBased = min(max(lossBased * pow108(elapsed), delayBased), maximum)
        } else if lossFraction <= Self.congestedLoss {
            // Loss without a queue building is the link's, not ours (Wi-Fi): creep up, about a
            // packet per response time, while the delay says the path is not overused.
            if detector.state == .normal {
                let response = Double(rttNanos) / 1e9 + 0.1
                lossBased = min(lossBased + 1200 * 8 * elapsed / response, maximum)
            }
        } else {
            // Once per 300 ms at most, as libwebrtc does, by half the loss above 10 %.
            lossBased = max(minimum, lossBased * (1 - 0.5 * (lossFraction - Self.congestedLoss) * min(1, elapsed / 0.3)))
        }
    }

    /// Near the link's capacity the rate grows by about one packet per twice the response time
    /// (round trip + 100 ms) a second, as libwebrtc's `AimdRateControl` does: a packet being
    /// a 30 fps frame's share of at most 1200 bytes; 4 kbit/s a second at least. At 1 Mbit/s
    /// and a 50 ms round trip that is 28 kbit/s a second, so the queue the rate finally
    /// overshoots into builds slowly and the detector sees it before it is deep.
    var nearCapacityIncrease: Double {
        let frameBits = delayBased / 30
        let packets = (frameBits / (1200 * 8)).rounded(.up)
        let packetBits = frameBits / max(packets, 1)
        let response = 2 * (Double(rttNanos) / 1e9 + 0.1)
        return max(4000, packetBits / response)
    }

    /// 1.08^seconds (8 % a second), for short steps.
    private func pow108(_ seconds: Double) -> Double {
        1 + 0.08 * min(seconds, 1)
    }
}

/// What the link carried when the rate last had to come down (libwebrtc's
/// `LinkCapacityEstimator`): an exponential average of the throughput at the decreases, with
/// its spread (a normalised variance, within 0.4–2.5), so that "more than the link carries"
/// means more than the estimate plus 3 σ, not a measurement's noise.
public struct LinkCapacity: Sendable, Equatable {
    /// kbit/s, nil while unknown.
    public private(set) var estimateKbps: Double?
    private var deviation = 0.4
    public init() {}

    /// bit/s, nil while unknown.
    public var estimate: Double? { estimateKbps.map { $0 * 1000 } }
    public var upperBound: Double? { estimateKbps.map { ($0 + 3 * spread($0)) * 1000 } }
    public var lowerBound: Double? { estimateKbps.map { max(0, $0 - 3 * spread($0)) * 1000 } }
    private func spread(_ estimate: Double) -> Double { (deviation * estimate).squareRoot() }

    /// The rate came down while `throughput` (bit/s) got through.
    public mutating func onDecrease(_ throughput: Double) {
        let sample = throughput / 1000
        let alpha = 0.05
        guard let e = estimateKbps else {
            estimateKbps = sample
            return
        }
        let next = (1 - alpha) * e + alpha * sample
        let error = next - sample
        deviation = min(max((1 - alpha) * deviation + alpha * error * error / max(next, 1), 0.4), 2.5)
        estimateKbps = next
    }

    public mutating func reset() { estimateKbps = nil }
}
