#!/usr/bin/env python3
"""Records a sender's RTP/RTCP once and replays it, so every receiver of Scripts/bench-watch
decodes the very same packets at the same moments (a live sender's frame count varies from run
to run with the capture's timing, and a receiver's CPU with it).

    rtpreplay.py record PORT FILE    listens on 127.0.0.1:PORT (RTP) and PORT+1 (RTCP), writes
                                     every datagram with its arrival time; "ready" once bound;
                                     ends on SIGINT/SIGTERM
    rtpreplay.py replay FILE FWD     sends them to 127.0.0.1:FWD and FWD+1 with the recorded
                                     spacing; "started" at the first, "done" after the last

FILE: records of (offset_ns: u64, channel: u8, length: u16, datagram), big-endian.
"""
import selectors
import signal
import socket
import struct
import sys
import time

HEADER = struct.Struct("!QBH")


def record(port, path):
    sel = selectors.DefaultSelector()
    for channel in (0, 1):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("127.0.0.1", port + channel))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, channel)
    stopping = False

    def on_signal(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    start = None
    count = 0
    with open(path, "wb") as out:
        print("ready", flush=True)
        while not stopping:
            for key, _ in sel.select(timeout=0.2):
                while True:
                    try:
                        data = key.fileobj.recv(65536)
                    except (BlockingIOError, OSError):
                        break
                    now = time.monotonic_ns()
                    if start is None:
                        start = now
                    out.write(HEADER.pack(now - start, key.data, len(data)))
                    out.write(data)
                    count += 1
    print(f"recorded {count} datagrams", flush=True)


def replay(path, fwd):
    data = open(path, "rb").read()
    records, off = [], 0
    while off + HEADER.size <= len(data):
        at, channel, length = HEADER.unpack_from(data, off)
        off += HEADER.size
        records.append((at, channel, data[off:off + length]))
        off += length
    socks = []
    for channel in (0, 1):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        s.connect(("127.0.0.1", fwd + channel))
        socks.append(s)
    start = time.monotonic_ns()
    print("started", flush=True)
    for at, channel, datagram in records:
        wait = start + at - time.monotonic_ns()
        if wait > 0:
            time.sleep(wait / 1e9)
        try:
            socks[channel].send(datagram)
        except OSError:  # nobody listening on RTCP: refused, ignore
            pass
    print(f"done {len(records)} datagrams", flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "record":
        record(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "replay":
        replay(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
