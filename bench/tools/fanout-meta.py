#!/usr/bin/env python3
"""One viewer count of Scripts/bench-fanout, summed up: writes RUN_DIR/meta.json and prints its line.

    fanout-meta.py RUN_DIR --viewers N [--client native|whep] --t0 T0 --t1 T1 --tick-hz HZ
                   --relay-ticks N --presenter-ticks N --load-ticks N --relay-rss-kb KB --relay-hwm-kb KB

T0 and T1 are the measured window's start and end (`date +%s.%N`); the *-ticks are CPU clock
ticks over the window of the relay (`screenshare serve`), the presenter and fanout-load;
the relay's RSS and peak RSS are read at the window's end. --client says who the viewers were:
fanout-load.c's room viewers (native, the default) or whep-load.py's browsers (whep).

meta.json, which bench/tools/fanout-report.py reads: "viewers", "client", "window_s" (T1 - T0),
"tick_hz", "relay_ticks", "presenter_ticks", "load_ticks", "relay_rss_kb", "relay_hwm_kb" and
"loadavg" (now: the first 3 fields of /proc/loadavg, one string), three to a line.

Prints (stdout) one line: the relay's CPU seconds per second of the window, and the loss the
viewers saw over it (the last line of RUN_DIR/load.out, fanout-load's window summary).
"""
import argparse
import json
import os

# meta.json's keys, as its lines group them.
LINES = (("viewers", "client", "window_s", "tick_hz"),
         ("relay_ticks", "presenter_ticks", "load_ticks"),
         ("relay_rss_kb", "relay_hwm_kb", "loadavg"))


def main():
    p = argparse.ArgumentParser(description="Writes a fan-out run's meta.json and prints its line.")
    p.add_argument("dir")
    p.add_argument("--client", choices=("native", "whep"), default="native")
    p.add_argument("--t0", type=float, required=True)
    p.add_argument("--t1", type=float, required=True)
    for name in ("viewers", "tick-hz", "relay-ticks", "presenter-ticks", "load-ticks", "relay-rss-kb", "relay-hwm-kb"):
        p.add_argument("--" + name, type=int, required=True)
    a = p.parse_args()
    d = a.dir

    m = {"viewers": a.viewers, "client": a.client, "window_s": a.t1 - a.t0, "tick_hz": a.tick_hz,
         "relay_ticks": a.relay_ticks, "presenter_ticks": a.presenter_ticks, "load_ticks": a.load_ticks,
         "relay_rss_kb": a.relay_rss_kb, "relay_hwm_kb": a.relay_hwm_kb,
         "loadavg": " ".join(open("/proc/loadavg").read().split()[:3])}
    # The layout the script's shell here-document wrote before this tool: files stay comparable.
    with open(os.path.join(d, "meta.json"), "w") as f:
        f.write("{" + ",\n ".join(", ".join(f"{json.dumps(k)}: {json.dumps(m[k])}" for k in keys) for keys in LINES) + "}\n")

    w = json.loads(open(f"{d}/load.out").read().strip().splitlines()[-1])["window"]
    print(f"  {m['viewers']:4} {'browser (WHEP)' if a.client == 'whep' else 'native'} viewers: relay CPU {m['relay_ticks'] / m['tick_hz'] / m['window_s']:.3f} s/s, "
          f"loss {w['lost']} of {w['expected']} ({w['loss_percent']:.3f} %), socket drops {w['socket_drops']}")


if __name__ == "__main__":
    main()
