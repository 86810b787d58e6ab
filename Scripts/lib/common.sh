# Shared helpers for Scripts/* and bench/audio.sh: package installation, the release build,
# private Xvfb and PulseAudio, waiting for a process to say it is ready, clean-up.
# Sourced, not run. Every function is idempotent.
# shellcheck shell=bash disable=SC2034 # its variables are for the scripts that source it

SCREENSHARE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PATH="$PATH:/opt/swift/usr/bin"

# Debian packages: build dependencies, then the real components tests and demos use.
BUILD_PACKAGES=(pkg-config libx11-dev libxext-dev libxdamage-dev libxfixes-dev libxrandr-dev libxcomposite-dev
                libyuv-dev libvpx-dev libavformat-dev libopus-dev libpulse-dev zlib1g-dev libssl-dev libsrtp2-dev
                libqrencode-dev libglib2.0-dev libpipewire-0.3-dev)
RUNTIME_PACKAGES=(xvfb x11-utils x11-xserver-utils xdotool imagemagick fonts-dejavu-core ffmpeg
                  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
                  gstreamer1.0-plugins-bad python3-gi gir1.2-gstreamer-1.0 procps pulseaudio pulseaudio-utils python3 python3-venv
                  chromium chromium-driver firefox-esr zbar-tools iproute2 nftables tshark libnss3-tools openssl curl
                  dbus-daemon xdg-desktop-portal pipewire pipewire-bin wireplumber gstreamer1.0-pipewire python3-dbus)

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_packages PKG...: installs the Debian packages that are not installed yet.
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_janus: Debian's Janus for the tests of `--janus`, which run Janus with a configuration
# of their own. The package enables and starts a system-wide janus.service; when this script is
# what installed it, that service is stopped and disabled again (nothing listens that the user
# did not ask for).
ensure_janus() {
    dpkg-query -W -f='${Status}' janus 2>/dev/null | grep -q 'install ok installed' && return 0
    ensure_packages janus
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    if [[ -d /run/systemd/system ]]; then
        $sudo systemctl disable --now janus.service >/dev/null 2>&1 || true
        log "janus installed; its system service stopped and disabled (the tests start their own)"
    fi
}

# ensure_python_clients: a virtualenv in .build-python with the test clients from PyPI that are
# not ours (aiortc: a WHEP viewer; selenium: drives Chromium; marionette-driver: drives Firefox);
# exports SCREENSHARE_PYTHON.
ensure_python_clients() {
    local venv="$SCREENSHARE_ROOT/.build-python"
    if [[ ! -x "$venv/bin/python" ]]; then
        log "making $venv (Python test clients)"
        /usr/bin/python3 -m venv "$venv" || die "cannot make a Python virtualenv (python3-venv)"
    fi
    if ! "$venv/bin/python" -c 'import aiortc, numpy, selenium, marionette_driver' 2>/dev/null; then
        log "installing aiortc, numpy, selenium and marionette-driver from PyPI into $venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check aiortc numpy selenium marionette-driver >/dev/null ||
            die "cannot install aiortc, numpy, selenium and marionette-driver from PyPI"
    fi
    export SCREENSHARE_PYTHON="$venv/bin/python"
}

ensure_swift() {
    command -v swift >/dev/null || die "Swift 6 toolchain not found (looked in PATH and /opt/swift/usr/bin); install it from swift.org"
}

# screenshare_version: this tree's version, from git. Tags vX.Y.Z are releases: at one, X.Y.Z;
# N commits after one, X.Y.Z+N.gHASH; before the first, NEXT_VERSION~dev.N.gHASH (N counting
# every commit; "~" sorts before NEXT_VERSION, as dpkg compares versions). Changes not committed
# add ".dirty". Without git: NEXT_VERSION~dev. A "-" in a tag (v1.0.0-rc1) becomes "~".
NEXT_VERSION=0.1.0
screenshare_version() {
    local root="$SCREENSHARE_ROOT" d hash n dirty=""
    if ! git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1; then
        echo "$NEXT_VERSION~dev"; return 0
    fi
    [[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]] || dirty=".dirty"
    hash="$(git -C "$root" rev-parse --short=7 HEAD)"
    if d="$(git -C "$root" describe --tags --match 'v[0-9]*' --long --abbrev=7 HEAD 2>/dev/null)" &&
        [[ "$d" =~ ^v(.+)-([0-9]+)-g[0-9a-f]+$ ]]; then
        local tag="${BASH_REMATCH[1]//-/\~}"
        n="${BASH_REMATCH[2]}"
        if [[ "$n" == 0 && -z "$dirty" ]]; then echo "$tag"; else echo "$tag+$n.g$hash$dirty"; fi
    else
        n="$(git -C "$root" rev-list --count HEAD)"
        echo "$NEXT_VERSION~dev.$n.g$hash$dirty"
    fi
}

# write_version_header: writes the version into Sources/CBuildInfo/version.h (not committed),
# which `screenshare --version` prints, when it changed since the last build; build_info.c is
# touched then, because a header that did not exist at the last build is not among its
# dependencies.
write_version_header() {
    local h="$SCREENSHARE_ROOT/Sources/CBuildInfo/version.h" line
    line="#define SCREENSHARE_VERSION \"$(screenshare_version)\""
    [[ -f "$h" && "$(<"$h")" == "$line" ]] && return 0
    printf '%s\n' "$line" >"$h"
    touch "$SCREENSHARE_ROOT/Sources/CBuildInfo/build_info.c"
}

# The release build is the package's (Scripts/package): the Swift runtime linked statically, so
# the binary needs only Debian's libraries, and its relocations resolved and made read-only at
# start (full RELRO), as Debian's hardening does. The demo and the benchmarks run this binary:
# what they measure is what the package installs.
# It is linked by the toolchain's lld, for what keeps the pages the process maps few:
# - relative relocations packed (DT_RELR, glibc 2.36): 13 kB where 72 000 entries took 1.7 MB,
#   all read at every start;
# - no symbol exported but what the libraries need (the toolchain's static-stdlib arguments ask
#   for all: 2.4 MB of symbol tables that every library's symbol lookup went through);
# - the functions that run placed together at the start of .text, in the order of
#   Scripts/lib/screenshare.order (made by
#   Scripts/bench-callgrind --order-file): the kernel maps blocks of pages around each page
#   touched, and code that ran scattered through 17 MB made half of it resident. A function the
#   list does not name (new code) is linked after them, as before.
RELEASE_BUILD_FLAGS=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld
                     -Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
                     -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic
                     -Xlinker "--symbol-ordering-file=$SCREENSHARE_ROOT/Scripts/lib/screenshare.order"
                     -Xlinker --no-warn-symbol-ordering)

# forget_stale_link [BIN]: SwiftPM does not know that the link order is an input of the release
# binary; when the order file is newer than the binary (BIN, or the release build's), the binary
# is removed, so that the next release build links it again.
forget_stale_link() {
    local bin="${1:-}"
    [[ -n "$bin" ]] || bin="$(swift build "${RELEASE_BUILD_FLAGS[@]}" --show-bin-path)/screenshare"
    if [[ -f "$bin" && "$SCREENSHARE_ROOT/Scripts/lib/screenshare.order" -nt "$bin" ]]; then
        rm -f "$bin"
    fi
}

# build_screenshare [CONFIG]: builds the screenshare binary (CONFIG release, the default, with
# RELEASE_BUILD_FLAGS, or debug) and sets SCREENSHARE_BIN to it. Quick when nothing changed since
# the last build.
build_screenshare() {
    local config="${1:-release}" flags
    ensure_swift
    log "building screenshare ($config)"
    write_version_header
    if [[ "$config" == release ]]; then flags=("${RELEASE_BUILD_FLAGS[@]}"); else flags=(-c "$config"); fi
    SCREENSHARE_BIN="$(swift build "${flags[@]}" --show-bin-path)/screenshare"
    if [[ "$config" == release ]]; then forget_stale_link "$SCREENSHARE_BIN"; fi
    swift build "${flags[@]}" --product screenshare >/dev/null
}

# wait_line FILE TEXT SECONDS PID: waits until FILE contains TEXT (a grep pattern), at most
# SECONDS; fails at once if PID ends first (its errors say why: no point waiting them out).
wait_line() { wait_count "$1" "$2" 1 "$3" "$4"; }

# wait_count FILE PATTERN N SECONDS PID: waits until N lines of FILE match PATTERN; returns 1 if
# PID exits first or SECONDS pass.
wait_count() {
    local i n
    for ((i = 0; i < $4 * 20; i++)); do
        n=$(grep -c "$2" "$1" 2>/dev/null) || true
        ((${n:-0} >= $3)) && return 0
        kill -0 "$5" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# start_xvfb: starts a private Xvfb (1920x1080x24, MIT-SHM, DAMAGE, XFIXES, RANDR) on a free
# display and exports DISPLAY. Its pid goes to XVFB_PID; stop_started kills it. Its messages go
# to XVFB_LOG.
XVFB_LOG="/tmp/xvfb-$$.log"
start_xvfb() {
    local fdfile
    fdfile="$(mktemp)"
    Xvfb -displayfd 3 -screen 0 1920x1080x24 -noreset -nolisten tcp +extension MIT-SHM \
        +extension DAMAGE +extension XFIXES +extension RANDR 3>"$fdfile" 2>"$XVFB_LOG" &
    XVFB_PID=$!
    STARTED_PIDS+=("$XVFB_PID")
    local i
    for i in $(seq 1 100); do
        [[ -s "$fdfile" ]] && break
        kill -0 "$XVFB_PID" 2>/dev/null || { cat "$XVFB_LOG" >&2; die "Xvfb exited at start"; }
        sleep 0.1
    done
    [[ -s "$fdfile" ]] || die "Xvfb did not report its display within 10 s"
    export DISPLAY=":$(tr -d '[:space:]' <"$fdfile")"
    rm -f "$fdfile"
    xdpyinfo >/dev/null 2>&1 || die "Xvfb on $DISPLAY does not answer"
    [[ "$(xdpyinfo)" == *MIT-SHM* ]] || die "Xvfb on $DISPLAY has no MIT-SHM"
    log "Xvfb on $DISPLAY (pid $XVFB_PID)"
}

# start_pulseaudio: starts a private PulseAudio daemon with two null sinks, "speakers" (the
# default sink: applications play there) and "virtmic" (its monitor is the default source, so
# what is played into it is the microphone), and exports PULSE_SERVER. Everything it writes
# stays in a private directory. As root it warns that it is not meant to run as root; fine here.
start_pulseaudio() {
    local dir
    dir="$(mktemp -d /tmp/screenshare-pulse.XXXXXX)"
    cat >"$dir/default.pa" <<EOF
load-module module-native-protocol-unix socket=$dir/native auth-anonymous=1
load-module module-null-sink sink_name=speakers rate=48000 sink_properties=device.description=Speakers
load-module module-null-sink sink_name=virtmic rate=48000 sink_properties=device.description=Virtual-microphone
set-default-sink speakers
set-default-source virtmic.monitor
EOF
    HOME="$dir" XDG_CONFIG_HOME="$dir" PULSE_RUNTIME_PATH="$dir/runtime" PULSE_STATE_PATH="$dir/state" \
        pulseaudio --daemonize=no --exit-idle-time=-1 --system=false --disallow-exit -n -F "$dir/default.pa" \
        --log-target=file:"$dir/log" &
    PULSE_PID=$!
    STARTED_PIDS+=("$PULSE_PID")
    export PULSE_SERVER="unix:$dir/native"
    local i
    for i in $(seq 1 100); do
        pactl info >/dev/null 2>&1 && break
        kill -0 "$PULSE_PID" 2>/dev/null || { cat "$dir/log" >&2; die "PulseAudio exited at start"; }
        sleep 0.1
    done
    pactl info >/dev/null 2>&1 || die "PulseAudio did not answer on $PULSE_SERVER within 10 s (log: $dir/log)"
    log "PulseAudio on $PULSE_SERVER (pid $PULSE_PID)"
}

# --- Clean-up --------------------------------------------------------------------------------
# Every process a script starts goes in STARTED_PIDS (for the whole script: Xvfb, PulseAudio,
# a tone player) or RUN_PIDS (for one measurement: a benchmark stops them with stop_run_pids
# before the next), every temporary file or folder in CLEANUP_PATHS. cleanup_on_exit installs
# the one trap that stops and removes them all, whatever ends the script: the end, a die, an
# error under set -e, ^C or SIGTERM.
STARTED_PIDS=() RUN_PIDS=() CLEANUP_PATHS=()

# kill_and_reap PID...: SIGTERM to each, then waits for them all (one already gone is fine).
kill_and_reap() {
    local pid
    for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}
stop_started() { kill_and_reap "${STARTED_PIDS[@]}"; STARTED_PIDS=(); }
stop_run_pids() { kill_and_reap "${RUN_PIDS[@]}"; RUN_PIDS=(); }

cleanup() {
    stop_run_pids
    stop_started
    ((${#CLEANUP_PATHS[@]} == 0)) || rm -rf -- "${CLEANUP_PATHS[@]}"
    return 0
}
cleanup_on_exit() {
    trap cleanup EXIT
    # A signal ends the script through exit, so that the EXIT trap runs (130: as for ^C).
    trap 'exit 130' INT TERM
}
