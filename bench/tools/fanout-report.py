#!/usr/bin/env python3
"""Report of Scripts/bench-fanout: RAW_DIR RESULTS_DIR NAME [--no-plot] → NAME.{md,json,png}."""
import json
import os
import sys

raw, results, name = sys.argv[1:4]
plot = "--no-plot" not in sys.argv
config = json.load(open(os.path.join(raw, "config.json")))
rows = []
# Native viewer counts are directories named N, browser (WHEP) ones whep-N.
def order(entry):
    kind, _, n = entry.rpartition("-")
    return (kind == "whep", int(n) if n.isdigit() else 0)

for entry in sorted(os.listdir(raw), key=order):
    d = os.path.join(raw, entry)
    if not (entry.removeprefix("whep-").isdigit() and os.path.exists(os.path.join(d, "meta.json"))):
        continue
    m = json.load(open(os.path.join(d, "meta.json")))
    load = json.loads(open(os.path.join(d, "load.out")).read().strip().splitlines()[-1])
    stats = [json.loads(l) for l in open(os.path.join(d, "window-stats.jsonl")) if l.strip()]
    stopped = [json.loads(l) for l in open(os.path.join(d, "serve.out")) if '"event":"stopped"' in l]
    commands = open(os.path.join(d, "commands.txt")).read().splitlines()
    n = m["viewers"]
    w = load["window"]
    secs = m["window_s"]
    avg = lambda k: sum(s.get(k, 0) for s in stats) / len(stats) if stats else float("nan")
    lost_in = (stats[-1].get("lost_in", 0) - stats[0].get("lost_in", 0)) if stats else 0
    send_errors = sum(s.get("send_errors", 0) for s in stats)
    # Gaps the viewers saw beyond their own socket drops. On loopback the presenter → relay hop
    # loses nothing unless the relay's receive queue overflows (`lost_in`, seen by every viewer),
    # so all of it is the relay's doing; `relay_forwarding_lost` leaves the input gaps out.
    relay_induced = max(0, w["lost"] - w["socket_drops"])
    rows.append({
        "viewers": n, "client": m.get("client", "native"), "window_s": secs,
        "relay_cpu_s_per_s": m["relay_ticks"] / m["tick_hz"] / secs,
        "presenter_cpu_s_per_s": m["presenter_ticks"] / m["tick_hz"] / secs,
        "load_tool_cpu_s_per_s": m["load_ticks"] / m["tick_hz"] / secs,
        "pkts_in_per_s": avg("packets_in"), "pkts_out_per_s": avg("packets_out"),
        "mbit_out_per_s": avg("kbps_out") / 1000,
        "relay_cpu_us_per_packet_out": 1e6 * m["relay_ticks"] / m["tick_hz"] / secs / avg("packets_out") if stats and avg("packets_out") else None,
        "viewer_expected": w["expected"], "viewer_received": w["rtp_packets"], "viewer_lost": w["lost"],
        "viewer_loss_percent": w["loss_percent"], "viewer_duplicates": w["duplicates"], "viewer_socket_drops": w["socket_drops"],
        "viewers_receiving": load["receiving"], "viewers_with_loss": w["viewers_with_loss"],
        "relay_input_lost": lost_in, "relay_send_errors": send_errors, "relay_induced_lost": relay_induced,
        "relay_forwarding_lost": max(0, relay_induced - n * lost_in),
        "relay_rss_mb": m["relay_rss_kb"] / 1024, "relay_peak_rss_mb": m["relay_hwm_kb"] / 1024,
        "keyframe_requests": sum(s.get("keyframe_requests", 0) for s in stats),
        "relay_totals": stopped[-1] if stopped else {}, "load_tool": load, "loadavg_end": m["loadavg"], "commands": commands,
        # --perf: `perf report --sort dso,symbol` lines over the window (the relay's samples)
        "perf": open(os.path.join(d, "perf.txt")).read().splitlines() if os.path.exists(os.path.join(d, "perf.txt")) else [],
    })

out = {"config": config, "rows": rows}
os.makedirs(results, exist_ok=True)
json.dump(out, open(os.path.join(results, name + ".json"), "w"), indent=1)

WHEP_TOOLS = {
    "c": "fanout-load -w: the offer's POST, ICE checks and consent, DTLS, SRTP and receiver reports as a browser, in C, no decoding",
    "aiortc": "bench/tools/whep-load.py: aiortc peers, ICE, DTLS and SRTP, no decoding",
}
lines = [
    f"# screenshare fan-out benchmark{' (' + config['label'] + ')' if config['label'] else ''}", "",
    f"Run {config['stamp']}; commit {config['commit']}; {config['cpu']} × {config['cores']} cores, kernel {config['kernel']}; "
    f"load average at start {config['loadavg_start']}. One 1080p VP8 stream at {config.get('bitrate', '2M')}bit/s (30 fps testsrc2) from "
    f"`screenshare start --room` through `screenshare serve` to N viewers on loopback: room viewers (native, "
    f"bench/tools/fanout-load.c) or browsers over WHEP ({WHEP_TOOLS[config.get('whep_tool', 'aiortc')]}); "
    f"SRTP profiles the viewers offer: {config.get('srtp_profiles', 'SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80')}; "
    f"{config['window_s']} s measured after every viewer receives; one viewer asks for a keyframe every "
    f"{config['pli_every_s']} s (keyframe bursts in the window).", "",
    "| viewers | client | relay CPU (cores) | µs CPU per packet out | pkt/s in | pkt/s out | Mbit/s out | viewer loss | relay-induced lost pkts | send errors | viewer socket drops | relay RSS MB | presenter CPU | load tool CPU |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    per = f"{r['relay_cpu_us_per_packet_out']:.2f}" if r['relay_cpu_us_per_packet_out'] else "–"
    client = "browser (WHEP)" if r["client"] == "whep" else "native"
    lines.append(f"| {r['viewers']} | {client} | {r['relay_cpu_s_per_s']:.3f} | {per} | {r['pkts_in_per_s']:.0f} | {r['pkts_out_per_s']:.0f} | "
                 f"{r['mbit_out_per_s']:.1f} | {r['viewer_loss_percent']:.3f} % ({r['viewer_lost']} of {r['viewer_expected']}) | "
                 f"{r['relay_induced_lost']} | {r['relay_send_errors']} | {r['viewer_socket_drops']} | {r['relay_rss_mb']:.0f} | "
                 f"{r['presenter_cpu_s_per_s']:.2f} | {r['load_tool_cpu_s_per_s']:.2f} |")
lines += [
    "",
    "- **relay CPU**: utime+stime of the `serve` process over the window (/proc/PID/stat) per second; 1.00 = one core. "
    "On loopback it includes delivering each datagram into the viewer's socket (the kernel does that in the sender's system call).",
    "- **pkt/s, Mbit/s**: mean of `serve`'s per-second `stats` events in the window (RTP only; RTCP and control not counted).",
    "- **viewer loss**: RTP sequence gaps over all viewers in the window (no NACKs are sent, so nothing is repaired).",
    "- **relay-induced lost**: gaps beyond the viewers' own socket drops (SO_RXQ_OVFL); includes gaps at the relay's input (`lost_in`, "
    "times the audience: on loopback only the relay's receive queue can lose them). **send errors**: datagrams the kernel refused the relay.",
    "- **relay RSS**: VmRSS at the end of the window.",
    "- **client**: each native viewer gets the packet SRTP-protected with its own keys, in batches of one `sendmmsg` per 64; "
    "each browser gets its own copy, its payload type, SSRC, sequence numbers and timestamps rewritten and SRTP-protected, "
    "one `sendto` each. The load tool shares the 2 cores with the relay and the presenter.",
    "",
    "Commands (per row, in order: relay, presenter, viewers):",
    "",
    "```",
]
for r in rows:
    lines += [f"# {r['viewers']} {'browser (WHEP)' if r['client'] == 'whep' else 'native'} viewers"] + r["commands"]
lines += ["```", ""]
for r in rows:
    if r["perf"]:
        lines += [f"Where the relay's time went, {r['viewers']} {'browser (WHEP)' if r['client'] == 'whep' else 'native'} viewers "
                  "(`perf record -g`, 999 Hz, the window; self time by library and function, ≥ 0.7 %):", "", "```"] + r["perf"] + ["```", ""]
open(os.path.join(results, name + ".md"), "w").write("\n".join(lines))
print("\n".join(lines[:8 + len(rows)]))

if plot:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4))
        ax2 = ax.twinx()
        for client, label, style in (("native", "native", "o-"), ("whep", "browsers (WHEP)", "^-")):
            mine = [r for r in rows if r["client"] == client]
            if not mine:
                continue
            xs = [r["viewers"] for r in mine]
            ax.plot(xs, [r["relay_cpu_s_per_s"] for r in mine], style, label=f"relay CPU (cores), {label}")
            ax2.plot(xs, [r["pkts_out_per_s"] / 1000 for r in mine], style.replace("-", "--"), color="tab:orange" if client == "native" else "tab:red",
                     label=f"kpkt/s out, {label}")
        ax.set_xlabel("viewers")
        ax.set_ylabel("relay CPU (cores)")
        ax2.set_ylabel("thousand packets/s out")
        ax.set_title(f"screenshare serve fan-out, 1080p at 2 Mbit/s{' (' + config['label'] + ')' if config['label'] else ''}")
        fig.legend(loc="upper left", bbox_to_anchor=(0.12, 0.88))
        fig.tight_layout()
        fig.savefig(os.path.join(results, name + ".png"), dpi=100)
    except ImportError:
        print("warning: no matplotlib; no chart", file=sys.stderr)
