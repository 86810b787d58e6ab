import Testing
@testable import RTPSession

@Suite struct JitterBufferTests {
    func insert(_ jb: inout JitterBuffer, ts: UInt32, at now: UInt64, byte: UInt8 = 0) {
        [byte, 1, 2].withUnsafeBytes { jb.insert(rtpTimestamp: ts, pictureID: nil, isKeyframe: false, data: $0, now: now) }
    }

    func pop(_ jb: inout JitterBuffer, at now: UInt64) -> (ts: UInt32, due: UInt64, data: [UInt8])? {
        var out: (UInt32, UInt64, [UInt8])?
        jb.pop(now: now) { out = ($0.rtpTimestamp, $0.playoutTime, Array($0.data)) }
        return out
    }

    @Test func steadyStreamPlaysOutAfterTheMinimumTargetDelay() {
        var jb = JitterBuffer()
        #expect(jb.nextWakeup == nil)
        insert(&jb, ts: 1000, at: 100 * ms, byte: 9)
        #expect(jb.targetDelay == 10 * ms)  // k × 0 + 10 ms margin, within [10 ms, 500 ms]
        #expect(jb.nextWakeup == 110 * ms)
        #expect(pop(&jb, at: 109 * ms) == nil)
        let f = pop(&jb, at: 110 * ms)
        #expect(f?.ts == 1000 && f?.due == 110 * ms && f?.data == [9, 1, 2])
        for i in 1...20 { insert(&jb, ts: 1000 + UInt32(i) * 3000, at: 100 * ms + UInt64(i) * 1_000_000_000 / 30) }
        var dues: [UInt64] = []
        while let f = pop(&jb, at: .max / 2) { dues.append(f.due) }
        #expect(dues.count == 20)
        #expect(dues.first == 110 * ms + 33_333_333)
        #expect(jb.count == 0)
    }

    @Test func targetDelayFollowsJitterWithinBounds() {
        var jb = JitterBuffer()
        for i in 0..<200 {
            let late: UInt64 = i % 2 == 0 ? 0 : 30 * ms
            insert(&jb, ts: UInt32(i) * 3000, at: UInt64(i) * 33_333_333 + late)
            _ = pop(&jb, at: .max / 2)
        }
        // |ΔD| alternates 30 ms: J → 30 ms, target = 3 × 30 + 10 = 100 ms.
        #expect((98 * ms...102 * ms).contains(jb.targetDelay))
        // Frames that arrive late still play in order, no earlier than their due time.
        var big = JitterBuffer()
        for i in 0..<100 { insert(&big, ts: UInt32(i) * 3000, at: UInt64(i) * 33_333_333 + (i % 2 == 0 ? 0 : 900 * ms)) }
        #expect(big.targetDelay == 500 * ms)
        #expect(big.count == 32)  // bounded
        #expect(big.overflowDrops == 68)
    }

    @Test func aFrameRepairedLateDoesNotRaiseTheTargetDelay() {
        func run(repaired: Bool) -> UInt64 {
            var jb = JitterBuffer()
            for i in 0..<30 {
                // Frame 20 waited 900 ms for a retransmission.
                let late: UInt64 = i == 20 ? 900 * ms : 0
                [UInt8(0)].withUnsafeBytes {
                    jb.insert(rtpTimestamp: UInt32(i) * 3000, pictureID: nil, isKeyframe: false, data: $0,
                              now: UInt64(i) * 33_333_333 + late, repaired: repaired && i == 20)
                }
                _ = pop(&jb, at: .max / 2)
            }
            return jb.targetDelay
        }
        #expect(run(repaired: true) == 10 * ms)   // still the minimum: nothing but the repair was late
        #expect(run(repaired: false) > 100 * ms)  // counted as jitter, the same frame would raise it
    }

    @Test func timestampWrapAndResync() {
        var jb = JitterBuffer()
        insert(&jb, ts: 0xFFFF_0000, at: 0)
        insert(&jb, ts: 0xFFFF_0000 &+ 90_000, at: 1000 * ms)  // across the wrap, 1 s later
        #expect(pop(&jb, at: 10 * ms)?.due == 10 * ms)
        #expect(pop(&jb, at: 1010 * ms)?.due == 1010 * ms)
        // A jump of an hour re-anchors on the new frame instead of waiting for it.
        insert(&jb, ts: 0xFFFF_0000 &+ 90_000 * 3600, at: 1100 * ms)
        #expect(jb.resyncs == 1)
        #expect(jb.nextWakeup == 1110 * ms)
        _ = pop(&jb, at: 1110 * ms)
        // Backwards by 20 s: re-anchors too.
        insert(&jb, ts: 0xFFFF_0000 &+ 90_000 * 3580, at: 1200 * ms)
        #expect(jb.resyncs == 2)
        #expect(jb.nextWakeup == 1210 * ms)
    }

    @Test func runsForDaysWithoutOverflow() {
        var jb = JitterBuffer()
        let day: UInt64 = 86_400_000_000_000
        var ts: UInt32 = 0
        var now: UInt64 = 0
        var released = 0
        for _ in 0..<(3 * 86_400 / 5) {  // a frame every 5 s for three days: 2.3 × 10¹⁰ ticks, 5 wraps
            insert(&jb, ts: ts, at: now)
            if pop(&jb, at: now + 10 * ms) != nil { released += 1 }
            ts &+= 90_000 * 5
            now += 5_000_000_000
        }
        #expect(released == 3 * 86_400 / 5)
        #expect(now == 3 * day)
        #expect(jb.resyncs == 0)
    }

    @Test func driftIsFollowedSlowly() {
        var jb = JitterBuffer()
        // The sender's clock runs 500 ppm slow relative to ours: frames arrive later and later.
        for i in 0..<1000 {
            let media = UInt64(i) * 33_333_333
            insert(&jb, ts: UInt32(i) * 3000, at: media + media / 2000)
            let f = pop(&jb, at: .max / 2)
            let arrival = media + media / 2000
            #expect(f!.due >= arrival)
            #expect(f!.due <= arrival + 20 * ms)
        }
    }
}

@Suite struct ReceiverStatsTests {
    let frame: UInt64 = 66_666_667  // 15 fps

    @Test func steadyStreamHasNoFreeze() {
        var s = ReceiverStats(startedAt: 0)
        for i in 0..<100 {
            s.frameArrived(rtpTimestamp: UInt32(i) * 6000)
            s.frameRendered(rtpTimestamp: UInt32(i) * 6000, now: 250 * ms + UInt64(i) * frame + UInt64(i % 3) * 10 * ms)
        }
        #expect(s.freezeCount == 0)
        #expect(s.firstFrameTime == 250 * ms)
        #expect(s.framesRendered == 100)
    }

    @Test func aStallInMotionIsAFreeze() {
        var s = ReceiverStats(startedAt: 0)
        var now: UInt64 = 0
        for i in 0..<30 {
            if i == 20 { now += 400 * ms }
            s.frameArrived(rtpTimestamp: UInt32(i) * 6000)
            s.frameRendered(rtpTimestamp: UInt32(i) * 6000, now: now)
            now += frame
        }
        #expect(s.freezeCount == 1)
        #expect(abs(s.totalFreezesDuration - 0.4) < 0.001)
    }

    @Test func anIdleSlideIsNotAFreezeButALateKeepAliveIs() {
        var s = ReceiverStats(startedAt: 0)
        var now: UInt64 = 0
        var ts: UInt32 = 0
        func show(after gap: UInt64, mediaGap: UInt32) {
            now += gap
            ts &+= mediaGap
            s.frameArrived(rtpTimestamp: ts)
            s.frameRendered(rtpTimestamp: ts, now: now)
        }
        for _ in 0..<10 { show(after: frame, mediaGap: 6000) }  // typing: 15 fps
        for _ in 0..<10 { show(after: 1000 * ms, mediaGap: 90_000) }  // still: 1 fps keep-alive
        #expect(s.freezeCount == 0)
        show(after: 1300 * ms, mediaGap: 90_000)  // a keep-alive 300 ms late
        #expect(s.freezeCount == 1)
        #expect(abs(s.totalFreezesDuration - 0.3) < 0.001)
    }

    @Test func framesSentButNotShownCountAsAFreeze() {
        var s = ReceiverStats(startedAt: 0)
        var now: UInt64 = 0
        for i in 0..<10 {
            s.frameArrived(rtpTimestamp: UInt32(i) * 6000)
            s.frameRendered(rtpTimestamp: UInt32(i) * 6000, now: now)
            now += frame
        }
        // Frames 10…14 arrived but could not be decoded (dropped); 15 is shown on time for
        // its own timestamp, but the screen was stuck for 6 frame intervals.
        for i in 10..<15 { s.frameArrived(rtpTimestamp: UInt32(i) * 6000); s.frameDropped() }
        now += 5 * frame
        s.frameArrived(rtpTimestamp: 15 * 6000)
        s.frameRendered(rtpTimestamp: 15 * 6000, now: now)
        #expect(s.freezeCount == 1)
        #expect(s.framesDropped == 5)
        // Frames lost outright, known from a PictureID gap, count the same way.
        var t = ReceiverStats(startedAt: 0)
        t.frameArrived(rtpTimestamp: 0)
        t.frameRendered(rtpTimestamp: 0, now: 0)
        t.frameArrived(rtpTimestamp: 6000)
        t.frameRendered(rtpTimestamp: 6000, now: frame)
        t.frameArrived(rtpTimestamp: 6 * 6000, missingBefore: 4)
        t.frameRendered(rtpTimestamp: 6 * 6000, now: 6 * frame)
        #expect(t.freezeCount == 1)
    }

    /// A freeze is counted while it lasts: in motion, once the gap passes the threshold (no
    /// frame needs to come for it); its length grows second by second; the frame that ends it
    /// does not count it twice; and a session that ends frozen counts it to the end.
    @Test func aFreezeIsCountedWhileItLastsAndWhenTheSessionEndsInIt() {
        var s = ReceiverStats(startedAt: 0)
        var now: UInt64 = 0
        for i in 0..<20 {
            s.frameArrived(rtpTimestamp: UInt32(i) * 6000)
            s.frameRendered(rtpTimestamp: UInt32(i) * 6000, now: now)
            now += frame
        }
        let lastShown = now - frame
        // Nothing more arrives: the sender would have sent a keep-alive within 1 s at least.
        s.observe(now: lastShown + 900 * ms)
        #expect(s.freezeCount == 0, "within the keep-alive bound")
        s.observe(now: lastShown + 1200 * ms)
        #expect(s.freezeCount == 1, "1.2 s without a picture while moving")
        #expect(s.frameGap(now: lastShown + 1200 * ms) == 1200 * ms)
        #expect(abs(s.freezesDuration(now: lastShown + 1200 * ms) - 0.2) < 0.001)
        s.observe(now: lastShown + 5000 * ms)
        #expect(s.freezeCount == 1, "counted once")
        #expect(abs(s.freezesDuration(now: lastShown + 5000 * ms) - 4.0) < 0.001)
        // The next frame (the one after the last shown) ends it: counted once, measured against
        // the frame it is.
        s.frameArrived(rtpTimestamp: 20 * 6000)
        s.frameRendered(rtpTimestamp: 20 * 6000, now: lastShown + 6000 * ms)
        #expect(s.freezeCount == 1)
        #expect(abs(s.totalFreezesDuration - (6.0 - 0.0667)) < 0.001)
        #expect(s.freezesDuration(now: lastShown + 7000 * ms) == s.totalFreezesDuration)

        // Frames that arrive but cannot be shown: the first of them is the one expected.
        var t = ReceiverStats(startedAt: 0)
        t.frameArrived(rtpTimestamp: 0)
        t.frameRendered(rtpTimestamp: 0, now: 0)
        t.frameArrived(rtpTimestamp: 6000)
        t.frameRendered(rtpTimestamp: 6000, now: frame)
        t.frameArrived(rtpTimestamp: 12000)  // never decodable
        t.observe(now: frame + 200 * ms)
        #expect(t.freezeCount == 0)
        t.observe(now: frame + 300 * ms)
        #expect(t.freezeCount == 1, "a frame sent 67 ms after the last shown, 300 ms ago")
        #expect(t.freezeCount == 1 && t.totalFreezesDuration == 0)
        #expect(abs(t.freezesDuration(now: frame + 10_000 * ms) - (10.0 - 0.0667)) < 0.001, "a session that ends frozen")
    }

    /// A slide left still longer than the keep-alive (a sender at --min-fps 0.5): counted as it
    /// passed the bound, then taken back when the next frame shows it was on time.
    @Test func aSlowerKeepAliveIsTakenBack() {
        var s = ReceiverStats(startedAt: 0)
        s.frameArrived(rtpTimestamp: 0)
        s.frameRendered(rtpTimestamp: 0, now: 0)
        s.observe(now: 1500 * ms)
        #expect(s.freezeCount == 1)
        s.frameArrived(rtpTimestamp: 2 * 90_000)
        s.frameRendered(rtpTimestamp: 2 * 90_000, now: 2010 * ms)
        #expect(s.freezeCount == 0 && s.totalFreezesDuration == 0)
    }

    /// A sender that leaves (BYE) ends a freeze in progress there; the silence after is not one.
    @Test func silenceAfterTheSenderLeftIsNotAFreeze() {
        var s = ReceiverStats(startedAt: 0)
        s.frameArrived(rtpTimestamp: 0)
        s.frameRendered(rtpTimestamp: 0, now: 0)
        s.observe(now: 1500 * ms)
        #expect(s.freezeCount == 1)
        s.senderLeft(now: 2000 * ms)
        #expect(abs(s.totalFreezesDuration - 1.0) < 0.001)
        s.observe(now: 9000 * ms)
        #expect(s.freezeCount == 1 && abs(s.freezesDuration(now: 9000 * ms) - 1.0) < 0.001)
        var t = ReceiverStats(startedAt: 0)
        t.frameArrived(rtpTimestamp: 0)
        t.frameRendered(rtpTimestamp: 0, now: 0)
        t.senderLeft(now: 500 * ms)
        t.observe(now: 5000 * ms)
        #expect(t.freezeCount == 0)
        // Its last frame overtaken by the BYE (a jittery path) is shown, and the silence after
        // it is still not a freeze; a sender starting again makes silence count again.
        var u = ReceiverStats(startedAt: 0)
        u.frameArrived(rtpTimestamp: 0)
        u.frameRendered(rtpTimestamp: 0, now: 0)
        u.senderLeft(now: 60 * ms)
        u.senderReported(packetCount: 80)  // the report in a copy of the BYE's compound
        u.frameArrived(rtpTimestamp: 6000)
        u.frameRendered(rtpTimestamp: 6000, now: 80 * ms)
        u.observe(now: 5000 * ms)
        #expect(u.freezeCount == 0 && u.freezesDuration(now: 5000 * ms) == 0)
        u.senderStarted()
        u.frameArrived(rtpTimestamp: 900_000)
        u.frameRendered(rtpTimestamp: 900_000, now: 6000 * ms)
        u.observe(now: 8000 * ms)
        #expect(u.freezeCount == 1)
    }

    /// A sender that says it sends nothing (its reports' packet count stands still: a still
    /// screen at --min-fps 0) is idle, not frozen; once it sends again, silence counts again.
    @Test func anIdleSenderIsNotAFreeze() {
        var s = ReceiverStats(startedAt: 0)
        s.frameArrived(rtpTimestamp: 0)
        s.frameRendered(rtpTimestamp: 0, now: 0)
        s.senderReported(packetCount: 40)
        s.senderReported(packetCount: 40)
        s.observe(now: 5000 * ms)
        #expect(s.freezeCount == 0)
        s.senderReported(packetCount: 45)  // it sent five packets that never came
        s.observe(now: 6000 * ms)
        #expect(s.freezeCount == 1)
    }

    @Test func packetCountersComeFromReceiveStatistics() {
        var r = ReceiveStatistics(ssrc: 1)
        for q: UInt16 in [1, 2, 4] { r.onPacket(sequenceNumber: q, rtpTimestamp: 0, arrival: 0, payloadBytes: 100) }
        var s = ReceiverStats(startedAt: 0)
        s.update(from: r)
        s.nackSent(count: 2)
        s.pliSent()
        s.frameDecoded(isKeyframe: true)
        s.frameDecoded(isKeyframe: false)
        #expect(s.packetsReceived == 3 && s.packetsLost == 1 && s.bytesReceived == 300)
        #expect(s.nackCount == 2 && s.pliCount == 1 && s.framesDecoded == 2 && s.keyFramesDecoded == 1)
    }
}
