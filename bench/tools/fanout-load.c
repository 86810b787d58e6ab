/*
 * fanout-load: plays N room viewers cheaply, for Scripts/bench-fanout.
 *
 * Each viewer is one UDP socket connected to the relay that speaks the room protocol
 * (docs/PROTOCOL.md, version 3) like `screenshare watch --room` does on the wire — a DTLS 1.2
 * handshake (OpenSSL, memory BIOs), then inside it: join, subscribe to the
 * screen stream of the first peer that publishes one, ping every second, an RTCP receiver
 * report (RR + SDES CNAME, with LSR/DLSR from the forwarded sender reports) every second,
 * leave at the end — but decodes nothing: it only counts the RTP it receives, from the SRTP
 * headers (in clear), without decrypting the payloads (the relay's cost is what is measured;
 * its RTCP, SRTCP here, is opened and ours protected with screenshare's own SRTP,
 * Sources/COpenSSL/srtp_evp.c, compiled in). All sockets are served
 * by one thread (epoll + recvmmsg), so 200 viewers cost a few percent of a core.
 *
 *   fanout-load -s HOST:PORT -r ROOM -n N [-d SECONDS] [-p PEER] [-j JOINS_PER_S]
 *               [-k SECONDS] [-b RCVBUF_BYTES]
 *
 *   -p PEER  subscribe to this peer id instead of learning the publisher from welcome,
 *            peer_joined and streams messages
 *   -j       how many viewers start joining per second (default 100)
 *   -k S     viewer 0 sends a PLI every S seconds (keyframe bursts; default: never)
 *   -b       SO_RCVBUF of each viewer socket (default 4 MiB; SO_RCVBUFFORCE when permitted)
 *   -d S     stop after S seconds (default: run until SIGINT/SIGTERM)
 *   -w       browsers instead: each viewer POSTs a WHEP offer (recvonly VP8, no audio, no FEC) to
 *            http://HOST:PORT/whep/ROOM, as the room's page does, and then does what a browser
 *            does on the wire: ICE (a STUN binding request with USE-CANDIDATE, MESSAGE-INTEGRITY
 *            and FINGERPRINT, then one every 2.5 s for consent, RFC 7675), DTLS as the client,
 *            SRTP; an RTCP receiver report every second. A refused POST (503: the relay's cap
 *            on sessions still connecting) is sent again after its Retry-After, as the page does.
 *   -f       (with -w) the first picture: each viewer opens its SRTP until its first whole VP8
 *            keyframe arrives, and keeps it; at the end every kept keyframe is decoded (libvpx)
 *            and the JSON says, from each viewer's first POST, when its picture could be shown:
 *            the keyframe's arrival plus that decode's own time (so the decodes, done one after
 *            another here, do not delay each other as they would not on 300 machines)
 *   -c LIST  the SRTP profiles offered, OpenSSL's names joined by ':' (default
 *            SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80, as screenshare offers)
 *
 * stdout: "ready N MS" once every viewer has received RTP (MS since start); "window" when
 * SIGUSR1 marks the start of the measured window; at the end (SIGINT, SIGTERM or -d) one JSON
 * object with totals since the start ("total") and since SIGUSR1 ("window").
 *
 * Counted per viewer: unique RTP packets and bytes, the expected count (highest extended
 * sequence number − first + 1, RFC 3550 A.3), lost = expected − received (sequence gaps that
 * were never filled: no NACKs are sent, so retransmissions cannot hide loss), duplicates (a
 * 4096-packet window), and the kernel's drop count for the socket (SO_RXQ_OVFL): datagrams the
 * viewer's own receive queue overflowed on, i.e. loss caused by this tool, not by the relay.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/hmac.h>
#include <sys/resource.h>
#include <vpx/vp8dx.h>
#include <vpx/vpx_decoder.h>
#include <zlib.h>
#include "srtp_evp.h"

#define VLEN 32
#define BUFSZ 65536
#define WINDOW_BITS 4096

enum { T_JOIN = 1, T_WELCOME = 2, T_LEAVE = 3, T_PING = 4, T_PONG = 5, T_SUBSCRIBE = 7, T_OK = 9, T_ERROR = 10,
       T_PEER_JOINED = 11, T_PEER_LEFT = 12, T_STREAMS = 13, T_RETRY = 17 };
/* Room protocol version 3: every message is DTLS application data (the handshake's
 * HelloVerifyRequest proved the address, so there is no cookie and no padding). */
#define PROTOCOL_VERSION 3
enum { S_POST, S_ICE, S_HANDSHAKE, S_JOINING, S_WAITING, S_SUBSCRIBING, S_SUBSCRIBED };

struct counts {
    uint64_t received, bytes, dups, drops;
    int64_t expected, lost;
};

struct viewer {
    int fd, state;
    SSL *ssl;
    BIO *rbio, *wbio;
    copenssl_srtp *srtp_out, *srtp_in;
    uint32_t id, publisher, ssrc, req, pending_req, media_ssrc;
    uint64_t version, start_ns, next_send_ns, next_ping_ns, next_rr_ns, next_pli_ns;
    /* RTP sequence state (RFC 3550 A.1, without probation) */
    int started;
    int64_t base_ext, max_ext;
    uint64_t received, bytes, dups, drops;
    uint64_t rr_expected_prior, rr_received_prior;
    uint8_t seen[WINDOW_BITS / 8];
    /* last forwarded sender report: NTP middle 32 bits and when it arrived */
    uint32_t lsr;
    uint64_t lsr_arrival_ns;
    /* at SIGUSR1 */
    int w_started;
    int64_t w_max_ext;
    uint64_t w_received, w_bytes, w_dups, w_drops;
    /* WHEP (-w): the POST of the offer, and ICE */
    int http_fd, posts;
    char *http_buf;
    size_t http_len;
    uint64_t post_ns, next_post_ns, next_stun_ns;
    char ufrag[12], pwd[28], remote_ufrag[72], remote_pwd[136];
    /* the first picture (-f): the frame being put together, and the first whole keyframe */
    uint8_t *frame, *keyframe;
    size_t frame_len, keyframe_len;
    int frame_ok;
    uint16_t frame_next;
    uint64_t keyframe_ns;
};

static const char *room_name;
static int whep_mode, first_picture_mode;
static char fingerprint[3 * 32 + 1];
static struct sockaddr_in http_addr;
static char http_host[300];
static uint64_t posts_refused, stun_sent, stun_answered;

static volatile sig_atomic_t stop_requested = 0, window_requested = 0;
static void on_stop(int sig) { (void)sig; stop_requested = 1; }
static void on_usr1(int sig) { (void)sig; window_requested = 1; }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *msg) { fprintf(stderr, "fanout-load: %s\n", msg); exit(1); }

/* srtp_evp.c asks for OpenSSL to be loaded; here it is linked. */
const char *copenssl_load(void) { return NULL; }

static uint64_t gcm_hops;
static const char *srtp_profiles = "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80";
static uint64_t control_sent, control_in, rtcp_in, rtcp_sent, plis_sent, errors_in, send_errors, truncated, handshakes, dtls_failed,
    srtcp_refused;

static void send_bytes(struct viewer *v, const void *b, size_t n) {
    if (send(v->fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) send_errors++;
}

/* Sends what DTLS has to send (a flight, a record). */
static void flush_dtls(struct viewer *v) {
    char *data;
    long n = BIO_get_mem_data(v->wbio, &data);
    if (n > 0) send_bytes(v, data, (size_t)n);
    (void)BIO_reset(v->wbio);
}

/* An RTCP packet, SRTCP-protected (room for the tag and index after it in the buffer). */
static void send_rtcp(struct viewer *v, uint8_t *b, size_t capacity, int n) {
    size_t len = (size_t)n;
    if (!v->srtp_out || copenssl_srtp_protect_rtcp(v->srtp_out, b, capacity, &len) != COPENSSL_SRTP_OK) return;
    send_bytes(v, b, len);
}

static void send_control(struct viewer *v, uint8_t type, uint32_t req, const char *json) {
    uint8_t b[1200];
    size_t n = strlen(json);
    if (n > sizeof b - 8) n = sizeof b - 8;
    b[0] = 'S'; b[1] = 'S'; b[2] = PROTOCOL_VERSION; b[3] = type;
    b[4] = req >> 24; b[5] = req >> 16; b[6] = req >> 8; b[7] = req;
    memcpy(b + 8, json, n);
    n += 8;
    if (!v->ssl || SSL_write(v->ssl, b, (int)n) != (int)n) { send_errors++; ERR_clear_error(); return; }
    flush_dtls(v);
    control_sent++;
}

static SSL_CTX *dtls_ctx;

static int accept_any(X509_STORE_CTX *store, void *arg) { (void)store; (void)arg; return 1; }

/* One client context for all viewers: DTLS 1.2, an ECDSA P-256 key with a self-signed
 * certificate (the relay wants one; it knows peers by their token, not their certificate),
 * the SRTP profiles screenshare offers. */
static void make_dtls_ctx(void) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (!key || !x) die("cannot make a DTLS key");
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -86400);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC, (const unsigned char *)"fanout-load", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    if (X509_sign(x, key, EVP_sha256()) <= 0) die("cannot sign the DTLS certificate");
    unsigned char md[32];
    unsigned int mdlen = 0;
    if (X509_digest(x, EVP_sha256(), md, &mdlen) != 1 || mdlen != 32) die("cannot fingerprint the DTLS certificate");
    for (unsigned int i = 0, at = 0; i < 32; i++) at += (unsigned int)snprintf(fingerprint + at, sizeof fingerprint - at, i ? ":%02X" : "%02X", md[i]);
    dtls_ctx = SSL_CTX_new(DTLS_client_method());
    if (!dtls_ctx || SSL_CTX_set_min_proto_version(dtls_ctx, DTLS1_2_VERSION) != 1 ||
        SSL_CTX_use_certificate(dtls_ctx, x) != 1 || SSL_CTX_use_PrivateKey(dtls_ctx, key) != 1 ||
        SSL_CTX_set_tlsext_use_srtp(dtls_ctx, srtp_profiles) != 0)
        die("cannot set up DTLS");
    SSL_CTX_set_verify(dtls_ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_cert_verify_callback(dtls_ctx, accept_any, NULL);  /* self-signed: trusted as the room's relay */
    SSL_CTX_set_options(dtls_ctx, SSL_OP_NO_QUERY_MTU);
}

static void start_handshake(struct viewer *v) {
    v->ssl = SSL_new(dtls_ctx);
    v->rbio = BIO_new(BIO_s_mem());
    v->wbio = BIO_new(BIO_s_mem());
    if (!v->ssl || !v->rbio || !v->wbio) die("SSL_new");
    BIO_set_mem_eof_return(v->rbio, -1);
    BIO_set_mem_eof_return(v->wbio, -1);
    SSL_set_bio(v->ssl, v->rbio, v->wbio);
    SSL_set_mtu(v->ssl, 1200);
    SSL_set_connect_state(v->ssl);
    SSL_do_handshake(v->ssl);
    flush_dtls(v);
}

/* The handshake ended: SRTP keys from it (RFC 5764 §4.2; we are the client), then the join. */
static void hop_ready(struct viewer *v, uint64_t now) {
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(v->ssl);
    if (!p) { dtls_failed++; return; }
    int gcm = p->id == SRTP_AEAD_AES_128_GCM;
    int k = 16, salt = gcm ? 12 : 14;
    uint8_t m[2 * (16 + 14)], out_key[30], in_key[30];
    if (SSL_export_keying_material(v->ssl, m, (size_t)(2 * (k + salt)), "EXTRACTOR-dtls_srtp", 19, NULL, 0, 0) != 1) {
        dtls_failed++;
        return;
    }
    memcpy(out_key, m, (size_t)k); memcpy(out_key + k, m + 2 * k, (size_t)salt);
    memcpy(in_key, m + k, (size_t)k); memcpy(in_key + k, m + 2 * k + salt, (size_t)salt);
    const char *error = NULL;
    v->srtp_out = copenssl_srtp_new((int)p->id, out_key, out_key + k, &error);
    v->srtp_in = copenssl_srtp_new((int)p->id, in_key, in_key + k, &error);
    if (!v->srtp_out || !v->srtp_in) die(error);
    if (gcm) gcm_hops++;
    handshakes++;
    v->state = whep_mode ? S_SUBSCRIBED : S_JOINING;
    v->next_send_ns = now;
}

/* ---- WHEP (-w): the offer, ICE's checks, the first picture ---- */

static void put32(uint8_t *p, uint32_t x);

static void random_text(char *out, size_t n) {
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
    for (size_t i = 0; i < n; i++) out[i] = abc[random() % 64];
    out[n] = 0;
}

/* POSTs the viewer's offer (a blocking connect on loopback; the answer is read by the loop). */
static void post_offer(struct viewer *v, int index, int ep, uint64_t now) {
    char sdp[1200], req[1800];
    int n = snprintf(sdp, sizeof sdp,
                     "v=0\r\no=- %d 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n"
                     "m=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:%s\r\na=ice-pwd:%s\r\n"
                     "a=fingerprint:sha-256 %s\r\na=setup:actpass\r\na=mid:0\r\na=recvonly\r\na=rtcp-mux\r\n"
                     "a=rtpmap:96 VP8/90000\r\na=rtcp-fb:96 nack\r\na=rtcp-fb:96 nack pli\r\n",
                     index + 1, v->ufrag, v->pwd, fingerprint);
    int m = snprintf(req, sizeof req,
                     "POST /whep/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/sdp\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s", room_name, http_host, n, sdp);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket() for a POST (too many open files?)");
    if (v->posts++ == 0) v->post_ns = now;
    if (connect(fd, (struct sockaddr *)&http_addr, sizeof http_addr) != 0 || send(fd, req, (size_t)m, MSG_NOSIGNAL) != m) {
        close(fd);
        posts_refused++;
        v->next_post_ns = now + 2000000000ull;
        return;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)index | 0x80000000u};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) die("epoll_ctl (POST)");
    v->http_fd = fd;
    v->http_len = 0;
    if (!v->http_buf && !(v->http_buf = malloc(16384))) die("out of memory");
}

/* Copies the value of `key` (to the end of its line) from the answer. */
static int sdp_value(const char *sdp, const char *key, char *out, size_t size) {
    const char *p = strstr(sdp, key);
    if (!p) return 0;
    p += strlen(key);
    size_t n = strcspn(p, "\r\n");
    if (n == 0 || n >= size) return 0;
    memcpy(out, p, n);
    out[n] = 0;
    return 1;
}

/* Reads the answer as it arrives: 201 and an SDP answer, or a refusal (retried after 2 s, as the
 * page does). */
static void on_http(struct viewer *v, int ep, uint64_t now) {
    for (;;) {
        ssize_t got = recv(v->http_fd, v->http_buf + v->http_len, 16383 - v->http_len, MSG_DONTWAIT);
        if (got > 0) { v->http_len += (size_t)got; if (v->http_len < 16383) continue; }
        if (got < 0 && errno == EAGAIN) {
            /* whole once the headers and Content-Length bytes are in */
            v->http_buf[v->http_len] = 0;
            const char *end = strstr(v->http_buf, "\r\n\r\n"), *cl = strcasestr(v->http_buf, "content-length:");
            if (!end || !cl || v->http_len < (size_t)(end + 4 - v->http_buf) + strtoul(cl + 15, NULL, 10)) return;
        }
        break;
    }
    v->http_buf[v->http_len] = 0;
    epoll_ctl(ep, EPOLL_CTL_DEL, v->http_fd, NULL);
    close(v->http_fd);
    v->http_fd = -1;
    int status = v->http_len > 12 ? atoi(v->http_buf + 9) : 0;
    const char *body = strstr(v->http_buf, "\r\n\r\n");
    if (status != 201 || !body || !sdp_value(body, "a=ice-ufrag:", v->remote_ufrag, sizeof v->remote_ufrag) ||
        !sdp_value(body, "a=ice-pwd:", v->remote_pwd, sizeof v->remote_pwd)) {
        posts_refused++;
        v->next_post_ns = now + 2000000000ull;
        return;
    }
    v->state = S_ICE;
    v->next_stun_ns = now;
}

static void put_attr(uint8_t *b, size_t *at, uint16_t type, const void *value, size_t n) {
    b[*at] = (uint8_t)(type >> 8); b[*at + 1] = (uint8_t)type;
    b[*at + 2] = (uint8_t)(n >> 8); b[*at + 3] = (uint8_t)n;
    memcpy(b + *at + 4, value, n);
    size_t padded = (n + 3) & ~(size_t)3;
    memset(b + *at + 4 + n, 0, padded - n);
    *at += 4 + padded;
}

/* A STUN binding request as a controlling ICE agent nominating the pair (RFC 8445 §7.1.1,
 * RFC 8489 §14.5 and §14.7). */
static void send_stun(struct viewer *v) {
    uint8_t b[400];
    size_t at = 20;
    b[0] = 0; b[1] = 1;
    b[4] = 0x21; b[5] = 0x12; b[6] = 0xA4; b[7] = 0x42;
    for (int i = 8; i < 20; i++) b[i] = (uint8_t)random();
    char user[220];
    int n = snprintf(user, sizeof user, "%s:%s", v->remote_ufrag, v->ufrag);
    put_attr(b, &at, 0x0006, user, (size_t)n);
    uint8_t priority[4] = {0x6E, 0x7F, 0x1E, 0xFF}, tiebreaker[8];
    for (int i = 0; i < 8; i++) tiebreaker[i] = (uint8_t)random();
    put_attr(b, &at, 0x0024, priority, 4);
    put_attr(b, &at, 0x802A, tiebreaker, 8);
    put_attr(b, &at, 0x0025, NULL, 0);
    size_t length = at - 20 + 24;
    b[2] = (uint8_t)(length >> 8); b[3] = (uint8_t)length;
    unsigned char mac[20];
    unsigned int maclen = 0;
    HMAC(EVP_sha1(), v->remote_pwd, (int)strlen(v->remote_pwd), b, at, mac, &maclen);
    put_attr(b, &at, 0x0008, mac, 20);
    length = at - 20 + 8;
    b[2] = (uint8_t)(length >> 8); b[3] = (uint8_t)length;
    uint8_t crc[4];
    put32(crc, (uint32_t)crc32(0, b, (uInt)at) ^ 0x5354554Eu);
    put_attr(b, &at, 0x8028, crc, 4);
    send_bytes(v, b, at);
    stun_sent++;
}

/* -f: puts VP8 frames together from the opened RTP until a whole keyframe is there; keeps it. */
static void first_picture_rtp(struct viewer *v, const uint8_t *packet, size_t len, uint64_t now) {
    static uint8_t b[2048];
    if (len > sizeof b || !v->srtp_in) return;
    memcpy(b, packet, len);
    if (copenssl_srtp_unprotect(v->srtp_in, b, &len) != COPENSSL_SRTP_OK) { srtcp_refused++; return; }
    size_t h = 12 + 4 * (size_t)(b[0] & 0x0F);
    if (b[0] & 0x10) { if (h + 4 > len) return; h += 4 + 4 * (size_t)(b[h + 2] << 8 | b[h + 3]); }
    if (b[0] & 0x20) { if (len == 0 || b[len - 1] > len) return; len -= b[len - 1]; }
    if (h >= len) return;
    /* the VP8 payload descriptor (RFC 7741 §4.2) */
    const uint8_t *d = b + h;
    size_t n = len - h, at = 1;
    int start = (d[0] & 0x10) && (d[0] & 0x07) == 0;
    if (d[0] & 0x80) {
        if (n < 2) return;
        uint8_t x = d[1];
        at = 2;
        if (x & 0x80) at += (at < n && (d[at] & 0x80)) ? 2 : 1;
        if (x & 0x40) at += 1;
        if (x & 0x30) at += 1;
    }
    if (at > n) return;
    uint16_t seq = (uint16_t)(b[2] << 8 | b[3]);
    if (start) { v->frame_len = 0; v->frame_ok = 1; }
    else if (!v->frame_ok || seq != v->frame_next) { v->frame_ok = 0; return; }
    v->frame_next = (uint16_t)(seq + 1);
    if (v->frame_len + (n - at) > (4u << 20)) { v->frame_ok = 0; return; }
    if (!v->frame && !(v->frame = malloc(4u << 20))) die("out of memory");
    memcpy(v->frame + v->frame_len, d + at, n - at);
    v->frame_len += n - at;
    if ((b[1] & 0x80) && v->frame_len > 3 && !(v->frame[0] & 1)) {  /* marker: the frame is whole; bit 0 clear: a keyframe */
        v->keyframe = v->frame;
        v->keyframe_len = v->frame_len;
        v->keyframe_ns = now;
        v->frame = NULL;
    }
    if (b[1] & 0x80) v->frame_ok = 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* -f, at the end: decodes each kept keyframe and prints the first-picture times. */
static void print_first_pictures(struct viewer *vs, int n) {
    double *ms = calloc((size_t)n, sizeof *ms), decode_total = 0;
    int decoded = 0, kept = 0;
    unsigned width = 0, height = 0;
    for (int i = 0; i < n; i++) {
        struct viewer *v = &vs[i];
        if (!v->keyframe) continue;
        kept++;
        vpx_codec_ctx_t dec;
        if (vpx_codec_dec_init(&dec, vpx_codec_vp8_dx(), NULL, 0) != VPX_CODEC_OK) die("vpx_codec_dec_init");
        uint64_t t0 = now_ns();
        vpx_codec_iter_t it = NULL;
        vpx_image_t *img = NULL;
        if (vpx_codec_decode(&dec, v->keyframe, (unsigned)v->keyframe_len, NULL, 0) == VPX_CODEC_OK) img = vpx_codec_get_frame(&dec, &it);
        uint64_t took = now_ns() - t0;
        if (img) {
            width = img->d_w; height = img->d_h;
            decode_total += (double)took / 1e6;
            ms[decoded++] = (double)(v->keyframe_ns - v->post_ns + took) / 1e6;
        }
        vpx_codec_destroy(&dec);
    }
    qsort(ms, (size_t)decoded, sizeof *ms, by_value);
    printf(",\"first_picture\":{\"viewers\":%d,\"keyframes\":%d,\"decoded\":%d,\"width\":%u,\"height\":%u,"
           "\"p50_ms\":%.1f,\"p95_ms\":%.1f,\"max_ms\":%.1f,\"min_ms\":%.1f,\"decode_ms_mean\":%.1f}",
           n, kept, decoded, width, height, decoded ? ms[(decoded - 1) / 2] : 0.0,
           decoded ? ms[(int)((decoded - 1) * 0.95 + 0.5)] : 0.0, decoded ? ms[decoded - 1] : 0.0, decoded ? ms[0] : 0.0,
           decoded ? decode_total / decoded : 0.0);
    free(ms);
}

static uint32_t fixed_publisher;

static void send_join(struct viewer *v, int index) {
    char json[256];
    snprintf(json, sizeof json, "{\"name\":\"load-%d\",\"role\":\"viewer\",\"room\":\"%s\"}", index, room_name);
    send_control(v, T_JOIN, v->pending_req, json);
}

static void send_subscribe(struct viewer *v) {
    char json[128];
    snprintf(json, sizeof json, "{\"kinds\":[\"screen\"],\"publisher\":%u}", v->publisher);
    send_control(v, T_SUBSCRIBE, v->pending_req, json);
}

/* The JSON of the relay is compact with sorted keys (JSONEncoder .sortedKeys). Strings in it
 * escape '"', so a literal `"id":` or `"kind":"screen"` can only be a key (or that key and its
 * value), never part of a name. */
static int find_u64(const char *s, const char *end, const char *key, uint64_t *out) {
    size_t k = strlen(key);
    for (const char *p = s; p + k < end; p++) {
        if (memcmp(p, key, k) == 0) {
            char *e;
            unsigned long long v = strtoull(p + k, &e, 10);
            if (e == p + k) return 0;
            *out = v;
            return 1;
        }
    }
    return 0;
}

static const char *find(const char *s, const char *end, const char *needle) {
    size_t k = strlen(needle);
    for (const char *p = s; p + k <= end; p++) if (memcmp(p, needle, k) == 0) return p;
    return NULL;
}

/* In a list of peers (welcome, peer_joined): the id of the first one with a screen stream. */
static int screen_publisher_in_peers(const char *s, const char *end, uint32_t *out) {
    const char *p = find(s, end, "\"id\":");
    while (p) {
        const char *next = find(p + 5, end, "\"id\":");
        const char *seg_end = next ? next : end;
        if (find(p, seg_end, "\"kind\":\"screen\"")) {
            *out = (uint32_t)strtoul(p + 5, NULL, 10);
            return 1;
        }
        p = next;
    }
    return 0;
}

static void on_control(struct viewer *v, const uint8_t *b, size_t n, uint64_t now) {
    control_in++;
    if (n < 8) return;
    uint8_t type = b[3];
    uint32_t req = (uint32_t)b[4] << 24 | (uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7];
    const char *body = (const char *)b + 8, *end = (const char *)b + n;
    uint64_t version;
    if (find_u64(body, end, "\"version\":", &version) && version > v->version) v->version = version;
    uint32_t publisher;
    switch (type) {
    case T_WELCOME: {
        if (v->state != S_JOINING || req != v->pending_req) return;
        uint64_t id;
        if (!find_u64(body, end, "\"peer\":", &id)) return;
        v->id = (uint32_t)id;
        v->state = S_WAITING;
        const char *peers = find(body, end, "\"peers\":");
        if (fixed_publisher) {
            v->publisher = fixed_publisher;
        } else if (!(peers && screen_publisher_in_peers(peers, end, &publisher))) {
            return;  /* wait for peer_joined / streams */
        } else {
            v->publisher = publisher;
        }
        v->state = S_SUBSCRIBING;
        v->pending_req = ++v->req;
        v->next_send_ns = now;  /* sent by the timer pass */
        return;
    }
    case T_PEER_JOINED:
    case T_STREAMS:
        if (v->state != S_WAITING) return;
        if (type == T_PEER_JOINED) {
            if (!screen_publisher_in_peers(body, end, &publisher)) return;
        } else {
            uint64_t peer;
            if (!find(body, end, "\"kind\":\"screen\"") || !find_u64(body, end, "\"peer\":", &peer)) return;
            publisher = (uint32_t)peer;
        }
        if (fixed_publisher && publisher != fixed_publisher) return;
        v->publisher = publisher;
        v->state = S_SUBSCRIBING;
        v->pending_req = ++v->req;
        v->next_send_ns = now;
        return;
    case T_OK:
        if (v->state == S_SUBSCRIBING && req == v->pending_req) v->state = S_SUBSCRIBED;
        return;
    case T_PEER_LEFT: {
        uint64_t peer;
        if (v->state >= S_SUBSCRIBING && find_u64(body, end, "\"peer\":", &peer) && peer == v->publisher) v->state = S_WAITING;
        return;
    }
    case T_ERROR:
        errors_in++;
        if (find(body, end, "\"not_joined\"")) {  /* relay restarted or timed us out: join again */
            v->state = S_JOINING;
            v->pending_req = ++v->req;
            v->next_send_ns = now;
        }
        return;
    default:
        return;
    }
}

static inline int bit(struct viewer *v, int64_t ext) { return v->seen[(ext % WINDOW_BITS) / 8] >> (ext % 8) & 1; }
static inline void set_bit(struct viewer *v, int64_t ext) { v->seen[(ext % WINDOW_BITS) / 8] |= 1 << (ext % 8); }
static inline void clear_bit(struct viewer *v, int64_t ext) { v->seen[(ext % WINDOW_BITS) / 8] &= ~(1 << (ext % 8)); }

static void on_rtp(struct viewer *v, const uint8_t *b, size_t n) {
    if (n < 12) return;
    uint16_t seq = (uint16_t)(b[2] << 8 | b[3]);
    uint32_t ssrc = (uint32_t)b[8] << 24 | (uint32_t)b[9] << 16 | (uint32_t)b[10] << 8 | b[11];
    if (!v->started || ssrc != v->media_ssrc) {  /* first packet, or the publisher restarted */
        v->started = 1;
        v->media_ssrc = ssrc;
        v->base_ext = v->max_ext = (int64_t)seq + 65536;  /* room to go back */
        memset(v->seen, 0, sizeof v->seen);
        set_bit(v, v->max_ext);
        v->received++;
        v->bytes += n;
        v->rr_expected_prior = v->rr_received_prior = 0;
        return;
    }
    int16_t delta = (int16_t)(seq - (uint16_t)v->max_ext);
    int64_t ext = v->max_ext + delta;
    if (delta > 0) {
        if (delta >= WINDOW_BITS) memset(v->seen, 0, sizeof v->seen);
        else for (int64_t e = v->max_ext + 1; e <= ext; e++) clear_bit(v, e);
        v->max_ext = ext;
    } else if (v->max_ext - ext >= WINDOW_BITS || ext < v->base_ext) {
        return;  /* too old to tell */
    } else if (bit(v, ext)) {
        v->dups++;
        return;
    }
    set_bit(v, ext);
    v->received++;
    v->bytes += n;
}

static void on_rtcp(struct viewer *v, uint8_t *b, size_t len, uint64_t now) {
    rtcp_in++;
    size_t n = len;
    if (!v->srtp_in || copenssl_srtp_unprotect_rtcp(v->srtp_in, b, &n) != COPENSSL_SRTP_OK) { srtcp_refused++; return; }
    /* a forwarded sender report (first packet of the compound): keep its NTP middle 32 bits */
    if (n >= 28 && b[1] == 200) {
        v->lsr = (uint32_t)b[10] << 24 | (uint32_t)b[11] << 16 | (uint32_t)b[12] << 8 | b[13];
        v->lsr_arrival_ns = now;
    }
}

static void put32(uint8_t *p, uint32_t x) { p[0] = x >> 24; p[1] = x >> 16; p[2] = x >> 8; p[3] = x; }

static void send_rr(struct viewer *v, int index, uint64_t now) {
    uint8_t b[160];
    int64_t expected = v->max_ext - v->base_ext + 1;
    int64_t lost = expected - (int64_t)v->received;
    int64_t exp_int = expected - (int64_t)v->rr_expected_prior, rec_int = (int64_t)v->received - (int64_t)v->rr_received_prior;
    v->rr_expected_prior = (uint64_t)expected;
    v->rr_received_prior = v->received;
    int64_t lost_int = exp_int - rec_int;
    uint8_t fraction = (exp_int > 0 && lost_int > 0) ? (uint8_t)((lost_int << 8) / exp_int) : 0;
    if (lost < 0) lost = 0;
    if (lost > 0x7FFFFF) lost = 0x7FFFFF;
    b[0] = 0x81; b[1] = 201; b[2] = 0; b[3] = 7;
    put32(b + 4, v->ssrc);
    put32(b + 8, v->media_ssrc);
    put32(b + 12, (uint32_t)fraction << 24 | (uint32_t)lost);
    put32(b + 16, (uint32_t)(v->max_ext - 65536));
    put32(b + 20, 0);  /* jitter: not measured */
    uint32_t dlsr = 0;
    if (v->lsr) dlsr = (uint32_t)((now - v->lsr_arrival_ns) * 65536 / 1000000000ull);
    put32(b + 24, v->lsr);
    put32(b + 28, v->lsr ? dlsr : 0);
    /* SDES CNAME */
    char cname[32];
    int len = snprintf(cname, sizeof cname, "load-%d@fanout", index);
    int chunk = 4 + 2 + len + 1;  /* ssrc, type+len, text, END */
    int padded = (chunk + 3) & ~3;
    uint8_t *s = b + 32;
    s[0] = 0x81; s[1] = 202; s[2] = 0; s[3] = (uint8_t)(padded / 4);
    put32(s + 4, v->ssrc);
    s[8] = 1; s[9] = (uint8_t)len;
    memcpy(s + 10, cname, (size_t)len);
    memset(s + 10 + len, 0, (size_t)(padded - chunk + 1));
    send_rtcp(v, b, sizeof b, 32 + 4 + padded);
    rtcp_sent++;
}

static void send_pli(struct viewer *v) {
    uint8_t b[64];
    b[0] = 0x81; b[1] = 206; b[2] = 0; b[3] = 2;
    put32(b + 4, v->ssrc);
    put32(b + 8, v->media_ssrc);
    send_rtcp(v, b, sizeof b, 12);
    plis_sent++;
}

static struct counts total_of(struct viewer *v, int window) {
    struct counts c = {0};
    if (window) {
        if (!v->w_started && !v->started) return c;
        int64_t from = v->w_started ? v->w_max_ext : v->base_ext - 1;
        c.received = v->received - v->w_received;
        c.bytes = v->bytes - v->w_bytes;
        c.dups = v->dups - v->w_dups;
        c.drops = v->drops - v->w_drops;
        c.expected = v->max_ext - from;
    } else {
        if (!v->started) return c;
        c.received = v->received;
        c.bytes = v->bytes;
        c.dups = v->dups;
        c.drops = v->drops;
        c.expected = v->max_ext - v->base_ext + 1;
    }
    c.lost = c.expected - (int64_t)c.received;
    return c;
}

static void print_counts(const char *name, struct viewer *vs, int n, int window, double seconds) {
    struct counts sum = {0};
    uint64_t minr = UINT64_MAX, maxr = 0;
    int with_loss = 0, with_dups = 0;
    for (int i = 0; i < n; i++) {
        struct counts c = total_of(&vs[i], window);
        sum.received += c.received; sum.bytes += c.bytes; sum.dups += c.dups; sum.drops += c.drops;
        sum.expected += c.expected; sum.lost += c.lost;
        if (c.received < minr) minr = c.received;
        if (c.received > maxr) maxr = c.received;
        if (c.lost > 0) with_loss++;
        if (c.dups > 0) with_dups++;
    }
    if (n == 0) minr = 0;
    printf("\"%s\":{\"seconds\":%.3f,\"rtp_packets\":%llu,\"rtp_bytes\":%llu,\"expected\":%lld,\"lost\":%lld,"
           "\"duplicates\":%llu,\"socket_drops\":%llu,\"min_received\":%llu,\"max_received\":%llu,"
           "\"viewers_with_loss\":%d,\"viewers_with_duplicates\":%d,\"loss_percent\":%.4f}",
           name, seconds, (unsigned long long)sum.received, (unsigned long long)sum.bytes, (long long)sum.expected,
           (long long)sum.lost, (unsigned long long)sum.dups, (unsigned long long)sum.drops, (unsigned long long)minr,
           (unsigned long long)maxr, with_loss, with_dups,
           sum.expected > 0 ? 100.0 * (double)sum.lost / (double)sum.expected : 0.0);
}

int main(int argc, char **argv) {
    const char *server = NULL;
    int n = 0, opt, rcvbuf = 4 << 20;
    double duration = 0, joins_per_s = 100, pli_every = 0;
    while ((opt = getopt(argc, argv, "s:r:n:d:p:j:k:b:c:wf")) != -1) {
        switch (opt) {
        case 's': server = optarg; break;
        case 'r': room_name = optarg; break;
        case 'n': n = atoi(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 'p': fixed_publisher = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'j': joins_per_s = atof(optarg); break;
        case 'k': pli_every = atof(optarg); break;
        case 'b': rcvbuf = atoi(optarg); break;
        case 'c': srtp_profiles = optarg; break;
        case 'w': whep_mode = 1; break;
        case 'f': first_picture_mode = 1; break;
        default:
            fprintf(stderr, "usage: fanout-load -s HOST:PORT -r ROOM -n N [-d S] [-p PEER] [-j JOINS_PER_S] [-k S] [-b BYTES] [-c SRTP_PROFILES] [-w [-f]]\n");
            return 2;
        }
    }
    if (!server || !room_name || n <= 0 || joins_per_s <= 0) die("need -s HOST:PORT, -r ROOM and -n N > 0");
    if (strlen(room_name) > 64 || strpbrk(room_name, "\"\\ ")) die("-r: a room name of at most 64 bytes without quotes or spaces");

    char host[256];
    const char *colon = strrchr(server, ':');
    if (!colon || (size_t)(colon - server) >= sizeof host) die("-s: expected HOST:PORT");
    memcpy(host, server, (size_t)(colon - server));
    host[colon - server] = 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai;
    if (getaddrinfo(host[0] ? host : "127.0.0.1", colon + 1, &hints, &ai) != 0) die("cannot resolve the relay address");
    make_dtls_ctx();
    if (whep_mode) {
        memcpy(&http_addr, ai->ai_addr, sizeof http_addr);
        snprintf(http_host, sizeof http_host, "%s", server);
    }
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct viewer *vs = calloc((size_t)n, sizeof *vs);
    if (!vs) die("out of memory");
    uint64_t start = now_ns();
    srandom((unsigned)(start ^ (uint64_t)getpid()));
    int granted_rcvbuf = 0;
    for (int i = 0; i < n; i++) {
        struct viewer *v = &vs[i];
        v->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (v->fd < 0) die("socket() (too many open files? ulimit -n)");
        if (setsockopt(v->fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
            setsockopt(v->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        int one = 1;
        setsockopt(v->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
        if (i == 0) {
            socklen_t len = sizeof granted_rcvbuf;
            getsockopt(v->fd, SOL_SOCKET, SO_RCVBUF, &granted_rcvbuf, &len);
        }
        if (connect(v->fd, ai->ai_addr, ai->ai_addrlen) != 0) die("connect()");
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, v->fd, &e) != 0) die("epoll_ctl");
        v->ssrc = (uint32_t)random() | 1;
        v->req = (uint32_t)(random() & 0xFFFF) + 1;
        v->pending_req = v->req;
        v->state = whep_mode ? S_POST : S_HANDSHAKE;
        v->http_fd = -1;
        random_text(v->ufrag, 8);
        random_text(v->pwd, 24);
        v->start_ns = start + (uint64_t)(i * 1e9 / joins_per_s);
        v->next_post_ns = v->start_ns;
        v->next_send_ns = v->start_ns;
        v->next_ping_ns = v->start_ns + 1000000000ull;
        v->next_rr_ns = v->start_ns + 1000000000ull;
        v->next_pli_ns = UINT64_MAX;
    }
    freeaddrinfo(ai);

    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);

    static uint8_t bufs[VLEN][BUFSZ];
    static char ctrl[VLEN][CMSG_SPACE(sizeof(uint32_t))];
    struct iovec iov[VLEN];
    struct mmsghdr msgs[VLEN];
    for (int k = 0; k < VLEN; k++) {
        iov[k].iov_base = bufs[k];
        iov[k].iov_len = BUFSZ;
    }
    struct epoll_event events[256];
    int ready_printed = 0;
    uint64_t window_start = 0, deadline = duration > 0 ? start + (uint64_t)(duration * 1e9) : UINT64_MAX;

    while (!stop_requested) {
        int ne = epoll_wait(ep, events, 256, 5);
        uint64_t now = now_ns();
        for (int e = 0; e < ne; e++) {
            if (events[e].data.u32 & 0x80000000u) {
                on_http(&vs[events[e].data.u32 & 0x7FFFFFFFu], ep, now);
                continue;
            }
            struct viewer *v = &vs[events[e].data.u32];
            for (;;) {
                for (int k = 0; k < VLEN; k++) {
                    memset(&msgs[k].msg_hdr, 0, sizeof msgs[k].msg_hdr);
                    msgs[k].msg_hdr.msg_iov = &iov[k];
                    msgs[k].msg_hdr.msg_iovlen = 1;
                    msgs[k].msg_hdr.msg_control = ctrl[k];
                    msgs[k].msg_hdr.msg_controllen = sizeof ctrl[k];
                }
                int got = recvmmsg(v->fd, msgs, VLEN, MSG_DONTWAIT, NULL);
                if (got <= 0) break;
                for (int k = 0; k < got; k++) {
                    uint8_t *b = bufs[k];
                    size_t len = msgs[k].msg_len;
                    if (msgs[k].msg_hdr.msg_flags & MSG_TRUNC) truncated++;
                    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[k].msg_hdr); c; c = CMSG_NXTHDR(&msgs[k].msg_hdr, c)) {
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
                            uint32_t d;
                            memcpy(&d, CMSG_DATA(c), sizeof d);
                            if (d > v->drops) v->drops = d;
                        }
                    }
                    if (len < 2) continue;
                    if (b[0] <= 3) {  /* STUN: the relay's answer to a check */
                        if (b[0] == 0x01 && b[1] == 0x01) {
                            stun_answered++;
                            if (v->state == S_ICE) v->state = S_HANDSHAKE;
                        }
                        continue;
                    }
                    if (b[0] >= 20 && b[0] <= 63) {
                        /* DTLS: the handshake, or room messages as application data */
                        if (!v->ssl) continue;
                        BIO_write(v->rbio, b, (int)len);
                        if (v->state == S_HANDSHAKE) {
                            int rc = SSL_do_handshake(v->ssl);
                            flush_dtls(v);
                            if (rc == 1) hop_ready(v, now);
                            else if (SSL_get_error(v->ssl, rc) != SSL_ERROR_WANT_READ) { dtls_failed++; ERR_clear_error(); }
                        }
                        if (v->state != S_HANDSHAKE) {
                            static uint8_t plain[16384];
                            int m;
                            while ((m = SSL_read(v->ssl, plain, sizeof plain)) > 0) on_control(v, plain, (size_t)m, now);
                            ERR_clear_error();
                        }
                        (void)BIO_reset(v->rbio);
                        continue;
                    }
                    else if (b[0] >> 6 == 2 && b[1] >= 192 && b[1] <= 223) on_rtcp(v, b, len, now);
                    else if (b[0] >> 6 == 2) {
                        on_rtp(v, b, len);
                        if (first_picture_mode && !v->keyframe) first_picture_rtp(v, b, len, now);
                    }
                }
                if (got < VLEN) break;
            }
        }
        if (window_requested) {
            window_requested = 0;
            window_start = now;
            for (int i = 0; i < n; i++) {
                struct viewer *v = &vs[i];
                v->w_started = v->started;
                v->w_max_ext = v->max_ext;
                v->w_received = v->received;
                v->w_bytes = v->bytes;
                v->w_dups = v->dups;
                v->w_drops = v->drops;
            }
            printf("window\n");
            fflush(stdout);
        }
        /* timers: (re)transmissions every 300 ms, ping and RR every second, PLI every -k s */
        int receiving = 0;
        for (int i = 0; i < n; i++) {
            struct viewer *v = &vs[i];
            if (now < v->start_ns) continue;
            if (v->state == S_POST) {
                if (v->http_fd < 0 && now >= v->next_post_ns) post_offer(v, i, ep, now);
                continue;
            }
            if (v->state == S_ICE) {
                if (now >= v->next_stun_ns) {
                    send_stun(v);
                    v->next_stun_ns = now + 100000000ull;
                }
                continue;
            }
            if (whep_mode && v->state == S_SUBSCRIBED && now >= v->next_stun_ns) {  /* consent (RFC 7675) */
                send_stun(v);
                v->next_stun_ns = now + 2500000000ull;
            }
            if (v->state == S_HANDSHAKE) {
                struct timeval tv;
                if (!v->ssl) {
                    start_handshake(v);
                } else if (DTLSv1_get_timeout(v->ssl, &tv) == 1 && tv.tv_sec == 0 && tv.tv_usec == 0) {
                    DTLSv1_handle_timeout(v->ssl);
                    flush_dtls(v);
                }
                continue;
            }
            if ((v->state == S_JOINING || v->state == S_SUBSCRIBING) && now >= v->next_send_ns) {
                if (v->state == S_JOINING) send_join(v, i); else send_subscribe(v);
                v->next_send_ns = now + 300000000ull;
            }
            if (!whep_mode && v->state != S_JOINING && now >= v->next_ping_ns) {
                char json[64];
                snprintf(json, sizeof json, "{\"version\":%llu}", (unsigned long long)v->version);
                send_control(v, T_PING, ++v->req, json);
                v->next_ping_ns = now + 1000000000ull;
            }
            if (v->started && now >= v->next_rr_ns) {
                send_rr(v, i, now);
                v->next_rr_ns = now + 1000000000ull;
            }
            if (v->started) {
                receiving++;
                if (i == 0 && pli_every > 0) {
                    if (v->next_pli_ns == UINT64_MAX) v->next_pli_ns = now + (uint64_t)(pli_every * 1e9);
                    if (now >= v->next_pli_ns) {
                        send_pli(v);
                        v->next_pli_ns = now + (uint64_t)(pli_every * 1e9);
                    }
                }
            }
        }
        if (!ready_printed && receiving == n) {
            ready_printed = 1;
            printf("ready %d %llu\n", n, (unsigned long long)((now - start) / 1000000));
            fflush(stdout);
        }
        if (now >= deadline) break;
    }

    uint64_t end = now_ns();
    int joined = 0, subscribed = 0, receiving = 0;
    for (int i = 0; i < n; i++) {
        struct viewer *v = &vs[i];
        joined += v->state > S_JOINING;
        subscribed += v->state == S_SUBSCRIBED;
        receiving += v->started;
        if (!whep_mode && v->state > S_JOINING) send_control(v, T_LEAVE, ++v->req, "{}");
    }
    printf("{\"viewers\":%d,\"gcm_hops\":%llu,\"handshakes\":%llu,\"dtls_failed\":%llu,\"srtcp_refused\":%llu,\"joined\":%d,\"subscribed\":%d,\"receiving\":%d,\"rcvbuf\":%d,", n,
           (unsigned long long)gcm_hops, (unsigned long long)handshakes, (unsigned long long)dtls_failed, (unsigned long long)srtcp_refused, joined, subscribed,
           receiving, granted_rcvbuf);
    print_counts("total", vs, n, 0, (double)(end - start) / 1e9);
    printf(",");
    print_counts("window", vs, n, 1, window_start ? (double)(end - window_start) / 1e9 : 0.0);
    if (first_picture_mode) print_first_pictures(vs, n);
    int in_state[S_SUBSCRIBED + 1] = {0};
    for (int i = 0; i < n; i++) in_state[vs[i].state]++;
    if (whep_mode) printf(",\"posting\":%d,\"checking\":%d,\"handshaking\":%d", in_state[S_POST], in_state[S_ICE], in_state[S_HANDSHAKE]);
    printf(",\"posts_refused\":%llu,\"stun_sent\":%llu,\"stun_answered\":%llu", (unsigned long long)posts_refused,
           (unsigned long long)stun_sent, (unsigned long long)stun_answered);
    printf(",\"control_in\":%llu,\"control_sent\":%llu,\"rtcp_in\":%llu,\"rtcp_sent\":%llu,\"plis_sent\":%llu,"
           "\"errors_in\":%llu,\"send_errors\":%llu,\"truncated\":%llu}\n",
           (unsigned long long)control_in, (unsigned long long)control_sent, (unsigned long long)rtcp_in,
           (unsigned long long)rtcp_sent, (unsigned long long)plis_sent, (unsigned long long)errors_in,
           (unsigned long long)send_errors, (unsigned long long)truncated);
    fflush(stdout);
    return 0;
}
