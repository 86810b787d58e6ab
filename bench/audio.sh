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
    python3 bench/tools/udp-sink.py "$port" &
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

# The table (stdout) and bench/results/audio-latest.{md,json}.
python3 bench/tools/audio-report.py "$work" "$seconds" "$warmup" "$config" "$SCREENSHARE_ROOT/bench/results"
