#ifndef SCREENSHARE_COLOR_H
#define SCREENSHARE_COLOR_H
#include <stdint.h>

/// BGRX (X11's byte order: B, G, R, unused) → I420, BT.601 studio range, to within rounding of
/// the exact matrix: 15-bit coefficients where libyuv's ARGBToI420 has 8 (its Y is one level
/// off on up to 9 % of a colourful slide's pixels, a 58.7 dB ceiling before any coding).
/// Chroma from the mean of each 2×2 block's colour; an odd last column or row is its own block.
void color_bgrx_to_i420(const uint8_t *src, int src_stride,
                        uint8_t *y, int y_stride, uint8_t *u, int u_stride, uint8_t *v, int v_stride,
                        int width, int height);

#endif
