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
/// (encode, keep for later, repeat, force a keyframe), encodes it with libvpx, and hands the
/// frame to the send stage (``SendStage``, its own thread) through ``EncodedFrameQueue``. It
/// never waits for the pacer: it waits for room in the queue before it takes a picture, so the
/// picture it encodes is the newest when the send stage can take another.
extension Broadcaster {
    /// The video packetizer: made once, owned by the send stage; the encode thread keeps a copy
    /// to know what a frame will cost on the wire (``VP8Packetizer/wireSize(frameBytes:)``).
    func makePacketizer() -> VP8Packetizer {
        var packetizer = VP8Packetizer(ssrc: ssrc, initialSequence: UInt16.random(in: 0...UInt16.max),
                                       initialPictureID: UInt16.random(in: 0...0x7FFF))
        if congestion != nil { packetizer.transportSequenceID = TransportWideSequence.defaultID }
        // In a room the relay forwards to each viewer the layers its link carries.
        packetizer.temporalLayers = config.room != nil
        return packetizer
    }

    func encodeLoop(sizing: VP8Packetizer) {
        let recording = self.recording.withLock { $0 }
        var encoder: VP8Encoder?
        var scheduler = EncodeScheduler(settings: settings)
        var networkTarget = 0
        var adapter = ResolutionAdapter()
        var generation = liveGeneration.load(ordering: .sequentiallyConsistent)
        // The macroblocks to encode (what changed lately).
        var active = ActiveMacroblocks()
        var lastTimestamp: UInt32?
        /// The quantizer of the last frame encoded (refinement halves it).
        var lastQuantizer: Int?
        var timeline = EncoderTimeline()

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
                // What was sent before the path had a rate is not the size's fault.
                if networkTarget == 0 { adapter.pathStarted() }
                networkTarget = target
                if scheduler.setNetworkTarget(target == 0 ? nil : Bitrate(bitsPerSecond: target)) == .reconfigure {
                    reconfigure(&encoder, &scheduler)
                }
            }
            // The send stage is a frame behind (the pacer holds one back): wait for it, not for
            // a picture that would be stale by the time it could go.
            if !sendQueue.waitForRoom(timeoutNanos: Self.lentWaitNanos) {
                if !isRunning { break }
                continue
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
            var keyframeNext = forceKeyframe
            if encoder == nil || encoder!.config.size != frame.size {
                keyframeNext = true
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
            // Refining a still `detail` picture (a repeat at threshold 1): each repeat at most
            // half the last frame's quantizer, down to 0. libvpx's one-pass rate control
            // plans screen content coarsely (its model overestimates sizes) and after a
            // keyframe it had the opening slide at quantizer 42, then 16, 3.5 over three
            // seconds; the bits a still screen does not spend go to it instead.
            // Only where the path has room (not under congestion control below 1 Mbit/s): the
            // ceilings overrule rate control, and behind a 500 kbit/s bottleneck quantizer-0
            // repeats of a 1080p slide overflowed the path (the viewer's last picture 36.5 dB).
            let roomy = networkTarget == 0 || networkTarget >= Self.roomForCeilings
            let refining = current.content == .detail && !isNew && !forceKeyframe && staticThreshold == 1 && roomy
            // A `detail` keyframe at most quantizer 24: libvpx planned the bench's opening
            // slide at 40 kB and 36.7 dB, blurred text for the first 0.8 s; capped, 76 kB and
            // 47.2 dB, sharp (60 dB) after 0.67 s, and the first second's bits no more (1.7
            // Mbit/s either way: the refinement after it has less to do).
            let sharpKeyframe = keyframeNext && current.content == .detail && roomy
            encoder!.setRefineCeiling(refining ? lastQuantizer.map { $0 / 2 } : sharpKeyframe ? Self.detailKeyframeQuantizer : nil)
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
            timeline.captured(counters.withLock { $0.framesCaptured }, at: now)
            let pts = timeline.next(rtp: ts, budgeted: networkTarget != 0 && current.content == .motion, fps: current.fps)
            let started = clock.nowNanos()
            var produced = false, key = false
            var wire = WireCost()
            let protection = congestion?.withLock { $0.fec.protection } ?? 0
            let size = PixelSize(width: frame.width, height: frame.height)
            do {
                try encoder!.encode(frame, pts: pts, duration: UInt(90_000 / max(current.fps, 1))) { data, info in
                    produced = true
                    key = key || info.isKeyframe
                    recording?.video(data, keyframe: info.isKeyframe, size: size, timestampNanos: isNew ? frame.timestampNanos : now)
                    wire.add(WireCost(frameBytes: data.count, keyframe: info.isKeyframe, protection: protection, sizing: sizing))
                    sendQueue.push(data, EncodedFrameQueue.Frame(
                        rtpTimestamp: ts, temporalLayer: info.temporalLayer ?? 0, keyframe: info.isKeyframe,
                        bitsPerSecond: scheduler.bitrate.bitsPerSecond,
                        networkLimited: networkTarget != 0 && current.content == .motion && !info.isKeyframe,
                        size: size, captureNanos: frame.timestampNanos))
                }
            } catch {
                events.emit(.error(.encodeFailure, "\(error)"))
                counters.withLock { $0.encodeErrors += 1 }
                encoder = nil  // re-created on the next frame, which will be a keyframe
                continue
            }
            let encodeMillis = Double(clock.nowNanos() &- started) / 1e6
            let quantizer = produced ? encoder?.lastQuantizer() : nil
            if let quantizer { lastQuantizer = quantizer }
            scheduler.encoded(isNew: isNew, bytes: produced ? wire.media + wire.fec : nil, keyframe: key, quantizer: quantizer, at: now)
            if key { active.touchAll(columns: columns, rows: rows) }  // coarse and all new: refine everything
            // `motion` under congestion control keeps its frame rate: a smaller picture when the
            // encoder cannot hold the path's rate at this size. Its FEC packets are not the
            // encoder's output (the target is the encoder's share, FEC's taken off): counted in,
            // 5 % loss (FEC at 15-19 %) read as an overshoot and scaled 1280 down to 640.
            if networkTarget != 0, current.content == .motion,
               let level = adapter.encoded(bits: wire.media * 8, keyframe: key, quantizer: quantizer,
                                          maxQuantizer: encoder?.maxQuantizer ?? 63, target: scheduler.bitrate.bitsPerSecond,
                                          fps: Double(max(current.fps, 1)), now: now) {
                scaleLevel.store(level, ordering: .relaxed)
            }
            counters.withLock { c in
                c.framesEncoded += 1
                if !isNew { c.repeatsEncoded += 1 }
                if c.encodeMillis.count < 512 { c.encodeMillis.append(encodeMillis) }
                if let quantizer {
                    c.quantizerSum += quantizer
                    c.quantizerFrames += 1
                }
            }
        }
        sendQueue.close()
        if let last = held.withLock({ h -> VideoFrame? in defer { h.frame = nil }; return h.frame }) { pool.recycle(last) }
    }

    /// How long the encode thread waits for a lent picture to come back (or for room in the
    /// send queue) before it looks again.
    static let lentWaitNanos: UInt64 = 100_000_000

    /// What an encoded frame costs on the wire, known as it is encoded (the send stage sends it
    /// later): its packets with their headers, as the packetizer splits it, and an estimate of
    /// the FEC packets the send stage will add at `protection` (twice that for a keyframe, as
    /// ``SendStage`` gives it) — what the bit budget and the resolution adapter count.
    struct WireCost: Equatable {
        var media = 0
        var fec = 0

        init() {}

        init(frameBytes: Int, keyframe: Bool, protection: Double, sizing: VP8Packetizer) {
            let (packets, bytes) = sizing.wireSize(frameBytes: frameBytes)
            media = bytes
            let p = keyframe ? min(0.5, 2 * protection) : protection
            if packets > 0 && p > 0 {
                // An FEC packet is as long as the longest it protects, plus its own headers.
                let longest = (bytes + packets - 1) / packets
                fec = ULPFEC.fecCount(media: packets, protection: p) * (longest + ULPFEC.headerSize + 8)
            }
        }

        mutating func add(_ other: WireCost) {
            media += other.media
            fec += other.fec
        }
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

    /// The coarsest quantizer of a `detail` keyframe where the path has room (0–63).
    static let detailKeyframeQuantizer = 24
    /// Under congestion control, the target (bit/s) from which `detail`'s keyframe and
    /// refinement ceilings apply.
    static let roomForCeilings = 1_000_000

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
