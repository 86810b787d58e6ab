#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include "socket_batch.h"

#define SAME(field, real) \
    _Static_assert(offsetof(ss_mmsghdr, field) == offsetof(struct mmsghdr, real), #field " differs from struct mmsghdr")
SAME(msg_hdr.msg_name, msg_hdr.msg_name);
SAME(msg_hdr.msg_namelen, msg_hdr.msg_namelen);
SAME(msg_hdr.msg_iov, msg_hdr.msg_iov);
SAME(msg_hdr.msg_iovlen, msg_hdr.msg_iovlen);
SAME(msg_hdr.msg_control, msg_hdr.msg_control);
SAME(msg_hdr.msg_controllen, msg_hdr.msg_controllen);
SAME(msg_hdr.msg_flags, msg_hdr.msg_flags);
SAME(msg_len, msg_len);
_Static_assert(sizeof(ss_mmsghdr) == sizeof(struct mmsghdr), "ss_mmsghdr must match struct mmsghdr");

int ss_sendmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags) {
    return sendmmsg(fd, (struct mmsghdr *)msgs, vlen, flags);
}

int ss_recvmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags) {
    return recvmmsg(fd, (struct mmsghdr *)msgs, vlen, flags, NULL);
}

int ss_enable_timestamps(int fd) {
    int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
}

unsigned long long ss_timestamp_ns(const ss_msghdr *h) {
    const struct msghdr *m = (const struct msghdr *)h;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
            struct timespec ts;
            __builtin_memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
        }
    }
    return 0;
}
