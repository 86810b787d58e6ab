#!/usr/bin/env python3
"""class-report: the rows and the report of Scripts/bench-class.

    class-report.py row DIR --viewers N --tick-hz HZ     one class size: DIR/row.json, a line
    class-report.py report RAW RESULTS NAME               RESULTS/NAME.{md,json}

A row reads, in DIR: load.out (fanout-load -w -f's JSON, its last line), cpu.txt ("SECONDS
TICKS" lines, the presenter's CPU every 100 ms), burst_at (when the first offer was posted) and
presenter.out (its JSON events: `stats` has `keyframes_sent`).
"""
import datetime
import json
import os
import sys


def seconds(iso):
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def row(d, viewers, tick_hz):
    load = json.loads(open(os.path.join(d, "load.out")).read().strip().splitlines()[-1])
    burst = float(open(os.path.join(d, "burst_at")).read())
    samples = [tuple(map(float, line.split())) for line in open(os.path.join(d, "cpu.txt")) if len(line.split()) == 2]

    def rate(t0, t1):  # CPU s/s between the samples nearest t0 and t1
        a = min(samples, key=lambda s: abs(s[0] - t0))
        b = min(samples, key=lambda s: abs(s[0] - t1))
        return (b[1] - a[1]) / tick_hz / (b[0] - a[0]) if b[0] > a[0] else 0.0

    baseline = rate(burst - 1.0, burst)
    starts = [s[0] for s in samples if burst <= s[0] <= burst + 10]
    busiest = max((rate(t, t + 1.0), t - burst) for t in starts) if starts else (0.0, 0.0)
    stats = []
    for line in open(os.path.join(d, "presenter.out")):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "stats" and "keyframes_sent" in e:
            stats.append((seconds(e["time"]), e["keyframes_sent"]))
    before = [k for t, k in stats if t <= burst]
    keyframes = (stats[-1][1] - before[-1]) if stats and before else None
    fp = load.get("first_picture", {})
    r = {"viewers": viewers, "decoded": fp.get("decoded", 0), "keyframes_kept": fp.get("keyframes", 0),
         "width": fp.get("width"), "height": fp.get("height"),
         "first_picture_p50_ms": fp.get("p50_ms"), "first_picture_p95_ms": fp.get("p95_ms"),
         "first_picture_max_ms": fp.get("max_ms"), "first_picture_min_ms": fp.get("min_ms"),
         "decode_ms_mean": fp.get("decode_ms_mean"), "posts_refused": load.get("posts_refused", 0),
         "connected": load.get("handshakes", 0), "receiving": load.get("receiving", 0),
         "keyframes_for_burst": keyframes, "presenter_cpu_before": round(baseline, 3),
         "presenter_cpu_busiest_second": round(busiest[0], 3), "busiest_second_starts_s": round(busiest[1], 1),
         "loss_percent": load.get("total", {}).get("loss_percent"),
         "commands": open(os.path.join(d, "commands.txt")).read().splitlines()}
    json.dump(r, open(os.path.join(d, "row.json"), "w"), indent=1)
    print(f"  {viewers:4} browsers: first picture p50 {r['first_picture_p50_ms']} ms, p95 {r['first_picture_p95_ms']} ms, "
          f"max {r['first_picture_max_ms']} ms ({r['decoded']} decoded); {keyframes} keyframes; POSTs refused {r['posts_refused']}; "
          f"presenter CPU {baseline:.2f} → {busiest[0]:.2f} s/s")


def report(raw, results, name):
    config = json.load(open(os.path.join(raw, "config.json")))
    rows = []
    for entry in sorted(os.listdir(raw), key=lambda e: int(e) if e.isdigit() else 0):
        p = os.path.join(raw, entry, "row.json")
        if entry.isdigit() and os.path.exists(p):
            rows.append(json.load(open(p)))
    json.dump({"config": config, "rows": rows}, open(os.path.join(results, name + ".json"), "w"), indent=1)
    ms = lambda v: "–" if v is None else f"{v / 1000:.2f} s"
    lines = [
        f"# A class arriving{' (' + config['label'] + ')' if config['label'] else ''}", "",
        f"Run {config['stamp']}; commit {config['commit']}; {config['cpu']} × {config['cores']} cores, kernel {config['kernel']}; "
        f"load average at start {config['loadavg_start']}. A hosted room (`screenshare start --room class --listen … --open-room`, "
        f"1080p testsrc2 at 30 fps, {config['bitrate']}bit/s VP8, no audio); N browsers post their WHEP offers within one second "
        f"(bench/tools/fanout-load.c -w -f: the page's POST, ICE, DTLS and SRTP in C; a refused POST is sent again after 2 s, as the page does).", "",
        "| browsers | first picture p50 | p95 | max | pictures decoded | keyframes sent for the burst | POSTs refused (503) | presenter CPU, the second before → its busiest second after | loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['viewers']} | {ms(r['first_picture_p50_ms'])} | {ms(r['first_picture_p95_ms'])} | {ms(r['first_picture_max_ms'])} | "
                     f"{r['decoded']} of {r['viewers']} ({r['width']}x{r['height']}) | {r['keyframes_for_burst']} | {r['posts_refused']} | "
                     f"{r['presenter_cpu_before']:.2f} → {r['presenter_cpu_busiest_second']:.2f} s/s | {r['loss_percent']:.3f} % |")
    lines += [
        "",
        "- **first picture**: from a browser's first POST to its first whole keyframe's arrival, plus the time libvpx took to decode "
        "that keyframe (decoded after the run, one at a time, so that the decodes do not queue behind each other as they would not "
        "on N machines). What a page adds on top (its own decoder start-up, painting) is not in it.",
        "- **keyframes sent for the burst**: the presenter's `keyframes_sent` from the last `stats` before the burst to its end "
        "(no viewer asks for keyframes on its own).",
        "- **presenter CPU**: the `start` process hosts the relay, so this is the relay's work too (WHEP, ICE, DTLS handshakes, SRTP).",
        "",
        "Commands (per row: presenter, browsers):",
        "",
        "```",
    ]
    for r in rows:
        lines += [f"# {r['viewers']} browsers"] + r["commands"]
    lines.append("```")
    text = "\n".join(lines) + "\n"
    open(os.path.join(results, name + ".md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "row":
        args = sys.argv[3:]
        row(sys.argv[2], int(args[args.index("--viewers") + 1]), float(args[args.index("--tick-hz") + 1]))
    elif len(sys.argv) == 5 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
