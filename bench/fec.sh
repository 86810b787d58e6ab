#!/usr/bin/env bash
# Forward error correction against resends alone, on a lossy path with a long round trip.
#
#   bench/fec.sh [--seeds "1 2 3"] [--delay MS] [--loss FRACTION] [--seconds N] [--debug]
#
# For each seed and each of `--fec auto` and `--fec off`: a `watch --sdp` that sends transport
# feedback (its SDP names the extension), Scripts/lossy-proxy in front of it (--loss both ways,
# --delay ± 10 ms on the way to the viewer: a round trip of about --delay), and
# `start --to` the proxy with 640x360 motion (ffmpeg's testsrc2 as --input) at 15 fps,
# `--bitrate 1M --content motion`. Prints one line per run: what the viewer reported frozen,
# frames decoded of those sent, packets FEC recovered, NACKs, keyframe requests, FEC's share
# of the bytes sent, and the picture size the sender ended at. Defaults: seeds 1–3, 100 ms,
# 5 %, 30 s (the numbers in the README's "Forward error correction").
set -euo pipefail
source "$(dirname "$0")/../Scripts/lib/common.sh"
cd "$SCREENSHARE_ROOT"

seeds="1 2 3"
delay=100
loss=0.05
seconds=30
config=release
while (($#)); do
    case "$1" in
        --seeds) seeds="$2"; shift 2 ;;
        --delay) delay="$2"; shift 2 ;;
        --loss) loss="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --debug) config=debug; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ "$delay" =~ ^[0-9]+$ && "$delay" -ge 10 ]] || die "--delay: a whole number of ms, at least 10"
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 5 ]] || die "--seconds: a whole number, at least 5"

ensure_packages "${BUILD_PACKAGES[@]}" ffmpeg python3
build_screenshare "$config"
binary="$SCREENSHARE_BIN"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ffmpeg -nostdin -loglevel error -f lavfi -i testsrc2=size=640x360:rate=15 -frames:v 60 -pix_fmt nv12 -f rawvideo -y "$work/motion.nv12"

run() {
    local mode=$1 seed=$2 dir="$work/$1-$2"
    mkdir -p "$dir"
    local viewer=$((20000 + RANDOM % 10000 * 2)) proxy
    proxy=$((viewer + 100))
    cat > "$dir/v.sdp" <<SDP
v=0
o=- 0 0 IN IP4 127.0.0.1
s=screenshare
c=IN IP4 127.0.0.1
t=0 0
m=video $viewer RTP/AVP 96
a=rtpmap:96 VP8/90000
a=rtcp:$((viewer + 1))
a=rtcp-fb:96 nack
a=rtcp-fb:96 nack pli
a=rtcp-fb:96 transport-cc
a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
a=recvonly
SDP
    "$binary" watch --sdp "$dir/v.sdp" --headless --duration $((seconds + 2)) --json > "$dir/viewer.json" 2> "$dir/viewer.err" &
    local viewer_pid=$!
    sleep 0.5
    python3 Scripts/lossy-proxy --listen "$proxy" --to "127.0.0.1:$viewer" --loss "$loss" --delay "$delay" --jitter 10 --all \
        --seed "$seed" > "$dir/proxy.json" 2>&1 &
    local proxy_pid=$!
    sleep 0.5
    "$binary" start --to "127.0.0.1:$proxy" --input "$work/motion.nv12" --input-format nv12 --input-size 640x360 --fps 15 \
        --no-audio --json --bitrate 1M --content motion --duration "$seconds" --fec "$mode" > "$dir/sender.json" 2> "$dir/sender.err"
    wait "$viewer_pid" || true
    kill -INT "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
    python3 - "$mode" "$seed" "$dir" <<'PY'
import json, sys
mode, seed, d = sys.argv[1:4]
def stopped(name):
    events = [json.loads(l) for l in open(f"{d}/{name}.json") if l.startswith("{")]
    return [e for e in events if e.get("event") == "stopped"][-1]
v, s = stopped("viewer"), stopped("sender")
print(f"--fec {mode:4} seed {seed}: frozen {v['total_freezes_duration_s']:.2f} s in {v['freeze_count']} freezes, "
      f"decoded {v['frames_decoded']} of {s['frames_sent']}, FEC recovered {v['fec_recovered']}, NACKs {v['nack_count']}, "
      f"PLIs {v['pli_count']}, FEC {100 * s['fec_bytes'] / max(1, s['bytes_sent']):.0f} % of the bytes, ended at {s['width']}x{s['height']}")
PY
}

log "FEC against resends alone: ${loss} loss both ways, ${delay} ± 10 ms, ${seconds} s per run"
for seed in $seeds; do
    for mode in auto off; do run "$mode" "$seed"; done
done
