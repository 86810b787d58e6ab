/// How long an audio receiver must hold packets so that nearly all arrive before their turn:
/// the adaptive target of an audio jitter buffer.
///
/// Each packet's transit (arrival minus its media time) is compared with the fastest transit of
/// the last ``Configuration/window`` (which also follows clock drift and route changes). The
/// difference, its relative delay, goes into a histogram of ``Configuration/bucketNanos``
/// buckets whose weights fade by ``Configuration/forgetFactor`` per packet, as libwebrtc's NetEq
/// `DelayManager` keeps one. The target is the histogram's ``Configuration/quantile`` plus a
/// ``Configuration/margin``, within `minDelay…maxDelay`; until ``Configuration/warmupPackets``
/// have arrived it is ``Configuration/initialDelay``.
///
/// Pure (times passed in, ns) and bounded: a fixed ring of recent transits and a fixed
/// histogram, allocated once.
public struct AudioPlayoutDelay: Sendable {
    public struct Configuration: Sendable {
        public var bucketNanos: Int64 = 5_000_000
        /// Histogram size: relative delays above `buckets × bucketNanos` count in the last one.
        public var buckets = 200
        /// Weight kept by older packets at each new one (0.995: half-life of ~140 packets,
        /// ~3 s of continuous 20 ms audio).
        public var forgetFactor = 0.995
        public var quantile = 0.97
        public var margin: Int64 = 10_000_000
        public var minDelay: Int64 = 20_000_000
        public var maxDelay: Int64 = 1_000_000_000
        public var initialDelay: Int64 = 60_000_000
        public var warmupPackets = 50
        /// How far back the fastest transit is looked for.
        public var window: UInt64 = 2_000_000_000
        /// Transits remembered for that (at 50 packets a second, 2.5 s).
        public var windowSlots = 128
        public init() {}
    }

    public let configuration: Configuration
    private var histogram: [Double]
    private var total = 0.0
    private var transits: [Int64]
    private var arrivals: [UInt64]
    private var next = 0
    private var stored = 0
    public private(set) var packets = 0
    /// The fastest transit (arrival − media time, ns) within the window; nil before a packet.
    public private(set) var minTransit: Int64?

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.buckets > 0 && configuration.windowSlots > 0 && configuration.bucketNanos > 0)
        self.configuration = configuration
        histogram = Array(repeating: 0, count: configuration.buckets)
        transits = Array(repeating: 0, count: configuration.windowSlots)
        arrivals = Array(repeating: 0, count: configuration.windowSlots)
        targetDelay = configuration.initialDelay
    }

    /// A packet whose media time (its RTP time in ns, on any fixed origin) is `mediaNanos`
    /// arrived at `arrival`.
    public mutating func onPacket(mediaNanos: Int64, arrival: UInt64) {
        let transit = Int64(bitPattern: arrival) &- mediaNanos
        transits[next] = transit
        arrivals[next] = arrival
        next = (next + 1) % transits.count
        stored = min(stored + 1, transits.count)
        var fastest = transit
        for i in 0..<stored where arrival &- arrivals[i] <= configuration.window {
            fastest = min(fastest, transits[i])
        }
        minTransit = fastest
        let relative = transit - fastest
        let bucket = min(Int(relative / configuration.bucketNanos), histogram.count - 1)
        for i in histogram.indices { histogram[i] *= configuration.forgetFactor }
        total = total * configuration.forgetFactor + 1
        histogram[bucket] += 1
        packets += 1
        targetDelay = quantileDelay()
    }

    /// The delay (ns) to hold audio beyond the fastest transit; updated with each packet (the
    /// receiver reads it far more often than packets come).
    public private(set) var targetDelay: Int64

    private func quantileDelay() -> Int64 {
        let c = configuration
        guard packets >= c.warmupPackets else { return c.initialDelay }
        var sum = 0.0
        var bucket = histogram.count - 1
        for i in histogram.indices {
            sum += histogram[i]
            if sum >= c.quantile * total { bucket = i; break }
        }
        let delay = Int64(bucket + 1) * c.bucketNanos + c.margin
        return min(max(delay, c.minDelay), c.maxDelay)
    }

    /// Forgets everything (a new sender).
    public mutating func reset() {
        self = AudioPlayoutDelay(configuration: configuration)
    }
}
