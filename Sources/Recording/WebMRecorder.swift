internal import CAV
import MediaCore
import Basics

/// A recording failure, with libavformat's message and the file's name.
public struct RecordingError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Writes what arrived — VP8 frames and Opus packets exactly as received, never re-encoded —
/// into a WebM file (libavformat's Matroska muxer) that common players open.
///
/// Timestamps are nanoseconds on one clock for both streams (the receiver's playout clock);
/// the file starts at the first packet written. The header is written at creation, so create
/// the recorder when the video size is known (at the first keyframe). Use from one thread.
public final class WebMRecorder {
    public let path: String
    /// libavformat, opened once per process (``prepare(for:)``).
    private let av: cav_library
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var videoIndex: Int32 = -1
    private var audioIndex: Int32 = -1
    private var originNanos: UInt64?
    private var lastVideoMillis: Int64 = -1
    private var lastAudioMillis: Int64 = -1
    private var lastFlushMillis: Int64 = 0
    private var finished = false
    public private(set) var videoFramesWritten = 0
    public private(set) var audioPacketsWritten = 0

    /// - Parameters:
    ///   - video: the size of the video (VP8 carries its own size in each keyframe; this is the
    ///     size the header announces), or nil for audio only.
    ///   - audio: whether an Opus stream (48 kHz stereo) is written.
    /// - Throws: `RecordingError` naming the file.
    public init(path: String, video: PixelSize?, audio: Bool) throws {
        self.path = path
        guard video != nil || audio else { throw RecordingError("--record \(path): nothing to record") }
        av = try Self.load(for: path)
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var rc = av.avformat_alloc_output_context2(&ctx, nil, "webm", path)
        guard rc >= 0, let ctx else { throw RecordingError("--record \(path): \(message(rc))") }
        context = ctx
        do {
            if let video {
                guard let s = av.avformat_new_stream(ctx, nil) else { throw RecordingError("--record \(path): cannot add the video stream") }
                s.pointee.time_base = AVRational(num: 1, den: 1000)
                let par = s.pointee.codecpar!
                par.pointee.codec_type = AVMEDIA_TYPE_VIDEO
                par.pointee.codec_id = AV_CODEC_ID_VP8
                par.pointee.width = Int32(video.width)
                par.pointee.height = Int32(video.height)
                videoIndex = s.pointee.index
            }
            if audio {
                guard let s = av.avformat_new_stream(ctx, nil) else { throw RecordingError("--record \(path): cannot add the audio stream") }
                s.pointee.time_base = AVRational(num: 1, den: 1000)
                let par = s.pointee.codecpar!
                par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
                par.pointee.codec_id = AV_CODEC_ID_OPUS
                par.pointee.sample_rate = 48_000
                av.av_channel_layout_default(&par.pointee.ch_layout, 2)
                // RFC 7845 §5.1 identification header: the Matroska CodecPrivate of Opus.
                let head: [UInt8] = Array("OpusHead".utf8) + [1, 2, 0x38, 0x01, 0x80, 0xBB, 0x00, 0x00, 0, 0, 0]
                rc = head.withUnsafeBufferPointer { h in withUnsafePointer(to: av) { cav_set_extradata($0, par, h.baseAddress!, Int32(h.count)) } }
                guard rc >= 0 else { throw RecordingError("--record \(path): \(message(rc))") }
                par.pointee.initial_padding = 312
                audioIndex = s.pointee.index
            }
            rc = av.avio_open(&ctx.pointee.pb, path, cav_avio_write_flag())
            guard rc >= 0 else { throw RecordingError("--record \(path): cannot open for writing: \(message(rc))") }
            // A crash (kill -9, a power cut) leaves a file that plays to within a second of its
            // end: clusters of at most a second (the WebM muxer's default is 5 s, and a cluster
            // is written only when it closes), written out as they close (flush_packets), and
            // flushed every half second (`write`).
            ctx.pointee.flags |= cav_fmt_flag_flush_packets()
            var options: OpaquePointer?
            _ = av.av_dict_set(&options, "cluster_time_limit", "1000", 0)
            defer { av.av_dict_free(&options) }
            rc = av.avformat_write_header(ctx, &options)
            guard rc >= 0 else { throw RecordingError("--record \(path): cannot write the WebM header: \(message(rc))") }
            packet = av.av_packet_alloc()
        } catch {
            release()
            throw error
        }
    }

    deinit {
        try? finish()
    }

    private func release() {
        if let ctx = context {
            if ctx.pointee.pb != nil { _ = av.avio_closep(&ctx.pointee.pb) }
            av.avformat_free_context(ctx)
        }
        context = nil
        if packet != nil { av.av_packet_free(&packet) }
    }

    private func message(_ code: Int32) -> String {
        var buf = [CChar](repeating: 0, count: 256)
        withUnsafePointer(to: av) { cav_error_string($0, code, &buf, buf.count) }
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Opens libavformat, libavcodec and libavutil now, if not yet open: the first open maps
    /// about 100 libraries, which takes from tens of milliseconds to a second on a busy machine.
    /// A viewer that will record calls it when it starts, so that no picture waits for it.
    /// - Throws: `RecordingError` naming `path` and the loader's reason.
    public static func prepare(for path: String) throws {
        _ = try load(for: path)
    }

    /// libavformat, libavcodec and libavutil, opened once per process, by ``prepare(for:)`` or
    /// the first recorder (they are not linked: a process that never records does not map them).
    /// - Throws: `RecordingError` with the loader's reason.
    static func load(for path: String) throws -> cav_library {
        var error = [CChar](repeating: 0, count: 512)
        guard let library = cav_load(&error, error.count) else {
            let reason = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw RecordingError("--record \(path): cannot load libavformat to write WebM (\(reason)); is libavformat installed?")
        }
        return library.pointee
    }

    private func millis(_ nanos: UInt64) -> Int64 {
        if originNanos == nil { originNanos = nanos }
        return nanos >= originNanos! ? Int64((nanos - originNanos!) / 1_000_000) : 0
    }

    private func write(_ data: UnsafeRawBufferPointer, stream: Int32, millis ms: Int64, key: Bool) throws {
        guard !finished, let ctx = context, let pkt = packet, let base = data.baseAddress, data.count > 0 else { return }
        // libavformat copies unreferenced data; the packet struct itself is reused.
        pkt.pointee.data = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
        pkt.pointee.size = Int32(data.count)
        pkt.pointee.stream_index = stream
        pkt.pointee.pts = ms
        pkt.pointee.dts = ms
        pkt.pointee.duration = 0
        pkt.pointee.flags = key ? cav_pkt_flag_key() : 0
        // Written as it comes (each stream's times rise; the two are on one clock), not held
        // for interleaving: held, the sound of a still slide waited a second for the next picture.
        let rc = av.av_write_frame(ctx, pkt)
        av.av_packet_unref(pkt)
        guard rc >= 0 else { throw RecordingError("--record \(path): write failed: \(message(rc))") }
        // Every half second the cluster being filled is closed and written out (av_write_frame
        // with no packet flushes the muxer): a crash loses at most about half a second.
        if ms - lastFlushMillis >= 500 {
            lastFlushMillis = ms
            let flushed = av.av_write_frame(ctx, nil)
            guard flushed >= 0 else { throw RecordingError("--record \(path): write failed: \(message(flushed))") }
        }
    }

    /// Writes one VP8 frame (as received: the RFC 7741 payloads joined).
    public func writeVideo(_ frame: UnsafeRawBufferPointer, keyframe: Bool, timestampNanos: UInt64) throws {
        guard videoIndex >= 0 else { return }
        let ms = max(millis(timestampNanos), lastVideoMillis + 1)  // strictly increasing
        lastVideoMillis = ms
        try write(frame, stream: videoIndex, millis: ms, key: keyframe)
        videoFramesWritten += 1
    }

    /// Writes one Opus packet.
    public func writeAudio(_ packet: UnsafeRawBufferPointer, timestampNanos: UInt64) throws {
        guard audioIndex >= 0 else { return }
        let ms = max(millis(timestampNanos), lastAudioMillis + 1)
        lastAudioMillis = ms
        try write(packet, stream: audioIndex, millis: ms, key: true)
        audioPacketsWritten += 1
    }

    /// Writes the trailer (cues, duration) and closes the file. Called by deinit too.
    public func finish() throws {
        guard !finished else { return }
        finished = true
        guard let ctx = context else { return }
        let rc = av.av_write_trailer(ctx)
        release()
        guard rc >= 0 else { throw RecordingError("--record \(path): cannot finish the file: \(message(rc))") }
    }
}
