// A PipeWire video stream read for screen capture: libpipewire-0.3's SPA format builders are
// macros and variadic functions Swift cannot call, so the stream's negotiation and buffer
// handling are here, behind a small opaque API. The loop runs on the caller's thread
// (ss_pw_iterate, or poll ss_pw_fd): no thread of PipeWire's calls into Swift.
#pragma once
#include <stdint.h>
#include <stddef.h>

typedef struct ss_pw_capture ss_pw_capture;

typedef struct { int32_t x, y; uint32_t width, height; } ss_pw_rect;

/// The pixel layouts negotiated (4 bytes a pixel, in memory order).
enum { SS_PW_BGRX = 0, SS_PW_RGBX = 1, SS_PW_BGRA = 2, SS_PW_RGBA = 3 };

#define SS_PW_MAX_DAMAGE 16

/// The newest picture: valid until ss_pw_release (or the next ss_pw_take).
typedef struct {
    const uint8_t *data;
    int32_t stride;
    uint32_t width, height;
    uint32_t format;
    /// The part of the buffer that is the picture (the whole buffer when the producer gave no crop).
    ss_pw_rect crop;
    /// What changed since the picture taken before: `whole`, or `damage_count` rectangles.
    int whole;
    uint32_t damage_count;
    ss_pw_rect damage[SS_PW_MAX_DAMAGE];
    /// Pictures the producer sent that were replaced by a newer one before they were taken.
    uint32_t skipped;
} ss_pw_frame;

#define SS_PW_MAX_CURSOR 256

/// The pointer as the producer's cursor metadata describes it (the portal's cursor mode
/// "metadata"): where its hot spot is and its image.
typedef struct {
    /// 0 while there is no pointer to draw (none said yet, or its image is empty: hidden).
    int visible;
    /// The hot spot's place in the stream's pixels.
    int32_t x, y;
    /// The hot spot in the image.
    int32_t hot_x, hot_y;
    uint32_t width, height;
    /// Changes with each new image.
    uint32_t serial;
    /// width × height premultiplied ARGB pixels (0xAARRGGBB), row after row; valid until the
    /// next ss_pw_iterate.
    const uint32_t *pixels;
} ss_pw_cursor;

/// Connects to PipeWire through `fd` (the portal's remote; taken, closed with the capture), or
/// to the default remote when `fd` < 0, and to node `node`. NULL on failure (`error` says why).
ss_pw_capture *ss_pw_open(int fd, uint32_t node, char *error, size_t error_size);
/// The descriptor to poll for the loop's events.
int ss_pw_fd(ss_pw_capture *c);
/// Runs the loop: waits up to `timeout_ms` (0: not at all) and dispatches. < 0 once the stream failed.
int ss_pw_iterate(ss_pw_capture *c, int timeout_ms);
/// The pointer (cursor metadata); 1 when it moved, changed its image, or was shown or hidden
/// since the last call, else 0.
int ss_pw_cursor_read(ss_pw_capture *c, ss_pw_cursor *cursor);
/// 1 and the newest picture not taken yet, else 0.
int ss_pw_take(ss_pw_capture *c, ss_pw_frame *frame);
/// 1 while the picture taken is still there to read: a buffer goes away with a new format or
/// the stream's end, and the picture taken with it.
int ss_pw_holds_frame(ss_pw_capture *c);
/// Gives the picture taken back to the producer.
void ss_pw_release(ss_pw_capture *c);
/// NULL while the stream is fine; why it ended otherwise.
const char *ss_pw_error(ss_pw_capture *c);
/// 1 once the stream is streaming.
int ss_pw_streaming(ss_pw_capture *c);
void ss_pw_close(ss_pw_capture *c);
