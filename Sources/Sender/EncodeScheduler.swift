import MediaCore
import Basics

/// The encode thread's decisions, without the encoder or the clock: whether the picture at hand
/// is encoded now, kept for later (`detail` over its bit budget), or repeated (refining a still
/// picture, keep-alive); when a keyframe is forced (PLI/FIR through the 300 ms throttle, and
/// `--keyframe-interval` on the wall clock when the frames come too slowly for libvpx's); how
/// freely the encoder may skip unchanged blocks; when to wake if nothing arrives; and what a
/// settings change does to the encoder. Pure: time is passed in, so tests drive it step by step.
struct EncodeScheduler {
    /// What a settings change asks of the encoder.
    enum EncoderChange: Equatable {
        case none
        /// Same encoder, new bit rate, content or frame rate (`reconfigure`).
        case reconfigure
        /// A new encoder (its keyframe interval is fixed at creation); it starts with a keyframe.
        case recreate
    }

    /// What to do with the picture at hand.
    enum Decision: Equatable {
        /// Nothing to encode yet: wait for a picture or `wakeAt(now:)`.
        case wait
        /// `detail` mode over its bit budget: keep the new picture (a newer one may replace it)
        /// and try again when the budget allows.
        case deferPicture
        /// Encode it: a new picture or a repeat of the last; force a keyframe; the encoder's
        /// static threshold (1: encode every block; high: skip what did not change).
        case encode(isNew: Bool, forceKeyframe: Bool, staticThreshold: UInt32)
    }

    /// A repeat of a converged picture: the encoder may skip every block.
    static let skipUnchangedThreshold: UInt32 = 100_000

    private(set) var settings: LiveSettings
    private(set) var policy: StaticScreenPolicy
    private(set) var throttle = KeyframeThrottle()
    /// Bits sent, drained at the target rate (`detail` waits for it).
    private(set) var bucket = RateBucket()
    /// `detail`: a new picture waits for the bit budget.
    private(set) var deferredNew = false
    /// A keyframe was asked for (PLI/FIR) and not yet produced.
    private(set) var keyframeAsked = false

    init(settings: LiveSettings) {
        self.settings = settings
        policy = StaticScreenPolicy(fps: Double(settings.fps), minFps: settings.minFps)
    }

    /// What congestion control allows (nil: no estimate; the settings' bit rate holds).
    private(set) var networkTarget: Bitrate?

    /// The bit rate the encoder aims at: the settings' (`--bitrate`, `ctl set`), or less when
    /// congestion control says the path carries less.
    var bitrate: Bitrate { networkTarget.map { min($0, settings.bitrate) } ?? settings.bitrate }

    /// One second of the target bit rate: `detail` sends a new picture only below this level.
    private var budgetBits: Double { Double(bitrate.bitsPerSecond) }

    /// The bit rate the encoder was last told (``told()``).
    private(set) var toldBitrate: Bitrate?

    /// The encoder is being made or reconfigured: the rate to give it, remembered.
    mutating func told() -> Bitrate {
        toldBitrate = bitrate
        return bitrate
    }

    /// Congestion control's new target: the encoder is to be told once the rate differs by 3 %
    /// or more from what it was last told (libvpx takes a new rate from the next frame; a
    /// change each feedback would be noise, and slow steps must still add up).
    mutating func setNetworkTarget(_ target: Bitrate?) -> EncoderChange {
        networkTarget = target
        guard let told = toldBitrate else { return .none }
        return abs(Double(bitrate.bitsPerSecond) - Double(told.bitsPerSecond)) >= 0.03 * Double(told.bitsPerSecond) ? .reconfigure : .none
    }

    /// Takes new live settings; returns what the encoder must do about them.
    mutating func apply(_ next: LiveSettings) -> EncoderChange {
        policy.framePeriodNanos = UInt64(1e9 / Double(max(next.fps, 1)))
        policy.keepAlivePeriodNanos = next.minFps > 0 ? UInt64(1e9 / next.minFps) : UInt64.max
        let current = settings
        let before = bitrate
        settings = next
        if next.keyframeIntervalSeconds != current.keyframeIntervalSeconds
            || (next.fps != current.fps && next.keyframeIntervalSeconds != nil) {
            return .recreate
        }
        if bitrate != before || next.content != current.content || next.fps != current.fps {
            return .reconfigure
        }
        return .none
    }

    /// When the encode thread must wake if no picture arrives: when a deferred picture's budget
    /// frees up (a repeat falling due meanwhile is moot: the new picture goes instead, and
    /// waking for it would spin until the budget allows), else the next repeat (or a second
    /// from now); and when a throttled keyframe request falls due.
    mutating func wakeAt(now: UInt64) -> UInt64 {
        var wake: UInt64
        if deferredNew {
            bucket.drain(at: now, bitsPerSecond: bitrate.bitsPerSecond)
            wake = now + bucket.nanosUntil(atMost: budgetBits, bitsPerSecond: bitrate.bitsPerSecond)
        } else {
            wake = policy.nextRepeatNanos.map { max($0, now) } ?? now + 1_000_000_000
        }
        if throttle.pending, let last = throttle.lastKeyframeNanos {
            wake = min(wake, max(now, last + throttle.minIntervalNanos))
        }
        if let due = intervalKeyframeDue { wake = min(wake, max(now, due)) }
        return wake
    }

    /// When `--keyframe-interval` forces a keyframe on the wall clock: the interval after the
    /// last keyframe, plus a grace of a frame period or an eighth of the interval, whichever is
    /// longer. libvpx is still given the interval in frames (`kf_max_dist`, its rate control
    /// plans for those keyframes), so while pictures come at the frame rate its own keyframe
    /// comes first and this never fires; on a still slide encoded at the keep-alive rate, or a
    /// frame rate held down by the bit budget, the frames would take far longer (2 s at 15 fps
    /// is 30 frames: 30 s at 1 fps), and this keyframe comes instead.
    var intervalKeyframeDue: UInt64? {
        guard let k = settings.keyframeIntervalSeconds, k > 0, let last = throttle.lastKeyframeNanos else { return nil }
        let interval = UInt64(k * 1e9)
        let grace = max(UInt64(1e9 / Double(max(settings.fps, 1))), interval / 8)
        return last &+ interval &+ grace
    }

    /// Decides about the picture at hand at `now`.
    /// - Parameters:
    ///   - newPicture: a new picture arrived.
    ///   - havePicture: there is a picture to repeat (one arrived before).
    ///   - keyframeRequested: a PLI/FIR came since the last call.
    ///   - encoderExists: an encoder is running (a new one starts with a keyframe anyway).
    mutating func decide(newPicture: Bool, havePicture: Bool, keyframeRequested: Bool, encoderExists: Bool,
                         now: UInt64) -> Decision {
        if keyframeRequested { keyframeAsked = true }
        let isNew: Bool
        if newPicture {
            isNew = true
        } else if havePicture {
            if deferredNew {
                isNew = true
            } else {
                let repeatDue = policy.nextRepeatNanos.map { now >= $0 } ?? false
                let intervalDue = intervalKeyframeDue.map { now >= $0 } ?? false
                guard keyframeAsked || throttle.pendingDue(at: now) || repeatDue || intervalDue else { return .wait }
                isNew = false
            }
        } else {
            return .wait
        }
        bucket.drain(at: now, bitsPerSecond: bitrate.bitsPerSecond)
        if isNew && settings.content == .detail && encoderExists && !keyframeAsked && bucket.levelBits > budgetBits {
            deferredNew = true
            return .deferPicture
        }
        deferredNew = false
        var force = false
        if keyframeAsked {
            keyframeAsked = false
            force = throttle.request(at: now)
        }
        if throttle.pendingDue(at: now) { force = true }
        if let due = intervalKeyframeDue, now >= due { force = true }
        let threshold: UInt32 = isNew || policy.isRefining(at: now) ? 1 : Self.skipUnchangedThreshold
        return .encode(isNew: isNew, forceKeyframe: force, staticThreshold: threshold)
    }

    /// The decided frame was encoded at `now` into `bytes` (nil: the encoder produced nothing,
    /// e.g. it dropped the frame) at `quantizer` (0–63, nil: not known), a keyframe or not.
    mutating func encoded(isNew: Bool, bytes: Int?, keyframe: Bool, quantizer: Int? = nil, at now: UInt64) {
        bucket.add(bits: (bytes ?? 0) * 8)
        if isNew {
            policy.newPictureEncoded(at: now, bytes: bytes)
        } else if keyframe {
            policy.keyframeRepeated(at: now, bytes: bytes)
        } else {
            policy.repeatEncoded(at: now, bytes: bytes ?? 0, quantizer: quantizer)
        }
        if keyframe { throttle.keyframeSent(at: now) }
    }
}
