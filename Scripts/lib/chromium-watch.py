#!/usr/bin/env python3
"""Opens the relay's page in a real, headless Chromium (Debian's chromium and chromium-driver,
driven by selenium) and reports, as JSON lines, what the page plays every 250 ms: the
connection state, the picture size, the frames decoded, and the mean luma of the picture on the
<video> (drawn into a canvas). The first line with a decoded frame is `first_picture`, with the
seconds since the page was asked for.

    chromium-watch.py URL SECONDS

Chromium offers loopback candidates only with --allow-loopback-in-peer-connection; tests run
the relay on 127.0.0.1, so the traffic stays on loopback."""
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

def log(**kw):
    print(json.dumps(kw), flush=True)

url, seconds = sys.argv[1], float(sys.argv[2])
o = Options()
o.binary_location = "/usr/bin/chromium"
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--allow-loopback-in-peer-connection",
          "--autoplay-policy=no-user-gesture-required", "--disable-dev-shm-usage",
          "--webrtc-ip-handling-policy=default", "--force-webrtc-ip-handling-policy"]:
    o.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
try:
    t0 = time.time()
    d.get(url)
    first = None
    while time.time() - t0 < seconds:
        time.sleep(0.25)
        s = d.execute_script("""
            const v = document.getElementById('v');
            const q = v.getVideoPlaybackQuality ? v.getVideoPlaybackQuality() : {};
            let luma = null;
            if (v.videoWidth > 0) {
                const c = document.createElement('canvas');
                c.width = v.videoWidth; c.height = v.videoHeight;
                const g = c.getContext('2d');
                g.drawImage(v, 0, 0);
                const px = g.getImageData(0, 0, c.width, c.height).data;
                let sum = 0;
                for (let i = 0; i < px.length; i += 4) sum += 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2];
                luma = sum / (px.length / 4);
            }
            return {state: (typeof pc !== 'undefined' && pc) ? pc.connectionState : 'none', width: v.videoWidth,
                    height: v.videoHeight, frames: q.totalVideoFrames || 0, luma: luma,
                    text: document.getElementById('state').textContent};
        """)
        if first is None and s["frames"] > 0:
            first = time.time() - t0
            log(event="first_picture", seconds=round(first, 3))
        log(event="page", **s)
finally:
    d.quit()
