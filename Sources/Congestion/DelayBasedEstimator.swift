/// What transport-wide feedback says of one packet we sent: when we sent it, how big it was,
/// and when it arrived (nil: it did not). Times in ns: the send time on our clock, the arrival
/// time on the receiver's (only differences between arrivals are used, so the clocks need not
/// agree).
public struct PacketResult: Sendable, Equatable {
    public var sendTime: UInt64
    public var size: Int
    public var arrivalTime: UInt64?
    /// The probe cluster it was sent in (``ProbeCluster``), nil for media.
    public var probeCluster: Int?
    /// An earlier feedback reported it lost, and it arrived after all (it was overtaken on a
    /// reordering path): the loss counted for it is taken back.
    public var recovered: Bool
    public init(sendTime: UInt64, size: Int, arrivalTime: UInt64?, probeCluster: Int? = nil, recovered: Bool = false) {
        self.sendTime = sendTime
        self.size = size
        self.arrivalTime = arrivalTime
        self.probeCluster = probeCluster
        self.recovered = recovered
    }
}

/// Whether the path's queue is growing (overusing), draining (underusing) or steady.
public enum BandwidthUsage: Sendable, Equatable {
    case normal, overusing, underusing
}

/// The delay-based detector of libwebrtc's GoogCC (draft-ietf-rmcat-gcc-02 §5, and
/// `InterArrivalDelta`, `TrendlineEstimator` with its adaptive threshold). A feedback's packets
/// are taken in the order they arrived; packets sent within 5 ms of a group's first are one
/// group (a frame's burst), and so is one that arrives within 5 ms of the group's last with a
/// shorter delay (a Wi-Fi station releasing what it held together); a packet sent before the
/// current group began arrived out of order and is left out. The one-way delay variation
/// between groups (arrival spacing minus send spacing) is accumulated and smoothed, and the
/// slope of its linear regression over the last 20 groups, scaled, is the trend. A trend above
/// an adaptive threshold for more than 10 ms, and still rising, is overuse: a queue is building
/// on the path. Memory is fixed.
///
/// Jitter and reordering without a queue leave the accumulated delay where it was: each group's
/// delay is measured from the same reference, and a group is never left out in a way that
/// keeps only the increases (taking groups in send order and skipping those that arrived
/// before the last did, as this did before issue 38, made reordering read as a queue).
public struct DelayBasedDetector: Sendable {
    /// Packets sent within this long of a group's first are one group (a frame's burst).
    public static let groupNanos: UInt64 = 5_000_000
    /// A packet arriving within this long of the group's last, with a shorter one-way delay,
    /// joins the group (libwebrtc's `kBurstDeltaThreshold`).
    public static let burstNanos: UInt64 = 5_000_000
    /// Groups whose completion went backwards this many times in a row start the measurement
    /// again (libwebrtc's `kReorderedResetThreshold`).
    static let reorderedReset = 3
    static let window = 20
    static let smoothing = 0.9
    static let gain = 4.0
    static let maxDeltas = 60.0

    typealias Group = (firstSend: UInt64, lastSend: UInt64, lastArrival: UInt64)
    private var group: Group?
    private var previous: (send: UInt64, arrival: UInt64)?
    private var accumulated = 0.0
    private var smoothed = 0.0
    private var points: [(x: Double, y: Double)] = []
    private var firstArrival: UInt64?
    private var deltas = 0
    private var threshold = 12.5
    private var lastThresholdUpdate: UInt64?
    private var overusingSince: UInt64?
    private var previousTrend = 0.0
    private var reordered = 0
    /// A feedback's packets in arrival order (reused).
    private var byArrival: [PacketResult] = []
    /// What the last group said.
    public private(set) var state: BandwidthUsage = .normal
    /// The last modified trend (ms of queue growth per group spacing, scaled), for stats.
    public private(set) var trend = 0.0
    /// Packets left out because they arrived after a later-sent group had begun.
    public private(set) var outOfOrder = 0

    public init() {
        points.reserveCapacity(Self.window)
        byArrival.reserveCapacity(512)
    }

    /// After a probe's packet, media sent within this long are not weighed either: they queue
    /// behind the probe on purpose.
    public static let afterProbeNanos: UInt64 = 100_000_000
    private var ignoreUntil: UInt64 = 0
    private var lastOffset: Int64?

    /// Feeds the packets a feedback reported (in send order, as transport-wide numbers put
    /// them). Lost ones are skipped, and probes: sent faster than the target on purpose, the
    /// queue they build (and the media sent into it just after, ``afterProbeNanos``) says
    /// nothing of the media's own.
    public mutating func update(_ results: [PacketResult]) {
        byArrival.removeAll(keepingCapacity: true)
        for r in results {
            if r.probeCluster != nil { ignoreUntil = max(ignoreUntil, r.sendTime + Self.afterProbeNanos) }
            if r.arrivalTime != nil { byArrival.append(r) }
        }
        // Stable on ties (the send order breaks them); one sort a feedback, in a kept buffer.
        byArrival.sort { a, b in a.arrivalTime! != b.arrivalTime! ? a.arrivalTime! < b.arrivalTime! : a.sendTime < b.sendTime }
        for r in byArrival {
            let arrival = r.arrivalTime!
            if r.probeCluster != nil || r.sendTime <= ignoreUntil {
                // The groups after the probe are compared with each other, not with one from
                // before it: the queue the probe left would read as a queue building.
                group = nil
                previous = nil
                continue
            }
            // The one-way delay (with the clocks' offset) moved by 2 s or more from one packet to
            // the next: no queue does that; the receiver's clock restarted (a new relay, a new
            // viewer), and what was measured before means nothing now.
            let offset = Int64(bitPattern: arrival &- r.sendTime)
            if let last = lastOffset, abs(offset - last) > 2_000_000_000 {
                let keep = ignoreUntil
                self.restart()
                ignoreUntil = keep
            }
            lastOffset = offset
            guard var g = group else {
                group = (r.sendTime, r.sendTime, arrival)
                continue
            }
            if r.sendTime < g.firstSend {
                outOfOrder += 1  // overtaken by a later group: its delay says nothing of the queue
                continue
            }
            if r.sendTime - g.firstSend <= Self.groupNanos || Self.isBurst(r, arrival: arrival, of: g) {
                g.lastSend = max(g.lastSend, r.sendTime)
                g.lastArrival = arrival
                group = g
                continue
            }
            // A new group: the one that ended is compared with the one before it.
            finish(g)
            group = (r.sendTime, r.sendTime, arrival)
        }
    }

    /// Arrived within ``burstNanos`` of the group's last packet, having spent less time on the
    /// way than the group's last: released together with it.
    private static func isBurst(_ r: PacketResult, arrival: UInt64, of g: Group) -> Bool {
        let arrivalDelta = Int64(bitPattern: arrival &- g.lastArrival)
        let sendDelta = Int64(bitPattern: r.sendTime &- g.lastSend)
        return arrivalDelta >= 0 && UInt64(arrivalDelta) <= burstNanos && arrivalDelta - sendDelta < 0
    }

    /// Everything measured forgotten (the probe's and packets' bookkeeping kept by the caller).
    private mutating func restart() {
        let seen = outOfOrder
        self = DelayBasedDetector()
        outOfOrder = seen
    }

    private mutating func finish(_ g: Group) {
        guard let p = previous else {
            previous = (g.lastSend, g.lastArrival)
            return
        }
        guard g.lastArrival >= p.arrival else {
            // Completed before the group it follows (reordered across feedbacks): left out, and
            // the reference kept, so that only what the queue did moves the accumulated delay.
            reordered += 1
            if reordered >= Self.reorderedReset {
                previous = nil
                reordered = 0
            }
            return
        }
        reordered = 0
        previous = (g.lastSend, g.lastArrival)
        let sendDelta = Double(Int64(bitPattern: g.lastSend &- p.send)) / 1e6
        let arrivalDelta = Double(g.lastArrival - p.arrival) / 1e6
        let delayDelta = arrivalDelta - sendDelta
        deltas += 1
        accumulated += delayDelta
        smoothed = Self.smoothing * smoothed + (1 - Self.smoothing) * accumulated
        if firstArrival == nil { firstArrival = g.lastArrival }
        let x = Double(Int64(bitPattern: g.lastArrival &- firstArrival!)) / 1e6
        if points.count == Self.window { points.removeFirst() }
        points.append((x, smoothed))
        guard points.count == Self.window, let slope = Self.slope(points) else { return }
        detect(trend: slope, sendDelta: sendDelta, now: g.lastArrival)
    }

    /// Least-squares slope of y over x.
    static func slope(_ p: [(x: Double, y: Double)]) -> Double? {
        let n = Double(p.count)
        let mx = p.reduce(0) { $0 + $1.x } / n, my = p.reduce(0) { $0 + $1.y } / n
        var num = 0.0, den = 0.0
        for q in p {
            num += (q.x - mx) * (q.y - my)
            den += (q.x - mx) * (q.x - mx)
        }
        return den == 0 ? nil : num / den
    }

    private mutating func detect(trend slope: Double, sendDelta: Double, now: UInt64) {
        let modified = min(Double(deltas), Self.maxDeltas) * slope * Self.gain
        trend = modified
        if modified > threshold {
            if overusingSince == nil { overusingSince = now }
            // Overuse once it lasted 10 ms and the trend is not falling.
            if now &- overusingSince! >= 10_000_000, now >= overusingSince!, modified >= previousTrend { state = .overusing }
        } else if modified < -threshold {
            overusingSince = nil
            state = .underusing
        } else {
            overusingSince = nil
            state = .normal
        }
        previousTrend = modified
        adaptThreshold(modified, now: now)
    }

    /// The threshold follows the trend (slowly down, faster up), within 6–600, ignoring
    /// spikes more than 15 above it (RFC draft-ietf-rmcat-gcc §5.4).
    private mutating func adaptThreshold(_ modified: Double, now: UInt64) {
        defer { lastThresholdUpdate = now }
        guard let last = lastThresholdUpdate else { return }
        if abs(modified) > threshold + 15 { return }
        let k = abs(modified) < threshold ? 0.039 : 0.0087
        let dt = min(max(Double(Int64(bitPattern: now &- last)) / 1e6, 0), 100)
        threshold += k * (abs(modified) - threshold) * dt
        threshold = min(max(threshold, 6), 600)
    }
}
