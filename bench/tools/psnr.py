#!/usr/bin/env python3
"""Y-plane PSNR of decoded frames against the picture that was on screen, for Scripts/bench.

The receiver saves about one decoded frame per second (yuv420p, WxH). Which source picture
was on screen is not known exactly (capture and drawing are not synchronised), so each
sample is matched to the most similar candidate picture at 1/8 resolution, then compared at
full resolution. Candidates come from REF (yuv420p, made by ffmpeg from the same BGRX
pictures xloop draws): every frame of REF (frames mode), or every scroll position
k*STEP (k < PERIOD/STEP) of a tall REF frame (scroll mode).

    psnr.py [--exclude X,Y,W,H] SAMPLES.yuv W H REF.yuv REF_H frames|scroll:STEP:PERIOD [WORST.pgm]  → JSON on stdout

The JSON has the mean, median, min and max, how many distinct source pictures were matched, and
every sample's value in order (psnr_samples; the first is the stream's first frame).

WORST.pgm (optional): the worst sample above its matched reference, Y plane, for inspection.
--exclude: a rectangle left out of matching and PSNR (the latency barcode, which is drawn on
top of the content and is not in REF).
"""
import json
import sys

import numpy as np


def y_planes(path, w, h):
    frame = w * h * 3 // 2
    raw = np.fromfile(path, dtype=np.uint8)
    n = raw.size // frame
    return raw[: n * frame].reshape(n, frame)[:, : w * h].reshape(n, h, w)


def main():
    args = sys.argv[1:]
    exclude = None
    if args and args[0] == "--exclude":
        exclude = [int(v) for v in args[1].split(",")]
        args = args[2:]
    samples_path, w, h, ref_path, ref_h, mode = args[0], int(args[1]), int(args[2]), \
        args[3], int(args[4]), args[5]
    keep = np.ones((h, w), dtype=bool)
    if exclude:
        x, y, ew, eh = exclude
        keep[y:y + eh, x:x + ew] = False
    keep_small = keep[::8, ::8]
    samples = y_planes(samples_path, w, h)
    tall = y_planes(ref_path, w, ref_h).reshape(-1, w)  # all reference frames stacked
    if mode == "frames":
        offsets = list(range(0, tall.shape[0] - h + 1, h))
    else:
        _, step, period = mode.split(":")
        offsets = list(range(0, int(period), int(step)))
    small = np.stack([tall[o:o + h:8, ::8] for o in offsets]).astype(np.float32)
    values, matches, worst = [], [], None
    for s in samples:
        d = ((small - s[::8, ::8].astype(np.float32)) ** 2)[:, keep_small].mean(axis=1)
        best = offsets[int(np.argmin(d))]
        ref = tall[best:best + h]
        mse = float(((s.astype(np.float32) - ref.astype(np.float32)) ** 2)[keep].mean())
        values.append(99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse))
        matches.append(best)
        if worst is None or values[-1] < worst[0]:
            worst = (values[-1], s, ref)
    out = {"samples": len(values)}
    if values:
        v = np.array(values)
        out.update(psnr_mean=round(float(v.mean()), 2), psnr_median=round(float(np.median(v)), 2),
                   psnr_min=round(float(v.min()), 2), psnr_max=round(float(v.max()), 2),
                   distinct_matches=len(set(matches)),
                   psnr_samples=[round(float(x), 2) for x in values])
    if worst is not None and len(args) > 6:
        with open(args[6], "wb") as f:
            f.write(b"P5\n%d %d\n255\n" % (w, 2 * h))
            f.write(np.ascontiguousarray(np.vstack([worst[1], worst[2]])).tobytes())
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
