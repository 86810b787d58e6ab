import CZeroFill
import Foundation
import MediaCore
import Basics
import Testing
import VideoProcessing
@testable import VP8Codec

/// A synthetic screen: a smooth background gradient, a white "document" with black text-like
/// glyph strokes (sharp 1–2 px edges), and colour gradients in chroma. `shift` moves the text.
func syntheticPicture(width: Int, height: Int, shift: Int = 0) -> VideoFrame {
    let f = VideoFrame(width: width, height: height)
    for row in 0..<height {
        for col in 0..<width {
            var y = 16 + (col * 180 / max(1, width - 1) + row * 39 / max(1, height - 1))
            let inDoc = col >= width / 8 && col < width * 7 / 8 && row >= height / 8 && row < height * 7 / 8
            if inDoc {
                y = 235
                // 8x12 glyph cells on 16-row text lines; strokes from a hash of the cell.
                let tx = col - width / 8 + shift, ty = row - height / 8
                let line = ty / 16, cy = ty % 16
                if cy >= 2, cy < 14 {
                    let cell = tx / 8, cx = tx % 8
                    let h = UInt32(truncatingIfNeeded: (cell &* 2_654_435_761) ^ (line &* 40503))
                    let vertical = (cx == 1 || cx == 2) && h & 1 != 0 || cx == 5 && h & 2 != 0
                    let horizontal = cx < 7 && (cy == 2 && h & 4 != 0 || cy == 7 && h & 8 != 0 || cy == 13 && h & 16 != 0)
                    if cell % 6 != 5, vertical || horizontal { y = 16 }  // every 6th cell a space
                }
            }
            f.y[row * f.strideY + col] = UInt8(y)
        }
    }
    for row in 0..<f.chromaHeight {
        for col in 0..<f.chromaWidth {
            f.u[row * f.strideUV + col] = UInt8(64 + col * 128 / max(1, f.chromaWidth))
            f.v[row * f.strideUV + col] = UInt8(192 - row * 128 / max(1, f.chromaHeight))
        }
    }
    return f
}

/// A smooth, detailed texture (sums of sines, as a plasma) panned on a circle: frame `frame`
/// of a camera-like full-screen motion; chroma in panned ramps.
func pannedTexture(width: Int, height: Int, frame: Int) -> VideoFrame {
    let f = VideoFrame(width: width, height: height)
    let angle = Double(frame) * 2 * Double.pi / 60
    let dx = 40 * cos(angle), dy = 40 * sin(angle)
    for row in 0..<height {
        for col in 0..<width {
            let x = Double(col) + dx, y = Double(row) + dy
            let v = sin(x / 23) + sin(y / 17) + sin((x + y) / 31) + 0.5 * sin(x / 5.3 + 2 * sin(y / 9)) + 0.3 * sin((x - y) / 2.7)
            f.y[row * f.strideY + col] = UInt8(max(16, min(235, 125 + v * 35)))
        }
    }
    for row in 0..<f.chromaHeight {
        for col in 0..<f.chromaWidth {
            f.u[row * f.strideUV + col] = UInt8(96 + ((col + Int(dx)) % 64 + 64) % 64)
            f.v[row * f.strideUV + col] = UInt8(160 - ((row + Int(dy)) % 64 + 64) % 64)
        }
    }
    return f
}

struct EncodedFrame {
    var bytes: [UInt8]
    var info: EncodedFrameInfo
}

/// Encodes one frame and copies out what libvpx produced (nothing when it drops the frame).
func encode(_ encoder: VP8Encoder, _ frame: VideoFrame, index: Int) throws -> [EncodedFrame] {
    var out: [EncodedFrame] = []
    let step = Int64(90_000 / encoder.config.fps)
    try encoder.encode(frame, pts: Int64(index) * step, duration: UInt(step)) { bytes, info in
        out.append(EncodedFrame(bytes: Array(bytes), info: info))
    }
    return out
}

/// VP8 frame header (RFC 6386 §9.1): bit 0 of the frame tag is 0 for a key frame, which
/// then carries the start code 9d 01 2a and 14-bit width and height (little endian).
func bitstreamIsKeyframe(_ b: [UInt8]) -> Bool { b.count >= 10 && b[0] & 1 == 0 && b[3] == 0x9D && b[4] == 0x01 && b[5] == 0x2A }
func bitstreamSize(_ b: [UInt8]) -> PixelSize {
    PixelSize(width: (Int(b[6]) | Int(b[7]) << 8) & 0x3FFF, height: (Int(b[8]) | Int(b[9]) << 8) & 0x3FFF)
}

func config(_ w: Int, _ h: Int, content: ContentPreference = .motion, _ change: (inout VP8EncoderConfig) -> Void = { _ in }) -> VP8EncoderConfig {
    var c = VP8EncoderConfig(size: PixelSize(width: w, height: h))
    c.content = content
    change(&c)
    return c
}

@Suite struct VP8EncoderTests {
    @Test func encodeDecodeReachesGoodQuality() throws {
        let encoder = try VP8Encoder(config: config(640, 360, content: .detail))
        let decoder = try VP8Decoder()
        let picture = syntheticPicture(width: 640, height: 360)
        let other = syntheticPicture(width: 640, height: 360, shift: 4)  // the same text, 4 px over
        var psnrs: [Double] = []
        var chroma: [Double] = []
        var otherPSNR = 0.0
        var decodedSizes: Set<PixelSize> = []
        for i in 0..<8 {
            for frame in try encode(encoder, picture, index: i) {
                try frame.bytes.withUnsafeBytes { data in
                    try decoder.decode(data) { pic in
                        decodedSizes.insert(PixelSize(width: pic.width, height: pic.height))
                        psnrs.append(PictureQuality.psnr(picture.y, strideA: picture.strideY, pic.y, strideB: pic.strideY,
                                                         width: 640, height: 360))
                        chroma.append(min(
                            PictureQuality.psnr(picture.u, strideA: picture.strideUV, pic.u, strideB: pic.strideU, width: 320, height: 180),
                            PictureQuality.psnr(picture.v, strideA: picture.strideUV, pic.v, strideB: pic.strideV, width: 320, height: 180)))
                        otherPSNR = PictureQuality.psnr(other.y, strideA: other.strideY, pic.y, strideB: pic.strideY, width: 640, height: 360)
                    }
                }
            }
        }
        #expect(decodedSizes == [PixelSize(width: 640, height: 360)])
        #expect(psnrs.count >= 4, "frames decoded: \(psnrs.count)")
        #expect((psnrs.last ?? 0) >= 35, "Y PSNR per frame: \(psnrs)")
        #expect((chroma.last ?? 0) >= 35, "U/V PSNR per frame: \(chroma)")
        // The measure tells pictures apart: the decoded frame is far from the shifted text.
        #expect(otherPSNR < 25, "PSNR against a different picture: \(otherPSNR)")
    }

    @Test func movingTextStaysSharp() throws {
        let encoder = try VP8Encoder(config: config(640, 360))
        let decoder = try VP8Decoder()
        var last = 0.0
        for i in 0..<10 {
            let picture = syntheticPicture(width: 640, height: 360, shift: i * 3)
            for frame in try encode(encoder, picture, index: i) {
                try frame.bytes.withUnsafeBytes { data in
                    try decoder.decode(data) { pic in
                        last = PictureQuality.psnr(picture.y, strideA: picture.strideY, pic.y, strideB: pic.strideY, width: 640, height: 360)
                    }
                }
            }
        }
        #expect(last >= 30, "Y PSNR of the last scrolled frame: \(last)")
    }

    /// `detail` is encoded in libvpx's screen-content mode and `motion` as video, and a live
    /// change of preference switches the mode. Seen in the bitstream: in screen-content mode
    /// libvpx gives chroma a finer quantizer than luma at coarse quantizers (a negative U/V
    /// delta in the frame header), and as video it never does. (Video mode matters for motion:
    /// the sender in screen-content mode, one thread, on the bench's full-screen pan held its
    /// quantizer coarse, 37.3 dB against 43.7.)
    @Test func detailIsScreenContentAndMotionIsVideo() throws {
        func uvDeltas(_ encoder: VP8Encoder, frames: Range<Int>) throws -> [Int] {
            try frames.flatMap { i in
                try encode(encoder, pannedTexture(width: 320, height: 180, frame: i), index: i).map {
                    let header = try #require(VP8FrameHeader(bitstream: $0.bytes), "frame \(i)'s header")
                    return try #require(header.uvDeltaQ, "frame \(i): U/V DC and AC deltas differ: \(header)")
                }
            }
        }
        let low: (inout VP8EncoderConfig) -> Void = { $0.fps = 30; $0.targetBitrateKbps = 40; $0.cpuUsed = -8 }
        let detail = try VP8Encoder(config: config(320, 180, content: .detail, low))
        let detailDeltas = try uvDeltas(detail, frames: 0..<20)
        #expect(detailDeltas.contains { $0 < 0 }, "detail's U/V delta quantizers: \(detailDeltas)")
        let motion = try uvDeltas(try VP8Encoder(config: config(320, 180, content: .motion, low)), frames: 0..<20)
        #expect(motion.count == 20 && motion.allSatisfy { $0 == 0 }, "motion's U/V delta quantizers: \(motion)")
        try detail.reconfigure(targetBitrateKbps: 40, content: .motion)
        let switched = try uvDeltas(detail, frames: 20..<30)
        #expect(switched.count == 10 && switched.allSatisfy { $0 == 0 }, "after the switch to motion: \(switched)")
        try detail.reconfigure(targetBitrateKbps: 40, content: .detail)
        let back = try uvDeltas(detail, frames: 30..<40)
        #expect(back.contains { $0 < 0 }, "back to detail: \(back)")
    }

    /// Decodes the frames `keep` chooses of a scrolling page with a fresh decoder; the Y-PSNR
    /// of each decoded frame against its source, and the layers the encoder said.
    static func decodeSome(layers: Int, frames: Int = 20, keyframeAt: Int? = nil,
                           keep: (Int, EncodedFrameInfo) -> Bool) throws -> (psnr: [Double], layers: [UInt8?], keys: [Bool]) {
        let encoder = try VP8Encoder(config: config(640, 360) { $0.temporalLayers = layers })
        let decoder = try VP8Decoder()
        var psnr: [Double] = [], said: [UInt8?] = [], keys: [Bool] = []
        for i in 0..<frames {
            let picture = syntheticPicture(width: 640, height: 360, shift: i * 3)
            if i == keyframeAt { encoder.requestKeyframe() }
            for frame in try encode(encoder, picture, index: i) {
                said.append(frame.info.temporalLayer)
                keys.append(frame.info.isKeyframe)
                guard keep(i, frame.info) else { continue }
                try frame.bytes.withUnsafeBytes { data in
                    try decoder.decode(data) { pic in
                        psnr.append(PictureQuality.psnr(picture.y, strideA: picture.strideY, pic.y, strideB: pic.strideY, width: 640, height: 360))
                    }
                }
            }
        }
        return (psnr, said, keys)
    }

    /// Two temporal layers: frames alternate TL0, TL1 (a keyframe is TL0 and starts the
    /// pattern again), and the base layer decodes on its own — every TL0 frame as sharp as
    /// with the TL1 frames — because nothing references a TL1 frame.
    /// The active map: macroblocks marked 0 are taken from the last frame as they were, so a
    /// change there does not show, while a change in an active one does; nil encodes all again.
    @Test func anActiveMapSkipsTheMacroblocksLeftOut() throws {
        let encoder = try VP8Encoder(config: config(320, 192, content: .detail))
        let decoder = try VP8Decoder()
        let before = syntheticPicture(width: 320, height: 192)
        let after = syntheticPicture(width: 320, height: 192, shift: 5)  // every text macroblock differs
        var last: [UInt8] = []
        func run(_ frame: VideoFrame, _ index: Int) throws {
            for f in try encode(encoder, frame, index: index) {
                try f.bytes.withUnsafeBytes { data in
                    try decoder.decode(data) { pic in
                        last = (0..<pic.height).flatMap { r in Array(UnsafeBufferPointer(start: pic.y + r * pic.strideY, count: pic.width)) }
                    }
                }
            }
        }
        for i in 0..<6 { try run(before, i) }
        // Only the macroblock row 4 (pixels 64–79) is active.
        var map = [UInt8](repeating: 0, count: 20 * 12)
        for c in 0..<20 { map[4 * 20 + c] = 1 }
        let accepted = map.withUnsafeMutableBufferPointer { encoder.setActiveMap($0.baseAddress, rows: 12, columns: 20) }
        #expect(accepted)
        for i in 6..<10 { try run(after, i) }
        func rowsPSNR(_ reference: VideoFrame, _ rows: Range<Int>) -> Double {
            let got = Array(last[(rows.lowerBound * 320)..<(rows.upperBound * 320)])
            return got.withUnsafeBufferPointer { g in
                PictureQuality.psnr(reference.y + rows.lowerBound * reference.strideY, strideA: reference.strideY, g.baseAddress!, strideB: 320,
                                    width: 320, height: rows.count)
            }
        }
        #expect(rowsPSNR(after, 64..<80) >= 30, "the active row did not follow: \(rowsPSNR(after, 64..<80)) dB")
        #expect(rowsPSNR(before, 32..<48) >= 30 && rowsPSNR(after, 32..<48) < 25,
                "a left-out row changed: \(rowsPSNR(before, 32..<48)) / \(rowsPSNR(after, 32..<48)) dB")
        // A wrong size is refused; nil encodes everything again.
        let wrongSize = map.withUnsafeMutableBufferPointer { encoder.setActiveMap($0.baseAddress, rows: 11, columns: 20) }
        #expect(!wrongSize)
        #expect(encoder.setActiveMap(nil, rows: 12, columns: 20))
        for i in 10..<16 { try run(after, i) }
        #expect(rowsPSNR(after, 32..<48) >= 30, "\(rowsPSNR(after, 32..<48)) dB")
    }

    /// The stream's first keyframe may be as large as `maxIntraBitratePercent` allows: libvpx
    /// gives the first frame half its starting buffer, and from 500 ms that was 3.75 frames'
    /// worth at 15 fps, where 9 are allowed.
    @Test func theFirstKeyframeGetsTheBufferItIsAllowed() throws {
        let w = 640, h = 360, kbps = 300, fps = 15
        // A fixed speed (negative cpu-used), so the size does not depend on the machine's load.
        let encoder = try VP8Encoder(config: config(w, h, content: .detail) { $0.targetBitrateKbps = kbps; $0.fps = fps; $0.cpuUsed = -6 })
        let picture = syntheticPicture(width: w, height: h)  // text: far more than 9 frames' worth at the finest quantizer
        let keyframe = try encode(encoder, picture, index: 0)
        let frameBytes = kbps * 1000 / 8 / fps
        #expect(keyframe.count == 1 && keyframe[0].info.isKeyframe)
        let size = keyframe.first?.bytes.count ?? 0
        // From 1000 ms (600 aimed at + 600 for the keyframe, at most 1000), 7.5 frames' worth
        // aimed at: libvpx made 9.2 (from 500 ms, 3.75 aimed at, it made 6.0). The cap (9
        // frames, and libvpx's overshoot) still holds.
        #expect(size * 2 >= 15 * frameBytes && size <= 11 * frameBytes, "keyframe \(size) bytes, a frame's share \(frameBytes)")
    }

    /// Screen-captured video (a smooth texture panned) makes libvpx's first guess at sizes far
    /// too large: without the opening's ceilings its first keyframe and the frames after it
    /// come out coarse and small. With them the keyframe is finer, the frames after it stay
    /// under their ceiling, the second's bytes stay near its share, and libvpx's own range
    /// comes back after a second.
    @Test func theOpeningKeepsTheFirstSecondFromStartingCoarse() throws {
        let w = 640, h = 360, fps = 30, kbps = 500
        func run(opening: Bool) throws -> (psnr: [Double], quantizers: [Int], bytes: Int, encoder: VP8Encoder) {
            let encoder = try VP8Encoder(config: config(w, h) { $0.targetBitrateKbps = kbps; $0.fps = fps; $0.cpuUsed = -8; $0.openingCeiling = opening })
            let decoder = try VP8Decoder()
            var psnr: [Double] = [], quantizers: [Int] = [], bytes = 0
            for i in 0..<fps {
                let picture = pannedTexture(width: w, height: h, frame: i)
                #expect(encoder.isOpening == opening, "frame \(i)")
                if opening { #expect(encoder.maxQuantizer == (i == 0 ? OpeningCeiling.keyframeQuantizer : OpeningCeiling.frameQuantizer)) }
                for frame in try encode(encoder, picture, index: i) {
                    bytes += frame.bytes.count
                    quantizers.append(encoder.lastQuantizer() ?? -1)
                    try frame.bytes.withUnsafeBytes { data in
                        try decoder.decode(data) { pic in
                            psnr.append(PictureQuality.psnr(picture.y, strideA: picture.strideY, pic.y, strideB: pic.strideY, width: w, height: h))
                        }
                    }
                }
            }
            return (psnr, quantizers, bytes, encoder)
        }
        let plain = try run(opening: false), opened = try run(opening: true)
        #expect(plain.psnr.count == fps && opened.psnr.count == fps)
        // The failure the ceilings are for: libvpx starts coarse on this content.
        #expect(plain.quantizers[0] > OpeningCeiling.keyframeQuantizer, "quantizers without the opening: \(plain.quantizers)")
        #expect(opened.quantizers[0] <= OpeningCeiling.keyframeQuantizer)
        #expect(opened.quantizers.dropFirst().allSatisfy { $0 <= OpeningCeiling.frameQuantizer }, "\(opened.quantizers)")
        #expect(opened.psnr[0] >= plain.psnr[0] + 2, "first keyframe: \(opened.psnr[0]) dB, without the opening \(plain.psnr[0])")
        let mean = { (v: [Double]) in v.reduce(0, +) / Double(v.count) }
        #expect(mean(opened.psnr) >= mean(plain.psnr) + 1, "the second's Y PSNR: \(opened.psnr) against \(plain.psnr)")
        // At most the second's share and the keyframe's allowance (9 frames).
        let frameBytes = kbps * 1000 / 8 / fps
        #expect(opened.bytes <= (fps + 9) * frameBytes, "\(opened.bytes) bytes, a frame's share \(frameBytes)")
        #expect(!opened.encoder.isOpening && opened.encoder.maxQuantizer == 63)
    }

    /// A content whose sizes libvpx does not overestimate (noise) overspends under a ceiling:
    /// the opening ends as soon as its bytes pass the share and the keyframe's allowance.
    @Test func theOpeningEndsOnceItOverspends() throws {
        let w = 320, h = 192
        let encoder = try VP8Encoder(config: config(w, h) { $0.targetBitrateKbps = 100; $0.fps = 30; $0.cpuUsed = -8; $0.openingCeiling = true })
        var rng = SystemRandomNumberGenerator()
        let noise = VideoFrame(width: w, height: h)
        for i in 0..<(noise.strideY * h) { noise.y[i] = UInt8.random(in: 16...235, using: &rng) }
        let keyframe = try encode(encoder, noise, index: 0)
        #expect((keyframe.first?.bytes.count ?? 0) > 10 * 100_000 / 8 / 30, "the keyframe overspends: \(keyframe.first?.bytes.count ?? 0) bytes")
        #expect(!encoder.isOpening)
        #expect(encoder.maxQuantizer == 63)
    }

    /// The VP8 version (RFC 6386 §9.1: bits 1–3 of every frame's tag) is 2 for `detail`
    /// (bilinear prediction, no loop filter) and 0 for `motion`; switching the content starts
    /// the new version at a keyframe, and every frame decodes.
    @Test func detailIsVersion2AndMotionVersion0FromAKeyframeOn() throws {
        func version(_ b: [UInt8]) -> Int { Int(b[0] >> 1) & 7 }
        let w = 320, h = 192
        let encoder = try VP8Encoder(config: config(w, h, content: .detail) { $0.cpuUsed = -8 })
        let decoder = try VP8Decoder()
        var frames: [(key: Bool, version: Int)] = []
        var decoded = 0
        for i in 0..<8 {
            if i == 4 { try encoder.reconfigure(targetBitrateKbps: 2000, content: .motion) }
            for frame in try encode(encoder, pannedTexture(width: w, height: h, frame: i), index: i) {
                frames.append((bitstreamIsKeyframe(frame.bytes), version(frame.bytes)))
                try frame.bytes.withUnsafeBytes { data in try decoder.decode(data) { _ in decoded += 1 } }
            }
        }
        #expect(frames.map(\.version) == [2, 2, 2, 2, 0, 0, 0, 0], "\(frames)")
        #expect(frames.map(\.key) == [true, false, false, false, true, false, false, false], "\(frames)")
        #expect(decoded == 8)
        // The same content again: no new version, no keyframe.
        try encoder.reconfigure(targetBitrateKbps: 1500, content: .motion)
        let next = try encode(encoder, pannedTexture(width: w, height: h, frame: 8), index: 8)
        #expect(next.count == 1 && !bitstreamIsKeyframe(next[0].bytes) && version(next[0].bytes) == 0)
    }

    @Test func theOpeningCountsASecondAndTheShareSpent() {
        var opening = OpeningCeiling(fps: 30, bitrateKbps: 2400, keyframePercent: 900)  // 10 000 bytes a frame
        #expect(opening.ceiling == OpeningCeiling.keyframeQuantizer)
        #expect(opening.frameEncoded(bytes: 95_000) == OpeningCeiling.frameQuantizer)  // 10 000 + 90 000 allowed
        #expect(opening.ceiling == OpeningCeiling.frameQuantizer)
        for _ in 2..<30 { #expect(opening.frameEncoded(bytes: 9_000) == OpeningCeiling.frameQuantizer) }
        #expect(opening.frameEncoded(bytes: 9_000) == nil, "a second of frames")
        var over = OpeningCeiling(fps: 30, bitrateKbps: 2400, keyframePercent: 900)
        #expect(over.frameEncoded(bytes: 60_000) != nil)
        #expect(over.frameEncoded(bytes: 50_001) == nil, "110 001 bytes after two frames: 20 000 + 90 000 allowed")
    }

    @Test(arguments: [(30, 900, 900), (15, 900, 1000), (60, 900, 750), (30, 300, 700), (30, 0, 1000)])
    func theBufferStartsWithTheFirstKeyframePaidFor(_ fps: Int, _ percent: Int, _ ms: Int) {
        let c = config(64, 64) { $0.fps = fps; $0.maxIntraBitratePercent = percent }
        #expect(VP8Encoder.initialBufferMs(optimalMs: 600, maxMs: 1000, config: c) == ms)
    }

    /// libvpx zeroes a token buffer of 24 bytes a pixel (50 MB at 1080p) when the encoder is
    /// made, and fills a post-processing frame with 128 that an encoder never reads; routed
    /// through CZeroFill, the pages never touched are left alone, and libvpx encodes exactly as
    /// with every byte written.
    @Test func theTokenBufferIsNotMadeResidentAndEncodingIsUnchanged() throws {
        #expect(VP8Encoder.zeroFillProblem == nil)
        // A fixed speed (negative cpu-used): at a positive one libvpx picks its speed from how
        // long frames take, so two encoders differ under load whatever their memory.
        let c = config(1920, 1080, content: .detail) { $0.cpuUsed = -10 }
        let skipped0 = zero_fill_skipped_bytes(), unread0 = zero_fill_skipped_unread_bytes()
        let lean = try VP8Encoder(config: c)
        let skipped = zero_fill_skipped_bytes() - skipped0, unread = zero_fill_skipped_unread_bytes() - unread0
        #expect(skipped >= 20 * 1920 * 1080, "left alone: \(skipped) bytes")
        // The post-processing frame: 1920x1088 (whole macroblocks) with 32-pixel borders, the
        // rows 32-byte aligned, 4:2:0; all of it but the two pages at its ends.
        let yStride = (1920 + 64 + 31) / 32 * 32, frame = (1088 + 64) * yStride + 2 * (544 + 32) * (yStride / 2)
        #expect(unread >= UInt64(frame - 2 * 4096), "left alone of the post-processing frame: \(unread) of \(frame) bytes")
        zero_fill_set_disabled_on_this_thread(1)
        let full = try VP8Encoder(config: c)
        zero_fill_set_disabled_on_this_thread(0)
        let pictures = [syntheticPicture(width: 1920, height: 1080), syntheticPicture(width: 1920, height: 1080, shift: 3)]
        for i in 0..<6 {
            let a = try encode(lean, pictures[i % 2], index: i), b = try encode(full, pictures[i % 2], index: i)
            #expect(!a.isEmpty)
            #expect(a.map(\.bytes) == b.map(\.bytes), "frame \(i) differs")
        }
    }

    @Test func twoTemporalLayersAlternateAndTheBaseDecodesAlone() throws {
        let all = try Self.decodeSome(layers: 2, keyframeAt: 7) { _, _ in true }
        #expect(all.layers == [0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0], "\(all.layers)")
        #expect(all.keys.enumerated().filter(\.element).map(\.offset) == [0, 7], "\(all.keys)")
        #expect(all.psnr.count == 20 && all.psnr.allSatisfy { $0 >= 28 }, "every frame: \(all.psnr)")
        let base = try Self.decodeSome(layers: 2, keyframeAt: 7) { _, info in info.temporalLayer == 0 }
        #expect(base.psnr.count == 11 && base.psnr.allSatisfy { $0 >= 28 }, "the base layer alone: \(base.psnr)")
        // The measure would see it: one layer, every other frame dropped, goes wrong.
        let broken = try Self.decodeSome(layers: 1) { i, _ in i % 2 == 0 }
        #expect(broken.layers.allSatisfy { $0 == nil })
        #expect(broken.psnr.dropFirst().contains { $0 < 20 }, "one layer, half the frames: \(broken.psnr)")
    }

    /// Three temporal layers (rooms): TL0, TL2, TL1, TL2 (a keyframe is TL0 and starts the
    /// pattern again); the base layer decodes alone, and so do TL0 + TL1, each frame as sharp
    /// as with every layer, because upper-layer frames reference only TL0 and nothing
    /// references them.
    @Test func threeTemporalLayersRepeatTL0TL2TL1TL2AndTheLowerLayersDecodeAlone() throws {
        let all = try Self.decodeSome(layers: 3, keyframeAt: 6) { _, _ in true }
        #expect(all.layers == [0, 2, 1, 2, 0, 2, 0, 2, 1, 2, 0, 2, 1, 2, 0, 2, 1, 2, 0, 2], "\(all.layers)")
        #expect(all.keys.enumerated().filter(\.element).map(\.offset) == [0, 6], "\(all.keys)")
        #expect(all.psnr.count == 20 && all.psnr.allSatisfy { $0 >= 28 }, "every frame: \(all.psnr)")
        let base = try Self.decodeSome(layers: 3, keyframeAt: 6) { _, info in info.temporalLayer == 0 }
        #expect(base.psnr.count == 6 && base.psnr.allSatisfy { $0 >= 28 }, "the base layer alone: \(base.psnr)")
        let half = try Self.decodeSome(layers: 3, keyframeAt: 6) { _, info in (info.temporalLayer ?? 9) <= 1 }
        #expect(half.psnr.count == 10 && half.psnr.allSatisfy { $0 >= 28 }, "TL0 and TL1: \(half.psnr)")
    }

    @Test func firstFrameIsAKeyframeAndRequestKeyframeForcesTheNext() throws {
        let encoder = try VP8Encoder(config: config(320, 180))
        var keys: [Bool] = []
        for i in 0..<10 {
            if i == 6 { encoder.requestKeyframe() }
            let frames = try encode(encoder, syntheticPicture(width: 320, height: 180, shift: i), index: i)
            #expect(frames.count == 1, "frame \(i): motion content never drops")
            for f in frames {
                #expect(f.info.byteCount == f.bytes.count)
                #expect(f.info.isKeyframe == bitstreamIsKeyframe(f.bytes), "frame \(i): info and bitstream disagree")
                if f.info.isKeyframe { #expect(bitstreamSize(f.bytes) == PixelSize(width: 320, height: 180)) }
                keys.append(f.info.isKeyframe)
            }
        }
        #expect(keys == [true, false, false, false, false, false, true, false, false, false])
    }

    @Test func noPeriodicKeyframesWithoutAnInterval() throws {
        let encoder = try VP8Encoder(config: config(160, 96))
        var keys: [Int] = []
        for i in 0..<40 {
            for f in try encode(encoder, syntheticPicture(width: 160, height: 96, shift: i), index: i) where f.info.isKeyframe {
                keys.append(i)
            }
        }
        #expect(keys == [0])
    }

    @Test func keyframeIntervalGivesPeriodicKeyframes() throws {
        // 1 s at 5 fps: at most 5 frames apart.
        let encoder = try VP8Encoder(config: config(160, 96) { $0.fps = 5; $0.keyframeIntervalSeconds = 1 })
        var keys: [Int] = []
        for i in 0..<21 {
            for f in try encode(encoder, syntheticPicture(width: 160, height: 96, shift: i), index: i) where f.info.isKeyframe {
                keys.append(i)
            }
        }
        #expect(keys.first == 0)
        #expect(keys.count >= 4, "keyframes at \(keys)")
        #expect(zip(keys, keys.dropFirst()).allSatisfy { $1 - $0 <= 5 }, "keyframes at \(keys)")
    }

    @Test(arguments: [(2, 2), (63, 35), (641, 361)])
    func oddAndTinySizesRoundTrip(_ w: Int, _ h: Int) throws {
        let encoder = try VP8Encoder(config: config(w, h))
        let decoder = try VP8Decoder()
        let picture = syntheticPicture(width: w, height: h)
        var sizes: [PixelSize] = []
        for i in 0..<3 {
            for f in try encode(encoder, picture, index: i) {
                try f.bytes.withUnsafeBytes { try decoder.decode($0) { sizes.append(PixelSize(width: $0.width, height: $0.height)) } }
            }
        }
        #expect(sizes == [PixelSize(width: w, height: h)] * 3)
    }

    @Test(arguments: [
        (config(0, 0), "0x0"),
        (config(0, 360), "0x360"),
        (config(1, 1), "1x1"),
        (config(16385, 100), "16385x100"),
        (config(640, 360) { $0.fps = 0 }, "fps 0"),
        (config(640, 360) { $0.fps = -5 }, "fps -5"),
        (config(640, 360) { $0.fps = 121 }, "fps 121"),
        (config(640, 360) { $0.targetBitrateKbps = 5 }, "bitrate 5"),
    ])
    func badConfigThrowsNamingTheValue(_ c: VP8EncoderConfig, _ named: String) {
        let error = #expect(throws: VP8CodecError.self) { try VP8Encoder(config: c) }
        #expect(error?.description.contains(named) == true, "\(error?.description ?? "no error")")
    }

    @Test func frameOfAnotherSizeThrowsAndTheEncoderKeepsWorking() throws {
        let encoder = try VP8Encoder(config: config(320, 180))
        let error = #expect(throws: VP8CodecError.self) { _ = try encode(encoder, VideoFrame(width: 322, height: 180), index: 0) }
        #expect(error?.description.contains("322x180") == true)
        #expect(error?.description.contains("320x180") == true)
        // The refused frame did not consume the pending keyframe.
        let frames = try encode(encoder, syntheticPicture(width: 320, height: 180), index: 1)
        #expect(frames.map(\.info.isKeyframe) == [true])
    }
}

/// libvpx's adaptive speed is started again once a second when nothing else changed the
/// encoder's configuration (a stretch at a fast speed lasts at most that); never a fixed one.
@Suite struct SpeedRestartTests {
    @Test func anAdaptiveSpeedStartsAgainEverySecondOfFrames() {
        var restart = SpeedRestart(adaptive: true, intervalFrames: 30)
        let firstSecond = (0..<30).map { _ in restart.frameEncoded() }
        #expect(!firstSecond.contains(true))
        let thirtyFirst = restart.frameEncoded()
        #expect(thirtyFirst, "the 31st frame starts the speed again")
        let secondSecond = (0..<29).map { _ in restart.frameEncoded() }
        #expect(!secondSecond.contains(true))
        let again = restart.frameEncoded()
        #expect(again, "30 frames after the restart, again")
        // Another change of configuration restarted it: the count starts there.
        for _ in 0..<20 { _ = restart.frameEncoded() }
        restart.configurationChanged()
        let afterChange = (0..<30).map { _ in restart.frameEncoded() }
        #expect(!afterChange.contains(true))
        let next = restart.frameEncoded()
        #expect(next)
    }

    @Test func aFixedSpeedIsNeverRestarted() {
        var restart = SpeedRestart(adaptive: false, intervalFrames: 30)
        let all = (0..<200).map { _ in restart.frameEncoded() }
        #expect(!all.contains(true))
    }

    /// The encoder re-applies cpu-used (libvpx accepts it) once a second of frames at an
    /// adaptive speed; not at a fixed speed, and not while other changes restart it anyway.
    @Test func theEncoderRestartsItsAdaptiveSpeed() throws {
        let adaptive = try VP8Encoder(config: config(160, 96) { $0.fps = 10; $0.cpuUsed = 8 })
        let fixed = try VP8Encoder(config: config(160, 96) { $0.fps = 10; $0.cpuUsed = -8 })
        for i in 0..<25 {
            let picture = pannedTexture(width: 160, height: 96, frame: i)
            _ = try encode(adaptive, picture, index: i)
            _ = try encode(fixed, picture, index: i)
        }
        #expect(adaptive.speedRestarts == 2, "restarts in 25 frames at 10 fps: \(adaptive.speedRestarts)")
        #expect(fixed.speedRestarts == 0)
        let busy = try VP8Encoder(config: config(160, 96) { $0.fps = 10; $0.cpuUsed = 8 })
        for i in 0..<25 {
            try busy.reconfigure(targetBitrateKbps: 300 + i, content: .motion)
            _ = try encode(busy, pannedTexture(width: 160, height: 96, frame: i), index: i)
        }
        #expect(busy.speedRestarts == 0, "restarted \(busy.speedRestarts) times between reconfigurations")
        // `detail` is not restarted (its rate control moves with each change), and a switch
        // of content switches it.
        let detail = try VP8Encoder(config: config(160, 96, content: .detail) { $0.fps = 10; $0.cpuUsed = 10 })
        for i in 0..<25 { _ = try encode(detail, pannedTexture(width: 160, height: 96, frame: i), index: i) }
        #expect(detail.speedRestarts == 0)
        try detail.reconfigure(targetBitrateKbps: 300, content: .motion)
        for i in 25..<50 { _ = try encode(detail, pannedTexture(width: 160, height: 96, frame: i), index: i) }
        #expect(detail.speedRestarts == 2, "restarts in 25 frames after the switch to motion: \(detail.speedRestarts)")
    }
}

extension Array {
    static func * (lhs: Array, rhs: Int) -> Array { Array((0..<rhs).map { _ in lhs }.joined()) }
}
