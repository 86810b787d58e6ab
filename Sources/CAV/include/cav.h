// CAV: libavformat (WebM/Matroska muxing of already-encoded VP8 and Opus; nothing is re-encoded),
// loaded with dlopen when a recording starts, not linked. Linked, libavformat and its
// dependencies (libavcodec, x265, rav1e, librsvg, gnutls… about 130 libraries) were mapped
// into every process and cost about 25 MB of resident memory even in `start` and `serve`,
// which never record. Only the types and constants come from the headers here; the functions
// are the loaded library's, in `cav_library`.
#pragma once
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <stddef.h>

#pragma clang assume_nonnull begin

/// The functions used, from the loaded libavformat, libavcodec and libavutil (the sonames of
/// the headers built against).
typedef struct cav_library {
    __typeof__(avformat_alloc_output_context2) *avformat_alloc_output_context2;
    __typeof__(avformat_new_stream) *avformat_new_stream;
    __typeof__(avformat_write_header) *avformat_write_header;
    __typeof__(avformat_free_context) *avformat_free_context;
    __typeof__(av_interleaved_write_frame) *av_interleaved_write_frame;
    __typeof__(av_write_frame) *av_write_frame;
    __typeof__(av_write_trailer) *av_write_trailer;
    __typeof__(avio_open) *avio_open;
    __typeof__(avio_closep) *avio_closep;
    __typeof__(av_packet_alloc) *av_packet_alloc;
    __typeof__(av_packet_free) *av_packet_free;
    __typeof__(av_packet_unref) *av_packet_unref;
    __typeof__(av_channel_layout_default) *av_channel_layout_default;
    __typeof__(av_strerror) *av_strerror;
    __typeof__(av_mallocz) *av_mallocz;
    __typeof__(av_dict_set) *av_dict_set;
    __typeof__(av_dict_free) *av_dict_free;
} cav_library;

/// Loads the libraries the first time (thread-safe; later calls return the same table).
/// NULL when they cannot be loaded, with the reason (dlopen's or dlsym's) in `error`.
const cav_library *_Nullable cav_load(char *error, size_t size);

/// A libav error code as text.
void cav_error_string(const cav_library *lib, int code, char *buf, size_t size);
/// Copies extradata into a newly av_malloc'ed, padded buffer owned by the codec parameters.
int cav_set_extradata(const cav_library *lib, AVCodecParameters *par, const uint8_t *data, int size);

/// A VP8 decoder on libavcodec's own VP8 decoder (not libvpx), for `watch`: on screen content it
/// decodes in about 0.6 × libvpx's time (Debian 12). Loads only libavutil and libavcodec.
typedef struct cav_vp8_decoder cav_vp8_decoder;
/// NULL when libavcodec cannot be loaded or has no VP8 decoder, with the reason in `error`.
cav_vp8_decoder *_Nullable cav_vp8_decoder_open(char *error, size_t size);
void cav_vp8_decoder_close(cav_vp8_decoder *decoder);
/// Decodes one frame (copied into a padded buffer the decoder keeps): 0, or a negative libav
/// error whose text `cav_vp8_error` gives.
int cav_vp8_decode(cav_vp8_decoder *decoder, const uint8_t *data, size_t size);
/// The next picture the last frame yielded, valid until the next call; NULL when there is none.
const AVFrame *_Nullable cav_vp8_next_picture(cav_vp8_decoder *decoder);
void cav_vp8_error(cav_vp8_decoder *decoder, int code, char *buf, size_t size);

// Macros, as functions.
static inline int cav_noptsvalue_is(int64_t v) { return v == AV_NOPTS_VALUE; }
static inline int cav_avio_write_flag(void) { return AVIO_FLAG_WRITE; }
static inline int cav_pkt_flag_key(void) { return AV_PKT_FLAG_KEY; }
static inline int cav_fmt_flag_flush_packets(void) { return AVFMT_FLAG_FLUSH_PACKETS; }

#pragma clang assume_nonnull end
