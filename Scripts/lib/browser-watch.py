#!/usr/bin/env python3
"""Opens the relay's page in a real, headless browser — Debian's Chromium (driven by selenium
and chromium-driver) or Firefox ESR (driven through its own Marionette protocol with Mozilla's
marionette-driver: Debian has no geckodriver) — and reports, as JSON lines, what the page plays
every 250 ms (t: seconds since the page was asked for): the connection state, the picture size,
the frames decoded, the mean luma of the picture on the <video> (drawn into a canvas), the
audio packets received and the energy of the sound decoded, what the page says (state,
presenter) and how many WHEP sessions it made (1 + its reconnects). The first line with a
decoded frame is `first_picture`, with the seconds since the page was asked for.

    browser-watch.py URL SECONDS [--browser chromium|firefox] [--dump-luma PATH] [--no-loopback]
                     [--unmute] [--no-luma]

--dump-luma writes the last picture's luma (BT.601 studio range, as libyuv computes it from
RGB; one byte a pixel, row after row) to PATH and prints a `dumped` line with its size: tests
compare it with the slide on the presenter's screen (PSNR).

Chromium leaves loopback out of WebRTC unless told (--allow-loopback-in-peer-connection); tests
run the relay on 127.0.0.1, so the traffic stays on loopback. Firefox ESR 153 offers no loopback
candidate even with media.peerconnection.ice.loopback set, so tests run it on another host of
their own virtual LAN (a network namespace), where no such allowance is needed: --no-loopback. --unmute clicks the page's Unmute button once the picture
plays, as a viewer would (browsers decode no sound for a muted page). Each line also has the
video receiver's own counts (getStats, inbound-rtp video: `video_decoded`, `video_received`,
`video_lost`, `freezes`, `freeze_s` — Chromium's freeze count and total, a frame later than
max(3 × the mean interval, the mean + 150 ms) — `nacks`, `plis`, `fec_received`,
`fec_discarded`). --no-luma leaves out the mean luma (drawing a large picture into a canvas 4
times a second costs a core's share). --no-fec (Chromium): the page offers no RED or ULPFEC, as
a browser that takes no FEC."""
import base64, json, os, shutil, socket, subprocess, sys, tempfile, time

SAMPLE = """
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
    const page = window.screenshare || {};
    return {state: page.pc ? page.pc.connectionState : 'none', width: v.videoWidth,
            // Firefox counts nothing in getVideoPlaybackQuality() for a MediaStream; its
            // mozPaintedFrames does.
            height: v.videoHeight, frames: q.totalVideoFrames || v.mozPaintedFrames || 0, luma: luma,
            text: document.getElementById('state').textContent,
            presenter: document.getElementById('presenter').textContent,
            sessions: page.sessions === undefined ? null : page.sessions, via: page.via === undefined ? null : page.via};
"""

# What the receivers counted (RTCPeerConnection.getStats, inbound-rtp): audio packets,
# samples decoded and concealed, and the energy of what it decoded (0 for silence); video
# frames decoded and received, packets lost, Chromium's freezes, NACKs and PLIs, FEC packets
# received and discarded (not needed: what they protect had arrived). Null before
# the connection exists. And the SRTP cipher the transport agreed (`srtpCipher`, RTCTransportStats;
# Chromium reports it, Firefox does not: null).
STATS = """
    const done = arguments[arguments.length - 1];
    const pc = (window.screenshare || {}).pc;
    if (!pc) return done(null);
    pc.getStats().then(r => {
        let audio = null, video = null, srtp = null;
        r.forEach(x => {
            if (x.type === 'transport' && x.srtpCipher) srtp = x.srtpCipher;
            if (x.type === 'inbound-rtp' && x.kind === 'audio')
                audio = {packets: x.packetsReceived || 0, energy: x.totalAudioEnergy || 0,
                         samples: x.totalSamplesReceived || 0, concealed: x.concealedSamples || 0};
            if (x.type === 'inbound-rtp' && x.kind === 'video')
                video = {video_decoded: x.framesDecoded || 0, video_received: x.framesReceived || 0,
                         video_lost: x.packetsLost || 0, freezes: x.freezeCount === undefined ? null : x.freezeCount,
                         freeze_s: x.totalFreezesDuration === undefined ? null : x.totalFreezesDuration,
                         nacks: x.nackCount || 0, plis: x.pliCount || 0,
                         fec_received: x.fecPacketsReceived || 0, fec_discarded: x.fecPacketsDiscarded || 0};
        });
        done({audio: audio, video: video, srtp: srtp});
    }).catch(() => done(null));
"""

# --no-fec: the page's video transceiver offers no RED or ULPFEC (a browser that takes no FEC,
# for comparison), by the codec preferences a page may set.
NO_FEC = """
    const add = RTCPeerConnection.prototype.addTransceiver;
    RTCPeerConnection.prototype.addTransceiver = function (kind, init) {
        const t = add.call(this, kind, init);
        if (kind === 'video')
            t.setCodecPreferences(RTCRtpReceiver.getCapabilities('video').codecs.filter(c => !/red|ulpfec/i.test(c.mimeType)));
        return t;
    };
"""

LUMA = """
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
"""


def log(**kw):
    # `time`: the wall clock (seconds since the epoch), to line a page's counts up with
    # another program's events; `t` stays the seconds since this script started.
    kw.setdefault("time", round(time.time(), 3))
    print(json.dumps(kw), flush=True)


class Chromium:
    def __init__(self, loopback):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        o = Options()
        o.binary_location = "/usr/bin/chromium"
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required",
                  "--disable-dev-shm-usage", "--webrtc-ip-handling-policy=default", "--force-webrtc-ip-handling-policy"]:
            o.add_argument(a)
        if loopback:
            o.add_argument("--allow-loopback-in-peer-connection")
        self.d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)

    def open(self, url):
        self.d.get(url)

    def before_pages(self, script):
        self.d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": script})

    def run(self, script):
        return self.d.execute_script(script)

    def run_async(self, script):
        return self.d.execute_async_script(script)

    def click(self, element_id):
        from selenium.webdriver.common.by import By
        self.d.find_element(By.ID, element_id).click()

    def quit(self):
        self.d.quit()


class Firefox:
    """firefox-esr --headless --marionette with a throw-away profile; its prefs let WebRTC use
    loopback, play without a gesture, and keep Firefox from any connection of its own."""

    def __init__(self, loopback):
        from marionette_driver.marionette import Marionette
        self.profile = tempfile.mkdtemp(prefix="screenshare-firefox-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        prefs = {
            "marionette.port": port,
            "media.peerconnection.ice.loopback": loopback,
            "media.peerconnection.ice.obfuscate_host_addresses": False,
            "media.autoplay.default": 0,
            "media.autoplay.blocking_policy": 0,
            "browser.shell.checkDefaultBrowser": False,
            "browser.startup.homepage_override.mstone": "ignore",
            "browser.startup.page": 0,
            "browser.aboutwelcome.enabled": False,
            "datareporting.policy.dataSubmissionEnabled": False,
            "datareporting.healthreport.uploadEnabled": False,
            "toolkit.telemetry.enabled": False,
            "app.update.disabledForTesting": True,
            "app.normandy.enabled": False,
            "network.captive-portal-service.enabled": False,
            "network.connectivity-service.enabled": False,
            "browser.safebrowsing.malware.enabled": False,
            "browser.safebrowsing.phishing.enabled": False,
            "browser.safebrowsing.downloads.enabled": False,
            "extensions.update.enabled": False,
            "extensions.getAddons.cache.enabled": False,
            "browser.newtabpage.enabled": False,
            "network.proxy.type": 0,
        }
        with open(os.path.join(self.profile, "user.js"), "w") as f:
            for k, v in prefs.items():
                f.write(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n")
        self.process = subprocess.Popen(
            ["firefox-esr", "--headless", "--marionette", "--no-remote", "--profile", self.profile, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.profile, "firefox.log"), "w"))
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or self.process.poll() is not None:
                    raise RuntimeError("Firefox did not open Marionette: " + open(os.path.join(self.profile, "firefox.log")).read()[-2000:])
                time.sleep(0.2)
        self.m = Marionette(host="127.0.0.1", port=port)
        self.m.start_session()

    def open(self, url):
        # A page that does not load within 30 s is said as such, with Firefox's own log (once, in
        # a fresh-clone CI run, navigate waited out the test's 90 s with nothing to show why).
        from marionette_driver import errors
        self.m.timeout.page_load = 30
        try:
            self.m.navigate(url)
        except errors.TimeoutException:
            log_path = os.path.join(self.profile, "firefox.log")
            tail = open(log_path, errors="replace").read()[-3000:] if os.path.exists(log_path) else ""
            raise RuntimeError(f"Firefox did not load {url} within 30 s; its log: {tail}")

    def run(self, script):
        # sandbox=None: the page's own window (its `screenshare` object), not an isolated copy.
        return self.m.execute_script(script, sandbox=None, new_sandbox=False)

    def run_async(self, script):
        return self.m.execute_async_script(script, sandbox=None, new_sandbox=False)

    def click(self, element_id):
        from marionette_driver.by import By
        self.m.find_element(By.ID, element_id).click()

    def quit(self):
        try:
            self.m.delete_session()
        except Exception:
            pass
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    args = sys.argv[1:]
    def option(name):
        if name in args:
            i = args.index(name)
            value = args[i + 1]
            del args[i:i + 2]
            return value
        return None
    dump = option("--dump-luma")
    kind = option("--browser") or "chromium"
    loopback = "--no-loopback" not in args
    unmute = "--unmute" in args
    sample = SAMPLE.replace("if (v.videoWidth > 0) {", "if (false) {") if "--no-luma" in args else SAMPLE
    no_fec = "--no-fec" in args
    args = [a for a in args if a not in ("--no-loopback", "--unmute", "--no-luma", "--no-fec")]
    url, seconds = args[0], float(args[1])
    browser = {"chromium": Chromium, "firefox": Firefox}[kind](loopback)
    try:
        if no_fec:
            browser.before_pages(NO_FEC)
        t0 = time.time()
        browser.open(url)
        first = None
        unmuted = False
        while time.time() - t0 < seconds:
            time.sleep(0.25)
            s = browser.run(sample)
            stats = browser.run_async(STATS) or {}
            a = stats.get("audio")
            s.update(stats.get("video") or {})
            s["srtp"] = stats.get("srtp")
            s["audio_packets"] = a["packets"] if a else 0
            s["audio_energy"] = a["energy"] if a else 0
            s["audio_samples"] = a["samples"] if a else 0
            s["audio_concealed"] = a["concealed"] if a else 0
            if unmute and not unmuted and s["frames"] > 0:
                browser.click("unmute")  # a real click: the gesture autoplay rules ask for
                unmuted = True
            if first is None and s["frames"] > 0:
                first = time.time() - t0
                log(event="first_picture", seconds=round(first, 3))
            log(event="page", t=round(time.time() - t0, 2), **s)
        if dump:
            y = browser.run(LUMA)
            if y:
                with open(dump, "wb") as f:
                    f.write(base64.b64decode(y["y"]))
                log(event="dumped", width=y["width"], height=y["height"], path=dump)
    finally:
        browser.quit()


if __name__ == "__main__":
    main()
