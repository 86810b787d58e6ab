// libsrtp2: SRTP and SRTCP (RFC 3711) for DTLS-SRTP sessions.
#include <srtp2/srtp.h>

// A macro in libsrtp2's header.
static inline void shim_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(srtp_crypto_policy_t *p) {
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(p);
}
