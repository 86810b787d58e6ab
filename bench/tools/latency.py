#!/usr/bin/env python3
"""Reads back xloop's latency barcode from decoded frames, for Scripts/bench.

The receiver (ffmpeg) crops the barcode's rectangle out of every decoded frame and writes
it as raw 8-bit gray (the Y plane) to a FIFO, flushing after each frame. This script reads
that FIFO, notes each frame's arrival with time.time_ns() as soon as it is complete,
decodes the barcode (the CLOCK_REALTIME millisecond at which xloop drew it) and appends one
line per frame to OUT.tsv:

    arrival_unix_ns  barcode_ms  (barcode_ms is -1 when the barcode did not read: bad marker or CRC)

Latency of a picture = arrival of the first decoded frame that shows its barcode − barcode_ms
(analyze() below; Scripts/bench and report.py call it). It includes the receiver's own delay
(RTP depacketizing, VP8 decoding, cropping, the pipe): the same for every sender; with the
relay's per-frame log it is split into the sender's part and the receiver's.

    latency.py FIFO WIDTH HEIGHT OUT.tsv            (WIDTH x HEIGHT: the cropped rectangle)
    latency.py --summary OUT.tsv [RELAY_FRAMES.tsv [FROM_MS]]   (prints the summary as JSON)

Barcode layout (bench/tools/xloop.c): 32 x 2 cells of 16 x 16 pixels, white = 1, read left to
right, top row first: marker 1101, 48-bit time in ms (MSB first), CRC-8 (poly 0x07) of its 6
bytes, marker 0101. Each cell is read as the mean of its central 8 x 8 pixels, threshold at
mid-grey, so VP8 quantisation at the cell edges does not matter.
"""
import json
import math
import os
import sys
import time

import numpy as np

CELL, COLS, ROWS = 16, 32, 2
START, END = [1, 1, 0, 1], [0, 1, 0, 1]


def crc8(data):
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = ((c << 1) ^ 0x07) & 0xFF if c & 0x80 else (c << 1) & 0xFF
    return c


def decode(frame, width):
    """frame: bytes of a WIDTH x (ROWS*CELL) gray picture (extra width/height ignored) → ms or None."""
    a = np.frombuffer(frame, dtype=np.uint8).reshape(-1, width)[: ROWS * CELL, : COLS * CELL].astype(np.int32)
    # Central 8x8 of each 16x16 cell.
    cells = a.reshape(ROWS, CELL, COLS, CELL)[:, 4:12, :, 4:12].mean(axis=(1, 3))
    bits = (cells.reshape(-1) > 128).astype(int).tolist()
    if bits[:4] != START or bits[60:64] != END:
        return None
    ms = 0
    for b in bits[4:52]:
        ms = ms << 1 | b
    crc = 0
    for b in bits[52:60]:
        crc = crc << 1 | b
    if crc8(ms.to_bytes(6, "big")) != crc:
        return None
    return ms


def read_loop(fifo, width, height, out_path):
    size = width * height
    buf = bytearray(size)
    view = memoryview(buf)
    with open(fifo, "rb", buffering=0) as f, open(out_path, "w") as out:
        while True:
            got = 0
            while got < size:
                n = f.readinto(view[got:])
                if not n:
                    return
                got += n
            arrival = time.time_ns()
            ms = decode(bytes(buf), width)
            out.write(f"{arrival}\t{-1 if ms is None else ms}\n")
            out.flush()


def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def _rows(path, n_fields):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == n_fields:
                    rows.append([int(p) for p in parts])
    except (OSError, ValueError):
        pass
    return rows


def analyze(path, relay_path=None, from_ms=0):
    """Latency of every distinct barcode first decoded, for barcodes drawn at or after FROM_MS.

    Returns a summary (summarize()) with, when RELAY_PATH (rtpcount.py's per-frame log: the
    moment each frame's last packet passed the relay) is given, the split of each latency into
    sender (barcode drawn → frame through the relay) and receiver (→ decoded and read) parts.
    Decoded frames are matched with relayed frames by order, counted from the end (the receiver
    may drop frames before the first keyframe; after that, on loopback, it decodes every one).
    """
    decoded = _rows(path, 2)
    relayed = _rows(relay_path, 3) if relay_path else []
    n = min(len(decoded), len(relayed))
    relay_at = [None] * (len(decoded) - n) + [r[0] for r in relayed[len(relayed) - n:]]
    first = {}
    unreadable = 0
    for (arrival_ns, ms), relay_ns in zip(decoded, relay_at):
        if ms < 0:
            unreadable += 1
        elif ms not in first:
            first[ms] = (arrival_ns, relay_ns)
    total, sender, receiver = [], [], []
    for ms, (arrival_ns, relay_ns) in first.items():
        if ms < from_ms:
            continue
        total.append(arrival_ns / 1e6 - ms)
        if relay_ns is not None:
            sender.append(relay_ns / 1e6 - ms)
            receiver.append((arrival_ns - relay_ns) / 1e6)
    out = summarize(total, len(decoded), unreadable)
    if relayed:
        out["frames_relayed"] = len(relayed)
        for name, values in (("sender", sender), ("receiver", receiver)):
            v = sorted(values)
            if v:
                out[f"{name}_p50_ms"] = round(percentile(v, 50), 1)
                out[f"{name}_p95_ms"] = round(percentile(v, 95), 1)
    out["values_ms"] = [round(v, 1) for v in total]
    return out


def summarize(values, frames=None, unreadable=None):
    v = sorted(values)
    out = {"pictures": len(v)}
    if frames is not None:
        out.update(frames_read=frames, unreadable=unreadable)
    if v:
        out.update(p50_ms=round(percentile(v, 50), 1), p95_ms=round(percentile(v, 95), 1),
                   p99_ms=round(percentile(v, 99), 1), max_ms=round(v[-1], 1), min_ms=round(v[0], 1),
                   mean_ms=round(sum(v) / len(v), 1))
    return out


def main():
    if sys.argv[1] == "--summary":
        out = analyze(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None,
                      int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        del out["values_ms"]
        json.dump(out, sys.stdout)
        print()
        return
    fifo, width, height, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    read_loop(fifo, width, height, out)


if __name__ == "__main__":
    main()
