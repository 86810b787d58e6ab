import AudioIO
import Logging
import OpusCodec
import RTCP
import RTP
import RTPSession
import Events
import MediaCore
import Basics
import Transport

/// The viewer's audio: Opus RTP (RFC 7587) in, decoded 20 ms frames out to PulseAudio.
///
/// Driven from the viewer's single thread: `handle` stores each packet in a small ring keyed
/// by sequence number (an adaptive playout delay, ``AudioPlayoutDelay``, absorbs the network's
/// jitter: ~20 ms on a LAN, more on a jittery path), `poll` plays out what is due — decoding the packet, or for a lost one the
/// in-band FEC copy carried by the packet after it, or libopus's concealment (PLC) when that
/// is missing too. Silence the sender did not send (DTX, a pause) is played as silence. No
/// allocation per packet: the ring and the PCM buffer are allocated once.
final class AudioReceiver {
    struct Counters: Sendable, Equatable {
        var packets = 0
        var decoded = 0
        var fecRecovered = 0
        var concealed = 0
        var late = 0
        var silenceFrames = 0
    }

    let payloadType: UInt8
    private(set) var ssrc: UInt32?
    private(set) var receive: ReceiveStatistics?
    private(set) var counters = Counters()
    private(set) var lastSenderReport: SenderReport?
    private let decoder: OpusFrameDecoder
    private let playback: PulsePlayback?
    /// Set when writing to PulseAudio failed: the audio is then received but no longer played.
    private var playbackFailed = false
    private let logger: Logger

    private static let slots = 64
    private static let maxPacket = 1500
    private static let frameTicks: UInt32 = 960  // 20 ms at 48 kHz
    /// The playout delay's estimator, and when it was last shortened.
    private var delay = AudioPlayoutDelay()
    private var lastShrink: UInt64 = 0
    /// Whether the last frame played was silence (a shorter delay is applied there unheard).
    private var lastSilent = false
    private var stored = [Bool](repeating: false, count: slots)
    private var seqs = [UInt16](repeating: 0, count: slots)
    private var stamps = [UInt32](repeating: 0, count: slots)
    private var lengths = [Int](repeating: 0, count: slots)
    /// Packet storage, one `maxPacket` slot per ring entry (raw memory: `packet(_:)` hands out
    /// views of it, which must not outlive a closure the way an Array's would).
    private let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * maxPacket, alignment: 16)
    private let pcm = UnsafeMutableBufferPointer<Float>.allocate(capacity: 5760 * 2)

    /// Playout state: the next sequence number and RTP time to play, and the local time
    /// RTP time `baseTicks` plays at.
    private var nextSeq: UInt16 = 0
    private var nextTicks: Int64 = 0
    private var baseTicks: Int64 = 0
    private var baseNanos: UInt64 = 0
    private(set) var started = false
    private var gapFrames = 0
    private var unwrapper = TimestampUnwrapper()
    /// Lip sync: how much later than the playout delay the audio plays (see ``extraDelay``), and
    /// audio still to be skipped after that delay was shortened.
    private var extra: UInt64 = 0
    private var skipNanos: UInt64 = 0
    /// The last frame written to PulseAudio: its RTP timestamp and when it will be heard.
    private var lastHeard: (rtpTimestamp: UInt32, at: UInt64)?

    /// The last frame written to PulseAudio since the previous call, and when it will be heard.
    func takeHeard() -> (rtpTimestamp: UInt32, at: UInt64)? {
        defer { lastHeard = nil }
        return lastHeard
    }

    init(payloadType: UInt8, playback: PulsePlayback?, logger: Logger) throws {
        self.payloadType = payloadType
        self.playback = playback
        self.logger = logger
        decoder = try OpusFrameDecoder()
    }

    deinit {
        playback?.stop()
        pcm.deallocate()
        bytes.deallocate()
    }

    var isPlaying: Bool { playback != nil && !playbackFailed }

    /// Stops playing (idempotent): closes the PulseAudio stream and its mainloop thread.
    func stopPlayback() {
        playback?.stop()
    }

    /// Delay added to the playout for lip sync (ns). Lengthening it holds the audio back (one
    /// short gap); shortening it skips that much audio, since playing faster would only fill
    /// PulseAudio's buffer and be heard just as late.
    var extraDelay: UInt64 {
        get { extra }
        set {
            if newValue >= extra {
                baseNanos += newValue - extra
            } else {
                let d = extra - newValue
                baseNanos = baseNanos >= d ? baseNanos - d : 0
                skipNanos += d
            }
            extra = newValue
        }
    }

    /// PulseAudio's buffer and the sink's latency (ns), when known.
    var outputLatencyNanos: UInt64? { playback?.latencyNanos }
    /// Times PulseAudio's buffer was flushed because it held too much.
    var outputFlushes: Int { playback?.flushCount ?? 0 }

    /// Follows a new sender (a new SSRC): playout starts again.
    private func reset(ssrc: UInt32) {
        self.ssrc = ssrc
        var config = ReceiveStatistics.Configuration()
        config.clockRate = 48_000
        receive = ReceiveStatistics(ssrc: ssrc, configuration: config)
        for i in stored.indices { stored[i] = false }
        started = false
        unwrapper = TimestampUnwrapper()
        lastSenderReport = nil
        lastHeard = nil
        skipNanos = 0
        delay.reset()
    }

    private static func mediaNanos(_ ticks: Int64) -> Int64 { ticks * 1_000_000 / 48 }

    /// The jitter delay played now (ns): how long after the fastest recent packet's arrival its
    /// audio is played, less the lip-sync delay.
    var playoutDelayNanos: UInt64? {
        guard started, let fastest = delay.minTransit else { return nil }
        let d = Int64(bitPattern: baseNanos) - Self.mediaNanos(baseTicks) - fastest - Int64(extra)
        return UInt64(max(d, 0))
    }

    /// The jitter delay the estimator asks for (ns).
    var targetDelayNanos: UInt64 { UInt64(delay.targetDelay) }

    /// Moves the playout toward the estimator's target. Longer at once (a short gap now rather
    /// than packets arriving after their turn); shorter by skipping, in silence when there is
    /// some, else at most 20 ms every 2 s.
    private func adjustDelay(now: UInt64) {
        guard let fastest = delay.minTransit else { return }
        let wanted = Self.mediaNanos(baseTicks) + fastest + delay.targetDelay + Int64(extra)
        let diff = wanted - Int64(bitPattern: baseNanos)
        if diff > 5_000_000 {
            baseNanos += UInt64(diff)
        } else if diff < -10_000_000, lastSilent || now &- lastShrink > 2_000_000_000 {
            let d = UInt64(min(-diff, lastSilent ? 200_000_000 : 20_000_000))
            baseNanos = baseNanos >= d ? baseNanos - d : 0
            skipNanos += d
            lastShrink = now
        }
    }

    /// Takes one audio RTP packet that arrived at `now`.
    func handle(header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64) {
        if ssrc != header.ssrc { reset(ssrc: header.ssrc) }
        counters.packets += 1
        receive?.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now, payloadBytes: payload.count)
        let ticks = unwrapper.unwrap(header.timestamp)
        delay.onPacket(mediaNanos: Self.mediaNanos(ticks), arrival: now)
        if !started {
            started = true
            nextSeq = header.sequenceNumber
            nextTicks = ticks
            baseTicks = ticks
            baseNanos = now + UInt64(delay.targetDelay) + extra
        } else if Int16(bitPattern: header.sequenceNumber &- nextSeq) < 0 {
            counters.late += 1  // its turn has passed (played as FEC or PLC)
            return
        }
        guard payload.count <= Self.maxPacket else { return }
        let i = Int(header.sequenceNumber) % Self.slots
        stored[i] = true
        seqs[i] = header.sequenceNumber
        stamps[i] = header.timestamp
        lengths[i] = payload.count
        UnsafeMutableRawBufferPointer(rebasing: bytes[(i * Self.maxPacket)...]).copyMemory(from: payload)
    }

    func onSenderReport(_ sr: SenderReport, arrival: UInt64) {
        guard sr.ssrc == ssrc else { return }
        receive?.onSenderReport(sr, arrival: arrival)
        lastSenderReport = sr
    }

    private func playTime(_ ticks: Int64) -> UInt64 {
        let offset = (ticks - baseTicks) * 1_000_000 / 48
        return offset >= 0 ? baseNanos + UInt64(offset) : baseNanos
    }

    /// When `poll` next has a frame to play, or nil.
    var nextWakeup: UInt64? { started ? playTime(nextTicks) : nil }

    private func slot(_ seq: UInt16) -> Int? {
        let i = Int(seq) % Self.slots
        return stored[i] && seqs[i] == seq ? i : nil
    }

    private func packet(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[(i * Self.maxPacket)..<(i * Self.maxPacket + lengths[i])])
    }

    /// The nearest packet after `seq` already here (so `seq` was lost, not silence): how many
    /// sequence numbers on, and its RTP time.
    private func nextStored(after seq: UInt16) -> (distance: Int, ticks: Int64)? {
        var best: (distance: Int, ticks: Int64)?
        for i in 0..<Self.slots where stored[i] {
            let d = Int(Int16(bitPattern: seqs[i] &- seq))
            if d > 0, d < best?.distance ?? .max { best = (d, unwrapper.extended(stamps[i])) }
        }
        return best
    }

    /// Plays every frame due at `now`.
    ///
    /// DTX and pauses consume no sequence numbers, so a missing packet with nothing after it
    /// may be silence, not loss: the first 40 ms are concealed (PLC), then silence is played
    /// and the sequence number kept, until a packet says which it was.
    func poll(now: UInt64) {
        guard started else { return }
        var budget = 50  // at most 1 s per call (after a stall, skip rather than burst)
        adjustDelay(now: now)
        while budget > 0, playTime(nextTicks) <= now {
            budget -= 1
            var n = 0
            let ticks = nextTicks
            if let i = slot(nextSeq) {
                let ticks = unwrapper.extended(stamps[i])
                if ticks > nextTicks {
                    // The sender sent nothing for this 20 ms (DTX, pause): silence.
                    pcm.update(repeating: 0)
                    counters.silenceFrames += 1
                    nextTicks += Int64(Self.frameTicks)
                    lastSilent = true
                    play(960, ticks: ticks, now: now)
                    continue
                }
                n = (try? decoder.decode(packet(i), into: pcm)) ?? 0
                stored[i] = false
                counters.decoded += 1
                gapFrames = 0
                nextSeq &+= 1
            } else if let later = nextStored(after: nextSeq) {
                if later.ticks - Int64(later.distance) * Int64(Self.frameTicks) < nextTicks {
                    // Lost, and its turn was already played (concealed while nothing said it
                    // was lost rather than silence): skip it, or the sound would slip 20 ms.
                    nextSeq &+= 1
                    continue
                }
                // Lost: its FEC copy rides in the next packet; else conceal.
                if let j = slot(nextSeq &+ 1) {
                    n = (try? decoder.decodeFEC(from: packet(j), into: pcm)) ?? 0
                    counters.fecRecovered += 1
                } else {
                    n = (try? decoder.conceal(into: pcm)) ?? 0
                    counters.concealed += 1
                }
                nextSeq &+= 1
            } else if gapFrames < 2 {
                n = (try? decoder.conceal(into: pcm)) ?? 0
                counters.concealed += 1
                gapFrames += 1
            } else {
                pcm.update(repeating: 0)
                n = 960
                counters.silenceFrames += 1
                gapFrames += 1
            }
            lastSilent = gapFrames > 2
            nextTicks += Int64(Self.frameTicks)
            play(n, ticks: ticks, now: now)
        }
        if budget == 0 {
            // Far behind (the machine stalled): start again from what comes next.
            baseTicks = nextTicks
            baseNanos = now + UInt64(delay.targetDelay) + extra
        }
    }

    private func play(_ frames: Int, ticks: Int64, now: UInt64) {
        guard frames > 0, let playback, !playbackFailed else { return }
        if skipNanos >= 10_000_000 {
            // The lip-sync delay was shortened: this frame is dropped instead of played.
            skipNanos -= min(skipNanos, UInt64(frames) * 1_000_000 / 48)
            return
        }
        let latency = playback.latencyNanos
        if !playback.write(UnsafeBufferPointer(rebasing: pcm[0..<(frames * 2)])) {
            playbackFailed = true
            logger.warning("audio playback stopped: the PulseAudio stream failed (the server went away?); the audio is still received and recorded")
            return
        }
        if let latency { lastHeard = (UInt32(truncatingIfNeeded: ticks), now + latency) }
    }

    /// The receiver-report block for this stream, or nil before any packet.
    func reportBlock(now: UInt64) -> ReceptionReport? {
        guard var r = receive else { return nil }
        let block = r.makeReport(now: now)
        receive = r
        return block
    }
}
