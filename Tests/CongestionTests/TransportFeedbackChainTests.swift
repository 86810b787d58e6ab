import Testing
import RTCP
import RTPSession
@testable import Congestion

/// The receiver's recorder, the feedback on the wire and the sender's history together: what
/// the controller is told is what happened to each packet.
@Suite struct TransportFeedbackChainTests {
    /// Sends `count` packets 2 ms apart; `fate(i)` gives the one-way delay in ms (nil: lost).
    /// Returns the results the sender gets from every feedback, through bytes.
    func run(count: Int, fate: (Int) -> Double?, duration: UInt64 = 2_000_000_000) throws -> [PacketResult] {
        var history = TransportHistory(firstSequence: 65_500)  // across the wrap
        var recorder = TransportFeedbackRecorder()
        var arrivals: [(time: UInt64, sequence: UInt16)] = []
        let t0: UInt64 = 5_000_000_000
        for i in 0..<count {
            let sent = t0 + UInt64(i) * 2_000_000
            let sequence = history.sent(size: 1000 + i, now: sent)
            if let delay = fate(i) { arrivals.append((sent + UInt64(delay * 1e6), sequence)) }
        }
        arrivals.sort { $0.time < $1.time }
        var results: [PacketResult] = []
        var next = 0
        var buffer = [UInt8](repeating: 0, count: 1500)
        var now = t0
        while now < t0 + duration {
            while next < arrivals.count, arrivals[next].time <= now {
                recorder.onPacket(sequence: arrivals[next].sequence, now: arrivals[next].time)
                next += 1
            }
            if let fb = recorder.poll(now: now, senderSSRC: 1, mediaSSRC: 2) {
                let n = buffer.withUnsafeMutableBytes { RTCPPacket.transportFeedback(fb).marshal(into: $0) }
                #expect(n <= 1200)
                let parsed = try buffer.withUnsafeBytes { try RTCPPacket.parseCompound(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                guard case .transportFeedback(let wire) = parsed.first else { Issue.record("no feedback parsed"); return [] }
                results += history.take(wire)
            }
            now += 1_000_000
        }
        return results
    }

    @Test func everyPacketIsReportedOnceWithItsDelayAndLosses() throws {
        // 20 ms one way, a queue growing 1 ms per packet from packet 200, every 10th lost.
        let fate: (Int) -> Double? = { i in i % 10 == 3 ? nil : 20 + Double(max(0, i - 200)) }
        let results = try run(count: 400, fate: fate)
        #expect(results.count == 400)
        #expect(results.filter { $0.arrivalTime == nil }.count == 40)
        #expect(results.map(\.size) == (0..<400).map { 1000 + $0 })  // send order, each once
        // One-way delay differences survive the 250 µs quantization.
        let received = results.enumerated().compactMap { i, r in r.arrivalTime.map { (i, Double($0) - Double(r.sendTime)) } }
        let base = received[0].1
        for (i, owd) in received {
            let expected = (fate(i)! - fate(0)!) * 1e6
            #expect(abs((owd - base) - expected) <= 250_000, "packet \(i)")
        }
    }

    /// A packet overtaken by more than the feedback interval (Wi-Fi reordering) is first
    /// reported lost; the receiver reports again from it once it arrives, and the sender takes
    /// that as the loss taken back (the repeated reports of the others are left out).
    @Test func anOvertakenPacketIsLateNotLost() throws {
        // Every 7th packet 180 ms late, the others 20 ms: each late one is named lost by the
        // feedback that goes while it is on its way.
        let fate: (Int) -> Double? = { i in i % 7 == 3 ? 180 : 20 }
        let results = try run(count: 400, fate: fate)
        let late = (0..<400).filter { $0 % 7 == 3 }.count
        let recovered = results.filter(\.recovered)
        #expect(recovered.count == late, "\(recovered.count) of \(late) late packets came back")
        #expect(results.count == 400 + late)
        // Each packet's last word: arrived, with its own delay.
        var last: [UInt64: PacketResult] = [:]
        for r in results { last[r.sendTime] = r }
        #expect(last.count == 400 && last.values.allSatisfy { $0.arrivalTime != nil })
        var controller = CongestionController(minimum: 100_000, maximum: 2_000_000, start: 2_000_000)
        controller.onFeedback(Array(results.prefix(200)), now: 6_000_000_000)
        controller.onFeedback(Array(results.dropFirst(200)), now: 6_100_000_000)
        #expect(controller.lossFraction == 0)
        #expect(controller.target == 2_000_000)
    }

    /// Issue 40's spinning `watch --headless`: when a feedback falls due with nothing new since
    /// the last (a still slide sends a packet a second), none stays due — a loop waking at
    /// `nextDue` would wake without end — until a packet, or a late one reported again, comes.
    @Test func nothingNewLeavesNoFeedbackDue() {
        var recorder = TransportFeedbackRecorder()
        let ms: UInt64 = 1_000_000
        recorder.onPacket(sequence: 1, now: 1000 * ms)
        recorder.onPacket(sequence: 3, now: 1001 * ms)
        #expect(recorder.poll(now: 1100 * ms, senderSSRC: 1, mediaSSRC: 2)?.arrivals.count == 3)
        let due = recorder.nextDue ?? 0
        #expect(due > 1100 * ms)
        #expect(recorder.poll(now: due, senderSSRC: 1, mediaSSRC: 2) == nil)
        #expect(recorder.nextDue == nil, "nothing to report: nothing due")
        recorder.onPacket(sequence: 2, now: due + 5 * ms)  // the one reported lost, late
        #expect(recorder.nextDue != nil)
        let again = recorder.poll(now: due + 200 * ms, senderSSRC: 1, mediaSSRC: 2)
        #expect(again?.baseSequence == 2 && again?.arrivals.first.map { $0 != nil } == true, "reported again, as arrived")
        #expect(recorder.poll(now: (recorder.nextDue ?? 0) + 1, senderSSRC: 1, mediaSSRC: 2) == nil && recorder.nextDue == nil)
        recorder.onPacket(sequence: 4, now: 2000 * ms)
        #expect(recorder.nextDue == 2000 * ms + TransportFeedbackRecorder.interval)
    }

    @Test func aLongOutageAndBigBacklogsSplitAcrossFeedbacks() throws {
        // 1200 packets; 700 in the middle lost (more than one feedback can name), the rest
        // delayed 40 ms.
        let results = try run(count: 1200, fate: { i in (200..<900).contains(i) ? nil : 40 }, duration: 4_000_000_000)
        #expect(results.count == 1200)
        #expect(results.filter { $0.arrivalTime == nil }.count == 700)
    }

    @Test func theControllerFollowsAQueueBuiltInFeedback() throws {
        // About 4.5 Mbit/s sent (1000–1300 bytes every 2 ms), a queue growing 1 ms per packet:
        // 2/3 gets through (a packet every 3 ms: 1150–1300 bytes, about 3.2 Mbit/s in the last
        // 500 ms). Overuse: the target drops to 0.85 × what got through.
        var controller = CongestionController(minimum: 100_000, maximum: 10_000_000, start: 5_000_000)
        let results = try run(count: 300, fate: { i in 20 + Double(i) })
        controller.onFeedback(results, now: 8_000_000_000)
        #expect(controller.detector.state == .overusing)
        let got = try #require(controller.acknowledged)
        #expect(got > 3_000_000 && got < 3_500_000)
        #expect(abs(controller.target - 0.85 * got) < 1)
    }
}

/// A receiver that restarts (a new relay, a new viewer) starts its arrival clock again: the
/// controller forgets what it measured against the old clock, and neither traps nor takes the
/// jump for a queue.
@Suite struct ReceiverClockJumpTests {
    func results(from send: UInt64, count: Int, arrivalBase: UInt64) -> [PacketResult] {
        (0..<count).map { i in
            let t = send + UInt64(i) * 5_000_000
            return PacketResult(sendTime: t, size: 1000, arrivalTime: arrivalBase + UInt64(i) * 5_000_000)
        }
    }

    @Test func aClockThatGoesBackOrFarAheadIsStartedAgainFrom() {
        var c = CongestionController(minimum: 100_000, maximum: 3_000_000, start: 1_500_000)
        var now: UInt64 = 100_000_000_000
        var arrival: UInt64 = 50_000_000_000
        func feed(_ n: Int) {
            for _ in 0..<n {
                c.onFeedback(results(from: now, count: 20, arrivalBase: arrival), now: now + 150_000_000)
                now += 100_000_000
                arrival += 100_000_000
            }
        }
        feed(30)
        let before = c.target
        #expect(c.queueDelay == 0)
        arrival = 1_000_000  // back by 50 s
        feed(30)
        #expect(c.queueDelay == 0)
        #expect(c.target >= before, "\(c.target) after the clock went back")
        arrival += 3_600_000_000_000  // ahead by an hour
        feed(30)
        #expect(c.queueDelay == 0)
        #expect(c.target >= before && c.detector.state != .overusing)
    }
}
