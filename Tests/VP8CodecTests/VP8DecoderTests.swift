import MediaCore
import Basics
import Testing
import VideoProcessing
@testable import VP8Codec

/// The two VP8 decoders `watch` can use: libavcodec's must give libvpx's pictures to the byte.
@Suite struct VP8DecoderTests {
    struct Plane: Equatable {
        var y: [UInt8], u: [UInt8], v: [UInt8]
        init(_ p: DecodedPicture) {
            self.init(y: p.y, u: p.u, v: p.v, strideY: p.strideY, strideU: p.strideU, strideV: p.strideV, width: p.width, height: p.height)
        }
        init(y py: UnsafePointer<UInt8>, u pu: UnsafePointer<UInt8>, v pv: UnsafePointer<UInt8>, strideY: Int, strideU: Int, strideV: Int,
             width: Int, height: Int) {
            func copy(_ base: UnsafePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int) -> [UInt8] {
                (0..<h).flatMap { Array(UnsafeBufferPointer(start: base + $0 * stride, count: w)) }
            }
            y = copy(py, strideY, width, height)
            u = copy(pu, strideU, (width + 1) / 2, (height + 1) / 2)
            v = copy(pv, strideV, (width + 1) / 2, (height + 1) / 2)
        }
    }

    func decodeAll(_ decoder: VP8Decoder, _ frames: [[UInt8]]) throws -> [Plane] {
        var out: [Plane] = []
        for frame in frames {
            try frame.withUnsafeBytes { data in try decoder.decode(data) { out.append(Plane($0)) } }
        }
        return out
    }

    @Test func libavcodecGivesLibvpxsPicturesToTheByte() throws {
        let encoder = try VP8Encoder(config: config(320, 180, content: .motion))
        var frames: [[UInt8]] = []
        var sources: [VideoFrame] = []
        for i in 0..<24 {
            let picture = syntheticPicture(width: 320, height: 180, shift: i * 2)
            for frame in try encode(encoder, picture, index: i) {
                frames.append(frame.bytes)
                sources.append(picture)
            }
        }
        let fast = try VP8Decoder(.libavcodec)
        #expect(fast.implementation == .libavcodec)
        let reference = try decodeAll(VP8Decoder(.libvpx), frames)
        let pictures = try decodeAll(fast, frames)
        #expect(reference.count == frames.count)
        #expect(pictures.count == reference.count)
        for (i, (a, b)) in zip(pictures, reference).enumerated() {
            #expect(a == b, "picture \(i) differs from libvpx's")
        }
        // And they are the pictures sent, not two decoders agreeing on garbage.
        let last = try #require(pictures.last), source = try #require(sources.last)
        let psnr = last.y.withUnsafeBufferPointer {
            PictureQuality.psnr(source.y, strideA: source.strideY, $0.baseAddress!, strideB: 320, width: 320, height: 180)
        }
        #expect(psnr >= 30, "Y-PSNR of the last picture: \(psnr)")
    }

    @Test(arguments: VP8Decoder.Implementation.allCases)
    func garbageIsRefusedAndTheNextKeyframeDecodes(_ implementation: VP8Decoder.Implementation) throws {
        let encoder = try VP8Encoder(config: config(320, 180))
        let keyframe = try #require(try encode(encoder, syntheticPicture(width: 320, height: 180), index: 0).first).bytes
        #expect(bitstreamIsKeyframe(keyframe))
        let decoder = try VP8Decoder(implementation)
        #expect(try decodeAll(decoder, [keyframe]).count == 1)
        // A keyframe's header with nothing behind it, then bytes that are no VP8 at all.
        for garbage in [Array(keyframe.prefix(12)), [UInt8](repeating: 0xFF, count: 300)] {
            #expect(throws: VP8CodecError.self) { _ = try decodeAll(decoder, [garbage]) }
        }
        let again = try decodeAll(decoder, [keyframe])
        #expect(again.count == 1)
        #expect(again.first.map { $0.y.count } == 320 * 180)
    }

    /// A keyframe whose header says a picture larger than the viewer takes is refused before
    /// the decoder allocates for it (16000x16000 would be over 1.5 GB in libvpx), with an error
    /// that names the size; the stream's next real keyframe decodes.
    @Test(arguments: VP8Decoder.Implementation.allCases)
    func aKeyframeLargerThanTheViewerTakesIsRefusedBeforeDecoding(_ implementation: VP8Decoder.Implementation) throws {
        let encoder = try VP8Encoder(config: config(320, 180))
        let keyframe = try #require(try encode(encoder, syntheticPicture(width: 320, height: 180), index: 0).first).bytes
        #expect(keyframe.withUnsafeBytes { VP8Decoder.keyframeSize($0) } == PixelSize(width: 320, height: 180))
        var forged = keyframe
        forged[6] = UInt8(16000 & 0xFF); forged[7] = UInt8(16000 >> 8)
        forged[8] = UInt8(16000 & 0xFF); forged[9] = UInt8(16000 >> 8)
        let decoder = try VP8Decoder(implementation, maxPixels: 1920 * 1080)
        #expect(throws: VP8CodecError("a keyframe of 16000x16000 is larger than this viewer takes (2073600 pixels)")) {
            _ = try decodeAll(decoder, [forged])
        }
        #expect(try decodeAll(decoder, [keyframe]).first.map { $0.y.count } == 320 * 180)
        // At the size allowed it is taken: the bound is the picture's area, not less.
        let exact = try VP8Decoder(implementation, maxPixels: 320 * 180)
        #expect(try decodeAll(exact, [keyframe]).count == 1)
        #expect(throws: VP8CodecError.self) { _ = try decodeAll(VP8Decoder(implementation, maxPixels: 320 * 180 - 1), [keyframe]) }
    }

    @Test(arguments: VP8Decoder.Implementation.allCases)
    func emptyInputThrows(_ implementation: VP8Decoder.Implementation) throws {
        let decoder = try VP8Decoder(implementation)
        #expect(throws: VP8CodecError.self) { try decoder.decode(UnsafeRawBufferPointer(start: nil, count: 0)) { _ in } }
    }

    @Test(arguments: VP8Decoder.Implementation.allCases)
    func garbageThrowsWithoutCrashing(_ implementation: VP8Decoder.Implementation) throws {
        let decoder = try VP8Decoder(implementation)
        var pictures = 0
        // A key-frame tag with a wrong start code, then an inter frame before any key frame.
        for bytes: [UInt8] in [[0x10, 0x02, 0x00, 0x00, 0x00, 0x00, 0x40, 0x01, 0xF0, 0x00],
                               [0x00, 0x00, 0x00, 0x9D, 0x01, 0x2A, 0x00, 0x00, 0x00, 0x00],
                               [0xFF, 0xFF, 0xFF]] {
            #expect(throws: VP8CodecError.self, "\(bytes)") {
                try bytes.withUnsafeBytes { try decoder.decode($0) { _ in pictures += 1 } }
            }
        }
        #expect(pictures == 0)
    }

    @Test(arguments: VP8Decoder.Implementation.allCases)
    func truncatedKeyframeDoesNotCrash(_ implementation: VP8Decoder.Implementation) throws {
        let encoder = try VP8Encoder(config: config(320, 180))
        let key = try encode(encoder, syntheticPicture(width: 320, height: 180), index: 0)[0].bytes
        for cut in [1, 3, 10, 20, key.count / 2, key.count - 1] {
            let decoder = try VP8Decoder(implementation)
            // The decoder may refuse the frame or conceal the damage; either way no crash and the right size.
            try? Array(key[0..<cut]).withUnsafeBytes {
                try decoder.decode($0) { #expect($0.width == 320 && $0.height == 180) }
            }
        }
    }

    @Test func fastestIsLibavcodecWhereItLoads() throws {
        #expect(try VP8Decoder.fastest().implementation == .libavcodec)
    }
}
