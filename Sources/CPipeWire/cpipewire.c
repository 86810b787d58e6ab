#include "cpipewire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/buffer/meta.h>
#include <spa/param/video/format-utils.h>
#include <spa/param/props.h>
#include <spa/pod/builder.h>
#include <spa/utils/result.h>

struct ss_pw_capture {
    struct pw_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct spa_hook core_listener;
    struct pw_stream *stream;
    struct spa_hook stream_listener;
    /// The registry, watched for the node going away (the share stopped from the desktop, its
    /// producer gone): the stream alone would only pause.
    struct pw_registry *registry;
    struct spa_hook registry_listener;
    uint32_t node;
    struct spa_video_info_raw format;
    int negotiated;
    int streaming;
    char error[256];
    /// The newest buffer, dequeued and kept until taken and released (or replaced).
    struct pw_buffer *newest;
    /// The buffer the caller holds (taken, not released).
    struct pw_buffer *taken;
    /// Damage gathered over the buffers replaced since the last take.
    int whole;
    uint32_t damage_count;
    ss_pw_rect damage[SS_PW_MAX_DAMAGE];
    uint32_t skipped;
    /// The pointer from the cursor metadata, and whether it changed since it was last read.
    int cursor_visible, cursor_changed;
    int32_t cursor_x, cursor_y, hot_x, hot_y;
    uint32_t cursor_width, cursor_height, cursor_serial;
    uint32_t cursor_pixels[SS_PW_MAX_CURSOR * SS_PW_MAX_CURSOR];
};

/// The metadata's size for a cursor image of w × h (4 bytes a pixel).
#define SS_PW_CURSOR_META_SIZE(w, h) (sizeof(struct spa_meta_cursor) + sizeof(struct spa_meta_bitmap) + (w) * (h) * 4)

static void fail(struct ss_pw_capture *c, const char *what) {
    if (c->error[0] == 0) snprintf(c->error, sizeof c->error, "%s", what);
}

static void add_damage(struct ss_pw_capture *c, struct pw_buffer *b) {
    struct spa_meta *meta = spa_buffer_find_meta(b->buffer, SPA_META_VideoDamage);
    if (!meta) { c->whole = 1; return; }
    struct spa_meta_region *r;
    int any = 0;
    spa_meta_for_each(r, meta) {
        if (!spa_meta_region_is_valid(r)) break;
        any = 1;
        if (c->damage_count == SS_PW_MAX_DAMAGE) { c->whole = 1; break; }
        c->damage[c->damage_count++] = (ss_pw_rect){ r->region.position.x, r->region.position.y, r->region.size.width, r->region.size.height };
    }
    if (!any) c->whole = 1;
}

/// Reads the cursor metadata of a buffer (an empty buffer may carry only that: the pointer
/// moved over a still screen). Everything is checked against the metadata's size: a producer's
/// offsets are not trusted.
static void read_cursor(struct ss_pw_capture *c, struct pw_buffer *b) {
    struct spa_meta *meta = spa_buffer_find_meta(b->buffer, SPA_META_Cursor);
    if (!meta || meta->size < sizeof(struct spa_meta_cursor)) return;
    struct spa_meta_cursor *cursor = meta->data;
    if (!spa_meta_cursor_is_valid(cursor)) return;  // nothing new
    if (cursor->bitmap_offset >= sizeof *cursor && cursor->bitmap_offset <= meta->size - sizeof(struct spa_meta_bitmap)) {
        struct spa_meta_bitmap *bitmap = SPA_PTROFF(cursor, cursor->bitmap_offset, struct spa_meta_bitmap);
        uint32_t room = meta->size - cursor->bitmap_offset;
        uint32_t w = bitmap->size.width, h = bitmap->size.height;
        int32_t stride = bitmap->stride > 0 ? bitmap->stride : (int32_t)(w * 4);
        if (bitmap->offset == 0 || w == 0 || h == 0) {
            c->cursor_width = c->cursor_height = 0;  // no image: hidden
            c->cursor_serial++;
        } else if (spa_meta_bitmap_is_valid(bitmap) && w <= SS_PW_MAX_CURSOR && h <= SS_PW_MAX_CURSOR
                   && (uint32_t)stride >= w * 4 && bitmap->offset >= sizeof *bitmap
                   && (uint64_t)bitmap->offset + (uint64_t)stride * (h - 1) + w * 4 <= room) {
            // Into 0xAARRGGBB from the bytes' order in memory.
            int a, r, g, bl;
            switch (bitmap->format) {
            case SPA_VIDEO_FORMAT_BGRA: bl = 0; g = 1; r = 2; a = 3; break;
            case SPA_VIDEO_FORMAT_RGBA: r = 0; g = 1; bl = 2; a = 3; break;
            case SPA_VIDEO_FORMAT_ARGB: a = 0; r = 1; g = 2; bl = 3; break;
            case SPA_VIDEO_FORMAT_ABGR: a = 0; bl = 1; g = 2; r = 3; break;
            default: a = -1; r = g = bl = 0; break;
            }
            if (a >= 0) {
                const uint8_t *pixels = SPA_PTROFF(bitmap, bitmap->offset, const uint8_t);
                for (uint32_t y = 0; y < h; y++) {
                    const uint8_t *row = pixels + (size_t)y * (size_t)stride;
                    for (uint32_t x = 0; x < w; x++) {
                        const uint8_t *p = row + x * 4;
                        c->cursor_pixels[y * w + x] = (uint32_t)p[a] << 24 | (uint32_t)p[r] << 16 | (uint32_t)p[g] << 8 | p[bl];
                    }
                }
                c->cursor_width = w;
                c->cursor_height = h;
                c->hot_x = cursor->hotspot.x;
                c->hot_y = cursor->hotspot.y;
                c->cursor_serial++;
            }
        }
    }
    c->cursor_x = cursor->position.x;
    c->cursor_y = cursor->position.y;
    c->cursor_visible = c->cursor_width > 0;
    c->cursor_changed = 1;
}

int ss_pw_cursor_read(ss_pw_capture *c, ss_pw_cursor *out) {
    out->visible = c->cursor_visible;
    out->x = c->cursor_x;
    out->y = c->cursor_y;
    out->hot_x = c->hot_x;
    out->hot_y = c->hot_y;
    out->width = c->cursor_width;
    out->height = c->cursor_height;
    out->serial = c->cursor_serial;
    out->pixels = c->cursor_pixels;
    int changed = c->cursor_changed;
    c->cursor_changed = 0;
    return changed;
}

static void on_process(void *data) {
    struct ss_pw_capture *c = data;
    struct pw_buffer *b;
    while ((b = pw_stream_dequeue_buffer(c->stream)) != NULL) {
        struct spa_data *d = &b->buffer->datas[0];
        struct spa_meta_header *h = spa_buffer_find_meta_data(b->buffer, SPA_META_Header, sizeof *h);
        read_cursor(c, b);
        // An empty buffer (no new picture: some compositors send only cursor updates) or a
        // corrupted one: given back at once.
        if (d->data == NULL || d->chunk->size == 0 || (h && (h->flags & SPA_META_HEADER_FLAG_CORRUPTED))) {
            pw_stream_queue_buffer(c->stream, b);
            continue;
        }
        if (c->newest) {  // not taken yet: replaced by this one, its damage kept
            pw_stream_queue_buffer(c->stream, c->newest);
            c->skipped++;
        }
        add_damage(c, b);
        c->newest = b;
    }
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct ss_pw_capture *c = data;
    if (id != SPA_PARAM_Format || param == NULL) return;
    struct spa_video_info_raw info;
    spa_zero(info);
    if (spa_format_video_raw_parse(param, &info) < 0) { fail(c, "PipeWire offered a video format that cannot be read"); return; }
    c->format = info;
    c->negotiated = 1;
    c->whole = 1;
    uint8_t buffer[2048];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[5];
    uint32_t stride = SPA_ROUND_UP_N(info.size.width * 4, 4);
    params[0] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 16),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
        SPA_PARAM_BUFFERS_size, SPA_POD_Int(stride * info.size.height),
        SPA_PARAM_BUFFERS_stride, SPA_POD_Int(stride),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
    params[1] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[2] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoCrop), SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region)));
    params[3] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoDamage),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(sizeof(struct spa_meta_region) * SS_PW_MAX_DAMAGE,
                                                      sizeof(struct spa_meta_region) * 1, sizeof(struct spa_meta_region) * SS_PW_MAX_DAMAGE));
    // The pointer as metadata (the portal's cursor mode "metadata"): drawn here, so it is not
    // baked into every picture, and a move over a still screen sends no picture.
    params[4] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Cursor),
        SPA_PARAM_META_size, SPA_POD_CHOICE_RANGE_Int(SS_PW_CURSOR_META_SIZE(64, 64), SS_PW_CURSOR_META_SIZE(1, 1),
                                                      SS_PW_CURSOR_META_SIZE(SS_PW_MAX_CURSOR, SS_PW_MAX_CURSOR)));
    pw_stream_update_params(c->stream, params, 5);
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct ss_pw_capture *c = data;
    (void)old;
    c->streaming = state == PW_STREAM_STATE_STREAMING;
    if (state == PW_STREAM_STATE_ERROR) {
        char what[256];
        snprintf(what, sizeof what, "the PipeWire stream failed: %s", error ? error : "no reason given");
        fail(c, what);
    } else if (state == PW_STREAM_STATE_UNCONNECTED && c->negotiated) {
        fail(c, "the PipeWire stream ended (the screen share was stopped)");
    }
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    struct ss_pw_capture *c = data;
    (void)seq;
    if (id == PW_ID_CORE) {
        char what[256];
        snprintf(what, sizeof what, "PipeWire: %s (%s)", message ? message : "error", spa_strerror(res));
        fail(c, what);
    }
}

/// A buffer goes away (a new format, the stream ending): whoever held it holds nothing now.
static void on_remove_buffer(void *data, struct pw_buffer *b) {
    struct ss_pw_capture *c = data;
    if (c->newest == b) c->newest = NULL;
    if (c->taken == b) c->taken = NULL;
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .remove_buffer = on_remove_buffer,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void on_global_remove(void *data, uint32_t id) {
    struct ss_pw_capture *c = data;
    if (id == c->node) fail(c, "the PipeWire stream of the shared screen was removed (the share was stopped on the desktop, or its source ended)");
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global_remove = on_global_remove,
};

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .error = on_core_error,
};

ss_pw_capture *ss_pw_open(int fd, uint32_t node, char *error, size_t error_size) {
    static int initialized = 0;
    if (!initialized) { pw_init(NULL, NULL); initialized = 1; }
    struct ss_pw_capture *c = calloc(1, sizeof *c);
    if (!c) { if (fd >= 0) close(fd); snprintf(error, error_size, "out of memory"); return NULL; }
    c->loop = pw_loop_new(NULL);
    c->context = c->loop ? pw_context_new(c->loop, NULL, 0) : NULL;
    if (!c->context) {
        if (fd >= 0) close(fd);
        snprintf(error, error_size, "cannot start PipeWire's client: %s", strerror(errno));
        ss_pw_close(c);
        return NULL;
    }
    c->core = fd >= 0 ? pw_context_connect_fd(c->context, fd, NULL, 0) : pw_context_connect(c->context, NULL, 0);
    if (!c->core) {
        snprintf(error, error_size, "cannot connect to PipeWire: %s", strerror(errno));
        ss_pw_close(c);
        return NULL;
    }
    pw_core_add_listener(c->core, &c->core_listener, &core_events, c);
    c->node = node;
    c->registry = pw_core_get_registry(c->core, PW_VERSION_REGISTRY, 0);
    if (c->registry) pw_registry_add_listener(c->registry, &c->registry_listener, &registry_events, c);
    c->stream = pw_stream_new(c->core, "screenshare", pw_properties_new(
        PW_KEY_MEDIA_TYPE, "Video", PW_KEY_MEDIA_CATEGORY, "Capture", PW_KEY_MEDIA_ROLE, "Screen", NULL));
    if (!c->stream) {
        snprintf(error, error_size, "cannot make a PipeWire stream: %s", strerror(errno));
        ss_pw_close(c);
        return NULL;
    }
    pw_stream_add_listener(c->stream, &c->stream_listener, &stream_events, c);
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1];
    params[0] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_Format, SPA_PARAM_EnumFormat,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_CHOICE_ENUM_Id(5, SPA_VIDEO_FORMAT_BGRx, SPA_VIDEO_FORMAT_BGRx, SPA_VIDEO_FORMAT_RGBx,
                                                        SPA_VIDEO_FORMAT_BGRA, SPA_VIDEO_FORMAT_RGBA),
        SPA_FORMAT_VIDEO_size, SPA_POD_CHOICE_RANGE_Rectangle(&SPA_RECTANGLE(1920, 1080), &SPA_RECTANGLE(1, 1), &SPA_RECTANGLE(8192, 8192)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_CHOICE_RANGE_Fraction(&SPA_FRACTION(0, 1), &SPA_FRACTION(0, 1), &SPA_FRACTION(360, 1)));
    int rc = pw_stream_connect(c->stream, PW_DIRECTION_INPUT, node,
                               PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_DONT_RECONNECT, params, 1);
    if (rc < 0) {
        snprintf(error, error_size, "cannot connect to PipeWire node %u: %s", node, spa_strerror(rc));
        ss_pw_close(c);
        return NULL;
    }
    return c;
}

int ss_pw_fd(ss_pw_capture *c) { return pw_loop_get_fd(c->loop); }

int ss_pw_iterate(ss_pw_capture *c, int timeout_ms) {
    // Entered and left around each turn: the thread that closes the capture (or opened it)
    // need not be the one that runs its loop.
    pw_loop_enter(c->loop);
    int rc = pw_loop_iterate(c->loop, timeout_ms);
    pw_loop_leave(c->loop);
    if (rc < 0 && rc != -EINTR) {
        char what[256];
        snprintf(what, sizeof what, "PipeWire's loop failed: %s", spa_strerror(rc));
        fail(c, what);
    }
    return c->error[0] ? -1 : 0;
}

int ss_pw_take(ss_pw_capture *c, ss_pw_frame *frame) {
    if (!c->newest) return 0;
    if (c->taken) ss_pw_release(c);
    struct pw_buffer *b = c->newest;
    c->newest = NULL;
    c->taken = b;
    struct spa_data *d = &b->buffer->datas[0];
    uint32_t offset = d->chunk->offset < d->maxsize ? d->chunk->offset : 0;
    frame->data = (const uint8_t *)d->data + offset;
    frame->stride = d->chunk->stride > 0 ? d->chunk->stride : (int32_t)(c->format.size.width * 4);
    frame->width = c->format.size.width;
    frame->height = c->format.size.height;
    switch (c->format.format) {
    case SPA_VIDEO_FORMAT_RGBx: frame->format = SS_PW_RGBX; break;
    case SPA_VIDEO_FORMAT_BGRA: frame->format = SS_PW_BGRA; break;
    case SPA_VIDEO_FORMAT_RGBA: frame->format = SS_PW_RGBA; break;
    default: frame->format = SS_PW_BGRX; break;
    }
    frame->crop = (ss_pw_rect){ 0, 0, frame->width, frame->height };
    struct spa_meta_region *crop = spa_buffer_find_meta_data(b->buffer, SPA_META_VideoCrop, sizeof *crop);
    if (crop && spa_meta_region_is_valid(crop)) {
        frame->crop = (ss_pw_rect){ crop->region.position.x, crop->region.position.y, crop->region.size.width, crop->region.size.height };
    }
    // A picture that does not fit its buffer is not read past its end.
    if ((uint64_t)frame->stride * frame->height > (uint64_t)d->maxsize - offset) {
        frame->height = frame->stride > 0 ? (uint32_t)((d->maxsize - offset) / (uint32_t)frame->stride) : 0;
        c->whole = 1;
    }
    frame->whole = c->whole;
    frame->damage_count = c->damage_count;
    memcpy(frame->damage, c->damage, sizeof c->damage);
    frame->skipped = c->skipped;
    c->whole = 0;
    c->damage_count = 0;
    c->skipped = 0;
    return 1;
}

void ss_pw_release(ss_pw_capture *c) {
    if (c->taken) {
        pw_stream_queue_buffer(c->stream, c->taken);
        c->taken = NULL;
    }
}

const char *ss_pw_error(ss_pw_capture *c) { return c->error[0] ? c->error : NULL; }

int ss_pw_streaming(ss_pw_capture *c) { return c->streaming; }

int ss_pw_holds_frame(ss_pw_capture *c) { return c->taken != NULL; }

void ss_pw_close(ss_pw_capture *c) {
    if (!c) return;
    if (c->stream) {
        ss_pw_release(c);
        if (c->newest) pw_stream_queue_buffer(c->stream, c->newest);
        pw_stream_destroy(c->stream);
    }
    if (c->registry) {
        spa_hook_remove(&c->registry_listener);
        pw_proxy_destroy((struct pw_proxy *)c->registry);
    }
    if (c->core) pw_core_disconnect(c->core);
    if (c->context) pw_context_destroy(c->context);
    if (c->loop) pw_loop_destroy(c->loop);
    free(c);
}
