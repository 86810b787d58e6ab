/// What each case of `EventCases` prints (see `EventOutputTests`), recorded from the code
/// before events were typed. Some lines are odd (a plain `watch`'s `started` reads "sending to
/// - ...", the relay's `subscribed` "watching - ...", events without a line of their own print
/// "NAME: - -"): that is what users see today, kept until it is changed on purpose.
enum PinnedOutput {
    static let expected: [String: (json: String, text: String)] = [
        "sender.started": (
            json: #"{"bitrate_kbps":2000,"content":"detail","control_socket":"/run/user/1000/screenshare/pid-42.sock","destination":"127.0.0.1:5004","event":"started","fps":15,"shared":"the screen","ssrc":2718522738,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"sending to 127.0.0.1:5004 (ssrc 2718522738, 15 fps max, 2000 kbps); control: /run/user/1000/screenshare/pid-42.sock"#),
        "sender.started.noControl.audio": (
            json: #"{"audio_bitrate_kbps":64,"audio_port":6002,"audio_ssrc":3000000001,"bitrate_kbps":4000,"content":"motion","control_socket":null,"destination":"10.0.0.2:6000","event":"started","fps":30,"shared":"the screen","ssrc":7,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"sending to 10.0.0.2:6000 (ssrc 7, 30 fps max, 4000 kbps); control: -"#),
        "sender.started.room.hosting": (
            json: #"{"bitrate_kbps":2000,"browser_url":"http://192.168.1.20:7600/class","content":"detail","control_socket":"/run/user/1000/screenshare/class.sock","destination":"127.0.0.1:7600","event":"started","fps":15,"name":"ann@laptop","room":"class","server":"192.168.1.20:7600","shared":"the screen","ssrc":2895255438,"time":"2026-11-18T11:06:40.125Z","watch_command":"screenshare watch --room class --server 192.168.1.20:7600"}"#,
            text: #"sharing the screen in room class\#n  sound: none\#n  browsers: http://192.168.1.20:7600/class\#n  terminal: screenshare watch http://192.168.1.20:7600/class\#n  stop: Ctrl-C  ·  a new link: screenshare ctl invite"#),
        "sender.started.room.joining": (
            json: #"{"audio_bitrate_kbps":48,"audio_port":7600,"audio_ssrc":5,"bitrate_kbps":2000,"content":"detail","control_socket":null,"destination":"192.168.1.20:7600","event":"started","fps":15,"microphone":"alsa_input.pci-0000_00_1f.3.analog-stereo","name":"bob@desk","room":"class","server":"192.168.1.20:7600","shared":"window 'Slides'","ssrc":99,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"sharing window 'Slides' in room class\#n  via 192.168.1.20:7600 as bob@desk\#n  sound: microphone "Built-in Audio Analog Stereo" (--no-mic leaves it out)\#n  browsers: http://192.168.1.20:7600/class (with #token=… unless the relay is open)\#n  stop: Ctrl-C"#),
        "sender.invitation": (
            json: #"{"event":"invitation","link":"http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"new invitation link (the old one no longer admits): http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4"#),
        "sender.invitation.revoked": (
            json: #"{"event":"invitation","link":null,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"the invitation link was revoked: nobody new can join with it (viewers in the room stay)"#),
        "sender.first_frame_sent": (
            json: #"{"event":"first_frame_sent","height":1080,"keyframe":true,"latency_ms":20.123,"time":"2026-11-18T11:06:40.125Z","width":1920}"#,
            text: #"first frame sent: 1920x1080 after 20.1 ms"#),
        "sender.stats": (
            json: #"{"capture_ms_p50":0.9,"capture_ms_p95":1.1,"convert_ms_p50":0.7,"convert_ms_p95":0.8,"encode_ms_p50":3.245,"encode_ms_p95":5,"estimate_kbps":null,"event":"stats","fec_kbps":0,"fec_protection":0,"fps":15,"frames_captured":75,"frames_encoded":61,"frames_sent":61,"height":1080,"kbps":412,"keyframes_sent":1,"loss":null,"quantizer":null,"retransmitted":0,"rtt_ms":null,"send_errors":0,"send_ms_p50":0.05,"send_ms_p95":0.07,"target_kbps":500,"time":"2026-11-18T11:06:40.125Z","width":1920}"#,
            text: #"1920x1080  15 fps  412/500 kbps  rtt - ms  loss -"#),
        "sender.stats.room.audio": (
            json: #"{"audio_bytes_sent":40000,"audio_kbps":64,"audio_latency_ms_p50":42.5,"audio_latency_ms_p95":null,"audio_packets_sent":250,"capture_ms_p50":1,"capture_ms_p95":2,"convert_ms_p50":0.5,"convert_ms_p95":0.75,"encode_ms_p50":8.25,"encode_ms_p95":12.96,"estimate_kbps":2210,"event":"stats","fec_kbps":0,"fec_protection":0,"fps":30,"frames_captured":598,"frames_encoded":600,"frames_sent":600,"height":720,"kbps":2100,"keyframes_sent":3,"loss":0.012,"quantizer":31.5,"retransmitted":4,"rtt_ms":0.432,"send_errors":2,"send_ms_p50":0.1,"send_ms_p95":0.2,"target_kbps":1960,"time":"2026-11-18T11:06:40.125Z","viewers":3,"width":1280}"#,
            text: #"1280x720  30 fps  2100/1960 kbps  rtt 0.4 ms  loss 1.2%  3 viewers"#),
        "sender.bitrate_changed": (
            json: #"{"estimate_kbps":1024,"event":"bitrate_changed","loss":0.36,"previous_kbps":3000,"rtt_ms":26.016,"target_kbps":870,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"bit rate 3000 → 870 kbps (the receiver gets 1024 kbps, loss 36.0%, rtt 26.0 ms)"#),
        "sender.stopped": (
            json: #"{"bytes_sent":782484,"duration_s":4.081,"encode_errors":0,"event":"stopped","fec_bytes":0,"fec_packets":0,"frames_captured":1,"frames_encoded":24,"frames_sent":6,"height":1080,"keyframes_sent":1,"nacks_received":0,"packets_lost":null,"packets_rejected":0,"packets_sent":648,"reason":"duration","receiver_reports":0,"retransmitted":0,"rtt_ms":null,"send_errors":0,"time":"2026-11-18T11:06:40.125Z","width":1920}"#,
            text: #"stopped (duration reached): 6 frames, 782484 bytes in 4.1 s"#),
        "sender.stopped.audio": (
            json: #"{"audio_bytes_sent":60000,"audio_clipped_frames":0,"audio_cpu_s":0.123,"audio_dropped_frames":1,"audio_dtx_frames":20,"audio_frames":500,"audio_latency_ms_p50":40,"audio_latency_ms_p95":60,"audio_packets_sent":480,"audio_silent_frames":100,"audio_underruns":0,"bytes_sent":1500000,"duration_s":10.05,"encode_errors":0,"event":"stopped","fec_bytes":0,"fec_packets":0,"frames_captured":300,"frames_encoded":300,"frames_sent":290,"height":720,"keyframes_sent":2,"nacks_received":5,"packets_lost":3,"packets_rejected":2,"packets_sent":2000,"reason":"requested","receiver_reports":9,"retransmitted":5,"rtt_ms":1.25,"send_errors":1,"time":"2026-11-18T11:06:40.125Z","width":1280}"#,
            text: #"stopped (interrupted): 290 frames, 1500000 bytes in 10.1 s"#),
        "sender.paused": (
            json: #"{"event":"paused","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"paused: the last picture is held (keep-alive only)"#),
        "sender.resumed": (
            json: #"{"event":"resumed","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"resumed"#),
        "sender.settings_changed": (
            json: #"{"bitrate_kbps":1000,"changed":["bitrate_kbps","max_resolution","min_fps"],"content":"detail","event":"settings_changed","fps":15,"keyframe_interval_s":null,"max_resolution":"720p","min_bitrate_kbps":null,"min_fps":0.5,"paused":false,"source":"screen","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"settings changed: bitrate_kbps=1000 max_resolution=720p min_fps=0.5"#),
        "sender.settings_changed.toNull": (
            json: #"{"bitrate_kbps":1000,"changed":["keyframe_interval_s","max_resolution","source"],"content":"detail","event":"settings_changed","fps":15,"keyframe_interval_s":2.5,"max_resolution":null,"min_bitrate_kbps":null,"min_fps":0.5,"paused":false,"source":"region:640x360+10+20","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"settings changed: keyframe_interval_s=2.5 max_resolution=- source=region:640x360+10+20"#),
        "sender.source_restored": (
            json: #"{"event":"source_restored","size":"640x360","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"the source is back (640x360)"#),
        "audio.app_attached": (
            json: #"{"app":"Firefox","binary":"firefox","event":"audio_app_attached","pid":"4242","sink_input":12,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"hearing Firefox (pid 4242)"#),
        "audio.app_detached": (
            json: #"{"event":"audio_app_detached","sink_input":12,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"the application's sound stopped (sink input 12); waiting for it to play again"#),
        "audio.source_lost": (
            json: #"{"event":"warning","kind":"audio_source_lost","message":"PulseAudio went away; sending silence, reconnecting","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: PulseAudio went away; sending silence, reconnecting"#),
        "audio.reconnecting": (
            json: #"{"attempt":2,"event":"audio_reconnecting","retry_in_ms":1000,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"reconnecting to PulseAudio (attempt 2) in 1000 ms"#),
        "audio.resumed": (
            json: #"{"event":"audio_resumed","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"PulseAudio is back: the sound goes on"#),
        "audio.stream_failed": (
            json: #"{"event":"warning","kind":"audio_stream_failed","message":"sink input 12: no such entity","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: sink input 12: no such entity"#),
        "viewer.started": (
            json: #"{"event":"started","payload_type":96,"record":null,"rtcp_port":5005,"rtp_port":5004,"time":"2026-11-18T11:06:40.125Z","window":false}"#,
            text: #"sending to - (ssrc -, - fps max, - kbps); control: -"#),
        "viewer.started.audio.record": (
            json: #"{"audio_playback":true,"audio_port":5006,"event":"started","payload_type":96,"record":"/tmp/out.webm","rtcp_port":5005,"rtp_port":5004,"time":"2026-11-18T11:06:40.125Z","window":true}"#,
            text: #"sending to - (ssrc -, - fps max, - kbps); control: -"#),
        "viewer.started.room.audio": (
            json: #"{"audio_playback":false,"audio_port":null,"event":"started","payload_type":96,"record":null,"room":"class","rtcp_port":40123,"rtp_port":40123,"server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z","window":true}"#,
            text: #"joining room class at 192.168.1.20:7600"#),
        "viewer.first_frame": (
            json: #"{"event":"first_frame","height":1080,"time":"2026-11-18T11:06:40.125Z","time_to_first_frame_ms":118.046,"width":1920}"#,
            text: #"first frame: 1920x1080 after 118.0 ms"#),
        "viewer.first_frame.room": (
            json: #"{"event":"first_frame","height":360,"since_subscribed_ms":80.25,"time":"2026-11-18T11:06:40.125Z","time_to_first_frame_ms":1500.5,"width":640}"#,
            text: #"first frame: 640x360 after 1500.5 ms"#),
        "viewer.resolution_changed": (
            json: #"{"event":"resolution_changed","height":720,"time":"2026-11-18T11:06:40.125Z","width":1280}"#,
            text: #"the picture is now 1280x720"#),
        "viewer.sender_changed": (
            json: #"{"event":"sender_changed","ssrc":4000000000,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"another sender took over (ssrc 4000000000)"#),
        "viewer.sender_left": (
            json: #"{"event":"sender_left","ssrc":12345,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"the sender said goodbye (ssrc 12345)"#),
        "viewer.stats": (
            json: #"{"buffer_ms":20,"event":"stats","fps":15,"frame_gap_ms":66.7,"frames_decoded":150,"freeze_count":0,"height":1080,"jitter_ms":1.235,"kbps":400,"nack_count":1,"packets_lost":2,"packets_received":3000,"pli_count":0,"rtt_ms":null,"time":"2026-11-18T11:06:40.125Z","total_freezes_duration_s":0,"width":1920}"#,
            text: #"1920x1080  15 fps  400 kbps  lost 2  jitter 1.2 ms  freezes 0"#),
        "viewer.stats.audio": (
            json: #"{"audio_concealed":1,"audio_decoded":498,"audio_fec_recovered":1,"audio_jitter_delay_ms":40,"audio_late":0,"audio_output_flushes":0,"audio_output_latency_ms":25.1,"audio_packets":500,"audio_packets_lost":2,"audio_playing":true,"audio_silence_frames":3,"audio_sync_delay_ms":12.3,"audio_target_delay_ms":null,"av_offset_ms":-12.3,"av_sync":true,"buffer_ms":35.5,"event":"stats","fps":30,"frame_gap_ms":2400.1,"frames_decoded":900,"freeze_count":1,"height":720,"jitter_ms":0.05,"kbps":2000,"nack_count":0,"packets_lost":0,"packets_received":9000,"pli_count":1,"rtt_ms":0.42,"time":"2026-11-18T11:06:40.125Z","total_freezes_duration_s":2.267,"video_sync_delay_ms":0,"width":1280}"#,
            text: #"1280x720  30 fps  2000 kbps  lost 0  jitter 0.1 ms  freezes 1"#),
        "viewer.stopped": (
            json: #"{"decode_errors":0,"duration_s":2,"event":"stopped","fec_packets":0,"fec_recovered":0,"frames_decoded":0,"frames_dropped":0,"frames_received":0,"freeze_count":0,"height":0,"idle_probes":0,"jitter_ms":0,"keyframes_decoded":0,"nack_count":0,"packets_foreign":0,"packets_lost":0,"packets_received":0,"packets_rejected":0,"pli_count":0,"reason":"duration","recorded_audio_packets":0,"recorded_frames":0,"rtt_ms":null,"time":"2026-11-18T11:06:40.125Z","time_to_first_frame_ms":null,"total_freezes_duration_s":0,"transport_feedbacks":0,"width":0}"#,
            text: #"stopped (duration reached): 0 frames decoded, 0 packets lost, 0 freezes"#),
        "viewer.stopped.audio": (
            json: #"{"audio_concealed":10,"audio_decoded":1490,"audio_fec_recovered":0,"audio_jitter_delay_ms":null,"audio_late":1,"audio_output_flushes":2,"audio_output_latency_ms":null,"audio_packets":1500,"audio_packets_lost":10,"audio_playing":false,"audio_silence_frames":0,"audio_sync_delay_ms":0,"audio_target_delay_ms":60,"av_offset_ms":null,"av_sync":false,"decode_errors":0,"duration_s":30.5,"event":"stopped","fec_packets":0,"fec_recovered":0,"frames_decoded":900,"frames_dropped":1,"frames_received":901,"freeze_count":1,"height":720,"idle_probes":7,"jitter_ms":0.75,"keyframes_decoded":2,"nack_count":3,"packets_foreign":2,"packets_lost":4,"packets_received":9000,"packets_rejected":1,"pli_count":1,"reason":"requested","recorded_audio_packets":1500,"recorded_frames":880,"rtt_ms":0.42,"time":"2026-11-18T11:06:40.125Z","time_to_first_frame_ms":118.046,"total_freezes_duration_s":0.346,"transport_feedbacks":0,"video_sync_delay_ms":0,"width":1280}"#,
            text: #"stopped (interrupted): 900 frames decoded, 4 packets lost, 1 freeze"#),
        "room.connected": (
            json: #"{"event":"connected","peer":1,"peers":0,"rejoined":false,"room":"class","server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"connected to room class at 192.168.1.20:7600 as peer 1 (nobody else here)"#),
        "room.connected.one": (
            json: #"{"event":"connected","peer":3,"peers":1,"rejoined":false,"room":"class","server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"connected to room class at 192.168.1.20:7600 as peer 3 (1 other here)"#),
        "room.connected.rejoined": (
            json: #"{"event":"connected","peer":4,"peers":2,"rejoined":true,"room":"class","server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"connected to room class at 192.168.1.20:7600 as peer 4 (2 others here)"#),
        "room.peer_joined": (
            json: #"{"client":"screenshare","event":"peer_joined","name":"bob@desk","peer":2,"role":"viewer","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"bob@desk joined (peer 2)"#),
        "room.peer_left": (
            json: #"{"event":"peer_left","name":"bob@desk","peer":2,"reason":"timeout","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"bob@desk left (no word from it for a while)"#),
        "room.substream_started": (
            json: #"{"codec":"VP8","event":"substream_started","kind":"screen","name":"ann@laptop","payload_type":96,"peer":1,"ssrc":4369,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"ann@laptop (peer 1) started sharing the screen"#),
        "room.substream_stopped": (
            json: #"{"codec":"opus","event":"substream_stopped","kind":"audio","name":"ann@laptop","payload_type":111,"peer":1,"ssrc":8738,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"ann@laptop (peer 1) stopped sharing sound"#),
        "room.link": (
            json: #"{"estimate_kbps":420,"event":"link","layers":"base","publisher":1,"publisher_name":"","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"your link carries every fourth frame (the base layer) of peer 1's screen (about 420 kbit/s)"#),
        "room.link.keyframes": (
            json: #"{"estimate_kbps":120,"event":"link","layers":"keyframes","publisher":1,"publisher_name":"","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"your link carries keyframes only of peer 1's screen (about 120 kbit/s)"#),
        "room.link.network_busy": (
            json: #"{"event":"warning","kind":"network_busy","message":"this viewer's link carries less than the presenter's base layer (about 120 kbit/s, the relay estimates): only keyframes come until it carries more","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: this viewer's link carries less than the presenter's base layer (about 120 kbit/s, the relay estimates): only keyframes come until it carries more"#),
        "room.subscribed": (
            json: #"{"event":"subscribed","kinds":["screen","audio"],"name":"ann@laptop","publisher":1,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"watching ann@laptop (peer 1)"#),
        "room.unsubscribed": (
            json: #"{"event":"unsubscribed","name":"ann@laptop","publisher":1,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"no longer watching peer 1"#),
        "room.viewer_subscribed": (
            json: #"{"event":"subscribed","name":"bob@desk","time":"2026-11-18T11:06:40.125Z","viewer":2,"viewers":2}"#,
            text: #"bob@desk is watching (2 viewers)"#),
        "room.viewer_subscribed.second": (
            json: #"{"event":"subscribed","name":"cy","time":"2026-11-18T11:06:40.125Z","viewer":3,"viewers":2}"#,
            text: #"cy is watching (2 viewers)"#),
        "room.viewer_unsubscribed": (
            json: #"{"event":"unsubscribed","name":"bob@desk","time":"2026-11-18T11:06:40.125Z","viewer":2,"viewers":1}"#,
            text: #"bob@desk stopped watching (1 viewer)"#),
        "room.reconnecting": (
            json: #"{"attempt":2,"event":"reconnecting","of":3,"reason":"no word from the relay for 3 s","retry_in_ms":1000,"server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"lost the relay 192.168.1.20:7600 (no word from the relay for 3 s); retry 2/3 in 1000 ms"#),
        "room.error": (
            json: #"{"code":"unknown_peer","event":"warning","kind":"room_error","message":"no peer 'carol' in room class","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: no peer 'carol' in room class"#),
        "room.disconnected": (
            json: #"{"event":"disconnected","reason":"no answer after 3 retries","server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"gave up on the relay 192.168.1.20:7600: no answer after 3 retries"#),
        "room.disconnected.never": (
            json: #"{"event":"disconnected","reason":"no answer after 3 retries","server":"192.168.1.20:7600","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"the relay at 192.168.1.20:7600 never answered: is it running there, and is UDP port 7600 open to you?"#),
        "relay.started": (
            json: #"{"access":"tokens","event":"started","fingerprint":"sha256:3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f","listen":"0.0.0.0:7600","protocol_version":2,"receive_buffer":8388608,"send_buffer":425984,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"relay listening on 0.0.0.0:7600 (protocol v2); rooms need a token (`screenshare token`)\#n  certificate: sha256:3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f (presenters and viewers pin it with --fingerprint)\#n  presenters: screenshare start --room NAME --server HOST:7600 --token T\#n  browsers: http://HOST:7600/NAME#token=VIEWER_TOKEN"#),
        "relay.started.open": (
            json: #"{"access":"open","event":"started","listen":"127.0.0.1:7600","protocol_version":2,"receive_buffer":8388608,"send_buffer":425984,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"relay listening on 127.0.0.1:7600 (protocol v2); OPEN: anyone who reaches it joins any room\#n  certificate: - (presenters and viewers pin it with --fingerprint)\#n  presenters: screenshare start --room NAME --server HOST:7600\#n  browsers: http://HOST:7600/NAME"#),
        "relay.peer_joined": (
            json: #"{"address":"192.168.1.21:51000","client":"screenshare","event":"peer_joined","name":"bob@desk","peer":2,"role":"viewer","room":"class","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"bob@desk joined room class (peer 2)"#),
        "relay.peer_joined.browser": (
            json: #"{"address":"192.168.1.21:51000","client":"browser","event":"peer_joined","name":"browser-1a2b3c","peer":3,"role":"viewer","room":"class","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"browser-1a2b3c joined room class (peer 3)"#),
        "relay.peer_left": (
            json: #"{"event":"peer_left","name":"bob@desk","peer":2,"reason":"left","room":"class","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"bob@desk left room class"#),
        "relay.substream_started": (
            json: #"{"codec":"VP8","event":"substream_started","kind":"screen","payload_type":96,"peer":1,"room":"class","ssrc":4369,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"peer 1 started sharing the screen in room class"#),
        "relay.substream_stopped": (
            json: #"{"codec":"opus","event":"substream_stopped","kind":"audio","payload_type":111,"peer":1,"room":"class","ssrc":8738,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"peer 1 stopped sharing sound in room class"#),
        "relay.subscribed": (
            json: #"{"event":"subscribed","kinds":["screen","audio"],"publisher":1,"room":"class","time":"2026-11-18T11:06:40.125Z","viewer":2}"#,
            text: #"watching - (peer 1)"#),
        "relay.unsubscribed": (
            json: #"{"event":"unsubscribed","publisher":1,"room":"class","time":"2026-11-18T11:06:40.125Z","viewer":2}"#,
            text: #"no longer watching peer 1"#),
        "relay.stats": (
            json: #"{"browsers":1,"event":"stats","fec_out":0,"kbps_out":4100,"keyframe_requests":0,"layer_switches":2,"lost_in":3,"packets_in":450,"packets_out":900,"peers":3,"rejected":1,"resends_not_sent":3,"retransmitted":2,"rooms":1,"send_errors":0,"time":"2026-11-18T11:06:40.125Z","unknown_source":0,"viewer_layers":{"class/2":"base"},"viewers_base_layer":1}"#,
            text: #"1 rooms  3 peers (1 in browsers)  450 pkt/s in  900 pkt/s out  4100 kbps out"#),
        "relay.stopped": (
            json: #"{"bytes_forwarded":25000000,"control_in":120,"duration_s":61.235,"event":"stopped","fec_in":0,"fec_out":0,"fec_recovered":0,"keyframe_requests":2,"layer_switches":3,"lost_for_good":1,"lost_in":3,"rejected":1,"resends_not_sent":{"gone":2,"over_budget":5,"too_soon":0,"unmapped":0},"retransmitted":4,"rtcp_in":300,"rtp_forwarded":20000,"rtp_in":10000,"send_errors":0,"time":"2026-11-18T11:06:40.125Z","timeouts":1,"unknown_source":0,"uplink_nacks":0,"viewer_feedbacks":600}"#,
            text: #"relay stopped: 20000 packets forwarded, 1 rejected"#),
        "warning.control_unavailable": (
            json: #"{"event":"warning","kind":"control_unavailable","message":"cannot listen on /run/x.sock: Address already in use; `screenshare ctl` cannot reach this broadcast","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: cannot listen on /run/x.sock: Address already in use; `screenshare ctl` cannot reach this broadcast"#),
        "warning.encoder_overshoot": (
            json: #"{"event":"warning","kbps":3100,"kind":"encoder_overshoot","message":"sending 3100 kbps for a 2000 kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution","target_kbps":2000,"time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: sending 3100 kbps for a 2000 kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution"#),
        "warning.audio_unavailable": (
            json: #"{"event":"warning","kind":"audio_unavailable","message":"audio: PulseAudio is not running; sending video only (use --no-audio to silence this)","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: audio: PulseAudio is not running; sending video only (use --no-audio to silence this)"#),
        "warning.source_resized": (
            json: #"{"event":"warning","kind":"source_resized","message":"source is now 1280x720 (was 1920x1080); restarting the encoder with a keyframe","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: source is now 1280x720 (was 1920x1080); restarting the encoder with a keyframe"#),
        "warning.source_unavailable": (
            json: #"{"event":"warning","kind":"source_unavailable","message":"window 0x200001 \"Slides\" is not mapped (minimised or hidden); sending a placeholder","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: window 0x200001 "Slides" is not mapped (minimised or hidden); sending a placeholder"#),
        "warning.encoder_reconfigure": (
            json: #"{"event":"warning","kind":"encoder_reconfigure","message":"vpx_codec_enc_config_set failed; re-creating it","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: vpx_codec_enc_config_set failed; re-creating it"#),
        "warning.send_failed": (
            json: #"{"event":"warning","kind":"send_failed","message":"packets to 127.0.0.1:5004 are refused (is a receiver listening?)","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: packets to 127.0.0.1:5004 are refused (is a receiver listening?)"#),
        "warning.send_failed.audio": (
            json: #"{"event":"warning","kind":"send_failed","message":"audio packets to 127.0.0.1:5006 are refused (is a receiver listening?)","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: audio packets to 127.0.0.1:5006 are refused (is a receiver listening?)"#),
        "warning.network_busy": (
            json: #"{"event":"warning","kind":"network_busy","message":"30 of 400 packets sent in the last second were lost on the way and resent (8 %)","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: 30 of 400 packets sent in the last second were lost on the way and resent (8 %)"#),
        "warning.audio_playback_unavailable": (
            json: #"{"event":"warning","kind":"audio_playback_unavailable","message":"audio playback: no PulseAudio server; video only","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"warning: audio playback: no PulseAudio server; video only"#),
        "error.source_switch_failed": (
            json: #"{"event":"error","kind":"source_switch_failed","message":"no window matches 'Slides'; keeping the previous source","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: no window matches 'Slides'; keeping the previous source"#),
        "error.unsupported_resolution": (
            json: #"{"event":"error","height":1,"kind":"unsupported_resolution","message":"the source is 8x1, smaller than 16x16; holding the last picture until it grows","time":"2026-11-18T11:06:40.125Z","width":8}"#,
            text: #"error: the source is 8x1, smaller than 16x16; holding the last picture until it grows"#),
        "error.source_gone": (
            json: #"{"event":"error","kind":"source_gone","message":"the X server closed the connection","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: the X server closed the connection"#),
        "error.encode_failure": (
            json: #"{"event":"error","kind":"encode_failure","message":"vpx_codec_encode: Invalid parameter","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: vpx_codec_encode: Invalid parameter"#),
        "error.record_failure": (
            json: #"{"event":"error","kind":"record_failure","message":"cannot write /tmp/out.webm: No space left on device","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: cannot write /tmp/out.webm: No space left on device"#),
        "error.unauthorized": (
            json: #"{"event":"error","kind":"unauthorized","message":"join: the token expired at 2026-11-18T10:00:00Z","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: join: the token expired at 2026-11-18T10:00:00Z"#),
        "error.untrusted_relay": (
            json: #"{"event":"error","kind":"untrusted_relay","message":"the relay's certificate is sha256:0f0f…, not the sha256:abab… pinned with --fingerprint","time":"2026-11-18T11:06:40.125Z"}"#,
            text: #"error: the relay's certificate is sha256:0f0f…, not the sha256:abab… pinned with --fingerprint"#),
    ]
}
