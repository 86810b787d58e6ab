#!/usr/bin/env bash
# The audio path's own cost and latency, apart from the video bench (Scripts/bench).
#
#   bench/audio.sh [--seconds N] [--warmup N] [--debug]
#
# Starts a private PulseAudio (null sinks "speakers" and "virtmic", as Scripts/test does), plays
# a 440 Hz tone as the shared application ("bench-app"), a 2500 Hz tone as another application
# (which the tap must leave out) and a 1000 Hz tone into the virtual microphone, and runs
# `screenshare start --audio-app bench-app` (mic: the default source) with a tiny 64x64 --input
# video, sending to a local UDP sink. Over the measured window (after --warmup seconds) it reads
# the CPU time of each thread from /proc/PID/task/*/schedstat:
#   - "ss-pulse"  libpulse's mainloop thread: the app tap and the mic, samples into the mixer
#   - "ss-audio"  the audio thread: mix, Opus encode, RTP send
# Their sum per stream-second is the audio path alone. As a cross-check it runs the same
# broadcast with --no-audio and reports the difference of the whole process's CPU.
# Capture-to-send latency comes from the sender's own `stats` events (audio_latency_ms_p50/p95
# each second: from the capture of a frame's oldest sample, as PulseAudio's timing reports it,
# to the return of its send); the window's per-second values are summarised.
# Results: a table on stdout and bench/results/audio-latest.{md,json}.
set -euo pipefail
source "$(dirname "$0")/../Scripts/lib/common.sh"
cd "$SCREENSHARE_ROOT"

seconds=20
warmup=4
config=release
while (($#)); do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --debug) config=debug; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 5 ]] || die "--seconds: a whole number, at least 5"
[[ "$warmup" =~ ^[0-9]+$ && "$warmup" -ge 3 ]] || die "--warmup: a whole number, at least 3 (PulseAudio settles)"

ensure_packages "${BUILD_PACKAGES[@]}" pulseaudio pulseaudio-utils python3 procps
build_screenshare "$config"
bin="$SCREENSHARE_BIN"

work="$(mktemp -d /tmp/screenshare-audio-bench.XXXXXX)"
# Everything started is stopped on exit, and the files removed (common.sh).
cleanup_on_exit
CLEANUP_PATHS+=("$work")
start_pulseaudio

# Tones: 0.25 amplitude, 48 kHz stereo s16, long enough for the run.
for f in 440 1000 2500; do
    python3 Scripts/lib/tones.py write "$work/tone-$f.raw" "$f" $((warmup + seconds + 10))
done
head -c $((64 * 64 * 3 / 2)) /dev/zero | tr '\0' '\200' >"$work/tiny.nv12"

# Reads "comm ns" for every thread of a process.
threads() { local t; for t in /proc/"$1"/task/*; do printf '%s\t%s\n' "$(cat "$t/comm")" "$(cut -d' ' -f1 "$t/schedstat")"; done 2>/dev/null; }

# run MODE OUT: one broadcast; MODE is "audio" or "none" (--no-audio).
run() {
    local mode="$1" out="$2" port=$((30000 + RANDOM % 4000 * 4))
    # A UDP sink on PORT..PORT+3, so sends succeed (a refused send is not a sent frame).
    python3 -c '
import select, signal, socket, sys
base = int(sys.argv[1]); socks = []
for p in range(base, base + 4):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", p)); socks.append(s)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    for s in select.select(socks, [], [])[0]: s.recv(65536)
' "$port" &
    local sink=$!
    RUN_PIDS+=("$sink")
    sleep 0.3
    local audio=(--audio-app bench-app)
    [[ "$mode" == none ]] && audio=(--no-audio)
    "$bin" start --to "127.0.0.1:$port" --input "$work/tiny.nv12" --input-size 64x64 --input-fps 5 --fps 5 \
        "${audio[@]}" --duration $((warmup + seconds + 1)) --json >"$out.events" 2>"$out.log" &
    local pid=$!
    RUN_PIDS+=("$pid")
    wait_line "$out.events" '"event":"started"' 5 "$pid" || { cat "$out.log" >&2; die "screenshare did not start ($mode)"; }
    if [[ "$mode" == audio ]]; then
        pacat --raw --format=s16le --rate=48000 --channels=2 --property=application.name=bench-app "$work/tone-440.raw" & RUN_PIDS+=($!)
        pacat --raw --format=s16le --rate=48000 --channels=2 --property=application.name=other-app "$work/tone-2500.raw" & RUN_PIDS+=($!)
        pacat --raw --format=s16le --rate=48000 --channels=2 --property=application.name=mic-feeder --device=virtmic "$work/tone-1000.raw" & RUN_PIDS+=($!)
    fi
    sleep "$warmup"
    threads "$pid" >"$out.t0"; date +%s.%N >"$out.w0"
    sleep "$seconds"
    threads "$pid" >"$out.t1"; date +%s.%N >"$out.w1"
    wait "$pid" || die "screenshare exited with $? ($mode): $(cat "$out.log")"
    # The players and the sink (and screenshare, already gone).
    stop_run_pids
}

log "run 1/2: --audio-app bench-app + default mic, ${seconds} s measured after ${warmup} s"
run audio "$work/audio"
log "run 2/2: --no-audio, the same video"
run none "$work/none"

python3 - "$work" "$seconds" "$warmup" "$config" "$SCREENSHARE_ROOT/bench/results" <<'EOF'
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
EOF
