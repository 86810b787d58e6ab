#!/usr/bin/env python3
"""How each slide of the bench's `slides` content came out, picture by picture, for Scripts/bench.

The receiver writes the Y plane of every decoded frame (FRAMES.y) and their times (FRAMES.md5,
ffmpeg's framemd5: the pts of each). Each frame is matched to the most similar slide of REF
(yuv420p, ffmpeg's conversion of what xloop draws) at 1/8 resolution and its Y-PSNR computed
at full resolution. A slide's stretch is the run of frames matched to it; for each:

  first_db   the Y-PSNR of its first frame (a new slide readable at once wants >= 40 dB)
  to60_s     seconds from its first frame to the first frame at >= 60 dB (null: never)
  best_db    the best of its frames
  still_s    how long it was shown (first frame to the next slide's first, or the stream's end)

The stream's first slide is the opening one (its first frame is a keyframe). Consecutive
frames with the same checksum are measured once.

    slide-times.py FRAMES.y FRAMES.md5 W H REF.yuv  → JSON on stdout
"""
import json
import sys

import numpy as np


def main():
    frames_path, md5_path, w, h, ref_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    times, sums, timebase = [], [], None
    with open(md5_path) as f:
        for line in f:
            if line.startswith("#tb 0:"):
                num, den = line.split(":")[1].strip().split("/")
                timebase = int(num) / int(den)
            elif line and not line.startswith("#"):
                parts = [p.strip() for p in line.split(",")]
                times.append(int(parts[2]))
                sums.append(parts[5])
    frames = np.memmap(frames_path, dtype=np.uint8, mode="r")
    n = min(len(times), frames.size // (w * h))
    if n == 0 or timebase is None:
        json.dump({"frames": 0}, sys.stdout)
        print()
        return
    frames = frames[: n * w * h].reshape(n, h, w)
    fs = w * h * 3 // 2
    raw = np.fromfile(ref_path, dtype=np.uint8)
    refs = [raw[i * fs: i * fs + w * h].reshape(h, w).astype(np.float32) for i in range(raw.size // fs)]
    small = np.stack([r[::8, ::8] for r in refs])
    t0 = times[0]
    values, matches, last = [], [], None
    for i in range(n):
        if last is not None and sums[i] == sums[i - 1]:
            values.append(values[-1])
            matches.append(matches[-1])
            continue
        y = frames[i].astype(np.float32)
        k = int(np.argmin(((small - y[::8, ::8]) ** 2).mean(axis=(1, 2))))
        mse = float(((y - refs[k]) ** 2).mean())
        values.append(99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse))
        matches.append(k)
        last = i
    seconds = [(t - t0) * timebase for t in times[:n]]
    stretches, start = [], 0
    for i in range(1, n + 1):
        if i == n or matches[i] != matches[start]:
            end_t = seconds[i] if i < n else seconds[-1]
            vals = values[start:i]
            reach = next((seconds[start + j] - seconds[start] for j, v in enumerate(vals) if v >= 60), None)
            stretches.append({"slide": matches[start] + 1, "at_s": round(seconds[start], 2),
                              "first_db": round(vals[0], 2), "to60_s": None if reach is None else round(reach, 2),
                              "best_db": round(max(vals), 2), "still_s": round(end_t - seconds[start], 2),
                              "frames": i - start})
            start = i
    # A stretch shown for less than a second says nothing of refinement (the run's last one).
    judged = [s for s in stretches if s["still_s"] >= 1]
    out = {"frames": n, "stretches": stretches,
           "first_db_min": min(s["first_db"] for s in stretches),
           "opening_first_db": stretches[0]["first_db"],
           "later_first_db_min": min((s["first_db"] for s in stretches[1:]), default=None),
           "reached60": sum(1 for s in judged if s["to60_s"] is not None), "judged": len(judged),
           "to60_max_s": max((s["to60_s"] for s in judged if s["to60_s"] is not None), default=None),
           "best_db_min": min((s["best_db"] for s in judged), default=None)}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
