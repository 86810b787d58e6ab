#!/usr/bin/env python3
"""A viewer that is not ours watching a Janus streaming mountpoint (aiortc, through Janus's HTTP
API): opens a session, attaches janus.plugin.streaming, asks to `watch` the mountpoint, answers
Janus's offer and prints, as JSON lines, what happened: the connection states, the first
picture (seconds after the watch request), and each second the video frames and audio frames
decoded, the picture size and the mean Y value of the last picture.

    janus-watch.py JANUS_URL SECONDS --id ID [--pin PIN] [--save-y FILE]

--save-y writes the last decoded picture's Y plane (width × height bytes) to FILE at the end,
and its size on the `done` line, for a PSNR against what the presenter drew.
Exit status 0 when pictures were decoded, 1 otherwise (2: Janus refused)."""
import argparse
import asyncio
import json
import random
import sys
import time
import urllib.request


def log(**kw):
    print(json.dumps(kw), flush=True)


class Janus:
    def __init__(self, url):
        self.url = url.rstrip("/")
        self.session = None
        self.handle = None

    def _post(self, path, body):
        body = dict(body, transaction=str(random.getrandbits(48)))
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def _get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=35) as r:
            return json.loads(r.read())

    def open(self):
        self.session = self._post("", {"janus": "create"})["data"]["id"]
        self.handle = self._post(f"/{self.session}", {"janus": "attach", "plugin": "janus.plugin.streaming"})["data"]["id"]

    def message(self, body, jsep=None):
        msg = {"janus": "message", "body": body}
        if jsep:
            msg["jsep"] = jsep
        return self._post(f"/{self.session}/{self.handle}", msg)

    def events(self):
        return self._get(f"/{self.session}?maxev=5")

    def keepalive(self):
        return self._post(f"/{self.session}", {"janus": "keepalive"})


async def main(args):
    from aiortc import RTCPeerConnection, RTCSessionDescription

    loop = asyncio.get_running_loop()
    janus = Janus(args.url)
    await loop.run_in_executor(None, janus.open)
    watch = {"request": "watch", "id": args.id}
    if args.pin:
        watch["pin"] = args.pin
    asked = time.monotonic()
    answer = await loop.run_in_executor(None, janus.message, watch)
    if answer.get("janus") == "error":
        log(event="refused", error=answer.get("error"))
        return 2
    # The offer comes as an event on the long poll.
    offer = None
    deadline = time.monotonic() + 15
    while offer is None and time.monotonic() < deadline:
        got = await loop.run_in_executor(None, janus.events)
        for e in got if isinstance(got, list) else [got]:
            data = e.get("plugindata", {}).get("data", {})
            if data.get("error"):
                log(event="refused", error=data.get("error"), code=data.get("error_code"))
                return 2
            if e.get("jsep", {}).get("type") == "offer":
                offer = e["jsep"]
    if offer is None:
        log(event="error", message="Janus sent no offer within 15 s")
        return 1

    pc = RTCPeerConnection()
    counts = {"video": 0, "audio": 0, "size": None, "luma": None, "y": None}

    @pc.on("connectionstatechange")
    def on_state():
        log(event="state", state=pc.connectionState)

    async def drain(track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            counts[track.kind] += 1
            if track.kind == "video":
                if counts["video"] == 1:
                    log(event="first_picture", seconds=round(time.monotonic() - asked, 3))
                counts["size"] = (frame.width, frame.height)
                # The Y plane as decoded (format="gray" would stretch it to full range).
                y = frame.to_ndarray(format="yuv420p")[:frame.height]
                counts["luma"] = float(y.mean())
                counts["y"] = y

    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(drain(track))

    await pc.setRemoteDescription(RTCSessionDescription(sdp=offer["sdp"], type=offer["type"]))
    await pc.setLocalDescription(await pc.createAnswer())
    started = await loop.run_in_executor(None, janus.message, {"request": "start"},
                                         {"type": "answer", "sdp": pc.localDescription.sdp})
    if started.get("janus") == "error":
        log(event="refused", error=started.get("error"))
        return 2

    async def poll():
        # Janus's events (webrtcup, media, hangup) and the session kept alive.
        while True:
            try:
                got = await loop.run_in_executor(None, janus.events)
            except Exception as e:
                log(event="poll_error", message=str(e))
                await asyncio.sleep(1)
                continue
            for e in got if isinstance(got, list) else [got]:
                if e.get("janus") in ("webrtcup", "hangup", "media", "slowlink"):
                    log(event="janus", kind=e.get("janus"), reason=e.get("reason"))

    poller = asyncio.ensure_future(poll())
    for second in range(int(args.seconds)):
        await asyncio.sleep(1)
        size = counts["size"]
        log(event="stats", t=second + 1, video_frames=counts["video"], audio_frames=counts["audio"],
            width=size[0] if size else None, height=size[1] if size else None,
            luma=round(counts["luma"], 2) if counts["luma"] is not None else None)
    poller.cancel()
    size = counts["size"]
    if args.save_y and counts["y"] is not None:
        with open(args.save_y, "wb") as f:
            f.write(counts["y"].tobytes())
    log(event="done", video_frames=counts["video"], audio_frames=counts["audio"],
        width=size[0] if size else None, height=size[1] if size else None)
    await pc.close()
    return 0 if counts["video"] > 0 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("seconds", type=float)
    p.add_argument("--id", type=int, required=True)
    p.add_argument("--pin")
    p.add_argument("--save-y")
    sys.exit(asyncio.run(main(p.parse_args())))
