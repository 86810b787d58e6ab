// The libsrtp2 functions Swift calls (SRTP.swift, and the macro in include/shim.h), each calling
// the function of that name in libsrtp2.so.1, opened on first use. Hidden, so the library's own
// calls through the global symbol scope never reach these.
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

// libsrtp2's headers name no soname; Debian's libsrtp2-1 (2.x) is this one.
#define CSRTP_SONAME "libsrtp2.so.1"

// F(return type, name, (parameters), (arguments)); V for functions that return nothing.
#define CSRTP_FUNCTIONS(F, V)                                                                     \
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

#define CSRTP_POINTER(ret, name, params, args) static __typeof__(name) *loaded_##name;
#define CSRTP_POINTER_VOID(name, params, args) static __typeof__(name) *loaded_##name;
CSRTP_FUNCTIONS(CSRTP_POINTER, CSRTP_POINTER_VOID)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[512];

static void load(void) {
    void *srtp = dlopen(CSRTP_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!srtp) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
#define CSRTP_FIND(name)                                                                    \
    loaded_##name = (__typeof__(loaded_##name))dlsym(srtp, #name);                          \
    if (!loaded_##name) {                                                                   \
        snprintf(load_error, sizeof load_error, "%s has no function %s", CSRTP_SONAME, #name); \
        return;                                                                             \
    }
#define CSRTP_FIND_F(ret, name, params, args) CSRTP_FIND(name)
#define CSRTP_FIND_V(name, params, args) CSRTP_FIND(name)
    CSRTP_FUNCTIONS(CSRTP_FIND_F, CSRTP_FIND_V)
    loaded = 1;
}

int csrtp_load(char *error, size_t size) {
    pthread_once(&once, load);
    if (!loaded && size > 0) snprintf(error, size, "%s", load_error);
    return loaded;
}

static void load_or_exit(void) {
    pthread_once(&once, load);
    if (loaded) return;
    fprintf(stderr, "screenshare: cannot load libsrtp2: %s\n", load_error);
    abort();
}

#define CSRTP_DEFINE(ret, name, params, args) \
    __attribute__((visibility("hidden"))) ret name params {                         \
        load_or_exit();                       \
        return loaded_##name args;            \
    }
#define CSRTP_DEFINE_VOID(name, params, args) \
    __attribute__((visibility("hidden"))) void name params {                        \
        load_or_exit();                       \
        loaded_##name args;                   \
    }
CSRTP_FUNCTIONS(CSRTP_DEFINE, CSRTP_DEFINE_VOID)
