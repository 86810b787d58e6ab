#!/usr/bin/python3
"""A GStreamer receiver of VP8 over RTP with ULPFEC (RFC 5109) in the stream, for the tests:
GStreamer's own rtpulpfecdec repairs losses from the FEC packets `screenshare start --fec`
sends, independently of ours.

    gst-fec-receiver.py PORT FEC_PT SECONDS

Prints one line per decoded frame (checksumsink), then {"recovered": N, "unrecovered": M}.
Needs Debian's python3-gi and gir1.2-gstreamer-1.0 (run with /usr/bin/python3).
"""
import json
import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

Gst.init(None)
port, pt, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
pipeline = Gst.parse_launch(
    f'udpsrc port={port} caps="application/x-rtp,media=video,clock-rate=90000,encoding-name=VP8,payload=96" '
    "! rtpstorage name=storage size-time=500000000 ! rtpssrcdemux name=demux")
decoders = []


def on_stream(_demux, _ssrc, pad):
    # rtpulpfecdec needs the SSRC in its caps: the demuxer's pads have it.
    branch = Gst.parse_bin_from_description(
        f"rtpjitterbuffer do-lost=true latency=300 ! rtpulpfecdec name=fec pt={pt} "
        "! rtpvp8depay ! vp8dec ! checksumsink", True)
    fec = branch.get_by_name("fec")
    fec.set_property("storage", pipeline.get_by_name("storage").get_property("internal-storage"))
    decoders.append(fec)
    pipeline.add(branch)
    branch.sync_state_with_parent()
    pad.link(branch.get_static_pad("sink"))


pipeline.get_by_name("demux").connect("new-ssrc-pad", on_stream)
pipeline.set_state(Gst.State.PLAYING)
loop = GLib.MainLoop()
GLib.timeout_add(int(seconds * 1000), loop.quit)
loop.run()
sys.stdout.flush()
print(json.dumps({"recovered": sum(f.get_property("recovered") for f in decoders),
                  "unrecovered": sum(f.get_property("unrecovered") for f in decoders)}), flush=True)
pipeline.set_state(Gst.State.NULL)
