import Testing
@testable import RTPSession

/// A frame's last packets lost just before the sender pauses (a still slide) are asked for
/// after ``NackGenerator/Configuration/tailDelay`` instead of when the next frame comes.
@Suite struct TailProbeTests {
    func poll(_ g: inout NackGenerator, at now: UInt64) -> [UInt16] {
        var out: [UInt16] = []
        g.poll(now: now, rtt: 0, into: &out)
        return out
    }

    @Test func theNextPacketIsAskedForWhenTheNewestDoesNotEndAFrame() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 100, now: 0, endsFrame: true)
        g.onPacket(sequenceNumber: 101, now: 1 * ms, endsFrame: false)  // 102, the marker packet, is lost
        #expect(g.nextWakeup(rtt: 0) == 31 * ms)
        #expect(poll(&g, at: 30 * ms).isEmpty)  // may still be on its way
        #expect(poll(&g, at: 31 * ms) == [102])
        #expect(poll(&g, at: 40 * ms).isEmpty)  // retried at the normal spacing
        #expect(poll(&g, at: 51 * ms) == [102])
        // The resend arrives: the hole is closed and counted as recovered.
        let filled = g.onPacket(sequenceNumber: 102, now: 60 * ms, endsFrame: true)
        #expect(filled)
        #expect(g.missingCount == 0 && g.recovered == 1)
        #expect(poll(&g, at: 500 * ms).isEmpty && g.nextWakeup(rtt: 0) == nil)
    }

    @Test func noProbeAfterAFrameEndsOrWhenTheCallerDoesNotKnow() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 1, now: 0, endsFrame: false)
        g.onPacket(sequenceNumber: 2, now: 1 * ms, endsFrame: true)
        #expect(poll(&g, at: 1000 * ms).isEmpty && g.nextWakeup(rtt: 0) == nil)
        var h = NackGenerator()
        h.onPacket(sequenceNumber: 1, now: 0)
        #expect(poll(&h, at: 1000 * ms).isEmpty)
        var c = NackGenerator.Configuration()
        c.tailDelay = nil
        var off = NackGenerator(configuration: c)
        off.onPacket(sequenceNumber: 1, now: 0, endsFrame: false)
        #expect(poll(&off, at: 1000 * ms).isEmpty)
    }

    @Test func aProbeBelowALaterPacketStaysAHoleAndIsNotDuplicated() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 10, now: 0, endsFrame: false)
        #expect(poll(&g, at: 30 * ms) == [11])
        // 11 and 12 lost; the next frame's first packet arrives.
        g.onPacket(sequenceNumber: 13, now: 35 * ms, endsFrame: false)
        #expect(g.missingCount == 2)
        #expect(poll(&g, at: 45 * ms) == [12])        // 11 waits for its retry spacing
        #expect(poll(&g, at: 50 * ms) == [11])
        let filled11 = g.onPacket(sequenceNumber: 11, now: 60 * ms, endsFrame: false)
        let filled12 = g.onPacket(sequenceNumber: 12, now: 60 * ms, endsFrame: true)
        #expect(filled11 && filled12)
        #expect(g.missingCount == 0)
    }

    @Test func anUnansweredProbeIsGivenUpWithoutBreakingAnything() {
        // A sender that stopped mid-frame: the probe is retried, then given up, once.
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 7, now: 0, endsFrame: false)
        var asked = 0
        var t: UInt64 = 0
        while t < 2_000 * ms { t += 5 * ms; asked += poll(&g, at: t).count }
        #expect(asked == g.configuration.maxRetries)
        #expect(g.takeLoss() == 8)
        #expect(g.missingCount == 0 && g.nextWakeup(rtt: 0) == nil)
        // The stream goes on from 8: nothing is missing.
        g.onPacket(sequenceNumber: 8, now: t, endsFrame: true)
        #expect(g.missingCount == 0)
    }
}

@Suite struct NackRTTTests {
    @Test func theRoundTripIsMeasuredFromRequestToRetransmission() {
        var g = NackGenerator()
        #expect(g.measuredRTT == nil)
        var out: [UInt16] = []
        let ms: UInt64 = 1_000_000
        var t: UInt64 = 0
        var seq: UInt16 = 0
        for _ in 0..<20 {
            g.onPacket(sequenceNumber: seq, now: t)
            g.onPacket(sequenceNumber: seq &+ 2, now: t)   // seq + 1 lost
            g.onPacket(sequenceNumber: seq &+ 3, now: t)
            out.removeAll()
            g.poll(now: t, rtt: 0, into: &out)
            #expect(out == [seq &+ 1])
            t += 60 * ms                                  // the resend comes back 60 ms later
            let filled = g.onPacket(sequenceNumber: seq &+ 1, now: t)
            #expect(filled)
            seq &+= 4
        }
        let rtt = g.measuredRTT ?? 0
        #expect(rtt > 55 * ms && rtt < 65 * ms, "\(rtt)")
        // With that RTT, a retry waits for the answer instead of 20 ms.
        g.onPacket(sequenceNumber: seq, now: t)
        g.onPacket(sequenceNumber: seq &+ 2, now: t)
        g.onPacket(sequenceNumber: seq &+ 3, now: t)
        out.removeAll(); g.poll(now: t, rtt: rtt, into: &out)
        #expect(out == [seq &+ 1])
        out.removeAll(); g.poll(now: t + 30 * ms, rtt: rtt, into: &out)
        #expect(out.isEmpty)
        out.removeAll(); g.poll(now: t + 61 * ms, rtt: rtt, into: &out)
        #expect(out == [seq &+ 1])
    }
}

/// Idle probes: with nothing newer arriving, the next packet is asked for at an interval.
@Suite struct IdleProbeTests {
    static let ms: UInt64 = 1_000_000

    func generator() -> NackGenerator {
        var c = NackGenerator.Configuration()
        c.idleProbeInterval = 100 * Self.ms
        return NackGenerator(configuration: c)
    }

    func poll(_ g: inout NackGenerator, at now: UInt64) -> [UInt16] {
        var out: [UInt16] = []
        g.poll(now: now, rtt: 0, into: &out)
        return out
    }

    @Test func aWholeFrameLostAfterTheLastOneEndedIsAskedForWithinTheInterval() {
        var g = generator()
        g.onPacket(sequenceNumber: 41, now: 0, endsFrame: true)  // a keep-alive frame, complete
        #expect(poll(&g, at: 99 * Self.ms).isEmpty)
        #expect(g.nextWakeup(rtt: 0) == 100 * Self.ms)
        #expect(poll(&g, at: 100 * Self.ms) == [42])
        #expect(poll(&g, at: 150 * Self.ms).isEmpty)
        #expect(poll(&g, at: 200 * Self.ms) == [42])
        // Packet 42 (the next keep-alive, lost whole and resent) arrives: probing starts again from it.
        let filled = g.onPacket(sequenceNumber: 42, now: 230 * Self.ms, endsFrame: true)
        #expect(!filled)
        #expect(poll(&g, at: 300 * Self.ms).isEmpty && poll(&g, at: 330 * Self.ms) == [43])
        // Never retried as a hole, never given up (no PLI), not counted as requested.
        #expect(poll(&g, at: 5000 * Self.ms) == [43])
        #expect(g.takeLoss() == nil && g.requested == 0 && g.missingCount == 0 && g.idleProbes == 4)
    }

    @Test func noIdleProbeWhileATailProbeOrAHoleAboveIsPending() {
        var g = generator()
        g.onPacket(sequenceNumber: 10, now: 0, endsFrame: false)  // the frame's end is missing
        #expect(poll(&g, at: 30 * Self.ms) == [11])  // the tail probe
        var asked: [UInt16] = []
        for k in 1...17 { asked += poll(&g, at: UInt64(k) * 10 * Self.ms + 30 * Self.ms) }  // until 200 ms, while it is retried
        #expect(!asked.isEmpty && asked.allSatisfy { $0 == 11 }, "only the tail probe's retries: \(asked)")
        #expect(g.idleProbes == 0)
    }

    @Test func offByDefault() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 1, now: 0, endsFrame: true)
        #expect(poll(&g, at: 10_000 * Self.ms).isEmpty && g.nextWakeup(rtt: 0) == nil)
    }
}
