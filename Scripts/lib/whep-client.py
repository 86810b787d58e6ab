#!/usr/bin/env python3
"""A scripted WHEP viewer that is not ours (aiortc): POSTs a recvonly VP8 + Opus offer to a
WHEP URL and prints, as JSON lines, what happened: the HTTP answer, connection states, the
first picture (milliseconds after ICE and DTLS connected), and each second the video frames and
audio frames decoded, the picture size and the mean Y value of the last picture (tests compare
it with what the presenter sent).

    whep-client.py URL SECONDS [--loopback-only] [--drop-video FRACTION]

A room token may follow the URL after '#token=' (as in the link `start --room` prints for
scripts): it is sent as `Authorization: Bearer TOKEN` (RFC 6750), and the fragment is not part
of the request. An invitation code after '#k=' (the short link) is first exchanged for the
token at /invite/ROOM, as the relay's page does (an `invited` line; a `refused` one if not).
With `&fp=sha256:HEX` (the relay's certificate, as the link names it) an answer naming another
certificate is not used: a `refused` line says so.

--loopback-only offers only 127.0.0.1 as a host candidate: tests keep their traffic on
loopback, never on the machine's LAN address.
--drop-video drops that fraction of the video packets as they arrive (a fixed random
sequence), as a lossy network would: aiortc asks for them again with NACKs. `stats` lines then
carry `dropped`."""
import asyncio
import re
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def log(**kw):
    print(json.dumps(kw), flush=True)


async def main(url, seconds):
    from aiortc import RTCPeerConnection, RTCSessionDescription

    pc = RTCPeerConnection()
    if DROP_VIDEO > 0:
        drop_video_packets(pc, DROP_VIDEO)
    pc.addTransceiver("video", direction="recvonly")
    pc.addTransceiver("audio", direction="recvonly")
    counts = {"video": 0, "audio": 0, "size": None, "luma": None}

    connected_at = [None]

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "connected" and connected_at[0] is None:
            connected_at[0] = time.monotonic()
        log(event="state", state=pc.connectionState)

    async def drain(track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            counts[track.kind] += 1
            if track.kind == "video" and counts["video"] == 1 and connected_at[0] is not None:
                log(event="first_picture", ms_after_connected=round((time.monotonic() - connected_at[0]) * 1000))
            if track.kind == "video":
                counts["size"] = f"{frame.width}x{frame.height}"
                try:
                    counts["luma"] = float(frame.to_ndarray(format="gray").mean())
                except Exception as e:  # say so rather than stop counting
                    log(event="error", message=f"cannot read a decoded picture: {e}")

    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(drain(track))

    await pc.setLocalDescription(await pc.createOffer())
    url, _, fragment = url.partition("#")
    headers = {"Content-Type": "application/sdp"}
    token = urllib.parse.parse_qs(fragment).get("token", [None])[0]
    code = urllib.parse.parse_qs(fragment).get("k", [None])[0]
    if code and not token:
        invite = urllib.request.Request(url.replace("/whep/", "/invite/", 1), data=code.encode(), method="POST",
                                        headers={"Content-Type": "text/plain"})
        try:
            with urllib.request.urlopen(invite, timeout=5) as r:
                granted = json.loads(r.read().decode())
        except urllib.error.HTTPError as e:
            log(event="refused", status=e.code, body=e.read().decode())
            await pc.close()
            return
        token = granted.get("token")
        log(event="invited", fingerprint=granted.get("fingerprint"))
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(url, data=pc.localDescription.sdp.encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            status, location, answer = r.status, r.headers.get("Location"), r.read().decode()
    except urllib.error.HTTPError as e:
        log(event="refused", status=e.code, body=e.read().decode())
        await pc.close()
        return
    log(event="answered", status=status, location=location,
        access_control=r.headers.get("Access-Control-Allow-Origin"))
    # The link may name the relay's certificate (fp=sha256:HEX): an answer naming another one
    # is not used (as the relay's page does).
    pinned = (urllib.parse.parse_qs(fragment).get("fp", [""])[0]).lower()
    if pinned:
        m = re.search(r"^a=fingerprint:sha-256 ([0-9A-Fa-f:]+)", answer, re.M)
        seen = "sha256:" + m.group(1).replace(":", "").lower() if m else "none"
        log(event="fingerprint", pinned=pinned, seen=seen)
        if seen != pinned:
            log(event="refused", status=0, body=f"not the relay the link named: its certificate is {seen}")
            await pc.close()
            return
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
    start = time.time()
    while time.time() - start < seconds:
        await asyncio.sleep(1)
        log(event="stats", video_frames=counts["video"], audio_frames=counts["audio"], size=counts["size"],
            luma=counts["luma"], **({"dropped": DROPPED[0]} if DROP_VIDEO > 0 else {}))
    if location:
        base = url.split("/whep/")[0]
        try:
            with urllib.request.urlopen(urllib.request.Request(base + location, method="DELETE"), timeout=5) as r:
                log(event="deleted", status=r.status)
        except urllib.error.HTTPError as e:
            log(event="deleted", status=e.code)
    await pc.close()


DROP_VIDEO = 0.0
DROPPED = [0]


def drop_video_packets(pc, fraction):
    """Drops `fraction` of the video SRTP packets as they arrive, before they are decrypted
    (dropped later, SRTP's replay protection would refuse the resent copy), from a seeded
    random sequence. The payload type is in the clear: the video transceiver's codecs."""
    import random
    import pylibsrtp
    import aiortc.rtcdtlstransport as dtls
    rng = random.Random(7)

    class LossySession:
        def __init__(self, policy):
            self.session = pylibsrtp.Session(policy)

        def unprotect(self, data):
            video = {c.payloadType for t in pc.getTransceivers() if t.kind == "video" for c in (t._codecs or [])}
            if len(data) > 1 and (data[1] & 0x7F) in video and rng.random() < fraction:
                DROPPED[0] += 1
                raise pylibsrtp.Error("dropped on purpose (--drop-video)")
            return self.session.unprotect(data)

        def __getattr__(self, name):
            return getattr(self.session, name)

    dtls.Session = LossySession


if __name__ == "__main__":
    if "--drop-video" in sys.argv:
        i = sys.argv.index("--drop-video")
        DROP_VIDEO = float(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    if "--loopback-only" in sys.argv:
        import aioice.ice
        aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(args[0], float(args[1]) if len(args) > 1 else 8))
