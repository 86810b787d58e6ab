import Foundation
import RTCP
import RTP
import Testing
@testable import RTPSession
import TestSupport

/// Seeded random-input runs of 10⁶ datagrams per parser (the issue's "≥ 10⁶ packets per parser
/// in CI-size time"): RTP header (CSRC, extension, padding), RTCP compound, VP8 payload
/// descriptor, and the frame assembler fed whole packets. Inputs are half structured (valid
/// packets with random fields, then mutated: bit flips, truncation, length fields, splices)
/// and half raw noise, so the parsers' deep paths are reached, not only their first check.
/// Nothing may crash or trap, what parses must stay inside the datagram, and the assembler's
/// state must stay within its fixed bounds. A failing seed is replayable.
///
/// Measured on the 2-core CI machine in the debug build `swift test` uses (each run prints its
/// rate): descriptor 1.5 s, RTP header 3.8 s, RTCP compound 6.9 s per 10⁶ with the four running
/// side by side; the assembler with the NACK generator and jitter buffer behind it does about
/// 35 000 packets/s in debug, so it takes 2 × 10⁵ here (6 s). `FUZZ_ITERATIONS=N` sets every
/// count (e.g. `FUZZ_ITERATIONS=1000000 Scripts/test --release --filter FuzzTests`).
@Suite struct FuzzTests {
    static let override = ProcessInfo.processInfo.environment["FUZZ_ITERATIONS"].flatMap { Int($0) }
    static let iterations = override ?? 1_000_000
    static let assemblerIterations = override ?? 200_000

    /// A datagram buffer filled in place (no allocation per input).
    struct Input {
        var bytes = [UInt8](repeating: 0, count: 1600)
        var count = 0
        mutating func noise(_ rng: inout SplitMix64, maxCount: Int) {
            count = Int(rng.next() % UInt64(maxCount + 1))
            var i = 0
            while i < count {
                var r = rng.next()
                for _ in 0..<8 where i < count { bytes[i] = UInt8(truncatingIfNeeded: r); r >>= 8; i += 1 }
            }
        }
        mutating func copy(_ source: [UInt8]) {
            count = min(source.count, bytes.count)
            for i in 0..<count { bytes[i] = source[i] }
        }
        /// 1–4 random changes: a flipped bit, a random byte, a truncation or a zeroed byte.
        mutating func mutate(_ rng: inout SplitMix64) {
            for _ in 0...(rng.next() % 4) where count > 0 {
                let at = Int(rng.next() % UInt64(count))
                switch rng.next() % 4 {
                case 0: bytes[at] ^= 1 << (rng.next() % 8)
                case 1: bytes[at] = UInt8(truncatingIfNeeded: rng.next())
                case 2: count = at
                default: bytes[at] = 0
                }
            }
        }
        func with<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
            bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
    }

    static func timed(_ name: String, count: Int = iterations, _ body: () -> Void) {
        let start = Date()
        body()
        let s = Date().timeIntervalSince(start)
        print("fuzz \(name): \(count) inputs in \(String(format: "%.2f", s)) s (\(Int(Double(count) / s)) per second)")
    }

    /// A structurally valid RTP packet with random CSRCs, extension and padding.
    static func rtpPacket(_ rng: inout SplitMix64, into input: inout Input) {
        let cc = Int(rng.next() % 16)
        let ext = rng.next() % 2 == 0
        let extWords = Int(rng.next() % 6)
        let payload = Int(rng.next() % 40)
        let pad = rng.next() % 3 == 0 ? Int(rng.next() % 8) + 1 : 0
        var b: [UInt8] = [0x80 | (pad > 0 ? 0x20 : 0) | (ext ? 0x10 : 0) | UInt8(cc), UInt8(truncatingIfNeeded: rng.next())]
        for _ in 0..<(10 + 4 * cc) { b.append(UInt8(truncatingIfNeeded: rng.next())) }
        if ext {
            b += [0xBE, 0xDE, 0, UInt8(extWords)]
            for _ in 0..<(4 * extWords) { b.append(UInt8(truncatingIfNeeded: rng.next())) }
        }
        for _ in 0..<payload { b.append(UInt8(truncatingIfNeeded: rng.next())) }
        if pad > 0 { b += [UInt8](repeating: 0, count: pad - 1) + [UInt8(pad)] }
        input.copy(b)
    }

    @Test func rtpHeaderParser() {
        var rng = SplitMix64(seed: 0xF0_0001)
        var input = Input()
        var parsed = 0, withCSRC = 0, withExtension = 0, withPadding = 0
        // A pool of structured packets, regenerated now and then (building one costs more
        // than parsing it).
        var pool: [[UInt8]] = []
        Self.timed("RTP header") {
            for i in 0..<Self.iterations {
                if i % 1000 == 0 {
                    pool = (0..<64).map { _ in Self.rtpPacket(&rng, into: &input); return Array(input.bytes[0..<input.count]) }
                }
                if rng.next() % 2 == 0 {
                    input.copy(pool[Int(rng.next() % 64)])
                    if rng.next() % 4 != 0 { input.mutate(&rng) }
                } else {
                    input.noise(&rng, maxCount: 80)
                    if input.count > 0, rng.next() % 2 == 0 { input.bytes[0] = 0x80 | (input.bytes[0] & 0x3F) }
                }
                let result = input.with { try? RTPHeader.parse($0) }
                guard let (h, offset, length) = result else { continue }
                parsed += 1
                if h.csrcCount > 0 { withCSRC += 1 }
                if h.hasExtension { withExtension += 1 }
                if h.padding { withPadding += 1 }
                if offset < 12 + 4 * Int(h.csrcCount) || length < 0 || offset + length > input.count {
                    Issue.record("out of bounds: offset \(offset) length \(length) of \(input.count) at input \(i)")
                    return
                }
            }
        }
        #expect(parsed > Self.iterations / 5 && withCSRC > 10_000 && withExtension > 10_000 && withPadding > 10_000,
                "parsed \(parsed), CSRC \(withCSRC), extension \(withExtension), padding \(withPadding)")
    }

    /// Valid compound packets as the sender and the viewer write them.
    static func rtcpCorpus() -> [[UInt8]] {
        var buffer = [UInt8](repeating: 0, count: 1500)
        func build(_ body: (UnsafeMutableRawBufferPointer) -> Int) -> [UInt8] {
            let n = buffer.withUnsafeMutableBytes(body)
            return Array(buffer[0..<n])
        }
        let blocks = [ReceptionReport(ssrc: 1, fractionLost: 12, cumulativeLost: 40, extendedHighestSequence: 70000),
                      ReceptionReport(ssrc: 2)]
        let sr = build { RTCPPacket.buildSenderReport(ssrc: 9, ntp: NTPTimestamp(seconds: 3_900_000_000, fraction: 77), rtpTimestamp: 1234,
                                                      packetCount: 10, octetCount: 9000, reports: blocks, cname: "presenter@host", bye: true, into: $0) }
        let rr = build { RTCPPacket.buildReceiverReport(ssrc: 5, reports: blocks, cname: "viewer", bye: false,
                                                        referenceTime: NTPTimestamp(seconds: 3_900_000_001, fraction: 5), into: $0) }
        let dlrr = build { RTCPPacket.buildSenderReport(ssrc: 9, ntp: NTPTimestamp(seconds: 3_900_000_000, fraction: 77), rtpTimestamp: 1,
                                                        packetCount: 1, octetCount: 1, cname: "p", bye: false,
                                                        dlrr: [.init(ssrc: 5, lastReceiverReport: 7, delaySinceLastReceiverReport: 8),
                                                               .init(ssrc: 6, lastReceiverReport: 9, delaySinceLastReceiverReport: 10)], into: $0) }
        let nack = build { RTCPPacket.buildNACK(senderSSRC: 5, mediaSSRC: 9, sequenceNumbers: [1, 2, 5, 17, 300, 65535], into: $0) }
        let pli = build { RTCPPacket.buildPLI(senderSSRC: 5, mediaSSRC: 9, into: $0) }
        let fir = build { RTCPPacket.buildFIR(senderSSRC: 5, mediaSSRC: 9, sequenceNumber: 3, into: $0) }
        return [sr, rr, nack, pli, fir, rr + nack + pli, sr + fir, dlrr]
    }

    @Test func rtcpCompoundParser() {
        var rng = SplitMix64(seed: 0xF0_0002)
        let corpus = Self.rtcpCorpus()
        var input = Input()
        var parsed = 0, packets = 0
        Self.timed("RTCP compound") {
            for i in 0..<Self.iterations {
                switch rng.next() % 4 {
                case 0, 1:
                    input.copy(corpus[Int(rng.next() % UInt64(corpus.count))])
                    input.mutate(&rng)
                case 2:
                    // A splice: the head of one compound and the tail of another.
                    let a = corpus[Int(rng.next() % UInt64(corpus.count))], b = corpus[Int(rng.next() % UInt64(corpus.count))]
                    input.copy(Array(a.prefix(Int(rng.next() % UInt64(a.count + 1)))) + Array(b.suffix(Int(rng.next() % UInt64(b.count + 1)))))
                default:
                    input.noise(&rng, maxCount: 96)
                    if input.count >= 4 { input.bytes[0] = 0x80 | (input.bytes[0] & 0x1F); input.bytes[1] = 200 + UInt8(rng.next() % 8) }
                }
                let result = input.with { try? RTCPPacket.parseCompound($0) }
                guard let list = result else { continue }
                parsed += 1
                packets += list.count
                if list.count > input.count / 4 {
                    Issue.record("\(list.count) packets from \(input.count) bytes at input \(i)")
                    return
                }
            }
        }
        #expect(parsed > Self.iterations / 10, "parsed \(parsed)")
        #expect(packets > parsed, "packets \(packets)")
    }

    @Test func vp8PayloadDescriptorParser() {
        var rng = SplitMix64(seed: 0xF0_0003)
        var input = Input()
        var parsed = 0, withPictureID = 0
        Self.timed("VP8 payload descriptor") {
            for i in 0..<Self.iterations {
                input.noise(&rng, maxCount: 12)
                // Mostly X set, with its I/L/T/K and M bits random: every extension path.
                if input.count > 0, rng.next() % 4 != 0 { input.bytes[0] |= 0x80 }
                let result = input.with { p -> (Int, Bool)? in
                    guard let d = try? VP8PayloadDescriptor.parse(p) else { return nil }
                    _ = VP8PayloadDescriptor.isKeyframe(vp8Data: UnsafeRawBufferPointer(rebasing: p[min(d.size, p.count)...]))
                    return (d.size, d.pictureID != nil)
                }
                guard let (size, pid) = result else { continue }
                parsed += 1
                if pid { withPictureID += 1 }
                if size < 1 || size > input.count || size > 6 {
                    Issue.record("descriptor of \(size) bytes in \(input.count) at input \(i)")
                    return
                }
            }
        }
        #expect(parsed > Self.iterations / 4 && withPictureID > Self.iterations / 20, "parsed \(parsed), with PictureID \(withPictureID)")
    }

    /// Whole RTP packets into the assembler: real streams (from the real packetizer) cut up by
    /// loss, reordering, duplication, corruption, sequence and timestamp jumps, and noise; the
    /// NACK generator and the jitter buffer ride along as the viewer runs them. Their state
    /// stays bounded and frames keep coming out.
    @Test func frameAssemblerAndSession() {
        var rng = SplitMix64(seed: 0xF0_0004)
        var assembler = VP8FrameAssembler()
        var nack = NackGenerator()
        var jitter = JitterBuffer()
        let stream = makeStream(frames: 400, seed: 44, maxSize: 12_000).flatMap(\.packets)
        var input = Input()
        var delivered = 0, keyframes = 0, maxFrame = 0
        var nacks: [UInt16] = []
        nacks.reserveCapacity(1024)
        var now: UInt64 = 1
        var position = 0
        var seqShift: UInt16 = 0
        var tsShift: UInt32 = 0
        Self.timed("frame assembler", count: Self.assemblerIterations) {
            for i in 0..<Self.assemblerIterations {
                now += 100_000
                let roll = rng.next() % 100
                if roll < 75 {
                    // The stream in order, with 5 % loss.
                    let packet = stream[position]
                    position = (position + 1) % stream.count
                    if position == 0 { seqShift &+= UInt16(stream.count % 65536); tsShift &+= 400 * 6000 }
                    if rng.next() % 20 == 0 { continue }
                    input.copy(packet)
                } else if roll < 88 {
                    // A recent packet again (a duplicate or a late retransmission), maybe mutated.
                    input.copy(stream[(position + stream.count - 1 - Int(rng.next() % 40)) % stream.count])
                    if rng.next() % 2 == 0 { input.mutate(&rng) }
                } else if roll < 90 {
                    // The sender restarts: new sequence numbers and timestamps.
                    seqShift = UInt16(truncatingIfNeeded: rng.next())
                    tsShift = UInt32(truncatingIfNeeded: rng.next())
                    continue
                } else {
                    input.noise(&rng, maxCount: 1500)
                    if input.count >= 12 { input.bytes[0] = 0x80 | (input.bytes[0] & 0x3F) }
                }
                // Sequence numbers and timestamps of this lap of the stream.
                if input.count >= 12 {
                    let seq = (UInt16(input.bytes[2]) << 8 | UInt16(input.bytes[3])) &+ seqShift
                    input.bytes[2] = UInt8(seq >> 8); input.bytes[3] = UInt8(seq & 0xFF)
                    var ts = UInt32(input.bytes[4]) << 24 | UInt32(input.bytes[5]) << 16 | UInt32(input.bytes[6]) << 8 | UInt32(input.bytes[7])
                    ts &+= tsShift
                    input.bytes[4] = UInt8(ts >> 24); input.bytes[5] = UInt8((ts >> 16) & 0xFF)
                    input.bytes[6] = UInt8((ts >> 8) & 0xFF); input.bytes[7] = UInt8(ts & 0xFF)
                }
                input.with { p in
                    if let (h, _, _) = try? RTPHeader.parse(p) {
                        nack.onPacket(sequenceNumber: h.sequenceNumber, now: now, endsFrame: h.marker)
                    }
                    assembler.insert(packet: p, now: now) { frame in
                        delivered += 1
                        if frame.isKeyframe { keyframes += 1 }
                        maxFrame = max(maxFrame, frame.data.count)
                        jitter.insert(frame, now: now)
                    }
                }
                if i % 16 == 0 {
                    nacks.removeAll(keepingCapacity: true)
                    nack.poll(now: now, rtt: 0, into: &nacks)
                    if let lost = nack.takeLoss() {
                        assembler.markLost(through: lost, now: now) { frame in delivered += 1; jitter.insert(frame, now: now) }
                    }
                    while jitter.pop(now: now, { _ in }) {}
                }
                if nack.missingCount > nack.configuration.maxListSize || jitter.count > jitter.configuration.maxFrames
                    || nacks.count > nack.configuration.maxListSize {
                    Issue.record("unbounded at input \(i): \(nack.missingCount) missing, \(jitter.count) buffered, \(nacks.count) NACKed")
                    return
                }
            }
        }
        // Frames kept coming through all this, keyframes restarted the chain, and no frame
        // was larger than the buffer can hold.
        let scale = Double(Self.assemblerIterations) / 1_000_000
        #expect(Double(delivered) > 10_000 * scale && Double(keyframes) > 500 * scale, "delivered \(delivered), keyframes \(keyframes)")
        #expect(maxFrame <= assembler.capacity * assembler.maxPayloadSize)
        #expect(Double(assembler.packetsDiscarded) > 50_000 * scale && Double(assembler.chainBreaks) > 100 * scale,
                "discarded \(assembler.packetsDiscarded), chain breaks \(assembler.chainBreaks)")
    }
}
