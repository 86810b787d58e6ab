internal import CVPX
import CZeroFill
import MediaCore
import Basics

/// What to keep under pressure: `detail` keeps resolution and drops frame rate (slides);
/// `motion` keeps frame rate.
public enum ContentPreference: String, Sendable, CaseIterable {
    case detail, motion
}

/// A libvpx failure, with libvpx's own message and detail.
public struct VP8CodecError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Encoder settings.
public struct VP8EncoderConfig: Sendable, Equatable {
    public var size: PixelSize
    public var fps: Int = 15
    public var targetBitrateKbps: Int = 2000
    public var minBitrateKbps: Int?
    /// Seconds between periodic keyframes; nil: only at start and on request.
    public var keyframeIntervalSeconds: Double?
    public var content: ContentPreference = .detail
    public var threads: Int = 1
    /// libvpx realtime speed (VP8E_SET_CPUUSED): higher is faster.
    public var cpuUsed: Int = 10
    /// The largest keyframe, in percent of an average frame's bits (VP8E_SET_MAX_INTRA_BITRATE_PCT):
    /// 900 as libwebrtc has it at 30 fps; less keeps a keyframe from filling a slow path's queue.
    public var maxIntraBitratePercent: Int = 900
    /// 1, or 2 or 3 VP8 temporal layers. With 2, every other frame is a base-layer frame (TL0,
    /// which references only the base layer) and the frames between are TL1. With 3 (libwebrtc's
    /// pattern for rooms: TL0, TL2, TL1, TL2), TL0 is every fourth frame and TL1 the one between
    /// two TL0s. Upper-layer frames reference only the last TL0 frame and are referenced by
    /// nothing, so a relay can drop the upper layers for a slow viewer (the rest still decodes,
    /// at a half or a quarter of the rate) and add them again at any of their frames.
    public var temporalLayers: Int = 1
    /// Whether the first second is encoded under ``OpeningCeiling``'s quantizer ceilings: for
    /// `motion` on a path that is not congestion controlled.
    public var openingCeiling: Bool = false
    public init(size: PixelSize) { self.size = size }

    func validate() throws {
        guard size.width >= 2, size.height >= 2, size.width <= 16384, size.height <= 16384 else {
            throw VP8CodecError("encoder size \(size) is not usable (2x2 to 16384x16384)")
        }
        guard (1...120).contains(fps) else { throw VP8CodecError("encoder fps \(fps) is out of range (1 to 120)") }
        guard targetBitrateKbps >= 10 else { throw VP8CodecError("encoder bitrate \(targetBitrateKbps) kbps is too low (at least 10)") }
        guard (1...3).contains(temporalLayers) else { throw VP8CodecError("encoder temporal layers \(temporalLayers) is not 1, 2 or 3") }
    }

    /// The layers' cumulative shares of the bit rate (libwebrtc's: TL0 60 % of a two-layer
    /// stream; 40 %, and 60 % with TL1, of a three-layer one), and the layer of each frame in
    /// the pattern.
    static func layerShares(_ layers: Int) -> [Double] { layers == 3 ? [0.4, 0.6, 1] : layers == 2 ? [0.6, 1] : [1] }
    static func layerPattern(_ layers: Int) -> [UInt8] { layers == 3 ? [0, 2, 1, 2] : layers == 2 ? [0, 1] : [0] }
}

/// One encoded frame's facts.
public struct EncodedFrameInfo: Sendable, Equatable {
    public var isKeyframe: Bool
    public var byteCount: Int
    /// The temporal layer (0 to 2) with layers; nil with one.
    public var temporalLayer: UInt8?
    public init(isKeyframe: Bool, byteCount: Int, temporalLayer: UInt8? = nil) {
        self.isKeyframe = isKeyframe
        self.byteCount = byteCount
        self.temporalLayer = temporalLayer
    }
}

/// libvpx VP8 in realtime mode, CBR: screen-content mode and VP8 version 2 for `detail`, video
/// and version 0 for `motion`.
///
/// Owns one `vpx_codec_ctx_t`; output bytes are valid only inside `encode`'s body.
public final class VP8Encoder {
    public private(set) var config: VP8EncoderConfig
    private var cfg = vpx_codec_enc_cfg_t()
    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>
    private var image = vpx_image_t()
    private var forceKeyframe = true
    private var staticThreshold: Int32 = 1
    /// The content's (or the opening's) quantizer ceiling, and refinement's under it.
    private var baseCeiling = 63
    private var refineCeiling: Int?
    /// Whether an active map is set (``setActiveMap(_:rows:columns:)``).
    private var activeMapSet = false
    /// With temporal layers: the next frame's place in the pattern (a keyframe starts at 0).
    private var patternIndex = 0
    /// The layer of each frame in the pattern (made once: `encode` runs per frame).
    private let layerPattern: [UInt8]
    private var speedRestart: SpeedRestart
    /// The first second's quantizer ceilings, nil once it is over (or never opened so).
    private var opening: OpeningCeiling?
    /// Times the adaptive speed was started again from its slowest (``SpeedRestart``).
    public private(set) var speedRestarts = 0
    /// Why libvpx's memset could not be routed through `CZeroFill` (nil: it is). Then every
    /// encoder's token buffer (24 bytes a pixel) is resident from the start; nothing else differs.
    public static let zeroFillProblem: String? = {
        guard let reason = zero_fill_install_for_libvpx(4 << 20) else { return nil }
        return String(cString: reason)
    }()

    /// - Throws: `VP8CodecError` naming the bad setting or carrying libvpx's message.
    public init(config: VP8EncoderConfig) throws {
        try config.validate()
        self.config = config
        layerPattern = VP8EncoderConfig.layerPattern(config.temporalLayers)
        speedRestart = SpeedRestart(adaptive: Self.restartsSpeed(config.cpuUsed, config.content), intervalFrames: config.fps)
        guard cvpx_enc_config_default(&cfg) == VPX_CODEC_OK else { throw VP8CodecError("vpx_codec_enc_config_default failed") }
        cfg.g_w = UInt32(config.size.width)
        cfg.g_h = UInt32(config.size.height)
        cfg.g_timebase = vpx_rational(num: 1, den: 90_000)
        cfg.g_threads = UInt32(max(1, config.threads))
        cfg.g_lag_in_frames = 0
        cfg.g_error_resilient = vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT)
        cfg.g_pass = VPX_RC_ONE_PASS
        cfg.g_profile = Self.profile(config.content)
        cfg.rc_end_usage = VPX_CBR
        cfg.rc_target_bitrate = UInt32(config.targetBitrateKbps)
        cfg.rc_min_quantizer = UInt32(Self.minQuantizer(config.content))
        // motion keeps the frame rate, so it must be allowed the coarsest quantizer to hold
        // the bit rate; detail keeps quality and drops frames instead.
        cfg.rc_max_quantizer = UInt32(Self.maxQuantizer(config.content))
        baseCeiling = Self.maxQuantizer(config.content)
        if config.openingCeiling {
            let opening = OpeningCeiling(fps: config.fps, bitrateKbps: config.targetBitrateKbps,
                                         keyframePercent: config.maxIntraBitratePercent)
            cfg.rc_max_quantizer = UInt32(min(Int(cfg.rc_max_quantizer), opening.ceiling))
            baseCeiling = Int(cfg.rc_max_quantizer)
            self.opening = opening
        }
        cfg.rc_undershoot_pct = 100
        cfg.rc_overshoot_pct = 15
        // libwebrtc's buffer (600 ms aimed at, 1000 ms at most), started full enough for the
        // first keyframe. libvpx gives a stream's first frame half the starting level: from
        // 500 ms that was 250 ms of the bit rate, 7.5 frames' worth at 30 fps and 3.75 at 15,
        // where `maxIntraBitratePercent` allows 9.
        cfg.rc_buf_optimal_sz = 600
        cfg.rc_buf_sz = 1000
        cfg.rc_buf_initial_sz = UInt32(Self.initialBufferMs(optimalMs: Int(cfg.rc_buf_optimal_sz), maxMs: Int(cfg.rc_buf_sz),
                                                            config: config))
        // libvpx's own frame dropper is off: on screen content it drops most frames of a
        // scrolling page far below the bit rate (each dropped frame costs a whole encode).
        // `detail` lowers the frame rate itself instead (RateBucket, in the pipeline).
        cfg.rc_dropframe_thresh = 0
        cfg.rc_resize_allowed = 0
        if config.temporalLayers > 1 {
            // libvpx's temporal patterns (its vpx_temporal_svc_encoder): two layers, ids 0, 1
            // (TL0 at half the frame rate); three, ids 0, 2, 1, 2 (TL0 at a quarter, TL0 + TL1
            // at half). The flags of each frame are set in `encode`.
            let pattern = VP8EncoderConfig.layerPattern(config.temporalLayers)
            cfg.ts_number_layers = UInt32(config.temporalLayers)
            cfg.ts_periodicity = UInt32(pattern.count)
            withUnsafeMutableBytes(of: &cfg.ts_layer_id) { ids in
                for (i, layer) in pattern.enumerated() { ids.storeBytes(of: UInt32(layer), toByteOffset: i * 4, as: UInt32.self) }
            }
            withUnsafeMutableBytes(of: &cfg.ts_rate_decimator) { decimators in
                for layer in 0..<config.temporalLayers {
                    decimators.storeBytes(of: UInt32(1 << (config.temporalLayers - 1 - layer)), toByteOffset: layer * 4, as: UInt32.self)
                }
            }
            Self.setLayerRates(&cfg, kbps: config.targetBitrateKbps, layers: config.temporalLayers)
        }
        if let interval = config.keyframeIntervalSeconds, interval > 0 {
            cfg.kf_mode = VPX_KF_AUTO
            cfg.kf_min_dist = 0
            cfg.kf_max_dist = UInt32(max(1, interval * Double(config.fps)))
        } else {
            cfg.kf_mode = VPX_KF_DISABLED
        }
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        // libvpx zeroes a token buffer of 24 bytes a pixel here: only its pages that tokens
        // are written to become resident (CZeroFill). It also fills a post-processing frame
        // with 128 that an encoder never reads: left untouched.
        _ = Self.zeroFillProblem
        zero_fill_set_unread_fill_on_this_thread(1)
        let rc = cvpx_enc_init(ctx, &cfg, 0)
        zero_fill_set_unread_fill_on_this_thread(0)
        guard rc == VPX_CODEC_OK else {
            let message = String(cString: vpx_codec_err_to_string(rc))
            ctx.deallocate()
            throw VP8CodecError("cannot create the VP8 encoder at \(config.size): \(message)")
        }
        let controls: [(Int32, Int32)] = [
            (Int32(VP8E_SET_CPUUSED.rawValue), Int32(config.cpuUsed)),
            (Int32(VP8E_SET_SCREEN_CONTENT_MODE.rawValue), Self.screenContentMode(config.content)),
            (Int32(VP8E_SET_STATIC_THRESHOLD.rawValue), 1),
            (Int32(VP8E_SET_NOISE_SENSITIVITY.rawValue), 0),
            (Int32(VP8E_SET_TOKEN_PARTITIONS.rawValue), 0),
            (Int32(VP8E_SET_MAX_INTRA_BITRATE_PCT.rawValue), Int32(config.maxIntraBitratePercent)),
        ]
        for (id, value) in controls where cvpx_control_int(ctx, id, value) != VPX_CODEC_OK {
            let message = String(cString: vpx_codec_error(ctx))
            vpx_codec_destroy(ctx)
            ctx.deallocate()
            throw VP8CodecError("VP8 encoder control \(id) = \(value) failed: \(message)")
        }
    }

    deinit {
        vpx_codec_destroy(ctx)
        ctx.deallocate()
    }

    /// Changes the target bit rate and content preference of the running encoder; libvpx
    /// applies them from the next frame, a keyframe only when the content's VP8 version
    /// (``profile(_:)``) changes.
    /// - Throws: `VP8CodecError` with libvpx's message.
    public func reconfigure(targetBitrateKbps: Int, content: ContentPreference) throws {
        guard targetBitrateKbps >= 10 else { throw VP8CodecError("encoder bitrate \(targetBitrateKbps) kbps is too low (at least 10)") }
        var next = cfg
        next.rc_target_bitrate = UInt32(targetBitrateKbps)
        if config.temporalLayers > 1 { Self.setLayerRates(&next, kbps: targetBitrateKbps, layers: config.temporalLayers) }
        next.rc_max_quantizer = UInt32(Self.maxQuantizer(content))
        next.rc_min_quantizer = UInt32(Self.minQuantizer(content))
        next.g_profile = Self.profile(content)
        opening = nil  // a new rate or content: libvpx's own quantizer range from here
        guard vpx_codec_enc_config_set(ctx, &next) == VPX_CODEC_OK else {
            throw VP8CodecError("VP8 encoder reconfiguration failed: \(String(cString: vpx_codec_error(ctx)))")
        }
        // A new version starts at a keyframe: a decoder takes the prediction filter from it.
        if next.g_profile != cfg.g_profile { forceKeyframe = true }
        cfg = next
        baseCeiling = Self.maxQuantizer(content)
        refineCeiling = nil
        speedRestart.configurationChanged()
        config.targetBitrateKbps = targetBitrateKbps
        if content != config.content {
            let mode = Self.screenContentMode(content)
            guard cvpx_control_int(ctx, Int32(VP8E_SET_SCREEN_CONTENT_MODE.rawValue), mode) == VPX_CODEC_OK else {
                throw VP8CodecError("VP8 encoder screen-content mode \(mode) failed: \(String(cString: vpx_codec_error(ctx)))")
            }
        }
        config.content = content
        speedRestart.adaptive = Self.restartsSpeed(config.cpuUsed, content)
    }

    /// Whether the adaptive speed is started again (``SpeedRestart``): for `motion`, whose one
    /// encoder thread works close to its share of the frame time. Not for `detail`: each restart
    /// goes through libvpx's change of configuration, which also moves its rate control, and a
    /// scrolling page (bench `scroll`, 15 fps) then took 1043–1106 kbit/s at 53.6–54.2 dB where
    /// it took 662–665 at 54.4 without; no `detail` content was seen stuck at a fast speed.
    static func restartsSpeed(_ cpuUsed: Int, _ content: ContentPreference) -> Bool { cpuUsed > 0 && content == .motion }

    /// The buffer level libvpx starts from: its aim plus the largest first keyframe, in ms of
    /// the bit rate (`maxIntraBitratePercent` of a frame's share), at most the buffer's size
    /// (0 percent is no limit for libvpx: the whole buffer).
    static func initialBufferMs(optimalMs: Int, maxMs: Int, config: VP8EncoderConfig) -> Int {
        guard config.maxIntraBitratePercent > 0 else { return maxMs }
        let keyframeMs = config.maxIntraBitratePercent * 1000 / (100 * max(1, config.fps))
        return min(maxMs, optimalMs + keyframeMs)
    }

    /// VP8E_SET_SCREEN_CONTENT_MODE for a preference: 1 for `detail` (slides, text: rate
    /// control keeps quality from falling back after a change, the background refreshes
    /// cyclically), 0 for `motion`, which is video: with screen-content mode, one encoder thread
    /// and a full-screen pan, libvpx's quantizer stayed coarse (bench `motion`: 37.3 dB against
    /// 43.7 in video mode, at the same bit rate and 0.44 core either way).
    static func screenContentMode(_ content: ContentPreference) -> Int32 { content == .detail ? 1 : 0 }

    /// The cumulative rates of the layers: TL0 its share, and so on up to the whole.
    private static func setLayerRates(_ cfg: inout vpx_codec_enc_cfg_t, kbps: Int, layers: Int) {
        withUnsafeMutableBytes(of: &cfg.ts_target_bitrate) { rates in
            for (layer, share) in VP8EncoderConfig.layerShares(layers).enumerated() {
                rates.storeBytes(of: UInt32(max(1, Int(Double(kbps) * share))), toByteOffset: layer * 4, as: UInt32.self)
            }
        }
    }

    /// Sets VP8E_SET_STATIC_THRESHOLD: macroblocks that changed less than this are skipped.
    /// 1 lets every change refine a still picture; a high value makes a keep-alive repeat of
    /// an unchanged picture cheap (nothing to search).
    public func setStaticThreshold(_ value: Int32) {
        guard value != staticThreshold else { return }
        if cvpx_control_int(ctx, Int32(VP8E_SET_STATIC_THRESHOLD.rawValue), value) == VPX_CODEC_OK {
            staticThreshold = value
            speedRestart.configurationChanged()
        }
    }

    /// Which macroblocks the next frames encode (1) and which they skip (0: taken from the
    /// last frame as they are, nothing searched or coded): libvpx's active map,
    /// `VP8E_SET_ACTIVEMAP`, `rows` × `columns` of the frame's 16x16 macroblocks. Nil encodes
    /// every one. A keyframe encodes every one whatever the map.
    /// - Returns: false if libvpx refused the map (not the frame's size in macroblocks).
    @discardableResult
    public func setActiveMap(_ map: UnsafeMutablePointer<UInt8>?, rows: Int, columns: Int) -> Bool {
        if map == nil && !activeMapSet { return true }
        let ok = cvpx_set_active_map(ctx, map, UInt32(rows), UInt32(columns)) == VPX_CODEC_OK
        if ok { activeMapSet = map != nil }
        return ok
    }

    /// The next encoded frame will be a keyframe.
    public func requestKeyframe() { forceKeyframe = true }

    /// The quantizer of the last frame encoded (0–63, as `rc_max_quantizer` counts), nil if
    /// libvpx does not say.
    public func lastQuantizer() -> Int? {
        var q: Int32 = 0
        return cvpx_control_int_ptr(ctx, Int32(VP8E_GET_LAST_QUANTIZER_64.rawValue), &q) == VPX_CODEC_OK ? Int(q) : nil
    }

    /// Changes the largest keyframe (percent of an average frame's bits) from the next one on.
    public func setMaxIntraBitratePercent(_ percent: Int) {
        if cvpx_control_uint(ctx, Int32(VP8E_SET_MAX_INTRA_BITRATE_PCT.rawValue), UInt32(max(percent, 0))) == VPX_CODEC_OK {
            speedRestart.configurationChanged()
            config.maxIntraBitratePercent = percent
        }
    }

    /// The coarsest quantizer rate control may use (`rc_max_quantizer`, 0–63).
    public var maxQuantizer: Int { Int(cfg.rc_max_quantizer) }

    /// A ceiling on the quantizer of the next frames, under the content's and the opening's
    /// (nil: none): refining a still picture, each repeat finer than the last.
    public func setRefineCeiling(_ q: Int?) {
        guard q != refineCeiling else { return }
        refineCeiling = q
        setMaxQuantizer(baseCeiling)
    }

    /// Whether the first second's quantizer ceilings still apply (``OpeningCeiling``).
    public var isOpening: Bool { opening != nil }

    /// The VP8 version (`g_profile`, RFC 6386 §9.1) for a preference: 2 for `detail` (bilinear
    /// prediction, no loop filter), 0 for `motion` (six-tap prediction, the normal loop filter).
    /// Screen content gains nothing from the loop filter, which smooths block edges that text
    /// does not have, and moves by whole pixels (a scrolled page) more than by fractions of
    /// them. With version 2 (bench, one run each, `Scripts/bench --tools screenshare`): `clip`
    /// 0.21 core at 49.1 dB against 0.29 at 48.2 with version 0, the still slide with a barcode
    /// 0.15 at 56.3 against 0.27 at 54.7, `scroll` 0.13 at 53.8 against 0.19 at 54.1, `slides`
    /// 0.015 at 54.3 against 0.022 at 54.5; and 2 MB less resident (no copy of the picture for
    /// choosing the filter's level). The software decoders tried read it (libvpx, so GStreamer
    /// and the browsers; ffmpeg's own); a hardware decoder limited to version 0 would not.
    /// Video (`motion`) keeps version 0: its motion is by fractions of a pixel.
    static func profile(_ content: ContentPreference) -> UInt32 { content == .detail ? 2 : 0 }

    /// The content's own coarsest quantizer: `motion` keeps the frame rate, so it must be
    /// allowed the coarsest to hold the bit rate; `detail` keeps quality and drops frames instead.
    static func maxQuantizer(_ content: ContentPreference) -> Int { content == .motion ? 63 : 56 }

    /// The content's finest quantizer: `detail` may go to 0, the finest VP8 has (a still slide
    /// refined there: 61.9 dB on the bench's opening slide, 57.3 with 2), `motion` stops at 2.
    static func minQuantizer(_ content: ContentPreference) -> Int { content == .motion ? 2 : 0 }

    /// Ends the first second's ceilings now (the path became congestion controlled: its
    /// rate, not a guess at the content, bounds the frames from here).
    public func endOpening() {
        guard opening != nil else { return }
        opening = nil
        setMaxQuantizer(Self.maxQuantizer(config.content))
    }

    private func setMaxQuantizer(_ base: Int) {
        baseCeiling = base
        let q = min(base, refineCeiling ?? 63)
        guard q != Int(cfg.rc_max_quantizer) else { return }
        var next = cfg
        next.rc_max_quantizer = UInt32(q)
        // A refusal leaves the last range: the frames are still made, at most coarser or finer.
        if vpx_codec_enc_config_set(ctx, &next) == VPX_CODEC_OK {
            cfg = next
            speedRestart.configurationChanged()
        }
    }

    /// Encodes one frame (pts in 90 kHz units); calls `body` per output packet with borrowed bytes.
    /// - Throws: `VP8CodecError` with libvpx's message; the caller should re-create the encoder.
    public func encode(_ frame: VideoFrame, pts: Int64, duration: UInt, _ body: (UnsafeRawBufferPointer, EncodedFrameInfo) -> Void) throws {
        guard frame.size == config.size else {
            throw VP8CodecError("frame \(frame.size) does not match the encoder's \(config.size)")
        }
        guard vpx_img_wrap(&image, VPX_IMG_FMT_I420, UInt32(frame.width), UInt32(frame.height), 32, frame.y) != nil else {
            throw VP8CodecError("vpx_img_wrap failed for \(frame.size)")
        }
        image.planes.0 = frame.y
        image.planes.1 = frame.u
        image.planes.2 = frame.v
        image.stride.0 = Int32(frame.strideY)
        image.stride.1 = Int32(frame.strideUV)
        image.stride.2 = Int32(frame.strideUV)
        var flags: vpx_enc_frame_flags_t = forceKeyframe ? vpx_enc_frame_flags_t(VPX_EFLAG_FORCE_KF) : 0
        var layer: UInt8?
        if config.temporalLayers > 1 {
            if forceKeyframe { patternIndex = 0 }
            let next = layerPattern[patternIndex]
            layer = next
            flags |= vpx_enc_frame_flags_t(next == 0 ? Self.baseLayerFlags : Self.upperLayerFlags)
            _ = cvpx_control_int(ctx, Int32(VP8E_SET_TEMPORAL_LAYER_ID.rawValue), Int32(next))
            patternIndex = (patternIndex + 1) % layerPattern.count
        }
        forceKeyframe = false
        if speedRestart.frameEncoded(),
           cvpx_control_int(ctx, Int32(VP8E_SET_CPUUSED.rawValue), Int32(config.cpuUsed)) == VPX_CODEC_OK {
            speedRestarts += 1
        }
        let rc = vpx_codec_encode(ctx, &image, pts, UInt(duration), flags, UInt(VPX_DL_REALTIME))
        guard rc == VPX_CODEC_OK else {
            let detail = vpx_codec_error_detail(ctx).map { String(cString: $0) } ?? ""
            throw VP8CodecError("VP8 encode failed: \(String(cString: vpx_codec_error(ctx))) \(detail)")
        }
        var iter: vpx_codec_iter_t?
        var produced = 0
        while let pkt = vpx_codec_get_cx_data(ctx, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            let f = pkt.pointee.data.frame
            produced += Int(f.sz)
            let key = (f.flags & UInt32(VPX_FRAME_IS_KEY)) != 0
            if key, let l = layer, l > 0 { patternIndex = 1 }  // libvpx made a keyframe of its own: the pattern starts there
            let info = EncodedFrameInfo(isKeyframe: key, byteCount: Int(f.sz), temporalLayer: key && layer != nil ? 0 : layer)
            body(UnsafeRawBufferPointer(start: f.buf, count: Int(f.sz)), info)
        }
        // After the frame's bytes are handed on: a change of configuration is not made while
        // libvpx's output is read.
        if var next = opening, produced > 0 {
            let ceiling = next.frameEncoded(bytes: produced)
            opening = ceiling == nil ? nil : next
            setMaxQuantizer(ceiling ?? Self.maxQuantizer(config.content))
        }
    }
}

extension VP8Encoder {
    /// TL0 references and refreshes only the last frame (which only TL0 frames write).
    static let baseLayerFlags = Int(VP8_EFLAG_NO_REF_GF | VP8_EFLAG_NO_REF_ARF | VP8_EFLAG_NO_UPD_GF | VP8_EFLAG_NO_UPD_ARF)
    /// TL1 and TL2 reference the last (TL0) frame and write nothing a later frame reads: no
    /// reference buffer, no entropy context. Dropping it leaves the rest decodable.
    static let upperLayerFlags = Int(VP8_EFLAG_NO_REF_GF | VP8_EFLAG_NO_REF_ARF | VP8_EFLAG_NO_UPD_LAST | VP8_EFLAG_NO_UPD_GF
                                     | VP8_EFLAG_NO_UPD_ARF | VP8_EFLAG_NO_UPD_ENTROPY)
}

/// The first second of a `motion` stream under quantizer ceilings.
///
/// libvpx's one-pass rate control starts from a table of bits per macroblock at each quantizer
/// and corrects it, frame by frame, by a quarter of the error at most. On screen-captured
/// video that table overestimates sizes many times over: bench `motion` (1080p30, 2 Mbit/s)
/// got a first keyframe planned at 75 kB at quantizer 56, which came out at 10 kB and 39 dB,
/// and the next 30 frames stayed at quantizers 59–50 and 39–41 dB while using 70–100 % of their
/// share of the bit rate (`libvpx` 1.12, the bench's content through the encoder alone).
/// libvpx learns the content's real sizes within about a second; the ceilings keep it from
/// paying for its guess meanwhile: the keyframe at most ``keyframeQuantizer`` (45.3 dB,
/// 39 kB), the frames after it at most ``frameQuantizer`` (42.3–44.4 dB). In that run the
/// first 30 frames took 251 kB against a second's 250 kB.
///
/// A ceiling only ever makes a frame finer, so a content whose sizes the table does not
/// overestimate overspends under it: the opening ends early once its frames took more than
/// their share of the bit rate since the start plus the keyframe's allowance
/// (`maxIntraBitratePercent`), and rate control pays the excess back from there as it would
/// after any large frame.
struct OpeningCeiling {
    static let keyframeQuantizer = 30
    static let frameQuantizer = 45
    /// The quantizer ceiling of the next frame.
    private(set) var ceiling = Self.keyframeQuantizer
    private let frames: Int
    private let frameBytes: Int
    private let allowanceBytes: Int
    private var encoded = 0
    private var spent = 0

    init(fps: Int, bitrateKbps: Int, keyframePercent: Int) {
        frames = max(1, fps)
        frameBytes = bitrateKbps * 1000 / 8 / frames
        allowanceBytes = frameBytes * max(100, keyframePercent) / 100
    }

    /// Counts an encoded frame; returns the ceiling for the next one, or nil when the opening
    /// is over (a second of frames, or more bytes than the second's share so far).
    mutating func frameEncoded(bytes: Int) -> Int? {
        encoded += 1
        spent += bytes
        guard encoded < frames, spent <= encoded * frameBytes + allowanceBytes else { return nil }
        ceiling = Self.frameQuantizer
        return ceiling
    }
}

/// When to start libvpx's adaptive speed (positive cpu-used) again from its slowest.
///
/// libvpx picks a VP8 encoder's speed from how long its encodes take: 2 or 4 steps faster when
/// they take longer than their share of the frame time ((16 − cpu-used)/16), one step slower
/// when they take less than about 0.87 of it (`vp8_auto_select_speed`). A fast speed searches
/// motion coarsely, and a frame costs more bits at a given quantizer: at the same bit rate the
/// quantizer climbs and each frame takes as long as before, inside that band. After one slow
/// moment (the first frames, a busy machine) the speed can stay fast for good: bench `motion`
/// at 1080p30, one encoder thread, cpu-used 8: 5 of 27 runs held quantizer 53–54 and 40 dB
/// where the others held 30–31 and 44.5, at the same bit rate and CPU. Any change of the
/// encoder's configuration makes libvpx start again at its slowest speed (4) and adapt from
/// there (`vp8_change_config`): re-applying cpu-used once a second, when nothing else changed
/// it, bounds such a stretch to a second. A fixed speed (negative cpu-used) never changes.
struct SpeedRestart {
    var adaptive: Bool
    let intervalFrames: Int
    private var frames = 0

    init(adaptive: Bool, intervalFrames: Int) {
        self.adaptive = adaptive
        self.intervalFrames = max(1, intervalFrames)
    }

    /// Counts a frame about to be encoded; true when the speed should be started again first.
    mutating func frameEncoded() -> Bool {
        guard adaptive else { return false }
        frames += 1
        guard frames > intervalFrames else { return false }
        frames = 1
        return true
    }

    /// The configuration changed (libvpx started the speed again): count from here.
    mutating func configurationChanged() { frames = 0 }
}
