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
