import RTCP

/// A stream's RTP clock mapped to the sender's wall clock by its last RTCP sender report
/// (RFC 3550 §6.4.1: the SR's NTP and RTP timestamps are the same instant).
public struct SenderClock: Sendable, Equatable {
    public var ntpNanos: Int64
    public var rtpTimestamp: UInt32
    public var clockRate: UInt32

    public init(_ sr: SenderReport, clockRate: UInt32) {
        ntpNanos = sr.ntp.nanosSinceNTPEpoch
        rtpTimestamp = sr.rtpTimestamp
        self.clockRate = max(clockRate, 1)
    }

    /// The sender's wall-clock time (ns since the NTP epoch) of RTP time `ts`, for `ts` within
    /// ±2³¹ ticks of the report's.
    public func wallNanos(of ts: UInt32) -> Int64 {
        let ticks = Int64(Int32(bitPattern: ts &- rtpTimestamp))
        return ntpNanos + ticks * 1_000_000_000 / Int64(clockRate)
    }
}

extension NTPTimestamp {
    /// Nanoseconds since the NTP epoch (1900); era 0.
    public var nanosSinceNTPEpoch: Int64 {
        Int64(seconds) * 1_000_000_000 + Int64((UInt64(fraction) * 1_000_000_000) >> 32)
    }
}

/// Lip sync: lines audio up with video from both streams' sender reports, as libwebrtc's
/// `RtpStreamsSynchronizer` does.
///
/// Each rendered picture and each played piece of audio gives a delay: local render time minus
/// the sender's wall-clock time of that media (its RTP time through the stream's SR). Both share
/// the unknown offset between the two machines' clocks, so their difference is the real A/V
/// offset: positive when the sound is heard later than the pictures it belongs with. ``update()``
/// then delays the earlier stream by that much — up to ``maxFirstStep`` at once the first time
/// (a longer jump would show as a freeze), then in steps of at most ``maxStep`` so later
/// corrections are not heard or seen as jumps — within ``maxExtraDelay``; at most one of
/// ``audioExtraDelay`` and ``videoExtraDelay`` is non-zero.
///
/// No correction is made from a second in which either path's raw delay spread over more than
/// ``maxSpread``: the path has not settled. A PulseAudio null sink, for one, plays a new stream
/// only after the 2 s block it is in; meanwhile each frame written is heard 20 ms "sooner" than
/// the last, and holding the video back by that passing delay froze it for 300 ms. A path that
/// never settles is corrected anyway after ``maxUnsettledUpdates`` seconds.
/// Time in ns; pure, no clock of its own.
public struct AVSync: Sendable {
    public var audioClock: SenderClock?
    public var videoClock: SenderClock?
    /// Smoothed render delays (ns); nil until measured.
    public private(set) var audioDelay: Double?
    public private(set) var videoDelay: Double?
    public private(set) var audioExtraDelay: UInt64 = 0
    public private(set) var videoExtraDelay: UInt64 = 0
    /// Offsets smaller than this are left alone.
    public var deadband: Int64 = 10_000_000
    public var maxStep: Int64 = 80_000_000
    public var maxExtraDelay: Int64 = 1_000_000_000
    /// The largest first correction (ns).
    public var maxFirstStep: Int64 = 120_000_000
    /// A raw delay spread (ns) above which a path has not settled.
    public var maxSpread: Double = 80_000_000
    /// Updates skipped for an unsettled path before it is corrected anyway.
    public var maxUnsettledUpdates = 5
    /// Weight of a new measurement in the smoothed delays.
    public var smoothing = 0.125
    private var synced = false
    /// Raw delays (min, max) since the last update, and updates skipped in a row.
    private var audioRange: (Double, Double)?
    private var videoRange: (Double, Double)?
    private var unsettled = 0

    public init() {}

    /// Audio RTP time `ts` was (or will be) heard at local time `at` (ns).
    public mutating func audioPlayed(rtpTimestamp ts: UInt32, at local: UInt64) {
        guard let c = audioClock else { return }
        let d = Double(Int64(bitPattern: local) - c.wallNanos(of: ts))
        audioRange = Self.widen(audioRange, d)
        audioDelay = smooth(audioDelay, d)
    }

    /// The picture of video RTP time `ts` was shown at local time `at` (ns).
    public mutating func videoRendered(rtpTimestamp ts: UInt32, at local: UInt64) {
        guard let c = videoClock else { return }
        let d = Double(Int64(bitPattern: local) - c.wallNanos(of: ts))
        videoRange = Self.widen(videoRange, d)
        videoDelay = smooth(videoDelay, d)
    }

    private static func widen(_ r: (Double, Double)?, _ d: Double) -> (Double, Double) {
        guard let r else { return (d, d) }
        return (min(r.0, d), max(r.1, d))
    }

    /// Whether both paths' raw delays stayed within ``maxSpread`` since the last update.
    private var settled: Bool {
        [audioRange, videoRange].allSatisfy { r in r.map { $0.1 - $0.0 <= maxSpread } ?? true }
    }

    private func smooth(_ old: Double?, _ new: Double) -> Double {
        guard let old, (new - old).magnitude < 2e9 else { return new }  // a jump (new SR, restart): take it as is
        return old + smoothing * (new - old)
    }

    /// Audio delay minus video delay (ns): positive when audio is late. Nil until both streams
    /// have a sender report and have played something.
    public var offset: Int64? {
        guard let a = audioDelay, let v = videoDelay else { return nil }
        return Int64(a - v)
    }

    /// Moves the extra delays one step toward zero offset. Call about once a second.
    /// - Returns: whether a delay changed.
    @discardableResult
    public mutating func update() -> Bool {
        let settled = self.settled
        audioRange = nil
        videoRange = nil
        unsettled = settled ? 0 : unsettled + 1
        guard let diff = offset, diff.magnitude > deadband else { return false }
        guard settled || unsettled > maxUnsettledUpdates else { return false }
        let current = Int64(videoExtraDelay) - Int64(audioExtraDelay)
        let limit = synced ? maxStep : maxFirstStep
        let step = min(max(diff, -limit), limit)
        synced = true
        let relative = min(max(current + step, -maxExtraDelay), maxExtraDelay)
        guard relative != current else { return false }
        videoExtraDelay = UInt64(max(relative, 0))
        audioExtraDelay = UInt64(max(-relative, 0))
        // The delays measured so far no longer hold; the next measurements replace them.
        if let a = audioDelay { audioDelay = a + Double(max(-relative, 0) - max(-current, 0)) }
        if let v = videoDelay { videoDelay = v + Double(max(relative, 0) - max(current, 0)) }
        return true
    }

    /// Forgets measurements and delays (a stream restarted).
    public mutating func reset() {
        self = AVSync()
    }
}
