#!/usr/bin/env python3
"""Sine tones for Scripts/demo and bench/audio.sh, and the check that a tone arrived.

    tones.py write FILE FREQ_HZ SECONDS
        Writes a FREQ_HZ sine, 0.25 of full scale, SECONDS long, to FILE as raw PCM: 48 kHz,
        2 channels (the same sample in both), s16le; what `pacat --raw --format=s16le
        --rate=48000 --channels=2` plays. FREQ_HZ is a whole number, so one second holds whole
        periods and is repeated. Prints nothing.

    tones.py level FILE
        Reads raw PCM, 48 kHz, 1 channel, s16le (as `ffmpeg -ac 1 -ar 48000 -f s16le` decodes
        it), and measures the level at 440 Hz and at 1 kHz over its last 3 s (Goertzel).
        Prints one line: "<dB> dB above 1 kHz (amplitude <440 Hz amplitude, 1 = full scale>)",
        e.g. "88.1 dB above 1 kHz (amplitude 0.250)", or "none" when FILE holds no samples.
"""
import math
import struct
import sys

RATE = 48000


def write(path, freq, seconds):
    one = b"".join(struct.pack("<hh", v, v) for v in
                   (int(0.25 * 32767 * math.sin(2 * math.pi * freq * i / RATE)) for i in range(RATE)))
    with open(path, "wb") as f:
        f.write(one * seconds)


def level(path):
    data = open(path, "rb").read()
    x = struct.unpack("<%dh" % (len(data) // 2), data)[-RATE * 3:]   # the last 3 s

    def amplitude(f):
        w = 2 * math.cos(2 * math.pi * f / RATE)
        s1 = s2 = 0.0
        for v in x:
            s1, s2 = v / 32768 + w * s1 - s2, s1
        return 2 * math.sqrt(max(s1 * s1 + s2 * s2 - w * s1 * s2, 0)) / max(len(x), 1)

    a, b = amplitude(440), amplitude(1000)
    print("%.1f dB above 1 kHz (amplitude %.3f)" % (20 * math.log10(a / max(b, 1e-9)), a) if x else "none")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "level":
        level(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
