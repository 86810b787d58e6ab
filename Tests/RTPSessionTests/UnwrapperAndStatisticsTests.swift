import Testing
import RTCP
@testable import RTPSession
import TestSupport

@Suite struct UnwrapperTests {
    @Test func forwardAcrossTheWrap() {
        var u = SequenceUnwrapper()
        #expect([0xFFFD, 0xFFFE, 0xFFFF, 0, 1].map { u.unwrap(UInt16($0)) } == [0xFFFD, 0xFFFE, 0xFFFF, 0x1_0000, 0x1_0001])
    }

    @Test func reorderingAcrossTheWrapGoesBack() {
        var u = SequenceUnwrapper()
        #expect(u.unwrap(2) == 2)
        #expect(u.unwrap(0xFFFF) == -1)  // reordered before the first packet, across the wrap
        #expect(u.unwrap(3) == 3)
        var v = SequenceUnwrapper()
        _ = v.unwrap(0xFFF0)
        #expect(v.unwrap(0x0005) == 0x1_0005)
        #expect(v.unwrap(0xFFF8) == 0xFFF8)
        #expect(v.extended(0x0006) == 0x1_0006)
    }

    @Test func hugeGapsReadAsNearest() {
        var u = SequenceUnwrapper()
        _ = u.unwrap(0)
        #expect(u.unwrap(0x7FFF) == 0x7FFF)  // just under half the range: forward
        #expect(u.unwrap(0xFFFE) == 0xFFFE)
        #expect(u.unwrap(0x7FFE) == 0x7FFE)  // exactly half: backward
        var w = SequenceUnwrapper()
        var last: Int64 = 0
        for i in 0..<300_000 { last = w.unwrap(UInt16(truncatingIfNeeded: i * 1000)) }
        #expect(last == 299_999 * 1000)
    }

    @Test func timestampsWrapAt32Bits() {
        var u = TimestampUnwrapper()
        #expect(u.unwrap(0xFFFF_F000) == 0xFFFF_F000)
        #expect(u.unwrap(0x0000_1000) == 0x1_0000_1000)
        #expect(u.unwrap(0xFFFF_E000) == 0xFFFF_E000)  // backwards, across the wrap
        u.reset()
        #expect(u.unwrap(5) == 5)
    }
}

@Suite struct ReceiveStatisticsTests {
    func feed(_ s: inout ReceiveStatistics, _ seqs: [UInt16], start: UInt64 = 0) -> [PacketVerdict] {
        seqs.enumerated().map { i, q in s.onPacket(sequenceNumber: q, rtpTimestamp: UInt32(q) * 3000, arrival: start + UInt64(i) * 33 * ms) }
    }

    @Test func countsExpectedLostAndFraction() {
        var s = ReceiveStatistics(ssrc: 7)
        _ = feed(&s, [10, 11, 13, 14, 15, 16, 17, 18, 20])
        #expect(s.packetsReceived == 9)
        #expect(s.expected == 11)
        #expect(s.cumulativeLost == 2)
        let r = s.makeReport(now: 0)
        #expect(r.ssrc == 7 && r.cumulativeLost == 2 && r.extendedHighestSequence == 20)
        #expect(r.fractionLost == UInt8(2 * 256 / 11))
        // Next interval: nothing lost.
        _ = feed(&s, [21, 22, 23, 24])
        #expect(s.makeReport(now: 0).fractionLost == 0)
        // A late packet fills a hole: fraction of this interval is 0, cumulative drops to 1.
        #expect(s.onPacket(sequenceNumber: 12, rtpTimestamp: 0, arrival: 0) == .reordered)
        #expect(s.makeReport(now: 0).cumulativeLost == 1)
        #expect(s.outOfOrder == 1)
    }

    @Test func extendsAcrossTheWrap() {
        var s = ReceiveStatistics(ssrc: 1)
        _ = feed(&s, [0xFFFE, 0xFFFF, 0, 1])
        #expect(s.extendedHighestSequence == 0x1_0001)
        #expect(s.makeReport(now: 0).extendedHighestSequence == 0x0001_0001)
        #expect(s.cumulativeLost == 0)
        #expect(s.onPacket(sequenceNumber: 0xFFFF, rtpTimestamp: 0, arrival: 0) == .duplicate)
    }

    @Test func duplicatesAndReorderingDoNotCountAsLossOrGain() {
        var s = ReceiveStatistics(ssrc: 1)
        let verdicts = feed(&s, [1, 3, 2, 3, 4, 4, 2, 5])
        #expect(verdicts == [.inOrder, .inOrder, .reordered, .duplicate, .inOrder, .duplicate, .duplicate, .inOrder])
        #expect(s.packetsReceived == 5 && s.duplicates == 3 && s.cumulativeLost == 0)
    }

    @Test func largeJumpRestartsOnlyWhenTheNextPacketFollows() {
        var s = ReceiveStatistics(ssrc: 1)
        _ = feed(&s, [100, 101, 102])
        #expect(s.onPacket(sequenceNumber: 40_000, rtpTimestamp: 0, arrival: 0) == .rejected)
        #expect(s.onPacket(sequenceNumber: 103, rtpTimestamp: 0, arrival: 0) == .inOrder)
        #expect(s.onPacket(sequenceNumber: 50_000, rtpTimestamp: 0, arrival: 0) == .rejected)
        #expect(s.onPacket(sequenceNumber: 50_001, rtpTimestamp: 0, arrival: 0) == .inOrder)
        #expect(s.restarts == 1)
        #expect(s.packetsReceived == 1 && s.expected == 1)
    }

    @Test func probationNeedsSequentialPackets() {
        var c = ReceiveStatistics.Configuration()
        c.probation = 2
        var s = ReceiveStatistics(ssrc: 1, configuration: c)
        #expect(feed(&s, [5, 9, 10, 11]) == [.rejected, .rejected, .inOrder, .inOrder])
        #expect(s.packetsReceived == 2 && s.expected == 2)
    }

    @Test func jitterIsZeroForConstantTransitAndGrowsWithVariation() {
        var s = ReceiveStatistics(ssrc: 1)
        for i in 0..<100 { s.onPacket(sequenceNumber: UInt16(i), rtpTimestamp: UInt32(i) * 3000, arrival: 5 * ms + UInt64(i) * 33_333_333) }
        #expect(s.jitter <= 1)
        var t = ReceiveStatistics(ssrc: 1)
        // Every other packet 10 ms late: |D| = 900 ticks each time; J → 900.
        for i in 0..<400 {
            t.onPacket(sequenceNumber: UInt16(i), rtpTimestamp: UInt32(i) * 3000,
                       arrival: UInt64(i) * 33_333_333 + (i % 2 == 0 ? 0 : 10 * ms))
        }
        #expect(abs(Int(t.jitter) - 900) <= 5)
        #expect(abs(t.jitterSeconds - 0.01) < 0.0002)
    }

    @Test func timestampUnitsNeverOverflow() {
        #expect(ReceiveStatistics.timestampUnits(1_000_000_000, clockRate: 90_000) == 90_000)
        #expect(ReceiveStatistics.timestampUnits(.max, clockRate: 90_000) == UInt32(truncatingIfNeeded: UInt64.max / 1_000_000_000 * 90_000 + 709_551_615 * 90_000 / 1_000_000_000))
    }

    @Test func reportCarriesLSRAndDLSR() {
        var s = ReceiveStatistics(ssrc: 1)
        _ = feed(&s, [1])
        #expect(s.makeReport(now: 0).lastSenderReport == 0)
        let sr = SenderReport(ssrc: 9, ntp: NTPTimestamp(seconds: 0x1234_5678, fraction: 0x9ABC_0000), rtpTimestamp: 1,
                              packetCount: 1, octetCount: 1)
        s.onSenderReport(sr, arrival: 10_000 * ms)
        let r = s.makeReport(now: 10_500 * ms)
        #expect(r.lastSenderReport == 0x5678_9ABC)
        #expect(r.delaySinceLastSenderReport == 0x0000_8000)
    }

    @Test func randomInputKeepsInvariants() {
        var rng = SplitMix64(seed: 31)
        var s = ReceiveStatistics(ssrc: 1)
        var seq: UInt16 = .random(in: 0...UInt16.max, using: &rng)
        for i in 0..<50_000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: seq &+= UInt16.random(in: 0...UInt16.max, using: &rng)
            case 1, 2: seq &-= UInt16.random(in: 0...50, using: &rng)
            default: seq &+= UInt16.random(in: 1...3, using: &rng)
            }
            s.onPacket(sequenceNumber: seq, rtpTimestamp: .random(in: 0...UInt32.max, using: &rng), arrival: UInt64(i) * ms)
            if i % 100 == 0 {
                let r = s.makeReport(now: UInt64(i) * ms)
                #expect(ReceptionReport.cumulativeLostRange.contains(r.cumulativeLost))
            }
        }
        #expect(s.packetsReceived > 0)
    }
}
