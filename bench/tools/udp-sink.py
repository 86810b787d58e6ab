#!/usr/bin/env python3
"""A UDP sink for bench/audio.sh: receives and drops every datagram sent to 127.0.0.1 ports
BASE_PORT to BASE_PORT+3 (a sender's RTP and RTCP, video and audio), so that its sends succeed:
a send refused (ICMP port unreachable) is not a sent frame.

    udp-sink.py BASE_PORT

Prints nothing; runs until SIGTERM, then exits 0.
"""
import select
import signal
import socket
import sys

base = int(sys.argv[1])
socks = []
for p in range(base, base + 4):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", p))
    socks.append(s)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    for s in select.select(socks, [], [])[0]:
        s.recv(65536)
