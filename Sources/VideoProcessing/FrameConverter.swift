internal import CYUV
internal import CColor
import MediaCore
import Basics

/// Converts captured or raw pictures into I420 `VideoFrame`s with libyuv, scaling to the
/// frame's size when it differs from the source. Keeps one intermediate I420 buffer for
/// scaling, re-made only when the source size changes. One per thread.
///
/// BGRA pictures convert with libyuv's 8-bit matrix, or, when `precise`, to within rounding of
/// BT.601's (CColor: 15-bit coefficients, 1.6 ms for 1080p against libyuv's 0.9). libyuv's Y is
/// one level off on up to 9 % of a colourful slide's pixels: a ceiling of 58.7 dB on the
/// bench's second slide before any coding, where the precise one is at 94 dB.
public final class FrameConverter {
    private var scratch: VideoFrame?
    /// Convert BGRA to within rounding of BT.601 (`detail`: text and slides) rather than with
    /// libyuv's faster 8-bit matrix (`motion`).
    public var precise = false

    public init() {}

    private func bgraToI420(_ src: UnsafeRawPointer, stride: Int, y: UnsafeMutablePointer<UInt8>, strideY: Int,
                            u: UnsafeMutablePointer<UInt8>, v: UnsafeMutablePointer<UInt8>, strideUV: Int, width: Int, height: Int) {
        if precise {
            color_bgrx_to_i420(src.assumingMemoryBound(to: UInt8.self), Int32(stride), y, Int32(strideY), u, Int32(strideUV), v, Int32(strideUV),
                               Int32(width), Int32(height))
        } else {
            ARGBToI420(src.assumingMemoryBound(to: UInt8.self), Int32(stride), y, Int32(strideY), u, Int32(strideUV), v, Int32(strideUV),
                       Int32(width), Int32(height))
        }
    }

    private func scratchFrame(_ size: PixelSize) -> VideoFrame {
        if let s = scratch, s.size == size { return s }
        let s = VideoFrame(width: size.width, height: size.height)
        scratch = s
        return s
    }

    /// Scales all of `src` into `frame` (box filter).
    public func scale(_ src: VideoFrame, into frame: VideoFrame) {
        I420Scale(src.y, Int32(src.strideY), src.u, Int32(src.strideUV), src.v, Int32(src.strideUV),
                  Int32(src.width), Int32(src.height),
                  frame.y, Int32(frame.strideY), frame.u, Int32(frame.strideUV), frame.v, Int32(frame.strideUV),
                  Int32(frame.width), Int32(frame.height), kFilterBox)
    }

    /// BGRA (X11 byte order B,G,R,X, which libyuv calls ARGB) → I420 (BT.601 studio range).
    public func convert(bgra: BGRAImageView, into frame: VideoFrame) {
        let target = bgra.size == frame.size ? frame : scratchFrame(bgra.size)
        bgraToI420(bgra.base, stride: bgra.stride, y: target.y, strideY: target.strideY, u: target.u, v: target.v,
                   strideUV: target.strideUV, width: bgra.width, height: bgra.height)
        if target !== frame { scale(target, into: frame) }
    }

    /// BGRA → I420 of one band of a picture, whose top-left is at (x, y) in `frame` (even: whole
    /// chroma samples). The frame's pixels there come out as a conversion of the whole picture
    /// would make them.
    public func convert(bgra band: BGRAImageView, into frame: VideoFrame, x: Int, y: Int) {
        precondition(x & 1 == 0 && y & 1 == 0 && x + band.width <= frame.width && y + band.height <= frame.height,
                     "band \(band.width)x\(band.height)+\(x)+\(y) does not fit \(frame.size) on even pixels")
        bgraToI420(band.base, stride: band.stride, y: frame.y + y * frame.strideY + x, strideY: frame.strideY,
                   u: frame.u + (y / 2) * frame.strideUV + x / 2, v: frame.v + (y / 2) * frame.strideUV + x / 2,
                   strideUV: frame.strideUV, width: band.width, height: band.height)
    }

    /// NV12 (Y plane, then interleaved UV) → I420.
    public func convertNV12(y: UnsafeRawPointer, strideY: Int, uv: UnsafeRawPointer, strideUV: Int, size: PixelSize, into frame: VideoFrame) {
        let target = size == frame.size ? frame : scratchFrame(size)
        NV12ToI420(y.assumingMemoryBound(to: UInt8.self), Int32(strideY), uv.assumingMemoryBound(to: UInt8.self), Int32(strideUV),
                   target.y, Int32(target.strideY), target.u, Int32(target.strideUV), target.v, Int32(target.strideUV),
                   Int32(size.width), Int32(size.height))
        if target !== frame { scale(target, into: frame) }
    }

    /// I420 → I420 (copy, or scale when sizes differ).
    public func convertI420(y: UnsafeRawPointer, strideY: Int, u: UnsafeRawPointer, strideU: Int, v: UnsafeRawPointer, strideV: Int,
                            size: PixelSize, into frame: VideoFrame) {
        let target = size == frame.size ? frame : scratchFrame(size)
        I420Copy(y.assumingMemoryBound(to: UInt8.self), Int32(strideY), u.assumingMemoryBound(to: UInt8.self), Int32(strideU),
                 v.assumingMemoryBound(to: UInt8.self), Int32(strideV),
                 target.y, Int32(target.strideY), target.u, Int32(target.strideUV), target.v, Int32(target.strideUV),
                 Int32(size.width), Int32(size.height))
        if target !== frame { scale(target, into: frame) }
    }
}

/// Picture-quality measures for tests and benchmarks.
public enum PictureQuality {
    /// PSNR in dB of two 8-bit planes (libyuv's CalcFramePsnr; 128 means identical).
    public static func psnr(_ a: UnsafePointer<UInt8>, strideA: Int, _ b: UnsafePointer<UInt8>, strideB: Int, width: Int, height: Int) -> Double {
        let sse = ComputeSumSquareErrorPlane(a, Int32(strideA), b, Int32(strideB), Int32(width), Int32(height))
        return SumSquareErrorToPsnr(sse, UInt64(width * height))
    }
}
