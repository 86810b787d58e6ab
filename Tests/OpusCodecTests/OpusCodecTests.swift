import Foundation
import OpusCodec
import Testing

@Suite struct OpusCodecTests {
    /// A 440 Hz tone and a 1000 Hz tone 6 dB lower survive encode → decode at their levels.
    @Test func toneRoundTripKeepsFrequencyAndLevel() throws {
        let encoder = try OpusFrameEncoder()
        let decoder = try OpusFrameDecoder()
        var pcm = [Float](repeating: 0, count: 1920)
        var decoded: [Float] = []
        var out = [Float](repeating: 0, count: 5760 * 2)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packet.deallocate() }
        var sizes: [Int] = []
        for frame in 0..<50 {
            for i in 0..<960 {
                let t = Double(frame * 960 + i) / 48_000
                let v = Float(0.3 * sin(2 * .pi * 440 * t) + 0.15 * sin(2 * .pi * 1000 * t))
                pcm[2 * i] = v
                pcm[2 * i + 1] = v
            }
            let n = try pcm.withUnsafeBufferPointer { try encoder.encode($0, into: packet) }
            sizes.append(n)
            let samples = try out.withUnsafeMutableBufferPointer {
                try decoder.decode(UnsafeRawBufferPointer(rebasing: packet[0..<n]), into: $0)
            }
            #expect(samples == 960)
            decoded += out[0..<(samples * 2)]
        }
        // ~64 kbit/s: about 160 bytes per 20 ms (rate control may vary it).
        let mean = sizes.dropFirst(5).reduce(0, +) / (sizes.count - 5)
        #expect(mean > 80 && mean < 260, "mean packet \(mean) bytes")
        let left = stride(from: 9600, to: decoded.count, by: 2).map { decoded[$0] }
        let right = stride(from: 9601, to: decoded.count, by: 2).map { decoded[$0] }
        for channel in [left, right] {
            #expect(abs(amplitude(channel, 440) - 0.3) < 0.03)
            #expect(abs(amplitude(channel, 1000) - 0.15) < 0.015)
            #expect(amplitude(channel, 2500) < 0.003)
        }
    }

    /// A lost 20 ms frame is concealed with 20 ms, not with as much as the buffer holds (libopus
    /// fills the frame size it is given: a 120 ms buffer made every loss 120 ms of sound, and the
    /// viewer's audio fell 100 ms further behind with each).
    @Test func concealmentFillsOneFrame() throws {
        let encoder = try OpusFrameEncoder()
        let decoder = try OpusFrameDecoder()
        var pcm = [Float](repeating: 0, count: 1920)
        for i in 0..<960 { pcm[2 * i] = Float(0.3 * sin(2 * .pi * 440 * Double(i) / 48_000)); pcm[2 * i + 1] = pcm[2 * i] }
        var out = [Float](repeating: 0, count: 5760 * 2)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packet.deallocate() }
        for _ in 0..<5 {
            let n = try pcm.withUnsafeBufferPointer { try encoder.encode($0, into: packet) }
            _ = try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: packet[0..<n]), into: $0) }
        }
        let concealed = try out.withUnsafeMutableBufferPointer { try decoder.conceal(into: $0) }
        #expect(concealed == 960)
        // Concealment continues the tone rather than writing silence.
        #expect(out[0..<1920].contains { abs($0) > 0.01 })
        let empty = try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(start: nil, count: 0), into: $0) }
        #expect(empty == 960)
    }

    @Test func silenceWithDTXGivesTinyPackets() throws {
        let encoder = try OpusFrameEncoder()
        let pcm = [Float](repeating: 0, count: 1920)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packet.deallocate() }
        var sizes: [Int] = []
        for _ in 0..<100 { sizes.append(try pcm.withUnsafeBufferPointer { try encoder.encode($0, into: packet) }) }
        #expect(sizes.suffix(50).filter { $0 <= 2 }.count >= 40, "sizes \(sizes.suffix(50))")
    }
}

/// The amplitude of one frequency (Goertzel).
func amplitude(_ x: [Float], _ f: Double, rate: Double = 48_000) -> Double {
    let w = 2 * Double.pi * f / rate, c = 2 * cos(w)
    var s1 = 0.0, s2 = 0.0
    for v in x { let s = Double(v) + c * s1 - s2; s2 = s1; s1 = s }
    let power = s1 * s1 + s2 * s2 - c * s1 * s2
    return 2 * sqrt(max(power, 0)) / Double(x.count)
}
