// CVPX: libvpx VP8 encoder and decoder.
// vpx_codec_enc_init/vpx_codec_dec_init are macros that pass the ABI version, and
// vpx_codec_control is a type-checked variadic macro; Swift sees neither, so each
// is wrapped here in a static inline function with a fixed signature.
#pragma once
#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

static inline vpx_codec_err_t cvpx_enc_init(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, flags);
}
static inline vpx_codec_err_t cvpx_enc_config_default(vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_config_default(vpx_codec_vp8_cx(), cfg, 0);
}
static inline vpx_codec_err_t cvpx_dec_init(vpx_codec_ctx_t *ctx, const vpx_codec_dec_cfg_t *cfg, vpx_codec_flags_t flags) {
    return vpx_codec_dec_init(ctx, vpx_codec_vp8_dx(), cfg, flags);
}
// Integer-valued encoder controls (VP8E_SET_CPUUSED, VP8E_SET_STATIC_THRESHOLD,
// VP8E_SET_SCREEN_CONTENT_MODE, VP8E_SET_NOISE_SENSITIVITY, VP8E_SET_TOKEN_PARTITIONS, ...).
static inline vpx_codec_err_t cvpx_control_int(vpx_codec_ctx_t *ctx, int id, int value) {
    return vpx_codec_control_(ctx, id, value);
}
static inline vpx_codec_err_t cvpx_control_uint(vpx_codec_ctx_t *ctx, int id, unsigned int value) {
    return vpx_codec_control_(ctx, id, value);
}
// VP8D_GET_FRAME_CORRUPTED and friends take an int pointer.
static inline vpx_codec_err_t cvpx_control_int_ptr(vpx_codec_ctx_t *ctx, int id, int *value) {
    return vpx_codec_control_(ctx, id, value);
}
// VP8E_SET_ACTIVEMAP: which macroblocks to encode (1) or skip (0); a NULL map encodes all.
static inline vpx_codec_err_t cvpx_set_active_map(vpx_codec_ctx_t *ctx, unsigned char *map, unsigned int rows, unsigned int cols) {
    vpx_active_map_t m = { map, rows, cols };
    return vpx_codec_control_(ctx, VP8E_SET_ACTIVEMAP, &m);
}
