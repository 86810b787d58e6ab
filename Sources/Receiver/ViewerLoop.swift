import SRTP
import AudioIO
import Events
import Logging
import MediaCore
import Basics
import RTCP
import RTP
import RTPSession
import Recording
import Room
import Transport
import VP8Codec
import VideoOutput
#if canImport(Glibc)
import Glibc
#endif

/// The viewer's I/O and its one thread: the sockets and the poll loop whose timeout is the
/// next timer (playout, NACK retry, report, room, audio), RTCP in and out, and the sinks
/// (window, frame MD5s, recording, audio playback). The decisions are the parts'
/// (``VideoReceivePath``, ``ViewerRoom``, ``AudioReceiver``, `AVSync`); this type moves
/// datagrams and time between them and the world.
///
/// Made by ``Viewer``'s init, then owned by the thread that calls ``run()``: not `Sendable`.
final class ViewerLoop {
    private let config: ViewerConfig
    private let events: EventSink
    private let logger: Logger
    private let clock: MediaClock
    private let stop: ViewerStopSignal
    /// Our SSRC, in the RTCP we send.
    private let ssrc: UInt32 = UInt32.random(in: 1...UInt32.max)
    private let startNanos: UInt64
    /// The video's payload type as first known (for `started`).
    private let payloadType: UInt8
    /// Why the relay refused to admit us, when it did.
    private var refusal: String?

    /// The video flow's socket; in a room the one flow to and from the relay (control
    /// messages, RTCP and RTP, RFC 7983).
    private let rtp: UDPListener
    /// Plain mode's RTCP port; nil in a room.
    private let rtcp: UDPListener?
    /// Plain mode's audio ports (PORT+2, PORT+3), when the stream has audio.
    private let audioRTP: UDPListener?
    private let audioRTCP: UDPListener?
    /// Plain mode with an SDP's `a=crypto`: the video flow's SRTP (its RTP and RTCP, and our
    /// RTCP back) and the audio's.
    /// `--sdp` with `a=crypto`: the flow's key; in a room the hop's SRTP (keyed by its DTLS).
    private let videoSRTP: (any PacketProtection)?
    private let audioSRTP: SRTPFlow?
    /// In a room: the relay's address.
    private let relay: sockaddr_in?
    /// poll(2)'s set, made once: `rtp`, `rtcp`, `audioRTP`, `audioRTCP` (fd -1 when absent).
    private var pollSet: [pollfd]
    /// Every datagram is received here; big enough for the relay's largest message (a
    /// `welcome` listing a big room).
    private var datagram = [UInt8](repeating: 0, count: 65536)
    /// The RTCP we send is written here.
    private var outgoing = [UInt8](repeating: 0, count: ViewerLoop.maxRTCPSize)
    /// The largest RTCP datagram read from, or written to, an RTCP port.
    private static let maxRTCPSize = 1500
    /// Where the sender's RTP last came from, and its RTCP address once seen (plain mode).
    private var rtpSource = sockaddr_in()
    private var rtcpPeer: sockaddr_in?

    private var path: VideoReceivePath
    private var room: ViewerRoom?
    /// The audio stream, when there is one (Opus).
    private let audio: AudioReceiver?
    /// Why the audio is not played, when it is not (reported once running).
    private let audioPlaybackWarning: String?
    private var output: ViewerOutput
    private var recording: ViewerRecording?
    /// Lip sync: measures how late the sound is heard and the pictures are shown, and delays
    /// the earlier of the two (applied once a second, with the stats).
    private var sync = AVSync()
    private var stats: ViewerStatsReport
    /// Datagrams refused before the receive path saw them (malformed, unknown, other payload).
    private var packetsRejected = 0
    /// SRTP packets refused (forged, replayed, not SRTP): nil when the stream is not SRTP.
    private var srtpRejected: Int? {
        guard videoSRTP != nil || audioSRTP != nil else { return nil }
        return (videoSRTP?.refused ?? 0) + (audioSRTP?.refused ?? 0)
    }
    /// The round trip measured by RTCP XR (RRTR → DLRR), smoothed; nil until answered.
    private var reportRTT: UInt64?
    /// When the next receiver report is due (ns).
    private var nextReport: UInt64 = 0
    /// Plain mode, when the SDP names the transport-wide sequence number (`a=extmap`), and in a
    /// room: its extension ID, and the arrivals the sender's congestion control (the relay's
    /// estimate of this viewer's link, in a room) is told of every 100 ms.
    private let transportSequenceID: UInt8?
    private var transportFeedback = TransportFeedbackRecorder()
    private var transportFeedbacksSent = 0

    /// Opens the ports, the audio, the decoder, the MD5 file, the window and libavformat for
    /// `--record` (see ``Viewer``).
    init(config: ViewerConfig, events: EventSink, logger: Logger, clock: MediaClock, stop: ViewerStopSignal) throws {
        self.config = config
        self.events = events
        self.logger = logger
        self.clock = clock
        self.stop = stop
        guard let video = config.description.video else { throw FileError("the SDP has no m=video section") }
        guard video.encoding.uppercased() == "VP8" else {
            throw FileError("the SDP's video is \(video.encoding.isEmpty ? "of unknown encoding" : video.encoding); only VP8 is supported")
        }
        payloadType = video.payloadType
        // In a room the relay estimates each viewer's link from it (and forwards the layers
        // that fit): the presenter's numbers, as the relay forwards them.
        transportSequenceID = config.room == nil ? video.transportSequenceID : RoomProtocol.transportSequenceID
        var audioPorts: (UInt16, UInt16)?
        var audio: AudioReceiver?
        var audioPlaybackWarning: String?
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
        self.audio = audio
        self.audioPlaybackWarning = audioPlaybackWarning
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
            room = try ViewerRoom(settings: roomSettings)
        } else {
            rtp = try UDPListener(port: video.port)
            rtcp = try UDPListener(port: video.rtcpPort)
            relay = nil
        }
        do {
            videoSRTP = try room?.link.media ?? video.crypto.map { try SRTPFlow(masterKey: $0.keySalt) }
            audioSRTP = try config.room == nil && audio != nil ? config.description.audio?.crypto.map { try SRTPFlow(masterKey: $0.keySalt) } : nil
        } catch {
            throw FileError("the SDP's SRTP key cannot be used: \(error)")
        }
        let decoder = try VP8Decoder.fastest()
        let checksums = try config.framesMD5Path.map { try FrameChecksums(path: $0) }
        startNanos = clock.nowNanos()
        path = VideoReceivePath(payloadType: video.payloadType, clockRate: video.clockRate, inRoom: relay != nil,
                                startedAt: startNanos)
        stats = ViewerStatsReport(avSync: config.avSync)
        var window: X11VideoWindow?
        if config.window {
            let title = config.room.map { "screenshare watch — room \($0.name)" } ?? "screenshare watch — udp/\(video.port)"
            window = try X11VideoWindow(display: config.display, title: title, size: PixelSize(width: 1280, height: 720))
        }
        output = ViewerOutput(decoder: decoder, window: window, checksums: checksums, events: events, startedAt: startNanos)
        recording = config.recordPath.map { ViewerRecording(path: $0, withAudio: audio != nil, events: events) }
        pollSet = [rtp.fd, rtcp?.fd ?? -1, audioRTP?.fd ?? -1, audioRTCP?.fd ?? -1].map {
            pollfd(fd: $0, events: Int16(POLLIN), revents: 0)
        }
    }

    // MARK: - The loop

    /// Runs until stopped; see ``Viewer/run()``.
    func run() -> ViewerResult {
        var audioStarted: ViewerStarted.Audio?
        if let a = config.description.audio, let audio {
            audioStarted = ViewerStarted.Audio(port: config.room == nil ? a.port : nil, playback: audio.isPlaying)
        }
        events.emit(ViewerStarted(rtpPort: rtp.port, rtcpPort: rtcp?.port ?? rtp.port, payloadType: payloadType,
                                  window: output.window != nil, record: config.recordPath, room: config.room, audio: audioStarted))
        if let w = audioPlaybackWarning {
            events.emit(.warning(.audioPlaybackUnavailable, w))
        }
        recording?.started()
        if room != nil {
            room!.start(now: startNanos)
            flushRoom()
        }
        let deadline = config.durationSeconds.map { startNanos + UInt64($0 * 1e9) }
        var nextStats = startNanos + 1_000_000_000
        nextReport = startNanos + 1_000_000_000
        while stop.isRunning {
            let now = clock.nowNanos()
            if let deadline, now >= deadline { stop.stop(.duration); break }
            var wake = min(nextStats, nextReport, now + 50_000_000)
            if let d = deadline { wake = min(wake, d) }
            if let p = path.nextWakeup { wake = min(wake, p) }
            if let r = room?.nextWakeup(now: now) { wake = min(wake, max(r, now)) }
            if let a = audio?.nextWakeup { wake = min(wake, max(a, now)) }
            if transportSequenceID != nil, let f = transportFeedback.nextDue { wake = min(wake, max(f, now)) }
            let ms = wake > now ? Int32(min((wake - now + 999_999) / 1_000_000, 50)) : 0
            // On an error (EINTR) poll leaves the last round's revents as they were.
            if poll(&pollSet, nfds_t(pollSet.count), ms) > 0 {
                if readable(0) { drainRTP(rtp, audioPort: false) }
                if readable(1), let rtcp { drainRTCP(rtcp) }
                if readable(2), let audioRTP { drainRTP(audioRTP, audioPort: true) }
                if readable(3), let audioRTCP { drainRTCP(audioRTCP) }
            }
            let t = clock.nowNanos()
            timers(now: t)
            if let w = output.window, !w.handleEvents() { stop.stop(.windowClosed) }
            if t >= nextStats {
                nextStats += 1_000_000_000
                if config.avSync, sync.update() {
                    path.extraDelay = sync.videoExtraDelay
                    audio?.extraDelay = sync.audioExtraDelay
                }
                var second = stats.second(path: &path, now: clock.nowNanos(), size: output.pictureSize, rttMillis: rttMillis, audio: audio, sync: sync)
                second.waitingFor = room?.waitingFor
                events.emit(second)
            }
        }
        sendReport(bye: true)
        if room != nil {
            room!.leave()
            flushRoom()
        }
        let recorded = recording?.finish() ?? true
        var stopped = stats.summary(reason: stop.stopReason, path: &path, now: clock.nowNanos(), packetsRejected: packetsRejected,
                                    srtpRejected: srtpRejected,
                                    size: output.pictureSize, rttMillis: rttMillis, recording: recording,
                                    durationSeconds: Double(clock.nowNanos() - startNanos) / 1e9, audio: audio, sync: sync)
        stopped.transportFeedbacks = transportFeedbacksSent
        stopped.fecPackets = path.fecPackets
        stopped.fecRecovered = path.fecRecovered
        // PulseAudio's mainloop thread must be gone before the process exits: left running it
        // was seen crashing exit's destructors (status 139 after the summary, ~1 run in 8).
        audio?.stopPlayback()
        events.emit(stopped)
        return ViewerResult(reason: stop.stopReason, summary: stopped.fields, recordingFailed: !recorded, refusal: refusal)
    }

    private func readable(_ i: Int) -> Bool { pollSet[i].revents & Int16(POLLIN) != 0 }

    /// What is due at `now`: NACKs and PLIs, frames to decode, audio to play, the room's
    /// retries, the receiver report.
    private func timers(now: UInt64) {
        let feedback = path.poll(now: now)
        if feedback.nack, let sender = path.senderSSRC {
            let n = outgoing.withUnsafeMutableBytes {
                RTCPPacket.buildNACK(senderSSRC: ssrc, mediaSSRC: sender, sequenceNumbers: path.nacks, into: $0)
            }
            sendRTCP(n)
        }
        if feedback.pli { sendPLI() }
        if transportSequenceID != nil,
           let fb = transportFeedback.poll(now: now, senderSSRC: ssrc, mediaSSRC: path.senderSSRC ?? 0) {
            sendRTCP(outgoing.withUnsafeMutableBytes { RTCPPacket.transportFeedback(fb).marshal(into: $0) })
            transportFeedbacksSent += 1
        }
        let clockRate = path.clockRate
        while true {
            let played = path.playOut(now: now) { frame in
                let decoded = output.decode(frame, now: now)
                if decoded == .picture {
                    sync.videoRendered(rtpTimestamp: frame.rtpTimestamp, at: clock.nowNanos())
                    recording?.video(frame, size: output.pictureSize, clockRate: clockRate)
                    output.shown(now: now)
                }
                return decoded
            }
            if played.pli { sendPLI() }
            guard played.released else { break }
        }
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

    // MARK: - RTP

    /// Receives every datagram waiting on an RTP socket (in a room: the relay's one flow).
    private func drainRTP(_ socket: UDPListener, audioPort: Bool) {
        var source = sockaddr_in()
        while true {
            var n = datagram.withUnsafeMutableBytes { socket.receive(into: $0, from: &source) }
            guard n > 0 else { return }
            if room != nil, !audioPort, let relay {
                // Only the relay speaks on this flow.
                guard source.sin_addr.s_addr == relay.sin_addr.s_addr, source.sin_port == relay.sin_port else {
                    packetsRejected += 1
                    continue
                }
                // The relay's one flow: DTLS (the handshake, room messages) stays in the link;
                // SRTP and SRTCP come out opened (forged or replayed ones are refused, counted).
                let length = n
                guard let plain = datagram.withUnsafeMutableBytes({ room!.receive($0, length: length, now: clock.nowNanos()) }) else {
                    flushRoom()
                    continue
                }
                datagram.withUnsafeBytes { demultiplex(UnsafeRawBufferPointer(rebasing: $0[0..<plain]), source: source) }
                continue
            }
            if let flow = audioPort ? audioSRTP : videoSRTP {
                // A forgery, a replay or plain RTP on an SRTP stream: refused, counted, never decoded.
                guard let plain = datagram.withUnsafeMutableBytes({ flow.unprotect($0, length: n) }) else { continue }
                n = plain
            }
            datagram.withUnsafeBytes { handleRTP(UnsafeRawBufferPointer(rebasing: $0[0..<n]), source: source, audioPort: audioPort) }
        }
    }

    /// A media packet of the one flow from the relay, opened: RTCP or RTP (RFC 5761).
    private func demultiplex(_ bytes: UnsafeRawBufferPointer, source: sockaddr_in) {
        switch DatagramKind.of(bytes) {
        case .rtcp:
            handleRTCP(bytes)
        case .rtp:
            handleRTP(bytes, source: source, audioPort: false)
        case .control, .unknown:
            packetsRejected += 1
        }
    }

    /// The one door for RTP: the audio (the audio port's packets in plain mode; the
    /// publisher's audio SSRC in a room) goes to ``receiveAudio(_:payload:now:)``, the rest to
    /// the video receive path.
    private func handleRTP(_ bytes: UnsafeRawBufferPointer, source: sockaddr_in, audioPort: Bool) {
        guard let (header, offset, length) = try? RTPHeader.parse(bytes) else {
            packetsRejected += 1
            return
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
        let now = clock.nowNanos()
        if audioPort || (audio != nil && room?.audioSSRC == header.ssrc) {
            // In a room the SSRC says it is the audio; on the audio port the payload type must.
            guard !audioPort || header.payloadType == audio?.payloadType else {
                packetsRejected += 1
                return
            }
            receiveAudio(header, payload: payload, now: now)
            return
        }
        if let id = transportSequenceID, let sequence = TransportWideSequence.find(id: id, in: bytes) {
            transportFeedback.onPacket(sequence: sequence, now: now)
        }
        switch path.receive(header, payload: payload, packet: bytes, now: now) {
        case .accepted:
            rtpSource = source
        case .newSender(let previous):
            if previous != nil { events.emit(SenderChanged(ssrc: header.ssrc)) }
            transportFeedback = TransportFeedbackRecorder()  // another sender's numbers
            recording?.restart()
            resetSync()
            rtpSource = source
        case .rejected, .foreign, .otherStream:
            break
        }
    }

    /// An Opus packet: played, and recorded on the video's timeline.
    private func receiveAudio(_ header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64) {
        guard let audio else { return }
        let ssrc = audio.ssrc
        audio.handle(header: header, payload: payload, now: now)
        if ssrc != nil, audio.ssrc != ssrc { resetSync() }
        recording?.audio(header, payload: payload, now: now, videoReport: path.receive?.lastSenderReport,
                         audioReport: audio.lastSenderReport, clockRate: path.clockRate)
    }

    /// Lip sync starts again (a stream restarted: its clock and delays no longer hold).
    private func resetSync() {
        sync.reset()
        path.extraDelay = 0
        audio?.extraDelay = 0
    }

    // MARK: - RTCP

    /// Receives every datagram waiting on an RTCP port (plain mode).
    private func drainRTCP(_ socket: UDPListener) {
        var source = sockaddr_in()
        while true {
            let n = datagram.withUnsafeMutableBytes {
                socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<Self.maxRTCPSize]), from: &source)
            }
            guard n > 0 else { return }
            var length = n
            if let flow = socket === audioRTCP ? audioSRTP : videoSRTP {
                guard let plain = datagram.withUnsafeMutableBytes({ flow.unprotect($0, length: n) }) else { continue }
                length = plain
            }
            if socket === rtcp { rtcpPeer = source }  // the sender's RTCP address: reports and feedback go there
            datagram.withUnsafeBytes { handleRTCP(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }
    }

    private func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { packetsRejected += 1; return }
        let now = clock.nowNanos()
        for p in packets {
            switch p {
            case .senderReport(let sr):
                if path.onSenderReport(sr, now: now) {
                    sync.videoClock = SenderClock(sr, clockRate: UInt32(max(path.clockRate, 1)))
                } else if let audio, sr.ssrc == audio.ssrc {
                    audio.onSenderReport(sr, arrival: now)
                    sync.audioClock = SenderClock(sr, clockRate: 48_000)
                }
            case .goodbye(let bye):
                if let sender = path.onGoodbye(bye.sources, now: clock.nowNanos()) { events.emit(SenderLeft(ssrc: sender)) }
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

    /// `rtt_ms` for stats and the summary (0.01 ms steps), nil (null) until answered.
    private var rttMillis: Double? { reportRTT.map { (Double($0) / 1e4).rounded() / 100 } }

    /// Where RTCP goes: the relay in a room; else the sender's RTCP address once seen, else
    /// its RTP address's port + 1.
    private var rtcpDestination: sockaddr_in? {
        if let relay { return relay }
        if let rtcpPeer { return rtcpPeer }
        guard path.senderSSRC != nil else { return nil }
        var d = rtpSource
        d.sin_port = (UInt16(bigEndian: d.sin_port) &+ 1).bigEndian
        return d
    }

    /// Sends the first `count` bytes of `outgoing`.
    private func sendRTCP(_ count: Int) {
        guard count > 0, let destination = rtcpDestination else { return }
        let socket = rtcp ?? rtp
        outgoing.withUnsafeBytes { b in
            let packet = UnsafeRawBufferPointer(rebasing: b[0..<count])
            if let videoSRTP { _ = videoSRTP.protect(packet) { socket.send($0, to: destination) } } else { _ = socket.send(packet, to: destination) }
        }
    }

    /// A keyframe request (PLI, RFC 4585 §6.3.1) to the sender.
    private func sendPLI() {
        guard let sender = path.senderSSRC else { return }
        let n = outgoing.withUnsafeMutableBytes { RTCPPacket.buildPLI(senderSSRC: ssrc, mediaSSRC: sender, into: $0) }
        sendRTCP(n)
    }

    private func sendReport(bye: Bool) {
        var blocks: [ReceptionReport] = []
        if let r = path.makeReport(now: clock.nowNanos()) { blocks.append(r) }
        if let a = audio?.reportBlock(now: clock.nowNanos()) { blocks.append(a) }
        guard !blocks.isEmpty else { return }
        // With an RRTR (RFC 3611 §4.4): the sender (or relay) answers with a DLRR, which gives
        // this receive-only end its round-trip time.
        let n = outgoing.withUnsafeMutableBytes {
            RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: blocks, cname: config.cname, bye: bye,
                                           referenceTime: NTPTimestamp(unixNanos: clock.wallNanos()), into: $0)
        }
        sendRTCP(n)
    }

    // MARK: - Room

    /// Sends what the room client has to send and acts on what it says.
    private func flushRoom() {
        guard room != nil, let relay else { return }
        let changes = room!.flush(path: &path, now: clock.nowNanos(), send: { _ = rtp.send($0, to: relay) }, emit: { events.emit($0) })
        if changes.newScreen { output.subscribed(now: clock.nowNanos()) }
        // The `disconnected` event said why, in one line.
        if changes.disconnected != nil { stop.stop(.disconnected) }
        if let reason = changes.refused {
            refusal = reason
            stop.stop(.unauthorized)
        }
        if let reason = changes.untrusted {
            refusal = reason
            stop.stop(.untrusted)
        }
        if let presenter = changes.ended {
            events.emit(ShareEnded(presenter: presenter))
            stop.stop(.ended)
        }
    }
}
