internal import CAV
internal import CVPX
import MediaCore

/// A decoded picture, borrowed: valid only inside `VP8Decoder.decode`'s body.
public struct DecodedPicture {
    public let y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>
    public let strideY: Int, strideU: Int, strideV: Int
    public let width: Int, height: Int
}

/// A VP8 decoder: libvpx's, or libavcodec's own VP8 decoder (loaded with dlopen when asked
/// for). Both are bit-exact to the VP8 specification (RFC 6386), so they yield the same
/// pictures; libavcodec's takes about 0.6 × libvpx's time on screen content (Debian 12's
/// libvpx 1.12 and FFmpeg 5.1: the bench's slides 0.30 s against 0.48 s, its clip 0.72 s
/// against 1.32 s, `ffmpeg -benchmark -threads 1`), for about 15 MB more resident memory
/// (libavcodec's libraries).
public final class VP8Decoder {
    public enum Implementation: String, Sendable, CaseIterable {
        case libvpx, libavcodec
    }

    private enum Backend {
        case libvpx(UnsafeMutablePointer<vpx_codec_ctx_t>)
        case libavcodec(OpaquePointer)
    }

    private let backend: Backend
    /// The largest keyframe taken (width × height); a larger one is refused before either
    /// decoder sees it. A keyframe's header may say up to 16383x16383, for which libvpx
    /// allocates its four frame buffers, over 1.5 GB, before it finds the data is not there:
    /// one forged packet from a room's presenter would do that to every viewer.
    public let maxPixels: Int
    /// 8K (7680x4320): more than any screen shared today.
    public static let defaultMaxPixels = 7680 * 4320
    public var implementation: Implementation {
        switch backend {
        case .libvpx: .libvpx
        case .libavcodec: .libavcodec
        }
    }

    public init(_ implementation: Implementation = .libvpx, maxPixels: Int = VP8Decoder.defaultMaxPixels) throws {
        self.maxPixels = maxPixels
        switch implementation {
        case .libvpx:
            let ctx = UnsafeMutablePointer<vpx_codec_ctx_t>.allocate(capacity: 1)
            ctx.initialize(to: vpx_codec_ctx_t())
            var cfg = vpx_codec_dec_cfg_t(threads: 1, w: 0, h: 0)
            let rc = cvpx_dec_init(ctx, &cfg, 0)
            guard rc == VPX_CODEC_OK else {
                ctx.deallocate()
                throw VP8CodecError("cannot create the VP8 decoder: \(String(cString: vpx_codec_err_to_string(rc)))")
            }
            backend = .libvpx(ctx)
        case .libavcodec:
            var error = [CChar](repeating: 0, count: 512)
            guard let decoder = cav_vp8_decoder_open(&error, error.count) else {
                throw VP8CodecError("cannot create libavcodec's VP8 decoder: \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
            }
            backend = .libavcodec(decoder)
        }
    }

    /// libavcodec's decoder where it loads, otherwise libvpx's.
    public static func fastest(maxPixels: Int = VP8Decoder.defaultMaxPixels) throws -> VP8Decoder {
        if let decoder = try? VP8Decoder(.libavcodec, maxPixels: maxPixels) { return decoder }
        return try VP8Decoder(.libvpx, maxPixels: maxPixels)
    }

    /// The picture size a keyframe's header says (RFC 6386 9.1: the frame tag, the start code
    /// 9D 01 2A, then 14 bits each of width and height, little-endian); nil for an interframe
    /// or too few bytes.
    public static func keyframeSize(_ data: UnsafeRawBufferPointer) -> PixelSize? {
        guard data.count >= 10, data[0] & 1 == 0, data[3] == 0x9D, data[4] == 0x01, data[5] == 0x2A else { return nil }
        return PixelSize(width: (Int(data[7]) << 8 | Int(data[6])) & 0x3FFF, height: (Int(data[9]) << 8 | Int(data[8])) & 0x3FFF)
    }

    deinit {
        switch backend {
        case .libvpx(let ctx):
            vpx_codec_destroy(ctx)
            ctx.deallocate()
        case .libavcodec(let decoder):
            cav_vp8_decoder_close(decoder)
        }
    }

    /// Decodes one frame; calls `body` for each picture it yields.
    public func decode(_ data: UnsafeRawBufferPointer, _ body: (DecodedPicture) -> Void) throws {
        guard let base = data.baseAddress, data.count > 0 else { throw VP8CodecError("empty VP8 frame") }
        if let size = Self.keyframeSize(data), size.area > maxPixels {
            throw VP8CodecError("a keyframe of \(size.width)x\(size.height) is larger than this viewer takes (\(maxPixels) pixels)")
        }
        switch backend {
        case .libvpx(let ctx):
            let rc = vpx_codec_decode(ctx, base.assumingMemoryBound(to: UInt8.self), UInt32(data.count), nil, 0)
            guard rc == VPX_CODEC_OK else {
                throw VP8CodecError("VP8 decode failed: \(String(cString: vpx_codec_error(ctx)))")
            }
            var iter: vpx_codec_iter_t?
            while let img = vpx_codec_get_frame(ctx, &iter) {
                let i = img.pointee
                body(DecodedPicture(y: UnsafePointer(i.planes.0!), u: UnsafePointer(i.planes.1!), v: UnsafePointer(i.planes.2!),
                                    strideY: Int(i.stride.0), strideU: Int(i.stride.1), strideV: Int(i.stride.2),
                                    width: Int(i.d_w), height: Int(i.d_h)))
            }
        case .libavcodec(let decoder):
            let rc = cav_vp8_decode(decoder, base.assumingMemoryBound(to: UInt8.self), data.count)
            guard rc == 0 else {
                var text = [CChar](repeating: 0, count: 128)
                cav_vp8_error(decoder, rc, &text, text.count)
                throw VP8CodecError("VP8 decode failed: \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
            }
            while let frame = cav_vp8_next_picture(decoder) {
                let f = frame.pointee
                guard let y = f.data.0, let u = f.data.1, let v = f.data.2 else { continue }
                body(DecodedPicture(y: UnsafePointer(y), u: UnsafePointer(u), v: UnsafePointer(v),
                                    strideY: Int(f.linesize.0), strideU: Int(f.linesize.1), strideV: Int(f.linesize.2),
                                    width: Int(f.width), height: Int(f.height)))
            }
        }
    }
}
