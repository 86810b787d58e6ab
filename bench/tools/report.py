#!/usr/bin/env python3
"""Aggregates the runs of one Scripts/bench invocation into a Markdown table, JSON and a PNG.

    report.py RAW_DIR RESULTS_DIR STAMP [--no-plot]

RAW_DIR holds config.json and one directory per run (meta.json from Scripts/bench,
wire.json and relay-frames.tsv from rtpcount.py, psnr.json from psnr.py, latency.tsv from
latency.py, sender.out: screenshare's JSON events).
Writes RESULTS_DIR/latest.{md,json,png} and bench-STAMP.{md,json,png}; prints the table.
"""
import json
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import latency  # noqa: E402
import sender_events  # noqa: E402

TOOLS = ["screenshare", "ffmpeg", "gstreamer", "portal"]
CONTENTS = ["slides", "motion", "scroll", "latency", "clip"]
STAGES = ["capture", "convert", "encode", "send"]
# screenshare's threads whose CPU the stage table shows (their kernel names, Broadcaster.spawn).
THREADS = [("ss-capture", "capture thread"), ("ss-encode", "encode thread")]
# Latency and stage timings leave out the first seconds of a run (start-up: the receiver
# waits for the first keyframe and probes the stream, encoders are created).
WARMUP_S = 2

# (key, column title, format)
COLUMNS = [
    ("cpu_per_s", "CPU s/s", "{:.2f}"),
    ("rss_mb", "peak RSS MB", "{:.0f}"),
    ("fps_decoded", "fps decoded", "{:.1f}"),
    ("kbps", "kbit/s sent", "{:.0f}"),
    ("psnr", "Y-PSNR dB", "{:.1f}"),
    ("psnr_median", "Y-PSNR median dB", "{:.1f}"),
    ("lost_packets", "lost pkts", "{:.0f}"),
    ("xvfb_cpu_per_s", "Xvfb CPU s/s", "{:.2f}"),
]


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def run_record(d):
    meta = load(os.path.join(d, "meta.json"))
    if meta is None:
        return None
    wire = load(os.path.join(d, "wire.json"), {})
    psnr = load(os.path.join(d, "psnr.json"), {})
    slides = load(os.path.join(d, "slides.json"))
    dur = meta["duration_s"]
    tick = meta["tick_hz"]
    r = {
        "content": meta["content"], "tool": meta["tool"], "run": meta["run"], "duration_s": round(dur, 3),
        "fps_target": meta["fps_target"],
        "cpu_per_s": meta["cpu_ticks_end"] / tick / dur if meta["cpu_ticks_end"] >= 0 else None,
        "cpu_steady_per_s": (meta["cpu_ticks_end"] - meta["cpu_ticks_2s"]) / tick / (dur - 2)
        if meta["cpu_ticks_end"] >= 0 and meta["cpu_ticks_2s"] >= 0 else None,
        "rss_mb": meta["vmhwm_kb"] / 1024 if meta["vmhwm_kb"] >= 0 else None,
        "frames_decoded": meta["frames_decoded"],
        "fps_decoded": meta["frames_decoded"] / dur,
        "frames_on_wire": wire.get("frames"),
        "fps_on_wire": wire["frames"] / dur if "frames" in wire else None,
        "kbps": wire["bytes"] * 8 / 1000 / dur if "bytes" in wire else None,
        "packets": wire.get("rtp_packets"),
        "lost_packets": wire.get("lost_packets"),
        "keyframes": wire.get("keyframes"),
        "rtcp_sr": wire.get("rtcp_sr"), "rtcp_bye": wire.get("rtcp_bye"),
        "psnr": psnr.get("psnr_mean"), "psnr_median": psnr.get("psnr_median"), "psnr_min": psnr.get("psnr_min"), "psnr_samples": psnr.get("samples", 0),
        "xvfb_cpu_per_s": meta["xvfb_ticks"] / tick / dur,
        "content_generator_cpu_per_s": meta["xloop_ticks"] / tick / dur,
        "receiver_cpu_per_s": meta["receiver_ticks"] / tick / dur,
        "sender_exited_early": meta["sender_exited_early"],
        "sender_exit_status": meta["sender_exit_status"],
        "loadavg": meta.get("loadavg"),
        "quantizer_mean": meta.get("quantizer_mean"),
        "bridge_cpu_per_s": meta.get("bridge_cpu_per_s"),
    }
    t2, tend = meta.get("thread_ticks_2s") or {}, meta.get("thread_ticks_end") or {}
    if tend:
        # CPU of each thread from 2 s to the end, as cpu_steady_per_s (a thread started after 2 s
        # counts from 0).
        r["thread_cpu_steady_per_s"] = {name: (ticks - t2.get(name, 0)) / tick / (dur - 2) for name, ticks in tend.items()}
    if meta.get("barcode"):
        lat = latency.analyze(os.path.join(d, "latency.tsv"), os.path.join(d, "relay-frames.tsv"),
                              int((meta["t0_unix"] + WARMUP_S) * 1000))
        r["_latency_values"] = lat.pop("values_ms")
        r["latency"] = lat
        r["latency_p50_ms"] = lat.get("p50_ms")
    if slides and slides.get("frames"):
        r["slides"] = slides
        for k in ("opening_first_db", "later_first_db_min", "to60_max_s", "best_db_min"):
            r["slides_" + k] = slides.get(k)
        r["slides_reached60_share"] = slides["reached60"] / slides["judged"] if slides.get("judged") else None
    if meta["tool"] in ("screenshare", "portal"):
        events = sender_events.read(os.path.join(d, "sender.out"))
        stopped = next((e for e in events if e.get("event") == "stopped"), None)
        stats = [e for e in events if e.get("event") == "stats"]
        if stopped:
            r["screenshare_stopped"] = {k: stopped.get(k) for k in (
                "reason", "frames_captured", "frames_encoded", "frames_sent", "keyframes_sent", "bytes_sent",
                "send_errors", "encode_errors", "width", "height", "duration_s")}
        if stats:
            r["screenshare_stats_fps"] = [e.get("fps") for e in stats]
            # Per-second p50/p95 of each stage (0: no frame went through it that second),
            # after the warm-up.
            steady = stats[WARMUP_S:]
            r["_stage_seconds"] = {st: {q: [e[f"{st}_ms_{q}"] for e in steady if e.get(f"{st}_ms_{q}")]
                                        for q in ("p50", "p95")} for st in STAGES}
            r["screenshare_stages_ms"] = stage_summary([r])
        r["screenshare_errors"] = [e for e in events if e.get("event") in ("error", "warning")][:5]
    return r


def stage_summary(runs):
    """Stage timings over the steady seconds of RUNS: the median of the per-second p50s and of
    the per-second p95s, and the worst second's p95 (the stats events carry only p50/p95)."""
    out = {}
    for st in STAGES:
        p50 = [v for r in runs for v in r.get("_stage_seconds", {}).get(st, {}).get("p50", [])]
        p95 = [v for r in runs for v in r.get("_stage_seconds", {}).get(st, {}).get("p95", [])]
        out[st] = {"p50": round(statistics.median(p50), 2) if p50 else None,
                   "p95": round(statistics.median(p95), 2) if p95 else None,
                   "p95_max": round(max(p95), 2) if p95 else None, "seconds": len(p50)}
    return out


def latency_summary(runs):
    """Latency over all runs of a cell: percentiles of the pooled pictures, and the medians of
    the runs' sender and receiver parts."""
    values = [v for r in runs for v in r.get("_latency_values", [])]
    out = latency.summarize(values)
    out["frames_read"] = sum(r["latency"].get("frames_read", 0) for r in runs if "latency" in r)
    out["unreadable"] = sum(r["latency"].get("unreadable", 0) for r in runs if "latency" in r)
    for k in ("sender_p50_ms", "receiver_p50_ms", "receiver_p95_ms"):
        v = [r["latency"][k] for r in runs if k in r.get("latency", {})]
        out[k] = round(statistics.median(v), 1) if v else None
    return out


def fmt_ms(v):
    return "–" if v is None else f"{v:.0f}"


def summarize(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def cell(s, fmt):
    if s is None:
        return "–"
    text = fmt.format(s["median"])
    if s["n"] > 1:
        text += " (" + fmt.format(s["min"]) + "–" + fmt.format(s["max"]) + ")"
    return text


def main():
    raw, results, stamp = sys.argv[1], sys.argv[2], sys.argv[3]
    plot = "--no-plot" not in sys.argv[4:]
    config = load(os.path.join(raw, "config.json"), {})
    runs = [r for r in (run_record(os.path.join(raw, d)) for d in sorted(os.listdir(raw))
                        if os.path.isdir(os.path.join(raw, d))) if r]
    runs.sort(key=lambda r: (CONTENTS.index(r["content"]), TOOLS.index(r["tool"]), r["run"]))
    groups = {}
    for r in runs:
        groups.setdefault((r["content"], r["tool"]), []).append(r)
    summary = []
    keys = [c[0] for c in COLUMNS] + ["cpu_steady_per_s", "fps_on_wire", "keyframes", "psnr_min", "slides_opening_first_db",
                                      "slides_later_first_db_min", "slides_to60_max_s", "slides_best_db_min", "slides_reached60_share",
                                      "receiver_cpu_per_s", "content_generator_cpu_per_s", "bridge_cpu_per_s"]
    for (content, tool), rs in groups.items():
        entry = {"content": content, "tool": tool, "runs": len(rs), "fps_target": rs[0]["fps_target"]}
        for k in keys:
            entry[k] = summarize([r.get(k) for r in rs])
        if any("latency" in r for r in rs):
            entry["latency"] = latency_summary(rs)
        if tool == "screenshare" and any("_stage_seconds" in r for r in rs):
            entry["screenshare_stages_ms"] = stage_summary(rs)
        if tool == "screenshare" and any("thread_cpu_steady_per_s" in r for r in rs):
            entry["screenshare_thread_cpu_per_s"] = {
                name: summarize([r.get("thread_cpu_steady_per_s", {}).get(name) for r in rs]) for name, _ in THREADS}
        summary.append(entry)

    lines = ["# screenshare benchmark", ""]
    durations = config.get("durations", {})
    lines.append(f"Run {config.get('stamp', stamp)} ({'quick' if config.get('quick') else 'full'}): "
                 f"{config.get('runs')} run(s) per cell, durations "
                 + ", ".join(f"{c} {s} s" for c, s in durations.items())
                 + f"; commit {config.get('commit')}; {config.get('cpu')} × {config.get('cores')} cores; "
                 f"ffmpeg {config.get('ffmpeg')}, GStreamer {config.get('gstreamer')}; "
                 f"load average at start {config.get('loadavg_start')}.")
    lines.append("")
    lines.append("1920x1080 Xvfb, VP8 at 2 Mbit/s over RTP to 127.0.0.1; slides and scroll sent at 15 fps, "
                 "motion, latency and clip at 30 fps. Values are the median (min–max over runs); latency: "
                 "percentiles of all pictures of all runs.")
    lines.append("")
    header = "| content | sender | " + " | ".join(c[1] for c in COLUMNS) + " | latency ms p50 / p95 / p99 |"
    lines += [header, "|" + "---|" * (len(COLUMNS) + 3)]
    ordered = sorted(summary, key=lambda e: (CONTENTS.index(e["content"]), TOOLS.index(e["tool"])))
    for e in ordered:
        lat = e.get("latency")
        lat_cell = (f"{fmt_ms(lat.get('p50_ms'))} / {fmt_ms(lat.get('p95_ms'))} / {fmt_ms(lat.get('p99_ms'))}"
                    if lat else "–")
        lines.append(f"| {e['content']} ({e['fps_target']} fps) | {e['tool']} | "
                     + " | ".join(cell(e[k], fmt) for k, _, fmt in COLUMNS) + f" | {lat_cell} |")
    lines += ["",
              "- **CPU s/s**: user+system CPU seconds of the sender process (all threads) per second of "
              "stream, from /proc/PID/stat just before SIGINT; 1.00 = one core busy.",
              "- **peak RSS**: VmHWM of the sender just before it was stopped.",
              "- **fps decoded**: frames decoded by one independent receiver (ffmpeg, SDP, framemd5) per "
              "second of stream. screenshare sends a still screen at a keep-alive rate by design, so on "
              "slides fewer frames is expected, not a loss.",
              "- **kbit/s sent**: UDP payload bytes (RTP headers included, RTCP excluded) counted by a relay "
              "between sender and receiver.",
              "- **Y-PSNR**: about one decoded frame per second, the first frame included, compared (Y plane) "
              "with the best-matching source picture converted to yuv420p by ffmpeg: the mean of these "
              "samples, and their median (one poor sample, such as a first keyframe kept small, pulls the "
              "mean down and leaves the median).",
              "- **lost pkts**: RTP sequence gaps seen by the relay.",
              "- **portal** (when measured): screenshare through the xdg-desktop-portal and PipeWire "
              "(`--capture portal`), the same content bridged into PipeWire by GStreamer's ximagesrc → "
              "pipewiresink as whole pictures with no damage metadata (a compositor that reports none: "
              "the portal's worst case). The bridge stands for the compositor: its CPU is not the "
              "sender's, and is listed below the table.",
              "- **Xvfb CPU**: X server CPU during the run; it includes drawing the content and the copies "
              "each sender's screen grabs cost the server.",
              "- **latency**: capture-to-decode. The content loop draws a barcode of the current time "
              "(ms) 30 times a second; the receiver crops it out of every decoded frame and a reader "
              "notes the arrival; latency of a picture = first arrival of its barcode − the time in it. "
              f"The first {WARMUP_S} s of each run are left out. It includes the receiver's own delay "
              "(depacketize, decode, crop, pipe), the same for every sender: see the table below. "
              "Not measured on slides (a barcode would make the still slides move).",
              ""]
    bridges = [e for e in ordered if e["tool"] == "portal" and e.get("bridge_cpu_per_s")]
    if bridges:
        lines += ["The portal's bridge (the compositor's part, not the sender's), CPU s/s: "
                  + ", ".join(f"{e['content']} {cell(e['bridge_cpu_per_s'], '{:.2f}')}" for e in bridges) + ".", ""]
    lat_rows = [e for e in ordered if e.get("latency")]
    if lat_rows:
        lines += ["Latency in detail (all runs pooled; sender part = barcode drawn → the frame's last packet "
                  "through the relay; receiver part = relay → decoded frame read, medians of the runs):", "",
                  "| content | sender | pictures | p50 | p95 | p99 | max | sender part p50 | receiver part p50 / p95 | unreadable frames |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for e in lat_rows:
            lat = e["latency"]
            lines.append(f"| {e['content']} ({e['fps_target']} fps) | {e['tool']} | {lat['pictures']} | "
                         f"{fmt_ms(lat.get('p50_ms'))} | {fmt_ms(lat.get('p95_ms'))} | {fmt_ms(lat.get('p99_ms'))} | "
                         f"{fmt_ms(lat.get('max_ms'))} | {fmt_ms(lat.get('sender_p50_ms'))} | "
                         f"{fmt_ms(lat.get('receiver_p50_ms'))} / {fmt_ms(lat.get('receiver_p95_ms'))} | "
                         f"{lat['unreadable']} of {lat['frames_read']} |")
        lines.append("")
    slide_rows = [e for e in ordered if e.get("slides_best_db_min")]
    if slide_rows:
        lines += ["Slides one by one (every decoded frame matched to the slide it shows; median, min–max over runs): "
                  "the Y-PSNR of the opening slide's first frame and the worst first frame of a later slide (a new "
                  "slide readable at once: ≥ 40 dB), the share of slides shown ≥ 1 s that reached 60 dB, the longest "
                  "such wait from a slide's first frame, and the worst slide's best frame:", "",
                  "| sender | opening slide, first frame dB | later slides, worst first frame dB | slides reaching 60 dB "
                  "| longest wait for 60 dB, s | worst slide's best dB |",
                  "|---|---|---|---|---|---|"]
        for e in slide_rows:
            lines.append(f"| {e['tool']} | {cell(e.get('slides_opening_first_db'), '{:.1f}')} | "
                         f"{cell(e.get('slides_later_first_db_min'), '{:.1f}')} | "
                         f"{cell(e.get('slides_reached60_share'), '{:.0%}')} | {cell(e.get('slides_to60_max_s'), '{:.2f}')} | "
                         f"{cell(e.get('slides_best_db_min'), '{:.1f}')} |")
        lines.append("")
    stage_rows = [e for e in ordered if e.get("screenshare_stages_ms")]
    if stage_rows:
        lines += ["screenshare's stage timings, ms (from its `stats` events: median over the steady seconds of all "
                  "runs of the per-second p50 and p95, and the worst second's p95; capture = XShmGetImage of what "
                  "changed, convert = BGRA→I420, encode = VP8, send = packetize and send), and the CPU of its capture "
                  "and encode threads, s/s after the first 2 s (/proc/PID/task; median, min–max over runs):", "",
                  "| content | " + " | ".join(f"{st} p50 / p95 (max)" for st in STAGES)
                  + " | " + " | ".join(f"{label} CPU s/s" for _, label in THREADS) + " |",
                  "|---|" + "---|" * (len(STAGES) + len(THREADS))]
        for e in stage_rows:
            st = e["screenshare_stages_ms"]

            def f(v):
                return "–" if v is None else f"{v:.2f}"
            threads = e.get("screenshare_thread_cpu_per_s") or {}
            lines.append(f"| {e['content']} ({e['fps_target']} fps) | "
                         + " | ".join(f"{f(st[k]['p50'])} / {f(st[k]['p95'])} ({f(st[k]['p95_max'])})"
                                      for k in STAGES)
                         + " | " + " | ".join(cell(threads.get(name), "{:.3f}") for name, _ in THREADS) + " |")
        lines.append("")
    ss = [r for r in runs if r["tool"] == "screenshare" and r.get("screenshare_stopped")]
    if ss:
        lines += ["screenshare's own counters (per run):", "",
                  "| content | run | captured | encoded | sent | keyframes | mean quantizer (0–63) |",
                  "|---|---|---|---|---|---|---|"]
        for r in ss:
            s = r["screenshare_stopped"]
            q = r.get("quantizer_mean")
            lines.append(f"| {r['content']} | {r['run']} | {s['frames_captured']} | {s['frames_encoded']} | "
                         f"{s['frames_sent']} | {s['keyframes_sent']} | {'–' if q is None else f'{q:.1f}'} |")
        lines.append("")
    early = [r for r in runs if r["sender_exited_early"]]
    for r in early:
        lines.append(f"**Warning**: {r['tool']} exited before the end of {r['content']} run {r['run']}.")
    md = "\n".join(lines) + "\n"

    for r in runs:  # internal: pooled above, too bulky for the JSON
        r.pop("_latency_values", None)
        r.pop("_stage_seconds", None)
    doc = {"config": config, "summary": summary, "runs": runs}
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, f"bench-{stamp}.md"), "w") as f:
        f.write(md)
    with open(os.path.join(results, f"bench-{stamp}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    shutil.copyfile(os.path.join(results, f"bench-{stamp}.md"), os.path.join(results, "latest.md"))
    shutil.copyfile(os.path.join(results, f"bench-{stamp}.json"), os.path.join(results, "latest.json"))
    print(md)
    if plot:
        try:
            draw(summary, os.path.join(results, f"bench-{stamp}.png"))
            shutil.copyfile(os.path.join(results, f"bench-{stamp}.png"), os.path.join(results, "latest.png"))
        except ImportError:
            print("warning: matplotlib is missing; no PNG chart (pip install matplotlib)", file=sys.stderr)


def draw(summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    contents = [c for c in CONTENTS if any(e["content"] == c for e in summary)]
    tools = [t for t in TOOLS if any(e["tool"] == t for e in summary)]
    metrics = [("cpu_per_s", "sender CPU (s per s)"), ("fps_decoded", "frames decoded per s"),
               ("kbps", "kbit/s sent"), ("psnr", "Y-PSNR (dB)"), ("rss_mb", "peak RSS (MB)"),
               ("latency", "latency p50 ms (bar: p95)")]
    cols = 3
    rows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.8 * rows), squeeze=False)
    axes = axes.reshape(-1)
    width = 0.8 / max(len(tools), 1)
    colors = {"screenshare": "#1a3d7c", "ffmpeg": "#c0392b", "gstreamer": "#27ae60", "portal": "#8e44ad"}
    for ax, (key, title) in zip(axes, metrics):
        for i, tool in enumerate(tools):
            med, lo, hi = [], [], []
            for c in contents:
                e = next((e for e in summary if e["content"] == c and e["tool"] == tool), None)
                s = e and e.get(key)
                if key == "latency":  # the p50, with a bar up to the p95
                    p50 = s.get("p50_ms") if s else None
                    med.append(p50 or 0)
                    lo.append(0)
                    hi.append(s["p95_ms"] - p50 if p50 is not None else 0)
                    continue
                med.append(s["median"] if s else 0)
                lo.append(s["median"] - s["min"] if s else 0)
                hi.append(s["max"] - s["median"] if s else 0)
            xs = [j + (i - (len(tools) - 1) / 2) * width for j in range(len(contents))]
            ax.bar(xs, med, width, yerr=[lo, hi], label=tool, color=colors.get(tool), capsize=3)
        ax.set_xticks(range(len(contents)))
        ax.set_xticklabels(contents)
        ax.set_title(title)
    axes[0].legend()
    fig.suptitle("screenshare vs ffmpeg vs GStreamer — 1080p VP8 2 Mbit/s (median, min–max)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
