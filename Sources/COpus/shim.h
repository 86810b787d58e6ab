// COpus: libopus encoder and decoder.
// opus_encoder_ctl is variadic and its requests are macros that expand to
// "REQUEST, __opus_check_int(x)"; Swift sees neither, so each setting we use is
// wrapped here in a static inline function with a fixed signature.
#pragma once
#include <opus/opus.h>

static inline int copus_set_bitrate(OpusEncoder *st, opus_int32 bps) { return opus_encoder_ctl(st, OPUS_SET_BITRATE(bps)); }
static inline int copus_set_inband_fec(OpusEncoder *st, opus_int32 on) { return opus_encoder_ctl(st, OPUS_SET_INBAND_FEC(on)); }
static inline int copus_set_packet_loss_perc(OpusEncoder *st, opus_int32 percent) { return opus_encoder_ctl(st, OPUS_SET_PACKET_LOSS_PERC(percent)); }
static inline int copus_set_dtx(OpusEncoder *st, opus_int32 on) { return opus_encoder_ctl(st, OPUS_SET_DTX(on)); }
// OPUS_AUTO, OPUS_SIGNAL_VOICE or OPUS_SIGNAL_MUSIC.
static inline int copus_set_signal(OpusEncoder *st, opus_int32 signal) { return opus_encoder_ctl(st, OPUS_SET_SIGNAL(signal)); }
static inline int copus_set_complexity(OpusEncoder *st, opus_int32 complexity) { return opus_encoder_ctl(st, OPUS_SET_COMPLEXITY(complexity)); }
static inline int copus_get_bitrate(OpusEncoder *st, opus_int32 *bps) { return opus_encoder_ctl(st, OPUS_GET_BITRATE(bps)); }
static inline int copus_get_lookahead(OpusEncoder *st, opus_int32 *samples) { return opus_encoder_ctl(st, OPUS_GET_LOOKAHEAD(samples)); }

// The constants are plain integer macros, but a few are built from other macros; spell them out.
static inline int copus_application_audio(void) { return OPUS_APPLICATION_AUDIO; }
static inline int copus_auto(void) { return OPUS_AUTO; }
