// The OpenSSL functions Swift calls (DTLS.swift, and the macros in include/shim.h), each
// calling the function of that name in libssl.so.3, opened on first use (CLoadOnUse).
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA1_Init/Update/Final, which srtp_evp.c needs
#include "shim.h"
#include "load_on_use.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <stdarg.h>

#define COPENSSL_STRING2(x) #x
#define COPENSSL_STRING(x) COPENSSL_STRING2(x)

// F(return type, name, (parameters), (arguments)); V for functions that return nothing; H
// written below.
#define COPENSSL_FUNCTIONS(F, V, H)                                                                  \
    F(int, ASN1_INTEGER_set, (ASN1_INTEGER *a, long v), (a, v))                                   \
    F(long, BIO_ctrl, (BIO *bp, int cmd, long larg, void *parg), (bp, cmd, larg, parg))           \
    F(int, BIO_free, (BIO *a), (a))                                                               \
    F(BIO *, BIO_new, (const BIO_METHOD *type), (type))                                           \
    F(BIO *, BIO_new_mem_buf, (const void *buf, int len), (buf, len))                             \
    F(const BIO_METHOD *, BIO_s_mem, (void), ())                                                  \
    F(int, BIO_write, (BIO *b, const void *data, int dlen), (b, data, dlen))                      \
    F(int, CRYPTO_memcmp, (const void *a, const void *b, size_t len), (a, b, len))                \
    F(const SSL_METHOD *, DTLS_method, (void), ())                                                \
    V(DTLS_set_timer_cb, (SSL *s, DTLS_timer_cb cb), (s, cb))                                     \
    V(ERR_clear_error, (void), ())                                                                \
    V(ERR_error_string_n, (unsigned long e, char *buf, size_t len), (e, buf, len))                \
    F(unsigned long, ERR_get_error, (void), ())                                                   \
    F(int, EVP_CIPHER_CTX_ctrl, (EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr), (ctx, type, arg, ptr)) \
    V(EVP_CIPHER_CTX_free, (EVP_CIPHER_CTX *c), (c))                                              \
    F(EVP_CIPHER_CTX *, EVP_CIPHER_CTX_new, (void), ())                                           \
    F(int, EVP_DecryptFinal_ex, (EVP_CIPHER_CTX *ctx, unsigned char *outm, int *outl), (ctx, outm, outl)) \
    F(int, EVP_DecryptInit_ex,                                                                    \
      (EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key,     \
       const unsigned char *iv),                                                                  \
      (ctx, cipher, impl, key, iv))                                                               \
    F(int, EVP_DecryptUpdate,                                                                     \
      (EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl),     \
      (ctx, out, outl, in, inl))                                                                  \
    F(int, EVP_EncryptFinal_ex, (EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl), (ctx, out, outl)) \
    F(int, EVP_EncryptInit_ex,                                                                    \
      (EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *impl, const unsigned char *key,     \
       const unsigned char *iv),                                                                  \
      (ctx, cipher, impl, key, iv))                                                               \
    F(int, EVP_EncryptUpdate,                                                                     \
      (EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl),     \
      (ctx, out, outl, in, inl))                                                                  \
    V(EVP_PKEY_free, (EVP_PKEY *pkey), (pkey))                                                    \
    H(EVP_PKEY_Q_keygen)                                                                          \
    F(const EVP_MD *, EVP_sha256, (void), ())                                                     \
    F(const EVP_CIPHER *, EVP_aes_128_ctr, (void), ())                                            \
    F(const EVP_CIPHER *, EVP_aes_128_gcm, (void), ())                                            \
    V(OPENSSL_cleanse, (void *ptr, size_t len), (ptr, len))                                       \
    F(EVP_PKEY *, PEM_read_bio_PrivateKey, (BIO *out, EVP_PKEY **x, pem_password_cb *cb, void *u), \
      (out, x, cb, u))                                                                            \
    F(X509 *, PEM_read_bio_X509, (BIO *out, X509 **x, pem_password_cb *cb, void *u), (out, x, cb, u)) \
    F(int, PEM_write_bio_PrivateKey,                                                              \
      (BIO *out, const EVP_PKEY *x, const EVP_CIPHER *enc, const unsigned char *kstr, int klen,   \
       pem_password_cb *cb, void *u),                                                             \
      (out, x, enc, kstr, klen, cb, u))                                                           \
    F(int, PEM_write_bio_X509, (BIO *out, const X509 *x), (out, x))                               \
    F(int, SHA1_Final, (unsigned char *md, SHA_CTX *c), (md, c))                                  \
    F(int, SHA1_Init, (SHA_CTX *c), (c))                                                          \
    F(int, SHA1_Update, (SHA_CTX *c, const void *data, size_t len), (c, data, len))               \
    F(int, SSL_CTX_check_private_key, (const SSL_CTX *ctx), (ctx))                                \
    F(long, SSL_CTX_ctrl, (SSL_CTX *ctx, int cmd, long larg, void *parg), (ctx, cmd, larg, parg)) \
    V(SSL_CTX_free, (SSL_CTX *ctx), (ctx))                                                        \
    F(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *meth), (meth))                                   \
    F(int, SSL_CTX_set_cipher_list, (SSL_CTX *ctx, const char *str), (ctx, str))                  \
    V(SSL_CTX_set_cookie_generate_cb,                                                             \
      (SSL_CTX *ctx, int (*cb)(SSL *ssl, unsigned char *cookie, unsigned int *cookie_len)),       \
      (ctx, cb))                                                                                  \
    V(SSL_CTX_set_cookie_verify_cb,                                                               \
      (SSL_CTX *ctx, int (*cb)(SSL *ssl, const unsigned char *cookie, unsigned int cookie_len)),  \
      (ctx, cb))                                                                                  \
    F(uint64_t, SSL_CTX_set_options, (SSL_CTX *ctx, uint64_t op), (ctx, op))                      \
    F(int, SSL_CTX_set_tlsext_use_srtp, (SSL_CTX *ctx, const char *profiles), (ctx, profiles))    \
    V(SSL_CTX_set_verify, (SSL_CTX *ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback)) \
    F(int, SSL_CTX_use_PrivateKey, (SSL_CTX *ctx, EVP_PKEY *pkey), (ctx, pkey))                   \
    F(int, SSL_CTX_use_certificate, (SSL_CTX *ctx, X509 *x), (ctx, x))                            \
    F(long, SSL_ctrl, (SSL *ssl, int cmd, long larg, void *parg), (ssl, cmd, larg, parg))         \
    F(int, SSL_do_handshake, (SSL *s), (s))                                                       \
    F(int, SSL_export_keying_material,                                                            \
      (SSL *s, unsigned char *out, size_t olen, const char *label, size_t llen,                   \
       const unsigned char *context, size_t contextlen, int use_context),                         \
      (s, out, olen, label, llen, context, contextlen, use_context))                              \
    V(SSL_free, (SSL *ssl), (ssl))                                                                \
    F(X509 *, SSL_get1_peer_certificate, (const SSL *s), (s))                                     \
    F(int, SSL_get_error, (const SSL *s, int ret_code), (s, ret_code))                            \
    F(SRTP_PROTECTION_PROFILE *, SSL_get_selected_srtp_profile, (SSL *s), (s))                    \
    F(SSL *, SSL_new, (SSL_CTX *ctx), (ctx))                                                      \
    F(int, SSL_read, (SSL *ssl, void *buf, int num), (ssl, buf, num))                             \
    V(SSL_set_accept_state, (SSL *s), (s))                                                        \
    V(SSL_set_bio, (SSL *s, BIO *rbio, BIO *wbio), (s, rbio, wbio))                               \
    V(SSL_set_connect_state, (SSL *s), (s))                                                       \
    F(int, SSL_shutdown, (SSL *s), (s))                                                           \
    F(int, SSL_write, (SSL *ssl, const void *buf, int num), (ssl, buf, num))                      \
    F(int, X509_NAME_add_entry_by_txt,                                                            \
      (X509_NAME *name, const char *field, int type, const unsigned char *bytes, int len, int loc, \
       int set),                                                                                  \
      (name, field, type, bytes, len, loc, set))                                                  \
    F(int, X509_check_private_key, (const X509 *x509, const EVP_PKEY *pkey), (x509, pkey))        \
    F(int, X509_digest, (const X509 *data, const EVP_MD *type, unsigned char *md, unsigned int *len), \
      (data, type, md, len))                                                                      \
    V(X509_free, (X509 *a), (a))                                                                  \
    F(ASN1_INTEGER *, X509_get_serialNumber, (X509 *x), (x))                                      \
    F(X509_NAME *, X509_get_subject_name, (const X509 *a), (a))                                   \
    F(ASN1_TIME *, X509_getm_notAfter, (const X509 *x), (x))                                      \
    F(ASN1_TIME *, X509_getm_notBefore, (const X509 *x), (x))                                     \
    F(ASN1_TIME *, X509_gmtime_adj, (ASN1_TIME *s, long adj), (s, adj))                           \
    F(X509 *, X509_new, (void), ())                                                               \
    F(int, X509_set_issuer_name, (X509 *x, const X509_NAME *name), (x, name))                     \
    F(int, X509_set_pubkey, (X509 *x, EVP_PKEY *pkey), (x, pkey))                                 \
    F(int, X509_set_version, (X509 *x, long version), (x, version))                               \
    F(int, X509_sign, (X509 *x, EVP_PKEY *pkey, const EVP_MD *md), (x, pkey, md))

LOAD_ON_USE_LIBRARY(COPENSSL_FUNCTIONS, "libssl.so." COPENSSL_STRING(OPENSSL_VERSION_MAJOR), "OpenSSL for DTLS", copenssl_load)

// Variadic: EVP_EC_gen in shim.h is `EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve)`, so it is
// called with the one argument an "EC" key takes.
__attribute__((visibility("hidden"))) EVP_PKEY *EVP_PKEY_Q_keygen(OSSL_LIB_CTX *libctx, const char *propq, const char *type, ...) {
    load_on_use_ensure();
    va_list list;
    va_start(list, type);
    const char *curve = va_arg(list, const char *);
    va_end(list);
    return LOAD_ON_USE_CALL(EVP_PKEY_Q_keygen)(libctx, propq, type, curve);
}
