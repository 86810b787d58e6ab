import SRTP
import AudioIO
import FoundationEssentials
import Glibc
import Logging
import MediaCore
import Basics
import OpusCodec
import RTCP
import RTP
import Synchronization
import Events
import Transport
import RoomEvents

/// Audio settings of a broadcast.
public struct AudioSendConfig: Sendable, Equatable {
    public var capture: AudioCaptureConfig
    /// Whether audio was asked for explicitly (an app, an output or a named mic): then an
    /// unreachable PulseAudio is an error, not a warning.
    public var required = false
    public var bitrate = Bitrate(bitsPerSecond: 64_000)
    public init(capture: AudioCaptureConfig) { self.capture = capture }
}

/// Counters the audio thread publishes once per frame.
struct AudioCounters: Sendable {
    var framesEncoded = 0
    var dtxFrames = 0
    var silentFrames = 0
    var packetsSent: UInt32 = 0
    var octetsSent: UInt32 = 0
    var bytesSent = 0
    var sendErrors = 0
    var encodeErrors = 0
    var threadCPUNanos: UInt64 = 0
    var mixer = AudioMixer.Counters()
    /// Capture-to-send latency of each sent frame (from the capture of its oldest sample).
    var latency = LatencyHistogram()
}

/// Latencies in 0.5 ms bins from 0 to 200 ms (the last bin holds everything above). Fixed
/// size: adding never allocates (a snapshot taken for stats makes the next add copy it once).
struct LatencyHistogram: Sendable {
    static let binMillis = 0.5
    private(set) var bins = [UInt32](repeating: 0, count: 1000)
    private(set) var count = 0

    mutating func add(millis: Double) {
        let i = min(max(Int(millis / Self.binMillis), 0), bins.count - 1)
        bins[i] &+= 1
        count += 1
    }

    /// The latencies added since `earlier` (a snapshot of this histogram).
    func since(_ earlier: LatencyHistogram) -> LatencyHistogram {
        var d = self
        for i in bins.indices { d.bins[i] = bins[i] &- earlier.bins[i] }
        d.count = count - earlier.count
        return d
    }

    /// The q-quantile in milliseconds (the upper edge of its bin); nil when empty.
    func quantile(_ q: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = max(1, Int((Double(count) * q).rounded(.up)))
        var seen = 0
        for (i, n) in bins.enumerated() {
            seen += Int(n)
            if seen >= rank { return Double(i + 1) * Self.binMillis }
        }
        return Double(bins.count) * Self.binMillis
    }
}

/// The audio sender: PulseAudio → mixer → (audio thread, every 20 ms) Opus → RTP (RFC 7587) to
/// PORT+2, and sender reports to PORT+3 on the same wall clock as the video's, for lip sync.
///
/// (`@unchecked`: the encoder and the packetizer are the audio thread's alone, made before it
/// starts; what other threads read — `counters`, `origin` — is a Mutex or an atomic, the
/// sockets and the SRTP flow are Sendable, and the capture guards itself with its mainloop lock.)
final class AudioSender: @unchecked Sendable {
    // Immutable after init, except: `counters` (its Mutex), `encoder`/`packetizer`/buffers
    // (touched by the audio thread only), `capture` (thread-safe itself).
    let config: AudioSendConfig
    private let clock: MediaClock
    private let events: EventSink
    private let logger: Logger
    private let mixer = SharedMixer(AudioMixer(inputs: MixerSlot.count))
    private let capture: PulseCapture
    /// The microphone captured (its PulseAudio description and name), if any.
    var microphone: AudioDevice? { capture.microphone }
    private let encoder: OpusFrameEncoder
    private var packetizer: OpusPacketizer
    private let rtpSocket: UDPSocket
    private let rtcpSocket: UDPSocket
    /// `--srtp`: protects what goes out.
    private let srtp: (any PacketProtection)?
    let ssrc: UInt32
    private let rtpBase: UInt32
    /// When the first sample of frame 0 was captured (monotonic clock); RTP time counts from it.
    private let origin = Atomic<UInt64>(0)
    let counters = Mutex(AudioCounters())
    let port: UInt16

    /// Audio lags the tick by about a mixer frame plus its jitter margin and a PulseAudio fragment.
    private static let captureLatencyNanos: UInt64 = 40_000_000

    /// - Parameter shared: in a room, the one socket to the relay that carries everything;
    ///   nil: plain mode, PORT+2 and PORT+3 of `destination`.
    ///   - srtp: plain mode with `--srtp`: the audio flow's key; in a room, the hop's SRTP.
    init(config: AudioSendConfig, destination: Endpoint, shared: UDPSocket? = nil, srtp: (any PacketProtection)? = nil, clock: MediaClock, events: EventSink,
         logger: Logger) throws {
        self.config = config
        self.srtp = srtp
        self.clock = clock
        self.events = events
        self.logger = logger
        port = shared == nil ? destination.port + 2 : destination.port
        var rng = SystemRandomNumberGenerator()
        ssrc = rng.next()
        rtpBase = rng.next()
        var opus = OpusEncoderConfig()
        opus.bitrate = config.bitrate.bitsPerSecond
        encoder = try OpusFrameEncoder(config: opus)
        packetizer = OpusPacketizer(ssrc: ssrc, initialSequence: UInt16.random(in: 0...UInt16.max))
        if let shared {
            rtpSocket = shared
            rtcpSocket = shared
        } else {
            rtpSocket = try UDPSocket(connectTo: Endpoint(host: destination.host, port: port))
            rtcpSocket = try UDPSocket(connectTo: Endpoint(host: destination.host, port: port + 1), localPort: rtpSocket.localPort &+ 1)
        }
        let events = events
        capture = try PulseCapture(config: config.capture, mixer: mixer, logger: logger, clock: clock) { event in
            events.emit(AudioSender.broadcastEvent(event))
        }
    }

    static func broadcastEvent(_ e: AudioCaptureEvent) -> any BroadcastEvent {
        switch e {
        case .appAttached(let index, let name, let binary, let pid):
            return AudioAppAttached(sinkInput: index, app: name, binary: binary, pid: pid)
        case .appDetached(let index):
            return AudioAppDetached(sinkInput: index)
        case .sourceLost(let reason):
            return WarningEvent(.audioSourceLost, reason + "; sending silence, reconnecting")
        case .reconnecting(let attempt, let delay):
            return AudioReconnecting(attempt: attempt, retryInMillis: delay)
        case .resumed:
            return AudioResumed()
        case .streamFailed(let what, let reason):
            return WarningEvent(.audioStreamFailed, "\(what): \(reason)")
        }
    }

    /// The audio thread: a frame every 20 ms, on an absolute schedule, until `isRunning` fails.
    /// While `paused` answers true, silence is sent (timestamps stay continuous).
    /// - Parameter recording: `start --record`'s file, which gets every Opus packet sent.
    func run(while isRunning: () -> Bool, paused: () -> Bool = { false }, recording: SenderRecording? = nil) {
        let period: UInt64 = 20_000_000
        let pcm = UnsafeMutableBufferPointer<Float>.allocate(capacity: AudioMixer.frameSamples)
        let opus = UnsafeMutableRawBufferPointer.allocate(byteCount: OpusFrameEncoder.maxPacketSize, alignment: 16)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: RTPHeader.fixedSize + OpusFrameEncoder.maxPacketSize, alignment: 16)
        defer { pcm.deallocate(); opus.deallocate(); packet.deallocate() }
        var next = clock.nowNanos() + period
        origin.store(next - period - Self.captureLatencyNanos, ordering: .releasing)
        var frameIndex: UInt64 = 0
        var lastSendWarning: UInt64 = 0
        while isRunning() {
            var now = clock.nowNanos()
            while now < next && isRunning() {
                clock.sleep(untilNanos: next)
                now = clock.nowNanos()
            }
            // Fell far behind (the machine stalled): skip the lost time rather than burst.
            if now > next + 10 * period {
                let skip = (now - next) / period
                frameIndex += skip
                next += skip * period
                packetizer.skipped()
            }
            capture.supervise(now: now)
            var (heard, mixCounters, captured) = mixer.state.withLock { ($0.mix(into: pcm), $0.counters, $0.lastFrameCaptureNanos) }
            if paused() {
                pcm.update(repeating: 0)
                heard = false
                captured = nil
            }
            let ts = rtpBase &+ UInt32(truncatingIfNeeded: frameIndex &* UInt64(AudioMixer.frameLength))
            frameIndex += 1
            next += period
            var sent = 0, error: Int32 = 0, encodeFailed = false
            do {
                let n = try encoder.encode(UnsafeBufferPointer(pcm), into: opus)
                if n <= 2 {
                    packetizer.skipped()  // DTX: nothing worth sending (RFC 7587 §3.1.3)
                } else if let p = packetizer.packetize(opus: UnsafeRawBufferPointer(rebasing: opus[0..<n]), rtpTimestamp: ts, into: packet) {
                    // On the capture clock, as the video's: 20 ms a frame from the first sample.
                    recording?.audio(UnsafeRawBufferPointer(rebasing: opus[0..<n]),
                                     timestampNanos: origin.load(ordering: .acquiring) &+ (frameIndex - 1) &* 20_000_000)
                    error = srtp.map { flow in flow.protect(p) { rtpSocket.send($0) } ?? (flow.isKeyed ? EINVAL : 0) } ?? rtpSocket.send(p)
                    sent = n
                }
            } catch {
                encodeFailed = true
            }
            let sentAt = clock.nowNanos()
            let latencyMillis = captured.flatMap { sent > 0 && error == 0 && sentAt > $0 ? Double(sentAt - $0) / 1e6 : nil }
            counters.withLock { c in
                if let latencyMillis { c.latency.add(millis: latencyMillis) }
                c.framesEncoded += 1
                c.mixer = mixCounters
                if !heard { c.silentFrames += 1 }
                if sent == 0 && !encodeFailed { c.dtxFrames += 1 }
                if encodeFailed { c.encodeErrors += 1 }
                if sent > 0 {
                    c.packetsSent &+= 1
                    c.octetsSent &+= UInt32(sent)
                    c.bytesSent += sent + RTPHeader.fixedSize
                }
                if error != 0 { c.sendErrors += 1 }
            }
            if error != 0 && now &- lastSendWarning > 5_000_000_000 {
                lastSendWarning = now
                events.emit(.warning(.sendFailed, "audio packets to \(rtpSocket.remote) are refused (is a receiver listening?)"))
            }
        }
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        let cpu = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        counters.withLock { $0.threadCPUNanos = cpu }
        capture.stop()
    }

    /// Sends an SR + SDES CNAME (+ BYE) for the audio SSRC to PORT+3.
    func sendReport(cname: String, bye: Bool) {
        let c = counters.withLock { $0 }
        guard c.framesEncoded > 0 || bye else { return }
        let now = clock.nowNanos()
        let start = origin.load(ordering: .acquiring)
        let ticks = now > start ? (now - start) / 1_000 * 48 / 1_000 : 0  // 48 kHz
        var buffer = [UInt8](repeating: 0, count: 512)
        let n = buffer.withUnsafeMutableBytes { buf in
            RTCPPacket.buildSenderReport(ssrc: ssrc, ntp: NTPTimestamp(unixNanos: clock.wallNanos()),
                                         rtpTimestamp: rtpBase &+ UInt32(truncatingIfNeeded: ticks), packetCount: c.packetsSent,
                                         octetCount: c.octetsSent, cname: cname, bye: bye, into: buf)
        }
        buffer.withUnsafeBytes { b in
            let report = UnsafeRawBufferPointer(rebasing: b[0..<n])
            if let srtp { _ = srtp.protect(report) { rtcpSocket.send($0) } } else { _ = rtcpSocket.send(report) }
        }
    }

    /// Stops capturing (idempotent; the audio thread also does it when it ends).
    func stopCapture() { capture.stop() }
}
