// zlib's crc32: STUN's FINGERPRINT attribute (RFC 8489 §14.7).
#include <zlib.h>
