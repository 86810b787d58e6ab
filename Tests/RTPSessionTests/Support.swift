import RTP
@testable import RTPSession
import TestSupport

let ms: UInt64 = 1_000_000

/// A VP8 frame as an encoder would hand it over: first byte bit 0 is the inverse keyframe flag.
struct TestFrame: Equatable {
    var timestamp: UInt32
    var keyframe: Bool
    var data: [UInt8]
    var packets: [[UInt8]] = []
}

/// Frames of random sizes packetized by the real ``VP8Packetizer``.
func makeStream(frames: Int, seed: UInt64, initialSequence: UInt16 = 0, initialTimestamp: UInt32 = 0,
                keyframeEvery: Int = 10, minSize: Int = 1, maxSize: Int = 5000, maxPayloadSize: Int = 1200) -> [TestFrame] {
    var rng = SplitMix64(seed: seed)
    var packetizer = VP8Packetizer(ssrc: 0x5EED, initialSequence: initialSequence, initialPictureID: 100,
                                   maxPayloadSize: maxPayloadSize)
    var buffer = [UInt8](repeating: 0, count: 12 + maxPayloadSize)
    var out: [TestFrame] = []
    for i in 0..<frames {
        let key = i % keyframeEvery == 0
        var data = (0..<Int.random(in: minSize...maxSize, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        data[0] = key ? data[0] & 0xFE : data[0] | 0x01
        var frame = TestFrame(timestamp: initialTimestamp &+ UInt32(i) &* 6000, keyframe: key, data: data)
        _ = data.withUnsafeBytes { d in
            buffer.withUnsafeMutableBytes { b in
                packetizer.packetize(frame: d, rtpTimestamp: frame.timestamp, into: b) { frame.packets.append(Array($0)) }
            }
        }
        out.append(frame)
    }
    return out
}

struct Delivered: Equatable {
    var timestamp: UInt32
    var keyframe: Bool
    var data: [UInt8]
}

extension VP8FrameAssembler {
    mutating func insert(_ packet: [UInt8], now: UInt64 = 0) -> [Delivered] {
        var out: [Delivered] = []
        packet.withUnsafeBytes { p in
            insert(packet: p, now: now) { out.append(Delivered(timestamp: $0.rtpTimestamp, keyframe: $0.isKeyframe, data: Array($0.data))) }
        }
        return out
    }

    mutating func lose(through seq: UInt16) -> [Delivered] {
        var out: [Delivered] = []
        markLost(through: seq, now: 0) { out.append(Delivered(timestamp: $0.rtpTimestamp, keyframe: $0.isKeyframe, data: Array($0.data))) }
        return out
    }
}

func sequenceNumber(_ packet: [UInt8]) -> UInt16 { UInt16(packet[2]) << 8 | UInt16(packet[3]) }
