// sendmmsg(2)/recvmmsg(2) for Swift: Glibc declares them (and struct mmsghdr) only under
// _GNU_SOURCE, which the Swift Glibc module is not built with. This header includes no system
// socket header (that would clash with the Glibc module's declarations); ss_mmsghdr has the
// layout of struct mmsghdr, which socket_batch.c checks field by field at compile time.
#pragma once
#include <stddef.h>

typedef struct {
    void *msg_name;          // struct sockaddr_in *
    unsigned int msg_namelen;
    void *msg_iov;           // struct iovec *
    size_t msg_iovlen;
    void *msg_control;
    size_t msg_controllen;
    int msg_flags;
} ss_msghdr;

typedef struct {
    ss_msghdr msg_hdr;
    unsigned int msg_len;    // bytes sent or received
} ss_mmsghdr;

/// sendmmsg(2): sends vlen messages; returns how many were sent, or -1 with errno.
int ss_sendmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags);
/// recvmmsg(2) without a timeout: returns how many were received, or -1 with errno.
int ss_recvmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags);
/// Asks the kernel to stamp each datagram's arrival (SO_TIMESTAMPNS, CLOCK_REALTIME); 0 or -1.
int ss_enable_timestamps(int fd);
/// The arrival stamp in a received message's control data (ns since the epoch), or 0.
unsigned long long ss_timestamp_ns(const ss_msghdr *h);
/// Control bytes a message needs for the stamp (CMSG_SPACE of a struct timespec, rounded up).
#define SS_TIMESTAMP_CONTROL 64
