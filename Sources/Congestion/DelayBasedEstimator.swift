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
    public init(sendTime: UInt64, size: Int, arrivalTime: UInt64?, probeCluster: Int? = nil) {
        self.sendTime = sendTime
        self.size = size
        self.arrivalTime = arrivalTime
        self.probeCluster = probeCluster
    }
}

/// Whether the path's queue is growing (overusing), draining (underusing) or steady.
public enum BandwidthUsage: Sendable, Equatable {
    case normal, overusing, underusing
}

/// The delay-based detector of libwebrtc's GoogCC (draft-ietf-rmcat-gcc-02 §5, and
/// `TrendlineEstimator` with its adaptive threshold): packets sent within 5 ms are a group; the
/// one-way delay variation between groups (arrival spacing minus send spacing) is accumulated
/// and smoothed, and the slope of its linear regression over the last 20 groups, scaled, is the
/// trend. A trend above an adaptive threshold for more than 10 ms, and still rising, is
/// overuse: a queue is building on the path. Memory is fixed.
public struct DelayBasedDetector: Sendable {
    /// Packets sent within this long of a group's first are one group (a frame's burst).
    public static let groupNanos: UInt64 = 5_000_000
    static let window = 20
    static let smoothing = 0.9
    static let gain = 4.0
    static let maxDeltas = 60.0

    private var group: (firstSend: UInt64, lastSend: UInt64, lastArrival: UInt64)?
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
    /// What the last group said.
    public private(set) var state: BandwidthUsage = .normal
    /// The last modified trend (ms of queue growth per group spacing, scaled), for stats.
    public private(set) var trend = 0.0

    public init() { points.reserveCapacity(Self.window) }

    /// After a probe's packet, media sent within this long are not weighed either: they queue
    /// behind the probe on purpose.
    public static let afterProbeNanos: UInt64 = 100_000_000
    private var ignoreUntil: UInt64 = 0
    private var lastOffset: Int64?

    /// Feeds the packets a feedback reported, in send order. Lost ones are skipped, and probes:
    /// sent faster than the target on purpose, the queue they build (and the media sent into
    /// it just after, ``afterProbeNanos``) says nothing of the media's own.
    public mutating func update(_ results: [PacketResult]) {
        for r in results {
            if r.probeCluster != nil {
                ignoreUntil = max(ignoreUntil, r.sendTime + Self.afterProbeNanos)
                // The groups after the probe are compared with each other, not with one from
                // before it: the queue the probe left would read as a queue building.
                group = nil
                previous = nil
                continue
            }
            guard let arrival = r.arrivalTime else { continue }
            guard r.sendTime > ignoreUntil else {
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
                self = DelayBasedDetector()
                ignoreUntil = keep
            }
            lastOffset = offset
            guard var g = group else {
                group = (r.sendTime, r.sendTime, arrival)
                continue
            }
            if r.sendTime < g.firstSend { continue }  // reordered from an older group
            if r.sendTime - g.firstSend <= Self.groupNanos {
                g.lastSend = max(g.lastSend, r.sendTime)
                g.lastArrival = max(g.lastArrival, arrival)
                group = g
                continue
            }
            // A new group: the one that ended is compared with the one before it.
            finish(g)
            group = (r.sendTime, r.sendTime, arrival)
        }
    }

    private mutating func finish(_ g: (firstSend: UInt64, lastSend: UInt64, lastArrival: UInt64)) {
        defer { previous = (g.lastSend, g.lastArrival) }
        guard let p = previous, g.lastArrival >= p.arrival else { return }
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
