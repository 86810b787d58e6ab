import MediaCore
import Basics
import Testing
@testable import VideoProcessing

/// A colour as 8-bit R, G, B and its BT.601 studio-range Y'CbCr, worked out by hand from
/// Y = ((66R + 129G + 25B + 128) >> 8) + 16, U = ((−38R − 74G + 112B + 128) >> 8) + 128,
/// V = ((112R − 94G − 18B + 128) >> 8) + 128.
struct Colour: Sendable, CustomTestStringConvertible {
    var name: String
    var r: UInt8, g: UInt8, b: UInt8
    var y: UInt8, u: UInt8, v: UInt8
    var testDescription: String { name }
}

let colours: [Colour] = [
    Colour(name: "white", r: 255, g: 255, b: 255, y: 235, u: 128, v: 128),
    Colour(name: "black", r: 0, g: 0, b: 0, y: 16, u: 128, v: 128),
    Colour(name: "red", r: 255, g: 0, b: 0, y: 82, u: 90, v: 240),
    Colour(name: "green", r: 0, g: 255, b: 0, y: 144, u: 54, v: 34),
    Colour(name: "blue", r: 0, g: 0, b: 255, y: 41, u: 240, v: 110),
    Colour(name: "grey", r: 128, g: 128, b: 128, y: 126, u: 128, v: 128),
]

/// Packed BGRA (bytes B, G, R, X) with a row stride wider than the picture; the padding
/// is filled with a loud colour so reading it would show.
struct BGRAImage {
    let width: Int, height: Int, stride: Int
    var bytes: [UInt8]

    init(width: Int, height: Int, padding: Int = 12, pixel: (Int, Int) -> (r: UInt8, g: UInt8, b: UInt8)) {
        self.width = width
        self.height = height
        stride = width * 4 + padding
        bytes = [UInt8](repeating: 0, count: stride * height)
        for row in 0..<height {
            for col in 0..<(stride / 4) {
                let (r, g, b) = col < width ? pixel(col, row) : (255, 0, 255)
                let o = row * stride + col * 4
                bytes[o] = b
                bytes[o + 1] = g
                bytes[o + 2] = r
                bytes[o + 3] = 0xFF
            }
        }
    }

    func convert(with converter: FrameConverter, into frame: VideoFrame) {
        bytes.withUnsafeBytes {
            converter.convert(bgra: BGRAImageView(base: $0.baseAddress!, stride: stride, width: width, height: height), into: frame)
        }
    }
}

/// Every sample of a plane, row by row.
func samples(_ plane: UnsafeMutablePointer<UInt8>, stride: Int, width: Int, height: Int) -> [[UInt8]] {
    (0..<height).map { row in Array(UnsafeBufferPointer(start: plane + row * stride, count: width)) }
}

func expectFlat(_ frame: VideoFrame, y: UInt8, u: UInt8, v: UInt8, tolerance: Int = 1, sourceLocation: SourceLocation = #_sourceLocation) {
    func check(_ plane: [[UInt8]], _ value: UInt8, _ name: String) {
        let all = plane.joined()
        let worst = all.map { abs(Int($0) - Int(value)) }.max() ?? 0
        #expect(worst <= tolerance, "\(name): expected \(value) ±\(tolerance), got \(Set(all).sorted())", sourceLocation: sourceLocation)
    }
    check(samples(frame.y, stride: frame.strideY, width: frame.width, height: frame.height), y, "Y")
    check(samples(frame.u, stride: frame.strideUV, width: frame.chromaWidth, height: frame.chromaHeight), u, "U")
    check(samples(frame.v, stride: frame.strideUV, width: frame.chromaWidth, height: frame.chromaHeight), v, "V")
}

@Suite struct FrameConverterTests {
    @Test(arguments: colours)
    func flatBGRAConvertsToBT601StudioRange(_ c: Colour) {
        for (w, h) in [(16, 16), (5, 3), (1, 1)] {  // even, odd (chroma covers a half pixel), tiny
            let frame = VideoFrame(width: w, height: h)
            frame.fill(y: 0, u: 0, v: 0)
            BGRAImage(width: w, height: h) { _, _ in (c.r, c.g, c.b) }.convert(with: FrameConverter(), into: frame)
            expectFlat(frame, y: c.y, u: c.u, v: c.v)
        }
    }

    /// `precise` (`detail`): every Y within rounding of BT.601's exact matrix (65.481, 128.553,
    /// 24.966 over 255), on every 8-bit colour a 64-step grid reaches and a gradient of all
    /// levels; chroma too, from each 2×2 block's mean colour. libyuv's 8-bit matrix, on the
    /// same picture, is a level off on many of them (which is why `detail` does not use it).
    @Test func preciseConversionIsBT601ToWithinRounding() {
        let width = 258, height = 66  // even and wide enough for the vector loops, plus two
        let image = BGRAImage(width: width, height: height) { x, y in
            (UInt8(truncatingIfNeeded: x), UInt8(truncatingIfNeeded: y * 4 + x / 64), UInt8(truncatingIfNeeded: (x * 7 + y * 13) & 255))
        }
        func exact(_ r: Double, _ g: Double, _ b: Double) -> (y: Double, u: Double, v: Double) {
            (16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255, 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255,
             128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255)
        }
        func rgb(_ x: Int, _ y: Int) -> (Double, Double, Double) {
            let o = y * image.stride + x * 4
            return (Double(image.bytes[o + 2]), Double(image.bytes[o + 1]), Double(image.bytes[o]))
        }
        let precise = FrameConverter()
        precise.precise = true
        let frame = VideoFrame(width: width, height: height), fast = VideoFrame(width: width, height: height)
        image.convert(with: precise, into: frame)
        image.convert(with: FrameConverter(), into: fast)
        var worstY = 0.0, fastOff = 0, worstChroma = 0.0
        for y in 0..<height {
            for x in 0..<width {
                let (r, g, b) = rgb(x, y)
                let want = exact(r, g, b).y
                worstY = max(worstY, abs(Double(frame.y[y * frame.strideY + x]) - want))
                if Int(fast.y[y * fast.strideY + x]) != Int((want + 0.5).rounded(.down)) { fastOff += 1 }
            }
        }
        for cy in 0..<(height / 2) {
            for cx in 0..<(width / 2) {
                var sum = (0.0, 0.0, 0.0)
                for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                    let (r, g, b) = rgb(2 * cx + dx, 2 * cy + dy)
                    sum = (sum.0 + r / 4, sum.1 + g / 4, sum.2 + b / 4)
                }
                let want = exact(sum.0, sum.1, sum.2)
                worstChroma = max(worstChroma, abs(Double(frame.u[cy * frame.strideUV + cx]) - want.u),
                                  abs(Double(frame.v[cy * frame.strideUV + cx]) - want.v))
            }
        }
        #expect(worstY <= 0.51, "Y off by \(worstY)")
        #expect(worstChroma <= 0.51, "chroma off by \(worstChroma)")
        #expect(fastOff > width * height / 20, "libyuv's 8-bit matrix: \(fastOff) of \(width * height) Y samples off")
        // And the flat colours of the table, odd sizes included.
        for c in colours {
            for (w, h) in [(16, 16), (5, 3), (1, 1)] {
                let flat = VideoFrame(width: w, height: h)
                BGRAImage(width: w, height: h) { _, _ in (c.r, c.g, c.b) }.convert(with: precise, into: flat)
                expectFlat(flat, y: c.y, u: c.u, v: c.v)
            }
        }
    }

    @Test func leftRightAndTopBottomLandInTheRightPlaces() {
        // Left half red, right half blue; top rows of the right half green.
        let image = BGRAImage(width: 8, height: 4) { col, row in
            col < 4 ? (255, 0, 0) : (row < 2 ? (0, 255, 0) : (0, 0, 255))
        }
        let frame = VideoFrame(width: 8, height: 4)
        image.convert(with: FrameConverter(), into: frame)
        let y = samples(frame.y, stride: frame.strideY, width: 8, height: 4)
        let u = samples(frame.u, stride: frame.strideUV, width: 4, height: 2)
        let v = samples(frame.v, stride: frame.strideUV, width: 4, height: 2)
        func near(_ a: [[UInt8]], _ b: [[UInt8]]) -> Bool {
            zip(a.joined(), b.joined()).allSatisfy { abs(Int($0) - Int($1)) <= 1 }
        }
        #expect(near(y, [[82, 82, 82, 82, 144, 144, 144, 144], [82, 82, 82, 82, 144, 144, 144, 144],
                         [82, 82, 82, 82, 41, 41, 41, 41], [82, 82, 82, 82, 41, 41, 41, 41]]), "\(y)")
        #expect(near(u, [[90, 90, 54, 54], [90, 90, 240, 240]]), "\(u)")
        #expect(near(v, [[240, 240, 34, 34], [240, 240, 110, 110]]), "\(v)")
    }

    @Test func nv12IsDeinterleavedExactly() {
        // 6x4 picture: Y[r][c] = 16r + c; UV pairs U = 100 + i, V = 200 + i (i = chroma index).
        // Strides wider than the rows, padding filled with 0xEE.
        let (w, h, strideY, strideUV) = (6, 4, 8, 10)
        var yPlane = [UInt8](repeating: 0xEE, count: strideY * h)
        var uvPlane = [UInt8](repeating: 0xEE, count: strideUV * h / 2)
        for r in 0..<h { for c in 0..<w { yPlane[r * strideY + c] = UInt8(16 * r + c) } }
        for r in 0..<(h / 2) {
            for c in 0..<(w / 2) {
                uvPlane[r * strideUV + 2 * c] = UInt8(100 + r * 3 + c)
                uvPlane[r * strideUV + 2 * c + 1] = UInt8(200 + r * 3 + c)
            }
        }
        let frame = VideoFrame(width: w, height: h)
        yPlane.withUnsafeBytes { y in
            uvPlane.withUnsafeBytes { uv in
                FrameConverter().convertNV12(y: y.baseAddress!, strideY: strideY, uv: uv.baseAddress!, strideUV: strideUV,
                                             size: frame.size, into: frame)
            }
        }
        #expect(samples(frame.y, stride: frame.strideY, width: w, height: h)
            == [[0, 1, 2, 3, 4, 5], [16, 17, 18, 19, 20, 21], [32, 33, 34, 35, 36, 37], [48, 49, 50, 51, 52, 53]])
        #expect(samples(frame.u, stride: frame.strideUV, width: 3, height: 2) == [[100, 101, 102], [103, 104, 105]])
        #expect(samples(frame.v, stride: frame.strideUV, width: 3, height: 2) == [[200, 201, 202], [203, 204, 205]])
    }

    @Test func scalingGivesTheFrameSizeAndKeepsFlatColours() {
        let converter = FrameConverter()
        let frame = VideoFrame(width: 32, height: 18)
        // Different source sizes through one converter (its scratch buffer is re-made per size).
        for (w, h, c) in [(64, 36, colours[2]), (100, 56, colours[3]), (64, 36, colours[4]), (33, 19, colours[0])] {
            frame.fill(y: 0, u: 0, v: 0)
            BGRAImage(width: w, height: h) { _, _ in (c.r, c.g, c.b) }.convert(with: converter, into: frame)
            #expect(frame.size == PixelSize(width: 32, height: 18))
            expectFlat(frame, y: c.y, u: c.u, v: c.v)
        }
    }

    @Test func scalingKeepsGeometry() {
        // 64x48, left half white, right half black → 32x24: left half ≈ 235, right half ≈ 16.
        let image = BGRAImage(width: 64, height: 48) { col, _ in col < 32 ? (255, 255, 255) : (0, 0, 0) }
        let frame = VideoFrame(width: 32, height: 24)
        image.convert(with: FrameConverter(), into: frame)
        let y = samples(frame.y, stride: frame.strideY, width: 32, height: 24)
        for row in y {
            #expect(row[0..<15].allSatisfy { abs(Int($0) - 235) <= 1 }, "\(row)")
            #expect(row[17..<32].allSatisfy { abs(Int($0) - 16) <= 1 }, "\(row)")
        }
    }

    @Test func nv12AndI420ScaleToTheFrameSize() {
        let (w, h) = (64, 48)
        let yPlane = [UInt8](repeating: 50, count: w * h)
        let uvPlane = [UInt8]((0..<(w * h / 2)).map { $0 % 2 == 0 ? 60 : 70 })
        let converter = FrameConverter()
        let frame = VideoFrame(width: 20, height: 14)
        yPlane.withUnsafeBytes { y in
            uvPlane.withUnsafeBytes { uv in
                converter.convertNV12(y: y.baseAddress!, strideY: w, uv: uv.baseAddress!, strideUV: w,
                                      size: PixelSize(width: w, height: h), into: frame)
            }
        }
        expectFlat(frame, y: 50, u: 60, v: 70)  // box filter with fixed-point steps: ±1

        let src = VideoFrame(width: 50, height: 30)
        src.fill(y: 180, u: 30, v: 220)
        let out = VideoFrame(width: 24, height: 16)
        converter.convertI420(y: src.y, strideY: src.strideY, u: src.u, strideU: src.strideUV, v: src.v, strideV: src.strideUV,
                              size: src.size, into: out)
        expectFlat(out, y: 180, u: 30, v: 220)
    }

    @Test func i420SameSizeIsAnExactCopy() {
        let src = VideoFrame(width: 7, height: 5)
        for r in 0..<5 { for c in 0..<7 { src.y[r * src.strideY + c] = UInt8(r * 7 + c) } }
        for r in 0..<3 { for c in 0..<4 { src.u[r * src.strideUV + c] = UInt8(100 + r * 4 + c); src.v[r * src.strideUV + c] = UInt8(200 + r * 4 + c) } }
        let out = VideoFrame(width: 7, height: 5)
        FrameConverter().convertI420(y: src.y, strideY: src.strideY, u: src.u, strideU: src.strideUV, v: src.v, strideV: src.strideUV,
                                     size: src.size, into: out)
        #expect(samples(out.y, stride: out.strideY, width: 7, height: 5) == samples(src.y, stride: src.strideY, width: 7, height: 5))
        #expect(samples(out.u, stride: out.strideUV, width: 4, height: 3) == samples(src.u, stride: src.strideUV, width: 4, height: 3))
        #expect(samples(out.v, stride: out.strideUV, width: 4, height: 3) == samples(src.v, stride: src.strideUV, width: 4, height: 3))
    }

    @Test func pooledFramesAreReusedInSteadyState() {
        let pool = FramePool(size: PixelSize(width: 32, height: 18), capacity: 2)
        let converter = FrameConverter()
        let red = BGRAImage(width: 64, height: 36) { _, _ in (255, 0, 0) }
        var seen = Set<ObjectIdentifier>()
        for _ in 0..<200 {
            let frame = pool.take()
            red.convert(with: converter, into: frame)
            #expect(abs(Int(frame.y[0]) - 82) <= 1)
            seen.insert(ObjectIdentifier(frame))
            pool.recycle(frame)
        }
        #expect(pool.allocatedCount == 1)
        #expect(seen.count == 1)
    }
}

@Suite struct PictureQualityTests {
    @Test func psnrOfKnownErrors() {
        let w = 16, h = 8
        let a = [UInt8](repeating: 100, count: w * h)
        func psnr(_ b: [UInt8]) -> Double {
            a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in
                    PictureQuality.psnr(pa.baseAddress!, strideA: w, pb.baseAddress!, strideB: w, width: w, height: h)
                }
            }
        }
        #expect(psnr(a) == 128)  // identical
        // MSE 1: 10·log10(255²) = 48.13 dB; MSE 256: 10·log10(255²/256) = 24.05 dB.
        #expect(abs(psnr([UInt8](repeating: 101, count: w * h)) - 48.13) < 0.01)
        #expect(abs(psnr([UInt8](repeating: 84, count: w * h)) - 24.05) < 0.01)
    }
}
