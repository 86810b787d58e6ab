#include "build_info.h"

// version.h holds one line, `#define SCREENSHARE_VERSION "…"`, written by Scripts/lib/common.sh
// (write_version_header) from `git describe`; it touches this file when the version changes so
// the build picks it up.
#if __has_include("version.h")
#include "version.h"
#endif

#ifndef SCREENSHARE_VERSION
#define SCREENSHARE_VERSION "0.1.0~dev"
#endif

const char *screenshare_version(void) { return SCREENSHARE_VERSION; }
