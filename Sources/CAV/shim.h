// CAV: libavformat (WebM/Matroska muxing of already-encoded VP8 and Opus; nothing is re-encoded).
#pragma once
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/mem.h>
#include <libavutil/md5.h>
#include <string.h>

// AVERROR_EOF and friends are macros; av_err2str uses a compound literal.
static inline void cav_error_string(int code, char *buf, size_t size) { av_strerror(code, buf, size); }
static inline int cav_noptsvalue_is(int64_t v) { return v == AV_NOPTS_VALUE; }
static inline int cav_avio_write_flag(void) { return AVIO_FLAG_WRITE; }
static inline int cav_pkt_flag_key(void) { return AV_PKT_FLAG_KEY; }
// Copies extradata into a newly av_malloc'ed, padded buffer owned by the codec parameters.
static inline int cav_set_extradata(AVCodecParameters *par, const uint8_t *data, int size) {
    par->extradata = av_mallocz(size + AV_INPUT_BUFFER_PADDING_SIZE);
    if (!par->extradata) return AVERROR(ENOMEM);
    memcpy(par->extradata, data, size);
    par->extradata_size = size;
    return 0;
}
