import Testing
import RTP
@testable import RTPSession
import TestSupport

@Suite struct VP8FrameAssemblerTests {
    func expected(_ f: TestFrame) -> Delivered { Delivered(timestamp: f.timestamp, keyframe: f.keyframe, data: f.data) }

    @Test func inOrderStreamIsReassembledByteExact() {
        let stream = makeStream(frames: 30, seed: 1)
        var a = VP8FrameAssembler()
        var out: [Delivered] = []
        for f in stream { for p in f.packets { out += a.insert(p) } }
        #expect(out == stream.map(expected))
        #expect(a.framesDelivered == 30 && a.keyframesDelivered == 3 && a.framesDropped == 0)
        #expect(!a.needsKeyframe)
    }

    @Test func reorderedPacketsWithinAFrameAndAcrossTheWrap() {
        let stream = makeStream(frames: 6, seed: 2, initialSequence: 0xFFF8, initialTimestamp: 0xFFFF_F000, maxSize: 4000)
        var a = VP8FrameAssembler()
        var out: [Delivered] = []
        for f in stream { for p in f.packets.reversed() { out += a.insert(p) } }
        #expect(out == stream.map(expected))
    }

    @Test func aFrameWaitsForItsMissingPacketThenBothAreDelivered() {
        let stream = makeStream(frames: 3, seed: 3, keyframeEvery: 100, maxSize: 3000)
        var a = VP8FrameAssembler()
        let all = stream.flatMap(\.packets)
        let late = stream[1].packets[0]
        var out: [Delivered] = []
        for p in all where p != late { out += a.insert(p) }
        #expect(out == [expected(stream[0])])
        out += a.insert(late)
        #expect(out == stream.map(expected))
    }

    @Test func lossBreaksTheChainUntilTheNextKeyframe() {
        let stream = makeStream(frames: 12, seed: 4, keyframeEvery: 6, minSize: 1500, maxSize: 2000)
        var a = VP8FrameAssembler()
        let lost = stream[2].packets.last!
        var out: [Delivered] = []
        for f in stream[0..<5] { for p in f.packets where p != lost { out += a.insert(p) } }
        #expect(out == [expected(stream[0]), expected(stream[1])])
        #expect(!a.needsKeyframe)  // still waiting: a retransmission may come
        out += a.lose(through: sequenceNumber(lost))
        #expect(a.needsKeyframe)
        // Frames 3 and 4 are complete but undecodable; frame 5 too; 6 is a keyframe.
        for p in stream[5].packets { out += a.insert(p) }
        #expect(out.count == 2)
        for f in stream[6...] { for p in f.packets { out += a.insert(p) } }
        #expect(out == [expected(stream[0]), expected(stream[1])] + stream[6...].map(expected))
        #expect(!a.needsKeyframe)
        #expect(a.framesDropped == 4)  // 2 (incomplete), 3, 4, 5
        #expect(a.chainBreaks == 1)
    }

    @Test func startingMidStreamNeedsAKeyframe() {
        let stream = makeStream(frames: 12, seed: 5, keyframeEvery: 10, maxSize: 2000)
        var a = VP8FrameAssembler()
        var out: [Delivered] = []
        for f in stream[3..<10] { for p in f.packets { out += a.insert(p) } }
        #expect(out.isEmpty && a.needsKeyframe)
        for f in stream[10...] { for p in f.packets { out += a.insert(p) } }
        #expect(out == stream[10...].map(expected))
    }

    @Test func aCompleteKeyframeSkipsOlderIncompleteFrames() {
        let stream = makeStream(frames: 4, seed: 6, keyframeEvery: 3, minSize: 1500, maxSize: 2500)
        var a = VP8FrameAssembler()
        var out: [Delivered] = []
        for p in stream[0].packets { out += a.insert(p) }
        for p in stream[1].packets.dropFirst() { out += a.insert(p) }  // frame 1 incomplete
        for p in stream[2].packets { out += a.insert(p) }
        #expect(out.count == 1)
        for p in stream[3].packets { out += a.insert(p) }  // keyframe: delivered at once
        #expect(out == [expected(stream[0]), expected(stream[3])])
        #expect(a.framesDropped == 2)
        #expect(a.insert(stream[1].packets[0]).isEmpty)  // too late now
        #expect(a.packetsDiscarded == 1)
    }

    @Test func duplicatesAndGarbageAreDiscarded() {
        let stream = makeStream(frames: 2, seed: 7, maxSize: 2000)
        var a = VP8FrameAssembler()
        var out: [Delivered] = []
        for p in stream[0].packets { out += a.insert(p); out += a.insert(p) }
        out += a.insert([0x80, 0x60, 0, 0])
        out += a.insert([0x40] + [UInt8](repeating: 0, count: 20))
        for p in stream[1].packets { out += a.insert(p) }
        #expect(out == stream.map(expected))
    }

    @Test func windowOverflowDropsOldPacketsAndRecoversOnAKeyframe() {
        let stream = makeStream(frames: 40, seed: 8, keyframeEvery: 20, maxSize: 4000)
        var a = VP8FrameAssembler(capacity: 16)
        var out: [Delivered] = []
        let hole = stream[1].packets[0]
        for f in stream { for p in f.packets where p != hole { out += a.insert(p) } }
        #expect(out == [expected(stream[0])] + stream[20...].map(expected))
    }

    @Test func senderRestartWithNewSequenceNumbers() {
        let first = makeStream(frames: 3, seed: 9, initialSequence: 40_000)
        let second = makeStream(frames: 4, seed: 10, initialSequence: 10_000, initialTimestamp: 77, keyframeEvery: 2)
        var a = VP8FrameAssembler(capacity: 64)
        var out: [Delivered] = []
        for f in first + second { for p in f.packets { out += a.insert(p) } }
        // 30 000 behind: the first packet after the jump counts as stale, the second restarts.
        // Frame 0 lost its first packet and frame 1 is a delta frame; frame 2 is a keyframe.
        #expect(out == first.map(expected) + second[2...].map(expected))
    }

    /// Random permutations, drops and duplicates of a real stream: no crash, bounded, and every
    /// frame delivered is byte-exact, in order, and decodable (a keyframe, or the next frame
    /// after the previous one delivered).
    @Test(arguments: [11, 12, 13, 14] as [UInt64])
    func randomImpairmentsNeverCorruptFrames(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let stream = makeStream(frames: 300, seed: seed, initialSequence: .random(in: 0...UInt16.max, using: &rng),
                                initialTimestamp: .random(in: 0...UInt32.max, using: &rng), keyframeEvery: 30, maxSize: 6000)
        var packets = stream.flatMap(\.packets)
        // Local reordering (swaps within 8), 3 % loss, 2 % duplication.
        for i in packets.indices { let j = min(packets.count - 1, i + Int.random(in: 0...8, using: &rng)); packets.swapAt(i, j) }
        packets = packets.flatMap { p -> [[UInt8]] in
            let r = Int.random(in: 0..<100, using: &rng)
            return r < 3 ? [] : r < 5 ? [p, p] : [p]
        }
        let index = Dictionary(uniqueKeysWithValues: stream.enumerated().map { ($0.element.timestamp, $0.offset) })
        var a = VP8FrameAssembler(capacity: 128)
        var g = NackGenerator()
        var delivered: [Int] = []
        var now: UInt64 = 0
        var nacks: [UInt16] = []
        func check(_ frames: [Delivered]) {
            for f in frames {
                guard let i = index[f.timestamp] else { Issue.record("unknown frame \(f.timestamp)"); continue }
                #expect(f == expected(stream[i]))
                if let last = delivered.last { #expect(i > last) }
                #expect(stream[i].keyframe || delivered.last == i - 1)
                delivered.append(i)
            }
        }
        for p in packets {
            now += 2 * ms
            check(a.insert(p, now: now))
            g.onPacket(sequenceNumber: sequenceNumber(p), now: now)
            nacks.removeAll(keepingCapacity: true)
            g.poll(now: now, rtt: 0, into: &nacks)
            if let lost = g.takeLoss() { check(a.lose(through: lost)) }
        }
        #expect(delivered.count > 30)
        #expect(a.framesDropped > 0)
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 7741)
        var a = VP8FrameAssembler(capacity: 32, maxPayloadSize: 64)
        var delivered = 0
        for _ in 0..<50_000 {
            var p = (0..<Int.random(in: 0...80, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if p.count > 12 {
                p[0] = 0x80
                p[2] = 0
                p[3] = UInt8.random(in: 0...40, using: &rng)
                p[4...7] = [0, 0, 0, UInt8.random(in: 0...3, using: &rng)]
            }
            delivered += a.insert(p).count
            if Int.random(in: 0..<500, using: &rng) == 0 { delivered += a.lose(through: .random(in: 0...60, using: &rng)).count }
        }
        #expect(a.framesDelivered == delivered)
    }
}
