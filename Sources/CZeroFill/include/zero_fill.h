#ifndef SCREENSHARE_ZERO_FILL_H
#define SCREENSHARE_ZERO_FILL_H

#include <stddef.h>
#include <stdint.h>

/// libvpx's VP8 encoder allocates a token buffer of 24 bytes per pixel (50 MB at 1080p) with
/// vpx_calloc, which is malloc and then memset to zero: every page of it becomes resident when
/// the encoder is made, though a frame's tokens fill a small part of it. This routes libvpx's
/// calls to memset (its GOT entry, nothing else in the process) through a memset that, for a
/// call zeroing at least `threshold` bytes, leaves alone the pages of private anonymous memory
/// that were never touched (neither present nor swapped, per /proc/self/pagemap): they read
/// as zeros already. Everything else is set as memset would (but see
/// zero_fill_set_unread_fill_on_this_thread).
///
/// Returns 0 when installed (or already), else a short reason (libvpx not loaded, no memset
/// relocation found, mprotect refused). Thread-safe; the first call's threshold is kept.
const char *zero_fill_install_for_libvpx(size_t threshold);

/// Bytes the hook did not have to write because their pages were untouched (all calls so far).
uint64_t zero_fill_skipped_bytes(void);

/// While nonzero on this thread, the hook writes every byte (the tests' comparison).
void zero_fill_set_disabled_on_this_thread(int disabled);

/// While nonzero on this thread, a call filling memory with 128 (of any size) also leaves the
/// untouched pages alone, which then read as zeros, not 128: for making a VP8 encoder only.
/// libvpx allocates a post-processing frame for every VP8 codec (Debian builds it with
/// --enable-postproc) and fills it with 128 (3.4 MB resident at 1080p), but an encoder never
/// reads it: only vpx_codec_get_preview_frame (never called here) and libvpx's internal-stats
/// build do. Nothing else in making an encoder fills with 128 (libvpx 1.12's vp8/ and vpx_scale/).
void zero_fill_set_unread_fill_on_this_thread(int on);

/// Bytes of such fills the hook did not write (all calls so far).
uint64_t zero_fill_skipped_unread_bytes(void);

#endif
