import Testing
@testable import RTPSession
import TestSupport

@Suite struct NackGeneratorTests {
    func poll(_ g: inout NackGenerator, at now: UInt64, rtt: UInt64 = 0) -> [UInt16] {
        var out: [UInt16] = []
        g.poll(now: now, rtt: rtt, into: &out)
        return out
    }

    @Test func waitsForTwoLaterPacketsOrAFewMilliseconds() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 10, now: 0)
        g.onPacket(sequenceNumber: 12, now: 0)
        #expect(poll(&g, at: 1 * ms).isEmpty)  // 11 may only be reordered
        g.onPacket(sequenceNumber: 13, now: 1 * ms)
        #expect(poll(&g, at: 1 * ms) == [11])  // two packets after it: lost
        var h = NackGenerator()
        h.onPacket(sequenceNumber: 10, now: 0)
        h.onPacket(sequenceNumber: 12, now: 0)
        #expect(h.nextWakeup(rtt: 0) == 5 * ms)
        #expect(poll(&h, at: 5 * ms) == [11])  // or after the reorder delay
    }

    @Test func reorderedPacketIsNeverNacked() {
        var g = NackGenerator()
        for s: UInt16 in [1, 3, 2, 4, 5, 6] { g.onPacket(sequenceNumber: s, now: 0) }
        #expect(poll(&g, at: 100 * ms).isEmpty)
        #expect(g.missingCount == 0)
    }

    @Test func retriesOncePerRTTThenGivesUp() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 0xFFFE, now: 0)
        for s: UInt16 in [1, 2, 3] { g.onPacket(sequenceNumber: s, now: 0) }  // 0xFFFF and 0 lost, across the wrap
        #expect(poll(&g, at: 0, rtt: 50 * ms) == [0xFFFF, 0])
        #expect(poll(&g, at: 49 * ms, rtt: 50 * ms).isEmpty)
        #expect(poll(&g, at: 50 * ms, rtt: 50 * ms) == [0xFFFF, 0])
        // Minimum spacing 20 ms even with a tiny RTT.
        #expect(poll(&g, at: 60 * ms, rtt: 1 * ms).isEmpty)
        #expect(poll(&g, at: 70 * ms, rtt: 1 * ms) == [0xFFFF, 0])
        var t: UInt64 = 70 * ms
        var sent = 3
        while sent < 10 { t += 20 * ms; sent += poll(&g, at: t).isEmpty ? 0 : 1 }
        #expect(g.takeLoss() == nil)
        #expect(poll(&g, at: t + 20 * ms).isEmpty)  // 10 retries used: given up
        #expect(g.takeLoss() == 0)
        #expect(g.takeLoss() == nil)
        #expect(g.givenUp == 2 && g.requested == 20)
    }

    @Test func recoveredPacketsLeaveTheList() {
        var g = NackGenerator()
        for s: UInt16 in [1, 5, 6, 7] { g.onPacket(sequenceNumber: s, now: 0) }
        #expect(poll(&g, at: 0) == [2, 3, 4])
        let filled = g.onPacket(sequenceNumber: 3, now: 1 * ms)
        let again = g.onPacket(sequenceNumber: 3, now: 1 * ms)
        #expect(filled && !again)
        #expect(poll(&g, at: 30 * ms) == [2, 4])
        #expect(g.recovered == 1)
    }

    @Test func givesUpOnOldHoles() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 1, now: 0)
        g.onPacket(sequenceNumber: 3, now: 0)
        g.onPacket(sequenceNumber: 4, now: 0)
        #expect(poll(&g, at: 999 * ms, rtt: 2000 * ms) == [2])
        #expect(poll(&g, at: 1000 * ms).isEmpty)
        #expect(g.takeLoss() == 2)
        // Too many packets behind.
        var h = NackGenerator()
        h.onPacket(sequenceNumber: 0, now: 0)
        h.onPacket(sequenceNumber: 2, now: 0)
        h.onPacket(sequenceNumber: 1002, now: 0)
        #expect(h.takeLoss() == 501)  // 1 and 3…501: only the newest 500 holes are kept
        #expect(h.missingCount == 500)
    }

    @Test func hugeGapKeepsTheListBounded() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 0, now: 0)
        g.onPacket(sequenceNumber: 30_000, now: 0)
        #expect(g.missingCount == 500)
        let loss = g.takeLoss()
        #expect(loss == 29_499)  // 1…29 499 dropped: only the newest 500 holes are kept
        #expect(poll(&g, at: 10 * ms).count == 500)
        #expect(g.nextWakeup(rtt: 0) == 30 * ms)
    }

    @Test func senderRestartIsFollowed() {
        var g = NackGenerator()
        for s: UInt16 in [40_000, 40_002, 40_003] { g.onPacket(sequenceNumber: s, now: 0) }
        // 20 000 behind: a stale packet once, a restart when the next follows it.
        g.onPacket(sequenceNumber: 20_000, now: 0)
        #expect(g.missingCount == 1)
        g.onPacket(sequenceNumber: 20_001, now: 0)
        #expect(g.missingCount == 0)
        #expect(g.takeLoss() == 40_001)
        g.onPacket(sequenceNumber: 20_003, now: 0)
        #expect(poll(&g, at: 10 * ms) == [20_002])
    }

    @Test func randomStreamsStayBounded() {
        var rng = SplitMix64(seed: 4585)
        var g = NackGenerator()
        var seq: UInt16 = 0
        var nacks: [UInt16] = []
        nacks.reserveCapacity(600)
        for i in 0..<100_000 {
            let now = UInt64(i) * ms
            switch Int.random(in: 0..<20, using: &rng) {
            case 0: seq &+= UInt16.random(in: 0...UInt16.max, using: &rng)
            case 1...3: seq &+= UInt16.random(in: 2...20, using: &rng)
            case 4: seq &-= UInt16.random(in: 1...30, using: &rng)
            default: seq &+= 1
            }
            g.onPacket(sequenceNumber: seq, now: now)
            if i % 5 == 0 {
                nacks.removeAll(keepingCapacity: true)
                g.poll(now: now, rtt: UInt64.random(in: 0...300, using: &rng) * ms, into: &nacks)
                #expect(nacks.count <= 500)
                _ = g.takeLoss()
            }
            #expect(g.missingCount <= 500)
        }
    }
}

/// Retries on a jittery path: answers take 40–60 ms (the test proxy's 50 ± 10 ms).
@Suite struct NackRetryTests {
    /// 5 % of 3000 packets (one every 10 ms) lost; each NACK is answered 40–60 ms later. A
    /// retry at the smoothed RTT (~50 ms) would race half the answers; waiting the RTT plus
    /// twice its variation, almost every loss is asked for once.
    @Test func retriesWaitForTheRTTsVariationNotJustItsMean() {
        var g = NackGenerator()
        var rng = SplitMix64(seed: 5)
        var answers: [(at: UInt64, seq: UInt16)] = []
        var nacks: [UInt16] = []
        var lost = 0
        var seq = 0
        var now: UInt64 = 1_000 * ms
        let end = now + 30_000 * ms
        var nextPacket = now
        while now < end + 1_000 * ms {
            if now >= nextPacket, now < end {
                if Double.random(in: 0..<1, using: &rng) < 0.05 { lost += 1 } else {
                    g.onPacket(sequenceNumber: UInt16(truncatingIfNeeded: seq), now: now)
                }
                seq += 1
                nextPacket += 10 * ms
            }
            while let i = answers.firstIndex(where: { $0.at <= now }) {
                g.onPacket(sequenceNumber: answers[i].seq, now: now)
                answers.remove(at: i)
            }
            nacks.removeAll(keepingCapacity: true)
            g.poll(now: now, rtt: g.measuredRTT ?? 100 * ms, into: &nacks)
            for n in nacks { answers.append((now + UInt64.random(in: 40...60, using: &rng) * ms, n)) }
            now += ms
        }
        let perLoss = Double(g.requested) / Double(lost)
        #expect(lost > 100)
        #expect(g.recovered >= lost - 2, "recovered \(g.recovered) of \(lost)")
        #expect(perLoss < 1.25, "\(g.requested) requests for \(lost) losses; RTT \(g.measuredRTT ?? 0) ± \(g.rttVariation)")
        // Measured from the answers (until then 100 ms is assumed, and answers sooner than half
        // of that count as reordering, so the first samples lean high).
        #expect(g.measuredRTT! > 45 * ms && g.measuredRTT! < 62 * ms, "\(g.measuredRTT!)")
    }
    /// The test proxy's path: 5 % loss, each packet delayed 40–60 ms on its own (so packets of
    /// a burst overtake each other), slides (a 20-packet keyframe every 2 s, a few frames of 1–4
    /// packets, then a keep-alive a second), idle probes on, the sender answering every NACK
    /// for a packet it has sent. Before, reordered originals arriving just after their NACK
    /// were taken for answers: the RTT fell to ~5 ms and each loss was asked for 5.5 times.
    @Test(arguments: [UInt64(11), 12]) func aReorderingPathDoesNotFoolTheRTT(seed: UInt64) {
        var g = NackGenerator(configuration: { var c = NackGenerator.Configuration(); c.idleProbeInterval = 100 * ms; return c }())
        var rng = SplitMix64(seed: seed)
        var inflight: [(at: UInt64, seq: UInt16, marker: Bool)] = []
        var nacks: [UInt16] = []
        var lost = 0, sentSeq = 0
        var now: UInt64 = 1_000 * ms
        let end = now + 60_000 * ms
        var nextFrame = now
        var frameNo = 0
        var markers: [Int: Bool] = [:]
        func send(_ s: Int, marker: Bool, at t: UInt64) {
            if Double.random(in: 0..<1, using: &rng) < 0.05 { lost += 1; return }
            inflight.append((t + UInt64.random(in: 40...60, using: &rng) * ms, UInt16(truncatingIfNeeded: s), marker))
        }
        while now < end + 2_000 * ms {
            if now >= nextFrame, now < end {
                let inSlide = (frameNo % 30) < 8  // 8 frames of change every 2 s, then keep-alives
                let keep = (frameNo % 15) == 0
                if inSlide || keep {
                    let n = (frameNo % 30) == 0 ? 20 : (inSlide ? Int.random(in: 1...4, using: &rng) : 1)
                    for k in 0..<n { markers[sentSeq] = k == n - 1; send(sentSeq, marker: k == n - 1, at: now); sentSeq += 1 }
                }
                frameNo += 1
                nextFrame += 66 * ms
            }
            inflight.sort { $0.at < $1.at }
            while let f = inflight.first, f.at <= now {
                g.onPacket(sequenceNumber: f.seq, now: now, endsFrame: f.marker)
                inflight.removeFirst()
            }
            nacks.removeAll(keepingCapacity: true)
            g.poll(now: now, rtt: g.measuredRTT ?? 100 * ms, into: &nacks)
            for n in nacks {
                // The sender's history: resend if it was sent (RTT gate ignored here).
                let s = Int(n)
                guard s < sentSeq % 65536 else { continue }
                send(s, marker: markers[s] ?? false, at: now)
            }
            now += ms
        }
        #expect(lost > 40)
        #expect(g.recovered >= lost - 2, "recovered \(g.recovered) of \(lost)")
        #expect(Double(g.requested) <= 1.3 * Double(lost), "\(g.requested) requests for \(lost) losses; RTT \(g.measuredRTT ?? 0)")
        #expect(g.measuredRTT! > 40 * ms && g.measuredRTT! < 60 * ms, "\(g.measuredRTT!)")
    }
}

@Suite struct PacketHistoryTests {
    func packet(_ seq: UInt16, fill: UInt8, size: Int = 100) -> [UInt8] {
        var p = [UInt8](repeating: fill, count: size)
        p[0] = 0x80
        p[1] = 96
        p[2] = UInt8(seq >> 8)
        p[3] = UInt8(seq & 0xFF)
        return p
    }

    func resend(_ h: inout PacketHistory, _ seq: UInt16, at now: UInt64, rtt: UInt64 = 100 * ms) -> (PacketHistory.Outcome, [UInt8]?) {
        var bytes: [UInt8]?
        let outcome = h.retransmit(sequenceNumber: seq, now: now, rtt: rtt) { bytes = Array($0) }
        return (outcome, bytes)
    }

    @Test func returnsTheStoredBytesOncePerRTT() {
        var h = PacketHistory(capacity: 8)
        let p = packet(7, fill: 0xAB, size: 1212)
        p.withUnsafeBytes { _ = h.store($0, now: 0) }
        #expect(resend(&h, 7, at: 60 * ms) == (.sent, p))
        #expect(resend(&h, 7, at: 110 * ms).0 == .tooSoon)
        #expect(resend(&h, 7, at: 160 * ms) == (.sent, p))
        #expect(h.retransmitted == 2 && h.throttled == 1)
    }

    /// A NACK less than half an RTT after the packet was sent cannot report it lost (it is in
    /// flight: an idle probe raced it); resending it would only duplicate it.
    @Test func aPacketStillInFlightIsNotResent() {
        var h = PacketHistory(capacity: 8)
        let p = packet(3, fill: 0x11)
        p.withUnsafeBytes { _ = h.store($0, now: 1_000 * ms) }
        #expect(resend(&h, 3, at: 1_049 * ms).0 == .tooSoon)
        #expect(resend(&h, 3, at: 1_050 * ms) == (.sent, p))
        // Without an RTT (the relay passes 0) nothing is gated.
        var g = PacketHistory(capacity: 8)
        p.withUnsafeBytes { _ = g.store($0, now: 1_000 * ms) }
        #expect(resend(&g, 3, at: 1_000 * ms, rtt: 0) == (.sent, p))
    }

    /// A budget refuses a resend: it is left as if never asked (asked again, it may go), and a
    /// sender restamping its packets may write into the stored copy.
    @Test func aBudgetRefusesAndARestampWritesTheCopy() {
        var h = PacketHistory(capacity: 8)
        let p = packet(5, fill: 0x22, size: 300)
        p.withUnsafeBytes { _ = h.store($0, now: 0) }
        var asked: [Int] = []
        let refused = h.retransmit(sequenceNumber: 5, now: 200 * ms, rtt: 100 * ms, allow: { asked.append($0); return false }) { _ in
            Issue.record("sent over budget")
        }
        #expect(refused == .overBudget && asked == [300] && h.retransmitted == 0)
        var sent: [UInt8]?
        let outcome = h.retransmit(sequenceNumber: 5, now: 201 * ms, rtt: 100 * ms, allow: { _ in true }) { bytes in
            bytes[299] = 0x99
            sent = Array(bytes)
        }
        #expect(outcome == .sent && sent?.last == 0x99)
        #expect(resend(&h, 5, at: 400 * ms).1?.last == 0x99)
    }

    @Test func unknownOverwrittenAndTooOldAreUnavailable() {
        var h = PacketHistory(capacity: 4, maxPacketSize: 200, maxAge: 500 * ms)
        for s: UInt16 in [0xFFFE, 0xFFFF, 0, 1, 2] { packet(s, fill: UInt8(truncatingIfNeeded: s)).withUnsafeBytes { _ = h.store($0, now: 0) } }
        #expect(resend(&h, 0xFFFE, at: 0).0 == .unavailable)  // overwritten by 2
        #expect(resend(&h, 3, at: 0).0 == .unavailable)
        #expect(resend(&h, 0xFFFF, at: 0, rtt: 0).1 == packet(0xFFFF, fill: 0xFF))
        #expect(resend(&h, 2, at: 501 * ms).0 == .unavailable)
        let stored = packet(9, fill: 0, size: 201).withUnsafeBytes { h.store($0, now: 0) }
        #expect(!stored)
        #expect(!h.contains(sequenceNumber: 9, now: 0))
    }

    /// The bytes are a ring of their own: a packet is gone once newer packets filled the ring
    /// past it, though its slot is not reused yet; one that would run past the ring's end is
    /// kept whole at its start; the newest are intact, and what is gone is never resent.
    @Test func theByteRingForgetsWhatNewerBytesWroteOver() {
        var h = PacketHistory(capacity: 16, maxPacketSize: 400, maxAge: 0, byteCapacity: 1000)
        let sizes = [300, 300, 300, 300, 120, 380]  // the 4th starts the ring again, at 0
        for (i, n) in sizes.enumerated() { packet(UInt16(i), fill: UInt8(0x10 + i), size: n).withUnsafeBytes { _ = h.store($0, now: 0) } }
        // Bytes 0..<900 held 0, 1, 2; then 3 at 0 (its 300 would end at 1200), 4 at 300, 5 at 420.
        for gone: UInt16 in [0, 1, 2] {
            #expect(!h.contains(sequenceNumber: gone, now: 0))
            #expect(resend(&h, gone, at: 0, rtt: 0).0 == .unavailable)
        }
        for (i, n) in sizes.enumerated().dropFirst(3) {
            #expect(resend(&h, UInt16(i), at: 0, rtt: 0) == (.sent, packet(UInt16(i), fill: UInt8(0x10 + i), size: n)))
        }
        // The probe copies the newest, and stops at the first one gone.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 6 * 400, alignment: 16)
        defer { buffer.deallocate() }
        var lengths: [Int] = []
        #expect(h.copyNewest(6, into: buffer, slotSize: 400, lengths: &lengths) == 3 && lengths == [380, 120, 300])
        #expect(Array(buffer[0..<380]) == packet(5, fill: 0x15, size: 380))
    }
}

/// A path that reorders by more than the fixed allowance: once seen, holes wait for it.
@Suite struct NackReorderingTests {
    static let ms: UInt64 = 1_000_000

    func poll(_ g: inout NackGenerator, at now: UInt64) -> [UInt16] {
        var out: [UInt16] = []
        g.poll(now: now, rtt: 100 * Self.ms, into: &out)
        return out
    }

    @Test func learntReorderingKeepsABurstFromTurningAHoleIntoANack() {
        var g = NackGenerator()
        // Packet 1 overtaken by 2…5 and arriving 15 ms late: before any reordering was seen,
        // the packets behind it make it a NACK at once (a spurious one).
        for s: UInt16 in [0, 2, 3, 4, 5] { g.onPacket(sequenceNumber: s, now: 0) }
        #expect(poll(&g, at: 1 * Self.ms) == [1])
        g.onPacket(sequenceNumber: 1, now: 15 * Self.ms)
        #expect(g.spurious == 1)
        #expect(g.reorderWindow >= 14 * Self.ms && g.reorderWindow <= 15 * Self.ms, "\(g.reorderWindow)")
        // The same again: now it waits out the reordering and nothing is asked for.
        for s: UInt16 in [7, 8, 9, 10] { g.onPacket(sequenceNumber: s, now: 100 * Self.ms) }
        #expect(poll(&g, at: 101 * Self.ms).isEmpty)
        #expect(poll(&g, at: 110 * Self.ms).isEmpty)
        g.onPacket(sequenceNumber: 6, now: 112 * Self.ms)
        #expect(poll(&g, at: 130 * Self.ms).isEmpty && g.requested == 1)
        // A real loss is still asked for, once the reordering time and a quarter more have passed.
        for s: UInt16 in [12, 13, 14] { g.onPacket(sequenceNumber: s, now: 200 * Self.ms) }
        #expect(poll(&g, at: 205 * Self.ms).isEmpty)
        #expect(poll(&g, at: 200 * Self.ms + g.reorderWindow).isEmpty)
        #expect(poll(&g, at: 200 * Self.ms + g.reorderWindow + g.reorderWindow / 4) == [11])
    }

    @Test func theReorderingAllowanceIsBoundedAndFades() {
        var g = NackGenerator()
        g.onPacket(sequenceNumber: 0, now: 0)
        g.onPacket(sequenceNumber: 2, now: 0)
        g.onPacket(sequenceNumber: 1, now: 5_000 * Self.ms)  // absurdly late: capped
        #expect(g.reorderWindow == g.configuration.maxReorderWait)
        var t: UInt64 = 5_000 * Self.ms
        for s in 3..<5000 { t += Self.ms; g.onPacket(sequenceNumber: UInt16(s), now: t) }
        #expect(g.reorderWindow < g.configuration.maxReorderWait / 50, "\(g.reorderWindow)")
    }
}
