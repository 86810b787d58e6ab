// libsrtp2: SRTP and SRTCP (RFC 3711) for DTLS-SRTP sessions, opened with dlopen the first time
// SRTP is used, not linked (srtp.c): Debian's libsrtp2 brings NSS with it (about 0.6 MB of
// resident memory in every process). The functions keep libsrtp2's names; each is a small
// function here that calls the loaded library's.
#include <srtp2/srtp.h>
#include <stddef.h>

/// Opens libsrtp2 and finds every function used, once. Returns NULL, or the reason it cannot.
/// Calling a libsrtp2 function before this succeeded loads it too, and ends the process with the
/// reason if it cannot.
const char *csrtp_load(void);

// A macro in libsrtp2's header.
static inline void shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(srtp_crypto_policy_t *p) {
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(p);
}
