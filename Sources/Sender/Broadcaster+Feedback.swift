import SRTP
import Events
import FoundationEssentials
import Glibc
import MediaCore
import Basics
import RTCP
import RTP
import Room
import RoomLink
import RoomEvents

/// The RTCP thread: sender reports (with CNAME, and DLRRs answering receivers' RRTRs) every
/// second and with the first frame, BYE at the end; receivers' feedback in (PLI/FIR, NACK,
/// receiver reports, XR) through `SenderFeedback`; and, in a room, the room client's messages,
/// which share the socket with RTCP (RFC 5761 multiplexing).
extension Broadcaster {
    func rtcpLoop() {
        // Big enough for the relay's largest message (a `welcome` listing a big room).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        defer { buffer.deallocate() }
        var nextReport = clock.nowNanos()
        var reported = false
        var link: RoomLink?
        if let settings = config.room, let hopMedia {
            do {
                link = try RoomLink(client: RoomClient(room: settings.name, name: settings.displayName, role: "presenter", token: settings.token),
                                    pinnedFingerprint: settings.fingerprint, media: hopMedia)
            } catch {
                stop(.failed, detail: "cannot reach the relay: \(error)")
                return
            }
        }
        var mapper = RoomEventMapper(server: config.room?.server ?? "")
        if let link {
            link.publish(publishedStreams(), now: nextReport)
            link.start(now: nextReport)
            flushRoom(link, &mapper)
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
            var timeout: Int32 = reported ? 100 : 10
            if let link, let wake = link.nextWakeup(now: now) { timeout = Int32(max(1, min(Int(timeout), Int((wake &- min(wake, now)) / 1_000_000)))) }
            let n = rtcpSocket.receive(into: buffer, timeoutMillis: timeout)
            if n > 0 {
                if let link {
                    // The relay's one flow: DTLS (the handshake, room messages) stays in the
                    // link; SRTCP comes out opened.
                    let refusedBefore = link.rejected + link.media.refused
                    if let plain = link.receive(buffer, length: n, now: clock.nowNanos()) {
                        handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<plain]))
                    }
                    let refused = link.rejected + link.media.refused - refusedBefore
                    if refused > 0 { counters.withLock { $0.packetsRejected += refused } }
                } else if let srtp {
                    // Plain mode with --srtp: the receiver's RTCP comes protected with our key.
                    guard let plain = srtp.unprotect(buffer, length: n) else {
                        counters.withLock { $0.packetsRejected += 1 }
                        continue
                    }
                    handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<plain]))
                } else {
                    handleRTCP(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                }
            }
            if let link {
                link.poll(now: clock.nowNanos())
                flushRoom(link, &mapper)
                if let reason = mapper.disconnected { stop(.disconnected, detail: "lost the relay \(config.destination): \(reason)") }
                if let reason = mapper.refused { stop(.unauthorized, detail: "the relay at \(config.room?.server ?? "") refused to admit us: \(reason)") }
                if let reason = mapper.untrusted { stop(.untrusted, detail: "will not present through the relay at \(config.room?.server ?? ""): \(reason)") }
            }
        }
        if let link {
            link.leave()
            flushRoom(link, &mapper)
        }
    }

    /// The resend budget's depth: this long at its rate may go at once.
    static let resendBurstSeconds = 0.1

    /// The rate the encoder aims at: `--bitrate` (or `ctl set`), or less when congestion
    /// control says the path carries less (what `EncodeScheduler.bitrate` gives the encoder).
    var encoderTarget: Bitrate {
        let asked = settings.bitrate, network = networkTarget.load(ordering: .relaxed)
        return network == 0 ? asked : min(asked, Bitrate(bitsPerSecond: network))
    }

    /// The rate resends may take (bit/s): half the encoder's target.
    var resendRate: Int { encoderTarget.bitsPerSecond / 2 }

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

    /// What this broadcast publishes in a room.
    func publishedStreams() -> [StreamInfo] {
        var streams = [StreamInfo(kind: .screen, ssrc: ssrc, pt: 96, codec: "VP8", clock: 90_000)]
        if config.fec != .off {
            streams.append(StreamInfo(kind: .fec, ssrc: fecSSRC, pt: ULPFEC.payloadType, codec: "ulpfec", clock: 90_000))
        }
        if let a = audio.withLock({ $0 }) {
            streams.append(StreamInfo(kind: .audio, ssrc: a.ssrc, pt: 111, codec: "opus", clock: 48_000, channels: 2))
        }
        return streams
    }

    /// Sends what the room link has to send and reports its events.
    func flushRoom(_ link: RoomLink, _ mapper: inout RoomEventMapper) {
        for datagram in link.takeDatagrams() { datagram.withUnsafeBytes { _ = rtcpSocket.send($0) } }
        for e in link.takeEvents() {
            for event in mapper.map(e, client: link.client) { events.emit(event) }
        }
        let viewers = mapper.viewers.count
        counters.withLock { $0.viewers = viewers }
    }

    /// One compound RTCP packet from a receiver (or the relay); a malformed one is counted in
    /// `packets_rejected` and otherwise ignored.
    func handleRTCP(_ bytes: UnsafeRawBufferPointer) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else {
            counters.withLock { $0.packetsRejected += 1 }
            return
        }
        let now = clock.nowNanos(), wallNow = clock.wallNanos()
        feedback.withLock { feedback in
            feedback.handle(packets, now: now, wallNow: wallNow) { action in
                switch action {
                case .keyframeRequested:
                    keyframeRequested.store(true, ordering: .relaxed)
                    mailbox.wake()
                case .resend(let nack, let rtt, let inFlight):
                    // Each packet at most once per RTT and not while it is still in flight (plain
                    // resend: receivers without RTX take the same sequence number again).
                    // Resends share a budget, half the target rate (libwebrtc caps them at the
                    // target): on a congested path they would otherwise answer each loss with
                    // more load, and their own losses with more still.
                    var resent = 0, overBudget = 0
                    let rate = resendRate
                    resendBudget.withLock { budget in
                        budget.drain(at: now, bitsPerSecond: rate)
                        history.withLock { h in
                            nack.forEachSequenceNumber { seq in
                                let allow = { (size: Int) -> Bool in
                                    guard budget.levelBits + Double(size * 8) <= Double(rate) * Self.resendBurstSeconds else { return false }
                                    budget.add(bits: size * 8)
                                    return true
                                }
                                var bytes = 0
                                let outcome = h.retransmit(sequenceNumber: seq, now: now, rtt: rtt, inFlight: inFlight, allow: allow) {
                                    bytes = $0.count
                                    sendRTP($0)
                                }
                                if bytes > 0 { congestion?.withLock { $0.resent(bytes: bytes, now: now) } }
                                switch outcome {
                                case .sent: resent += 1
                                case .overBudget: overBudget += 1
                                default: break
                                }
                            }
                        }
                    }
                    counters.withLock { $0.nacksReceived += 1; $0.retransmitted += resent; $0.resendsOverBudget += overBudget }
                case .transportFeedback(let fb, let rtt):
                    guard let update = congestion?.withLock({ $0.take(fb, rttNanos: rtt, now: now) }) else { break }
                    networkTarget.store(Int(update.target), ordering: .relaxed)
                    counters.withLock { $0.transportFeedbacks += 1 }
                    if let from = update.announcedFrom {
                        let (estimate, loss) = congestion?.withLock { ($0.estimate, $0.controller.lossFraction) } ?? (nil, 0)
                        events.emit(BitrateChanged(targetKbps: Int(update.target / 1000), previousKbps: Int(from / 1000),
                                                   estimateKbps: estimate.map { Int($0 / 1000) }, loss: loss, rttMillis: Double(rtt) / 1e6))
                    }
                case .remb(let bps):
                    congestion?.withLock { $0.takeREMB(bitsPerSecond: bps, now: now) }
                case .receiverReport(let rtt, let fractionLost, let cumulativeLost):
                    counters.withLock { c in
                        c.receiverReports += 1
                        if let rtt { c.rttMillis = Double(rtt) / 1e6 }
                        c.fractionLost = Double(fractionLost) / 256
                        c.cumulativeLost = cumulativeLost
                    }
                    if fractionLost >= 13 {  // ≥ 5 % lost since the last report
                        let rtt = rtt.map { cFormat("%.0f ms", Double($0) / 1e6) } ?? "unknown"
                        warnNetworkBusy(cFormat("receivers report %.1f %% loss", Double(fractionLost) / 2.56) + " (RTT \(rtt))")
                    }
                }
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
        let dlrr = feedback.withLock { $0.takeDLRR(now: now) }
        var buffer = [UInt8](repeating: 0, count: 640)
        let n = buffer.withUnsafeMutableBytes { buf in
            RTCPPacket.buildSenderReport(ssrc: ssrc, ntp: NTPTimestamp(unixNanos: clock.wallNanos()),
                                         rtpTimestamp: rtpTimestamp(at: now), packetCount: c.packetsSent,
                                         octetCount: c.octetsSent, cname: config.cname, bye: bye, dlrr: dlrr, into: buf)
        }
        buffer.withUnsafeBytes { sendRTCP(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    /// An RTP packet out, SRTP-protected with `--srtp` and in a room; the socket's error (0:
    /// sent, or dropped because the room hop's handshake is not done yet). Under congestion
    /// control it gets its transport-wide sequence number first (a resend gets a new one).
    @discardableResult
    func sendRTP(_ packet: UnsafeMutableRawBufferPointer, probeCluster: Int? = nil) -> Int32 {
        if TransportWideSequence.isStamped(UnsafeRawBufferPointer(packet)) {
            let now = clock.nowNanos(), size = packet.count + (srtp == nil ? 0 : 10)
            if let sequence = congestion?.withLock({ $0.sent(size: size, now: now, probeCluster: probeCluster) }) {
                TransportWideSequence.stamp(sequence, into: packet)
            }
        }
        let packet = UnsafeRawBufferPointer(packet)
        guard let srtp else { return rtpSocket.send(packet) }
        return srtp.protect(packet) { rtpSocket.send($0) } ?? (srtp.isKeyed ? EINVAL : 0)
    }

    /// An RTCP packet out, SRTCP-protected with `--srtp` and in a room.
    func sendRTCP(_ packet: UnsafeRawBufferPointer) {
        guard let srtp else { _ = rtcpSocket.send(packet); return }
        _ = srtp.protect(packet) { rtcpSocket.send($0) }
    }
}
