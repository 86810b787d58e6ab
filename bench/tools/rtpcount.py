#!/usr/bin/env python3
"""UDP relay that counts what a sender really puts on the wire, for Scripts/bench.

Listens on 127.0.0.1:PORT (RTP) and PORT+1 (RTCP), forwards every datagram unchanged to
127.0.0.1:FWD and FWD+1 (where the independent receiver listens), and on SIGINT/SIGTERM
writes a JSON summary: datagrams and bytes (UDP payload), RTP packets, frames (distinct RTP
timestamps), marker bits, VP8 keyframes, sequence gaps (lost/reordered before the relay),
first/last arrival times, RTCP packets (SR, BYE). Receiver→sender RTCP (RR) is relayed back.
SIGUSR1 closes the measurement window: later datagrams are neither forwarded nor counted
(only tallied in after_window_*), so the receiver sees exactly the measured seconds even if
the sender takes a while to stop. On SIGINT/SIGTERM, before it exits, it sends the receiver
an RTCP BYE (on FWD+1), which makes an ffmpeg receiver end at once and cleanly (at end of
file, outputs complete) instead of waiting for its 10 s read timeout: one SIGINT does not
interrupt ffmpeg's blocking read, and a second one aborts it without writing its trailers.

With FRAMES.tsv, one line per RTP packet with the marker bit (the end of a video frame), at
the moment it was forwarded: "unix_ns rtp_timestamp bytes_of_the_frame" (for the latency
split: sender up to here, receiver after).

    rtpcount.py PORT FWD OUT.json [FRAMES.tsv]
"""
import json
import selectors
import signal
import socket
import struct
import sys
import time


def main():
    port, fwd, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    frames_log = open(sys.argv[4], "w") if len(sys.argv) > 4 else None
    frame_bytes = 0
    sel = selectors.DefaultSelector()
    socks = {}
    for kind, p, f in (("rtp", port, fwd), ("rtcp", port + 1, fwd + 1)):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind(("127.0.0.1", p))
        s.setblocking(False)
        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # our side towards the receiver
        up.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
        up.bind(("127.0.0.1", 0))
        up.connect(("127.0.0.1", f))
        up.setblocking(False)
        socks[kind] = (s, up)
        sel.register(s, selectors.EVENT_READ, (kind, "down"))
        sel.register(up, selectors.EVENT_READ, (kind, "up"))
    stats = {"datagrams": 0, "bytes": 0, "rtp_packets": 0, "frames": 0, "markers": 0, "keyframes": 0,
             "seq_gaps": 0, "lost_packets": 0, "reordered": 0, "payload_types": [], "ssrcs": [],
             "first_arrival": None, "last_arrival": None, "rtcp_packets": 0, "rtcp_bytes": 0,
             "rtcp_sr": 0, "rtcp_bye": 0, "forward_errors": 0, "relayed_back": 0}
    last_ts = None
    last_seq = None
    senders = {}
    stopping = False
    window_open = True

    def on_close(*_):
        nonlocal window_open
        if window_open:
            window_open = False
            stats["window_closed_at"] = time.time()

    def on_signal(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_close)
    stats["after_window_datagrams"] = 0
    stats["after_window_bytes"] = 0
    print("ready", flush=True)
    while not stopping:
        for key, _ in sel.select(timeout=0.2):
            kind, direction = key.data
            s, up = socks[kind]
            while True:
                try:
                    data, addr = (s if direction == "down" else up).recvfrom(65536)
                except BlockingIOError:
                    break
                except OSError:
                    break
                if direction == "up":  # receiver → sender (RTCP RR): send back to the sender
                    if kind in senders:
                        try:
                            s.sendto(data, senders[kind])
                            stats["relayed_back"] += 1
                        except OSError:
                            pass
                    continue
                senders[kind] = addr
                now = time.time()
                if not window_open:
                    stats["after_window_datagrams"] += 1
                    stats["after_window_bytes"] += len(data)
                    continue
                try:
                    up.send(data)
                except OSError:
                    stats["forward_errors"] += 1
                if kind == "rtcp":
                    stats["rtcp_packets"] += 1
                    stats["rtcp_bytes"] += len(data)
                    off = 0
                    while off + 4 <= len(data):  # walk the compound packet
                        pt = data[off + 1]
                        length = (struct.unpack_from("!H", data, off + 2)[0] + 1) * 4
                        if pt == 200:
                            stats["rtcp_sr"] += 1
                            if off + 20 <= len(data):  # NTP time ↔ RTP timestamp of the sender's clock
                                sec, frac, rtp_ts = struct.unpack_from("!III", data, off + 8)
                                stats["last_sr"] = {"ntp_unix_ns": (sec - 2208988800) * 10**9 + (frac * 10**9 >> 32),
                                                    "rtp_ts": rtp_ts, "arrival_unix_ns": time.time_ns()}
                        elif pt == 203:
                            stats["rtcp_bye"] += 1
                        off += length
                    continue
                stats["datagrams"] += 1
                stats["bytes"] += len(data)
                if stats["first_arrival"] is None:
                    stats["first_arrival"] = now
                stats["last_arrival"] = now
                if len(data) < 12 or data[0] >> 6 != 2:
                    continue
                stats["rtp_packets"] += 1
                b0, b1, seq, ts, ssrc = struct.unpack_from("!BBHII", data, 0)
                pt, marker = b1 & 0x7F, b1 >> 7
                if pt not in stats["payload_types"]:
                    stats["payload_types"].append(pt)
                if ssrc not in stats["ssrcs"]:
                    stats["ssrcs"].append(ssrc)
                if last_seq is not None:
                    d = (seq - last_seq) & 0xFFFF
                    if d == 0 or d > 0x8000:
                        stats["reordered"] += 1
                    elif d > 1:
                        stats["seq_gaps"] += 1
                        stats["lost_packets"] += d - 1
                if last_seq is None or 0 < ((seq - last_seq) & 0xFFFF) < 0x8000:
                    last_seq = seq
                if ts != last_ts:
                    stats["frames"] += 1
                    last_ts = ts
                stats["markers"] += marker
                frame_bytes += len(data)
                if marker:
                    if frames_log:
                        frames_log.write(f"{time.time_ns()}\t{ts}\t{frame_bytes}\n")
                    frame_bytes = 0
                # VP8 payload descriptor (RFC 7741) → keyframe bit of the payload header.
                off = 12 + 4 * (b0 & 0x0F)
                if b0 & 0x10:  # header extension
                    if len(data) >= off + 4:
                        off += 4 + 4 * struct.unpack_from("!H", data, off + 2)[0]
                if len(data) > off + 1:
                    d0 = data[off]
                    start, pid = d0 & 0x10, d0 & 0x07
                    p = off + 1
                    if d0 & 0x80:  # X
                        x = data[p]; p += 1
                        if x & 0x80:  # I
                            p += 2 if data[p] & 0x80 else 1
                        if x & 0x40:  # L
                            p += 1
                        if x & 0x30:  # T or K
                            p += 1
                    if start and pid == 0 and len(data) > p and data[p] & 0x01 == 0:
                        stats["keyframes"] += 1
    if frames_log:
        frames_log.close()
    # RTCP BYE (V=2, SC=1, PT=203, length 2) for the last SSRC seen, with the reason "end"
    # (ffmpeg ignores RTP/RTCP datagrams shorter than 12 bytes).
    ssrc = stats["ssrcs"][-1] if stats["ssrcs"] else 0
    try:
        socks["rtcp"][1].send(struct.pack("!BBHIB3s", 0x81, 203, 2, ssrc, 3, b"end"))
        stats["bye_sent_to_receiver"] = True
    except OSError:
        stats["bye_sent_to_receiver"] = False
    if stats["first_arrival"] is not None:
        stats["span_s"] = stats["last_arrival"] - stats["first_arrival"]
    with open(out, "w") as f:
        json.dump(stats, f, indent=1)


if __name__ == "__main__":
    main()
