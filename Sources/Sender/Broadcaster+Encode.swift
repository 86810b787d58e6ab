import SRTP
import Congestion
import Events
import FoundationEssentials
import MediaCore
import Basics
import RTP
import VP8Codec
#if canImport(Glibc)
import Glibc
#endif

/// The encode thread: takes the newest picture from the mailbox, lets `EncodeScheduler` decide
/// (encode, keep for later, repeat, force a keyframe), encodes it with libvpx, and sends it as
/// paced RTP packets, keeping each in the history for NACKs.
extension Broadcaster {
    /// Bytes of a frame sent without pacing.
    static let unpacedBytes = 16_000

    /// What sending one encoded frame did.
    struct SentFrame {
        var packets: UInt32 = 0
        var octets = 0
        /// Packets the socket refused; `busy` of them because the local send queue was full.
        var errors = 0
        var busy = 0
        /// Time spent sending (pacing waits included), not encoding.
        var nanos: UInt64 = 0
        /// FEC packets among them, and their bytes.
        var fecPackets = 0
        var fecBytes = 0
    }

    func encodeLoop() {
        let recording = self.recording.withLock { $0 }
        var encoder: VP8Encoder?
        var scheduler = EncodeScheduler(settings: settings)
        var packetizer = VP8Packetizer(ssrc: ssrc, initialSequence: UInt16.random(in: 0...UInt16.max),
                                       initialPictureID: UInt16.random(in: 0...0x7FFF))
        if congestion != nil { packetizer.transportSequenceID = TransportWideSequence.defaultID }
        // In a room the relay forwards to each viewer the layers its link carries.
        packetizer.temporalLayers = config.room != nil
        var networkTarget = 0
        var adapter = ResolutionAdapter()
        var pacer = PacketPacer()
        let packetBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packetBuffer.deallocate() }
        // Forward error correction: each frame's packets kept as sent, then its FEC packets.
        let fec = FECFrame()
        // Probes resend the newest packets (made once: up to 16 of them).
        let probeBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.maxProbePackets * 1500, alignment: 16)
        defer { probeBuffer.deallocate() }
        var probeLengths: [Int] = []
        probeLengths.reserveCapacity(Self.maxProbePackets)
        var lastTimestamp: UInt32?
        var firstSent = false
        var lastSendWarning: UInt64 = 0
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        // The macroblocks to encode (what changed lately).
        var active = ActiveMacroblocks()

        while true {
            let g = liveGeneration.load(ordering: .sequentiallyConsistent)
            if g != generation {
                generation = g
                switch scheduler.apply(settings) {
                case .none:
                    break
                case .recreate:
                    encoder = nil  // re-created with the new settings; starts with a keyframe
                case .reconfigure:
                    reconfigure(&encoder, &scheduler)
                }
            }
            let target = self.networkTarget.load(ordering: .relaxed)
            if target != networkTarget {
                // The path is congestion controlled: `motion`'s keyframes are kept to 3 frames'
                // bits (a resize or a PLI must not fill a slow path's queue), and its rate, not
                // the opening's ceilings, bounds the frames from here.
                if networkTarget == 0, scheduler.settings.content == .motion {
                    encoder?.setMaxIntraBitratePercent(Self.congestedMaxIntraPercent)
                    encoder?.endOpening()
                }
                if networkTarget == 0 {
                    // What was sent before the path had a rate (the opening, the first keyframe)
                    // is not a debt the next frames pay by waiting, and not the size's fault.
                    pacer.reset()
                    adapter.pathStarted()
                }
                networkTarget = target
                if scheduler.setNetworkTarget(target == 0 ? nil : Bitrate(bitsPerSecond: target)) == .reconfigure {
                    reconfigure(&encoder, &scheduler)
                }
            }
            let before = clock.nowNanos()
            // While the capture has the picture (lent), wait for it to come back instead of
            // waking for a repeat with nothing to repeat.
            let lent = held.withLock { $0.lent }
            let incoming = mailbox.take(timeoutNanos: lent ? Self.lentWaitNanos : scheduler.wakeAt(now: before) &- before)
            if !isRunning { if let incoming { pool.recycle(incoming) }; break }
            let now = clock.nowNanos()
            // The new picture replaces the held one, and whatever is held is not lent from here to
            // the end of the pass (one lock: the capture cannot borrow it in between).
            let (picture, replaced) = held.withLock { h -> (VideoFrame?, VideoFrame?) in
                var replaced: VideoFrame?
                if let incoming {
                    if let old = h.frame, old !== incoming {
                        if !h.encodedAsNew { incoming.mergeChanges(from: old) }  // its changes are not encoded yet
                        replaced = old
                    }
                    h.frame = incoming
                    h.encodedAsNew = false
                    h.lent = false
                }
                h.encoding = h.frame != nil
                return (h.frame, replaced)
            }
            defer { held.withLock { $0.encoding = false } }
            if let replaced { pool.recycle(replaced) }
            let decision = scheduler.decide(newPicture: incoming != nil, havePicture: picture != nil,
                                            keyframeRequested: keyframeRequested.exchange(false, ordering: .relaxed),
                                            encoderExists: encoder != nil, now: now)
            guard case .encode(let isNew, let forceKeyframe, let staticThreshold) = decision, let frame = picture else { continue }
            let current = scheduler.settings
            if forceKeyframe { encoder?.requestKeyframe() }

            // (Re)create the encoder for the frame's size.
            if encoder == nil || encoder!.config.size != frame.size {
                do {
                    encoder = try VP8Encoder(config: encoderConfig(size: frame.size, current, bitrate: scheduler.told(), congested: networkTarget != 0))
                    counters.withLock { $0.outputSize = frame.size }
                } catch {
                    events.emit(.error(.encodeFailure, "\(error)"))
                    stop(.failed, detail: "\(error)")
                    break
                }
            }
            encoder!.setStaticThreshold(Int32(staticThreshold))
            // A new picture encodes what changed lately and skips the rest; a repeat refines all.
            let rows = frame.macroblockRows, columns = frame.macroblockColumns
            if isNew && !forceKeyframe
                && active.next(changes: frame.changesKnown ? UnsafePointer(frame.changes) : nil, columns: columns, rows: rows) {
                active.withMap { _ = encoder!.setActiveMap($0, rows: rows, columns: columns) }
            } else {
                encoder!.setActiveMap(nil, rows: rows, columns: columns)
            }
            if isNew { held.withLock { $0.encodedAsNew = true } }
            var ts = rtpTimestamp(at: isNew ? frame.timestampNanos : now)
            if let prev = lastTimestamp, Int32(bitPattern: ts &- prev) <= 0 { ts = prev &+ 1 }
            lastTimestamp = ts
            let started = clock.nowNanos()
            var produced = false, key = false
            var sent = SentFrame()
            do {
                fec.protection = congestion?.withLock { $0.fec.protection } ?? 0
                try encoder!.encode(frame, pts: Int64(ts &- rtpBase), duration: UInt(90_000 / max(current.fps, 1))) { data, info in
                    produced = true
                    key = key || info.isKeyframe
                    fec.keyframe = info.isKeyframe
                    recording?.video(data, keyframe: info.isKeyframe, size: PixelSize(width: frame.width, height: frame.height),
                                     timestampNanos: isNew ? frame.timestampNanos : now)
                    send(data, timestamp: ts, layer: info.temporalLayer ?? 0, bitrate: scheduler.bitrate, packetizer: &packetizer, buffer: packetBuffer,
                         pacer: &pacer, networkLimited: networkTarget != 0 && current.content == .motion && !info.isKeyframe,
                         fec: fec, into: &sent)
                }
            } catch {
                events.emit(.error(.encodeFailure, "\(error)"))
                counters.withLock { $0.encodeErrors += 1 }
                encoder = nil  // re-created on the next frame, which will be a keyframe
                continue
            }
            let encodeMillis = Double(clock.nowNanos() &- started &- sent.nanos) / 1e6
            scheduler.encoded(isNew: isNew, bytes: produced ? sent.octets : nil, keyframe: key, at: now)
            if key { active.touchAll(columns: columns, rows: rows) }  // coarse and all new: refine everything
            let quantizer = produced ? encoder?.lastQuantizer() : nil
            // `motion` under congestion control keeps its frame rate: a smaller picture when the
            // encoder cannot hold the path's rate at this size. Its FEC packets are not the
            // encoder's output (the target is the encoder's share, FEC's taken off): counted in,
            // 5 % loss (FEC at 15-19 %) read as an overshoot and scaled 1280 down to 640.
            if networkTarget != 0, current.content == .motion,
               let level = adapter.encoded(bits: (sent.octets - sent.fecBytes) * 8, keyframe: key, quantizer: quantizer,
                                          maxQuantizer: encoder?.maxQuantizer ?? 63, target: scheduler.bitrate.bitsPerSecond,
                                          fps: Double(max(current.fps, 1)), now: now) {
                scaleLevel.store(level, ordering: .relaxed)
            }
            counters.withLock { c in
                c.framesEncoded += 1
                if !isNew { c.repeatsEncoded += 1 }
                if c.encodeMillis.count < 512 { c.encodeMillis.append(encodeMillis) }
                if produced && c.sendMillis.count < 512 { c.sendMillis.append(Double(sent.nanos) / 1e6) }
                if produced {
                    c.framesSent += 1
                    if key { c.keyframesSent += 1 }
                    c.packetsSent &+= sent.packets
                    c.octetsSent &+= UInt32(truncatingIfNeeded: sent.octets - Int(sent.packets) * packetizer.headerSize)
                    c.bytesSent += sent.octets
                    c.fecPackets += sent.fecPackets
                    c.fecBytes += sent.fecBytes
                    c.lastRTPTimestamp = ts
                    if let quantizer {
                        c.quantizerSum += quantizer
                        c.quantizerFrames += 1
                    }
                }
                c.sendErrors += sent.errors
            }
            if produced, let probe = congestion?.withLock({ $0.takeProbe(now: clock.nowNanos()) }) {
                sendProbe(probe, buffer: probeBuffer, lengths: &probeLengths)
            }
            if produced && !firstSent {
                firstSent = true
                events.emit(FirstFrameSent(size: PixelSize(width: frame.width, height: frame.height), keyframe: key,
                                           latencyMillis: Double(clock.nowNanos() &- frame.timestampNanos) / 1e6))
            }
            if sent.errors > 0 && now &- lastSendWarning > 5_000_000_000 {
                lastSendWarning = now
                if sent.busy > 0 {
                    warnNetworkBusy("the local send queue is full: \(sent.busy) of \(sent.packets) packets of a frame dropped")
                } else {
                    events.emit(.warning(.sendFailed, "packets to \(config.destination) are refused (is a receiver listening?)"))
                }
            }
        }
        if let last = held.withLock({ h -> VideoFrame? in defer { h.frame = nil }; return h.frame }) { pool.recycle(last) }
    }

    /// How long the encode thread waits for a lent picture to come back before it looks again.
    static let lentWaitNanos: UInt64 = 100_000_000

    /// The most packets one probe resends.
    static let maxProbePackets = 16

    /// Sends a probe (congestion control asks how much more the path carries): the newest
    /// packets again, back to back at the probe's rate, each with a new transport-wide number
    /// and the cluster's tag. Receivers drop them as duplicates; their arrival says the rate.
    func sendProbe(_ probe: ProbeCluster, buffer: UnsafeMutableRawBufferPointer, lengths: inout [Int]) {
        let wanted = min(Self.maxProbePackets, probe.packets(of: 1200))
        let copied = history.withLock { $0.copyNewest(wanted, into: buffer, slotSize: 1500, lengths: &lengths) }
        guard copied > 0 else { return }
        let start = clock.nowNanos()
        var bytes = 0
        for i in 0..<wanted {
            let k = i % copied, length = lengths[k]
            if bytes > 0 {
                let due = start + UInt64(Double(bytes * 8) / probe.bitsPerSecond * 1e9)
                while clock.nowNanos() < due && isRunning { clock.sleep(untilNanos: due) }
            }
            _ = sendRTP(UnsafeMutableRawBufferPointer(rebasing: buffer[(k * 1500)..<(k * 1500 + length)]), probeCluster: probe.id)
            bytes += length
        }
        counters.withLock { $0.probesSent += 1; $0.probeBytes += bytes }
    }

    /// libvpx takes the scheduler's bit rate (the settings', or congestion control's target).
    func reconfigure(_ encoder: inout VP8Encoder?, _ scheduler: inout EncodeScheduler) {
        guard encoder != nil else { return }
        do {
            try encoder?.reconfigure(targetBitrateKbps: scheduler.told().kbps, content: scheduler.settings.content)
        } catch {
            events.emit(.warning(.encoderReconfigure, "\(error); re-creating it"))
            encoder = nil
        }
    }

    /// Packetizes one encoded frame and sends it, each packet when ``PacketPacer`` says, and
    /// keeps each in the history for NACKs. Under congestion control `motion`'s budget holds the
    /// stream to 1.1 × the target with a tenth of a second of burst (a burst lands in the path's
    /// queue whole; 0.25 s of it made queues of 200–250 ms on a 1 or 0.5 Mbit/s path). While a
    /// packet waits the encode thread waits with it, and the latest-frame mailbox skips the
    /// pictures meanwhile (libwebrtc's pacer queue does the same job). (`detail` waits for its
    /// own bit budget before encoding, in `EncodeScheduler`.)
    func send(_ data: UnsafeRawBufferPointer, timestamp: UInt32, layer: UInt8, bitrate: Bitrate, packetizer: inout VP8Packetizer,
              buffer: UnsafeMutableRawBufferPointer, pacer: inout PacketPacer, networkLimited: Bool, fec: FECFrame,
              into sent: inout SentFrame) {
        let sendStart = clock.nowNanos()
        // `bitrate` is the encoder's: FEC comes on top of it (congestion control took its share
        // off the encoder's target), so the budget and the pacer make room for it.
        let fecShare = 1 + fec.protection
        let budgetRate = Int(Double(bitrate.bitsPerSecond) * Self.budgetHeadroom * fecShare)
        let burstBits = Double(bitrate.bitsPerSecond) * Self.budgetBurstSeconds * fecShare
        // Until the receiver's transport feedback comes there is no congestion control to pace
        // for (ffmpeg, GStreamer and VLC as `--sdp` receivers send none): the plain pacer, so a
        // 1080p30 frame of 8 kB leaves at once instead of over 10 ms.
        let paced = congestion?.withLock { $0.hasFeedback } ?? false
        let paceBitsPerSecond = (paced ? Double(bitrate.bitsPerSecond) * 2.5 : Double(max(bitrate.bitsPerSecond * 4, 8_000_000))) * fecShare
        pacer.startFrame(at: sendStart, rates: PacketPacer.Rates(
            paceBitsPerSecond: paceBitsPerSecond, unpacedBytes: paced ? 2400 : Self.unpacedBytes,
            budgetBitsPerSecond: budgetRate, burstBits: burstBits, networkLimited: networkLimited))
        var frame = SentFrame()
        // A keyframe's loss costs the most (everything after it waits): twice the protection,
        // as libwebrtc gives key frames their own, higher FEC rate.
        let protection = fec.keyframe ? min(0.5, 2 * fec.protection) : fec.protection
        let protecting = protection > 0
        func out(_ packet: UnsafeMutableRawBufferPointer, keep: Bool = true) {
            let due = pacer.sendTime(bytes: packet.count, now: clock.nowNanos())
            while clock.nowNanos() < due && isRunning { clock.sleep(untilNanos: due) }
            pacer.sent(bytes: packet.count, at: clock.nowNanos())
            frame.octets += packet.count
            let rc = sendRTP(packet)  // stamps the transport-wide number: FEC protects the bytes as sent
            if rc != 0 {
                frame.errors += 1
                if rc == ENOBUFS || rc == EAGAIN { frame.busy += 1 }
            }
            if keep { history.withLock { _ = $0.store(UnsafeRawBufferPointer(packet), now: sendStart) } }
        }
        frame.packets = UInt32(packetizer.packetize(frame: data, rtpTimestamp: timestamp, temporalLayer: layer, into: buffer) { packet in
            let p = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<packet.count])
            out(p)
            if protecting { fec.encoder.add(UnsafeRawBufferPointer(p)) }
        })
        if protecting {
            // The FEC packets follow the frame's, numbered after them.
            // Plain mode: in the video stream, numbered after the frame's packets (as GStreamer
            // takes them). A room: a stream of their own, so no viewer sees holes in the video's
            // numbers (the relay gives FEC only to the viewers it helps).
            let count = fec.encoder.fecCount(protection: protection)
            let own = config.room != nil
            let first = own ? fec.sequence : packetizer.reserveSequenceNumbers(count)
            if own { fec.sequence &+= UInt16(truncatingIfNeeded: count) }
            fec.encoder.finish(protection: protection, payloadType: ULPFEC.payloadType, sequence: first, ssrc: own ? fecSSRC : nil,
                               transportSequenceID: packetizer.transportSequenceID, into: fec.buffer) { packet in
                out(packet, keep: !own)
                frame.packets += 1
                frame.fecPackets += 1
                frame.fecBytes += packet.count
            }
        }
        sent.packets += frame.packets
        sent.octets += frame.octets
        sent.errors += frame.errors
        sent.busy += frame.busy
        sent.fecPackets += frame.fecPackets
        sent.fecBytes += frame.fecBytes
        sent.nanos &+= clock.nowNanos() &- sendStart
    }

    /// The encode thread's FEC state: the protection for the frame being sent, the frame's
    /// packets, and a buffer for the FEC packets (made once).
    final class FECFrame {
        var protection = 0.0
        /// The next sequence number of a room's FEC stream.
        var sequence = UInt16.random(in: 0...UInt16.max)
        var keyframe = false
        var encoder = ULPFECEncoder()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 16)
        deinit { buffer.deallocate() }
    }

    /// The send budget under congestion control: its rate over the target, and its burst.
    static let budgetHeadroom = 1.1
    static let budgetBurstSeconds = 0.1

    /// `motion`'s largest keyframe under congestion control, in percent of an average frame.
    static let congestedMaxIntraPercent = 300

    func encoderConfig(size: PixelSize, _ s: LiveSettings, bitrate: Bitrate, congested: Bool = false) -> VP8EncoderConfig {
        var c = VP8EncoderConfig(size: size)
        if s.content == .motion {
            // A path under congestion control bounds keyframes by its rate. A plain RTP stream
            // (`--to`) not yet under it opens under quantizer ceilings instead (VP8Encoder's
            // OpeningCeiling): a finer first keyframe, as ffmpeg's and GStreamer's are. Not a
            // room's: its viewers' links are unknown, and a slow one must not get a large one.
            if congested { c.maxIntraBitratePercent = Self.congestedMaxIntraPercent } else if config.room == nil { c.openingCeiling = true }
        }
        c.fps = s.fps
        c.targetBitrateKbps = bitrate.kbps
        c.minBitrateKbps = s.minBitrate?.kbps
        c.keyframeIntervalSeconds = s.keyframeIntervalSeconds
        c.content = s.content
        // One thread up to 1080p: libvpx's row sync spins (x86 `pause` loops). On a busy 2-core
        // machine a second thread made encodes of a still slide take 250 ms instead of 15, and
        // on motion at 1080p30 the spin was 23 % of the sender's CPU (perf): one thread costs
        // 0.44 core there against 0.57, at the same quality in video mode (VP8Encoder's
        // screenContentMode). Above 1080p one thread cannot keep 30 fps.
        c.threads = size.area > 1920 * 1080 ? 2 : 1
        // libvpx real-time speed: positive = adapt the speed so an encode takes about
        // (16 − N)/16 of the frame time (8 gives it half, as ffmpeg's usual -cpu-used 8 does);
        // negative = a fixed speed. The bench showed 10 costing 5 dB on motion at 1080p30.
        c.cpuUsed = config.cpuUsed ?? (s.content == .motion ? 8 : 10)
        c.temporalLayers = config.room != nil ? 3 : 1
        return c
    }
}
