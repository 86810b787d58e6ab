// sendmmsg(2)/recvmmsg(2) for Swift: Glibc declares them (and struct mmsghdr) only under
// _GNU_SOURCE, which the Swift Glibc module is not built with. Same layout as struct mmsghdr.
#pragma once
#include <sys/socket.h>

typedef struct {
    struct msghdr msg_hdr;
    unsigned int msg_len;
} ss_mmsghdr;

/// sendmmsg(2): sends vlen messages; returns how many were sent, or -1 with errno.
int ss_sendmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags);
/// recvmmsg(2) without a timeout: returns how many were received, or -1 with errno.
int ss_recvmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags);
