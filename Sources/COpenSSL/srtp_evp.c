// SRTP and SRTCP over libcrypto (include/srtp_evp.h). Per packet: one AES-CTR or AES-GCM
// message through a cipher context made once per key, and for AES-CM an HMAC-SHA1 that starts
// from inner and outer SHA-1 states made once per key (RFC 2104's precomputation). Nothing is
// allocated per packet.
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA1_Init/Update/Final: the HMAC precomputation needs them
#include "srtp_evp.h"
#include "shim.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#define STREAMS 32
#define RTP_WINDOW 1024  // packets a resend may lag behind and still be taken (as libsrtp2's window_size)
#define RTCP_WINDOW 128

enum { LABEL_RTP_KEY = 0, LABEL_RTP_AUTH = 1, LABEL_RTP_SALT = 2, LABEL_RTCP_KEY = 3, LABEL_RTCP_AUTH = 4,
       LABEL_RTCP_SALT = 5 };

/// One SSRC's state: RTP's rollover counter and highest sequence number (RFC 3711 §3.3.1), and
/// the replay windows of what arrived; the SRTCP index of what is sent.
struct stream {
    uint32_t ssrc;
    int has_rtp, has_rtcp;
    uint64_t used;             // for replacing the least recently used when the table is full
    int64_t rtp_highest;       // ROC << 16 | highest sequence number
    uint64_t rtp_seen[RTP_WINDOW / 64];
    uint32_t rtcp_next;        // the next SRTCP index sent
    int64_t rtcp_highest;
    uint64_t rtcp_seen[RTCP_WINDOW / 64];
};

/// One kind (RTP or RTCP): its cipher contexts and salt, and for AES-CM its HMAC states.
struct kind {
    EVP_CIPHER_CTX *encrypt, *decrypt;  // AES-CM: one CTR context does both
    uint8_t salt[14];
    SHA_CTX inner, outer;
};

struct copenssl_srtp {
    int gcm;
    size_t tag;  // 10 (HMAC-SHA1-80) or 16 (GCM)
    struct kind rtp, rtcp;
    struct stream streams[STREAMS];
    int count, last;
    uint64_t clock;
};

static inline uint32_t read32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void write32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

int copenssl_srtp_derive(const uint8_t *master_key, const uint8_t *master_salt, size_t salt_length, uint8_t label,
                         uint8_t *out, size_t length) {
    if (copenssl_load() || salt_length > 14 || length > 64) return -1;
    // x = (label || r) XOR salt, r = 0: the label is the 7th octet from the end of the 112-bit
    // salt (a 96-bit salt is padded with zeros, as libsrtp2 does); the IV is x * 2^16.
    uint8_t iv[16] = {0}, zeros[64] = {0};
    memcpy(iv, master_salt, salt_length);
    iv[7] ^= label;
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int n = 0, ok = c && EVP_EncryptInit_ex(c, EVP_aes_128_ctr(), NULL, master_key, iv) == 1 &&
                    EVP_EncryptUpdate(c, out, &n, zeros, (int)length) == 1 && n == (int)length;
    EVP_CIPHER_CTX_free(c);
    OPENSSL_cleanse(iv, sizeof iv);
    return ok ? 0 : -1;
}

/// HMAC's inner and outer states for a 20-byte key (RFC 2104).
static void hmac_states(struct kind *k, const uint8_t *auth_key) {
    uint8_t pad[64];
    memset(pad, 0x36, sizeof pad);
    for (int i = 0; i < 20; i++) pad[i] ^= auth_key[i];
    SHA1_Init(&k->inner);
    SHA1_Update(&k->inner, pad, sizeof pad);
    memset(pad, 0x5c, sizeof pad);
    for (int i = 0; i < 20; i++) pad[i] ^= auth_key[i];
    SHA1_Init(&k->outer);
    SHA1_Update(&k->outer, pad, sizeof pad);
    OPENSSL_cleanse(pad, sizeof pad);
}

static int key_kind(struct kind *k, int gcm, const uint8_t *key, const uint8_t *salt, const uint8_t *auth) {
    memset(k->salt, 0, sizeof k->salt);
    memcpy(k->salt, salt, gcm ? 12 : 14);
    k->encrypt = EVP_CIPHER_CTX_new();
    if (!k->encrypt) return -1;
    if (gcm) {
        k->decrypt = EVP_CIPHER_CTX_new();
        return k->decrypt && EVP_EncryptInit_ex(k->encrypt, EVP_aes_128_gcm(), NULL, key, NULL) == 1 &&
                       EVP_DecryptInit_ex(k->decrypt, EVP_aes_128_gcm(), NULL, key, NULL) == 1
                   ? 0 : -1;
    }
    hmac_states(k, auth);
    return EVP_EncryptInit_ex(k->encrypt, EVP_aes_128_ctr(), NULL, key, NULL) == 1 ? 0 : -1;
}

copenssl_srtp *copenssl_srtp_new_with_session_keys(int profile, const uint8_t *rtp_key, const uint8_t *rtp_salt,
                                                   const uint8_t *rtp_auth, const uint8_t *rtcp_key,
                                                   const uint8_t *rtcp_salt, const uint8_t *rtcp_auth,
                                                   const char **error) {
    if (profile != COPENSSL_SRTP_AES128_CM_SHA1_80 && profile != COPENSSL_SRTP_AEAD_AES_128_GCM) {
        *error = "an SRTP protection profile other than AES_CM_128_HMAC_SHA1_80 and AEAD_AES_128_GCM";
        return NULL;
    }
    if (copenssl_load()) {
        *error = "OpenSSL's libcrypto cannot be loaded";
        return NULL;
    }
    copenssl_srtp *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        *error = "out of memory";
        return NULL;
    }
    ctx->gcm = profile == COPENSSL_SRTP_AEAD_AES_128_GCM;
    ctx->tag = ctx->gcm ? 16 : 10;
    if (key_kind(&ctx->rtp, ctx->gcm, rtp_key, rtp_salt, rtp_auth) != 0 ||
        key_kind(&ctx->rtcp, ctx->gcm, rtcp_key, rtcp_salt, rtcp_auth) != 0) {
        copenssl_srtp_free(ctx);
        *error = "OpenSSL refuses the AES key";
        return NULL;
    }
    return ctx;
}

copenssl_srtp *copenssl_srtp_new(int profile, const uint8_t *master_key, const uint8_t *master_salt, const char **error) {
    size_t salt_length = profile == COPENSSL_SRTP_AEAD_AES_128_GCM ? 12 : 14;
    uint8_t keys[6][20];
    static const uint8_t lengths[6] = {16, 20, 14, 16, 20, 14};
    for (int label = 0; label < 6; label++) {
        if (copenssl_srtp_derive(master_key, master_salt, salt_length, (uint8_t)label, keys[label], lengths[label]) != 0) {
            *error = "OpenSSL's libcrypto cannot be loaded";
            return NULL;
        }
    }
    copenssl_srtp *ctx = copenssl_srtp_new_with_session_keys(profile, keys[LABEL_RTP_KEY], keys[LABEL_RTP_SALT],
                                                             keys[LABEL_RTP_AUTH], keys[LABEL_RTCP_KEY],
                                                             keys[LABEL_RTCP_SALT], keys[LABEL_RTCP_AUTH], error);
    OPENSSL_cleanse(keys, sizeof keys);
    return ctx;
}

void copenssl_srtp_free(copenssl_srtp *ctx) {
    if (!ctx) return;
    EVP_CIPHER_CTX_free(ctx->rtp.encrypt);
    EVP_CIPHER_CTX_free(ctx->rtp.decrypt);
    EVP_CIPHER_CTX_free(ctx->rtcp.encrypt);
    EVP_CIPHER_CTX_free(ctx->rtcp.decrypt);
    OPENSSL_cleanse(ctx, sizeof *ctx);
    free(ctx);
}

/// The stream of `ssrc`, made (replacing the least recently used) if it has none.
static struct stream *stream_of(copenssl_srtp *ctx, uint32_t ssrc) {
    ctx->clock++;
    struct stream *s = &ctx->streams[ctx->last];
    if (ctx->count > 0 && s->ssrc == ssrc) {
        s->used = ctx->clock;
        return s;
    }
    int oldest = 0;
    for (int i = 0; i < ctx->count; i++) {
        if (ctx->streams[i].ssrc == ssrc) {
            ctx->last = i;
            ctx->streams[i].used = ctx->clock;
            return &ctx->streams[i];
        }
        if (ctx->streams[i].used < ctx->streams[oldest].used) oldest = i;
    }
    int i = ctx->count < STREAMS ? ctx->count++ : oldest;
    s = &ctx->streams[i];
    memset(s, 0, sizeof *s);
    s->ssrc = ssrc;
    s->used = ctx->clock;
    ctx->last = i;
    return s;
}

/// The index (ROC << 16 | SEQ) of `seq` nearest the highest so far (RFC 3711 §3.3.1); -1 for a
/// sequence number from before the stream's first rollover counter.
static int64_t estimate(const struct stream *s, uint16_t seq) {
    if (!s->has_rtp) return seq;
    int64_t roc = s->rtp_highest >> 16, highest = s->rtp_highest & 0xFFFF;
    if (highest < 32768) {
        if (seq - highest > 32768) roc--;
    } else if (highest - 32768 > seq) {
        roc++;
    }
    return roc < 0 ? -1 : roc << 16 | seq;
}

static int window_seen(const uint64_t *bits, size_t size, int64_t highest, int has, int64_t index) {
    if (!has || index > highest) return 0;
    if (highest - index >= (int64_t)size) return 1;
    uint64_t at = (uint64_t)index % size;
    return (int)(bits[at / 64] >> (at % 64) & 1);
}

static void window_mark(uint64_t *bits, size_t size, int64_t *highest, int *has, int64_t index) {
    if (!*has || index > *highest) {
        if (!*has || index - *highest >= (int64_t)size) {
            memset(bits, 0, size / 8);
        } else {
            for (int64_t i = *highest + 1; i < index; i++) {
                uint64_t at = (uint64_t)i % size;
                bits[at / 64] &= ~(1ULL << (at % 64));
            }
        }
        *highest = index;
        *has = 1;
    }
    uint64_t at = (uint64_t)index % size;
    bits[at / 64] |= 1ULL << (at % 64);
}

/// The length of the RTP header (fixed part, CSRCs, extension), or 0 when it is not one.
static size_t rtp_header_length(const uint8_t *b, size_t length) {
    if (length < 12 || b[0] >> 6 != 2) return 0;
    size_t n = 12 + 4 * (size_t)(b[0] & 0x0F);
    if (b[0] & 0x10) {
        if (n + 4 > length) return 0;
        n += 4 + 4 * (size_t)((b[n + 2] << 8) | b[n + 3]);
    }
    return n <= length ? n : 0;
}

/// HMAC-SHA1 of data || trailer (4 bytes, or none) with the kind's key; the first 20 bytes.
static void hmac(const struct kind *k, const uint8_t *data, size_t length, const uint8_t *trailer, uint8_t out[20]) {
    SHA_CTX c = k->inner;
    SHA1_Update(&c, data, length);
    if (trailer) SHA1_Update(&c, trailer, 4);
    SHA1_Final(out, &c);
    c = k->outer;
    SHA1_Update(&c, out, 20);
    SHA1_Final(out, &c);
}

/// AES-CM (RFC 3711 §4.1.1): XORs the keystream at IV = salt·2^16 ⊕ SSRC·2^64 ⊕ index·2^16.
static int aes_cm(const struct kind *k, uint32_t ssrc, uint64_t index, uint8_t *data, size_t length) {
    uint8_t iv[16];
    memcpy(iv, k->salt, 14);
    iv[14] = iv[15] = 0;
    iv[4] ^= (uint8_t)(ssrc >> 24), iv[5] ^= (uint8_t)(ssrc >> 16), iv[6] ^= (uint8_t)(ssrc >> 8), iv[7] ^= (uint8_t)ssrc;
    for (int i = 0; i < 6; i++) iv[8 + i] ^= (uint8_t)(index >> (40 - 8 * i));
    int n = 0;
    return EVP_EncryptInit_ex(k->encrypt, NULL, NULL, NULL, iv) == 1 &&
                   (length == 0 || (EVP_EncryptUpdate(k->encrypt, data, &n, data, (int)length) == 1 && n == (int)length))
               ? 0 : -1;
}

/// AES-GCM (RFC 7714): encrypts or checks and decrypts data in place, with aad (one or two
/// pieces), the tag written to or read from `tag`; the 12-byte IV is salt ⊕ iv_bits.
static copenssl_srtp_status aes_gcm(const struct kind *k, int encrypt, const uint8_t iv_bits[12], const uint8_t *aad,
                                    size_t aad_length, const uint8_t *aad2, size_t aad2_length, uint8_t *data,
                                    size_t length, uint8_t *tag) {
    uint8_t iv[12];
    for (int i = 0; i < 12; i++) iv[i] = k->salt[i] ^ iv_bits[i];
    EVP_CIPHER_CTX *c = encrypt ? k->encrypt : k->decrypt;
    int n = 0;
    if (encrypt) {
        if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, iv) != 1 ||
            EVP_EncryptUpdate(c, NULL, &n, aad, (int)aad_length) != 1 ||
            (aad2_length && EVP_EncryptUpdate(c, NULL, &n, aad2, (int)aad2_length) != 1) ||
            (length && EVP_EncryptUpdate(c, data, &n, data, (int)length) != 1) ||
            EVP_EncryptFinal_ex(c, iv, &n) != 1 || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, tag) != 1)
            return COPENSSL_SRTP_CRYPTO;
        return COPENSSL_SRTP_OK;
    }
    if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, iv) != 1 || EVP_DecryptUpdate(c, NULL, &n, aad, (int)aad_length) != 1 ||
        (aad2_length && EVP_DecryptUpdate(c, NULL, &n, aad2, (int)aad2_length) != 1) ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, 16, tag) != 1)
        return COPENSSL_SRTP_CRYPTO;
    // Decrypted in place only once the tag is known good: GCM's plaintext goes to a copy first.
    uint8_t plain[2048];
    if (length > sizeof plain) return COPENSSL_SRTP_MALFORMED;
    if ((length && EVP_DecryptUpdate(c, plain, &n, data, (int)length) != 1) || EVP_DecryptFinal_ex(c, iv, &n) != 1)
        return COPENSSL_SRTP_AUTH_FAIL;
    memcpy(data, plain, length);
    OPENSSL_cleanse(plain, length);
    return COPENSSL_SRTP_OK;
}

/// RFC 7714 §8.1: the RTP IV before the salt, 00 00 || SSRC || ROC || SEQ (SEQ from the header).
static void gcm_rtp_iv(uint8_t iv[12], uint32_t ssrc, uint32_t roc, const uint8_t *header) {
    iv[0] = iv[1] = 0;
    write32(iv + 2, ssrc);
    write32(iv + 6, roc);
    iv[10] = header[2], iv[11] = header[3];
}

copenssl_srtp_status copenssl_srtp_protect(copenssl_srtp *ctx, uint8_t *b, size_t capacity, size_t *length) {
    size_t len = *length, header = rtp_header_length(b, len);
    if (!header) return COPENSSL_SRTP_MALFORMED;
    if (capacity < len + ctx->tag) return COPENSSL_SRTP_NO_ROOM;
    uint16_t seq = (uint16_t)(b[2] << 8 | b[3]);
    uint32_t ssrc = read32(b + 8);
    struct stream *s = stream_of(ctx, ssrc);
    int64_t index = estimate(s, seq);
    if (index < 0) return COPENSSL_SRTP_REPLAY;
    uint32_t roc = (uint32_t)(index >> 16);
    if (ctx->gcm) {
        uint8_t iv[12];
        gcm_rtp_iv(iv, ssrc, roc, b);
        copenssl_srtp_status status = aes_gcm(&ctx->rtp, 1, iv, b, header, NULL, 0, b + header, len - header, b + len);
        if (status != COPENSSL_SRTP_OK) return status;
    } else {
        if (aes_cm(&ctx->rtp, ssrc, (uint64_t)index, b + header, len - header) != 0) return COPENSSL_SRTP_CRYPTO;
        uint8_t trailer[4], digest[20];
        write32(trailer, roc);
        hmac(&ctx->rtp, b, len, trailer, digest);
        memcpy(b + len, digest, 10);
    }
    if (!s->has_rtp || index > s->rtp_highest) s->rtp_highest = index, s->has_rtp = 1;
    *length = len + ctx->tag;
    return COPENSSL_SRTP_OK;
}

copenssl_srtp_status copenssl_srtp_unprotect(copenssl_srtp *ctx, uint8_t *b, size_t *length) {
    size_t len = *length;
    if (len < 12 + ctx->tag) return COPENSSL_SRTP_MALFORMED;
    size_t body = len - ctx->tag, header = rtp_header_length(b, body);
    if (!header) return COPENSSL_SRTP_MALFORMED;
    uint16_t seq = (uint16_t)(b[2] << 8 | b[3]);
    uint32_t ssrc = read32(b + 8);
    struct stream *s = stream_of(ctx, ssrc);
    int64_t index = estimate(s, seq);
    if (index < 0 || window_seen(s->rtp_seen, RTP_WINDOW, s->rtp_highest, s->has_rtp, index))
        return COPENSSL_SRTP_REPLAY;
    uint32_t roc = (uint32_t)(index >> 16);
    if (ctx->gcm) {
        uint8_t iv[12];
        gcm_rtp_iv(iv, ssrc, roc, b);
        copenssl_srtp_status status = aes_gcm(&ctx->rtp, 0, iv, b, header, NULL, 0, b + header, body - header, b + body);
        if (status != COPENSSL_SRTP_OK) return status;
    } else {
        uint8_t trailer[4], digest[20];
        write32(trailer, roc);
        hmac(&ctx->rtp, b, body, trailer, digest);
        if (CRYPTO_memcmp(digest, b + body, 10) != 0) return COPENSSL_SRTP_AUTH_FAIL;
        if (aes_cm(&ctx->rtp, ssrc, (uint64_t)index, b + header, body - header) != 0) return COPENSSL_SRTP_CRYPTO;
    }
    window_mark(s->rtp_seen, RTP_WINDOW, &s->rtp_highest, &s->has_rtp, index);
    *length = body;
    return COPENSSL_SRTP_OK;
}

copenssl_srtp_status copenssl_srtp_protect_rtcp(copenssl_srtp *ctx, uint8_t *b, size_t capacity, size_t *length) {
    size_t len = *length;
    if (len < 8 || b[0] >> 6 != 2) return COPENSSL_SRTP_MALFORMED;
    if (capacity < len + 4 + ctx->tag) return COPENSSL_SRTP_NO_ROOM;
    uint32_t ssrc = read32(b + 4);
    struct stream *s = stream_of(ctx, ssrc);
    uint32_t index = s->rtcp_next & 0x7FFFFFFF;
    uint8_t trailer[4];
    write32(trailer, 0x80000000u | index);  // E: encrypted
    if (ctx->gcm) {
        // RFC 7714 §9: header and SSRC, then the E flag and index, are the AAD; the tag follows
        // the ciphertext and the E flag and index follow the tag.
        uint8_t iv[12] = {0};
        write32(iv + 2, ssrc);
        write32(iv + 8, index);
        copenssl_srtp_status status = aes_gcm(&ctx->rtcp, 1, iv, b, 8, trailer, 4, b + 8, len - 8, b + len);
        if (status != COPENSSL_SRTP_OK) return status;
        memcpy(b + len + 16, trailer, 4);
    } else {
        if (aes_cm(&ctx->rtcp, ssrc, index, b + 8, len - 8) != 0) return COPENSSL_SRTP_CRYPTO;
        memcpy(b + len, trailer, 4);
        uint8_t digest[20];
        hmac(&ctx->rtcp, b, len + 4, NULL, digest);
        memcpy(b + len + 4, digest, 10);
    }
    s->rtcp_next = (index + 1) & 0x7FFFFFFF;
    *length = len + 4 + ctx->tag;
    return COPENSSL_SRTP_OK;
}

copenssl_srtp_status copenssl_srtp_unprotect_rtcp(copenssl_srtp *ctx, uint8_t *b, size_t *length) {
    size_t len = *length;
    if (len < 8 + 4 + ctx->tag || b[0] >> 6 != 2) return COPENSSL_SRTP_MALFORMED;
    size_t body = len - 4 - ctx->tag;
    // AES-CM: body | E+index | tag. GCM: body | tag | E+index.
    const uint8_t *trailer = ctx->gcm ? b + len - 4 : b + body;
    uint32_t word = read32(trailer), index = word & 0x7FFFFFFF;
    int encrypted = (int)(word >> 31);
    uint32_t ssrc = read32(b + 4);
    struct stream *s = stream_of(ctx, ssrc);
    if (window_seen(s->rtcp_seen, RTCP_WINDOW, s->rtcp_highest, s->has_rtcp, index)) return COPENSSL_SRTP_REPLAY;
    if (ctx->gcm) {
        uint8_t iv[12] = {0}, saved[4];
        write32(iv + 2, ssrc);
        write32(iv + 8, index);
        memcpy(saved, trailer, 4);
        copenssl_srtp_status status =
            encrypted ? aes_gcm(&ctx->rtcp, 0, iv, b, 8, saved, 4, b + 8, body - 8, b + body)
                      : aes_gcm(&ctx->rtcp, 0, iv, b, body, saved, 4, NULL, 0, b + body);
        if (status != COPENSSL_SRTP_OK) return status;
    } else {
        uint8_t digest[20];
        hmac(&ctx->rtcp, b, body + 4, NULL, digest);
        if (CRYPTO_memcmp(digest, b + body + 4, 10) != 0) return COPENSSL_SRTP_AUTH_FAIL;
        if (encrypted && aes_cm(&ctx->rtcp, ssrc, index, b + 8, body - 8) != 0) return COPENSSL_SRTP_CRYPTO;
    }
    window_mark(s->rtcp_seen, RTCP_WINDOW, &s->rtcp_highest, &s->has_rtcp, index);
    *length = body;
    return COPENSSL_SRTP_OK;
}

void copenssl_srtp_set_rtcp_index(copenssl_srtp *ctx, uint32_t ssrc, uint32_t index) {
    stream_of(ctx, ssrc)->rtcp_next = index & 0x7FFFFFFF;
}
