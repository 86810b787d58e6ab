// The libsrtp2 functions Swift calls (SRTP.swift, and the macro in include/shim.h), each calling
// the function of that name in libsrtp2.so.1, opened on first use (CLoadOnUse).
#include "shim.h"
#include "load_on_use.h"

// libsrtp2's headers name no soname; Debian's libsrtp2-1 (2.x) is this one.
#define CSRTP_SONAME "libsrtp2.so.1"

// F(return type, name, (parameters), (arguments)); V for functions that return nothing.
#define CSRTP_FUNCTIONS(F, V, H)                                                                     \
    F(srtp_err_status_t, srtp_create, (srtp_t *session, const srtp_policy_t *policy), (session, policy)) \
    V(srtp_crypto_policy_set_aes_gcm_128_16_auth, (srtp_crypto_policy_t *p), (p))                 \
    V(srtp_crypto_policy_set_rtp_default, (srtp_crypto_policy_t *p), (p))                         \
    F(srtp_err_status_t, srtp_dealloc, (srtp_t s), (s))                                           \
    F(srtp_err_status_t, srtp_init, (void), ())                                                   \
    F(srtp_err_status_t, srtp_protect, (srtp_t ctx, void *rtp_hdr, int *len_ptr), (ctx, rtp_hdr, len_ptr)) \
    F(srtp_err_status_t, srtp_protect_rtcp, (srtp_t ctx, void *rtcp_hdr, int *pkt_octet_len),    \
      (ctx, rtcp_hdr, pkt_octet_len))                                                             \
    F(srtp_err_status_t, srtp_unprotect, (srtp_t ctx, void *srtp_hdr, int *len_ptr), (ctx, srtp_hdr, len_ptr)) \
    F(srtp_err_status_t, srtp_unprotect_rtcp, (srtp_t ctx, void *srtcp_hdr, int *pkt_octet_len), \
      (ctx, srtcp_hdr, pkt_octet_len))

LOAD_ON_USE_LIBRARY(CSRTP_FUNCTIONS, CSRTP_SONAME, "libsrtp2", csrtp_load)
