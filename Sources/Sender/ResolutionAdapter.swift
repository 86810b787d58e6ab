import MediaCore
import Basics

/// `motion` under a bit rate the encoder cannot hold: a smaller picture, as libwebrtc's quality
/// scaler gives a degradation preference of "maintain framerate". Every half second the
/// encoder's output (keyframes left out: a keyframe asked for by a receiver is not the size's
/// fault) is weighed against the target: a second above 1.3 × it, half a second above 2 × it,
/// or half a second above 1.1 × it at libvpx's coarsest quantizers (within 4 of the limit:
/// nothing but a smaller picture can help) — and none of it while the quantizer is in the lower
/// half of its range, where libvpx can still hold the target by itself — scale the picture down
/// a step — ¾ of the side, then ½ (a quarter of the area, the least); the target growing to 1.2 × what the larger size
/// needed, for three seconds, scales it back up — or, as libwebrtc's quality scaler does, the
/// smaller size encoding at fine quantizers (16 of 63 or less on average) within the target for
/// as long: the target need not grow past what the larger size once took (it may never, when
/// that was over `--bitrate`). If the larger size has to give way again within 10 s, the next
/// such try waits twice as long (up to 32 s), so a size that cannot hold does not flap. A resize
/// restarts the encoder (a keyframe), so the half second after one is not weighed. Pure: sizes
/// and time in, a level out.
struct ResolutionAdapter: Equatable {
    /// The steps, as fractions of each side.
    static let steps: [(num: Int, den: Int)] = [(1, 1), (3, 4), (1, 2)]

    /// The current step (0: the full size).
    private(set) var level = 0
    /// For each step taken down, the rate (bit/s) the larger size was producing: the target must
    /// reach 1.2 × it to go back.
    private var needed = [Double](repeating: 0, count: ResolutionAdapter.steps.count)
    private var windowStart: UInt64?
    private var producedBits = 0.0
    /// The target over the window (bit/s, time-weighted by frames).
    private var targetSum = 0.0
    private var frames = 0
    private var quantizerSum = 0
    private var quantized = 0
    private var deltaFrames = 0
    private var over = 0
    private var roomToGrow = 0
    /// Windows not weighed: the one after a resize (its keyframe), and the first second of a
    /// path under congestion control (``pathStarted()``).
    private var settling = 0
    /// Windows of fine quantizers within the target needed to grow back (doubles after a
    /// grow-back that did not hold), and when the last such grow-back was.
    private var fineWindowsNeeded = 6
    private var fineWindows = 0
    private var grewOnQuantizerAt: UInt64?
    /// An average quantizer (0–63) at or under this is fine: the picture has bits to spare.
    static let fineQuantizer = 16

    /// The path came under congestion control: its first second is not weighed (as libwebrtc's
    /// quality scaler samples longer at the start). What the encoder made before, under no
    /// limit (the opening's ceilings, a keyframe), and the rate control settling from it, are
    /// not the size's fault; on a jittery path they once scaled 1280 down to 960 for good.
    mutating func pathStarted() {
        settling = 2
        startWindow(at: nil)
        over = 0
    }

    /// A new weighing from `now` (nil: from the next frame).
    private mutating func startWindow(at now: UInt64?) {
        windowStart = now
        producedBits = 0
        targetSum = 0
        frames = 0
        deltaFrames = 0
        quantizerSum = 0
        quantized = 0
    }

    /// `size` scaled for `level` (even sides, at least 16).
    static func scaled(_ size: PixelSize, level: Int) -> PixelSize {
        let step = steps[min(max(level, 0), steps.count - 1)]
        func side(_ v: Int) -> Int { max(16, v * step.num / step.den & ~1) }
        return step.num == step.den ? size : PixelSize(width: side(size.width), height: side(size.height))
    }

    /// `size` scaled for the current step.
    func scaled(_ size: PixelSize) -> PixelSize { Self.scaled(size, level: level) }

    /// How long one weighing lasts.
    static let windowNanos: UInt64 = 500_000_000

    /// A frame of `bits` (a keyframe or not, at `quantizer` of at most `maxQuantizer`) was
    /// encoded at `now` for a target of `target` bit/s. Returns the new step when it changes.
    /// `fps`: the frame rate asked for. What a size needs is weighed per frame at that rate, so
    /// frames the send budget skipped (the encoder over the path's rate) count against it too.
    mutating func encoded(bits: Int, keyframe: Bool = false, quantizer: Int? = nil, maxQuantizer: Int = 63, target: Int,
                          fps: Double = 30, now: UInt64) -> Int? {
        let start = windowStart ?? now
        windowStart = start
        if !keyframe {
            producedBits += Double(bits)
            deltaFrames += 1
            if let quantizer {
                quantizerSum += quantizer
                quantized += 1
            }
        }
        targetSum += Double(target)
        frames += 1
        guard now - start >= Self.windowNanos else { return nil }
        let produced = deltaFrames > 0 ? producedBits / Double(deltaFrames) * fps : 0, asked = targetSum / Double(frames)
        let coarsest = quantized > 0 && quantizerSum >= (maxQuantizer - 4) * quantized
        // Below half its range libvpx still has quantizers to spare: an overshoot there is its
        // rate control catching up (a scene cut, a file's loop), which the send budget holds
        // meanwhile, not a size it cannot hold (a room on loopback at 1 Mbit/s, quantizer 22,
        // 1.3 × over for a second, went from 640 to 320 wide).
        let spare = quantized > 0 && quantizerSum * 2 < maxQuantizer * quantized
        let fine = quantized > 0 && quantizerSum <= Self.fineQuantizer * quantized && produced <= asked
        startWindow(at: now)
        if settling > 0 {
            settling -= 1
            return nil
        }
        // At the coarsest quantizers nothing but a smaller picture helps: no need to wait.
        over = spare ? 0 : produced > 2 * asked || (coarsest && produced > 1.1 * asked) ? over + 2 : produced > 1.3 * asked ? over + 1 : 0
        roomToGrow = level > 0 && asked >= 1.2 * needed[level] ? roomToGrow + 1 : 0
        fineWindows = level > 0 && fine ? fineWindows + 1 : 0
        if over >= 2, level < Self.steps.count - 1 {
            level += 1
            needed[level] = produced
            // A grow-back on fine quantizers that did not hold: the next waits longer.
            if let at = grewOnQuantizerAt, now - at < 10_000_000_000 { fineWindowsNeeded = min(fineWindowsNeeded * 2, 64) }
            grewOnQuantizerAt = nil
        } else if roomToGrow >= 6 {
            level -= 1
        } else if fineWindows >= fineWindowsNeeded {
            level -= 1
            grewOnQuantizerAt = now
        } else {
            return nil
        }
        over = 0
        roomToGrow = 0
        fineWindows = 0
        settling = 1
        return level
    }
}
