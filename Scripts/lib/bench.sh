# What the two benchmarks, Scripts/bench and Scripts/bench-fanout, share: where results go, the
# binary they measure, their C tools, reading a process's CPU time and memory, stopping it.
# Sourced after common.sh, not run.
# shellcheck shell=bash disable=SC2034 # its variables are for the scripts that source it

# Results in bench/results (tracked: latest.*, fanout*.*); raw data of each run and the compiled
# tools under bench/results/tmp (ignored by git).
RESULTS="$SCREENSHARE_ROOT/bench/results"
TMP="$RESULTS/tmp"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"

# use_or_build_screenshare: the binary to measure is $SCREENSHARE_BIN when set (the benchmarks'
# usage documents it: to measure another build), else this tree's release build.
use_or_build_screenshare() {
    if [[ -n "${SCREENSHARE_BIN:-}" ]]; then
        [[ -x "$SCREENSHARE_BIN" ]] || die "SCREENSHARE_BIN=$SCREENSHARE_BIN is not executable"
    else
        build_screenshare release
    fi
}

# want_matplotlib: the PNG chart needs matplotlib; without it the report is written all the same.
want_matplotlib() {
    python3 -c 'import matplotlib' 2>/dev/null && return 0
    pip install -q matplotlib 2>/dev/null || log "warning: matplotlib is not installable; no PNG chart"
}

# build_tool SOURCE BINARY [LIBS...]: compiles one of bench/tools/*.c when BINARY is missing or
# older than SOURCE.
build_tool() {
    local src="$1" bin="$2"
    shift 2
    if [[ ! -x "$bin" || "$src" -nt "$bin" ]]; then
        log "compiling $src"
        cc -O2 -Wall -Wextra -o "$bin" "$src" "$@"
    fi
}

# keep_last_3 PREFIX: removes all but the newest 3 raw-data folders PREFIX* (their names end in
# a UTC stamp, so they sort by time), so that bench/results/tmp does not grow run after run.
keep_last_3() {
    # shellcheck disable=SC2012 # names are ours: stamps, no spaces
    ls -1d "$1"* 2>/dev/null | sort | head -n -3 | xargs -r rm -rf
}

# bench_content CONTENT [BARCODE_ARGS...]: the senders' frame rate (CONTENT_FPS) and the
# content loop's arguments (CONTENT_XLOOP) for one of the contents make-content.sh renders, with
# BARCODE_ARGS (xloop's -b/-B) where the content has a barcode (not on slides).
bench_content() {
    local c="$1"
    shift
    case "$c" in
        slides) CONTENT_FPS=15; CONTENT_XLOOP=(-r 0.2 "$TMP/content/slides.bgrx") ;;
        motion) CONTENT_FPS=30; CONTENT_XLOOP=(-r 30 "$@" "$TMP/content/motion.bgrx") ;;
        scroll) CONTENT_FPS=15; CONTENT_XLOOP=(-r 30 -S 4 "$@" "$TMP/content/scroll.bgrx") ;;
        latency) CONTENT_FPS=30; CONTENT_XLOOP=(-r 0.2 -n 1 "$@" "$TMP/content/slides.bgrx") ;;
        clip) CONTENT_FPS=30; CONTENT_XLOOP=(-r 30 -R 1240,600,640,360 "$@" "$TMP/content/clip.bgrx") ;;
        *) die "unknown content '$c'" ;;
    esac
}

# For config.json: the commit measured (+dirty with uncommitted changes) and the CPU model.
commit_label() { echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)"; }
cpu_model() { awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo; }

# cpu_ticks PID: utime+stime of PID (all its threads) in clock ticks, TICK a second. Fails once
# PID is gone. The command name in /proc/PID/stat may hold spaces: fields count from its ")".
TICK="$(getconf CLK_TCK)"
cpu_ticks() {
    local s f
    s="$(<"/proc/$1/stat")" || return 1
    read -ra f <<<"${s##*) }"
    echo $((f[11] + f[12]))
}
# thread_ticks PID: utime+stime of each of PID's threads in clock ticks, summed by thread name,
# as NAME=TICKS words (screenshare names its threads ss-capture, ss-encode, …; spaces in a name
# become _). A thread that ended takes its ticks with it. Fails once PID is gone.
thread_ticks() {
    local t name ticks out=()
    local -A sum=()
    for t in /proc/"$1"/task/*; do
        name="$(<"$t/comm")" 2>/dev/null && ticks="$(cpu_ticks "$1/task/${t##*/}")" || continue
        name="${name// /_}"
        sum[$name]=$((${sum[$name]:-0} + ticks))
    done
    ((${#sum[@]})) || return 1
    for name in "${!sum[@]}"; do out+=("$name=${sum[$name]}"); done
    echo "${out[*]}"
}
# status_kb PID KEY: a value in kB from /proc/PID/status (VmRSS, VmHWM: the peak RSS).
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

# wait_gone PID SECONDS: waits up to SECONDS for PID to end; fails if it is still running.
wait_gone() {
    local i
    for ((i = 0; i < $2 * 20; i++)); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    return 1
}
# stop_pid PID SIGNAL SECONDS: sends SIGNAL, waits up to SECONDS for PID to end, then SIGKILL;
# PID's exit status goes to STOP_RC.
STOP_RC=0
stop_pid() {
    kill -"$2" "$1" 2>/dev/null || true
    wait_gone "$1" "$3" || true
    kill -KILL "$1" 2>/dev/null || true
    STOP_RC=0
    wait "$1" 2>/dev/null || STOP_RC=$?
}
