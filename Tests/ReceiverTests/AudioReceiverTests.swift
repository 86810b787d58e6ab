import Foundation
import Logging
import OpusCodec
import RTP
import Testing
@testable import Receiver

/// The viewer's audio playout, with an injected clock and real libopus packets.
@Suite struct AudioReceiverTests {
    static let ms: UInt64 = 1_000_000

    /// Opus packets of a 440 Hz tone, 20 ms each.
    static func packets(_ count: Int) throws -> [[UInt8]] {
        let enc = try OpusFrameEncoder(config: OpusEncoderConfig())
        var out: [[UInt8]] = []
        var pcm = [Float](repeating: 0, count: 1920)
        var buf = [UInt8](repeating: 0, count: 1500)
        for f in 0..<count {
            for i in 0..<960 {
                let v = Float(0.25 * sin(2 * Double.pi * 440 * Double(f * 960 + i) / 48_000))
                pcm[2 * i] = v
                pcm[2 * i + 1] = v
            }
            let n = try pcm.withUnsafeBufferPointer { p in try buf.withUnsafeMutableBytes { try enc.encode(p, into: $0) } }
            out.append(Array(buf[0..<n]))
        }
        return out
    }

    func feed(_ r: AudioReceiver, _ packets: [[UInt8]], skip: Set<Int> = [], start: UInt64 = 1_000 * ms) {
        var now = start
        for (i, p) in packets.enumerated() {
            now = start + UInt64(i) * 20 * Self.ms
            r.poll(now: now)
            guard !skip.contains(i) else { continue }
            let h = RTPHeader(payloadType: 111, sequenceNumber: UInt16(truncatingIfNeeded: 65_500 + i),
                              timestamp: UInt32(truncatingIfNeeded: 4_294_960_000 + UInt64(i) * 960), ssrc: 7)
            p.withUnsafeBytes { r.handle(header: h, payload: $0, now: now) }
        }
        // Up to the last one's turn (whatever the adaptive playout delay is by now), not the next.
        func played() -> Int { r.counters.decoded + r.counters.fecRecovered + r.counters.concealed }
        while played() < packets.count, let due = r.nextWakeup { r.poll(now: max(due, now)) }
    }

    @Test func everyPacketIsDecodedInOrderAcrossTheWrap() throws {
        let r = try AudioReceiver(payloadType: 111, playback: nil, logger: Logger(label: "t"))
        feed(r, try Self.packets(100))
        #expect(r.counters.decoded == 100, "\(r.counters)")
        #expect(r.counters.late == 0 && r.counters.concealed == 0 && r.counters.fecRecovered == 0, "\(r.counters)")
        // Packets come like clockwork: the playout delay shrinks from its first 60 ms toward 20.
        #expect(r.playoutDelayNanos! < 60 * Self.ms, "\(r.playoutDelayNanos!)")
    }

    /// Packets arriving 0–40 ms late at random: the playout delay grows to hold them, so after
    /// the first second none is late and nothing is concealed.
    @Test func jitterGrowsThePlayoutDelaySoNoPacketIsLate() throws {
        let r = try AudioReceiver(payloadType: 111, playback: nil, logger: Logger(label: "t"))
        let packets = try Self.packets(300)
        var rng = SystemRandomNumberGenerator()
        var arrivals = packets.indices.map { i in 1_000 * Self.ms + UInt64(i) * 20 * Self.ms + UInt64.random(in: 0...40, using: &rng) * Self.ms }
        // The first second steady (the estimator warms up on it).
        for i in 0..<50 { arrivals[i] = 1_000 * Self.ms + UInt64(i) * 20 * Self.ms }
        let order = arrivals.indices.sorted { arrivals[$0] < arrivals[$1] }
        var lateAfterWarmup = 0
        for i in order {
            let now = arrivals[i]
            while let due = r.nextWakeup, due <= now { r.poll(now: due) }
            let before = r.counters.late
            let h = RTPHeader(payloadType: 111, sequenceNumber: UInt16(i), timestamp: UInt32(i * 960), ssrc: 3)
            packets[i].withUnsafeBytes { r.handle(header: h, payload: $0, now: now) }
            if i >= 100 { lateAfterWarmup += r.counters.late - before }
        }
        #expect(lateAfterWarmup <= 3, "\(r.counters)")
        #expect(r.targetDelayNanos >= 40 * Self.ms, "\(r.targetDelayNanos)")
    }

    @Test func aLostPacketIsRecoveredFromTheNextOnesFEC() throws {
        let r = try AudioReceiver(payloadType: 111, playback: nil, logger: Logger(label: "t"))
        feed(r, try Self.packets(100), skip: [40, 70, 71])
        #expect(r.counters.decoded == 97, "\(r.counters)")
        // 40 and 71 come back from the FEC of 41 and 72; 70's successor is lost too: concealed.
        #expect(r.counters.fecRecovered == 2, "\(r.counters)")
        #expect(r.counters.concealed == 1, "\(r.counters)")
    }

    /// DTX: the sender skips silent frames (timestamps jump, sequence numbers do not).
    @Test func silenceTheSenderDidNotSendIsPlayedAsSilenceNotLoss() throws {
        let r = try AudioReceiver(payloadType: 111, playback: nil, logger: Logger(label: "t"))
        let packets = try Self.packets(20)
        // 10 packets, then 1 s of DTX (50 frames not sent), then 10 more; polled every 20 ms
        // as the viewer's loop does.
        let frames = Array(0..<10) + Array(60..<70)
        var now: UInt64 = 0
        for tick in 0..<80 {
            now = 1_000 * Self.ms + UInt64(tick) * 20 * Self.ms
            r.poll(now: now)
            if let i = frames.firstIndex(of: tick) {
                let h = RTPHeader(payloadType: 111, sequenceNumber: UInt16(100 + i), timestamp: UInt32(tick * 960), ssrc: 9)
                packets[i].withUnsafeBytes { r.handle(header: h, payload: $0, now: now) }
            }
        }
        #expect(r.counters.decoded == 20, "\(r.counters)")
        #expect(r.counters.late == 0, "\(r.counters)")
        // Each silence starts with at most 40 ms of concealment (2 frames: after frame 9 and after
        // the last one), then plays silence; nothing is lost and no sequence number is skipped.
        #expect(r.counters.concealed == 4 && r.counters.silenceFrames >= 50, "\(r.counters)")
    }
}
