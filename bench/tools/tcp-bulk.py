#!/usr/bin/env python3
"""One TCP bulk flow, for the network matrix's shared-bottleneck cell (issue 38).

    tcp-bulk.py serve HOST PORT SECONDS   receive and discard; a JSON line a second: {"t", "kbps"}
    tcp-bulk.py send HOST PORT SECONDS    send as fast as the connection takes (the kernel's
                                          congestion control: cubic) for SECONDS
"""
import json, socket, sys, time


def serve(host, port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(1)
    print(json.dumps({"event": "listening", "port": port}), flush=True)
    s.settimeout(seconds)
    c, _ = s.accept()
    c.settimeout(1.0)
    t0 = time.monotonic()
    second, got = 1, 0
    while time.monotonic() - t0 < seconds:
        try:
            data = c.recv(65536)
            if not data:
                break
            got += len(data)
        except socket.timeout:
            pass
        now = time.monotonic() - t0
        while now >= second:
            print(json.dumps({"event": "second", "t": second, "kbps": round(got * 8 / 1000)}), flush=True)
            got = 0
            second += 1
    c.close()


def send(host, port, seconds):
    c = socket.create_connection((host, port), timeout=10)
    block = b"\0" * 65536
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.send(block)
    c.close()


if __name__ == "__main__":
    mode, host, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    {"serve": serve, "send": send}[mode](host, port, seconds)
