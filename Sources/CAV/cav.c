#include "cav.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
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
