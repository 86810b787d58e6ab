/// Viewer statistics in the shape of WebRTC's `RTCInboundRtpStreamStats`, fed by the caller.
///
/// Freezes: WebRTC counts a rendering gap ≥ max(3 × avg, avg + 150 ms), i.e. gap ≥ avg +
/// max(2 × avg, 150 ms), avg being the average frame duration. Screen content legitimately
/// pauses (a still slide is refreshed once a second), so here the first `avg` is the *expected*
/// gap: the RTP-time distance from the last rendered frame to the next frame the sender sent
/// (from frames that arrived, rendered or not, and frames known lost); the second is the
/// average of recent expected gaps up to ``idleGap`` (the motion cadence). A still slide is not
/// a freeze; a frame that was sent and shown late is. ``totalFreezesDuration`` adds the excess
/// over the expected gap. Times in ns of a monotonic clock; memory is fixed.
public struct ReceiverStats: Sendable {
    /// Expected gaps of this or longer are pauses (below 4 fps), not the frame cadence.
    public var idleGap: UInt64 = 250_000_000
    public let clockRate: UInt32
    /// When the viewer started (ns), the origin of ``firstFrameTime``.
    public let startedAt: UInt64

    public var packetsReceived: Int64 = 0
    public var packetsLost: Int64 = 0
    public var bytesReceived: Int64 = 0
    /// Interarrival jitter (s).
    public var jitter: Double = 0
    public private(set) var framesReceived = 0
    public private(set) var framesDecoded = 0
    public private(set) var keyFramesDecoded = 0
    public private(set) var framesDropped = 0
    public private(set) var framesRendered = 0
    public private(set) var freezeCount = 0
    /// Seconds.
    public private(set) var totalFreezesDuration: Double = 0
    public private(set) var nackCount = 0
    public private(set) var pliCount = 0
    public private(set) var firCount = 0
    /// Time from ``startedAt`` to the first rendered frame (ns).
    public private(set) var firstFrameTime: UInt64?

    private var unwrapper = TimestampUnwrapper()
    private var lastArrived: Int64?
    /// Media times (RTP ticks, extended) of recent frames sent, to find the one after a render.
    private var recent: [Int64]
    private var recentNext = 0
    private var gaps: [UInt64]
    private var gapNext = 0
    private var gapCount = 0
    private var lastRender: (time: UInt64, ticks: Int64)?

    public init(clockRate: UInt32 = 90_000, startedAt: UInt64) {
        self.clockRate = clockRate
        self.startedAt = startedAt
        recent = Array(repeating: .min, count: 64)
        gaps = Array(repeating: 0, count: 30)
    }

    /// Copies the packet counters (call before reading the stats).
    public mutating func update(from s: ReceiveStatistics) {
        packetsReceived = s.packetsReceived
        packetsLost = s.cumulativeLost
        bytesReceived = s.bytesReceived
        jitter = s.jitterSeconds
    }

    private mutating func remember(_ ticks: Int64) {
        recent[recentNext] = ticks
        recentNext = (recentNext + 1) % recent.count
    }

    /// A frame arrived (complete or not, decodable or not), with `missingBefore` frames known to
    /// be lost just before it (e.g. from a PictureID gap).
    public mutating func frameArrived(rtpTimestamp: UInt32, missingBefore: Int = 0) {
        let t = unwrapper.unwrap(rtpTimestamp)
        framesReceived += 1
        if missingBefore > 0, let p = lastArrived, t > p {
            remember(p + (t - p) / Int64(missingBefore + 1))  // the first lost frame, evenly spaced
        }
        remember(t)
        lastArrived = max(lastArrived ?? t, t)
    }

    public mutating func frameDecoded(isKeyframe: Bool) {
        framesDecoded += 1
        if isKeyframe { keyFramesDecoded += 1 }
    }

    public mutating func frameDropped(count: Int = 1) { framesDropped += count }
    public mutating func nackSent(count: Int = 1) { nackCount += count }
    public mutating func pliSent() { pliCount += 1 }
    public mutating func firSent() { firCount += 1 }

    /// A frame was shown at `now` (ns).
    public mutating func frameRendered(rtpTimestamp: UInt32, now: UInt64) {
        let t = unwrapper.extended(rtpTimestamp)
        framesRendered += 1
        if firstFrameTime == nil { firstFrameTime = now >= startedAt ? now - startedAt : 0 }
        defer { lastRender = (now, t) }
        guard let last = lastRender, now >= last.time, t > last.ticks else { return }
        var next = t
        for x in recent where x > last.ticks && x < next { next = x }
        let expected = UInt64(next - last.ticks) * 1_000_000_000 / UInt64(clockRate)
        let gap = now - last.time
        let average = gapCount == 0 ? 0 : gaps[0..<gapCount].reduce(0, +) / UInt64(gapCount)
        if gap >= expected + max(2 * average, 150_000_000) {
            freezeCount += 1
            totalFreezesDuration += Double(gap - expected) / 1e9
        }
        if expected < idleGap {
            gaps[gapNext] = expected
            gapNext = (gapNext + 1) % gaps.count
            gapCount = min(gapCount + 1, gaps.count)
        }
    }
}
