#!/usr/bin/env python3
"""Aggregates the runs of one Scripts/bench invocation into a Markdown table, JSON and a PNG.

    report.py RAW_DIR RESULTS_DIR STAMP [--no-plot]

RAW_DIR holds config.json and one directory per run (meta.json from Scripts/bench,
wire.json from rtpcount.py, psnr.json from psnr.py, sender.out: screenshare's JSON events).
Writes RESULTS_DIR/latest.{md,json,png} and bench-STAMP.{md,json,png}; prints the table.
"""
import json
import os
import shutil
import statistics
import sys

TOOLS = ["screenshare", "ffmpeg", "gstreamer"]
CONTENTS = ["slides", "motion", "scroll"]

# (key, column title, format)
COLUMNS = [
    ("cpu_per_s", "CPU s/s", "{:.2f}"),
    ("rss_mb", "peak RSS MB", "{:.0f}"),
    ("fps_decoded", "fps decoded", "{:.1f}"),
    ("kbps", "kbit/s sent", "{:.0f}"),
    ("psnr", "Y-PSNR dB", "{:.1f}"),
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
        "psnr": psnr.get("psnr_mean"), "psnr_min": psnr.get("psnr_min"), "psnr_samples": psnr.get("samples", 0),
        "xvfb_cpu_per_s": meta["xvfb_ticks"] / tick / dur,
        "content_generator_cpu_per_s": meta["xloop_ticks"] / tick / dur,
        "receiver_cpu_per_s": meta["receiver_ticks"] / tick / dur,
        "sender_exited_early": meta["sender_exited_early"],
        "sender_exit_status": meta["sender_exit_status"],
        "loadavg": meta.get("loadavg"),
    }
    if meta["tool"] == "screenshare":
        events = []
        try:
            with open(os.path.join(d, "sender.out")) as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass
        except OSError:
            pass
        stopped = next((e for e in events if e.get("event") == "stopped"), None)
        stats = [e for e in events if e.get("event") == "stats"]
        if stopped:
            r["screenshare_stopped"] = {k: stopped.get(k) for k in (
                "reason", "frames_captured", "frames_encoded", "frames_sent", "keyframes_sent", "bytes_sent",
                "send_errors", "encode_errors", "width", "height", "duration_s")}
        if stats:
            p50 = [e["encode_ms_p50"] for e in stats if e.get("encode_ms_p50")]
            p95 = [e["encode_ms_p95"] for e in stats if e.get("encode_ms_p95")]
            r["screenshare_encode_ms_p50"] = statistics.median(p50) if p50 else None
            r["screenshare_encode_ms_p95"] = max(p95) if p95 else None
            r["screenshare_stats_fps"] = [e.get("fps") for e in stats]
        r["screenshare_errors"] = [e for e in events if e.get("event") in ("error", "warning")][:5]
    return r


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
    keys = [c[0] for c in COLUMNS] + ["cpu_steady_per_s", "fps_on_wire", "keyframes", "psnr_min",
                                      "receiver_cpu_per_s", "content_generator_cpu_per_s"]
    for (content, tool), rs in groups.items():
        entry = {"content": content, "tool": tool, "runs": len(rs), "fps_target": rs[0]["fps_target"]}
        for k in keys:
            entry[k] = summarize([r.get(k) for r in rs])
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
                 "motion at 30 fps. Values are the median (min–max over runs).")
    lines.append("")
    header = "| content | sender | " + " | ".join(c[1] for c in COLUMNS) + " |"
    lines += [header, "|" + "---|" * (len(COLUMNS) + 2)]
    for e in sorted(summary, key=lambda e: (CONTENTS.index(e["content"]), TOOLS.index(e["tool"]))):
        lines.append(f"| {e['content']} ({e['fps_target']} fps) | {e['tool']} | "
                     + " | ".join(cell(e[k], fmt) for k, _, fmt in COLUMNS) + " |")
    lines += ["",
              "- **CPU s/s**: user+system CPU seconds of the sender process (all threads) per second of "
              "stream, from /proc/PID/stat just before SIGINT; 1.00 = one core busy.",
              "- **peak RSS**: VmHWM of the sender just before it was stopped.",
              "- **fps decoded**: frames decoded by one independent receiver (ffmpeg, SDP, framemd5) per "
              "second of stream. screenshare sends a still screen at a keep-alive rate by design, so on "
              "slides fewer frames is expected, not a loss.",
              "- **kbit/s sent**: UDP payload bytes (RTP headers included, RTCP excluded) counted by a relay "
              "between sender and receiver.",
              "- **Y-PSNR**: about one decoded frame per second, compared (Y plane) with the best-matching "
              "source picture converted to yuv420p by ffmpeg.",
              "- **lost pkts**: RTP sequence gaps seen by the relay.",
              "- **Xvfb CPU**: X server CPU during the run; it includes drawing the content and the copies "
              "each sender's screen grabs cost the server.",
              ""]
    ss = [r for r in runs if r["tool"] == "screenshare" and r.get("screenshare_stopped")]
    if ss:
        lines += ["screenshare's own counters (per run):", "",
                  "| content | run | captured | encoded | sent | keyframes | encode ms p50 | encode ms p95 (max) |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in ss:
            s = r["screenshare_stopped"]
            p50 = r.get("screenshare_encode_ms_p50")
            p95 = r.get("screenshare_encode_ms_p95")
            lines.append(f"| {r['content']} | {r['run']} | {s['frames_captured']} | {s['frames_encoded']} | "
                         f"{s['frames_sent']} | {s['keyframes_sent']} | "
                         f"{'–' if p50 is None else f'{p50:.1f}'} | {'–' if p95 is None else f'{p95:.1f}'} |")
        lines.append("")
    early = [r for r in runs if r["sender_exited_early"]]
    for r in early:
        lines.append(f"**Warning**: {r['tool']} exited before the end of {r['content']} run {r['run']}.")
    md = "\n".join(lines) + "\n"

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
               ("kbps", "kbit/s sent"), ("psnr", "Y-PSNR (dB)"), ("rss_mb", "peak RSS (MB)")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4))
    width = 0.8 / max(len(tools), 1)
    colors = {"screenshare": "#1a3d7c", "ffmpeg": "#c0392b", "gstreamer": "#27ae60"}
    for ax, (key, title) in zip(axes, metrics):
        for i, tool in enumerate(tools):
            med, lo, hi = [], [], []
            for c in contents:
                e = next((e for e in summary if e["content"] == c and e["tool"] == tool), None)
                s = e and e.get(key)
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
