import Congestion
import Events
import MediaCore
import RTP
#if canImport(Glibc)
import Glibc
#endif

/// The send thread's stage: takes the encoded frames from ``EncodedFrameQueue`` in order and
/// sends each as RTP — packetized, its FEC made, each packet when ``PacketPacer`` says, stamped
/// with its transport-wide number as it leaves (FEC protects the bytes as sent), kept in the
/// history for NACKs — then a probe when congestion control asks for one. It is the only
/// thread that waits for the pacer: the encode thread meanwhile encodes the next picture.
///
/// Made and run by the send thread alone (not `Sendable`); what it shares with the other
/// threads — the sockets, the history, congestion control, the counters — is the
/// ``Broadcaster``'s, behind their locks.
final class SendStage {
    /// Bytes of a frame sent without pacing.
    static let unpacedBytes = 16_000
    /// The send budget under congestion control: its rate over the target, and its burst.
    static let budgetHeadroom = 1.1
    static let budgetBurstSeconds = 0.1
    /// The most packets one probe resends.
    static let maxProbePackets = 16

    /// What sending one encoded frame did.
    struct SentFrame {
        var packets: UInt32 = 0
        var octets = 0
        /// Packets the socket refused; `busy` of them because the local send queue was full.
        var errors = 0
        var busy = 0
        /// FEC packets among them, and their bytes.
        var fecPackets = 0
        var fecBytes = 0
    }

    private let broadcaster: Broadcaster
    private let queue: EncodedFrameQueue
    private var packetizer: VP8Packetizer
    private var pacer = PacketPacer()
    private var networkTarget = 0
    private var fec = ULPFECEncoder()
    /// The next sequence number of a room's FEC stream.
    private var fecSequence = UInt16.random(in: 0...UInt16.max)
    private let packetBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
    private let fecBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 16)
    /// Probes resend the newest packets (made once: up to 16 of them).
    private let probeBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: SendStage.maxProbePackets * 1500, alignment: 16)
    private var probeLengths: [Int] = []
    private var firstSent = false
    private var lastSendWarning: UInt64 = 0

    init(broadcaster: Broadcaster, queue: EncodedFrameQueue, packetizer: VP8Packetizer) {
        self.broadcaster = broadcaster
        self.queue = queue
        self.packetizer = packetizer
        probeLengths.reserveCapacity(Self.maxProbePackets)
    }

    deinit {
        packetBuffer.deallocate()
        fecBuffer.deallocate()
        probeBuffer.deallocate()
    }

    /// Sends frames until the broadcast stops and the queue is empty (what was encoded before
    /// the stop still goes, without waiting for the pacer).
    func run() {
        let b = broadcaster
        while true {
            let took = queue.withNext(timeoutNanos: 100_000_000) { data, frame in send(data, frame) }
            if !took && !b.isRunning { break }
        }
    }

    private func send(_ data: UnsafeRawBufferPointer, _ frame: EncodedFrameQueue.Frame) {
        let b = broadcaster, clock = b.clock
        let target = b.networkTarget.load(ordering: .relaxed)
        if target != networkTarget {
            // What was sent before the path had a rate (the opening, the first keyframe) is not
            // a debt the next frames pay by waiting.
            if networkTarget == 0 { pacer.reset() }
            networkTarget = target
        }
        let start = clock.nowNanos()
        let protection = b.congestion?.withLock { $0.fec.protection } ?? 0
        let sent = packetize(data, frame, protection: protection, at: start)
        let now = clock.nowNanos()
        b.counters.withLock { c in
            if c.sendMillis.count < 512 { c.sendMillis.append(Double(now &- start) / 1e6) }
            c.framesSent += 1
            if frame.keyframe { c.keyframesSent += 1 }
            c.packetsSent &+= sent.packets
            c.octetsSent &+= UInt32(truncatingIfNeeded: sent.octets - Int(sent.packets) * packetizer.headerSize)
            c.bytesSent += sent.octets
            c.fecPackets += sent.fecPackets
            c.fecBytes += sent.fecBytes
            c.lastRTPTimestamp = frame.rtpTimestamp
            c.sendErrors += sent.errors
        }
        if let probe = b.congestion?.withLock({ $0.takeProbe(now: now) }) { sendProbe(probe) }
        if !firstSent {
            firstSent = true
            b.events.emit(FirstFrameSent(size: frame.size, keyframe: frame.keyframe,
                                         latencyMillis: Double(clock.nowNanos() &- frame.captureNanos) / 1e6))
        }
        if sent.errors > 0 && now &- lastSendWarning > 5_000_000_000 {
            lastSendWarning = now
            if sent.busy > 0 {
                b.warnNetworkBusy("the local send queue is full: \(sent.busy) of \(sent.packets) packets of a frame dropped")
            } else {
                b.events.emit(.warning(.sendFailed, "packets to \(b.config.destination) are refused (is a receiver listening?)"))
            }
        }
    }

    /// Packetizes one encoded frame and sends it, each packet when ``PacketPacer`` says, and
    /// keeps each in the history for NACKs. Under congestion control `motion`'s budget holds the
    /// stream to 1.1 × the target with a tenth of a second of burst (a burst lands in the path's
    /// queue whole; 0.25 s of it made queues of 200–250 ms on a 1 or 0.5 Mbit/s path).
    /// (`detail` waits for its own bit budget before encoding, in `EncodeScheduler`.)
    private func packetize(_ data: UnsafeRawBufferPointer, _ frame: EncodedFrameQueue.Frame, protection base: Double,
                           at sendStart: UInt64) -> SentFrame {
        let b = broadcaster, clock = b.clock
        // The frame's rate is the encoder's: FEC comes on top of it (congestion control took its
        // share off the encoder's target), so the budget and the pacer make room for it.
        let fecShare = 1 + base
        let bitsPerSecond = Double(frame.bitsPerSecond)
        let budgetRate = Int(bitsPerSecond * Self.budgetHeadroom * fecShare)
        let burstBits = bitsPerSecond * Self.budgetBurstSeconds * fecShare
        // Until the receiver's transport feedback comes there is no congestion control to pace
        // for (ffmpeg, GStreamer and VLC as `--sdp` receivers send none): the plain pacer, so a
        // 1080p30 frame of 8 kB leaves at once instead of over 10 ms.
        let paced = b.congestion?.withLock { $0.hasFeedback } ?? false
        let paceBitsPerSecond = (paced ? bitsPerSecond * 2.5 : max(bitsPerSecond * 4, 8_000_000)) * fecShare
        pacer.startFrame(at: sendStart, rates: PacketPacer.Rates(
            paceBitsPerSecond: paceBitsPerSecond, unpacedBytes: paced ? 2400 : Self.unpacedBytes,
            budgetBitsPerSecond: budgetRate, burstBits: burstBits, networkLimited: frame.networkLimited))
        var sent = SentFrame()
        // A keyframe's loss costs the most (everything after it waits): twice the protection,
        // as libwebrtc gives key frames their own, higher FEC rate.
        let protection = frame.keyframe ? min(0.5, 2 * base) : base
        let protecting = protection > 0
        func out(_ packet: UnsafeMutableRawBufferPointer, keep: Bool = true) {
            let due = pacer.sendTime(bytes: packet.count, now: clock.nowNanos())
            while clock.nowNanos() < due && b.isRunning { clock.sleep(untilNanos: due) }
            pacer.sent(bytes: packet.count, at: clock.nowNanos())
            sent.octets += packet.count
            let rc = b.sendRTP(packet)  // stamps the transport-wide number: FEC protects the bytes as sent
            if rc != 0 {
                sent.errors += 1
                if rc == ENOBUFS || rc == EAGAIN { sent.busy += 1 }
            }
            if keep { b.history.withLock { _ = $0.store(UnsafeRawBufferPointer(packet), now: sendStart) } }
        }
        let buffer = packetBuffer
        sent.packets = UInt32(packetizer.packetize(frame: data, rtpTimestamp: frame.rtpTimestamp, temporalLayer: frame.temporalLayer,
                                                   into: buffer) { packet in
            let p = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<packet.count])
            out(p)
            if protecting { fec.add(UnsafeRawBufferPointer(p)) }
        })
        if protecting {
            // The FEC packets follow the frame's, numbered after them.
            // Plain mode: in the video stream, numbered after the frame's packets (as GStreamer
            // takes them). A room: a stream of their own, so no viewer sees holes in the video's
            // numbers (the relay gives FEC only to the viewers it helps).
            let count = fec.fecCount(protection: protection)
            let own = b.config.room != nil
            let first = own ? fecSequence : packetizer.reserveSequenceNumbers(count)
            if own { fecSequence &+= UInt16(truncatingIfNeeded: count) }
            fec.finish(protection: protection, payloadType: ULPFEC.payloadType, sequence: first, ssrc: own ? b.fecSSRC : nil,
                       transportSequenceID: packetizer.transportSequenceID, into: fecBuffer) { packet in
                out(packet, keep: !own)
                sent.packets += 1
                sent.fecPackets += 1
                sent.fecBytes += packet.count
            }
        }
        return sent
    }

    /// Sends a probe (congestion control asks how much more the path carries): the newest
    /// packets again, back to back at the probe's rate, each with a new transport-wide number
    /// and the cluster's tag. Receivers drop them as duplicates; their arrival says the rate.
    private func sendProbe(_ probe: ProbeCluster) {
        let b = broadcaster, clock = b.clock, buffer = probeBuffer
        let wanted = min(Self.maxProbePackets, probe.packets(of: 1200))
        let copied = b.history.withLock { $0.copyNewest(wanted, into: buffer, slotSize: 1500, lengths: &probeLengths) }
        guard copied > 0 else { return }
        let start = clock.nowNanos()
        var bytes = 0
        for i in 0..<wanted {
            let k = i % copied, length = probeLengths[k]
            if bytes > 0 {
                let due = start + UInt64(Double(bytes * 8) / probe.bitsPerSecond * 1e9)
                while clock.nowNanos() < due && b.isRunning { clock.sleep(untilNanos: due) }
            }
            _ = b.sendRTP(UnsafeMutableRawBufferPointer(rebasing: buffer[(k * 1500)..<(k * 1500 + length)]), probeCluster: probe.id)
            bytes += length
        }
        b.counters.withLock { $0.probesSent += 1; $0.probeBytes += bytes }
    }
}
