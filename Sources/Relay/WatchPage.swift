import FoundationEssentials
import Glibc
import MediaCore
import Basics

/// The page a browser opens to watch a room: plain HTML and JavaScript from the binary, no
/// framework, no CDN. It asks for the room's screen and sound over WHEP — or, when the relay
/// sends it to a Janus server (`--janus`), from Janus's streaming plugin over Janus's HTTP API —
/// shows the picture fitted to the window, and reconnects by itself.
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
        #audience{margin-left:auto}
        button{font:inherit}
        </style></head><body>
        <video id="v" autoplay playsinline muted></video>
        <div id="bar"><b id="presenter"></b><span id="state">connecting…</span><span id="audience"></span>
        <button id="unmute">Unmute</button><button id="full">Full screen</button></div>
        <script>
        const room = \(javaScriptString(room));
        const from = new URLSearchParams(location.search).get('from');
        // The room token rides after '#' (never sent to a server, not in its logs) and goes
        // with every request as a bearer token (RFC 6750). A short link carries an invitation
        // code instead (k=…), exchanged once for the token (redeem).
        const fragment = new URLSearchParams(location.hash.slice(1));
        let token = fragment.get('token');
        let auth = token ? {'Authorization': 'Bearer ' + token} : {};
        const invitation = token ? null : fragment.get('k');
        // The relay's certificate, when the link names it (fp=sha256:HEX): an answer that names
        // another one is not from the relay the link named, and is not used.
        const pinned = (fragment.get('fp') || '').toLowerCase();
        // Set when the relay refuses the token: nothing is tried again.
        let refused = null;
        const $ = id => document.getElementById(id);
        const v = $('v'), state = $('state');
        $('unmute').onclick = () => { v.muted = false; v.play(); $('unmute').hidden = true; };
        $('full').onclick = () => (v.requestFullscreen ? v.requestFullscreen() : v.webkitEnterFullscreen && v.webkitEnterFullscreen());
        // sessions: sessions answered so far, WHEP or Janus (1 + reconnects).
        let pc = null, resource = null, retrying = false, downSince = 0, sessions = 0;
        // ended: the share ended on purpose (nothing is retried until a presenter shares again);
        // lastPresenter: who presented last, for saying who ended it.
        let ended = false, lastPresenter = '';
        v.addEventListener('playing', () => { if (!ended && pc && pc.connectionState === 'connected') state.textContent = 'live'; });
        // For whoever inspects the page (tests, a curious viewer's console).
        window.screenshare = {get pc() { return pc; }, get sessions() { return sessions; }, get refused() { return refused; },
                              get ended() { return ended; }, get via() { return via; }};
        // via: where the picture comes from, 'relay' (WHEP) or 'janus'. janusSession: the Janus
        // session being watched ({url, sid}); janusFailedAt: when a Janus could not be watched
        // (the page watches from the relay for 30 s after).
        let via = null, janusSession = null, janusFailedAt = 0;
        function peer() {
          pc = new RTCPeerConnection();
          const mine = pc;
          const stream = new MediaStream();
          // The element gets the stream once its video track is in it: attached while it held
          // only the (muted) audio, Chromium sometimes never started playing.
          pc.ontrack = e => {
            stream.addTrack(e.track);
            if (e.track.kind === 'video') { v.srcObject = stream; v.play().catch(() => {}); }
          };
          pc.onconnectionstatechange = () => {
            if (mine !== pc || ended) return;
            const s = pc.connectionState;
            // 'live' once a picture shows (the video element's 'playing'), not before.
            state.textContent = s === 'connected' ? (v.readyState >= 2 ? 'live' : 'connected, waiting for the picture…') : s;
            if (s === 'failed' || s === 'closed') retry(0);
            // No answer for a few seconds (the relay or Janus restarted, the network changed):
            // a new session rather than waiting half a minute for 'failed'.
            if (s === 'disconnected') setTimeout(() => { if (mine === pc && pc.connectionState === 'disconnected') retry(0); }, 3000);
          };
          return mine;
        }
        async function connect() {
          // With Janus servers the relay sends the page to one (its own audience stays small);
          // none for this room, or one the page cannot watch: the relay itself.
          if (Date.now() - janusFailedAt > 30000) {
            const r = await fetch('/janus/' + encodeURIComponent(room) + (from ? '?from=' + encodeURIComponent(from) : ''),
                                  {method: 'POST', headers: auth});
            if (r.status === 401) return refuse(await r.text());
            if (r.status === 200) {
              const placement = await r.json();
              try { return await watchJanus(placement); } catch (e) {
                janusFailedAt = Date.now();
                console.log('screenshare: cannot watch through Janus at ' + placement.url + ': ' + e);
                leaveJanus();
                if (pc) { const old = pc; pc = null; old.close(); }
              }
            }
          }
          const mine = peer();
          pc.addTransceiver('video', {direction: 'recvonly'});
          pc.addTransceiver('audio', {direction: 'recvonly'});
          const offer = await pc.createOffer();
          await pc.setLocalDescription(offer);
          const r = await fetch('/whep/' + encodeURIComponent(room) + (from ? '?from=' + encodeURIComponent(from) : ''),
                                {method: 'POST', headers: {...auth, 'Content-Type': 'application/sdp'}, body: offer.sdp});
          if (r.status === 401) return refuse(await r.text());
          if (r.status !== 201) {
            state.textContent = r.status === 404 ? 'waiting for the room to start…' : 'refused: ' + await r.text();
            return retry(2000);
          }
          resource = r.headers.get('Location');
          const answer = await r.text();
          if (pinned) {
            const m = answer.match(/^a=fingerprint:sha-256 ([0-9A-Fa-f:]+)/m);
            const seen = m ? 'sha256:' + m[1].replace(/:/g, '').toLowerCase() : 'none';
            if (seen !== pinned) return distrust(seen);
          }
          sessions += 1;
          via = 'relay';
          await pc.setRemoteDescription({type: 'answer', sdp: answer});
          // The relay closing DTLS on purpose (close_notify: the presenter stopped and took the
          // room with it) is an end, not a failure: said so, and not retried.
          const dtls = pc.getReceivers().map(r => r.transport).find(t => t);
          if (dtls) dtls.onstatechange = () => { if (mine === pc && dtls.state === 'closed') end(); };
        }
        // Watching a mountpoint of Janus's streaming plugin over its HTTP API: a session, the
        // plugin, `watch` (with the pin the relay gave), Janus's offer, our answer.
        async function watchJanus(j) {
          const call = async (path, body) => {
            const r = await fetch(j.url + path, {method: 'POST', cache: 'no-store',
                                                 body: JSON.stringify({...body, transaction: Math.random().toString(36).slice(2)})});
            const m = await r.json();
            if (m.janus === 'error') throw new Error((m.error && m.error.reason) || 'Janus refused');
            const d = m.plugindata && m.plugindata.data;
            if (d && d.error) throw new Error(d.error);
            return m;
          };
          const events = async () => [].concat(await (await fetch(j.url + '/' + janusSession.sid + '?maxev=5&rid=' + Date.now(), {cache: 'no-store'})).json());
          const sid = (await call('', {janus: 'create'})).data.id;
          janusSession = {url: j.url, sid: sid};
          const hid = (await call('/' + sid, {janus: 'attach', plugin: 'janus.plugin.streaming'})).data.id;
          const watch = {request: 'watch', id: j.id};
          if (j.pin) watch.pin = j.pin;
          await call('/' + sid + '/' + hid, {janus: 'message', body: watch});
          let offer = null;
          const deadline = Date.now() + 10000;
          while (!offer) {
            if (Date.now() > deadline) throw new Error('Janus sent no offer');
            for (const e of await events()) {
              const d = e.plugindata && e.plugindata.data;
              if (d && d.error) throw new Error(d.error);
              if (e.jsep && e.jsep.type === 'offer') offer = e.jsep;
            }
          }
          const mine = peer();
          await pc.setRemoteDescription(offer);
          await pc.setLocalDescription(await pc.createAnswer());
          // The answer goes with its candidates (no trickle).
          if (pc.iceGatheringState !== 'complete') {
            await new Promise(done => { pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') done(); });
                                        setTimeout(done, 3000); });
          }
          await call('/' + sid + '/' + hid, {janus: 'message', body: {request: 'start'}, jsep: {type: 'answer', sdp: pc.localDescription.sdp}});
          sessions += 1;
          via = 'janus';
          // Janus's events, read for as long as this is watched (the long poll also keeps the
          // session alive): Janus gone or hanging up, the relay is asked again at once.
          (async () => {
            while (mine === pc) {
              let gone = false;
              try { gone = (await events()).some(e => e.janus === 'hangup' || (e.janus === 'error' && e.error && e.error.code === 458)); }
              catch (e) { gone = true; }
              if (gone && mine === pc) { leaveJanus(); return retry(500); }
            }
          })();
        }
        function leaveJanus() {
          if (!janusSession) return;
          const s = janusSession;
          janusSession = null;
          fetch(s.url + '/' + s.sid, {method: 'POST', keepalive: true, body: JSON.stringify({janus: 'destroy', transaction: 'bye'})}).catch(() => {});
        }
        function end() {
          ended = true;
          leaveJanus();
          state.textContent = (lastPresenter ? lastPresenter + ' ended the share' : 'the share ended') + ' — this page plays again when a presenter shares';
          if (pc) { const old = pc; pc = null; old.close(); }
          resource = null;
        }
        function distrust(seen) {
          refused = 'this is not the relay the link named: its certificate is ' + seen + ', the link says ' + pinned;
          state.textContent = 'not trusted: ' + refused;
          if (pc) { const old = pc; pc = null; old.close(); }
          if (resource) { fetch(resource, {method: 'DELETE'}).catch(() => {}); resource = null; }
        }
        function refuse(why) {
          refused = why.trim();
          // The relay's words, without the command-line flags it names for CLI users.
          const said = refused.replace(/^unauthorized: /, '').replace(/ *[(][^)]*--[^)]*[)]/g, '');
          state.textContent = 'not admitted: ' + said + (/ask the presenter/.test(said) ? '' : ' — ask the presenter for the current link');
          if (pc) { const old = pc; pc = null; old.close(); }
        }
        function retry(ms) {
          if (retrying || refused || ended) return;
          retrying = true;
          leaveJanus();
          if (pc) { const old = pc; pc = null; old.close(); }
          if (resource) { fetch(resource, {method: 'DELETE'}).catch(() => {}); resource = null; }
          setTimeout(() => { retrying = false; connect().catch(e => { state.textContent = String(e); retry(2000); }); }, ms);
        }
        // Who presents, and how many watch: asked every 2 s; a relay that does not answer is
        // said so, and the picture reconnects as soon as it answers again.
        async function room_info() {
          if (refused) return;
          try {
            const r = await fetch('/rooms/' + encodeURIComponent(room), {cache: 'no-store', headers: auth});
            if (r.status === 401) return refuse(await r.text());
            const info = await r.json();
            const shown = from || info.presenters[0];
            $('presenter').textContent = shown ? shown + ' presents' : '';
            // Who watches: everyone in the room but its presenters (browsers included).
            const watching = Math.max(0, info.peers - info.presenters.length);
            $('audience').textContent = watching ? watching + ' watching' : '';
            if (shown) {
              lastPresenter = shown;
              if (ended) { ended = false; retry(0); }
            } else if (!ended) {
              state.textContent = lastPresenter ? lastPresenter + ' ended the share; waiting for a presenter…' : 'waiting for a presenter…';
            }
            if (downSince && (!pc || pc.connectionState !== 'connected')) retry(0);
            downSince = 0;
          } catch (e) {
            if (!downSince) downSince = Date.now();
            if (!ended) state.textContent = 'relay unreachable, retrying…';
          }
        }
        // The invitation code for the token: a code that is not (or no longer) valid is said
        // so, and nothing is tried; a relay that does not answer is asked again.
        async function redeem() {
          const r = await fetch('/invite/' + encodeURIComponent(room), {method: 'POST', headers: {'Content-Type': 'text/plain'}, body: invitation});
          if (r.status !== 200) { refuse(await r.text()); return false; }
          const granted = await r.json();
          token = granted.token || null;
          auth = token ? {'Authorization': 'Bearer ' + token} : {};
          return true;
        }
        function begin() {
          connect().catch(e => { state.textContent = String(e); retry(2000); });
          room_info();
          setInterval(room_info, 2000);
        }
        window.addEventListener('pagehide', () => { if (resource) fetch(resource, {method: 'DELETE', keepalive: true}); leaveJanus(); });
        if (invitation) {
          const ask = () => redeem().then(ok => { if (ok) begin(); })
            .catch(e => { state.textContent = 'relay unreachable, retrying…'; setTimeout(ask, 2000); });
          ask();
        } else {
          begin();
        }
        </script></body></html>
        """
    }

    /// A JavaScript string literal safe inside a <script> element: quotes, backslashes, angle
    /// brackets, ampersands and control characters as \u escapes.
    static func javaScriptString(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"", "\\", "<", ">", "&", "'": out += cFormat("\\u%04x", u.value)
            case _ where u.value < 0x20 || u.value == 0x2028 || u.value == 0x2029: out += cFormat("\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    static func htmlEscaped(_ s: String) -> String {
        s.replacing("&", with: "&amp;").replacing("<", with: "&lt;")
            .replacing(">", with: "&gt;").replacing("\"", with: "&quot;")
    }
}
