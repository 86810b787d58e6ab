/// Viewer statistics in the shape of WebRTC's `RTCInboundRtpStreamStats`, fed by the caller.
///
/// Freezes: WebRTC counts a rendering gap ≥ max(3 × avg, avg + 150 ms), i.e. gap ≥ avg +
/// max(2 × avg, 150 ms), avg being the average frame duration. Screen content legitimately
/// pauses (a still slide is refreshed once a second), so here the first `avg` is the *expected*
/// gap: the RTP-time distance from the last rendered frame to the next frame the sender sent
/// (from frames that arrived, rendered or not, and frames known lost); the second is the
/// average of recent expected gaps up to ``idleGap`` (the motion cadence). A still slide is not
/// a freeze; a frame that was sent and shown late is. ``totalFreezesDuration`` adds the excess
/// over the expected gap.
///
/// A freeze is counted while it lasts, not only when the next frame finally comes (``observe``,
/// each second and at the end): with frames sent since the last one shown, the first of them is
/// the expected one; with none, a sender still sends one every ``keepAliveGap`` (`--min-fps`),
/// so a longer silence is a freeze too. Times in ns of a monotonic clock; memory is fixed.
public struct ReceiverStats: Sendable {
    /// Expected gaps of this or longer are pauses (below 4 fps), not the frame cadence.
    public var idleGap: UInt64 = 250_000_000
    /// The longest a sender stays silent while it sends (its keep-alive frame, `--min-fps` 1).
    public var keepAliveGap: UInt64 = 1_000_000_000
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
    /// A freeze in progress (already counted in ``freezeCount``): the gap it exceeds.
    private var openFreeze: UInt64?
    /// The packet count of the sender's last report, and whether it sent nothing since the one
    /// before (an idle sender, `--min-fps 0` on a still screen: silence that is not a freeze).
    private var reportedPackets: UInt32?
    private var senderIdle = false
    /// The sender said BYE (or its subscription ended) and none started since.
    private var senderGone = false

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
        let wasOpen = openFreeze != nil
        openFreeze = nil
        defer { lastRender = (now, t) }
        guard let last = lastRender, now >= last.time, t > last.ticks else {
            if wasOpen { freezeCount -= 1 }  // not a frame after the gap: nothing to measure it by
            return
        }
        var next = t
        for x in recent where x > last.ticks && x < next { next = x }
        let expected = UInt64(next - last.ticks) * 1_000_000_000 / UInt64(clockRate)
        let gap = now - last.time
        if gap >= expected + threshold {
            if !wasOpen { freezeCount += 1 }
            totalFreezesDuration += Double(gap - expected) / 1e9
        } else if wasOpen {
            freezeCount -= 1  // the sender was slower than --min-fps 1 said: a pause after all
        }
        if expected < idleGap {
            gaps[gapNext] = expected
            gapNext = (gapNext + 1) % gaps.count
            gapCount = min(gapCount + 1, gaps.count)
        }
    }

    /// How much longer than expected a gap must be to be a freeze: WebRTC's max(2 × average
    /// frame duration, 150 ms).
    private var threshold: UInt64 {
        let average = gapCount == 0 ? 0 : gaps[0..<gapCount].reduce(0, +) / UInt64(gapCount)
        return max(2 * average, 150_000_000)
    }

    /// The gap a picture is expected to have at most after the last one shown: to the first
    /// frame sent since (arrived, or known lost), else the keep-alive.
    private func expectedGap(after last: (time: UInt64, ticks: Int64)) -> UInt64 {
        var next: Int64?
        for x in recent where x > last.ticks && x < (next ?? .max) { next = x }
        guard let next else { return keepAliveGap }
        return UInt64(next - last.ticks) * 1_000_000_000 / UInt64(clockRate)
    }

    /// The sender's report (RFC 3550 §6.4.1) says how many packets it has sent: the same count
    /// as in its last report means it sends nothing (a still screen without keep-alives).
    public mutating func senderReported(packetCount: UInt32) {
        guard !senderGone else { return }  // the report in its BYE's compound (and the copies')
        senderIdle = reportedPackets == packetCount
        reportedPackets = packetCount
    }

    /// The sender left (RTCP BYE, or the room's publisher went): silence from now on is not a
    /// freeze; one in progress ends here.
    public mutating func senderLeft(now: UInt64) {
        if let expected = openFreeze, let last = lastRender, now > last.time + expected {
            totalFreezesDuration += Double(now - last.time - expected) / 1e9
        }
        openFreeze = nil
        senderIdle = true
        senderGone = true
        reportedPackets = nil
    }

    /// A sender starts (again, after one left): silence counts from here. A frame of the
    /// sender that left, overtaken by its BYE, does not make it a sender again.
    public mutating func senderStarted() {
        senderIdle = false
        senderGone = false
        reportedPackets = nil
    }

    /// Looks at the picture at `now` with no new frame shown: a gap already longer than a freeze
    /// is counted now, once, and its length grows until the next frame (``freezesDuration``).
    public mutating func observe(now: UInt64) {
        guard openFreeze == nil, let last = lastRender, now > last.time else { return }
        var arrivedSince = false
        for x in recent where x > last.ticks { arrivedSince = true }
        if senderIdle && !arrivedSince { return }  // nothing was sent: nothing is late
        let expected = expectedGap(after: last)
        if now - last.time >= expected + threshold {
            freezeCount += 1
            openFreeze = expected
        }
    }

    /// The time since the last frame was shown (ns); nil before the first.
    public func frameGap(now: UInt64) -> UInt64? {
        lastRender.map { now > $0.time ? now - $0.time : 0 }
    }

    /// ``totalFreezesDuration`` with the freeze in progress at `now` (seconds).
    public func freezesDuration(now: UInt64) -> Double {
        guard let expected = openFreeze, let last = lastRender, now > last.time + expected else { return totalFreezesDuration }
        return totalFreezesDuration + Double(now - last.time - expected) / 1e9
    }
}
