#!/usr/bin/env python3
"""Opens the relay's page in a real, headless Chromium (Debian's chromium and chromium-driver,
driven by selenium) and reports, as JSON lines, what the page plays every 250 ms (t: seconds
since the page was asked for): the connection state, the picture size, the frames decoded, the
mean luma of the picture on the <video> (drawn into a canvas), the audio packets received and
the energy of the sound decoded, what the page says (state, presenter) and how many WHEP
sessions it made (1 + its reconnects). The first line with a
decoded frame is `first_picture`, with the seconds since the page was asked for.

    chromium-watch.py URL SECONDS [--dump-luma PATH] [--no-loopback] [--unmute]

--dump-luma writes the last picture's luma (BT.601 studio range, as libyuv computes it from
RGB; one byte a pixel, row after row) to PATH and prints a `dumped` line with its size: tests
compare it with the slide on the presenter's screen (PSNR).

Chromium offers loopback candidates only with --allow-loopback-in-peer-connection; tests run
the relay on 127.0.0.1, so the traffic stays on loopback. --no-loopback leaves that out (a
browser on another host of a test's own virtual LAN needs no such allowance). --unmute clicks
the page's Unmute button once the picture plays, as a viewer would."""
import base64, json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

def log(**kw):
    print(json.dumps(kw), flush=True)

args = [a for a in sys.argv[1:]]
dump = None
if "--dump-luma" in args:
    i = args.index("--dump-luma")
    dump = args[i + 1]
    del args[i:i + 2]
loopback = "--no-loopback" not in args
unmute = "--unmute" in args
args = [a for a in args if a not in ("--no-loopback", "--unmute")]
url, seconds = args[0], float(args[1])
o = Options()
o.binary_location = "/usr/bin/chromium"
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
          "--disable-dev-shm-usage", "--webrtc-ip-handling-policy=default", "--force-webrtc-ip-handling-policy"]:
    o.add_argument(a)
if loopback:
    o.add_argument("--allow-loopback-in-peer-connection")
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
try:
    t0 = time.time()
    d.get(url)
    first = None
    unmuted = False
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
                    text: document.getElementById('state').textContent,
                    presenter: document.getElementById('presenter').textContent,
                    sessions: typeof sessions !== 'undefined' ? sessions : null};
        """)
        # What the audio receiver took in (RTCPeerConnection.getStats, inbound-rtp audio):
        # packets, and the energy of what it decoded (0 for silence).
        a = d.execute_async_script("""
            const done = arguments[arguments.length - 1];
            if (typeof pc === 'undefined' || !pc) return done(null);
            pc.getStats().then(r => {
                let out = null;
                r.forEach(x => { if (x.type === 'inbound-rtp' && x.kind === 'audio')
                    out = {packets: x.packetsReceived || 0, energy: x.totalAudioEnergy || 0,
                           samples: x.totalSamplesReceived || 0, concealed: x.concealedSamples || 0}; });
                done(out);
            }).catch(() => done(null));
        """)
        s["audio_packets"] = a["packets"] if a else 0
        s["audio_energy"] = a["energy"] if a else 0
        s["audio_samples"] = a["samples"] if a else 0
        s["audio_concealed"] = a["concealed"] if a else 0
        if unmute and not unmuted and s["frames"] > 0:
            d.find_element(By.ID, "unmute").click()  # a real click: the gesture autoplay rules ask for
            unmuted = True
        if first is None and s["frames"] > 0:
            first = time.time() - t0
            log(event="first_picture", seconds=round(first, 3))
        log(event="page", t=round(time.time() - t0, 2), **s)
    if dump:
        y = d.execute_script("""
            const v = document.getElementById('v');
            if (!v.videoWidth) return null;
            const c = document.createElement('canvas');
            c.width = v.videoWidth; c.height = v.videoHeight;
            const g = c.getContext('2d');
            g.drawImage(v, 0, 0);
            const px = g.getImageData(0, 0, c.width, c.height).data;
            const y = new Uint8Array(c.width * c.height);
            for (let i = 0, j = 0; i < px.length; i += 4, j++)
                y[j] = (66 * px[i] + 129 * px[i + 1] + 25 * px[i + 2] + 0x1080) >> 8;
            let bin = '';
            for (let i = 0; i < y.length; i += 0x8000) bin += String.fromCharCode.apply(null, y.subarray(i, i + 0x8000));
            return {width: c.width, height: c.height, y: btoa(bin)};
        """)
        if y:
            with open(dump, "wb") as f:
                f.write(base64.b64decode(y["y"]))
            log(event="dumped", width=y["width"], height=y["height"], path=dump)
finally:
    d.quit()
