/// A probe: a short burst sent faster than the target, whose spacing on arrival tells what the
/// path can carry (libwebrtc's probe clusters). At least 5 packets and 15 ms at the rate.
public struct ProbeCluster: Sendable, Equatable {
    public var id: Int
    public var bitsPerSecond: Double
    public init(id: Int, bitsPerSecond: Double) {
        self.id = id
        self.bitsPerSecond = bitsPerSecond
    }
    public static let minPackets = 5
    public static let minNanos: UInt64 = 15_000_000
    /// How many packets of `packetSize` bytes to send.
    public func packets(of packetSize: Int) -> Int {
        max(Self.minPackets, Int((bitsPerSecond * Double(Self.minNanos) / 1e9 / 8 / Double(max(packetSize, 1))).rounded(.up)))
    }
}

/// What a probe's packets say when they arrive (libwebrtc's `ProbeBitrateEstimator`): the rate
/// they were sent at and the rate they arrived at; the path carries the smaller, and when they
/// arrived much slower than sent (the link is saturated), 95 % of the arrival rate. A cluster
/// needs 4 of its packets (80 % of 5) reported, within a second. Memory is fixed (4 clusters).
public struct ProbeEstimator: Sendable {
    struct Cluster: Sendable {
        var id: Int
        var firstSend = UInt64.max, lastSend: UInt64 = 0
        var firstArrival = UInt64.max, lastArrival: UInt64 = 0
        var bytes = 0, firstArrivalSize = 0, lastSendSize = 0, received = 0
        var created: UInt64
    }
    static let maxClusters = 4
    static let minReceived = 4
    private var clusters: [Cluster] = []

    public init() { clusters.reserveCapacity(Self.maxClusters) }

    /// Takes one feedback's results at `now`; returns a probe's estimate (bit/s) when one is done.
    public mutating func take(_ results: [PacketResult], now: UInt64) -> Double? {
        clusters.removeAll { now - $0.created > 1_000_000_000 }
        for r in results {
            guard let id = r.probeCluster, let arrival = r.arrivalTime else { continue }
            var i = clusters.firstIndex { $0.id == id }
            if i == nil {
                if clusters.count == Self.maxClusters { clusters.removeFirst() }
                clusters.append(Cluster(id: id, created: now))
                i = clusters.count - 1
            }
            var c = clusters[i!]
            if r.sendTime < c.firstSend { c.firstSend = r.sendTime }
            if r.sendTime >= c.lastSend { c.lastSend = r.sendTime; c.lastSendSize = r.size }
            if arrival < c.firstArrival { c.firstArrival = arrival; c.firstArrivalSize = r.size }
            if arrival > c.lastArrival { c.lastArrival = arrival }
            c.bytes += r.size
            c.received += 1
            clusters[i!] = c
        }
        var estimate: Double?
        clusters.removeAll { c in
            guard c.received >= Self.minReceived else { return false }
            if let e = Self.estimate(c) { estimate = max(estimate ?? 0, e) }
            return true
        }
        return estimate
    }

    static func estimate(_ c: Cluster) -> Double? {
        let sendNanos = c.lastSend &- c.firstSend, receiveNanos = c.lastArrival &- c.firstArrival
        guard sendNanos > 0, sendNanos <= 1_000_000_000, receiveNanos > 0, receiveNanos <= 1_000_000_000 else { return nil }
        let sendRate = Double(c.bytes - c.lastSendSize) * 8 / (Double(sendNanos) / 1e9)
        let receiveRate = Double(c.bytes - c.firstArrivalSize) * 8 / (Double(receiveNanos) / 1e9)
        guard receiveRate <= 2 * sendRate else { return nil }  // bunched on arrival: no measure
        return receiveRate < 0.9 * sendRate ? 0.95 * receiveRate : min(sendRate, receiveRate)
    }
}
