#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include "socket_batch.h"

_Static_assert(sizeof(ss_mmsghdr) == sizeof(struct mmsghdr), "ss_mmsghdr must match struct mmsghdr");
_Static_assert(offsetof(ss_mmsghdr, msg_len) == offsetof(struct mmsghdr, msg_len), "ss_mmsghdr must match struct mmsghdr");

int ss_sendmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags) {
    return sendmmsg(fd, (struct mmsghdr *)msgs, vlen, flags);
}

int ss_recvmmsg(int fd, ss_mmsghdr *msgs, unsigned int vlen, int flags) {
    return recvmmsg(fd, (struct mmsghdr *)msgs, vlen, flags, NULL);
}
