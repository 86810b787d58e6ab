import RTCP
import RTP
import RTPSession
import Room
import Testing
@testable import Receiver

/// The screen stream's receive path, driven with explicit times: no sockets, no clock.
@Suite struct VideoReceivePathTests {
    static let ms: UInt64 = 1_000_000
    /// Any start: a monotonic clock is far from 0.
    static let t0: UInt64 = 50_000 * ms
    static let screen: UInt32 = 0xA11CE
    static let screenAudio: UInt32 = 0xA0D10

    /// A one-packet VP8 frame (RFC 7741: descriptor S = 1, PartID 0; VP8 header P bit 0 for a
    /// keyframe), its RTP timestamp `3000 × (seq − 100)` (30 fps from sequence number 100).
    @discardableResult
    func send(_ path: inout VideoReceivePath, seq: UInt16, keyframe: Bool = false, ssrc: UInt32 = screen,
              payloadType: UInt8 = 96, at now: UInt64) -> VideoReceivePath.Outcome {
        let header = RTPHeader(marker: true, payloadType: payloadType, sequenceNumber: seq,
                               timestamp: UInt32(truncatingIfNeeded: (Int(seq) - 100) * 3000), ssrc: ssrc)
        let payload: [UInt8] = [0x10, keyframe ? 0x00 : 0x01, 0x2A, 0x2A]
        return payload.withUnsafeBytes { path.receive(header, payload: $0, now: now) }
    }

    /// Releases every frame due at `now`, decoded as `decoded`; returns their RTP timestamps
    /// and whether a PLI was asked for.
    func playOut(_ path: inout VideoReceivePath, at now: UInt64,
                 decoded: VideoReceivePath.Decoded = .picture) -> (timestamps: [UInt32], pli: Bool) {
        var timestamps: [UInt32] = []
        var pli = false
        while true {
            let r = path.playOut(now: now) { frame in
                timestamps.append(frame.rtpTimestamp)
                return decoded
            }
            pli = pli || r.pli
            if !r.released { return (timestamps, pli) }
        }
    }

    func plainPath() -> VideoReceivePath {
        VideoReceivePath(payloadType: 96, clockRate: 90_000, inRoom: false, startedAt: Self.t0)
    }

    /// A room path subscribed to `screen` (and its audio).
    func roomPath() -> VideoReceivePath {
        var path = VideoReceivePath(payloadType: 96, clockRate: 90_000, inRoom: true, startedAt: Self.t0)
        let isNew = path.subscribed(to: [
            StreamInfo(kind: .screen, ssrc: Self.screen, pt: 96, codec: "VP8", clock: 90_000),
            StreamInfo(kind: .audio, ssrc: Self.screenAudio, pt: 111, codec: "opus", clock: 48_000, channels: 2),
        ])
        #expect(isNew)
        return path
    }

    @Test func aGapIsNACKedAfterTheReorderWaitAndAgainAfterAnRTT() {
        let ms = Self.ms, t0 = Self.t0
        var path = plainPath()
        #expect(send(&path, seq: 100, keyframe: true, at: t0) == .newSender(previous: nil))
        #expect(send(&path, seq: 101, at: t0 + 33 * ms) == .accepted)
        #expect(send(&path, seq: 103, at: t0 + 100 * ms) == .accepted)  // 102 is missing
        #expect(playOut(&path, at: t0 + 100 * ms).timestamps == [0, 3000])
        // Not at once (it may be reordered): 5 ms after the hole was seen, the next wakeup.
        #expect(path.nextWakeup == t0 + 105 * ms)
        #expect(path.poll(now: t0 + 104 * ms) == .init())
        #expect(path.poll(now: t0 + 105 * ms) == .init(nack: true))
        #expect(path.nacks == [102])
        #expect(path.stats.nackCount == 1)
        // Not again before the answer could have come (the assumed RTT, 100 ms)...
        #expect(path.poll(now: t0 + 199 * ms) == .init())
        // ...then again, with an idle probe for 104 (nothing newer came for 100 ms), which is
        // not a loss.
        #expect(path.poll(now: t0 + 205 * ms) == .init(nack: true))
        #expect(path.nacks == [102, 104])
        #expect(path.stats.nackCount == 2)
        // The answer arrives: the hole is repaired and not asked for again.
        #expect(send(&path, seq: 102, at: t0 + 250 * ms) == .accepted)
        #expect(path.poll(now: t0 + 400 * ms) == .init(nack: true))
        #expect(path.nacks == [104])  // the next idle probe only
        #expect(path.stats.nackCount == 2)
        #expect(playOut(&path, at: t0 + 1000 * ms).timestamps == [6000, 9000])
        #expect(path.stats.pliCount == 0)
    }

    @Test func aFrameThatCannotBeRepairedAsksForOneKeyframePerThrottle() throws {
        let ms = Self.ms, t0 = Self.t0
        var path = plainPath()
        send(&path, seq: 100, keyframe: true, at: t0)
        send(&path, seq: 102, at: t0 + 1 * ms)  // 101 never comes
        var plis: [UInt64] = []
        var now = t0 + 2 * ms
        while now < t0 + 2000 * ms {
            if path.poll(now: now).pli { plis.append(now) }
            _ = playOut(&path, at: now)
            now += 10 * ms
        }
        // Given up after a second (retries, then its age): one PLI then, and while the
        // keyframe does not come, one more every 300 ms, never sooner.
        let first = try #require(plis.first)
        #expect(first >= t0 + 1000 * ms && first <= t0 + 1020 * ms, "first PLI at \(first - t0) ns")
        #expect(zip(plis, plis.dropFirst()).allSatisfy { $1 - $0 == VideoReceivePath.pliInterval }, "\(plis.map { ($0 - t0) / ms })")
        #expect(plis.count == 4)
        #expect(path.stats.pliCount == plis.count)
        // The keyframe repairs it: no more PLIs.
        send(&path, seq: 103, keyframe: true, at: now)
        #expect(path.poll(now: now + 1000 * ms).pli == false)
        #expect(path.stats.pliCount == plis.count)
    }

    /// Issue 38: on a reordering path the keyframe's second packet may come first. That is not
    /// a keyframe missed: no PLI while its first packet may still be on its way (``startGrace``),
    /// and none once it came. A stream joined at a delta frame still asks, after the grace.
    @Test func aReorderedFirstKeyframeIsWaitedForNotAskedAgain() {
        let ms = Self.ms, t0 = Self.t0
        func packet(_ path: inout VideoReceivePath, seq: UInt16, start: Bool, last: Bool, keyframe: Bool, at now: UInt64) {
            let header = RTPHeader(marker: last, payloadType: 96, sequenceNumber: seq, timestamp: 9000, ssrc: Self.screen)
            let payload: [UInt8] = start ? [0x10, keyframe ? 0x00 : 0x01, 0x2A, 0x2A] : [0x00, 0x2A, 0x2A, 0x2A]
            _ = payload.withUnsafeBytes { path.receive(header, payload: $0, now: now) }
        }
        var path = plainPath()
        packet(&path, seq: 201, start: false, last: true, keyframe: true, at: t0)  // overtook its first packet
        #expect(path.poll(now: t0 + 1 * ms).pli == false)
        #expect(path.nextWakeup == t0 + VideoReceivePath.startGrace || path.nextWakeup! < t0 + VideoReceivePath.startGrace)
        #expect(path.poll(now: t0 + 15 * ms).pli == false)
        packet(&path, seq: 200, start: true, last: false, keyframe: true, at: t0 + 20 * ms)
        for step in 0..<100 { #expect(path.poll(now: t0 + 20 * ms + UInt64(step) * 10 * ms).pli == false) }
        #expect(playOut(&path, at: t0 + 1_100 * ms).timestamps == [9000])
        #expect(path.stats.pliCount == 0)

        // Joined at a delta frame: no keyframe is coming unless asked for.
        var late = plainPath()
        packet(&late, seq: 300, start: true, last: true, keyframe: false, at: t0)
        #expect(late.poll(now: t0).pli == false)
        #expect(late.poll(now: t0 + VideoReceivePath.startGrace - 1 * ms).pli == false)
        #expect(late.nextWakeup.map { $0 <= t0 + VideoReceivePath.startGrace } == true)
        #expect(late.poll(now: t0 + VideoReceivePath.startGrace).pli)
        #expect(late.stats.pliCount == 1)
    }

    @Test func aDecoderFailureAsksForAKeyframeAtOnce() {
        let ms = Self.ms, t0 = Self.t0
        var path = plainPath()
        send(&path, seq: 100, keyframe: true, at: t0)
        #expect(path.poll(now: t0 + 1 * ms).pli == false)  // nothing lost
        let played = playOut(&path, at: t0 + 100 * ms, decoded: .failed)
        #expect(played.timestamps == [0])
        #expect(played.pli)
        #expect(path.decodeErrors == 1)
        #expect(path.stats.framesDropped == 1)
        #expect(path.stats.pliCount == 1)
        #expect(path.stats.framesDecoded == 0)
    }

    @Test func inARoomAnUnexpectedSSRCIsForeignAndNotDecoded() {
        let ms = Self.ms, t0 = Self.t0
        var path = roomPath()
        #expect(send(&path, seq: 500, keyframe: true, ssrc: 0xBAD, at: t0) == .foreign)
        #expect(send(&path, seq: 501, ssrc: 0xBAD, at: t0 + 1 * ms) == .foreign)
        #expect(path.packetsForeign == 2)
        // Another stream of the publisher (not the screen) is not foreign, and not video either.
        #expect(send(&path, seq: 7, ssrc: Self.screenAudio, at: t0 + 2 * ms) == .otherStream)
        #expect(path.packetsForeign == 2)
        #expect(path.senderSSRC == nil)
        #expect(path.receive == nil)
        #expect(path.nextWakeup == nil)
        #expect(playOut(&path, at: t0 + 1000 * ms).timestamps == [])
        // The screen's packets are.
        #expect(send(&path, seq: 100, keyframe: true, at: t0 + 1001 * ms) == .newSender(previous: nil))
        #expect(send(&path, seq: 600, ssrc: 0xBAD, at: t0 + 1002 * ms) == .foreign)
        #expect(playOut(&path, at: t0 + 2000 * ms).timestamps == [0])
        #expect(path.packetsForeign == 3)
        #expect(path.receive?.packetsReceived == 1)
        #expect(path.packetsRejected == 0)
    }

    @Test func inARoomNothingIsTakenBeforeSubscribingOrAfterUnsubscribing() {
        let t0 = Self.t0
        var path = VideoReceivePath(payloadType: 96, clockRate: 90_000, inRoom: true, startedAt: t0)
        #expect(send(&path, seq: 100, keyframe: true, at: t0) == .foreign)
        path = roomPath()
        path.unsubscribed(now: t0)
        #expect(send(&path, seq: 100, keyframe: true, at: t0) == .otherStream)
        #expect(path.senderSSRC == nil)
    }

    @Test func aNewSenderIsFollowedAfterASilenceAndStartsThePathAfresh() {
        let ms = Self.ms, t0 = Self.t0
        let other: UInt32 = 0xB0B
        var path = plainPath()
        send(&path, seq: 100, keyframe: true, at: t0)
        send(&path, seq: 101, at: t0 + 33 * ms)
        send(&path, seq: 103, at: t0 + 66 * ms)  // 102 missing: a hole to ask for
        // Another sender while the first one talks: refused.
        #expect(send(&path, seq: 9000, keyframe: true, ssrc: other, at: t0 + 100 * ms) == .rejected)
        #expect(path.packetsRejected == 1)
        #expect(path.senderSSRC == Self.screen)
        // After 2 s of silence it takes over: a fresh path (statistics, NACKs, frames).
        let later = t0 + 66 * ms + VideoReceivePath.senderTakeoverSilence
        #expect(send(&path, seq: 9000, keyframe: true, ssrc: other, at: later) == .newSender(previous: Self.screen))
        #expect(path.senderSSRC == other)
        #expect(path.receive?.ssrc == other)
        #expect(path.receive?.packetsReceived == 1)
        #expect(path.makeReport(now: later + 1 * ms)?.ssrc == other)
        let feedback = path.poll(now: later + 50 * ms)
        #expect(!feedback.nack && !path.nacks.contains(102), "the old sender's hole is forgotten: \(path.nacks)")
        // Its keyframe plays; the first sender's frames were dropped with the old buffer.
        #expect(playOut(&path, at: later + 1000 * ms).timestamps == [UInt32(truncatingIfNeeded: (9000 - 100) * 3000)])
    }

    @Test func aSenderThatSaidGoodbyeIsReplacedAtOnce() {
        let ms = Self.ms, t0 = Self.t0
        let other: UInt32 = 0xB0B
        var path = plainPath()
        send(&path, seq: 100, keyframe: true, at: t0)
        #expect(path.onGoodbye([other], now: t0) == nil)
        #expect(path.onGoodbye([Self.screen], now: t0) == Self.screen)
        #expect(send(&path, seq: 5000, keyframe: true, ssrc: other, at: t0 + 10 * ms) == .newSender(previous: Self.screen))
        #expect(path.packetsRejected == 0)
    }

    /// Senders send their BYE three times (one lost on a lossy path would leave the viewer
    /// waiting): the copies, and a reordered packet between them, do not make it leave twice;
    /// the same stream resumed later leaves again.
    @Test func aRepeatedGoodbyeIsTakenOnce() {
        let ms = Self.ms, t0 = Self.t0
        var path = plainPath()
        send(&path, seq: 100, keyframe: true, at: t0)
        #expect(path.onGoodbye([Self.screen], now: t0 + 10 * ms) == Self.screen)
        send(&path, seq: 101, at: t0 + 12 * ms)  // overtaken by the BYE
        #expect(path.onGoodbye([Self.screen], now: t0 + 13 * ms) == nil)
        #expect(path.onGoodbye([Self.screen], now: t0 + 14 * ms) == nil)
        send(&path, seq: 102, keyframe: true, at: t0 + 3000 * ms)
        #expect(path.onGoodbye([Self.screen], now: t0 + 3010 * ms) == Self.screen)
    }

    @Test func aNewScreenStreamInARoomStartsAfreshWithItsPayloadType() {
        let ms = Self.ms, t0 = Self.t0
        var path = roomPath()
        #expect(send(&path, seq: 100, keyframe: true, at: t0) == .newSender(previous: nil))
        let next: UInt32 = 0xC0FFEE
        let isNew = path.subscribed(to: [StreamInfo(kind: .screen, ssrc: next, pt: 100, codec: "VP8", clock: 90_000)])
        #expect(isNew)
        #expect(path.senderSSRC == nil)
        #expect(path.payloadType == 100)
        // The old screen is still a subscribed stream, not foreign, but no longer shown.
        #expect(send(&path, seq: 101, payloadType: 100, at: t0 + 1 * ms) == .otherStream)
        #expect(send(&path, seq: 7, keyframe: true, ssrc: next, at: t0 + 2 * ms) == .rejected)  // payload type 96
        #expect(send(&path, seq: 7, keyframe: true, ssrc: next, payloadType: 100, at: t0 + 3 * ms) == .newSender(previous: nil))
        #expect(path.receive?.ssrc == next)
        // Subscribing again to the same screen changes nothing.
        let again = path.subscribed(to: [StreamInfo(kind: .screen, ssrc: next, pt: 100, codec: "VP8", clock: 90_000)])
        #expect(!again)
        #expect(path.senderSSRC == next)
    }

    @Test func senderReportsAreTakenFromTheSenderOnly() {
        let t0 = Self.t0
        var path = plainPath()
        let sr = SenderReport(ssrc: Self.screen, ntp: NTPTimestamp(seconds: 3_900_000_000, fraction: 0), rtpTimestamp: 1234,
                              packetCount: 1, octetCount: 4)
        let beforeSender = path.onSenderReport(sr, now: t0)
        #expect(!beforeSender)
        send(&path, seq: 100, keyframe: true, at: t0)
        var foreign = sr
        foreign.ssrc = 0xBAD
        let fromAnother = path.onSenderReport(foreign, now: t0)
        #expect(!fromAnother)
        #expect(path.receive?.lastSenderReport == nil)
        let fromSender = path.onSenderReport(sr, now: t0)
        #expect(fromSender)
        #expect(path.receive?.lastSenderReport?.rtpTimestamp == 1234)
    }

    /// Twenty 3-packet frames, each followed by one ULPFEC packet (as `start --fec` sends
    /// them). One packet lost in each of frames 3, 7 and 11 and frame 5's FEC packet lost: every
    /// frame still plays, with no resend (no NACK is answered here), and the chain goes on across
    /// the FEC packets' numbers. Without the FEC packets the same losses stop the picture at
    /// frame 3.
    @Test func fecRepairsLossesWithoutAResendAndTheChainGoesOnAcrossItsNumbers() {
        func run(withFEC: Bool) -> (played: Int, recovered: Int, pli: Bool) {
            var path = plainPath()
            var packetizer = VP8Packetizer(ssrc: Self.screen, initialSequence: 65500, initialPictureID: 0x7FF0, maxPayloadSize: 100)
            var encoder = ULPFECEncoder()
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 8)
            let fecBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 8)
            defer { buffer.deallocate(); fecBuffer.deallocate() }
            var now = Self.t0
            func deliver(_ packet: UnsafeRawBufferPointer) {
                let (header, offset, length) = try! RTPHeader.parse(packet)
                _ = path.receive(header, payload: UnsafeRawBufferPointer(rebasing: packet[offset..<(offset + length)]), packet: packet, now: now)
            }
            for frame in 0..<20 {
                now += 33 * Self.ms
                let data = [UInt8](repeating: UInt8(frame), count: 250).enumerated().map { $0.offset == 0 ? (frame == 0 ? 0x00 : 0x01) : $0.element }
                var index = 0
                _ = data.withUnsafeBytes { d in
                    packetizer.packetize(frame: d, rtpTimestamp: UInt32(frame * 3000), into: buffer) { packet in
                        encoder.add(packet)
                        if !([3, 7, 11].contains(frame) && index == 1) { deliver(packet) }
                        index += 1
                    }
                }
                #expect(index == 3)
                let first = packetizer.reserveSequenceNumbers(encoder.fecCount(protection: 0.34))
                encoder.finish(protection: 0.34, payloadType: ULPFEC.payloadType, sequence: first, transportSequenceID: nil, into: fecBuffer) { fec in
                    if withFEC && frame != 5 { deliver(UnsafeRawBufferPointer(fec)) }
                }
            }
            let (played, pli) = playOut(&path, at: now + 2_000 * Self.ms)
            return (played.count, path.fecRecovered, pli)
        }
        let protected = run(withFEC: true)
        #expect(protected.played == 20 && protected.recovered == 3 && !protected.pli, "\(protected)")
        let bare = run(withFEC: false)
        #expect(bare.played == 3 && bare.recovered == 0, "\(bare)")
    }
}
