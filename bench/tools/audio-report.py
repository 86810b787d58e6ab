#!/usr/bin/env python3
"""The report of bench/audio.sh: the audio path's CPU and capture-to-send latency.

    audio-report.py WORK SECONDS WARMUP CONFIG OUT_DIR

WORK holds the two runs bench/audio.sh made, "audio" (--audio-app bench-app, default mic) and
"none" (--no-audio), each as PREFIX.t0 and PREFIX.t1 ("comm<TAB>ns" per thread: CPU time from
/proc/PID/task/*/schedstat at the measured window's start and end), PREFIX.w0 and PREFIX.w1
(the window's start and end, `date +%s.%N`) and PREFIX.events (the sender's --json events).
SECONDS and WARMUP are the script's --seconds and --warmup, CONFIG the build (release or debug).

Output: a Markdown table on stdout, the same in OUT_DIR/audio-latest.md, and OUT_DIR/audio-latest.json
(the audio threads' and the whole process's CPU per stream-second, the window's latency: the
median of the per-second p50 and p95 of the stats events at least WARMUP + 1 s after "started",
and the stopped event's audio counts). Exits non-zero when the threads ss-pulse and ss-audio
are not found by name.
"""
import json, os, statistics, sys, time
work, seconds, warmup, config, outdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def load(prefix):
    def table(path):
        rows = {}
        for line in open(path):
            comm, ns = line.rstrip("\n").split("\t")
            rows.setdefault(comm, []).append(int(ns))
        return rows
    t0, t1 = table(prefix + ".t0"), table(prefix + ".t1")
    wall = float(open(prefix + ".w1").read()) - float(open(prefix + ".w0").read())
    cpu = {c: (sum(t1[c]) - sum(t0.get(c, [0] * len(t1[c])))) / 1e9 for c in t1}
    events = [json.loads(l) for l in open(prefix + ".events") if l.startswith("{")]
    return cpu, wall, events

cpu, wall, events = load(work + "/audio")
cpu0, wall0, _ = load(work + "/none")
tap = cpu.get("ss-pulse", 0.0)
audio = cpu.get("ss-audio", 0.0)
if not tap or not audio:
    sys.exit(f"audio threads not found by name (ss-pulse, ss-audio): {sorted(cpu)}")
per_s = (tap + audio) / wall
total, total0 = sum(cpu.values()) / wall, sum(cpu0.values()) / wall0
start = next(e for e in events if e["event"] == "started")
t_start = time.mktime(time.strptime(start["time"][:19], "%Y-%m-%dT%H:%M:%S"))
window = [e for e in events if e["event"] == "stats" and e.get("audio_latency_ms_p50") is not None
          and time.mktime(time.strptime(e["time"][:19], "%Y-%m-%dT%H:%M:%S")) - t_start >= warmup + 1]
p50s = [e["audio_latency_ms_p50"] for e in window]
p95s = [e["audio_latency_ms_p95"] for e in window]
stopped = next(e for e in events if e["event"] == "stopped")
result = {
    "config": config, "seconds": round(wall, 2), "warmup_s": warmup,
    "audio_path_cpu_per_stream_s": round(per_s, 5),
    "tap_and_mic_thread_cpu_per_stream_s": round(tap / wall, 5),
    "mix_opus_send_thread_cpu_per_stream_s": round(audio / wall, 5),
    "process_cpu_per_stream_s_with_audio": round(total, 5),
    "process_cpu_per_stream_s_no_audio": round(total0, 5),
    "process_difference_per_stream_s": round(total - total0, 5),
    "latency_ms_p50_median": statistics.median(p50s) if p50s else None,
    "latency_ms_p95_median": statistics.median(p95s) if p95s else None,
    "latency_ms_p95_max": max(p95s) if p95s else None,
    "latency_seconds_sampled": len(window),
    "audio_packets_sent": stopped.get("audio_packets_sent"),
    "audio_silent_frames": stopped.get("audio_silent_frames"),
    "audio_underruns": stopped.get("audio_underruns"),
    "threads": {k: round(v / wall, 5) for k, v in sorted(cpu.items())},
}
md = f"""# Audio path ({config} build, {wall:.1f} s measured after {warmup} s)

`bench/audio.sh --seconds {seconds} --warmup {warmup}{' --debug' if config == 'debug' else ''}`: app tap (440 Hz app, a 2500 Hz app left out) + mic (1000 Hz) → mixer → Opus 64 kbit/s → RTP.

| measure | value |
|---|---|
| audio path CPU per stream-second (tap + mic thread + mix/Opus/send thread) | {per_s:.4f} core ({per_s * 100:.2f} % of one core) |
| &nbsp;&nbsp;libpulse thread (tap + mic reads into the mixer) | {tap / wall:.4f} |
| &nbsp;&nbsp;audio thread (mix, Opus, RTP send) | {audio / wall:.4f} |
| whole process, with audio / `--no-audio` / difference | {total:.4f} / {total0:.4f} / {total - total0:.4f} |
| capture-to-send latency, median of per-second p50 / p95 (max p95) | {result['latency_ms_p50_median']} / {result['latency_ms_p95_median']} ms ({result['latency_ms_p95_max']} ms), {len(window)} s sampled |
| audio packets sent, silent frames, mixer underruns (whole run) | {result['audio_packets_sent']}, {result['audio_silent_frames']}, {result['audio_underruns']} |
"""
print(md)
os.makedirs(outdir, exist_ok=True)
open(outdir + "/audio-latest.md", "w").write(md)
json.dump(result, open(outdir + "/audio-latest.json", "w"), indent=1, sort_keys=True)
