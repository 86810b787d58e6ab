import RTCP
import Testing
@testable import Sender

/// What the sender does with its receivers' RTCP, with explicit times.
@Suite struct SenderFeedbackTests {
    let ours: UInt32 = 0x1111_1111
    let wall: UInt64 = 1_700_000_000_000_000_000

    func actions(_ f: inout SenderFeedback, _ packets: [RTCPPacket], now: UInt64 = 0, wallNow: UInt64? = nil) -> [SenderFeedback.Action] {
        var out: [SenderFeedback.Action] = []
        f.handle(packets, now: now, wallNow: wallNow ?? wall) { out.append($0) }
        return out
    }

    /// A receiver report answering a sender report that left 40 ms before it came back (after
    /// `held` at the receiver): LSR is the SR's NTP middle 32 bits, DLSR the hold time.
    func report(rttMillis: UInt64, held: UInt64 = 5, fractionLost: UInt8 = 0) -> RTCPPacket {
        let sent = NTPTimestamp(unixNanos: wall - rttMillis * 1_000_000 - held * 1_000_000)
        return .receiverReport(ReceiverReport(ssrc: 7, reports: [
            ReceptionReport(ssrc: ours, fractionLost: fractionLost, cumulativeLost: 3, lastSenderReport: sent.middle32,
                            delaySinceLastSenderReport: NTPTimestamp.short(fromNanos: held * 1_000_000)),
        ]))
    }

    @Test func pictureLossAndFullIntraRequestAskForAKeyframe() {
        var f = SenderFeedback(ssrc: ours)
        #expect(actions(&f, [.pli(senderSSRC: 7, mediaSSRC: ours)]) == [.keyframeRequested])
        #expect(actions(&f, [.fir(FullIntraRequest(senderSSRC: 7, entries: [.init(ssrc: ours, sequenceNumber: 1)]))]) == [.keyframeRequested])
    }

    /// A REMB naming our stream (or no stream) caps us; one for another stream does not.
    @Test func aREMBForOurStreamIsACap() {
        var f = SenderFeedback(ssrc: ours)
        #expect(actions(&f, [.remb(REMB(senderSSRC: 7, bitsPerSecond: 500_000, ssrcs: [ours]))]) == [.remb(bitsPerSecond: 500_000)])
        #expect(actions(&f, [.remb(REMB(senderSSRC: 7, bitsPerSecond: 400_000, ssrcs: []))]) == [.remb(bitsPerSecond: 400_000)])
        #expect(actions(&f, [.remb(REMB(senderSSRC: 7, bitsPerSecond: 300_000, ssrcs: [0xDEAD]))]).isEmpty)
    }

    /// Before a round trip is measured, NACKs are answered at once (nothing is assumed in
    /// flight); after, what left within half the RTT is left alone. NACKs for another stream
    /// are not ours.
    @Test func resendsWaitForTheMeasuredRoundTrip() {
        var f = SenderFeedback(ssrc: ours)
        let nack = GenericNACK(senderSSRC: 7, mediaSSRC: ours, pairs: [.init(packetID: 100, lostBitmask: 0b101)])
        #expect(actions(&f, [.nack(nack)]) == [.resend(nack, rttNanos: 100_000_000, inFlightNanos: 0)])
        let other = GenericNACK(senderSSRC: 7, mediaSSRC: 0xDEAD, pairs: [.init(packetID: 1, lostBitmask: 0)])
        #expect(actions(&f, [.nack(other)]).isEmpty)

        let got = actions(&f, [report(rttMillis: 40, fractionLost: 26)])
        guard case .receiverReport(let rtt?, 26, 3) = got.first else { Issue.record("no report: \(got)"); return }
        #expect(rtt > 39_900_000 && rtt < 40_100_000, "rtt \(rtt)")
        #expect(f.rttMeasured && f.rttNanos == rtt)
        #expect(actions(&f, [.nack(nack)]) == [.resend(nack, rttNanos: rtt, inFlightNanos: rtt / 2)])
    }

    /// A report on another stream changes nothing; a round trip under 1 ms counts as 1 ms.
    @Test func roundTripIsOursAndAtLeastAMillisecond() {
        var f = SenderFeedback(ssrc: ours)
        let theirs = RTCPPacket.receiverReport(ReceiverReport(ssrc: 7, reports: [ReceptionReport(ssrc: 0xDEAD, fractionLost: 50)]))
        #expect(actions(&f, [theirs]).isEmpty)
        #expect(!f.rttMeasured)
        _ = actions(&f, [report(rttMillis: 0, held: 0)])
        #expect(f.rttMeasured && f.rttNanos == 1_000_000)
    }

    /// RRTRs are answered once each in the next sender report's DLRR, with how long they were
    /// held; a receiver's newer RRTR replaces its older one; at most 8 wait.
    @Test func referenceTimesAreAnsweredOnce() {
        var f = SenderFeedback(ssrc: ours)
        let t = NTPTimestamp(seconds: 0x0001_2345, fraction: 0x6789_0000)
        for receiver in UInt32(1)...10 {
            _ = actions(&f, [.extendedReport(ExtendedReport(ssrc: receiver, referenceTime: t))], now: 1_000_000_000)
        }
        _ = actions(&f, [.extendedReport(ExtendedReport(ssrc: 1, referenceTime: t))], now: 1_250_000_000)
        let dlrr = f.takeDLRR(now: 1_500_000_000)
        #expect(dlrr.count == 8)
        #expect(Set(dlrr.map(\.ssrc)) == Set([2, 3, 4, 5, 6, 7, 8, 1]))
        let one = dlrr.first { $0.ssrc == 1 }
        #expect(one?.lastReceiverReport == t.middle32)
        #expect(one?.delaySinceLastReceiverReport == NTPTimestamp.short(fromNanos: 250_000_000))
        #expect(dlrr.first { $0.ssrc == 2 }?.delaySinceLastReceiverReport == NTPTimestamp.short(fromNanos: 500_000_000))
        #expect(f.takeDLRR(now: 2_000_000_000).isEmpty)
    }
}
