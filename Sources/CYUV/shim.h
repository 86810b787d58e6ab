// CYUV: libyuv (Debian's libyuv-dev ships no .pc file, so the module links "yuv" by name).
#pragma once
#include <libyuv/convert.h>
#include <libyuv/convert_from_argb.h>
#include <libyuv/planar_functions.h>
#include <libyuv/scale.h>
#include <libyuv/compare.h>
