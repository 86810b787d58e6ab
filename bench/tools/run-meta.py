#!/usr/bin/env python3
"""One run of Scripts/bench, summed up: writes RUN_DIR/meta.json and prints the run's line.

    run-meta.py RUN_DIR --content C --tool T --run N --fps-target F --t0 T0 --t1 T1 --barcode 0|1
                --tick-hz HZ --cpu-ticks-2s N --cpu-ticks-end N --vmhwm-kb N --xvfb-ticks N
                --xloop-ticks N --receiver-ticks N --frames-decoded N --sender-exited-early 0|1
                --sender-exit-status N --sender-stop-s N --content-loop-alive 0|1
                --content-loop-exit-status N --sender-pid PID --xloop-pid PID
                [--thread-ticks-2s "NAME=N …" --thread-ticks-end "NAME=N …"]

T0 and T1 are the run's start and end (`date +%s.%N`); the *-ticks are CPU clock ticks over the
run (--cpu-ticks-2s and --cpu-ticks-end: the sender's from its start, -1 where it had ended);
--vmhwm-kb is the sender's peak RSS (-1 where it had ended); --thread-ticks-*: the sender's CPU
ticks by thread name at 2 s and at the end (Scripts/lib/bench.sh: thread_ticks), empty where
it had ended.

meta.json: the arguments under the names report.py reads ("content", "tool", "run",
"fps_target", "duration_s" = T1 - T0, "t0_unix", "barcode", "tick_hz", "cpu_ticks_2s",
"cpu_ticks_end", "vmhwm_kb", "xvfb_ticks", "xloop_ticks", "receiver_ticks", "frames_decoded",
"sender_exited_early", "sender_exit_status", "sender_stop_s", "content_loop_died",
"content_loop_exit_status", "pids": {"sender", "xloop"}, "thread_ticks_2s" and "thread_ticks_end"
({name: ticks})), "loadavg" (now, 3 strings) and, for screenshare, "quantizer_mean": the mean
quantizer of the frames it sent (its `stats` events in RUN_DIR/sender.out, weighted by frames;
null without them).

Prints (stdout) one line: frames decoded per second, sender CPU seconds per second, screenshare's
mean quantizer (a run coded coarser than the others at the same bit rate shows here), the bit
rate and loss on the wire (from RUN_DIR/wire.json, bench/tools/rtpcount.py) and, with the
barcode, capture-to-decode latency p50/p95 (bench/tools/latency.py over RUN_DIR/latency.tsv and
relay-frames.tsv, from 2 s after the start), and the sender's exit status.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import latency  # noqa: E402  (bench/tools/latency.py, beside this file)
import sender_events  # noqa: E402


def thread_ticks(words):
    """'ss-capture=12 ss-encode=380' → {'ss-capture': 12, 'ss-encode': 380}."""
    out = {}
    for w in words.split():
        name, _, ticks = w.rpartition("=")
        if name and ticks.isdigit():
            out[name] = out.get(name, 0) + int(ticks)
    return out


def main():
    p = argparse.ArgumentParser(description="Writes a bench run's meta.json and prints its line.")
    p.add_argument("dir")
    p.add_argument("--content", required=True)
    p.add_argument("--tool", required=True)
    p.add_argument("--t0", type=float, required=True)
    p.add_argument("--t1", type=float, required=True)
    for name in ("run", "fps-target", "barcode", "tick-hz", "cpu-ticks-2s", "cpu-ticks-end", "vmhwm-kb",
                 "xvfb-ticks", "xloop-ticks", "receiver-ticks", "frames-decoded", "sender-exited-early",
                 "sender-exit-status", "sender-stop-s", "content-loop-alive", "content-loop-exit-status",
                 "sender-pid", "xloop-pid"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--bridge-ticks", type=int, default=0)  # the portal tool's screen → PipeWire bridge
    p.add_argument("--thread-ticks-2s", default="")
    p.add_argument("--thread-ticks-end", default="")
    a = p.parse_args()
    d = a.dir

    meta = {"content": a.content, "tool": a.tool, "run": a.run, "fps_target": a.fps_target, "duration_s": a.t1 - a.t0,
            "t0_unix": a.t0, "barcode": bool(a.barcode),
            "tick_hz": a.tick_hz, "cpu_ticks_2s": a.cpu_ticks_2s, "cpu_ticks_end": a.cpu_ticks_end, "vmhwm_kb": a.vmhwm_kb,
            "xvfb_ticks": a.xvfb_ticks, "xloop_ticks": a.xloop_ticks, "receiver_ticks": a.receiver_ticks,
            "frames_decoded": a.frames_decoded, "sender_exited_early": bool(a.sender_exited_early),
            "sender_exit_status": a.sender_exit_status,
            "sender_stop_s": a.sender_stop_s, "content_loop_died": not a.content_loop_alive,
            "content_loop_exit_status": a.content_loop_exit_status, "pids": {"sender": a.sender_pid, "xloop": a.xloop_pid},
            "thread_ticks_2s": thread_ticks(a.thread_ticks_2s), "thread_ticks_end": thread_ticks(a.thread_ticks_end),
            "loadavg": open("/proc/loadavg").read().split()[:3],
            "bridge_cpu_per_s": a.bridge_ticks / a.tick_hz / (a.t1 - a.t0) if a.tool == "portal" else None,
            "quantizer_mean": sender_events.quantizer_mean(sender_events.read(os.path.join(d, "sender.out")))
            if a.tool in ("screenshare", "portal") else None}
    json.dump(meta, open(os.path.join(d, "meta.json"), "w"), indent=1)

    try:
        w = json.load(open(os.path.join(d, "wire.json")))
        wire = f"{w['bytes'] * 8 / 1000 / meta['duration_s']:5.0f} kbps on the wire, {w['lost_packets']} lost"
    except Exception:
        wire = "no wire data"
    cpu = meta["cpu_ticks_end"] / meta["tick_hz"] / meta["duration_s"] if meta["cpu_ticks_end"] >= 0 else float("nan")
    lat = ""
    if meta["barcode"]:
        # Barcodes drawn in the sender's first 2 s are left out: its start-up is not its latency.
        s = latency.analyze(os.path.join(d, "latency.tsv"), os.path.join(d, "relay-frames.tsv"), int((a.t0 + 2) * 1000))
        nan = float("nan")
        lat = (f", latency p50 {s.get('p50_ms', nan):.0f} p95 {s.get('p95_ms', nan):.0f} ms "
               f"(receiver p50 {s.get('receiver_p50_ms', nan):.0f})")
    q = f", quantizer {meta['quantizer_mean']:4.1f}" if meta["quantizer_mean"] is not None else ""
    if meta["bridge_cpu_per_s"] is not None:
        q += f", bridge CPU {meta['bridge_cpu_per_s']:4.2f} s/s"
    print(f"  {meta['content']:7} {meta['tool']:11} run {meta['run']}: {meta['frames_decoded'] / meta['duration_s']:5.1f} fps decoded, "
          f"CPU {cpu:4.2f} s/s{q}, {wire}{lat}, exit {meta['sender_exit_status']}")


if __name__ == "__main__":
    main()
