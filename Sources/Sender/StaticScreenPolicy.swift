import Events
import MediaCore
import Basics
import Transport
/// Decides when the encoder re-encodes the last picture although nothing new arrived.
///
/// Screen content is mostly still. After a change the encoder keeps encoding the same picture at
/// half the frame rate for up to `refineNanos`, so the rate control spends bits on the residual and text
/// gets sharp; after that, the picture is repeated only at the keep-alive rate (`--min-fps`), so
/// late joiners and recorders still see progress while an idle slide costs almost nothing.
///
/// Refinement ends early once it has converged: two repeats in a row that were tiny *and* coded
/// at a fine quantizer (``convergedQuantizer``). Tiny alone is not enough: after a keyframe, or
/// any frame that emptied the rate control's buffer, libvpx codes the next repeats coarsely
/// (quantizer 19–42 on the bench's opening slide), and those are small because they say
/// little, not because nothing is left to say. A keyframe on a still picture (a viewer's
/// request, the interval) starts a refinement too: it is coarser than what it replaced.
/// Pure: time is passed in.
public struct StaticScreenPolicy: Sendable, Equatable {
    public var framePeriodNanos: UInt64
    public var keepAlivePeriodNanos: UInt64
    public var refineNanos: UInt64

    /// When the last new picture arrived.
    public private(set) var lastChangeNanos: UInt64?
    /// When the last frame (new or repeated) went to the encoder.
    public private(set) var lastEncodeNanos: UInt64?
    /// A repeat that encodes to fewer bytes than this changed nothing visible: at least
    /// `minConvergedBytes`, or 1/40 of the new picture's frame.
    public private(set) var convergedBytes = 256
    public var minConvergedBytes = 256
    /// Refinement ends early after this many converged repeats in a row.
    public var convergedRepeats = 2
    /// A repeat coded at this quantizer or finer (0–63) has little left to refine.
    public var convergedQuantizer = 2
    private var tinyRepeats = 0
    private var converged = false

    /// - Parameters:
    ///   - fps: the maximum frame rate.
    ///   - minFps: the keep-alive rate for a still picture (0 disables repeats after refining).
    ///   - refineSeconds: how long to keep encoding a still picture at full rate after a change.
    public init(fps: Double, minFps: Double, refineSeconds: Double = 4) {
        framePeriodNanos = UInt64(1e9 / max(fps, 0.1))
        keepAlivePeriodNanos = minFps > 0 ? UInt64(1e9 / minFps) : UInt64.max
        refineNanos = UInt64(refineSeconds * 1e9)
    }

    /// A new picture was encoded at `now`.
    public mutating func newPictureEncoded(at now: UInt64, bytes: Int? = nil) {
        convergedBytes = max(minConvergedBytes, (bytes ?? 0) / 40)
        lastChangeNanos = now
        lastEncodeNanos = now
        tinyRepeats = 0
        converged = false
    }

    /// The last picture was encoded again at `now`, into `bytes` at `quantizer` (nil: not
    /// known). Once the repeats are tiny and fine the picture is as sharp as it gets:
    /// refinement ends early.
    public mutating func repeatEncoded(at now: UInt64, bytes: Int? = nil, quantizer: Int? = nil) {
        lastEncodeNanos = now
        if let bytes {
            let fine = quantizer.map { $0 <= convergedQuantizer } ?? true
            tinyRepeats = bytes < convergedBytes && fine ? tinyRepeats + 1 : 0
            if tinyRepeats >= convergedRepeats { converged = true }
        }
    }

    /// A keyframe replaced the still picture's refined frames at `now` (a viewer asked, or the
    /// interval came): it is refined again, as a new picture would be.
    public mutating func keyframeRepeated(at now: UInt64, bytes: Int?) {
        newPictureEncoded(at: now, bytes: bytes)
    }

    /// When the last picture should be encoded again if nothing new arrives; nil before the first.
    public var nextRepeatNanos: UInt64? {
        guard let change = lastChangeNanos, let encoded = lastEncodeNanos else { return nil }
        let refining = !converged && encoded &- change < refineNanos
        // Refine at half the frame rate: a repeat due exactly when the next captured picture
        // is due would race it, and moving content would be encoded twice per frame.
        let period = refining ? 2 * framePeriodNanos : keepAlivePeriodNanos
        if period == UInt64.max { return nil }
        return encoded &+ period
    }

    /// Whether the encoder is still refining (encoding a still picture at full rate) at `now`.
    public func isRefining(at now: UInt64) -> Bool {
        guard let change = lastChangeNanos, !converged else { return false }
        return now &- change < refineNanos
    }
}

/// Throttles forced keyframes (PLI/FIR, peers joining): at most one per `minIntervalNanos`
/// (300 ms by default, as libwebrtc does), remembering a request that came too early.
public struct KeyframeThrottle: Sendable, Equatable {
    public var minIntervalNanos: UInt64
    public private(set) var lastKeyframeNanos: UInt64?
    public private(set) var pending = false

    public init(minIntervalNanos: UInt64 = 300_000_000) { self.minIntervalNanos = minIntervalNanos }

    /// Records a request; returns true if a keyframe should be produced now.
    public mutating func request(at now: UInt64) -> Bool {
        if let last = lastKeyframeNanos, now &- last < minIntervalNanos {
            pending = true
            return false
        }
        return true
    }

    /// Whether a request that came too early is now due.
    public func pendingDue(at now: UInt64) -> Bool {
        guard pending else { return false }
        guard let last = lastKeyframeNanos else { return true }
        return now &- last >= minIntervalNanos
    }

    /// A keyframe was sent at `now` (for whatever reason).
    public mutating func keyframeSent(at now: UInt64) {
        lastKeyframeNanos = now
        pending = false
    }
}

/// When the capture loop may grab the next picture: `fps` a second on average with one frame of
/// credit (a GCRA / token bucket of frame periods), never sooner than half a period after the
/// last grab. Content that changes at the frame rate or slower is so grabbed as soon as it
/// changes (XDamage), even when its timing jitters by up to half a period, instead of at a fixed
/// phase of a frame tick, which waits up to a period (half on average). Faster content is
/// grabbed about once a period.
///
/// The credit comes back at 1/32 more than `fps` (``creditLeak``). At exactly `fps` it would never
/// come back once spent: content that changes at the frame rate (a 30 fps video at `--fps 30`)
/// grabs once a period, so after one extra grab (the rest of a picture its application drew
/// late) every later change waited for the pacer, a fixed part of a period after it was drawn,
/// for as long as the stream ran (`motion`'s latency p50 was 24 ms in one run and 39 in the
/// next). Faster content is so grabbed at `fps` × 32/31 at most. Pure.
public struct CapturePacer: Sendable, Equatable {
    public var periodNanos: UInt64
    /// Theoretical arrival time of the next grab at `fps` × 32/31.
    private var tatNanos: UInt64
    /// No grab before this (half a period after the last grab, or a period after a retry).
    private var notBeforeNanos: UInt64
    /// The share of grabs held back lately while a change waited (a moving average, 1/8 a grab).
    private var heldShare = 0.0

    public init(fps: Double, now: UInt64) {
        periodNanos = UInt64(1e9 / max(fps, 0.1))
        tatNanos = now
        notBeforeNanos = now
    }

    /// The earliest time of the next grab.
    public var nextNanos: UInt64 {
        max(tatNanos > periodNanos ? tatNanos - periodNanos : 0, notBeforeNanos)
    }

    /// The credit's leak: a grab costs a period less 1/`creditLeak` of one.
    public static let creditLeak: UInt64 = 32

    /// A picture was grabbed at `now` (at or after `nextNanos`).
    public mutating func grabbed(at now: UInt64) {
        tatNanos = max(tatNanos, now) &+ periodNanos &- periodNanos / Self.creditLeak
        notBeforeNanos = now &+ periodNanos / 2
    }

    /// Whether the grab about to be made waits for the source's next change first: the pacer
    /// held it back while a change was waiting (`heldWithChangeWaiting`), as it did at least
    /// half of the grabs lately (a moving average over about 8). Content that changes faster
    /// than the frame rate is held back at nearly every grab: it then grabs just after one of
    /// its changes begins, not wherever the pacer's time falls in its drawing (X11ScreenCapturer's
    /// `awaitNextChange`). Content at the frame rate is held back now and then (the rest of a
    /// picture drawn late, by an application short of CPU): it is grabbed as it is, since the
    /// change that waits can be a whole picture that waiting would skip. Every capture attempt
    /// counts as a grab here.
    public mutating func awaitsNextChange(heldWithChangeWaiting held: Bool) -> Bool {
        heldShare += ((held ? 1 : 0) - heldShare) / 8
        return held && heldShare >= 0.5
    }

    /// Nothing usable was grabbed at `now` (an error, a placeholder): try again a period later.
    public mutating func retry(at now: UInt64) {
        notBeforeNanos = now &+ periodNanos
    }
}
