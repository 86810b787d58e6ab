#ifndef SCREENSHARE_BUILD_INFO_H
#define SCREENSHARE_BUILD_INFO_H

/// What `screenshare --version` prints: the version `git describe` gave when Scripts/* last
/// built (written to Sources/CBuildInfo/version.h, not committed), or "0.1.0~dev" for a plain
/// `swift build` of a tree no script has built.
const char *screenshare_version(void);

#endif
