import Events
import MediaCore
import Basics
import RTPSession

/// The viewer's numbers as events: `stats` every second (the last second's rates, the
/// stream's state, running totals) and `stopped` (the summary), from the receive path's,
/// the audio's and lip sync's counters.
struct ViewerStatsReport {
    /// The running totals at the last `stats`, for the per-second rates.
    private struct Snapshot {
        var decoded = 0, bytes: Int64 = 0, lost: Int64 = 0, received: Int64 = 0

        init() {}

        init(_ s: ReceiverStats) {
            decoded = s.framesDecoded
            bytes = s.bytesReceived
            lost = s.packetsLost
            received = s.packetsReceived
        }
    }

    /// The totals at the last `stats` (nothing received before the first).
    private var previous = Snapshot()
    /// Whether lip sync is on (`--no-av-sync` turns it off).
    private let avSync: Bool

    init(avSync: Bool) {
        self.avSync = avSync
    }

    /// The `stats` event of the second that ends now.
    mutating func second(path: inout VideoReceivePath, now: UInt64, size: PixelSize, rttMillis: Double?, audio: AudioReceiver?,
                         sync: AVSync) -> ViewerStats {
        path.updateStats(now: now)
        let s = path.stats
        let current = Snapshot(s)
        defer { previous = current }
        return ViewerStats(
            fps: current.decoded - previous.decoded, kbps: Int((current.bytes - previous.bytes) * 8 / 1000), size: size,
            packetsReceived: Int(current.received), packetsLost: Int(current.lost),
            jitterMillis: path.jitterMillis, bufferMillis: path.bufferMillis,
            framesDecoded: s.framesDecoded, freezeCount: s.freezeCount,
            frameGapMillis: s.frameGap(now: now).map { (Double($0) / 1e5).rounded() / 10 },
            freezesDurationSeconds: (s.freezesDuration(now: now) * 1000).rounded() / 1000,
            nackCount: s.nackCount, pliCount: s.pliCount, rttMillis: rttMillis, audio: audioStats(audio, sync: sync))
    }

    /// The `stopped` event.
    /// - Parameters:
    ///   - packetsRejected: the datagrams the viewer refused before the receive path saw them.
    func summary(reason: ViewerStopReason, path: inout VideoReceivePath, now: UInt64, packetsRejected: Int, srtpRejected: Int? = nil, size: PixelSize,
                 rttMillis: Double?, recording: ViewerRecording?, durationSeconds: Double, audio: AudioReceiver?,
                 sync: AVSync) -> ViewerStopped {
        path.updateStats(now: now)
        let s = path.stats
        return ViewerStopped(
            reason: reason,
            framesDecoded: s.framesDecoded, keyframesDecoded: s.keyFramesDecoded,
            framesDropped: s.framesDropped, framesReceived: s.framesReceived,
            freezeCount: s.freezeCount, totalFreezesDurationSeconds: s.freezesDuration(now: now),
            packetsReceived: Int(s.packetsReceived), packetsLost: Int(s.packetsLost),
            jitterMillis: path.jitterMillis,
            nackCount: s.nackCount, pliCount: s.pliCount, idleProbes: path.idleProbes,
            rttMillis: rttMillis,
            packetsRejected: packetsRejected + path.packetsRejected + (srtpRejected ?? 0), srtpRejected: srtpRejected,
            decodeErrors: path.decodeErrors,
            packetsForeign: path.packetsForeign,
            timeToFirstFrameMillis: s.firstFrameTime.map { Double($0) / 1e6 },
            size: size,
            recordedFrames: recording?.videoFramesWritten ?? 0,
            durationSeconds: durationSeconds,
            recordedAudioPackets: recording?.audioPacketsWritten ?? 0,
            audio: audioStats(audio, sync: sync))
    }

    /// The audio's part of `stats` and `stopped` (nil without audio). Times in ms to 0.1.
    private func audioStats(_ audio: AudioReceiver?, sync: AVSync) -> ViewerAudioStats? {
        guard let a = audio else { return nil }
        let c = a.counters
        func ms(_ n: UInt64?) -> Double? { n.map { (Double($0) / 1e5).rounded() / 10 } }
        return ViewerAudioStats(
            avOffsetMillis: sync.offset.map { (Double($0) / 1e5).rounded() / 10 }, avSync: avSync,
            videoSyncDelayMillis: ms(sync.videoExtraDelay), audioSyncDelayMillis: ms(sync.audioExtraDelay),
            outputLatencyMillis: ms(a.outputLatencyNanos), outputFlushes: a.outputFlushes,
            jitterDelayMillis: ms(a.playoutDelayNanos), targetDelayMillis: ms(a.started ? a.targetDelayNanos : nil),
            packets: c.packets, decoded: c.decoded, fecRecovered: c.fecRecovered,
            concealed: c.concealed, late: c.late, silenceFrames: c.silenceFrames,
            packetsLost: Int(a.receive.map { $0.expected - $0.packetsReceived } ?? 0), playing: a.isPlaying)
    }
}
