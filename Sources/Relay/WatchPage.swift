import Foundation

/// The page a browser opens to watch a room: plain HTML and JavaScript from the binary, no
/// framework, no CDN. It asks for the room's screen and sound over WHEP, shows the picture
/// fitted to the window, and reconnects by itself.
enum WatchPage {
    static func html(room: String) -> String {
        return """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>screenshare — \(htmlEscaped(room))</title>
        <style>
        html,body{margin:0;height:100%;background:#111;color:#ddd;font:14px system-ui,sans-serif}
        video{width:100%;height:calc(100% - 2.5em);object-fit:contain;background:#000;display:block}
        #bar{height:2.5em;display:flex;gap:1em;align-items:center;padding:0 1em}
        button{font:inherit}
        </style></head><body>
        <video id="v" autoplay playsinline muted></video>
        <div id="bar"><span id="state">connecting…</span><button id="unmute">Unmute</button><button id="full">Full screen</button></div>
        <script>
        const room = \(javaScriptString(room));
        const v = document.getElementById('v'), state = document.getElementById('state');
        document.getElementById('unmute').onclick = () => { v.muted = false; v.play(); };
        document.getElementById('full').onclick = () => v.requestFullscreen && v.requestFullscreen();
        let pc = null, resource = null;
        async function connect() {
          pc = new RTCPeerConnection();
          pc.addTransceiver('video', {direction: 'recvonly'});
          pc.addTransceiver('audio', {direction: 'recvonly'});
          const stream = new MediaStream();
          // The element gets the stream once its video track is in it: attached while it held
          // only the (muted) audio, Chromium sometimes never started playing.
          pc.ontrack = e => {
            stream.addTrack(e.track);
            if (e.track.kind === 'video') { v.srcObject = stream; v.play().catch(() => {}); }
          };
          pc.onconnectionstatechange = () => {
            state.textContent = pc.connectionState;
            if (pc.connectionState === 'failed' || pc.connectionState === 'closed') retry();
          };
          const offer = await pc.createOffer();
          await pc.setLocalDescription(offer);
          const from = new URLSearchParams(location.search).get('from');
          const r = await fetch('/whep/' + encodeURIComponent(room) + (from ? '?from=' + encodeURIComponent(from) : ''),
                                {method: 'POST', headers: {'Content-Type': 'application/sdp'}, body: offer.sdp});
          if (r.status !== 201) { state.textContent = 'refused: ' + await r.text(); return retry(); }
          resource = r.headers.get('Location');
          await pc.setRemoteDescription({type: 'answer', sdp: await r.text()});
        }
        let retrying = false;
        function retry() {
          if (retrying) return;
          retrying = true;
          if (pc) pc.close();
          setTimeout(() => { retrying = false; connect().catch(e => { state.textContent = String(e); retry(); }); }, 2000);
        }
        window.addEventListener('beforeunload', () => { if (resource) navigator.sendBeacon && fetch(resource, {method: 'DELETE', keepalive: true}); });
        connect().catch(e => { state.textContent = String(e); retry(); });
        </script></body></html>
        """
    }

    /// A JavaScript string literal safe inside a <script> element: quotes, backslashes, angle
    /// brackets, ampersands and control characters as \u escapes.
    static func javaScriptString(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"", "\\", "<", ">", "&", "'": out += String(format: "\\u%04x", u.value)
            case _ where u.value < 0x20 || u.value == 0x2028 || u.value == 0x2029: out += String(format: "\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    static func htmlEscaped(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
