/// A frame held by ``JitterBuffer``; `data` is valid only during the release call.
public struct BufferedFrame {
    public var rtpTimestamp: UInt32
    public var pictureID: UInt16?
    public var isKeyframe: Bool
    /// When it became complete (ns).
    public var arrival: UInt64
    /// When it was due (ns); release happens at or after this.
    public var playoutTime: UInt64
    public var data: UnsafeRawBufferPointer
}

/// Holds complete frames until their playout time, to absorb network jitter.
///
/// Playout time = the frame's RTP time on the local clock + a target delay. The RTP time is
/// anchored on the first frame and follows the lower envelope of `arrival − RTP time` (a frame
/// arriving earlier than predicted moves it down at once; it rises at most
/// ``Configuration/maxDriftPPM`` of elapsed media time, so it tracks clock drift but not
/// delay spikes). The target delay adapts to the frame-level interarrival jitter J (RFC 3550
/// A.8 applied to frames): `clamp(k × J + margin, minDelay, maxDelay)`. A jump of the RTP
/// timestamp by more than ``Configuration/resyncThreshold`` (either way) re-anchors.
///
/// Bounded: at most ``Configuration/maxFrames`` frames; their buffers are reused, so memory
/// stops growing once the largest frame has been seen. Time in ns of a monotonic clock.
public struct JitterBuffer: Sendable {
    public struct Configuration: Sendable {
        public var clockRate: UInt32 = 90_000
        public var minDelay: UInt64 = 10_000_000
        public var maxDelay: UInt64 = 500_000_000
        /// k: target delay per unit of jitter.
        public var jitterMultiplier: Double = 3
        /// Added to k × J.
        public var margin: UInt64 = 10_000_000
        public var maxFrames = 32
        public var maxDriftPPM: Int64 = 1000
        public var resyncThreshold: UInt64 = 10_000_000_000
        public init() {}
    }

    struct Entry: Sendable {
        var rtpTimestamp: UInt32 = 0
        var mediaTime: Int64 = 0
        var pictureID: UInt16?
        var isKeyframe = false
        var arrival: UInt64 = 0
        var bytes: [UInt8] = []
    }

    public let configuration: Configuration
    private var entries: [Entry]
    private var head = 0
    public private(set) var count = 0
    private var unwrapper = TimestampUnwrapper()
    private var anchor: Int64?
    private var lastMediaTime: Int64 = 0
    /// Lower envelope of arrival − media time (ns).
    private var offset: Int64 = 0
    private var lastTransit: Int64?
    private var jitterNanos: Double = 0

    /// Extra delay on top of the target (ns), for lip sync; changes take effect at once.
    public var extraDelay: UInt64 = 0

    /// Frames dropped because the buffer was full.
    public private(set) var overflowDrops = 0
    /// Times the RTP-to-local mapping was re-anchored after a timestamp jump.
    public private(set) var resyncs = 0

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.maxFrames > 0 && configuration.clockRate > 0)
        self.configuration = configuration
        entries = Array(repeating: Entry(), count: configuration.maxFrames)
    }

    /// Frame-level interarrival jitter (ns).
    public var jitter: UInt64 { UInt64(jitterNanos) }

    /// The current target delay (ns).
    public var targetDelay: UInt64 {
        let raw = configuration.jitterMultiplier * jitterNanos + Double(configuration.margin)
        return min(max(UInt64(raw), configuration.minDelay), configuration.maxDelay)
    }

    private func nanos(_ ticks: Int64) -> Int64 {
        // Split so that ticks × 10⁹ cannot overflow (it would after 28 hours at 90 kHz).
        let rate = Int64(configuration.clockRate)
        return ticks / rate * 1_000_000_000 + ticks % rate * 1_000_000_000 / rate
    }

    /// Adds a complete frame that arrived at `now` (ns), copying its data.
    /// - Parameter repaired: the frame waited for a retransmission (or for loss to be given
    ///   up on): its lateness says nothing about the network's jitter, so it is left out of
    ///   the estimate (as libwebrtc does), or one repaired frame would jump the delay.
    public mutating func insert(_ frame: AssembledFrame, now: UInt64, repaired: Bool = false) {
        insert(rtpTimestamp: frame.rtpTimestamp, pictureID: frame.pictureID, isKeyframe: frame.isKeyframe,
               data: frame.data, now: now, repaired: repaired)
    }

    /// Adds a frame that arrived at `now` (ns), copying `data`. When full, the oldest frame is
    /// dropped (release with ``pop(now:_:)`` first).
    public mutating func insert(rtpTimestamp: UInt32, pictureID: UInt16?, isKeyframe: Bool, data: UnsafeRawBufferPointer,
                                now: UInt64, repaired: Bool = false) {
        let ticks = unwrapper.unwrap(rtpTimestamp)
        let arrival = Int64(bitPattern: now)
        if let a = anchor {
            let step = nanos(ticks - a) - lastMediaTime
            if step.magnitude > configuration.resyncThreshold {
                anchor = ticks
                offset = arrival
                lastTransit = nil
                resyncs += 1
            }
        } else {
            anchor = ticks
            offset = arrival
        }
        let media = nanos(ticks - anchor!)
        let transit = arrival - media
        if transit < offset {
            offset = transit
        } else {
            let elapsed = max(0, media - lastMediaTime)
            offset += min(transit - offset, elapsed * configuration.maxDriftPPM / 1_000_000)
        }
        if !repaired {
            if let last = lastTransit {
                let d = Double((transit - last).magnitude)
                jitterNanos += (d - jitterNanos) / 16
            }
            lastTransit = transit
        }
        lastMediaTime = media

        if count == entries.count {
            head = (head + 1) % entries.count
            count -= 1
            overflowDrops += 1
        }
        let i = (head + count) % entries.count
        entries[i].rtpTimestamp = rtpTimestamp
        entries[i].mediaTime = media
        entries[i].pictureID = pictureID
        entries[i].isKeyframe = isKeyframe
        entries[i].arrival = now
        entries[i].bytes.removeAll(keepingCapacity: true)
        entries[i].bytes.append(contentsOf: data)
        count += 1
    }

    private func playoutTime(_ e: Entry) -> UInt64 {
        let due = e.mediaTime + offset + Int64(targetDelay) + Int64(extraDelay)
        let latest = e.arrival + configuration.maxDelay + extraDelay
        return min(UInt64(max(0, due)), latest)
    }

    /// When the oldest frame is due (ns), or nil when empty.
    public var nextWakeup: UInt64? { count == 0 ? nil : playoutTime(entries[head]) }

    /// Releases the oldest frame if it is due at `now`, calling `body` with it.
    /// - Returns: whether a frame was released.
    @discardableResult
    public mutating func pop(now: UInt64, _ body: (BufferedFrame) -> Void) -> Bool {
        guard count > 0 else { return false }
        let e = entries[head]
        let due = playoutTime(e)
        guard due <= now else { return false }
        e.bytes.withUnsafeBytes { data in
            body(BufferedFrame(rtpTimestamp: e.rtpTimestamp, pictureID: e.pictureID, isKeyframe: e.isKeyframe,
                               arrival: e.arrival, playoutTime: due, data: data))
        }
        head = (head + 1) % entries.count
        count -= 1
        return true
    }
}
