// OpenSSL for DTLS 1.2 with DTLS-SRTP (RFC 5764), opened with dlopen the first time DTLS is
// used, not linked (openssl.c): `start --to` and `watch` of a plain stream never map libssl and
// libcrypto, about 1.7 MB of resident memory. The functions keep OpenSSL's names; each is a
// small function here that calls the loaded library's. Below: functions Swift cannot call
// directly because OpenSSL declares them as macros.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <stddef.h>
#include "srtp_evp.h"

/// Opens libssl and libcrypto (the soname of the headers built against) and finds every function
/// used, once. Returns NULL, or the reason it cannot (dlerror's text, or the missing name).
/// Calling an OpenSSL function before this succeeded loads it too, and ends the process with the
/// reason if it cannot.
const char *copenssl_load(void);

static inline long shim_DTLSv1_get_timeout(SSL *ssl, struct timeval *tv) { return DTLSv1_get_timeout(ssl, tv); }
static inline long shim_DTLSv1_handle_timeout(SSL *ssl) { return DTLSv1_handle_timeout(ssl); }
/// The handshake's retransmission timer: 100 ms first, doubling to OpenSSL's 60 s at most.
/// OpenSSL's own starts at a second, so one flight lost on a lossy Wi-Fi (5 % of datagrams)
/// cost a whole second of a viewer's start; a flight sent again needlessly on a longer round
/// trip costs a few hundred bytes, which the peer drops as a repeat.
static inline unsigned int shim_dtls_timer(SSL *ssl, unsigned int timer_us) {
    (void)ssl;
    if (timer_us == 0) return 100000;
    return timer_us >= 30000000 ? 60000000 : timer_us * 2;
}
static inline void shim_DTLS_set_short_timer(SSL *ssl) { DTLS_set_timer_cb(ssl, shim_dtls_timer); }
static inline long shim_BIO_set_mem_eof_return(BIO *b, long v) { return BIO_set_mem_eof_return(b, v); }
static inline long shim_BIO_get_mem_data(BIO *b, char **p) { return BIO_get_mem_data(b, p); }
static inline long shim_BIO_reset(BIO *b) { return BIO_reset(b); }
static inline EVP_PKEY *shim_EVP_EC_gen_P256(void) { return EVP_EC_gen("P-256"); }
static inline long shim_SSL_set_mtu(SSL *ssl, long mtu) { return SSL_set_mtu(ssl, mtu); }
static inline long shim_SSL_CTX_set_options(SSL_CTX *ctx, uint64_t op) { return (long)SSL_CTX_set_options(ctx, op); }
static inline uint64_t shim_SSL_OP_NO_QUERY_MTU(void) { return SSL_OP_NO_QUERY_MTU; }
static inline long shim_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) { return SSL_CTX_set1_groups_list(ctx, list); }
static inline int shim_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int v) { return (int)SSL_CTX_set_min_proto_version(ctx, v); }
static inline int shim_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int v) { return (int)SSL_CTX_set_max_proto_version(ctx, v); }
static inline int shim_DTLS1_2_VERSION(void) { return DTLS1_2_VERSION; }
static inline int shim_SSL_accept_any_certificate(int preverify, X509_STORE_CTX *ctx) { (void)preverify; (void)ctx; return 1; }
static inline void shim_SSL_CTX_verify_peer_any(SSL_CTX *ctx) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, shim_SSL_accept_any_certificate);
}
static inline uint64_t shim_SSL_OP_COOKIE_EXCHANGE(void) { return SSL_OP_COOKIE_EXCHANGE; }
