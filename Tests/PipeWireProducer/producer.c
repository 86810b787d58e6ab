// A PipeWire video source for the portal tests, driven line by line through a FIFO: it draws
// into its picture, says what changed with damage metadata (or, to prove that damage is read,
// changes pixels without saying so), and sends the pointer as cursor metadata (16×16, opaque),
// moving it with a buffer that carries no picture, as compositors do over a still screen.
//
//   ss-test-pw-producer NAME WIDTH HEIGHT FIFO
//
// Prints "node N" once its node exists and "sent N" after each buffer. Commands:
//   fill RRGGBB              the whole picture, all of it damaged
//   rect X Y W H RRGGBB      a rectangle, damaged
//   sneak X Y W H RRGGBB     a rectangle, not damaged
//   cursor X Y RRGGBB        the pointer's hot spot (its image 16×16 in the colour, hot spot 8,8)
//   hide                     no pointer
//   frame                    sends what changed: a picture, or only the pointer
//   size W H                 a new size (the format is negotiated again), filled grey, sent whole
//   load PATH                the picture from a raw BGRx file of the current size, all of it damaged
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/buffer/meta.h>
#include <spa/param/video/format-utils.h>
#include <spa/pod/builder.h>

#define CURSOR 16
#define META_CURSOR_SIZE (sizeof(struct spa_meta_cursor) + sizeof(struct spa_meta_bitmap) + 64 * 64 * 4)
#define MAX_DAMAGE 16

struct producer {
    struct pw_main_loop *main;
    struct pw_context *context;
    struct pw_core *core;
    struct pw_stream *stream;
    struct spa_hook listener;
    uint32_t width, height;
    uint32_t *screen;
    int whole;
    int damage_count;
    struct spa_region damage[MAX_DAMAGE];
    int picture_due, cursor_due, bitmap_due, send_due;
    int cursor_visible;
    int32_t cursor_x, cursor_y;
    uint32_t cursor_colour;
    int fifo, fifo_writer;
    char line[512];
    size_t used;
    uint32_t sent, sequence;
    int node_printed, streaming;
};

static void fill(struct producer *p, int x, int y, int w, int h, uint32_t rgb) {
    for (int j = y < 0 ? 0 : y; j < y + h && j < (int)p->height; j++)
        for (int i = x < 0 ? 0 : x; i < x + w && i < (int)p->width; i++) p->screen[j * p->width + i] = 0xFF000000u | rgb;
}

static void damage(struct producer *p, int x, int y, int w, int h) {
    if (p->damage_count == MAX_DAMAGE) { p->whole = 1; return; }
    p->damage[p->damage_count++] = SPA_REGION(x, y, (uint32_t)w, (uint32_t)h);
}

static const struct spa_pod *format_param(struct producer *p, struct spa_pod_builder *b, uint32_t id) {
    return spa_pod_builder_add_object(b, SPA_TYPE_OBJECT_Format, id,
        SPA_FORMAT_mediaType, SPA_POD_Id(SPA_MEDIA_TYPE_video),
        SPA_FORMAT_mediaSubtype, SPA_POD_Id(SPA_MEDIA_SUBTYPE_raw),
        SPA_FORMAT_VIDEO_format, SPA_POD_Id(SPA_VIDEO_FORMAT_BGRx),
        SPA_FORMAT_VIDEO_size, SPA_POD_Rectangle(&SPA_RECTANGLE(p->width, p->height)),
        SPA_FORMAT_VIDEO_framerate, SPA_POD_Fraction(&SPA_FRACTION(0, 1)));
}

static void on_process(void *data) {
    struct producer *p = data;
    if (!p->send_due) return;
    struct pw_buffer *b = pw_stream_dequeue_buffer(p->stream);
    if (!b) return;  // all with the consumer: sent when one comes back (the next trigger)
    struct spa_buffer *buf = b->buffer;
    struct spa_data *d = &buf->datas[0];
    if (!d->data) { pw_stream_queue_buffer(p->stream, b); return; }
    uint32_t stride = p->width * 4;
    if (p->picture_due) {
        for (uint32_t y = 0; y < p->height; y++) memcpy((uint8_t *)d->data + y * stride, p->screen + y * p->width, stride);
        d->chunk->offset = 0;
        d->chunk->size = stride * p->height;
        d->chunk->stride = (int32_t)stride;
    } else {
        d->chunk->size = 0;  // no picture: only the pointer
    }
    struct spa_meta_header *h = spa_buffer_find_meta_data(buf, SPA_META_Header, sizeof *h);
    if (h) { h->flags = 0; h->seq = p->sequence++; h->pts = -1; h->dts_offset = 0; }
    struct spa_meta *dm = spa_buffer_find_meta(buf, SPA_META_VideoDamage);
    if (dm) {
        struct spa_meta_region *r = dm->data;
        uint32_t room = dm->size / sizeof *r, n = 0;
        if (p->picture_due && p->whole) {
            if (room > 0) r[n++].region = SPA_REGION(0, 0, p->width, p->height);
        } else if (p->picture_due) {
            for (int i = 0; i < p->damage_count && n < room; i++) r[n++].region = p->damage[i];
        }
        if (n < room) r[n].region = SPA_REGION(0, 0, 0, 0);  // the end of the list
    }
    struct spa_meta *cm = spa_buffer_find_meta(buf, SPA_META_Cursor);
    if (cm && cm->size >= sizeof(struct spa_meta_cursor)) {
        struct spa_meta_cursor *c = cm->data;
        c->id = 0;  // nothing new
        if (p->cursor_due) {
            c->id = 1;
            c->flags = 0;
            c->position.x = p->cursor_x;
            c->position.y = p->cursor_y;
            c->hotspot.x = CURSOR / 2;
            c->hotspot.y = CURSOR / 2;
            c->bitmap_offset = 0;
            if (p->bitmap_due && cm->size >= sizeof *c + sizeof(struct spa_meta_bitmap) + CURSOR * CURSOR * 4) {
                c->bitmap_offset = sizeof *c;
                struct spa_meta_bitmap *bm = SPA_PTROFF(c, c->bitmap_offset, struct spa_meta_bitmap);
                bm->format = SPA_VIDEO_FORMAT_BGRA;
                bm->size = SPA_RECTANGLE(CURSOR, CURSOR);
                bm->stride = CURSOR * 4;
                bm->offset = p->cursor_visible ? sizeof *bm : 0;
                uint32_t *pixels = SPA_PTROFF(bm, sizeof *bm, uint32_t);
                for (int i = 0; i < CURSOR * CURSOR; i++) pixels[i] = 0xFF000000u | p->cursor_colour;
            }
        }
    }
    pw_stream_queue_buffer(p->stream, b);
    p->send_due = p->picture_due = p->cursor_due = p->bitmap_due = 0;
    p->whole = 0;
    p->damage_count = 0;
    printf("sent %u\n", ++p->sent);
    fflush(stdout);
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    struct producer *p = data;
    if (id != SPA_PARAM_Format || param == NULL) return;
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[4];
    uint32_t stride = p->width * 4;
    params[0] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamBuffers, SPA_PARAM_Buffers,
        SPA_PARAM_BUFFERS_buffers, SPA_POD_CHOICE_RANGE_Int(4, 2, 8),
        SPA_PARAM_BUFFERS_blocks, SPA_POD_Int(1),
        SPA_PARAM_BUFFERS_size, SPA_POD_Int(stride * p->height),
        SPA_PARAM_BUFFERS_stride, SPA_POD_Int(stride),
        SPA_PARAM_BUFFERS_dataType, SPA_POD_CHOICE_FLAGS_Int((1 << SPA_DATA_MemFd) | (1 << SPA_DATA_MemPtr)));
    params[1] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Header), SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_header)));
    params[2] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_VideoDamage),
        SPA_PARAM_META_size, SPA_POD_Int(sizeof(struct spa_meta_region) * MAX_DAMAGE));
    params[3] = spa_pod_builder_add_object(&b, SPA_TYPE_OBJECT_ParamMeta, SPA_PARAM_Meta,
        SPA_PARAM_META_type, SPA_POD_Id(SPA_META_Cursor), SPA_PARAM_META_size, SPA_POD_Int(META_CURSOR_SIZE));
    pw_stream_update_params(p->stream, params, 4);
    // A new format: the next picture is whole.
    p->picture_due = p->send_due = p->whole = 1;
    p->cursor_due = p->bitmap_due = 1;
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    struct producer *p = data;
    (void)old;
    if (state == PW_STREAM_STATE_ERROR) {
        fprintf(stderr, "stream error: %s\n", error ? error : "?");
        pw_main_loop_quit(p->main);
    }
    if (!p->node_printed && (state == PW_STREAM_STATE_PAUSED || state == PW_STREAM_STATE_STREAMING)) {
        p->node_printed = 1;
        printf("node %u\n", pw_stream_get_node_id(p->stream));
        fflush(stdout);
    }
    p->streaming = state == PW_STREAM_STATE_STREAMING;
}

/// The graph runs every 20 ms, as a compositor's does: what is due goes when the stream can
/// take it (after a new format, once a buffer is back), and a buffer queued while the consumer
/// was still busy with the cycle before reaches it in the next (a cycle with nothing new sends
/// nothing).
static void on_timer(void *data, uint64_t expirations) {
    struct producer *p = data;
    (void)expirations;
    if (p->streaming) pw_stream_trigger_process(p->stream);
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
};

static void command(struct producer *p, char *line) {
    int x, y, w, h;
    unsigned rgb;
    if (sscanf(line, "fill %x", &rgb) == 1) {
        fill(p, 0, 0, (int)p->width, (int)p->height, rgb);
        p->whole = p->picture_due = 1;
    } else if (sscanf(line, "rect %d %d %d %d %x", &x, &y, &w, &h, &rgb) == 5) {
        fill(p, x, y, w, h, rgb);
        damage(p, x, y, w, h);
        p->picture_due = 1;
    } else if (sscanf(line, "sneak %d %d %d %d %x", &x, &y, &w, &h, &rgb) == 5) {
        fill(p, x, y, w, h, rgb);
    } else if (sscanf(line, "cursor %d %d %x", &x, &y, &rgb) == 3) {
        p->bitmap_due = !p->cursor_visible || rgb != p->cursor_colour;
        p->cursor_visible = 1;
        p->cursor_x = x;
        p->cursor_y = y;
        p->cursor_colour = rgb;
        p->cursor_due = 1;
    } else if (strncmp(line, "hide", 4) == 0) {
        p->cursor_visible = 0;
        p->cursor_due = p->bitmap_due = 1;
    } else if (strncmp(line, "frame", 5) == 0) {
        p->send_due = 1;
        if (p->streaming) pw_stream_trigger_process(p->stream);
    } else if (sscanf(line, "size %d %d", &w, &h) == 2 && w > 0 && h > 0) {
        free(p->screen);
        p->width = (uint32_t)w;
        p->height = (uint32_t)h;
        p->screen = calloc((size_t)w * (size_t)h, 4);
        fill(p, 0, 0, w, h, 0x808080);
        uint8_t buffer[512];
        struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
        const struct spa_pod *params[1] = { format_param(p, &b, SPA_PARAM_EnumFormat) };
        pw_stream_update_params(p->stream, params, 1);
    } else if (strncmp(line, "load ", 5) == 0) {
        FILE *f = fopen(line + 5, "rb");
        size_t want = (size_t)p->width * p->height * 4;
        if (!f || fread(p->screen, 1, want, f) != want) fprintf(stderr, "cannot load %s\n", line + 5);
        if (f) fclose(f);
        for (size_t i = 0; i < (size_t)p->width * p->height; i++) p->screen[i] |= 0xFF000000u;
        p->whole = p->picture_due = 1;
    } else if (line[0]) {
        fprintf(stderr, "unknown command: %s\n", line);
    }
}

static void on_fifo(void *data, int fd, uint32_t mask) {
    struct producer *p = data;
    (void)mask;
    ssize_t n = read(fd, p->line + p->used, sizeof p->line - 1 - p->used);
    if (n <= 0) return;
    p->used += (size_t)n;
    p->line[p->used] = 0;
    char *start = p->line, *end;
    while ((end = strchr(start, '\n')) != NULL) {
        *end = 0;
        command(p, start);
        start = end + 1;
    }
    p->used = strlen(start);
    memmove(p->line, start, p->used);
    if (p->used == sizeof p->line - 1) p->used = 0;  // a line too long: dropped
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s NAME WIDTH HEIGHT FIFO\n", argv[0]);
        return 64;
    }
    struct producer p = { 0 };
    p.width = (uint32_t)atoi(argv[2]);
    p.height = (uint32_t)atoi(argv[3]);
    p.screen = calloc((size_t)p.width * p.height, 4);
    fill(&p, 0, 0, (int)p.width, (int)p.height, 0x808080);
    // Kept open for writing too, so the FIFO never reads as ended between the test's writes.
    p.fifo = open(argv[4], O_RDONLY | O_NONBLOCK);
    p.fifo_writer = open(argv[4], O_WRONLY);
    if (p.fifo < 0 || p.fifo_writer < 0) {
        fprintf(stderr, "%s: %s\n", argv[4], strerror(errno));
        return 66;
    }
    pw_init(&argc, &argv);
    p.main = pw_main_loop_new(NULL);
    struct pw_loop *loop = pw_main_loop_get_loop(p.main);
    pw_loop_add_io(loop, p.fifo, SPA_IO_IN, false, on_fifo, &p);
    struct spa_source *timer = pw_loop_add_timer(loop, on_timer, &p);
    struct timespec every = { 0, 20 * 1000 * 1000 };
    pw_loop_update_timer(loop, timer, &every, &every, false);
    p.stream = pw_stream_new_simple(loop, argv[1], pw_properties_new(
        PW_KEY_MEDIA_CLASS, "Video/Source", PW_KEY_NODE_NAME, argv[1], PW_KEY_MEDIA_TYPE, "Video", NULL), &stream_events, &p);
    uint8_t buffer[512];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1] = { format_param(&p, &b, SPA_PARAM_EnumFormat) };
    if (pw_stream_connect(p.stream, PW_DIRECTION_OUTPUT, PW_ID_ANY, PW_STREAM_FLAG_DRIVER | PW_STREAM_FLAG_MAP_BUFFERS, params, 1) < 0) {
        fprintf(stderr, "cannot connect the stream\n");
        return 69;
    }
    pw_main_loop_run(p.main);
    pw_stream_destroy(p.stream);
    pw_main_loop_destroy(p.main);
    pw_deinit();
    return 0;
}
