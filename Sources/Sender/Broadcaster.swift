import AudioIO
import Foundation
import Logging
import MediaCore
import RTCP
import RTP
import RTPSession
import Room
import ScreenCapture
import Synchronization
import VP8Codec
import VideoProcessing
import Events
import Transport
import Control

/// Where pictures come from.
public enum VideoSource: Sendable, Equatable {
    /// An X11 display (nil: $DISPLAY), screen or region.
    case x11(display: String?, source: CaptureSourceSpec, drawCursor: Bool)
    /// Raw frames from a file or "-" (standard input), paced at `fps`.
    case raw(path: String, format: RawPixelFormat, size: PixelSize, fps: Double)
}

/// Everything `screenshare start --to` needs.
public struct BroadcastConfig: Sendable {
    public var source: VideoSource
    public var destination: Endpoint
    public var maxResolution: MaxResolution?
    public var fps: Int = 15
    public var minFps: Double = 1
    public var bitrate = Bitrate(bitsPerSecond: 2_000_000)
    public var minBitrate: Bitrate?
    public var keyframeIntervalSeconds: Double?
    public var content: ContentPreference = .detail
    public var sdpPath: String?
    public var durationSeconds: Double?
    /// The control socket (`screenshare ctl`); nil: none.
    public var controlSocketPath: String?
    public var cname: String
    /// libvpx `cpu-used` (−16…16); nil: 8 for motion, 10 for detail.
    public var cpuUsed: Int?
    /// Audio (Opus from PulseAudio); nil: video only.
    public var audio: AudioSendConfig?
    /// Publish in a room through the relay at `destination` (one UDP flow for everything);
    /// nil: plain RTP to `destination` (video PORT/PORT+1, audio PORT+2/PORT+3).
    public var room: RoomSettings?
    public init(source: VideoSource, destination: Endpoint, cname: String) {
        self.source = source
        self.destination = destination
        self.cname = cname
    }
}

/// Why a broadcast ended.
public enum StopReason: String, Sendable {
    case duration, requested, control = "ctl_stop", endOfInput = "end_of_input", sourceGone = "source_gone", failed
    /// Lost the room relay and the retries failed.
    case disconnected
}

/// Counters the media threads publish once per frame; read by stats and RTCP.
struct SenderCounters: Sendable {
    var framesCaptured = 0
    var framesEncoded = 0
    var framesSent = 0
    var keyframesSent = 0
    var repeatsEncoded = 0
    var packetsSent: UInt32 = 0
    var octetsSent: UInt32 = 0
    var bytesSent = 0
    var sendErrors = 0
    var encodeErrors = 0
    var retransmitted = 0
    var nacksReceived = 0
    var rttMillis: Double?
    var viewers = 0
    var fractionLost: Double?
    var cumulativeLost: Int?
    var receiverReports = 0
    var lastRTPTimestamp: UInt32 = 0
    var outputSize = PixelSize(width: 0, height: 0)
    var encodeMillis: [Double] = []
    var captureMillis: [Double] = []
    var convertMillis: [Double] = []
    var sendMillis: [Double] = []
}

/// The video sender: capture thread → latest-frame mailbox → encode thread → RTP over UDP,
/// plus an RTCP thread (sender reports with CNAME every second, BYE at the end, PLI/FIR in).
public final class Broadcaster: @unchecked Sendable {
    // Immutable after init, or guarded: `counters` and `stopState` by their Mutex; `running`
    // is atomic; the capture/encode objects are each touched by one thread only.
    public let config: BroadcastConfig
    let events: EventSink
    let logger: Logger
    let clock: MediaClock
    let mailbox = LatestFrameMailbox<VideoFrame>()
    let pool: FramePool
    let rtpSocket: UDPSocket
    let rtcpSocket: UDPSocket
    let ssrc: UInt32
    let rtpBase: UInt32
    let startNanos: UInt64
    let running = Atomic<Bool>(true)
    let keyframeRequested = Atomic<Bool>(false)
    let counters = Mutex(SenderCounters())
    let stopState = Mutex<(reason: StopReason, detail: String)?>(nil)
    let done = DispatchGroup()
    /// What `ctl` may change; `liveGeneration` counts changes so the media threads notice
    /// them with one atomic load per frame.
    let live: Mutex<LiveSettings>
    let liveGeneration = Atomic<Int>(0)
    var control: ControlServer?
    /// Sent RTP packets, for NACKs (written by the encode thread, read by the RTCP thread).
    /// Kept 3 s: on a still screen the next packet after a burst is the keep-alive frame, up to
    /// 1 s later (--min-fps 1), and only then does a viewer see that the burst's last frame was
    /// lost; its NACK comes after that second plus a round trip.
    let history = Mutex(PacketHistory(capacity: 1024, maxPacketSize: 1500, maxAge: 3_000_000_000))
    let rttNanos = Atomic<UInt64>(100_000_000)
    /// Whether `rttNanos` was measured (a receiver report) rather than assumed.
    let rttMeasured = Atomic<Bool>(false)
    /// Receivers' reference times (RFC 3611 RRTR) to answer with a DLRR in the next sender
    /// report: their SSRC, the RRTR's middle 32 bits, and when it arrived (at most 8 receivers).
    let pendingRRTR = Mutex<[(ssrc: UInt32, lastReceiverReport: UInt32, arrival: UInt64)]>([])
    let audio = Mutex<AudioSender?>(nil)
    let networkBusyWarned = Mutex<UInt64>(0)
    /// Seconds in a row the encoder sent more than 1.5 × the target (stats thread only).
    var overshootSeconds = 0
    var overshootWarnedAt: UInt64 = 0
    var lastAudioBytes = 0

    public init(config: BroadcastConfig, events: EventSink, logger: Logger, clock: MediaClock = SystemClock()) throws {
        self.config = config
        self.events = events
        self.logger = logger
        self.clock = clock
        rtpSocket = try UDPSocket(connectTo: config.destination)
        if config.room != nil {
            rtcpSocket = rtpSocket  // RFC 5761 multiplexing, with the room's control messages
        } else {
            rtcpSocket = try UDPSocket(connectTo: Endpoint(host: config.destination.host, port: config.destination.port + 1),
                                       localPort: rtpSocket.localPort &+ 1)
        }
        var rng = SystemRandomNumberGenerator()
        ssrc = rng.next()
        rtpBase = rng.next()
        startNanos = clock.nowNanos()
        pool = FramePool(size: PixelSize(width: 2, height: 2), capacity: 4)
        live = Mutex(LiveSettings(config: config))
    }

    /// Asks the broadcast to stop (from a signal handler thread or a timer).
    public func stop(_ reason: StopReason = .requested, detail: String = "") {
        stopState.withLock { if $0 == nil { $0 = (reason, detail) } }
        running.store(false, ordering: .sequentiallyConsistent)
        mailbox.close()
    }

    var isRunning: Bool { running.load(ordering: .sequentiallyConsistent) }

    func rtpTimestamp(at nanos: UInt64) -> UInt32 {
        let ticks = (nanos &- startNanos) / 1_000 * 9 / 100  // 90 kHz
        return rtpBase &+ UInt32(truncatingIfNeeded: ticks)
    }

    /// Runs until stopped; returns why it stopped and a summary.
    /// - Throws: `CaptureError` (video source), `FileError` (--input or --sdp file), `NetworkError`, and
    ///   `AudioError` when audio was required and PulseAudio (or the named source) is unavailable.
    public func run() throws -> (reason: StopReason, detail: String, summary: [String: JSONValue]) {
        let audioSender = try makeAudioSender()
        audio.withLock { $0 = audioSender }
        if let sdpPath = config.sdpPath { try writeSDP(to: sdpPath, audioPort: audioSender?.port) }
        // The source is opened on the capture thread's behalf here, so errors surface at once.
        let producer: @Sendable () -> Void
        do {
            producer = try makeProducer()
        } catch {
            audioSender?.stopCapture()
            throw error
        }
        if let path = config.controlSocketPath {
            do {
                control = try ControlServer(path: path) { [weak self] request in
                    self?.handleControl(request) ?? .failure("stopping")
                }
            } catch {
                events.emit(.warning(.controlUnavailable, "\(error); `screenshare ctl` cannot reach this broadcast"))
            }
        }
        events.emit(SenderStarted(
            destination: config.destination, ssrc: ssrc, fps: config.fps, bitrateKbps: config.bitrate.kbps, content: config.content,
            controlSocket: control?.path, room: config.room,
            audio: audioSender.map { .init(ssrc: $0.ssrc, port: $0.port, bitrateKbps: $0.config.bitrate.kbps) }))
        spawn("screenshare-capture") { producer() }
        spawn("screenshare-encode") { [self] in encodeLoop() }
        spawn("screenshare-rtcp") { [self] in rtcpLoop() }
        if let audioSender {
            spawn("screenshare-audio") { [self] in audioSender.run(while: { isRunning }, paused: { settings.paused }) }
        }

        let deadline = config.durationSeconds.map { Date().addingTimeInterval($0) }
        var nextStats = Date().addingTimeInterval(1)
        var last = counters.withLock { $0 }
        var lastAudio = audioSender?.counters.withLock { $0 }
        while isRunning {
            let wake = min(nextStats, deadline ?? .distantFuture)
            Thread.sleep(until: min(wake, Date().addingTimeInterval(0.05)))
            if let deadline, Date() >= deadline { stop(.duration); break }
            if Date() >= nextStats {
                nextStats = nextStats.addingTimeInterval(1)
                let now = counters.withLock { c -> SenderCounters in
                    let copy = c
                    c.encodeMillis.removeAll(keepingCapacity: true)
                    c.captureMillis.removeAll(keepingCapacity: true)
                    c.convertMillis.removeAll(keepingCapacity: true)
                    c.sendMillis.removeAll(keepingCapacity: true)
                    return copy
                }
                let audioNow = audioSender?.counters.withLock { $0 }
                emitStats(now, since: last, audio: audioNow, audioSince: lastAudio)
                last = now
                lastAudio = audioNow
            }
        }
        mailbox.close()
        done.wait()
        control?.close()
        sendRTCP(bye: true)
        let c = counters.withLock { $0 }
        let (reason, detail) = stopState.withLock { $0 } ?? (.requested, "")
        let audioCounters = audioSender?.counters.withLock { $0 }
        let stopped = SenderStopped(
            reason: reason, framesCaptured: c.framesCaptured, framesEncoded: c.framesEncoded, framesSent: c.framesSent,
            keyframesSent: c.keyframesSent, packetsSent: Int(c.packetsSent), bytesSent: c.bytesSent,
            sendErrors: c.sendErrors, encodeErrors: c.encodeErrors, nacksReceived: c.nacksReceived,
            retransmitted: c.retransmitted, receiverReports: c.receiverReports, rttMillis: c.rttMillis,
            packetsLost: c.cumulativeLost, size: c.outputSize,
            durationSeconds: Double(clock.nowNanos() &- startNanos) / 1e9,
            audio: audioCounters.map { a in
                SenderStopped.Audio(
                    frames: a.framesEncoded, packetsSent: Int(a.packetsSent), bytesSent: a.bytesSent, dtxFrames: a.dtxFrames,
                    silentFrames: a.silentFrames, cpuSeconds: Double(a.threadCPUNanos) / 1e9, underruns: a.mixer.underruns,
                    droppedFrames: a.mixer.droppedFrames, clippedFrames: a.mixer.clippedFrames,
                    latencyP50Millis: a.latency.quantile(0.5), latencyP95Millis: a.latency.quantile(0.95))
            })
        events.emit(stopped)
        return (reason, detail, stopped.fields)
    }

    /// Starts a thread. The kernel knows it as "ss-…" (15 bytes at most: `screenshare-audio` is
    /// `ss-audio`), so `top -H` and /proc/PID/task/*/comm (bench/audio.sh) tell the threads apart.
    func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        done.enter()
        let kernelName = String(name.replacingOccurrences(of: "screenshare-", with: "ss-").utf8.prefix(15))!
        let t = Thread { [done] in
            setThreadName(kernelName)
            body()
            done.leave()
        }
        t.name = name
        t.start()
    }

    func emitStats(_ c: SenderCounters, since p: SenderCounters, audio: AudioCounters?, audioSince pa: AudioCounters?) {
        func pct(_ values: [Double], _ q: Double) -> Double {
            let sorted = values.sorted()
            return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
        }
        var audioStats: SenderStats.Audio?
        if let audio {
            let recent = pa.map { audio.latency.since($0.latency) } ?? audio.latency
            audioStats = SenderStats.Audio(
                packetsSent: Int(audio.packetsSent), bytesSent: audio.bytesSent, kbps: (audio.bytesSent - lastAudioBytes) * 8 / 1000,
                latencyP50Millis: recent.quantile(0.5), latencyP95Millis: recent.quantile(0.95))
            lastAudioBytes = audio.bytesSent
        }
        events.emit(SenderStats(
            fps: c.framesSent - p.framesSent, kbps: (c.bytesSent - p.bytesSent) * 8 / 1000,
            framesSent: c.framesSent, keyframesSent: c.keyframesSent,
            encodeMillis: Quantiles(p50: pct(c.encodeMillis, 0.5), p95: pct(c.encodeMillis, 0.95)),
            captureMillis: Quantiles(p50: pct(c.captureMillis, 0.5), p95: pct(c.captureMillis, 0.95)),
            convertMillis: Quantiles(p50: pct(c.convertMillis, 0.5), p95: pct(c.convertMillis, 0.95)),
            sendMillis: Quantiles(p50: pct(c.sendMillis, 0.5), p95: pct(c.sendMillis, 0.95)),
            size: c.outputSize, sendErrors: c.sendErrors, rttMillis: c.rttMillis, loss: c.fractionLost,
            retransmitted: c.retransmitted, viewers: config.room != nil ? c.viewers : nil, audio: audioStats))
        // Receivers asked for many packets again: the path is losing them (even if the
        // retransmissions repair it, it is a sign of congestion).
        let sentPackets = Int(c.packetsSent &- p.packetsSent), resent = c.retransmitted - p.retransmitted
        if sentPackets >= 20 && resent * 20 >= sentPackets {
            warnNetworkBusy(String(format: "%d of %d packets sent in the last second were lost on the way and resent (%.0f %%)",
                                   resent, sentPackets, Double(resent) * 100 / Double(sentPackets)))
        }
        // The encoder cannot hold the bit rate (content too hard for it even at the coarsest
        // quantizer): say so after 3 s in a row above 1.5 × the target.
        let kbps = (c.bytesSent - p.bytesSent) * 8 / 1000
        let target = settings.bitrate.kbps
        overshootSeconds = kbps * 2 > target * 3 ? overshootSeconds + 1 : 0
        let now = clock.nowNanos()
        if overshootSeconds >= 3, overshootWarnedAt == 0 || now &- overshootWarnedAt >= 10_000_000_000 {
            overshootWarnedAt = now
            events.emit(.warning(.encoderOvershoot(kbps: kbps, targetKbps: target),
                "sending \(kbps) kbps for a \(target) kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution"))
        }
    }

    // MARK: - Audio

    /// Connects to PulseAudio. Unavailable audio is a warning (video only) unless it was required.
    func makeAudioSender() throws -> AudioSender? {
        guard let audioConfig = config.audio, audioConfig.capture.hasSources else { return nil }
        do {
            return try AudioSender(config: audioConfig, destination: config.destination, shared: config.room == nil ? nil : rtpSocket,
                                   clock: clock, events: events, logger: logger)
        } catch let error as AudioError where !audioConfig.required {
            events.emit(.warning(.audioUnavailable, "audio: \(error); sending video only (use --no-audio to silence this)"))
            return nil
        }
    }

    // MARK: - SDP

    func writeSDP(to path: String, audioPort: UInt16?) throws {
        let sdp = SessionDescription(destination: config.destination.host, videoPort: config.destination.port,
                                     framerate: config.fps, audioPort: audioPort).render()
        let tmp = path + ".tmp"
        do {
            try sdp.write(toFile: tmp, atomically: false, encoding: .utf8)
        } catch {
            throw FileError("--sdp '\(path)': cannot write: \(error.localizedDescription)")
        }
        guard rename(tmp, path) == 0 else {
            let reason = SystemError.current
            unlink(tmp)
            throw FileError("--sdp '\(path)': cannot move \(tmp) into place: \(reason)")
        }
    }

    // MARK: - Capture

    /// Opens the source and returns the capture loop to run on its own thread.
    func makeProducer() throws -> @Sendable () -> Void {
        switch config.source {
        case .x11(let display, let spec, let drawCursor):
            let capturer = try X11ScreenCapturer(display: display, source: spec, drawCursor: drawCursor, logger: logger)
            let box = UncheckedBox(capturer)
            return { [self] in x11Loop(box.value) }
        case .raw(let path, let format, let size, let fps):
            let reader = try RawFrameReader(path: path, format: format, size: size)
            let box = UncheckedBox(reader)
            return { [self] in rawLoop(box.value, fps: fps) }
        }
    }

    func targetSize(for source: PixelSize) -> PixelSize {
        ScalingPolicy.outputSize(source: source, max: settings.maxResolution)
    }

    func publish(_ frame: VideoFrame, captureMillis: Double? = nil, convertMillis: Double? = nil) {
        counters.withLock { c in
            c.framesCaptured += 1
            if let captureMillis, c.captureMillis.count < 512 { c.captureMillis.append(captureMillis) }
            if let convertMillis, c.convertMillis.count < 512 { c.convertMillis.append(convertMillis) }
        }
        if let replaced = mailbox.put(frame) { pool.recycle(replaced) }
    }

    func x11Loop(_ initial: X11ScreenCapturer) {
        var capturer = initial
        let converter = FrameConverter()
        var current = settings
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        var pacer = CapturePacer(fps: Double(max(current.fps, 1)), now: clock.nowNanos())
        var sourceSize = PixelSize(width: 0, height: 0)
        var unavailable: String?
        var tooSmall: PixelSize?
        var force = false
        while isRunning {
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                let next = settings
                if next.source != current.source, case .x11(let display, let spec, let cursor) = next.source {
                    do {
                        capturer = try X11ScreenCapturer(display: display, source: spec, drawCursor: cursor, logger: logger)
                        force = true
                    } catch {
                        events.emit(.error(.sourceSwitchFailed, "\(error); keeping the previous source"))
                        live.withLock { $0.source = current.source }
                    }
                }
                if next.maxResolution != current.maxResolution {
                    sourceSize = PixelSize(width: 0, height: 0)  // re-apply the scaling policy
                    force = true
                }
                if current.paused && !next.paused { force = true }
                pacer.periodNanos = UInt64(1e9 / Double(max(next.fps, 1)))
                current = settings
            }
            if current.paused {
                // Video holds the last picture: the encoder repeats it at the keep-alive rate.
                sleepNanos(50_000_000)
                continue
            }
            let now = clock.nowNanos()
            if now < pacer.nextNanos { sleepNanos(pacer.nextNanos - now); continue }
            let grabStart = clock.nowNanos()
            let outcome = capturer.capture(force: force) { view in
                let grabbed = clock.nowNanos()
                guard view.size.width >= Self.minimumSide && view.size.height >= Self.minimumSide else {
                    // Too small to encode usefully (a window shrunk to nothing, a 1-pixel region):
                    // the receivers keep the last picture until it grows back.
                    if tooSmall != view.size {
                        tooSmall = view.size
                        events.emit(.error(.unsupportedResolution(width: view.size.width, height: view.size.height),
                            "the source is \(view.size), smaller than \(Self.minimumSide)x\(Self.minimumSide); holding the last picture until it grows"))
                    }
                    return
                }
                tooSmall = nil
                if view.size != sourceSize {
                    if sourceSize.area > 0 && !force {
                        events.emit(.warning(.sourceResized, "source is now \(view.size) (was \(sourceSize)); restarting the encoder with a keyframe"))
                    }
                    sourceSize = view.size
                    pool.resize(to: targetSize(for: view.size))
                }
                let frame = pool.take()
                converter.convert(bgra: view, into: frame)
                frame.timestampNanos = now
                publish(frame, captureMillis: Double(grabbed &- grabStart) / 1e6,
                        convertMillis: Double(clock.nowNanos() &- grabbed) / 1e6)
            }
            force = false
            switch outcome {
            case .captured:
                // A full period after each grab (the pacer's one frame of credit, which cut the
                // change-to-grab latency on a still screen from ~14 ms to ~1, made the window test's
                // placeholder arrive unrefined in 2 runs of 3: left out until that is understood).
                pacer.retry(at: now)
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
        let period = UInt64(1e9 / max(fps, 0.1))
        pool.resize(to: targetSize(for: reader.size))
        var next = clock.nowNanos()
        // Live settings: `fps` caps how often a frame goes on (the input keeps its own pace),
        // `max_resolution` re-applies the scaling policy.
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        var current = settings
        var lastPublished: UInt64 = 0
        while isRunning {
            let now = clock.nowNanos()
            if now < next { sleepNanos(next - now); continue }
            // A live source: when the machine fell behind, skip ahead instead of bursting
            // the frames it missed (a burst would overshoot the bit rate and the receiver).
            next = now - next > period ? now + period : next + period
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                let updated = settings
                if updated.maxResolution != current.maxResolution { pool.resize(to: targetSize(for: reader.size)) }
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

    // MARK: - Encode and send

    func encodeLoop() {
        var encoder: VP8Encoder?
        var policy = StaticScreenPolicy(fps: Double(config.fps), minFps: config.minFps)
        var throttle = KeyframeThrottle()
        var packetizer = VP8Packetizer(ssrc: ssrc, initialSequence: UInt16.random(in: 0...UInt16.max),
                                       initialPictureID: UInt16.random(in: 0...0x7FFF))
        let packetBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packetBuffer.deallocate() }
        var lastFrame: VideoFrame?
        var lastTimestamp: UInt32?
        var firstSent = false
        var lastSendWarning: UInt64 = 0
        var current = settings
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        var bucket = RateBucket()
        var deferredNew = false  // detail mode: a new picture waits for the bit budget

        while true {
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                let next = settings
                policy.framePeriodNanos = UInt64(1e9 / Double(max(next.fps, 1)))
                policy.keepAlivePeriodNanos = next.minFps > 0 ? UInt64(1e9 / next.minFps) : UInt64.max
                if next.keyframeIntervalSeconds != current.keyframeIntervalSeconds
                    || (next.fps != current.fps && next.keyframeIntervalSeconds != nil) {
                    encoder = nil  // re-created with the new settings; starts with a keyframe
                } else if next.bitrate != current.bitrate || next.content != current.content || next.fps != current.fps {
                    do {
                        try encoder?.reconfigure(targetBitrateKbps: next.bitrate.kbps, content: next.content)
                    } catch {
                        events.emit(.warning(.encoderReconfigure, "\(error); re-creating it"))
                        encoder = nil
                    }
                }
                current = next
            }
            let repeatAt = policy.nextRepeatNanos
            var deadline: Date
            if let repeatAt {
                let now = clock.nowNanos()
                deadline = Date().addingTimeInterval(repeatAt > now ? Double(repeatAt - now) / 1e9 : 0)
            } else {
                deadline = Date().addingTimeInterval(1)
            }
            let budget = Double(current.bitrate.bitsPerSecond)  // one second's worth
            if deferredNew {
                bucket.drain(at: clock.nowNanos(), bitsPerSecond: current.bitrate.bitsPerSecond)
                let wait = bucket.nanosUntil(atMost: budget, bitsPerSecond: current.bitrate.bitsPerSecond)
                deadline = min(deadline, Date().addingTimeInterval(Double(wait) / 1e9))
            }
            let incoming = mailbox.take(until: deadline)
            if !isRunning { if let incoming { pool.recycle(incoming) }; break }
            let now = clock.nowNanos()
            let frame: VideoFrame
            var isNew = false
            if let incoming {
                if let old = lastFrame, old !== incoming { pool.recycle(old) }
                lastFrame = incoming
                frame = incoming
                isNew = true
            } else if let last = lastFrame {
                let wantKey = keyframeRequested.load(ordering: .relaxed) || throttle.pendingDue(at: now)
                if deferredNew {
                    frame = last
                    isNew = true
                } else {
                    guard wantKey || (repeatAt.map { now >= $0 } ?? false) else { continue }
                    frame = last
                }
            } else {
                continue
            }
            bucket.drain(at: now, bitsPerSecond: current.bitrate.bitsPerSecond)
            if isNew && current.content == .detail && encoder != nil && !keyframeRequested.load(ordering: .relaxed)
                && bucket.levelBits > budget {
                // Over budget: keep the picture for later (a newer one may replace it).
                deferredNew = true
                continue
            }
            deferredNew = false
            // Keyframe requests (PLI/FIR), at most one per 300 ms.
            if keyframeRequested.exchange(false, ordering: .relaxed) {
                if throttle.request(at: now) { encoder?.requestKeyframe() }
            }
            if throttle.pendingDue(at: now) { encoder?.requestKeyframe() }

            // (Re)create the encoder for the frame's size.
            if encoder == nil || encoder!.config.size != frame.size {
                do {
                    encoder = try VP8Encoder(config: encoderConfig(size: frame.size, current))
                    counters.withLock { $0.outputSize = frame.size }
                } catch {
                    events.emit(.error(.encodeFailure, "\(error)"))
                    stop(.failed, detail: "\(error)")
                    break
                }
            }
            // A keep-alive repeat of a converged picture: let the encoder skip every block.
            encoder!.setStaticThreshold(isNew || policy.isRefining(at: now) ? 1 : 100_000)
            var ts = rtpTimestamp(at: isNew ? frame.timestampNanos : now)
            if let prev = lastTimestamp, Int32(bitPattern: ts &- prev) <= 0 { ts = prev &+ 1 }
            lastTimestamp = ts
            let pts = Int64(ts &- rtpBase)
            let started = clock.nowNanos()
            var produced = false, key = false, packets: UInt32 = 0, octets = 0, errors = 0, busy = 0
            var sendNanos: UInt64 = 0
            do {
                try encoder!.encode(frame, pts: pts, duration: UInt(90_000 / max(current.fps, 1))) { data, info in
                    produced = true
                    key = key || info.isKeyframe
                    let sendStart = clock.nowNanos()
                    // Pacing: a frame's first 16 kB leave at once; the rest of a big frame (a
                    // 1080p keyframe is 70–90 kB) at 4 × the bit rate (at least 8 Mbit/s), so
                    // one burst does not overflow a router queue (or the relay's) and get lost.
                    let paceBitsPerSecond = Double(max(current.bitrate.bitsPerSecond * 4, 8_000_000))
                    var frameBytes = 0
                    packets += UInt32(packetizer.packetize(frame: data, rtpTimestamp: ts, into: packetBuffer) { packet in
                        if frameBytes > Self.unpacedBytes {
                            let due = sendStart + UInt64(Double(frameBytes - Self.unpacedBytes) * 8 / paceBitsPerSecond * 1e9)
                            let t = clock.nowNanos()
                            if t < due { sleepNanos(due - t) }
                        }
                        frameBytes += packet.count
                        octets += packet.count
                        let rc = rtpSocket.send(packet)
                        if rc != 0 {
                            errors += 1
                            if rc == ENOBUFS || rc == EAGAIN { busy += 1 }
                        }
                        history.withLock { _ = $0.store(packet, now: sendStart) }
                    })
                    sendNanos &+= clock.nowNanos() &- sendStart
                }
            } catch {
                events.emit(.error(.encodeFailure, "\(error)"))
                counters.withLock { $0.encodeErrors += 1 }
                encoder = nil  // re-created on the next frame, which will be a keyframe
                continue
            }
            let ms = Double(clock.nowNanos() &- started &- sendNanos) / 1e6
            bucket.add(bits: octets * 8)
            if isNew { policy.newPictureEncoded(at: now, bytes: produced ? octets : nil) } else { policy.repeatEncoded(at: now, bytes: produced ? octets : 0) }
            if key { throttle.keyframeSent(at: now) }
            counters.withLock { c in
                c.framesEncoded += 1
                if !isNew { c.repeatsEncoded += 1 }
                if c.encodeMillis.count < 512 { c.encodeMillis.append(ms) }
                if produced && c.sendMillis.count < 512 { c.sendMillis.append(Double(sendNanos) / 1e6) }
                if produced {
                    c.framesSent += 1
                    if key { c.keyframesSent += 1 }
                    c.packetsSent &+= packets
                    c.octetsSent &+= UInt32(truncatingIfNeeded: octets - Int(packets) * 12)
                    c.bytesSent += octets
                    c.lastRTPTimestamp = ts
                }
                c.sendErrors += errors
            }
            if produced && !firstSent {
                firstSent = true
                events.emit(FirstFrameSent(size: PixelSize(width: frame.width, height: frame.height), keyframe: key,
                                           latencyMillis: Double(clock.nowNanos() &- frame.timestampNanos) / 1e6))
            }
            if errors > 0 && now &- lastSendWarning > 5_000_000_000 {
                lastSendWarning = now
                if busy > 0 {
                    warnNetworkBusy("the local send queue is full: \(busy) of \(packets) packets of a frame dropped")
                } else {
                    events.emit(.warning(.sendFailed, "packets to \(config.destination) are refused (is a receiver listening?)"))
                }
            }
        }
        if let lastFrame { pool.recycle(lastFrame) }
    }

    func encoderConfig(size: PixelSize, _ s: LiveSettings) -> VP8EncoderConfig {
        var c = VP8EncoderConfig(size: size)
        c.fps = s.fps
        c.targetBitrateKbps = s.bitrate.kbps
        c.minBitrateKbps = s.minBitrate?.kbps
        c.keyframeIntervalSeconds = s.keyframeIntervalSeconds
        c.content = s.content
        // detail: one thread up to 1080p — libvpx's row sync spins, and on a busy 2-core
        // machine a second thread made encodes of a still slide take 250 ms instead of 15.
        // motion encodes every frame at full rate: two threads from 720p up, or libvpx's
        // real-time speed control (positive cpu-used) falls back to its fastest, blurriest modes.
        c.threads = size.area > 1920 * 1080 || (s.content == .motion && size.area >= 1280 * 720) ? 2 : 1
        // libvpx real-time speed: positive = adapt the speed so an encode takes about
        // (16 − N)/16 of the frame time (8 gives it half, as ffmpeg's usual -cpu-used 8 does);
        // negative = a fixed speed. The bench showed 10 costing 5 dB on motion at 1080p30.
        c.cpuUsed = config.cpuUsed ?? (s.content == .motion ? 8 : 10)
        return c
    }

    // MARK: - RTCP

    func rtcpLoop() {
        // Big enough for the relay's largest message (a `welcome` listing a big room).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        defer { buffer.deallocate() }
        var nextReport = clock.nowNanos()
        var reported = false
        var room = config.room.map { RoomClient(room: $0.name, name: $0.displayName, role: "presenter") }
        var mapper = RoomEventMapper(server: config.room?.server ?? "")
        if room != nil {
            room!.publish(publishedStreams(), now: nextReport)
            room!.start(now: nextReport)
            flushRoom(&room!, &mapper)
        }
        while isRunning {
            let now = clock.nowNanos()
            // The first report goes out with the first frame: receivers learn where to send
            // feedback (NACK, PLI) before they need it.
            let first = !reported && counters.withLock { $0.framesSent > 0 }
            if now >= nextReport || first {
                sendRTCP(bye: false)
                reported = reported || first
                nextReport = now + 1_000_000_000
            }
            let n = rtcpSocket.receive(into: buffer, timeoutMillis: reported ? 100 : 10)
            if n > 0 {
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                if room != nil {
                    let t = clock.nowNanos()
                    room!.heard(now: t)
                    if DatagramKind.of(bytes) == .control {
                        if let envelope = try? ControlEnvelope.parse(bytes, maxSize: RoomProtocol.maxRelayMessageSize) { room!.receive(envelope, now: t) }
                    } else {
                        handleRTCP(bytes)
                    }
                } else {
                    handleRTCP(bytes)
                }
            }
            if room != nil {
                room!.poll(now: clock.nowNanos())
                flushRoom(&room!, &mapper)
                if let reason = mapper.disconnected { stop(.disconnected, detail: "lost the relay \(config.destination): \(reason)") }
            }
        }
        if room != nil {
            room!.leave()
            flushRoom(&room!, &mapper)
        }
    }

    /// `warning` `network_busy`, at most once per 10 s.
    func warnNetworkBusy(_ message: String) {
        let now = clock.nowNanos()
        let due = networkBusyWarned.withLock { last -> Bool in
            guard last == 0 || now &- last >= 10_000_000_000 else { return false }
            last = now
            return true
        }
        if due { events.emit(.warning(.networkBusy, message)) }
    }

    /// Bytes of a frame sent without pacing.
    static let unpacedBytes = 16_000

    /// Sources smaller than this on a side are not encoded (`unsupported_resolution`).
    static let minimumSide = 16

    /// What this broadcast publishes in a room.
    func publishedStreams() -> [StreamInfo] {
        var streams = [StreamInfo(kind: .screen, ssrc: ssrc, pt: 96, codec: "VP8", clock: 90_000)]
        if let a = audio.withLock({ $0 }) {
            streams.append(StreamInfo(kind: .audio, ssrc: a.ssrc, pt: 111, codec: "opus", clock: 48_000, channels: 2))
        }
        return streams
    }

    /// Sends what the room client has to send and reports its events.
    func flushRoom(_ room: inout RoomClient, _ mapper: inout RoomEventMapper) {
        for message in room.takeOutgoing() { message.withUnsafeBytes { _ = rtcpSocket.send($0) } }
        for e in room.takeEvents() {
            for event in mapper.map(e, client: room) { events.emit(event) }
        }
        let viewers = mapper.viewers.count
        counters.withLock { $0.viewers = viewers }
    }

    func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { return }
        let now = clock.nowNanos()
        for packet in packets {
            switch packet {
            case .pli, .fir:
                keyframeRequested.store(true, ordering: .relaxed)
                mailbox.wake()
            case .nack(let nack) where nack.mediaSSRC == ssrc:
                // Resend from the history, each packet at most once per RTT and not while it is
                // still in flight (plain resend: receivers without RTX take the same sequence
                // number again).
                let rtt = rttNanos.load(ordering: .relaxed)
                let inFlight: UInt64 = rttMeasured.load(ordering: .relaxed) ? rtt / 2 : 0
                var resent = 0
                history.withLock { h in
                    nack.forEachSequenceNumber { seq in
                        if h.retransmit(sequenceNumber: seq, now: now, rtt: rtt, inFlight: inFlight, { rtpSocket.send($0) }) == .sent { resent += 1 }
                    }
                }
                counters.withLock { $0.nacksReceived += 1; $0.retransmitted += resent }
            case .extendedReport(let xr):
                guard let t = xr.referenceTime else { break }
                pendingRRTR.withLock { p in
                    p.removeAll { $0.ssrc == xr.ssrc }
                    if p.count < 8 { p.append((xr.ssrc, t.middle32, now)) }
                }
            case .receiverReport(let rr):
                for block in rr.reports where block.ssrc == ssrc {
                    let rtt = block.roundTripNanos(arrival: NTPTimestamp(unixNanos: clock.wallNanos()))
                    if let rtt {
                        rttNanos.store(max(rtt, 1_000_000), ordering: .relaxed)
                        rttMeasured.store(true, ordering: .relaxed)
                    }
                    counters.withLock { c in
                        c.receiverReports += 1
                        if let rtt { c.rttMillis = Double(rtt) / 1e6 }
                        c.fractionLost = Double(block.fractionLost) / 256
                        c.cumulativeLost = Int(block.cumulativeLost)
                    }
                    if block.fractionLost >= 13 {  // ≥ 5 % lost since the last report
                        let rtt = rtt.map { String(format: "%.0f ms", Double($0) / 1e6) } ?? "unknown"
                        warnNetworkBusy(String(format: "receivers report %.1f %% loss (RTT %@)", Double(block.fractionLost) / 2.56, rtt))
                    }
                }
            default:
                break
            }
        }
    }

    func sendRTCP(bye: Bool) {
        // Both sender reports read the same clocks, so receivers can line audio up with video.
        audio.withLock { $0 }?.sendReport(cname: config.cname, bye: bye)
        let c = counters.withLock { $0 }
        guard c.framesSent > 0 || bye else { return }
        let now = clock.nowNanos()
        // Receivers that sent an RRTR learn their RTT from this DLRR (RFC 3611 §4.5).
        let dlrr = pendingRRTR.withLock { p in
            defer { p.removeAll(keepingCapacity: true) }
            return p.map { ExtendedReport.DLRRItem(ssrc: $0.ssrc, lastReceiverReport: $0.lastReceiverReport,
                                                   delaySinceLastReceiverReport: NTPTimestamp.short(fromNanos: now &- $0.arrival)) }
        }
        var buffer = [UInt8](repeating: 0, count: 640)
        let n = buffer.withUnsafeMutableBytes { buf in
            RTCPPacket.buildSenderReport(ssrc: ssrc, ntp: NTPTimestamp(unixNanos: clock.wallNanos()),
                                         rtpTimestamp: rtpTimestamp(at: now), packetCount: c.packetsSent,
                                         octetCount: c.octetsSent, cname: config.cname, bye: bye, dlrr: dlrr, into: buf)
        }
        buffer.withUnsafeBytes { _ = rtcpSocket.send(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }
}
