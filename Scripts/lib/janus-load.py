#!/usr/bin/env python3
"""Many viewers of one Janus streaming mountpoint, for measuring what a viewer costs Janus:
aiortc peer connections made over Janus's HTTP API (as janus-watch.py makes one) that receive
the stream — ICE, DTLS, SRTP, RTCP feedback, as a browser does — but do not decode it (VP8
decoding would cost this machine far more than Janus spends). Prints JSON lines: `ready` once
every viewer's connection is up, then each second the RTP packets and bytes all viewers
received, and `done` with each viewer's totals.

    janus-load.py JANUS_URL ID VIEWERS SECONDS [--pin PIN]

Exit status 0 when every viewer received video packets."""
import argparse
import asyncio
import concurrent.futures
import json
import random
import sys
import time
import urllib.request


def log(**kw):
    print(json.dumps(kw), flush=True)


def post(url, body):
    body = dict(body, transaction=str(random.getrandbits(48)))
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def get(url):
    with urllib.request.urlopen(url, timeout=35) as r:
        return json.loads(r.read())


async def viewer(args, index, counts, loop):
    from aiortc import RTCPeerConnection, RTCSessionDescription

    base = args.url.rstrip("/")
    sid = (await loop.run_in_executor(None, post, base, {"janus": "create"}))["data"]["id"]
    hid = (await loop.run_in_executor(None, post, f"{base}/{sid}", {"janus": "attach", "plugin": "janus.plugin.streaming"}))["data"]["id"]
    watch = {"request": "watch", "id": args.id}
    if args.pin:
        watch["pin"] = args.pin
    await loop.run_in_executor(None, post, f"{base}/{sid}/{hid}", {"janus": "message", "body": watch})
    offer = None
    while offer is None:
        for e in await loop.run_in_executor(None, get, f"{base}/{sid}?maxev=5"):
            if e.get("jsep", {}).get("type") == "offer":
                offer = e["jsep"]
    pc = RTCPeerConnection()
    connected = asyncio.Event()

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected":
            connected.set()

    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
    await pc.setLocalDescription(await pc.createAnswer())
    # Count what arrives, before the jitter buffer and the decoder (which is never fed).
    for t in pc.getTransceivers():
        receiver, kind = t.receiver, t.kind

        async def handle(packet, arrival_time_ms=0, kind=kind):
            counts[index][kind] += 1
            counts[index]["bytes"] += len(packet.payload) + 12
        receiver._handle_rtp_packet = handle
    await loop.run_in_executor(None, post, f"{base}/{sid}/{hid}",
                               {"janus": "message", "body": {"request": "start"}, "jsep": {"type": "answer", "sdp": pc.localDescription.sdp}})

    async def keep():
        while True:
            try:
                await loop.run_in_executor(None, get, f"{base}/{sid}?maxev=5")
            except Exception:
                await asyncio.sleep(1)
    asyncio.ensure_future(keep())
    await asyncio.wait_for(connected.wait(), 20)
    return pc


async def main(args):
    loop = asyncio.get_running_loop()
    # Each viewer's long poll holds a thread for up to 30 s: enough of them for all.
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=args.viewers * 2 + 16))
    counts = [{"video": 0, "audio": 0, "bytes": 0} for _ in range(args.viewers)]
    pcs = []
    # A few at a time: Janus answers each in turn.
    for start in range(0, args.viewers, 8):
        pcs += await asyncio.gather(*[viewer(args, i, counts, loop) for i in range(start, min(args.viewers, start + 8))])
    log(event="ready", viewers=len(pcs))
    last = (0, 0)
    for second in range(int(args.seconds)):
        await asyncio.sleep(1)
        packets = sum(c["video"] + c["audio"] for c in counts)
        total = sum(c["bytes"] for c in counts)
        log(event="second", t=second + 1, packets=packets - last[0], kbps=round((total - last[1]) * 8 / 1000))
        last = (packets, total)
    log(event="done", viewers=[c["video"] for c in counts])
    for pc in pcs:
        await pc.close()
    return 0 if all(c["video"] > 0 for c in counts) else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("id", type=int)
    p.add_argument("viewers", type=int)
    p.add_argument("seconds", type=float)
    p.add_argument("--pin")
    sys.exit(asyncio.run(main(p.parse_args())))
