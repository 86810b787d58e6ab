import Events
import FoundationEssentials
import Glibc
import Logging
import MediaCore
import Basics
import ScreenCapture
import Portal
import VideoProcessing

/// The capture thread: grabs pictures (X11 or a raw file), converts and scales them into pooled
/// I420 frames, and leaves the newest in the mailbox for the encode thread.
extension Broadcaster {
    /// Sources smaller than this on a side are not encoded (`unsupported_resolution`).
    static let minimumSide = 16
    /// How long after a change is first seen it is grabbed (`ScreenCapturer.settle`).
    static let damageSettleNanos: UInt64 = 2_000_000

    /// Opens the source and returns the capture loop to run on its own thread, which the
    /// capturer (or the file's reader) goes to whole (`sending`).
    func makeProducer() throws -> sending () -> Void {
        if let capturer = try openCapturer(config.source) {
            return { [self] in captureLoop(capturer) }
        }
        guard case .raw(let path, let format, let size, let fps) = config.source else { return {} }
        let reader = try RawFrameReader(path: path, format: format, size: size)
        return { [self] in rawLoop(reader, fps: fps) }
    }

    /// The size to encode a `source` picture at: the scaling policy's, made smaller by
    /// ``ResolutionAdapter``'s step when `motion` cannot hold its bit rate.
    func targetSize(for source: PixelSize) -> PixelSize {
        ResolutionAdapter.scaled(ScalingPolicy.outputSize(source: source, max: settings.maxResolution),
                                 level: scaleLevel.load(ordering: .relaxed))
    }

    func publish(_ frame: VideoFrame, captureMillis: Double? = nil, convertMillis: Double? = nil) {
        counters.withLock { c in
            c.framesCaptured += 1
            if let captureMillis, c.captureMillis.count < 512 { c.captureMillis.append(captureMillis) }
            if let convertMillis, c.convertMillis.count < 512 { c.convertMillis.append(convertMillis) }
        }
        // A picture the encoder never took: what changed in it is encoded with this one.
        if let replaced = mailbox.put(frame, merging: { new, old in new.mergeChanges(from: old) }) { pool.recycle(replaced) }
    }

    /// The encoder's picture, when the encoder is idle, for the capture to bring up to date in
    /// place (``FrameAssembler``), and whether its changes were not encoded yet.
    func lend() -> (frame: VideoFrame, changesPending: Bool)? {
        held.withLock { h in
            guard !h.encoding, !h.lent, let f = h.frame else { return nil }
            h.frame = nil
            h.lent = true
            return (f, !h.encodedAsNew)
        }
    }

    /// Takes back a lent picture that was not published (a failed grab): the encoder repeats it.
    func giveBack(_ frame: VideoFrame) -> Bool {
        let taken = held.withLock { h in
            guard h.lent, h.frame == nil else { return false }
            h.frame = frame
            h.lent = false
            h.encodedAsNew = true
            return true
        }
        if taken { mailbox.wake() }
        return taken
    }

    /// The screen capturer for `source` (nil: not a screen, a file).
    func openCapturer(_ source: VideoSource) throws -> (any ScreenCapturer)? {
        switch source {
        case .x11(let display, let spec, let drawCursor):
            return try X11ScreenCapturer(display: display, source: spec, drawCursor: drawCursor, clock: clock, logger: logger)
        case .portal(let window, let region, let drawCursor, let ask):
            return try PortalScreenCapturer(window: window, region: region, drawCursor: drawCursor, ask: ask,
                                            tokens: RestoreTokens.forUser(environment: ProcessInfo.processInfo.environment), clock: clock)
        case .raw:
            return nil
        }
    }

    /// The capture thread of a screen, whatever captures it: paced grabs into the assembler,
    /// live source switches, placeholders and errors reported.
    func captureLoop(_ initial: any ScreenCapturer) {
        var capturer = initial
        var current = settings
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        var pacer = CapturePacer(fps: Double(max(current.fps, 1)), now: clock.nowNanos())
        var sourceSize = PixelSize(width: 0, height: 0)
        var unavailable: String?
        var tooSmall: PixelSize?
        var force = false
        var held = false  // the pacer held back the grab about to be made
        var scale = scaleLevel.load(ordering: .relaxed)
        // A picture still waiting for the encoder is brought up to date in place: two frames in
        // flight, not three (3 MB at 1080p, 12 at 4K).
        let assembler = FrameAssembler(pool: pool, nowNanos: { [clock] in clock.nowNanos() }, accept: { [self] size in
            guard size.width >= Self.minimumSide && size.height >= Self.minimumSide else {
                // Too small to encode usefully (a window shrunk to nothing, a 1-pixel region):
                // the receivers keep the last picture until it grows back.
                if tooSmall != size {
                    tooSmall = size
                    events.emit(.error(.unsupportedResolution(width: size.width, height: size.height),
                        "the source is \(size), smaller than \(Self.minimumSide)x\(Self.minimumSide); holding the last picture until it grows"))
                }
                return false
            }
            tooSmall = nil
            if size != sourceSize {
                if sourceSize.area > 0 && !force {
                    events.emit(.warning(.sourceResized, "source is now \(size) (was \(sourceSize)); restarting the encoder with a keyframe"))
                }
                sourceSize = size
                pool.resize(to: targetSize(for: size))
            }
            return true
        }, reclaim: { [mailbox] in mailbox.reclaim() }, borrow: { [self] in lend() }, giveBack: { [self] in giveBack($0) })
        assembler.precise = current.content == .detail
        while isRunning {
            if case let level = scaleLevel.load(ordering: .relaxed), level != scale {
                scale = level
                sourceSize = PixelSize(width: 0, height: 0)  // re-apply the scaling policy
                force = true
            }
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                // The settings and the latest source ticket together (see SourceSwitches).
                let (next, ticket) = live.withLock { ($0, sourceSwitches.latest) }
                if next.source != current.source {
                    do {
                        if let opened = try openCapturer(next.source) {
                            capturer = opened
                            force = true
                        }
                        sourceSwitches.answer(ticket, failure: nil)
                    } catch {
                        events.emit(.error(.sourceSwitchFailed, "\(error); keeping the previous source"))
                        live.withLock { $0.source = current.source }
                        sourceSwitches.answer(ticket, failure: "\(error)")
                    }
                } else {
                    // Asked for the source in use (or back to it before this thread saw the change).
                    sourceSwitches.answer(ticket, failure: nil)
                }
                if next.maxResolution != current.maxResolution {
                    sourceSize = PixelSize(width: 0, height: 0)  // re-apply the scaling policy
                    force = true
                }
                if current.paused && !next.paused { force = true }
                if next.content != current.content {
                    assembler.precise = next.content == .detail
                    force = true  // the whole picture again, converted the new way
                }
                pacer.periodNanos = UInt64(1e9 / Double(max(next.fps, 1)))
                current = settings
            }
            if current.paused {
                // Video holds the last picture: the encoder repeats it at the keep-alive rate.
                clock.sleep(untilNanos: clock.nowNanos() + 50_000_000)
                continue
            }
            if clock.nowNanos() < pacer.nextNanos {
                clock.sleep(untilNanos: pacer.nextNanos)
                held = true
                continue
            }
            // Content faster than the frame rate is grabbed just after its next change begins.
            if pacer.awaitsNextChange(heldWithChangeWaiting: held && capturer.changePending()) && !force {
                _ = capturer.awaitNextChange(timeoutNanos: pacer.periodNanos)
            }
            held = false
            // A change is grabbed a moment after it is first seen: the rest of the picture its
            // application draws in further requests comes with it.
            capturer.settle(nanos: Self.damageSettleNanos)
            let now = clock.nowNanos()
            let outcome = capturer.capture(force: force, into: assembler)
            if let (frame, convertMillis) = assembler.takeFinished() {
                frame.timestampNanos = now
                let total = Double(clock.nowNanos() &- now) / 1e6
                publish(frame, captureMillis: max(0, total - convertMillis), convertMillis: convertMillis)
            }
            force = false
            switch outcome {
            case .captured:
                // One frame of credit: a change is grabbed as soon as XDamage reports it, half a
                // period after the last grab at the earliest (still slide + barcode: 9 ms p50
                // capture-to-decode, 24 ms a full period apart). It once seemed to break the window
                // test: that test hid the window during the refinement after a change, with fixed
                // sleeps; it now waits for each refinement, and passed 5 runs of 5 with the credit.
                pacer.grabbed(at: now)
                if unavailable != nil {
                    unavailable = nil
                    events.emit(SourceRestored(size: sourceSize))
                }
            case .placeholder(let reason):
                // Privacy: never the screen instead of the window; a placeholder, and say so.
                pacer.retry(at: now)
                if unavailable != reason {
                    unavailable = reason
                    events.emit(.warning(.sourceUnavailable, reason + "; sending a placeholder"))
                }
            case .unchanged:
                // Damage-triggered: wake as soon as the screen changes (no frame-tick wait).
                _ = capturer.waitForChange(timeoutNanos: 100_000_000)
            case .temporaryError(let message):
                logger.warning("capture: \(message)")
                pacer.retry(at: now)
            case .permanentError(let message):
                events.emit(.error(.sourceGone, message))
                stop(.sourceGone, detail: message)
            }
        }
    }

    func rawLoop(_ reader: RawFrameReader, fps: Double) {
        let converter = FrameConverter()
        converter.precise = settings.content == .detail
        let period = UInt64(1e9 / max(fps, 0.1))
        pool.resize(to: targetSize(for: reader.size))
        var next = clock.nowNanos()
        // Live settings: `fps` caps how often a frame goes on (the input keeps its own pace),
        // `max_resolution` re-applies the scaling policy.
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        var current = settings
        var lastPublished: UInt64 = 0
        var scale = scaleLevel.load(ordering: .relaxed)
        while isRunning {
            if case let level = scaleLevel.load(ordering: .relaxed), level != scale {
                scale = level
                pool.resize(to: targetSize(for: reader.size))
            }
            let now = clock.nowNanos()
            if now < next { clock.sleep(untilNanos: next); continue }
            // A live source: when the machine fell behind, skip ahead instead of bursting
            // the frames it missed (a burst would overshoot the bit rate and the receiver).
            next = now - next > period ? now + period : next + period
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                let updated = settings
                if updated.maxResolution != current.maxResolution { pool.resize(to: targetSize(for: reader.size)) }
                converter.precise = updated.content == .detail
                current = updated
            }
            if current.paused { continue }
            switch reader.readNext() {
            case .frame(let changed):
                guard changed else { continue }
                // Slower than the input when asked (a 10 % margin absorbs the input's jitter).
                let minInterval = UInt64(0.9e9 / Double(max(current.fps, 1)))
                if lastPublished != 0 && now &- lastPublished < minInterval { continue }
                lastPublished = now
                let frame = pool.take()
                let base = reader.bytes.baseAddress!
                let w = reader.size.width, h = reader.size.height
                switch reader.format {
                case .bgra:
                    converter.convert(bgra: BGRAImageView(base: base, stride: w * 4, width: w, height: h), into: frame)
                case .nv12:
                    converter.convertNV12(y: base, strideY: w, uv: base + w * h, strideUV: ((w + 1) / 2) * 2, size: reader.size, into: frame)
                case .i420:
                    let cw = (w + 1) / 2, ch = (h + 1) / 2
                    converter.convertI420(y: base, strideY: w, u: base + w * h, strideU: cw, v: base + w * h + cw * ch, strideV: cw,
                                          size: reader.size, into: frame)
                }
                frame.markEverythingChanged()  // a file says nothing of what changed
                frame.timestampNanos = now
                publish(frame)
            case .endOfInput:
                stop(.endOfInput)
            case .failed(let message):
                events.emit(.error(.sourceGone, message))
                stop(.sourceGone, detail: message)
            }
        }
    }
}
