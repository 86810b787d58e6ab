import AudioIO
import Foundation
import Logging
import MediaCore
import RTCP
import RTP
import RTPSession
import Recording
import Room
import Synchronization
import VP8Codec
import VideoOutput
#if canImport(Glibc)
import Glibc
import Events
import Transport
#endif

/// Everything `screenshare watch --sdp` needs.
public struct ViewerConfig: Sendable {
    public var description: ReceiveDescription
    /// Show the pictures in an X11 window; false: headless.
    public var window = true
    public var display: String?
    public var recordPath: String?
    public var durationSeconds: Double?
    public var cname: String
    /// Write one MD5 per decoded picture here (ffmpeg `framemd5` layout).
    public var framesMD5Path: String?
    /// Play the audio through PulseAudio (when the stream has audio).
    public var audioPlayback = true
    /// The PulseAudio sink to play to (nil: the default one).
    public var audioSink: String?
    /// Line the played audio up with the shown pictures (lip sync) from the sender reports.
    public var avSync = true
    /// Join a room through the relay at `server` instead of listening on the SDP's ports.
    public var room: RoomSettings?
    public var server: Endpoint?
    public init(description: ReceiveDescription, cname: String) {
        self.description = description
        self.cname = cname
    }

    /// A viewer of a room: what it receives is learnt from the room (VP8 and Opus).
    public init(room: RoomSettings, server: Endpoint, cname: String) {
        description = ReceiveDescription(connectionAddress: nil, media: [
            .init(kind: "video", port: 0, payloadType: 96, encoding: "VP8", clockRate: 90_000, channels: nil, rtcpPort: 0),
            .init(kind: "audio", port: 0, payloadType: 111, encoding: "opus", clockRate: 48_000, channels: 2, rtcpPort: 0),
        ])
        self.room = room
        self.server = server
        self.cname = cname
    }
}

/// Why the viewer ended.
public enum ViewerStopReason: String, Sendable {
    case duration, requested, windowClosed = "window_closed", failed
    /// Lost the room relay and the retries failed.
    case disconnected
}

/// The plain-RTP viewer: receives the VP8 stream an SDP describes, sends RTCP back to the
/// sender (receiver reports, generic NACK for lost packets, PLI when a frame cannot be
/// repaired), reassembles and decodes the frames through an adaptive jitter buffer, shows them
/// (X11 window) and/or records them (WebM), and reports statistics as events.
///
/// One thread runs everything (`run()`): a poll loop on the RTP and RTCP sockets whose
/// timeout is the next timer (playout, NACK retry, report). Pure state machines from
/// RTPSession do the protocol work; time is the injected clock.
public final class Viewer: @unchecked Sendable {
    // Everything but `running`/`stopReason` is touched by the run() thread only.
    public let config: ViewerConfig
    private let events: EventSink
    private let logger: Logger
    private let clock: MediaClock
    private let running = Atomic<Bool>(true)
    private let stopReason = Mutex<ViewerStopReason?>(nil)
    private var media: ReceiveDescription.Media
    private let rtp: UDPListener
    /// Plain mode's RTCP port; nil in a room (everything shares `rtp`'s flow to the relay).
    private let rtcp: UDPListener?
    private let relay: sockaddr_in?
    private var room: RoomClient?
    private var roomEvents: RoomEventMapper
    /// In a room: the screen stream we subscribed to (other SSRCs are not ours to show).
    private var expectedSSRC: UInt32?
    /// The audio stream, when there is one (Opus); its ports in plain mode.
    private var audio: AudioReceiver?
    private let audioRTP: UDPListener?
    private let audioRTCP: UDPListener?
    private var audioSSRC: UInt32?
    private var recordOriginArrival: UInt64?
    private var audioPlaybackWarning: String?
    /// In a room: every stream of the publisher we receive; packets of other SSRCs are counted
    /// as foreign (the relay should never send them).
    private var subscribedSSRCs: Set<UInt32> = []
    private var packetsForeign = 0
    private var subscribedAt: UInt64?
    private let ssrc: UInt32 = UInt32.random(in: 1...UInt32.max)
    private let startNanos: UInt64

    private var window: X11VideoWindow?
    private var recorder: WebMRecorder?
    private let checksums: FrameChecksums?
    private let decoder: VP8Decoder
    private var senderSSRC: UInt32?
    private var lastPacketNanos: UInt64 = 0
    private var rtpSource = sockaddr_in()
    private var rtcpPeer: sockaddr_in?
    private var receive: ReceiveStatistics?
    private var nack = Viewer.makeNackGenerator()
    private var assembler = VP8FrameAssembler()
    private var jitter = JitterBuffer()
    /// Lip sync: measures how late the sound is heard and the pictures are shown, and delays
    /// the earlier of the two (applied once a second, with the stats).
    private var sync = AVSync()
    private var stats: ReceiverStats
    private var nackList: [UInt16] = []
    private var lastPLI: UInt64 = 0
    private var nextReport: UInt64 = 0
    private var recordOrigin: Int64?
    private var recordUnwrapper = TimestampUnwrapper()
    private var pictureSize = PixelSize(width: 0, height: 0)
    private var decodeErrors = 0
    private var firstFrameReported = false
    /// Big enough for the relay's largest message (a `welcome` listing a big room).
    private var packetBuffer = [UInt8](repeating: 0, count: 65536)
    private var rtcpBuffer = [UInt8](repeating: 0, count: 1500)

    /// - Throws: `NetworkError` when a port cannot be bound, `VideoOutputError` when the window
    ///   cannot be opened, `RecordingError`, or `FileError` when the SDP has no VP8 video.
    public init(config: ViewerConfig, events: EventSink, logger: Logger, clock: MediaClock = SystemClock()) throws {
        self.config = config
        self.events = events
        self.logger = logger
        self.clock = clock
        guard let video = config.description.video else { throw FileError("the SDP has no m=video section") }
        guard video.encoding.uppercased() == "VP8" else {
            throw FileError("the SDP's video is \(video.encoding.isEmpty ? "of unknown encoding" : video.encoding); only VP8 is supported")
        }
        media = video
        var audioPorts: (UInt16, UInt16)?
        if let a = config.description.audio, a.encoding.lowercased() == "opus" {
            var playback: PulsePlayback?
            if config.audioPlayback {
                do { playback = try PulsePlayback(sink: config.audioSink) } catch {
                    audioPlaybackWarning = "\(error); the audio is received (and recorded) but not played"
                }
            }
            audio = try AudioReceiver(payloadType: a.payloadType, playback: playback, logger: logger)
            if config.room == nil { audioPorts = (a.port, a.rtcpPort) }
        }
        if let (p, r) = audioPorts {
            audioRTP = try UDPListener(port: p)
            audioRTCP = try UDPListener(port: r)
        } else {
            audioRTP = nil
            audioRTCP = nil
        }
        if let roomSettings = config.room, let server = config.server {
            rtp = try UDPListener(port: 0)
            rtcp = nil
            relay = try UDPListener.resolve(server.host, port: server.port)
            room = RoomClient(room: roomSettings.name, name: roomSettings.displayName, role: "viewer", subscribe: roomSettings.target)
            roomEvents = RoomEventMapper(server: roomSettings.server)
        } else {
            rtp = try UDPListener(port: video.port)
            rtcp = try UDPListener(port: video.rtcpPort)
            relay = nil
            roomEvents = RoomEventMapper(server: "")
        }
        decoder = try VP8Decoder()
        checksums = try config.framesMD5Path.map { try FrameChecksums(path: $0) }
        startNanos = clock.nowNanos()
        stats = ReceiverStats(clockRate: UInt32(max(video.clockRate, 1)), startedAt: startNanos)
        nackList.reserveCapacity(512)
        if config.window {
            let title = config.room.map { "screenshare watch — room \($0.name)" } ?? "screenshare watch — udp/\(video.port)"
            window = try X11VideoWindow(display: config.display, title: title,
                                        size: PixelSize(width: 1280, height: 720))
        }
    }

    /// Asks the viewer to stop (from a signal handler or a timer).
    public func stop(_ reason: ViewerStopReason = .requested) {
        stopReason.withLock { if $0 == nil { $0 = reason } }
        running.store(false, ordering: .relaxed)
    }

    private var isRunning: Bool { running.load(ordering: .relaxed) }

    /// Runs until stopped; returns why, and the summary (also sent as the `stopped` event).
    public func run() -> (reason: ViewerStopReason, summary: [String: JSONValue]) {
        var audioStarted: ViewerStarted.Audio?
        if let a = config.description.audio, audio != nil {
            audioStarted = ViewerStarted.Audio(port: config.room == nil ? a.port : nil, playback: audio?.isPlaying ?? false)
        }
        events.emit(ViewerStarted(rtpPort: rtp.port, rtcpPort: rtcp?.port ?? rtp.port, payloadType: media.payloadType,
                                  window: window != nil, record: config.recordPath, room: config.room, audio: audioStarted))
        if let w = audioPlaybackWarning {
            events.emit(.warning(.audioPlaybackUnavailable, w))
        }
        if room != nil {
            room!.start(now: startNanos)
            flushRoom()
        }
        let deadline = config.durationSeconds.map { startNanos + UInt64($0 * 1e9) }
        var nextStats = startNanos + 1_000_000_000
        var previous = snapshot()
        nextReport = startNanos + 1_000_000_000
        while isRunning {
            let now = clock.nowNanos()
            if let deadline, now >= deadline { stop(.duration); break }
            var wake = min(nextStats, nextReport, now + 50_000_000)
            if let d = deadline { wake = min(wake, d) }
            if let j = jitter.nextWakeup { wake = min(wake, j) }
            if let n = nack.nextWakeup(rtt: nackRTT) { wake = min(wake, n) }
            if let r = room?.nextWakeup { wake = min(wake, max(r, now)) }
            if let a = audio?.nextWakeup { wake = min(wake, max(a, now)) }
            var fds = [pollfd(fd: rtp.fd, events: Int16(POLLIN), revents: 0), pollfd(fd: rtcp?.fd ?? -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: audioRTP?.fd ?? -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: audioRTCP?.fd ?? -1, events: Int16(POLLIN), revents: 0)]
            let ms = wake > now ? Int32(min((wake - now + 999_999) / 1_000_000, 50)) : 0
            _ = poll(&fds, 4, ms)
            if fds[0].revents & Int16(POLLIN) != 0 { drainRTP() }
            if fds[1].revents & Int16(POLLIN) != 0 { drainRTCP() }
            if fds[2].revents & Int16(POLLIN) != 0 { drainAudioRTP() }
            if fds[3].revents & Int16(POLLIN) != 0, let l = audioRTCP { drainRTCP(from: l) }
            let t = clock.nowNanos()
            timers(now: t)
            if let w = window, !w.handleEvents() { stop(.windowClosed) }
            if t >= nextStats {
                nextStats += 1_000_000_000
                if config.avSync, sync.update() {
                    jitter.extraDelay = sync.videoExtraDelay
                    audio?.extraDelay = sync.audioExtraDelay
                }
                let current = snapshot()
                emitStats(current, since: previous)
                previous = current
            }
        }
        sendReport(bye: true)
        if room != nil {
            room!.leave()
            flushRoom()
        }
        try? recorder?.finish()
        let stopped = summary()
        // PulseAudio's mainloop thread must be gone before the process exits: left running it
        // was seen crashing exit's destructors (status 139 after the summary, ~1 run in 8).
        audio?.stopPlayback()
        events.emit(stopped)
        return (stopReason.withLock { $0 } ?? .requested, stopped.fields)
    }

    // MARK: - RTP

    private func drainRTP() {
        var source = sockaddr_in()
        while true {
            let n = packetBuffer.withUnsafeMutableBytes { rtp.receive(into: $0, from: &source) }
            guard n > 0 else { return }
            if room != nil {
                // One flow from the relay: control messages, RTCP and RTP (RFC 7983, RFC 5761).
                room!.heard(now: clock.nowNanos())
                let kind = packetBuffer.withUnsafeBytes { DatagramKind.of(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                switch kind {
                case .control:
                    let envelope = packetBuffer.withUnsafeBytes { try? ControlEnvelope.parse(UnsafeRawBufferPointer(rebasing: $0[0..<n]), maxSize: RoomProtocol.maxRelayMessageSize) }
                    if let envelope { room!.receive(envelope, now: clock.nowNanos()) } else { receiveRejected += 1 }
                    flushRoom()
                    continue
                case .rtcp:
                    packetBuffer.withUnsafeBytes { handleRTCP(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                    continue
                case .unknown:
                    receiveRejected += 1
                    continue
                case .rtp:
                    break
                }
            }
            packetBuffer.withUnsafeBytes { handleRTP(UnsafeRawBufferPointer(rebasing: $0[0..<n]), source: source) }
        }
    }

    private func handleRTP(_ bytes: UnsafeRawBufferPointer, source: sockaddr_in) {
        guard let (header, offset, length) = try? RTPHeader.parse(bytes) else {
            receiveRejected += 1
            return
        }
        let now = clock.nowNanos()
        if room != nil, header.ssrc == audioSSRC, audio != nil {
            handleAudio(header: header, payload: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]), now: now)
            return
        }
        guard header.payloadType == media.payloadType else {
            receiveRejected += 1
            return
        }
        if room != nil {
            guard header.ssrc == expectedSSRC else {
                // Audio (handled elsewhere), or a stream we did not ask for.
                if !subscribedSSRCs.contains(header.ssrc) { packetsForeign += 1 }
                return
            }
        }
        if senderSSRC != header.ssrc {
            // A new sender (or the same one restarted): follow it after a silence or a BYE.
            if senderSSRC != nil, expectedSSRC == nil, now - lastPacketNanos < 2_000_000_000 { receiveRejected += 1; return }
            if senderSSRC != nil { events.emit(SenderChanged(ssrc: header.ssrc)) }
            senderSSRC = header.ssrc
            receive = ReceiveStatistics(ssrc: header.ssrc)
            nack = Viewer.makeNackGenerator()
            assembler = VP8FrameAssembler()
            jitter = JitterBuffer()
            recordUnwrapper = TimestampUnwrapper()
            resetSync()
        }
        lastPacketNanos = now
        rtpSource = source
        receive?.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now, payloadBytes: length)
        if nack.onPacket(sequenceNumber: header.sequenceNumber, now: now, endsFrame: header.marker) {
            repairedTimestamps[repairedNext] = header.timestamp
            repairedNext = (repairedNext + 1) % repairedTimestamps.count
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
        assembler.insert(header: header, payload: payload, now: now) { frame in
            stats.frameArrived(rtpTimestamp: frame.rtpTimestamp)
            jitter.insert(frame, now: now, repaired: repairedTimestamps.contains(frame.rtpTimestamp))
        }
    }

    private var receiveRejected = 0

    // MARK: - Audio

    /// Plain mode: the audio port (PORT+2).
    private func drainAudioRTP() {
        guard let audioRTP else { return }
        var source = sockaddr_in()
        while true {
            let n = packetBuffer.withUnsafeMutableBytes { audioRTP.receive(into: $0, from: &source) }
            guard n > 0 else { return }
            packetBuffer.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                guard let (header, offset, length) = try? RTPHeader.parse(bytes), header.payloadType == audio?.payloadType else {
                    receiveRejected += 1
                    return
                }
                handleAudio(header: header, payload: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]), now: clock.nowNanos())
            }
        }
    }

    private func handleAudio(header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64) {
        guard let audio else { return }
        let ssrc = audio.ssrc
        audio.handle(header: header, payload: payload, now: now)
        if ssrc != nil, audio.ssrc != ssrc { resetSync() }
        recordAudio(header: header, payload: payload, now: now)
    }

    /// Writes an Opus packet into the recording, on the video's timeline: both streams' sender
    /// reports map RTP time to the sender's wall clock (before they arrive: arrival times).
    private func recordAudio(header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64) {
        guard let recorder, let originTicks = recordOrigin else { return }
        var nanos: Int64
        if let v = receive?.lastSenderReport, let a = audio?.lastSenderReport {
            func ntpNanos(_ t: NTPTimestamp) -> Int64 { Int64(t.seconds) * 1_000_000_000 + Int64((UInt64(t.fraction) * 1_000_000_000) >> 32) }
            let originTs = UInt32(truncatingIfNeeded: originTicks)
            let videoOrigin = ntpNanos(v.ntp) + Int64(Int32(bitPattern: originTs &- v.rtpTimestamp)) * 1_000_000_000 / Int64(max(media.clockRate, 1))
            let audioTime = ntpNanos(a.ntp) + Int64(Int32(bitPattern: header.timestamp &- a.rtpTimestamp)) * 1_000_000_000 / 48_000
            nanos = audioTime - videoOrigin
        } else if let origin = recordOriginArrival {
            nanos = Int64(now) - Int64(origin)
        } else {
            return
        }
        guard nanos >= 0 else { return }  // before the first recorded picture
        do { try recorder.writeAudio(payload, timestampNanos: UInt64(nanos)) } catch {
            events.emit(.error(.recordFailure, "\(error)"))
        }
    }
    /// Retries wait for the answer: the RTT measured from NACK to retransmission (the sender
    /// resends a packet at most once per its RTT, so asking faster only wastes requests).
    /// Idle probes every 100 ms: on a still slide a keep-alive frame lost whole is asked for
    /// within about 100 ms + RTT instead of when the next one comes a second later.
    private static func makeNackGenerator() -> NackGenerator {
        var c = NackGenerator.Configuration()
        c.idleProbeInterval = 100_000_000
        return NackGenerator(configuration: c)
    }

    /// Until an answer to a NACK measures it, 100 ms is assumed (libwebrtc's default): with
    /// 0 a 100 ms path was asked every 20 ms, about 9 NACKs per lost packet, and never measured
    /// (only an answer to a single request is a clean sample).
    /// The round trip measured by RTCP XR (RRTR → DLRR), smoothed; nil until answered.
    private var reportRTT: UInt64?
    /// `rtt_ms` for stats and the summary (0.01 ms steps), nil (null) until answered.
    private var rttMillis: Double? { reportRTT.map { (Double($0) / 1e4).rounded() / 100 } }
    /// The RTT NACK retries wait for: measured from NACK answers, else 100 ms. Not the RTCP XR
    /// round trip: with it, a path whose resends never arrive gave up after 10 × ~25 ms and
    /// asked for a keyframe 6 times in 4 s; the keyframes starved the encoder's rate (the
    /// whenRetransmissionsAreLost test decoded too few frames after the loss, 1 run in 4).
    private var nackRTT: UInt64 { nack.measuredRTT ?? 100_000_000 }
    /// RTP timestamps of the last frames a retransmission completed (their lateness is not jitter).
    private var repairedTimestamps = [UInt32](repeating: 0, count: 8)
    private var repairedNext = 0

    // MARK: - Timers: NACK, PLI, playout, reports

    private func timers(now: UInt64) {
        nackList.removeAll(keepingCapacity: true)
        let probes = nack.idleProbes
        nack.poll(now: now, rtt: nackRTT, into: &nackList)
        if !nackList.isEmpty, let sender = senderSSRC {
            let n = rtcpBuffer.withUnsafeMutableBytes {
                RTCPPacket.buildNACK(senderSSRC: ssrc, mediaSSRC: sender, sequenceNumbers: nackList, into: $0)
            }
            sendRTCP(n)
            stats.nackSent(count: nackList.count - (nack.idleProbes - probes))  // idle probes are not losses
        }
        if let lost = nack.takeLoss() {
            assembler.markLost(through: lost, now: now) { frame in
                stats.frameArrived(rtpTimestamp: frame.rtpTimestamp)
                jitter.insert(frame, now: now, repaired: true)  // it waited for the loss to be given up on
            }
        }
        if assembler.needsKeyframe, senderSSRC != nil, now - lastPLI >= 300_000_000 {
            requestKeyframe(now: now)
        }
        while jitter.pop(now: now, { frame in decodeAndShow(frame, now: now) }) {}
        if let audio {
            audio.poll(now: now)
            if let heard = audio.takeHeard() { sync.audioPlayed(rtpTimestamp: heard.rtpTimestamp, at: heard.at) }
        }
        if room != nil {
            room!.poll(now: now)
            flushRoom()
        }
        if now >= nextReport {
            sendReport(bye: false)
            nextReport = now + 1_000_000_000
        }
    }

    private func requestKeyframe(now: UInt64) {
        guard let sender = senderSSRC else { return }
        lastPLI = now
        let n = rtcpBuffer.withUnsafeMutableBytes { RTCPPacket.buildPLI(senderSSRC: ssrc, mediaSSRC: sender, into: $0) }
        sendRTCP(n)
        stats.pliSent()
    }

    private func decodeAndShow(_ frame: BufferedFrame, now: UInt64) {
        var shown = false
        do {
            try decoder.decode(frame.data) { picture in
                shown = true
                let size = PixelSize(width: picture.width, height: picture.height)
                if size != pictureSize {
                    if pictureSize.area > 0 {
                        events.emit(ResolutionChanged(size: size))
                    }
                    pictureSize = size
                }
                checksums?.add(y: picture.y, u: picture.u, v: picture.v, strideY: picture.strideY, strideU: picture.strideU,
                               strideV: picture.strideV, width: picture.width, height: picture.height)
                window?.show(I420View(y: picture.y, u: picture.u, v: picture.v, strideY: picture.strideY, strideU: picture.strideU,
                                      strideV: picture.strideV, width: picture.width, height: picture.height))
            }
        } catch {
            decodeErrors += 1
            stats.frameDropped()
            requestKeyframe(now: now)
            return
        }
        guard shown else { return }
        stats.frameDecoded(isKeyframe: frame.isKeyframe)
        stats.frameRendered(rtpTimestamp: frame.rtpTimestamp, now: now)
        sync.videoRendered(rtpTimestamp: frame.rtpTimestamp, at: clock.nowNanos())
        record(frame)
        if !firstFrameReported {
            firstFrameReported = true
            events.emit(FirstFrame(size: pictureSize, timeToFirstFrameMillis: Double(now - startNanos) / 1e6,
                                   sinceSubscribedMillis: subscribedAt.map { Double(now - $0) / 1e6 }))
        }
    }

    private func record(_ frame: BufferedFrame) {
        guard let path = config.recordPath else { return }
        if recorder == nil {
            guard frame.isKeyframe else { return }  // a file starts with a keyframe
            do {
                recorder = try WebMRecorder(path: path, video: pictureSize, audio: audio != nil)
            } catch {
                events.emit(.error(.recordFailure, "\(error)"))
                return
            }
        }
        let ticks = recordUnwrapper.unwrap(frame.rtpTimestamp)
        if recordOrigin == nil {
            recordOrigin = ticks
            recordOriginArrival = frame.arrival
        }
        let nanos = UInt64(max(0, ticks - recordOrigin!)) * 1_000_000_000 / UInt64(max(media.clockRate, 1))
        do {
            try recorder?.writeVideo(frame.data, keyframe: frame.isKeyframe, timestampNanos: nanos)
        } catch {
            events.emit(.error(.recordFailure, "\(error)"))
            recorder = nil
        }
    }

    // MARK: - RTCP

    private func drainRTCP() {
        guard let rtcp else { return }
        drainRTCP(from: rtcp)
    }

    private func drainRTCP(from rtcp: UDPListener) {
        var source = sockaddr_in()
        while true {
            let n = rtcpBuffer.withUnsafeMutableBytes { rtcp.receive(into: $0, from: &source) }
            guard n > 0 else { return }
            if rtcp === self.rtcp { rtcpPeer = source }  // the sender's RTCP address: reports and feedback go there
            rtcpBuffer.withUnsafeBytes { handleRTCP(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    private func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { receiveRejected += 1; return }
        let now = clock.nowNanos()
        for p in packets {
            switch p {
            case .senderReport(let sr) where sr.ssrc == senderSSRC:
                receive?.onSenderReport(sr, arrival: now)
                sync.videoClock = SenderClock(sr, clockRate: UInt32(max(media.clockRate, 1)))
            case .senderReport(let sr) where sr.ssrc == audio?.ssrc:
                audio?.onSenderReport(sr, arrival: now)
                sync.audioClock = SenderClock(sr, clockRate: 48_000)
            case .goodbye(let bye) where senderSSRC.map({ bye.sources.contains($0) }) ?? false:
                events.emit(SenderLeft(ssrc: senderSSRC!))
                lastPacketNanos = 0  // a new sender may take over at once
            case .extendedReport(let xr):
                // The answer to our RRTR (RFC 3611): the round trip to the sender or relay.
                for item in xr.dlrr where item.ssrc == ssrc {
                    guard let sample = item.roundTripNanos(arrival: NTPTimestamp(unixNanos: clock.wallNanos())),
                          sample < 10_000_000_000 else { continue }
                    reportRTT = reportRTT.map { $0 - $0 / 8 + sample / 8 } ?? sample
                }
            default:
                break
            }
        }
    }

    /// Where RTCP goes: the relay in a room; else the sender's RTCP address once seen, else
    /// its RTP address's port + 1.
    private var rtcpDestination: sockaddr_in? {
        if let relay { return relay }
        if let rtcpPeer { return rtcpPeer }
        guard senderSSRC != nil else { return nil }
        var d = rtpSource
        d.sin_port = (UInt16(bigEndian: d.sin_port) &+ 1).bigEndian
        return d
    }

    private func sendRTCP(_ count: Int) {
        guard count > 0, let destination = rtcpDestination else { return }
        rtcpBuffer.withUnsafeBytes { _ = (rtcp ?? rtp).send(UnsafeRawBufferPointer(rebasing: $0[0..<count]), to: destination) }
    }

    // MARK: - Room

    /// Sends what the room client has to send and acts on its events.
    private func flushRoom() {
        guard var r = room, let relay else { return }
        for message in r.takeOutgoing() { message.withUnsafeBytes { _ = rtp.send($0, to: relay) } }
        let list = r.takeEvents()
        room = r
        for e in list {
            switch e {
            case let .subscribed(_, streams):
                subscribedSSRCs.formUnion(streams.map(\.ssrc))
                audioSSRC = streams.first { $0.kind == .audio }?.ssrc
                if let screen = streams.first(where: { $0.kind == .screen }) {
                    if expectedSSRC != screen.ssrc {
                        expectedSSRC = screen.ssrc
                        senderSSRC = nil  // the next packet of this SSRC starts a fresh receive state
                        subscribedAt = clock.nowNanos()
                        firstFrameReported = false
                    }
                    media.payloadType = screen.pt
                    media.clockRate = Int(screen.clock)
                }
            case .unsubscribed:
                expectedSSRC = nil
            default:
                break
            }
            for event in roomEvents.map(e, client: r) { events.emit(event) }
        }
        if let reason = roomEvents.disconnected {
            roomEvents = RoomEventMapper(server: roomEvents.server)
            logger.error("lost the relay: \(reason)")
            stop(.disconnected)
        }
    }

    private func sendReport(bye: Bool) {
        var blocks: [ReceptionReport] = []
        if var r = receive {
            blocks.append(r.makeReport(now: clock.nowNanos()))
            receive = r
        }
        if let a = audio?.reportBlock(now: clock.nowNanos()) { blocks.append(a) }
        guard !blocks.isEmpty else { return }
        // With an RRTR (RFC 3611 §4.4): the sender (or relay) answers with a DLRR, which gives
        // this receive-only end its round-trip time.
        let n = rtcpBuffer.withUnsafeMutableBytes {
            RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: blocks, cname: config.cname, bye: bye,
                                           referenceTime: NTPTimestamp(unixNanos: clock.wallNanos()), into: $0)
        }
        sendRTCP(n)
    }

    // MARK: - Stats

    private struct Snapshot {
        var decoded = 0, bytes: Int64 = 0, lost: Int64 = 0, received: Int64 = 0
    }

    private func snapshot() -> Snapshot {
        if let r = receive { stats.update(from: r) }
        return Snapshot(decoded: stats.framesDecoded, bytes: stats.bytesReceived, lost: stats.packetsLost, received: stats.packetsReceived)
    }

    private func emitStats(_ c: Snapshot, since p: Snapshot) {
        events.emit(ViewerStats(
            fps: c.decoded - p.decoded, kbps: Int((c.bytes - p.bytes) * 8 / 1000), size: pictureSize,
            packetsReceived: Int(c.received), packetsLost: Int(c.lost),
            jitterMillis: (receive?.jitterSeconds ?? 0) * 1000, bufferMillis: Double(jitter.targetDelay) / 1e6,
            framesDecoded: stats.framesDecoded, freezeCount: stats.freezeCount,
            nackCount: stats.nackCount, pliCount: stats.pliCount, rttMillis: rttMillis, audio: audioStats()))
    }

    /// Lip sync starts again (a stream restarted: its clock and delays no longer hold).
    private func resetSync() {
        sync.reset()
        jitter.extraDelay = 0
        audio?.extraDelay = 0
    }

    private func audioStats() -> ViewerAudioStats? {
        guard let a = audio else { return nil }
        let c = a.counters
        func ms(_ n: UInt64?) -> Double? { n.map { (Double($0) / 1e5).rounded() / 10 } }
        return ViewerAudioStats(
            avOffsetMillis: sync.offset.map { (Double($0) / 1e5).rounded() / 10 }, avSync: config.avSync,
            videoSyncDelayMillis: ms(sync.videoExtraDelay), audioSyncDelayMillis: ms(sync.audioExtraDelay),
            outputLatencyMillis: ms(a.outputLatencyNanos), outputFlushes: a.outputFlushes,
            jitterDelayMillis: ms(a.playoutDelayNanos), targetDelayMillis: ms(a.started ? a.targetDelayNanos : nil),
            packets: c.packets, decoded: c.decoded, fecRecovered: c.fecRecovered,
            concealed: c.concealed, late: c.late, silenceFrames: c.silenceFrames,
            packetsLost: Int(a.receive.map { $0.expected - $0.packetsReceived } ?? 0), playing: a.isPlaying)
    }

    private func summary() -> ViewerStopped {
        _ = snapshot()
        return ViewerStopped(
            reason: stopReason.withLock { $0 } ?? .requested,
            framesDecoded: stats.framesDecoded, keyframesDecoded: stats.keyFramesDecoded,
            framesDropped: stats.framesDropped, framesReceived: stats.framesReceived,
            freezeCount: stats.freezeCount, totalFreezesDurationSeconds: stats.totalFreezesDuration,
            packetsReceived: Int(stats.packetsReceived), packetsLost: Int(stats.packetsLost),
            jitterMillis: (receive?.jitterSeconds ?? 0) * 1000,
            nackCount: stats.nackCount, pliCount: stats.pliCount, idleProbes: nack.idleProbes,
            rttMillis: rttMillis,
            packetsRejected: receiveRejected, decodeErrors: decodeErrors, packetsForeign: packetsForeign,
            timeToFirstFrameMillis: stats.firstFrameTime.map { Double($0) / 1e6 },
            size: pictureSize,
            recordedFrames: recorder?.videoFramesWritten ?? 0,
            durationSeconds: Double(clock.nowNanos() - startNanos) / 1e9,
            recordedAudioPackets: recorder?.audioPacketsWritten ?? 0,
            audio: audioStats())
    }
}
