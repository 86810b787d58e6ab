import Testing
@testable import RTP
import TestSupport

/// RFC 7741 §4.2 payload descriptors with every optional field.
@Suite struct VP8PayloadDescriptorTests {
    func parse(_ b: [UInt8]) throws -> VP8PayloadDescriptor { try b.withUnsafeBytes { try VP8PayloadDescriptor.parse($0) } }
    func marshal(_ d: VP8PayloadDescriptor) -> [UInt8] {
        var b = [UInt8](repeating: 0xEE, count: 8)
        let n = b.withUnsafeMutableBytes { d.marshal(into: $0) }
        return Array(b[0..<n])
    }

    @Test(arguments: [
        // (bytes, descriptor)
        ([0x10] as [UInt8], VP8PayloadDescriptor(start: true)),
        ([0x23], VP8PayloadDescriptor(nonReference: true, partitionID: 3)),
        ([0x90, 0x80, 0x12], VP8PayloadDescriptor(start: true, pictureID: 0x12, longPictureID: false)),
        ([0x90, 0x80, 0x81, 0x23], VP8PayloadDescriptor(start: true, pictureID: 0x123)),
        ([0x80, 0xF0, 0xFF, 0xFF, 0x05, 0xB7], VP8PayloadDescriptor(pictureID: 0x7FFF, tl0PictureIndex: 5, temporalLayer: 2, layerSync: true, keyIndex: 0x17)),
        ([0x80, 0x20, 0x40], VP8PayloadDescriptor(temporalLayer: 1)),
        ([0x80, 0x10, 0x1F], VP8PayloadDescriptor(keyIndex: 31)),
        ([0x80, 0x40, 0x09], VP8PayloadDescriptor(tl0PictureIndex: 9)),
    ])
    func parsesAndWritesEveryField(bytes: [UInt8], descriptor: VP8PayloadDescriptor) throws {
        let d = try parse(bytes + [0x9D, 0x01])
        #expect(d == descriptor)
        #expect(d.size == bytes.count)
        #expect(marshal(descriptor) == bytes)
    }

    @Test func extensionWithoutFieldsRoundTrips() throws {
        let d = try parse([0x90, 0x00, 0xAA])
        #expect(d.size == 2 && d.start && d.pictureID == nil)
        #expect(marshal(d) == [0x90, 0x00])
    }

    @Test(arguments: [[] as [UInt8], [0x80], [0x80, 0x80], [0x80, 0x80, 0x80], [0x80, 0x40], [0x80, 0x20], [0x80, 0xF0, 0x81, 0x00, 0x01]])
    func truncatedThrows(_ bytes: [UInt8]) {
        #expect(throws: RTPParseError.self) { try parse(bytes) }
    }

    @Test func keyframeFlagIsBitZeroOfTheVP8Header() {
        // RFC 6386 §9.1: frame tag bit 0 is the inverse keyframe flag; 0x9D 0x01 0x2A start code follows.
        #expect([0x50, 0x42, 0x00, 0x9D, 0x01, 0x2A].withUnsafeBytes { VP8PayloadDescriptor.isKeyframe(vp8Data: $0) })
        #expect(![0x51, 0x42].withUnsafeBytes { VP8PayloadDescriptor.isKeyframe(vp8Data: $0) })
        #expect(![UInt8]().withUnsafeBytes { VP8PayloadDescriptor.isKeyframe(vp8Data: $0) })
    }

    @Test func randomBytesRoundTripWhateverParses() throws {
        var rng = SplitMix64(seed: 7741)
        for _ in 0..<20_000 {
            let b = (0..<Int.random(in: 0...7, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            guard let d = try? parse(b) else { continue }
            #expect(d.size <= b.count)
            #expect(try parse(marshal(d)) == d)
        }
    }
}
