#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

extension VideoFrame {
    /// True when both frames have the same size and the same Y, U and V samples (strides and
    /// padding aside).
    public func samePixels(as other: VideoFrame) -> Bool {
        guard size == other.size else { return false }
        func plane(_ p: UnsafeMutablePointer<UInt8>, _ stride: Int, _ q: UnsafeMutablePointer<UInt8>, _ otherStride: Int,
                   width: Int, height: Int) -> Bool {
            for row in 0..<height where memcmp(p + row * stride, q + row * otherStride, width) != 0 { return false }
            return true
        }
        return plane(y, strideY, other.y, other.strideY, width: width, height: height)
            && plane(u, strideUV, other.u, other.strideUV, width: chromaWidth, height: chromaHeight)
            && plane(v, strideUV, other.v, other.strideUV, width: chromaWidth, height: chromaHeight)
    }
}
