#!/usr/bin/env python3
"""The network matrix (issue 38): `screenshare start --to` through Scripts/lossy-proxy to a
`screenshare watch --sdp` that sends transport-wide feedback, one cell per path condition and
content, on loopback; the room cells run a relay, the presenter, a viewer straight to the relay
and one behind the proxy (its frames and freezes are the row's, the other's in "frames"). Per cell: the sender's encoder target (mean and minimum after the first
3 s), what it sent (media + FEC + resends), the picture width, the frame rate, and the viewer's
frames, freezes and losses; with a bottleneck, what the proxy delivered and its queue.

    network.py --bin SCREENSHARE --out RESULTS_DIR --work DIR [--short] [--duration S]
               [--cells LIST] [--content LIST] [--bitrate 1M]

Writes RESULTS_DIR/network-STAMP.{md,json,png} and network-latest.{md,json,png} (the chart when
matplotlib is there). Raw logs of every cell stay in DIR.
"""
import argparse
import datetime
import json
import os
import random
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROXY = os.path.join(ROOT, "Scripts", "lossy-proxy")
TWCC_URI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
TWCC_ID = 3  # the sender's (RTP/TransportWideSequence.defaultID)

# name → (what it is, proxy arguments, bitrate override or None). Delay, jitter, wander and
# aggregation both ways (--symmetric); loss both ways (--all).
CELLS = {
    "clean": ("no impairment", [], None),
    "jitter-10": ("each datagram +0-10 ms, reordered", ["--delay", "5", "--jitter", "10", "--symmetric"], None),
    "jitter-20": ("each datagram +0-20 ms, reordered", ["--delay", "5", "--jitter", "20", "--symmetric"], None),
    "jitter-40": ("each datagram +0-40 ms, reordered", ["--delay", "5", "--jitter", "40", "--symmetric"], None),
    "issue-38": ("40-60 ms each way, reordered (the issue's path)", ["--delay", "40", "--jitter", "20", "--symmetric"], None),
    "issue-38-loss-5": ("the issue's path and 5 % loss both ways",
                        ["--delay", "40", "--jitter", "20", "--symmetric", "--loss", "0.05", "--all", "--seed", "3"], None),
    "wander-40": ("a delay wandering over 0-40 ms, in order", ["--delay", "5", "--wander", "40", "--symmetric"], None),
    "aggregation": ("held and released together every 5-20 ms", ["--delay", "5", "--aggregate", "5-20", "--symmetric"], None),
    "aggregation-loss-5": ("aggregation and 5 % loss both ways",
                           ["--delay", "5", "--aggregate", "5-20", "--symmetric", "--loss", "0.05", "--all", "--seed", "4"], None),
    "loss-1": ("1 % random loss both ways", ["--delay", "5", "--symmetric", "--loss", "0.01", "--all", "--seed", "5"], None),
    "loss-5": ("5 % random loss both ways", ["--delay", "5", "--symmetric", "--loss", "0.05", "--all", "--seed", "6"], None),
    "loss-10": ("10 % random loss both ways", ["--delay", "5", "--symmetric", "--loss", "0.10", "--all", "--seed", "7"], None),
    "bursts": ("Gilbert-Elliott bursts (p 1 %, r 30 %)", ["--delay", "5", "--burst", "0.01:0.3", "--seed", "8"], None),
    "rtt-10": ("10 ms round trip", ["--delay", "5", "--symmetric"], None),
    "rtt-100": ("100 ms round trip", ["--delay", "50", "--symmetric"], None),
    "rtt-300": ("300 ms round trip", ["--delay", "150", "--symmetric"], None),
    "bottleneck-500k-300": ("500 kbit/s, 300 ms queue, 3 Mbit/s asked", ["--rate", "500k", "--queue-ms", "300", "--delay", "25"], "3M"),
    "bottleneck-1M-50": ("1 Mbit/s, 50 ms queue, 3 Mbit/s asked", ["--rate", "1M", "--queue-ms", "50", "--delay", "25"], "3M"),
    "bottleneck-1M-300": ("1 Mbit/s, 300 ms queue, 3 Mbit/s asked", ["--rate", "1M", "--queue-ms", "300", "--delay", "25"], "3M"),
    "bottleneck-4M-300": ("4 Mbit/s, 300 ms queue, 6 Mbit/s asked", ["--rate", "4M", "--queue-ms", "300", "--delay", "25"], "6M"),
    "bottleneck-jitter": ("1 Mbit/s, 300 ms queue, then +0-20 ms reordered, 3 Mbit/s asked",
                          ["--rate", "1M", "--queue-ms", "300", "--delay", "25", "--jitter", "20"], "3M"),
}
# Rooms: a relay (`serve`), the presenter straight to it, a viewer straight to it ("fast") and
# one behind the proxy's way back ("slow": --reverse, the relay's packets to it impaired).
ROOM_CELLS = {
    "room-slow-500k": ("room: one viewer behind 500 kbit/s, 300 ms queue; the presenter's uplink clean",
                       ["--reverse", "--rate", "500k", "--queue-ms", "300", "--delay", "25"], None),
    "room-slow-jitter": ("room: one viewer behind 40-60 ms reordering and 5 % loss both ways",
                         ["--delay", "40", "--jitter", "20", "--symmetric", "--loss", "0.05", "--all", "--seed", "9"], None),
}
CELLS.update(ROOM_CELLS)
# A TCP bulk flow (the kernel's cubic) and the sender sharing a bottleneck: the kernel's token
# bucket (tc tbf) on a veth pair to a network namespace the cell makes (root only), where the
# viewer and the TCP receiver run. Arguments: rate (tc's units), queue (ms).
TCP_CELLS = {
    "tcp-share-2M": ("one TCP bulk flow sharing 2 Mbit/s (kernel tbf, 100 ms queue), 3 Mbit/s asked", ["2mbit", "100"], "3M"),
    "tcp-share-2M-300": ("one TCP bulk flow sharing 2 Mbit/s (kernel tbf, 300 ms queue), 3 Mbit/s asked", ["2mbit", "300"], "3M"),
}
CELLS.update(TCP_CELLS)
# The TCP flow starts this long after the sender, and the share is measured from 20 s later on.
TCP_START = 3
TCP_MINIMUM_SECONDS = 35
SHORT = ["clean", "issue-38-loss-5", "aggregation", "bottleneck-1M-300", "room-slow-jitter", "tcp-share-2M"]
CONTENTS = ["motion", "detail"]


def free_even_port():
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p % 2 == 0 and p < 65000:
            return p


def wait_bound(port, seconds=10, netns=None):
    """Until a UDP socket is bound to PORT on this machine, or in network namespace NETNS (ss -lun)."""
    end = time.monotonic() + seconds
    prefix = ["ip", "netns", "exec", netns] if netns else []
    while time.monotonic() < end:
        out = subprocess.run(prefix + ["ss", "-Hlun", f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            return True
        time.sleep(0.05)
    return False


def make_content(work, content):
    """motion: testsrc2 1280x720 at 15 fps, 60 frames looped (the issue's moving content).
    detail: three still slides (bars) changing every 3 s, a 320x180 clip playing in the corner."""
    path = os.path.join(work, f"{content}.nv12")
    if os.path.exists(path):
        return path
    if content == "motion":
        cmd = ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=15", "-frames:v", "60"]
    else:
        graph = ("smptehdbars=size=1280x720:rate=15:duration=3[a];rgbtestsrc=size=1280x720:rate=15:duration=3[b];"
                 "pal75bars=size=1280x720:rate=15:duration=3[c];[a][b][c]concat=n=3[s];"
                 "testsrc2=size=320x180:rate=15[clip];[s][clip]overlay=900:480:shortest=1")
        cmd = ["-filter_complex", graph, "-frames:v", "135"]
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error"] + cmd + ["-pix_fmt", "nv12", "-f", "rawvideo", "-y", path], check=True)
    return path


def events(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def wait_event(path, name, seconds=15):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if any(e.get("event") == name for e in events(path)):
            return True
        time.sleep(0.05)
    return False


def run_room_cell(binary, d, media, relay_port, proxy_port, proxy_args, seconds, rate, content):
    logs = {k: open(os.path.join(d, k), "w") for k in ("relay", "proxy", "fast", "viewer", "sender")}
    relay = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{relay_port}", "--open", "--json",
                              "--duration", str(seconds + 20)], stdout=logs["relay"], stderr=subprocess.STDOUT)
    wait_bound(relay_port)
    wait_event(os.path.join(d, "relay"), "started")
    proxy = subprocess.Popen([sys.executable, PROXY, "--listen", str(proxy_port), "--to", f"127.0.0.1:{relay_port}"] + proxy_args,
                             stdout=logs["proxy"], stderr=subprocess.STDOUT)
    wait_bound(proxy_port)

    def watch(name, port, log):
        return subprocess.Popen([binary, "watch", "--room", "class", "--server", f"127.0.0.1:{port}", "--headless", "--name", name,
                                 "--duration", str(seconds + 4), "--json"], stdout=logs[log], stderr=subprocess.STDOUT)
    fast = watch("fast", relay_port, "fast")
    slow = watch("slow", proxy_port, "viewer")
    sender = subprocess.Popen([binary, "start", "--room", "class", "--server", f"127.0.0.1:{relay_port}", "--input", media,
                               "--input-format", "nv12", "--input-size", "1280x720", "--fps", "15", "--bitrate", rate,
                               "--content", content, "--no-audio", "--json", "--duration", str(seconds)],
                              stdout=logs["sender"], stderr=subprocess.STDOUT)
    sender.wait(timeout=seconds + 60)
    fast.wait(timeout=30)
    slow.wait(timeout=30)
    for p in (proxy, relay):
        p.terminate()
        p.wait(timeout=10)
    for f in logs.values():
        f.close()


def run_cell(binary, work, cell, content, seconds, bitrate):
    """Runs one cell (its logs in WORK/CELL.CONTENT) and summarizes it."""
    what, proxy_args, override = CELLS[cell]
    rate = override or bitrate
    d = os.path.join(work, f"{cell}.{content}")
    os.makedirs(d, exist_ok=True)
    media = make_content(work, content)
    # The proxy's port and the one it forwards to (the viewer's, or the relay's), apart by 2 or
    # more: each is an RTP port with its RTCP port next to it.
    target_port = free_even_port()
    proxy_port = free_even_port()
    while abs(proxy_port - target_port) < 2:
        proxy_port = free_even_port()
    if cell in TCP_CELLS:
        if not run_tcp_cell(binary, d, media, target_port, proxy_args, max(seconds, TCP_MINIMUM_SECONDS), rate, content):
            return {"cell": cell, "what": what, "content": content, "bitrate_kbps": rate_bits(rate) / 1000, "skipped": "needs root (ip netns)",
                    "target_mean_kbps": None, "target_min_kbps": None, "fps_mean": None, "widths": [], "freeze_s": None}
    elif cell in ROOM_CELLS:
        run_room_cell(binary, d, media, target_port, proxy_port, proxy_args, seconds, rate, content)
    else:
        run_plain_cell(binary, d, media, target_port, proxy_port, proxy_args, seconds, rate, content)
    return summarize(cell, what, content, rate, d)


class Namespace:
    """A network namespace joined to this one by a veth pair (10.78.N.1 here, 10.78.N.2 there),
    what this side sends shaped by tbf; removed on exit."""
    def __init__(self, rate, queue_ms):
        n = os.getpid() % 200 + 1
        self.name, self.here, self.there = f"ss-bench-{os.getpid()}", f"ssb{n}h", f"ssb{n}p"
        self.address = f"10.78.{n}.2"
        steps = [["ip", "netns", "add", self.name],
                 ["ip", "link", "add", self.here, "type", "veth", "peer", "name", self.there],
                 ["ip", "link", "set", self.there, "netns", self.name],
                 ["ip", "addr", "add", f"10.78.{n}.1/24", "dev", self.here], ["ip", "link", "set", self.here, "up"],
                 ["ip", "netns", "exec", self.name, "ip", "addr", "add", f"{self.address}/24", "dev", self.there],
                 ["ip", "netns", "exec", self.name, "ip", "link", "set", self.there, "up"],
                 ["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"],
                 ["tc", "qdisc", "replace", "dev", self.here, "root", "tbf", "rate", rate, "burst", "8kb", "latency", f"{queue_ms}ms"]]
        self.ok = True
        for step in steps:
            if subprocess.run(step, capture_output=True).returncode != 0:
                self.ok = False
                break

    def run(self, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name] + args, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        subprocess.run(["ip", "link", "del", self.here], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def run_tcp_cell(binary, d, media, viewer_port, tc_args, seconds, rate, content):
    """The sender and one TCP bulk flow through the same kernel bottleneck; False without root."""
    with Namespace(*tc_args) as ns:
        if not ns.ok:
            return False
        write_sdp(d, ns.address, viewer_port)
        logs = {k: open(os.path.join(d, k), "w") for k in ("viewer", "tcp", "sender")}
        viewer = ns.run([binary, "watch", "--sdp", os.path.join(d, "v.sdp"), "--headless", "--duration", str(seconds + 4), "--json"],
                        stdout=logs["viewer"], stderr=subprocess.STDOUT)
        bulk = os.path.join(HERE, "tcp-bulk.py")
        tcp_port = 5001
        receiver = ns.run([sys.executable, bulk, "serve", ns.address, str(tcp_port), str(seconds + 10)], stdout=logs["tcp"], stderr=subprocess.STDOUT)
        wait_event(os.path.join(d, "tcp"), "listening")
        wait_bound(viewer_port, netns=ns.name)
        sender = subprocess.Popen([binary, "start", "--to", f"{ns.address}:{viewer_port}", "--input", media, "--input-format", "nv12",
                                   "--input-size", "1280x720", "--fps", "15", "--bitrate", rate, "--content", content, "--no-audio",
                                   "--json", "--duration", str(seconds)], stdout=logs["sender"], stderr=subprocess.STDOUT)
        wait_event(os.path.join(d, "sender"), "started")
        time.sleep(TCP_START)
        flow = subprocess.Popen([sys.executable, bulk, "send", ns.address, str(tcp_port), str(seconds - TCP_START)])
        sender.wait(timeout=seconds + 60)
        flow.wait(timeout=30)
        viewer.wait(timeout=30)
        receiver.wait(timeout=30)
        for f in logs.values():
            f.close()
    return True


def write_sdp(d, address, viewer_port):
    sdp = "\r\n".join([
        "v=0", f"o=- 1 1 IN IP4 {address}", "s=screenshare", f"c=IN IP4 {address}", "t=0 0",
        f"m=video {viewer_port} RTP/AVP 96", "a=rtpmap:96 VP8/90000", f"a=rtcp:{viewer_port + 1}",
        f"a=extmap:{TWCC_ID} {TWCC_URI}", "a=rtcp-fb:96 transport-cc", "a=framerate:15", "a=recvonly", ""])
    with open(os.path.join(d, "v.sdp"), "w") as f:
        f.write(sdp)


def run_plain_cell(binary, d, media, viewer_port, proxy_port, proxy_args, seconds, rate, content):
    write_sdp(d, "127.0.0.1", viewer_port)
    logs = {k: open(os.path.join(d, k), "w") for k in ("viewer", "proxy", "sender")}
    viewer = subprocess.Popen([binary, "watch", "--sdp", os.path.join(d, "v.sdp"), "--headless", "--duration", str(seconds + 4), "--json"],
                              stdout=logs["viewer"], stderr=subprocess.STDOUT)
    wait_bound(viewer_port)
    proxy = subprocess.Popen([sys.executable, PROXY, "--listen", str(proxy_port), "--to", f"127.0.0.1:{viewer_port}"] + proxy_args,
                             stdout=logs["proxy"], stderr=subprocess.STDOUT)
    wait_bound(proxy_port)
    sender = subprocess.Popen([binary, "start", "--to", f"127.0.0.1:{proxy_port}", "--input", media, "--input-format", "nv12",
                               "--input-size", "1280x720", "--fps", "15", "--bitrate", rate, "--content", content, "--no-audio",
                               "--json", "--duration", str(seconds)], stdout=logs["sender"], stderr=subprocess.STDOUT)
    sender.wait(timeout=seconds + 60)
    viewer.wait(timeout=30)
    proxy.terminate()
    proxy.wait(timeout=10)
    for f in logs.values():
        f.close()


def rate_bits(text):
    t = text.lower()
    return float(t[:-1]) * {"k": 1e3, "m": 1e6}[t[-1]] if t[-1] in "km" else float(t)


def summarize(cell, what, content, rate, d):
    sent = events(os.path.join(d, "sender"))
    stats = [e for e in sent if e.get("event") == "stats"]
    after = stats[3:] or stats
    targets = [e["target_kbps"] for e in after if e.get("target_kbps") is not None]
    kbps = [e.get("kbps", 0) for e in after]
    fps = [e.get("fps", 0) for e in after]
    widths = sorted({e.get("width") for e in stats if e.get("width")})
    feedback = sum(1 for e in stats if e.get("estimate_kbps") is not None)
    end = next((e.get("time") for e in reversed(sent) if e.get("event") == "stopped"), None)

    def viewer_summary(name):
        viewer = events(os.path.join(d, name))
        got = [e for e in viewer if e.get("event") == "stopped"]
        got = got[-1] if got else {}
        # Freezes while the sender sent: the viewer's running totals in its last `stats` before
        # the sender stopped (after it, the picture stands still on purpose).
        during = [e for e in viewer if e.get("event") == "stats" and end and e.get("time", "") <= end]
        if during:
            got = dict(got, freeze_count=during[-1].get("freeze_count"),
                       total_freezes_duration_s=during[-1].get("total_freezes_duration_s"), duration_s=len(during))
        return got
    got = viewer_summary("viewer")
    proxy = events(os.path.join(d, "proxy"))
    stopped = [e for e in proxy if e.get("event") == "stopped"]
    seconds = [e for e in proxy if e.get("event") == "second"]
    # The bottleneck's steady part: from 3 s on (the first target settles), the last second left
    # out (the sender stops in it).
    last = max((s.get("t", 0) for s in seconds), default=0)
    steady = [s for s in seconds if 3 <= s.get("t", 0) < last] or seconds
    duration = got.get("duration_s") or 0
    maximum = rate_bits(rate) / 1000
    row = {
        "cell": cell, "what": what, "content": content, "bitrate_kbps": maximum,
        "target_mean_kbps": round(sum(targets) / len(targets)) if targets else None,
        "target_min_kbps": min(targets) if targets else None,
        "sent_mean_kbps": round(sum(kbps) / len(kbps)) if kbps else None,
        "fps_mean": round(sum(fps) / len(fps), 1) if fps else None,
        "widths": widths,
        "feedback_seconds": feedback,
        "frames_decoded": got.get("frames_decoded"),
        "freeze_count": got.get("freeze_count"),
        "freeze_s": got.get("total_freezes_duration_s"),
        "freeze_fraction": round(got["total_freezes_duration_s"] / duration, 4) if duration and got.get("total_freezes_duration_s") is not None else None,
        "viewer_lost": got.get("packets_lost"),
        "viewer_seconds": duration,
    }
    if steady and "delivered_kbps" in steady[0]:
        row["delivered_kbps"] = round(sum(s["delivered_kbps"] for s in steady) / len(steady))
        p95 = sorted(s.get("queue_ms_p95") or 0 for s in steady)
        row["queue_p95_ms"] = p95[len(p95) * 95 // 100] if p95 else None
    if stopped:
        row["proxy_dropped"] = stopped[-1].get("dropped")
    tcp = [e for e in events(os.path.join(d, "tcp")) if e.get("event") == "second"]
    if tcp:
        # From 20 s after the TCP flow started to the sender's last full second: the viewer's
        # received rate (its `stats`, counted from the sender's start) and the TCP receiver's.
        ours = [e.get("kbps", 0) for e in events(os.path.join(d, "viewer")) if e.get("event") == "stats"]
        window = range(TCP_START + 20, min(len(ours), len(tcp) + TCP_START) - 1)
        a = [ours[i] for i in window]
        b = [tcp[i - TCP_START]["kbps"] for i in window]
        if a and b:
            row["delivered_kbps"] = round(sum(a) / len(a))
            row["tcp_kbps"] = round(sum(b) / len(b))
            row["share"] = round(sum(a) / (sum(a) + sum(b)), 2)
            row["share_seconds"] = len(a)
    # Start-up: the viewer's first picture after the sender started (wall clocks of one machine).
    started = next((e.get("time") for e in sent if e.get("event") == "started"), None)
    first = next((e.get("time") for e in events(os.path.join(d, "viewer")) if e.get("event") == "first_frame"), None)
    if started and first:
        parse = lambda t: datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ")
        row["first_frame_ms"] = round((parse(first) - parse(started)).total_seconds() * 1000)
    if seconds and "delivered_kbps" in seconds[0]:
        # What arrived at the bottleneck in the first seconds (the sender's start-up overshoot).
        offered = [s.get("arrived_kbps") for s in seconds if s.get("arrived_kbps") is not None]
        if offered:
            row["start_offered_kbps"] = offered[:6]
    if os.path.exists(os.path.join(d, "fast")):
        fast = viewer_summary("fast")
        row["fast_frames_decoded"] = fast.get("frames_decoded")
        row["fast_freeze_s"] = fast.get("total_freezes_duration_s")
        frames_sent = next((e.get("frames_sent") for e in reversed(sent) if e.get("event") == "stopped"), None)
        row["frames_sent"] = frames_sent
        links = [e.get("layers") for e in events(os.path.join(d, "viewer")) if e.get("event") == "link"]
        row["slow_layers"] = links
    return row


def table(rows):
    head = ("| cell | content | target mean / min (kbit/s) | sent | fps | width | frames | frozen | lost | delivered, queue p95 |\n"
            "|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        tm, tn = r.get("target_mean_kbps"), r.get("target_min_kbps")
        frozen = f"{r['freeze_s']:.2f} s ({r['freeze_count']})" if r.get("freeze_s") is not None else "–"
        bn = f"{r['delivered_kbps']} kbit/s, {r.get('queue_p95_ms')} ms" if "delivered_kbps" in r else "–"
        if "share" in r:
            bn = f"ours {r['delivered_kbps']}, TCP {r['tcp_kbps']} kbit/s: share {r['share']}"
        if r.get("skipped"):
            lines.append(f"| {r['cell']} | {r['content']} | skipped: {r['skipped']} | | | | | | | |")
            continue
        frames = f"{r.get('frames_decoded')}"
        if "fast_frames_decoded" in r:  # a room: the slow viewer's, the fast one's, of those sent
            fast_frozen = f"{r['fast_freeze_s']:.2f} s" if r.get("fast_freeze_s") is not None else "–"
            frames = f"slow {r.get('frames_decoded')}, fast {r.get('fast_frames_decoded')} ({fast_frozen} frozen) of {r.get('frames_sent')}"
        lines.append(f"| {r['cell']} | {r['content']} | {tm} / {tn} of {int(r['bitrate_kbps'])} | {r.get('sent_mean_kbps')} | "
                     f"{r.get('fps_mean')} | {','.join(str(w) for w in r['widths'])} | {frames} | {frozen} | "
                     f"{r.get('viewer_lost')} | {bn} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--short", action="store_true", help=f"the CI form: {', '.join(SHORT)}, motion only, 15 s each")
    ap.add_argument("--duration", type=int, default=None, help="seconds per cell (default 30; --short 15)")
    ap.add_argument("--cells", default=None, help="comma-separated cells (default: all; see --list)")
    ap.add_argument("--content", default=None, help="comma-separated subset of motion,detail")
    ap.add_argument("--bitrate", default="1M", help="--bitrate of the cells without a bottleneck (default 1M)")
    ap.add_argument("--list", action="store_true", help="list the cells and exit")
    ap.add_argument("--from-logs", action="store_true", help="summarize the logs a run left in --work again, running nothing")
    a = ap.parse_args()
    if a.list:
        for k, (what, args, _) in CELLS.items():
            print(f"{k:22} {what}  [{' '.join(args)}]")
        return 0
    cells = a.cells.split(",") if a.cells else (SHORT if a.short else list(CELLS))
    unknown = [c for c in cells if c not in CELLS]
    if unknown:
        ap.error(f"unknown cell(s): {', '.join(unknown)} (see --list)")
    contents = a.content.split(",") if a.content else (["motion"] if a.short else CONTENTS)
    if any(c not in CONTENTS for c in contents):
        ap.error(f"--content: expected a subset of {','.join(CONTENTS)}")
    seconds = a.duration or (15 if a.short else 30)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for cell in cells:
        for content in contents:
            if a.from_logs:
                d = os.path.join(a.work, f"{cell}.{content}")
                if not os.path.isdir(d):
                    continue
                row = summarize(cell, CELLS[cell][0], content, CELLS[cell][2] or a.bitrate, d)
            else:
                row = run_cell(a.bin, a.work, cell, content, seconds, a.bitrate)
            rows.append(row)
            print(f"{cell} {content}: target {row['target_mean_kbps']} (min {row['target_min_kbps']}) kbit/s, "
                  f"{row['fps_mean']} fps, widths {row['widths']}, frozen {row['freeze_s']} s", flush=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    doc = {"stamp": stamp, "seconds": seconds, "bitrate": a.bitrate, "rows": rows}
    md = (f"# Network matrix {stamp}\n\n`start --to` → lossy-proxy → `watch --sdp` (transport-wide feedback), 1280x720 at 15 fps, "
          f"{seconds} s a cell; target and sent after the first 3 s.\n\n{table(rows)}\n")
    for name in (f"network-{stamp}", "network-latest"):
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
        with open(os.path.join(a.out, name + ".md"), "w") as f:
            f.write(md)
    chart(rows, stamp, [os.path.join(a.out, n + ".png") for n in (f"network-{stamp}", "network-latest")])
    print(md)
    return 0


def chart(rows, stamp, paths):
    """Per cell and content: the target's mean and minimum as a share of --bitrate (bars; the
    issue's 0.9 and 0.7 marked) and the share of the time frozen (dots; its 1 % and 5 %)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("warning: no matplotlib; no chart", file=sys.stderr)
        return
    rows = [r for r in rows if r.get("bitrate_kbps")]
    if not rows:
        return
    labels = [f"{r['cell']}\n{r['content']}" for r in rows]
    xs = range(len(rows))
    mean = [(r.get("target_mean_kbps") or 0) / r["bitrate_kbps"] for r in rows]
    least = [(r.get("target_min_kbps") or 0) / r["bitrate_kbps"] for r in rows]
    frozen = [100 * (r.get("freeze_fraction") or 0) for r in rows]
    fig, ax = plt.subplots(figsize=(max(7, 0.55 * len(rows) + 2), 4.5))
    ax.bar([x - 0.2 for x in xs], mean, 0.4, label="target mean / --bitrate")
    ax.bar([x + 0.2 for x in xs], least, 0.4, label="target least / --bitrate")
    for y, style in ((0.9, "--"), (0.7, ":")):
        ax.axhline(y, color="grey", linestyle=style, linewidth=0.8)
    ax.set_ylabel("share of --bitrate")
    ax.set_ylim(0, 1.6)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax2 = ax.twinx()
    ax2.plot(list(xs), frozen, "o", color="tab:red", label="frozen (% of the time)")
    for y in (1, 5):
        ax2.axhline(y, color="tab:red", linestyle=":", linewidth=0.6)
    ax2.set_ylabel("frozen, % of the time")
    ax2.set_ylim(0, max(10, max(frozen) * 1.2))
    ax.set_title(f"screenshare network matrix {stamp}")
    fig.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
