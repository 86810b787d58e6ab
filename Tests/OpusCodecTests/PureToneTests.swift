import Foundation
import OpusCodec
import Testing

@Suite struct OpusPureToneTests {
    /// A lone steady tone keeps its pitch (a codec mode switch must not shift it).
    @Test(arguments: [440.0, 1000.0])
    func pureToneKeepsItsPitch(tone: Double) throws {
        let encoder = try OpusFrameEncoder()
        let decoder = try OpusFrameDecoder()
        var pcm = [Float](repeating: 0, count: 1920)
        var decoded: [Float] = []
        var out = [Float](repeating: 0, count: 5760 * 2)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packet.deallocate() }
        for frame in 0..<100 {
            for i in 0..<960 {
                let v = Float(0.25 * sin(2 * .pi * tone * Double(frame * 960 + i) / 48_000))
                pcm[2 * i] = v
                pcm[2 * i + 1] = v
            }
            let n = try pcm.withUnsafeBufferPointer { try encoder.encode($0, into: packet) }
            let samples = try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: packet[0..<n]), into: $0) }
            decoded += stride(from: 0, to: samples * 2, by: 2).map { out[$0] }
        }
        let tail = Array(decoded.suffix(48_000))
        let windowed = tail.indices.map { i in tail[i] * Float(0.5 - 0.5 * cos(2 * Double.pi * Double(i) / Double(tail.count))) }
        let at = 2 * amplitude(windowed, tone), off = 2 * amplitude(windowed, tone + 10)
        #expect(abs(at - 0.25) < 0.03 && off < 0.01, "at \(tone) Hz: \(at), at +10 Hz: \(off)")
    }
}
