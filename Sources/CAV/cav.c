#include "cav.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define CAV_STRING2(x) #x
#define CAV_STRING(x) CAV_STRING2(x)

static cav_library library;
static int loaded;
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *open_library(const char *name) {
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(load_error, sizeof load_error, "%s", dlerror());
    return handle;
}

static void load(void) {
    void *util = open_library("libavutil.so." CAV_STRING(LIBAVUTIL_VERSION_MAJOR));
    void *codec = util ? open_library("libavcodec.so." CAV_STRING(LIBAVCODEC_VERSION_MAJOR)) : NULL;
    void *format = codec ? open_library("libavformat.so." CAV_STRING(LIBAVFORMAT_VERSION_MAJOR)) : NULL;
    if (!format) return;
#define CAV_FIND(handle, name)                                                          \
    library.name = (__typeof__(library.name))dlsym(handle, #name);                      \
    if (!library.name) {                                                                \
        snprintf(load_error, sizeof load_error, "libav%s has no %s", #handle, #name); \
        return;                                                                         \
    }
    CAV_FIND(format, avformat_alloc_output_context2)
    CAV_FIND(format, avformat_new_stream)
    CAV_FIND(format, avformat_write_header)
    CAV_FIND(format, avformat_free_context)
    CAV_FIND(format, av_interleaved_write_frame)
    CAV_FIND(format, av_write_frame)
    CAV_FIND(format, av_write_trailer)
    CAV_FIND(format, avio_open)
    CAV_FIND(format, avio_closep)
    CAV_FIND(codec, av_packet_alloc)
    CAV_FIND(codec, av_packet_free)
    CAV_FIND(codec, av_packet_unref)
    CAV_FIND(util, av_channel_layout_default)
    CAV_FIND(util, av_strerror)
    CAV_FIND(util, av_mallocz)
    CAV_FIND(util, av_dict_set)
    CAV_FIND(util, av_dict_free)
#undef CAV_FIND
    loaded = 1;
}

const cav_library *cav_load(char *error, size_t size) {
    pthread_once(&once, load);
    if (loaded) return &library;
    snprintf(error, size, "%s", load_error);
    return NULL;
}

void cav_error_string(const cav_library *lib, int code, char *buf, size_t size) { lib->av_strerror(code, buf, size); }

int cav_set_extradata(const cav_library *lib, AVCodecParameters *par, const uint8_t *data, int size) {
    par->extradata = lib->av_mallocz((size_t)size + AV_INPUT_BUFFER_PADDING_SIZE);
    if (!par->extradata) return AVERROR(ENOMEM);
    memcpy(par->extradata, data, (size_t)size);
    par->extradata_size = size;
    return 0;
}

// MARK: - The VP8 decoder (libavutil and libavcodec only)

typedef struct cav_codec_library {
    __typeof__(avcodec_find_decoder) *avcodec_find_decoder;
    __typeof__(avcodec_alloc_context3) *avcodec_alloc_context3;
    __typeof__(avcodec_open2) *avcodec_open2;
    __typeof__(avcodec_free_context) *avcodec_free_context;
    __typeof__(avcodec_send_packet) *avcodec_send_packet;
    __typeof__(avcodec_receive_frame) *avcodec_receive_frame;
    __typeof__(av_packet_alloc) *av_packet_alloc;
    __typeof__(av_packet_free) *av_packet_free;
    __typeof__(av_frame_alloc) *av_frame_alloc;
    __typeof__(av_frame_free) *av_frame_free;
    __typeof__(av_frame_unref) *av_frame_unref;
    __typeof__(av_strerror) *av_strerror;
    __typeof__(av_buffer_create) *av_buffer_create;
    __typeof__(av_buffer_unref) *av_buffer_unref;
    __typeof__(av_buffer_get_ref_count) *av_buffer_get_ref_count;
} cav_codec_library;

static cav_codec_library codec_library;
static int codec_loaded;
static char codec_load_error[512];
static pthread_once_t codec_once = PTHREAD_ONCE_INIT;

static void load_codec(void) {
    void *util = dlopen("libavutil.so." CAV_STRING(LIBAVUTIL_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
    void *codec = util ? dlopen("libavcodec.so." CAV_STRING(LIBAVCODEC_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!codec) {
        snprintf(codec_load_error, sizeof codec_load_error, "%s", dlerror());
        return;
    }
#define CAV_FIND(handle, name)                                                                            \
    codec_library.name = (__typeof__(codec_library.name))dlsym(handle, #name);                            \
    if (!codec_library.name) {                                                                            \
        snprintf(codec_load_error, sizeof codec_load_error, "libav%s has no %s", #handle, #name);         \
        return;                                                                                           \
    }
    CAV_FIND(codec, avcodec_find_decoder)
    CAV_FIND(codec, avcodec_alloc_context3)
    CAV_FIND(codec, avcodec_open2)
    CAV_FIND(codec, avcodec_free_context)
    CAV_FIND(codec, avcodec_send_packet)
    CAV_FIND(codec, avcodec_receive_frame)
    CAV_FIND(codec, av_packet_alloc)
    CAV_FIND(codec, av_packet_free)
    CAV_FIND(util, av_frame_alloc)
    CAV_FIND(util, av_frame_free)
    CAV_FIND(util, av_frame_unref)
    CAV_FIND(util, av_strerror)
    CAV_FIND(util, av_buffer_create)
    CAV_FIND(util, av_buffer_unref)
    CAV_FIND(util, av_buffer_get_ref_count)
#undef CAV_FIND
    codec_loaded = 1;
}

struct cav_vp8_decoder {
    AVCodecContext *context;
    AVPacket *packet;
    AVFrame *frame;
    // The frame, followed by AV_INPUT_BUFFER_PADDING_SIZE zero bytes, in a buffer libav
    // references (so it does not copy the packet): made again only when a frame is larger than
    // any before, or when libav still holds the last one.
    AVBufferRef *input;
    size_t input_capacity;  // without the padding
};

static void free_input(void *opaque, uint8_t *data) {
    (void)opaque;
    free(data);
}

void cav_vp8_decoder_close(cav_vp8_decoder *d) {
    const cav_codec_library *lib = &codec_library;
    if (d->context) lib->avcodec_free_context(&d->context);
    if (d->packet) lib->av_packet_free(&d->packet);
    if (d->frame) lib->av_frame_free(&d->frame);
    if (d->input) lib->av_buffer_unref(&d->input);
    free(d);
}

cav_vp8_decoder *cav_vp8_decoder_open(char *error, size_t size) {
    pthread_once(&codec_once, load_codec);
    if (!codec_loaded) {
        snprintf(error, size, "%s", codec_load_error);
        return NULL;
    }
    const cav_codec_library *lib = &codec_library;
    const AVCodec *codec = lib->avcodec_find_decoder(AV_CODEC_ID_VP8);
    if (!codec) {
        snprintf(error, size, "libavcodec has no VP8 decoder");
        return NULL;
    }
    cav_vp8_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(error, size, "out of memory");
        return NULL;
    }
    d->context = lib->avcodec_alloc_context3(codec);
    d->packet = lib->av_packet_alloc();
    d->frame = lib->av_frame_alloc();
    if (!d->context || !d->packet || !d->frame) {
        snprintf(error, size, "out of memory");
        cav_vp8_decoder_close(d);
        return NULL;
    }
    // One thread and no frame threading: each frame's picture comes out of its own call.
    d->context->thread_count = 1;
    d->context->thread_type = 0;
    d->context->flags |= AV_CODEC_FLAG_LOW_DELAY;
    int rc = lib->avcodec_open2(d->context, codec, NULL);
    if (rc < 0) {
        char text[128];
        lib->av_strerror(rc, text, sizeof text);
        snprintf(error, size, "cannot open libavcodec's VP8 decoder: %s", text);
        cav_vp8_decoder_close(d);
        return NULL;
    }
    return d;
}

int cav_vp8_decode(cav_vp8_decoder *d, const uint8_t *data, size_t size) {
    const cav_codec_library *lib = &codec_library;
    if (size == 0 || size > (1u << 26)) return AVERROR(EINVAL);  // 64 MB: no VP8 frame is near it
    if (size > d->input_capacity || !d->input || lib->av_buffer_get_ref_count(d->input) > 1) {
        size_t capacity = size > d->input_capacity ? size + size / 2 : d->input_capacity;
        uint8_t *memory = malloc(capacity + AV_INPUT_BUFFER_PADDING_SIZE);
        AVBufferRef *input = memory ? lib->av_buffer_create(memory, (int)(capacity + AV_INPUT_BUFFER_PADDING_SIZE), free_input, NULL, 0) : NULL;
        if (!input) {
            free(memory);
            return AVERROR(ENOMEM);
        }
        if (d->input) lib->av_buffer_unref(&d->input);
        d->input = input;
        d->input_capacity = capacity;
    }
    memcpy(d->input->data, data, size);
    memset(d->input->data + size, 0, AV_INPUT_BUFFER_PADDING_SIZE);
    // The packet borrows our reference; avcodec_send_packet takes its own.
    d->packet->buf = d->input;
    d->packet->data = d->input->data;
    d->packet->size = (int)size;
    int rc = lib->avcodec_send_packet(d->context, d->packet);
    d->packet->buf = NULL;
    d->packet->data = NULL;
    d->packet->size = 0;
    return rc == AVERROR(EAGAIN) ? 0 : rc;
}

const AVFrame *cav_vp8_next_picture(cav_vp8_decoder *d) {
    const cav_codec_library *lib = &codec_library;
    lib->av_frame_unref(d->frame);
    return lib->avcodec_receive_frame(d->context, d->frame) == 0 ? d->frame : NULL;
}

void cav_vp8_error(cav_vp8_decoder *d, int code, char *buf, size_t size) {
    (void)d;
    codec_library.av_strerror(code, buf, size);
}
