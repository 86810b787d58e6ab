#!/usr/bin/env python3
"""whep-load: plays N browser viewers (WHEP) of one room for Scripts/bench-fanout --whep.

Each viewer is a real WebRTC peer (aiortc, from PyPI): it POSTs a recvonly VP8 + Opus offer to
the relay's WHEP endpoint, completes ICE (host candidates on 127.0.0.1 only) and DTLS, and
receives SRTP, as a browser does; the relay does per viewer what it does for a browser (the
payload type and SSRC rewritten, SRTP protection, one datagram at a time). What a browser then
does — decoding 1080p — is left out: N Python decoders would measure this tool, not the relay.
So the receivers' RTP handling is replaced by a counter (after SRTP is removed): no jitter
buffer, no decoder, no NACKs (as fanout-load.c, so retransmissions cannot hide loss).

    whep-load.py URL N [-k SECONDS]

    -k S   viewer 0 sends a PLI every S seconds (keyframe bursts in the window; default: never)

stdout, like fanout-load.c: "ready N MS" once every viewer receives RTP; "window" on SIGUSR1
(the measured window starts); at the end (SIGINT/SIGTERM) one JSON object with totals since
the start ("total") and since SIGUSR1 ("window"): packets, bytes, expected (highest extended
sequence number - first + 1), lost, and the viewers with loss. Sessions are DELETEd at the end.
"""
import asyncio
import json
import signal
import sys
import time
import urllib.request

import aioice.ice
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.rtcrtpreceiver import RTCRtpReceiver

# Offer only 127.0.0.1: the benchmark's traffic stays on loopback.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []


class Counts:
    def __init__(self):
        self.received = 0
        self.bytes = 0
        self.first = None
        self.highest = None  # extended sequence number
        self.ssrc = None
        self.mark = None     # (received, bytes, highest) when the window started

    def add(self, seq, size):
        if self.highest is None:
            self.first = self.highest = seq
        else:
            # Extend the 16-bit number to the one nearest the highest so far (RFC 3550 A.1).
            ext = (self.highest & ~0xFFFF) | seq
            if ext < self.highest - 0x8000:
                ext += 0x10000
            elif ext > self.highest + 0x8000:
                ext -= 0x10000
            self.highest = max(self.highest, ext)
        self.received += 1
        self.bytes += size

    def window(self):
        if self.mark is None or self.highest is None:
            return 0, 0, 0
        received, size, highest = self.mark
        return self.received - received, self.bytes - size, self.highest - highest


COUNTS = {}  # receiver → Counts


async def counting(self, packet, arrival_time_ms=None):
    c = COUNTS.setdefault(self, Counts())
    c.ssrc = packet.ssrc
    c.add(packet.sequence_number, len(packet.payload) + 12)


RTCRtpReceiver._handle_rtp_packet = counting


def post(url, sdp):
    request = urllib.request.Request(url, data=sdp.encode(), method="POST", headers={"Content-Type": "application/sdp"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return r.headers.get("Location"), r.read().decode()


def summary(viewers, name, window, seconds):
    rows = []
    for pc, receiver in viewers:
        c = COUNTS.get(receiver)
        if c is None:
            rows.append((0, 0, 0))
        elif window:
            rows.append(c.window())
        else:
            rows.append((c.received, c.bytes, 0 if c.highest is None else c.highest - c.first + 1))
    received = sum(r[0] for r in rows)
    expected = sum(r[2] for r in rows)
    lost = sum(max(0, r[2] - r[0]) for r in rows)
    return {"seconds": round(seconds, 3), "rtp_packets": received, "rtp_bytes": sum(r[1] for r in rows), "expected": expected,
            "lost": lost, "duplicates": 0, "socket_drops": 0, "min_received": min((r[0] for r in rows), default=0),
            "max_received": max((r[0] for r in rows), default=0), "viewers_with_loss": sum(1 for r in rows if r[2] > r[0]),
            "viewers_with_duplicates": 0, "loss_percent": 100.0 * lost / expected if expected else 0.0}


async def main(url, n, pli_every):
    start = time.monotonic()
    viewers = []
    locations = []

    async def connect(i):
        pc = RTCPeerConnection()
        video = pc.addTransceiver("video", direction="recvonly")
        pc.addTransceiver("audio", direction="recvonly")
        await pc.setLocalDescription(await pc.createOffer())
        location, answer = await asyncio.to_thread(post, url, pc.localDescription.sdp)
        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        viewers.append((pc, video.receiver))
        locations.append(location)

    # At most 20 connecting at once: the relay refuses more than 64 unconnected sessions.
    for first in range(0, n, 20):
        await asyncio.gather(*(connect(i) for i in range(first, min(n, first + 20))))
    said = 0
    while sum(1 for _, r in viewers if r in COUNTS) < n:
        waited = time.monotonic() - start
        if waited > 60:
            print(f"only {sum(1 for _, r in viewers if r in COUNTS)} of {n} viewers receive after 60 s", file=sys.stderr)
            break
        if waited > 10 * (said + 1):
            # Which viewers wait, and where their connection stands, to read a failure by.
            said += 1
            waiting = [(i, pc) for i, (pc, r) in enumerate(viewers) if r not in COUNTS]
            states = ", ".join(f"{i}: ice {pc.iceConnectionState}, {pc.connectionState}, {locations[i]}" for i, pc in waiting)
            print(f"{waited:.0f} s: {len(waiting)} of {n} receive nothing yet ({states})", file=sys.stderr, flush=True)
        await asyncio.sleep(0.05)
    print(f"ready {n} {int((time.monotonic() - start) * 1000)}", flush=True)

    window_start = [None]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def mark():
        for c in COUNTS.values():
            c.mark = (c.received, c.bytes, c.highest)
        window_start[0] = time.monotonic()
        print("window", flush=True)

    loop.add_signal_handler(signal.SIGUSR1, mark)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    async def plis():
        pc, receiver = viewers[0]
        while not stop.is_set():
            await asyncio.sleep(pli_every)
            c = COUNTS.get(receiver)
            if c and c.ssrc is not None:
                await receiver._send_rtcp_pli(c.ssrc)

    pli_task = asyncio.ensure_future(plis()) if pli_every > 0 and viewers else None
    await stop.wait()
    end = time.monotonic()
    if pli_task:
        pli_task.cancel()
    receiving = sum(1 for _, r in viewers if r in COUNTS)
    out = {"viewers": n, "joined": len(viewers), "subscribed": len(viewers), "receiving": receiving, "rcvbuf": 0,
           "total": summary(viewers, "total", False, end - start),
           "window": summary(viewers, "window", True, end - window_start[0] if window_start[0] else 0.0)}
    base = url.split("/whep/")[0]
    for location in locations:
        try:
            await asyncio.to_thread(lambda: urllib.request.urlopen(urllib.request.Request(base + location, method="DELETE"), timeout=5).read())
        except Exception:
            pass
    for pc, _ in viewers:
        await pc.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    pli = 0.0
    if "-k" in args:
        i = args.index("-k")
        pli = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit("usage: whep-load.py URL N [-k SECONDS]")
    asyncio.run(main(args[0], int(args[1]), pli))
