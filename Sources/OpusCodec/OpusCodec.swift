internal import COpus

/// An error from libopus, with the call that failed and libopus's own message.
public struct OpusError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public var code: Int32
    init(_ what: String, code: Int32) {
        self.code = code
        description = "\(what): \(String(cString: opus_strerror(code)))"
    }
}

/// Encoder settings. Opus always runs at 48 kHz stereo with 20 ms frames here (RFC 7587's
/// `opus/48000/2`); what varies is the rate and the resilience features.
public struct OpusEncoderConfig: Sendable, Equatable {
    public var bitrate: Int = 64_000
    /// In-band forward error correction (LBRR): a lost packet can be rebuilt from the next one.
    public var inbandFEC = true
    /// Expected loss in percent; FEC is only spent when this is above 0.
    public var expectedLossPercent = 10
    /// Discontinuous transmission: near-silence yields 1-2 byte packets the sender leaves out.
    public var dtx = true
    public var complexity = 8
    public init() {}
}

/// A libopus encoder: 48 kHz, stereo, 20 ms frames, OPUS_APPLICATION_AUDIO (music and speech
/// mixed), signal type left to Opus (OPUS_AUTO). Owns its OpusEncoder; not thread-safe (one
/// audio thread uses it).
public final class OpusFrameEncoder {
    public static let sampleRate: Int32 = 48_000
    public static let channels: Int32 = 2
    public static let frameLength = 960
    /// Largest packet we ask for (RFC 6716 §3.4 allows 1275 bytes per frame).
    public static let maxPacketSize = 1_275

    public let config: OpusEncoderConfig
    private let state: OpaquePointer

    public init(config: OpusEncoderConfig = OpusEncoderConfig()) throws {
        self.config = config
        var err: Int32 = 0
        guard let st = opus_encoder_create(Self.sampleRate, Self.channels, copus_application_audio(), &err), err == OPUS_OK else {
            throw OpusError("opus_encoder_create(48000 Hz, stereo, audio)", code: err)
        }
        state = st
        func check(_ rc: Int32, _ what: String) throws {
            if rc != OPUS_OK { opus_encoder_destroy(st); throw OpusError(what, code: rc) }
        }
        try check(copus_set_bitrate(st, Int32(config.bitrate)), "OPUS_SET_BITRATE(\(config.bitrate))")
        try check(copus_set_inband_fec(st, config.inbandFEC ? 1 : 0), "OPUS_SET_INBAND_FEC")
        try check(copus_set_packet_loss_perc(st, Int32(config.expectedLossPercent)), "OPUS_SET_PACKET_LOSS_PERC")
        try check(copus_set_dtx(st, config.dtx ? 1 : 0), "OPUS_SET_DTX")
        try check(copus_set_signal(st, copus_auto()), "OPUS_SET_SIGNAL(OPUS_AUTO)")
        try check(copus_set_complexity(st, Int32(config.complexity)), "OPUS_SET_COMPLEXITY")
    }

    deinit { opus_encoder_destroy(state) }

    /// The encoder's look-ahead in samples at 48 kHz (its algorithmic delay).
    public var lookahead: Int {
        var n: Int32 = 0
        _ = copus_get_lookahead(state, &n)
        return Int(n)
    }

    /// Encodes one 20 ms frame of interleaved stereo float samples (960 × 2).
    /// - Returns: the packet's length in `out` (1 or 2 bytes mean "DTX: nothing to send").
    public func encode(_ pcm: UnsafeBufferPointer<Float>, into out: UnsafeMutableRawBufferPointer) throws -> Int {
        precondition(pcm.count >= Self.frameLength * 2, "an Opus frame needs 1920 samples")
        let n = opus_encode_float(state, pcm.baseAddress!, Int32(Self.frameLength),
                                  out.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(min(out.count, Self.maxPacketSize)))
        guard n >= 0 else { throw OpusError("opus_encode_float", code: n) }
        return Int(n)
    }
}

/// A libopus decoder (48 kHz stereo), for tests and the viewer.
public final class OpusFrameDecoder {
    private let state: OpaquePointer

    public init() throws {
        var err: Int32 = 0
        guard let st = opus_decoder_create(48_000, 2, &err), err == OPUS_OK else {
            throw OpusError("opus_decoder_create(48000 Hz, stereo)", code: err)
        }
        state = st
    }

    deinit { opus_decoder_destroy(state) }

    /// Decodes one packet into interleaved stereo floats.
    /// - Returns: sample frames per channel written (the packet's duration).
    public func decode(_ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Float>) throws -> Int {
        guard packet.count > 0, let data = packet.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            return try conceal(into: pcm)
        }
        let n = opus_decode_float(state, data, Int32(packet.count), pcm.baseAddress!, Int32(pcm.count / 2), 0)
        guard n >= 0 else { throw OpusError("opus_decode_float", code: n) }
        return Int(n)
    }

    /// Conceals a lost frame (libopus PLC): `frames` sample frames per channel (960: 20 ms).
    ///
    /// libopus conceals exactly as much as it is asked for (a multiple of 2.5 ms); asking for
    /// the whole buffer would play 120 ms for each 20 ms lost.
    /// - Returns: sample frames per channel written (`frames`).
    public func conceal(frames: Int = 960, into pcm: UnsafeMutableBufferPointer<Float>) throws -> Int {
        let n = opus_decode_float(state, nil, 0, pcm.baseAddress!, Int32(min(frames, pcm.count / 2)), 0)
        guard n >= 0 else { throw OpusError("opus_decode_float (PLC)", code: n) }
        return Int(n)
    }

    /// Recovers a lost 20 ms frame from the in-band FEC data of the packet that followed it.
    /// - Returns: sample frames per channel written (960).
    public func decodeFEC(from next: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Float>) throws -> Int {
        let n = opus_decode_float(state, next.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(next.count),
                                  pcm.baseAddress!, Int32(min(960, pcm.count / 2)), 1)
        guard n >= 0 else { throw OpusError("opus_decode_float (FEC)", code: n) }
        return Int(n)
    }
}
