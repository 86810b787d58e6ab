"""screenshare's JSON events as a bench run saved them (RUN_DIR/sender.out), for run-meta.py
and report.py."""
import json


def read(path):
    """The events (dicts) of the JSON lines at PATH; lines that do not parse are skipped, and a
    missing file gives none."""
    events = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return events


def quantizer_mean(events):
    """The mean quantizer over the `stats` events (each the mean of its second's frames),
    weighted by the frames sent in that second; None without any."""
    frames = total = 0
    for e in events:
        if e.get("event") == "stats" and e.get("quantizer") is not None and e.get("fps"):
            frames += e["fps"]
            total += e["quantizer"] * e["fps"]
    return total / frames if frames else None
