import SRTP
import AudioIO
import Congestion
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import MediaCore
import Basics
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
import RoomEvents

/// Where pictures come from.
public enum VideoSource: Sendable, Equatable {
    /// An X11 display (nil: $DISPLAY), screen or region.
    case x11(display: String?, source: CaptureSourceSpec, drawCursor: Bool)
    /// Raw frames from a file or "-" (standard input), paced at `fps`.
    case raw(path: String, format: RawPixelFormat, size: PixelSize, fps: Double)
    /// A Wayland desktop's monitor (or a window) through the xdg-desktop-portal and PipeWire,
    /// the part `region` of it (nil: all); `ask`: show the dialog even when a restore token
    /// is kept.
    case portal(window: Bool, region: PixelRect?, drawCursor: Bool, ask: Bool)
}

extension VideoSource {
    /// What is shared, in words (the `started` event's `shared`).
    var words: String {
        switch self {
        case .x11(_, .screen, _): "the screen"
        case .x11(_, .region(let r), _): "region \(r.width)x\(r.height)+\(r.x)+\(r.y)"
        case .x11(_, .monitor(let name), _): "monitor \(name)"
        case .x11(_, .window(let w), _): "window '\(w.count > 32 ? String(w.prefix(31)) + "…" : w)'"
        case .raw(let path, _, _, _): path == "-" ? "frames from standard input" : "frames from \(path.split(separator: "/").last ?? "")"
        case .portal(let window, let region, _, _):
            (window ? "the window chosen in the desktop's dialog" : "the screen chosen in the desktop's dialog")
                + (region.map { ", region \($0.width)x\($0.height)+\($0.x)+\($0.y)" } ?? "")
        }
    }
}

extension AudioCaptureConfig.Program {
    /// The sound besides the microphone, in words (nil: none).
    var words: String? {
        switch self {
        case .none: nil
        case .application(let matcher): "the sound of \(matcher)"
        case .output(let sink): "everything \(sink.map { "sink \($0)" } ?? "the default sink") plays"
        }
    }
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
    /// `--record FILE`: what is sent, written into a WebM file here.
    public var recordPath: String?
    public var cname: String
    /// libvpx `cpu-used` (−16…16); nil: 8 for motion, 10 for detail.
    public var cpuUsed: Int?
    /// Audio (Opus from PulseAudio); nil: video only.
    public var audio: AudioSendConfig?
    /// Publish in a room through the relay at `destination` (one UDP flow for everything);
    /// nil: plain RTP to `destination` (video PORT/PORT+1, audio PORT+2/PORT+3).
    public var room: RoomSettings?
    /// The invitation links of the room this process hosts (`ctl invite`); nil when it hosts none.
    public var invitations: (any RoomInvitations)?
    /// Plain mode: protect every packet with SRTP (`--srtp`), fresh keys in the SDP's `a=crypto`.
    public var srtp = false
    /// Forward error correction (ULPFEC, `--fec`): by loss and round trip, always, or never.
    /// In the video stream in plain mode; in a room, a stream of its own (`fec`).
    public var fec: FECPolicy.Mode = .auto
    public init(source: VideoSource, destination: Endpoint, cname: String) {
        self.source = source
        self.destination = destination
        self.cname = cname
    }
}

/// Why a broadcast ended.
extension StopReason {
    /// The reason in words, for people.
    public var words: String {
        switch self {
        case .duration: "duration reached"
        case .requested: "interrupted"
        case .control: "ctl stop"
        case .endOfInput: "end of input"
        case .sourceGone: "source gone"
        case .failed: "error"
        case .disconnected: "no relay"
        case .unauthorized: "not admitted"
        case .untrusted: "relay not trusted"
        }
    }
}

public enum StopReason: String, Sendable {
    case duration, requested, control = "ctl_stop", endOfInput = "end_of_input", sourceGone = "source_gone", failed
    /// Lost the room relay and the retries failed.
    case disconnected
    /// The relay refused to admit us (the token).
    case unauthorized
    /// The relay is not the one pinned (`--fingerprint`).
    case untrusted = "untrusted_relay"
}

/// Counters the media threads publish once per frame; read by stats and RTCP.
struct SenderCounters: Sendable {
    var framesCaptured = 0
    var framesEncoded = 0
    var framesSent = 0
    var keyframesSent = 0
    var repeatsEncoded = 0
    /// The quantizers of the frames sent (libvpx's 0–63), summed, and how many were counted.
    var quantizerSum = 0
    var quantizerFrames = 0
    var packetsSent: UInt32 = 0
    var octetsSent: UInt32 = 0
    var bytesSent = 0
    var sendErrors = 0
    var encodeErrors = 0
    var retransmitted = 0
    /// FEC packets sent and their bytes (counted in the packets and bytes sent too).
    var fecPackets = 0
    var fecBytes = 0
    /// Resends asked for and refused by the resend budget.
    var resendsOverBudget = 0
    var nacksReceived = 0
    var rttMillis: Double?
    var viewers = 0
    var fractionLost: Double?
    var cumulativeLost: Int?
    var receiverReports = 0
    /// Transport-wide feedback packets taken (congestion control), probes sent and their bytes.
    var transportFeedbacks = 0
    var probesSent = 0
    var probeBytes = 0
    /// Malformed RTCP packets and room messages, dropped.
    var packetsRejected = 0
    var lastRTPTimestamp: UInt32 = 0
    var outputSize = PixelSize(width: 0, height: 0)
    var encodeMillis: [Double] = []
    var captureMillis: [Double] = []
    var convertMillis: [Double] = []
    var sendMillis: [Double] = []
}

/// The video sender: capture thread → latest-frame mailbox → encode thread → RTP over UDP,
/// plus an RTCP thread (sender reports with CNAME every second, BYE at the end, PLI/FIR in).
public final class Broadcaster: Sendable {
    // Everything is immutable or guarded (Mutex, Atomic), so the compiler checks `Sendable`;
    // each thread's own state (encoder, capturer, room client) lives in its loop.
    public let config: BroadcastConfig
    let events: EventSink
    let logger: Logger
    let clock: MediaClock
    let mailbox = LatestFrameMailbox<VideoFrame>()
    /// Encoded frames, encode thread → send thread (``SendStage``).
    let sendQueue = EncodedFrameQueue()
    /// The picture the encoder repeats: the encode thread's, lent to the capture thread while
    /// the encoder is idle (``lend()``), so on a still screen a change is converted into it in
    /// place rather than into a second frame (one resident picture instead of two).
    let held = Mutex(HeldFrame())
    let pool: FramePool
    let rtpSocket: UDPSocket
    let rtcpSocket: UDPSocket
    /// `--srtp`: the video flow's key (its RTP and RTCP both ways) and the audio's, also in the SDP.
    let videoKey: SDESCrypto?
    let audioKey: SDESCrypto?
    /// What protects the packets sent: `--srtp`'s flow, or in a room the hop's SRTP (keyed by
    /// its DTLS handshake, on the RTCP thread); nil: plain RTP.
    let srtp: (any PacketProtection)?
    /// In a room: the hop's SRTP, which the room link on the RTCP thread keys.
    let hopMedia: KeyedLater?
    let ssrc: UInt32
    /// In a room, the SSRC of the screen's FEC stream (its own sequence numbers).
    let fecSSRC: UInt32
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
    /// `--record`: set by `run` before the media threads start, which read it once.
    let recording = Mutex<SenderRecording?>(nil)
    /// The capture thread's verdicts on the sources `ctl set` asks for.
    let sourceSwitches = SourceSwitches()
    /// Sent RTP packets, for NACKs (written by the encode thread, read by the RTCP thread).
    /// Kept 3 s: on a still screen the next packet after a burst is the keep-alive frame, up to
    /// 1 s later (--min-fps 1), and only then does a viewer see that the burst's last frame was
    /// lost; its NACK comes after that second plus a round trip. Up to 1024 packets and
    /// ``historyBytes(for:)`` of them: on a still screen the packets are few and kept long.
    let history: Mutex<PacketHistory>
    /// What receivers' RTCP told us (round trip, pending RRTRs): the RTCP thread's, and the
    /// final BYE's.
    let feedback: Mutex<SenderFeedback>
    let audio = Mutex<AudioSender?>(nil)
    /// When the last `network_busy` warning went out (any thread may warn; once per 10 s).
    let networkBusyWarned = Mutex<UInt64>(0)
    /// Congestion control from the receiver's (or the relay's) transport feedback: the encode
    /// thread stamps each video packet, the RTCP thread takes the feedback. Without feedback
    /// (ffmpeg, GStreamer) the target stays `--bitrate`.
    let congestion: Mutex<SenderCongestion>?
    /// What congestion control allows the encoder (bit/s); 0 until a feedback came.
    let networkTarget = Atomic<Int>(0)
    /// `motion` under congestion control: the step of ``ResolutionAdapter`` the encode thread
    /// chose (0: full size); the capture thread scales to it.
    let scaleLevel = Atomic<Int>(0)
    /// Bits resent lately (the RTCP thread's), drained at ``resendRate``.
    let resendBudget = Mutex(RateBucket())

    /// Bytes of sent packets kept for NACKs: two seconds at `bitrate`, at least 512 KiB (a sharp
    /// 1080p keyframe and what follows it). 1024 full-size slots took 1.5 MB at any rate.
    static func historyBytes(for bitrate: Bitrate) -> Int {
        max(512 << 10, min(bitrate.bitsPerSecond / 4, 16 << 20))
    }

    public init(config: BroadcastConfig, events: EventSink, logger: Logger, clock: MediaClock = SystemClock()) throws {
        self.config = config
        history = Mutex(PacketHistory(capacity: 1024, maxPacketSize: 1500, maxAge: 3_000_000_000,
                                      byteCapacity: Self.historyBytes(for: config.bitrate)))
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
        hopMedia = config.room == nil ? nil : KeyedLater()
        if config.srtp {
            let video = SDESCrypto.random(), audio = SDESCrypto.random()
            videoKey = video
            audioKey = audio
            srtp = try SRTPFlow(masterKey: video.keySalt)
        } else if let hop = hopMedia {
            videoKey = nil
            audioKey = nil
            srtp = hop
        } else {
            videoKey = nil
            audioKey = nil
            srtp = nil
        }
        var rng = SystemRandomNumberGenerator()
        ssrc = rng.next()
        let fec: UInt32 = rng.next()
        fecSSRC = fec == ssrc || fec == 0 ? ssrc ^ 0x5A5A_5A5A : fec
        rtpBase = rng.next()
        startNanos = clock.nowNanos()
        // On a still screen a recycled frame's pixels are given back (one resident picture).
        pool = FramePool(size: PixelSize(width: 2, height: 2), capacity: 4, clock: clock)
        live = Mutex(LiveSettings(config: config))
        feedback = Mutex(SenderFeedback(ssrc: ssrc))
        // Plain mode (the SDP names the extension: a `watch` answers with feedback) and in a
        // room (the relay answers).
        congestion = Mutex(SenderCongestion(bitrate: config.bitrate, minBitrate: config.minBitrate,
                                            firstSequence: UInt16.random(in: 0...UInt16.max),
                                            fec: config.fec))
    }

    /// Asks the broadcast to stop (from a signal handler thread or a timer).
    public func stop(_ reason: StopReason = .requested, detail: String = "") {
        stopState.withLock { if $0 == nil { $0 = (reason, detail) } }
        running.store(false, ordering: .sequentiallyConsistent)
        mailbox.close()
        sendQueue.close()
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
        let recording = config.recordPath.map { SenderRecording(path: $0, audio: audioSender != nil, events: events) }
        self.recording.withLock { $0 = recording }
        if let sdpPath = config.sdpPath { try writeSDP(to: sdpPath, audioPort: audioSender?.port) }
        // The source is opened on the capture thread's behalf here, so errors surface at once.
        let producer: () -> Void
        do {
            producer = try makeProducer()
        } catch {
            audioSender?.stopCapture()
            throw error
        }
        var control: ControlServer?
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
            audio: audioSender.map {
                .init(ssrc: $0.ssrc, port: $0.port, bitrateKbps: $0.config.bitrate.kbps,
                      microphone: $0.microphone.map { ($0.description, $0.name) }, program: $0.config.capture.program.words)
            },
            shared: config.source.words))
        spawn("screenshare-capture", producer)
        let packetizer = makePacketizer()
        spawn("screenshare-encode") { [self] in encodeLoop(sizing: packetizer) }
        spawn("screenshare-send") { [self] in SendStage(broadcaster: self, queue: sendQueue, packetizer: packetizer).run() }
        spawn("screenshare-rtcp") { [self] in rtcpLoop() }
        if let audioSender {
            spawn("screenshare-audio") { [self] in audioSender.run(while: { isRunning }, paused: { settings.paused }, recording: recording) }
        }

        let loopStart = clock.nowNanos()
        let deadline = config.durationSeconds.map { loopStart + UInt64($0 * 1e9) }
        var nextStats = loopStart + 1_000_000_000
        var statistics = SenderStatistics(start: counters.withLock { $0 }, audio: audioSender?.counters.withLock { $0 })
        while isRunning {
            clock.sleep(untilNanos: min(nextStats, deadline ?? .max, clock.nowNanos() + 50_000_000))
            let now = clock.nowNanos()
            if let deadline, now >= deadline { stop(.duration); break }
            if now >= nextStats {
                nextStats += 1_000_000_000
                let second = counters.withLock { c -> SenderCounters in
                    let copy = c
                    c.encodeMillis.removeAll(keepingCapacity: true)
                    c.captureMillis.removeAll(keepingCapacity: true)
                    c.convertMillis.removeAll(keepingCapacity: true)
                    c.sendMillis.removeAll(keepingCapacity: true)
                    return copy
                }
                let report = statistics.second(second, audio: audioSender?.counters.withLock { $0 },
                                               targetKbps: encoderTarget.kbps,
                                               estimateKbps: congestion?.withLock { $0.estimate.map { Int($0 / 1000) } },
                                               fecProtection: congestion?.withLock { $0.fec.protection } ?? 0,
                                               inRoom: config.room != nil, now: now)
                events.emit(report.stats)
                if let message = report.networkBusy { warnNetworkBusy(message) }
                if let overshoot = report.overshoot { events.emit(overshoot) }
            }
        }
        mailbox.close()
        sendQueue.close()
        done.wait()
        control?.close()
        // The media threads are done: the recording gets its index and duration.
        recording?.finish()
        // A BYE lost on a lossy path leaves the receivers waiting for frames that will not
        // come (a freeze, then "lost the sender"): it goes out three times, back to back,
        // and the receivers take it once.
        for _ in 0..<3 { sendRTCP(bye: true) }
        let c = counters.withLock { $0 }
        let (reason, detail) = stopState.withLock { $0 } ?? (.requested, "")
        let audioCounters = audioSender?.counters.withLock { $0 }
        let stopped = SenderStopped(
            reason: reason, framesCaptured: c.framesCaptured, framesEncoded: c.framesEncoded, framesSent: c.framesSent,
            keyframesSent: c.keyframesSent, packetsSent: Int(c.packetsSent), bytesSent: c.bytesSent,
            sendErrors: c.sendErrors, encodeErrors: c.encodeErrors, nacksReceived: c.nacksReceived,
            retransmitted: c.retransmitted, receiverReports: c.receiverReports,
            packetsRejected: c.packetsRejected, rttMillis: c.rttMillis,
            packetsLost: c.cumulativeLost, size: c.outputSize,
            durationSeconds: Double(clock.nowNanos() &- startNanos) / 1e9, fecPackets: c.fecPackets, fecBytes: c.fecBytes,
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

    /// Starts a thread (named for the kernel: `startThread`) that `done` waits for.
    func spawn(_ name: String, _ body: sending @escaping () -> Void) {
        done.enter()
        startThread(named: name) { [done] in
            body()
            done.leave()
        }
    }

    // MARK: - Audio

    /// Connects to PulseAudio. Unavailable audio is a warning (video only) unless it was required.
    func makeAudioSender() throws -> AudioSender? {
        guard let audioConfig = config.audio, audioConfig.capture.hasSources else { return nil }
        do {
            return try AudioSender(config: audioConfig, destination: config.destination, shared: config.room == nil ? nil : rtpSocket,
                                   srtp: config.room != nil ? srtp : audioKey.map { try SRTPFlow(masterKey: $0.keySalt) }, clock: clock, events: events, logger: logger)
        } catch let error as AudioError where !audioConfig.required {
            events.emit(.warning(.audioUnavailable, "audio: \(error); sending video only (use --no-audio to silence this)"))
            return nil
        }
    }

    // MARK: - SDP

    /// With `--srtp` the file holds the keys: it is made readable by its owner only (0600) before
    /// anything is written into it.
    func writeSDP(to path: String, audioPort: UInt16?) throws {
        var description = SessionDescription(destination: config.destination.host, videoPort: config.destination.port,
                                             framerate: config.fps, audioPort: audioPort)
        if congestion != nil { description.transportSequenceID = TransportWideSequence.defaultID }
        description.videoCrypto = videoKey
        description.audioCrypto = audioPort == nil ? nil : audioKey
        let sdp = Array(description.render().utf8)
        let tmp = path + ".tmp"
        unlink(tmp)
        // With --srtp it holds the keys: nobody else may read it.
        try PrivateFile.create(tmp, contents: sdp, mode: config.srtp ? 0o600 : 0o644, what: "--sdp")
        guard rename(tmp, path) == 0 else {
            let reason = SystemError.current
            unlink(tmp)
            throw FileError("--sdp '\(path)': cannot move \(tmp) into place: \(reason)")
        }
    }
}

/// The encoder's picture and who may touch it (``Broadcaster/held``).
struct HeldFrame {
    var frame: VideoFrame?
    /// The encode thread is deciding about or encoding `frame`: it is not lent.
    var encoding = false
    /// What changed in `frame` was encoded as a new picture (its marks are spent).
    var encodedAsNew = true
    /// `frame` is lent to the capture thread, until it comes back through the mailbox.
    var lent = false
}
