// SRTP and SRTCP (RFC 3711; AEAD_AES_128_GCM, RFC 7714) over OpenSSL's libcrypto (srtp_evp.c):
// AES through EVP (AES-NI, VAES where the CPU has them), HMAC-SHA1 on SHA-1 states made once
// per key (SHA-NI). Debian 12's libsrtp2 is built on NSS, which sets up a cipher context for
// every packet (13 µs of the relay's CPU per packet out at 200 viewers, against 7 µs here,
// bench/results/fanout-srtp-*.md), and brings NSS's 2.3 MB with it. Only the packet transforms,
// the key derivation, the rollover counters and the replay windows are written here; every
// cipher and hash is OpenSSL's.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct copenssl_srtp copenssl_srtp;

/// The DTLS-SRTP protection profiles (RFC 5764 §4.1.2, RFC 7714 §14.2).
enum {
    COPENSSL_SRTP_AES128_CM_SHA1_80 = 0x0001,
    COPENSSL_SRTP_AEAD_AES_128_GCM = 0x0007,
};

/// What a transform returns.
typedef enum {
    COPENSSL_SRTP_OK = 0,
    /// Not an RTP/RTCP packet this can read (too short, a header longer than the packet).
    COPENSSL_SRTP_MALFORMED,
    /// The tag is wrong: forged or damaged.
    COPENSSL_SRTP_AUTH_FAIL,
    /// A sequence number or SRTCP index seen before, or older than the replay window.
    COPENSSL_SRTP_REPLAY,
    /// The buffer has no room for the tag (protect).
    COPENSSL_SRTP_NO_ROOM,
    /// OpenSSL failed (it cannot be loaded, or a cipher call returned an error).
    COPENSSL_SRTP_CRYPTO,
} copenssl_srtp_status;

/// A context keyed with a master key (16 bytes) and salt (14 bytes for AES-CM, 12 for GCM),
/// the session keys derived as RFC 3711 §4.3 says (key derivation rate 0). NULL, with the
/// reason in `*error` (static text), when OpenSSL cannot be loaded or the profile is unknown.
copenssl_srtp *copenssl_srtp_new(int profile, const uint8_t *master_key, const uint8_t *master_salt, const char **error);

/// A context keyed with session keys directly (the RFCs' test vectors): RTP then RTCP, each a
/// 16-byte key, a salt (14 or 12 bytes) and, for AES-CM, a 20-byte authentication key.
copenssl_srtp *copenssl_srtp_new_with_session_keys(int profile, const uint8_t *rtp_key, const uint8_t *rtp_salt,
                                                   const uint8_t *rtp_auth, const uint8_t *rtcp_key,
                                                   const uint8_t *rtcp_salt, const uint8_t *rtcp_auth,
                                                   const char **error);

void copenssl_srtp_free(copenssl_srtp *ctx);

/// Protects the RTP packet in buffer[0..<*length] in place (`capacity` bytes are writable) and
/// sets *length to the SRTP length. A packet may be protected again with a sequence number
/// sent before (a resend): it gets the same index.
copenssl_srtp_status copenssl_srtp_protect(copenssl_srtp *ctx, uint8_t *buffer, size_t capacity, size_t *length);
/// Checks and decrypts the SRTP packet in buffer[0..<*length] in place; *length becomes the
/// RTP length. Nothing is changed unless it returns OK.
copenssl_srtp_status copenssl_srtp_unprotect(copenssl_srtp *ctx, uint8_t *buffer, size_t *length);
copenssl_srtp_status copenssl_srtp_protect_rtcp(copenssl_srtp *ctx, uint8_t *buffer, size_t capacity, size_t *length);
copenssl_srtp_status copenssl_srtp_unprotect_rtcp(copenssl_srtp *ctx, uint8_t *buffer, size_t *length);

/// The SRTCP index the next RTCP packet of `ssrc` is protected with (tests: the RFCs' vectors).
void copenssl_srtp_set_rtcp_index(copenssl_srtp *ctx, uint32_t ssrc, uint32_t index);

/// RFC 3711 §4.3.1 with a key derivation rate of 0: `length` bytes of the AES-CM PRF of the
/// master key, at the master salt (`salt_length` 14, or 12 zero-padded) XOR the label. 0 on
/// success.
int copenssl_srtp_derive(const uint8_t *master_key, const uint8_t *master_salt, size_t salt_length, uint8_t label,
                         uint8_t *out, size_t length);
