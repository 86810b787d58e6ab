import AudioIO
import Events
import Room
import Transport
@testable import Relay
@testable import Sender

/// The events the pinning test renders, one per label of `PinnedOutput.expected`: built as
/// the emitters build them (the room, relay and audio events by the emitters' own mapping
/// functions; the others with the fields and values the emitters give them).
enum EventCases {
    static func all() -> [(label: String, event: any BroadcastEvent)] {
        sender() + audio() + viewer() + room() + relay() + problems()
    }

    // MARK: - start

    static func sender() -> [(label: String, event: any BroadcastEvent)] {
        let settings = LiveSettings(config: BroadcastConfig(source: .x11(display: nil, source: .screen, drawCursor: true),
                                                            destination: Endpoint(host: "127.0.0.1", port: 5004), cname: "test"))
        let faster = try! settings.applying([("bitrate", "1M"), ("max-resolution", "720p"), ("min-fps", "0.5")])
        let unlimited = try! faster.applying([("max-resolution", "none"), ("keyframe-interval", "2.5"), ("source", "region:640x360+10+20")])
        func changed(_ new: LiveSettings, from old: LiveSettings) -> UntypedEvent {
            var fields = new.fields
            fields["changed"] = .array(new.changedKeys(from: old).map { .string($0) })
            return UntypedEvent("settings_changed", fields)
        }
        return [
            ("sender.started", UntypedEvent("started", [
                "destination": "127.0.0.1:5004", "ssrc": .int(2_718_522_738), "fps": 15, "bitrate_kbps": 2000,
                "content": "detail", "control_socket": "/run/user/1000/screenshare/pid-42.sock",
            ])),
            ("sender.started.noControl.audio", UntypedEvent("started", [
                "destination": "10.0.0.2:6000", "ssrc": 7, "fps": 30, "bitrate_kbps": 4000, "content": "motion",
                "control_socket": .null, "audio_ssrc": .int(3_000_000_001), "audio_port": 6002, "audio_bitrate_kbps": 64,
            ])),
            ("sender.started.room.hosting", UntypedEvent("started", [
                "destination": "127.0.0.1:7600", "ssrc": .int(2_895_255_438), "fps": 15, "bitrate_kbps": 2000,
                "content": "detail", "control_socket": "/run/user/1000/screenshare/class.sock",
                "room": "class", "server": "192.168.1.20:7600", "name": "ann@laptop",
                "watch_command": "screenshare watch --room class --server 192.168.1.20:7600",
            ])),
            ("sender.started.room.joining", UntypedEvent("started", [
                "destination": "192.168.1.20:7600", "ssrc": 99, "fps": 15, "bitrate_kbps": 2000,
                "content": "detail", "control_socket": .null, "room": "class", "server": "192.168.1.20:7600", "name": "bob@desk",
                "audio_ssrc": 5, "audio_port": 7600, "audio_bitrate_kbps": 48,
            ])),
            ("sender.first_frame_sent", UntypedEvent("first_frame_sent", [
                "width": 1920, "height": 1080, "keyframe": true, "latency_ms": .double(20.123_456),
            ])),
            ("sender.stats", UntypedEvent("stats", [
                "fps": 15, "kbps": 412, "frames_sent": 61, "keyframes_sent": 1,
                "encode_ms_p50": .double(3.2449), "encode_ms_p95": .double(5.0),
                "capture_ms_p50": .double(0.9), "capture_ms_p95": .double(1.1),
                "convert_ms_p50": .double(0.7), "convert_ms_p95": .double(0.8),
                "send_ms_p50": .double(0.0504), "send_ms_p95": .double(0.07),
                "width": 1920, "height": 1080, "send_errors": 0,
                "rtt_ms": .null, "loss": .null, "retransmitted": 0,
            ])),
            ("sender.stats.room.audio", UntypedEvent("stats", [
                "fps": 30, "kbps": 2100, "frames_sent": 600, "keyframes_sent": 3,
                "encode_ms_p50": .double(8.25), "encode_ms_p95": .double(12.96),
                "capture_ms_p50": .double(1.0), "capture_ms_p95": .double(2.0),
                "convert_ms_p50": .double(0.5), "convert_ms_p95": .double(0.75),
                "send_ms_p50": .double(0.1), "send_ms_p95": .double(0.2),
                "width": 1280, "height": 720, "send_errors": 2,
                "rtt_ms": .double(0.4321), "loss": .double(0.0123), "retransmitted": 4,
                "viewers": 3,
                "audio_packets_sent": 250, "audio_bytes_sent": 40000, "audio_kbps": 64,
                "audio_latency_ms_p50": .double(42.5), "audio_latency_ms_p95": .null,
            ])),
            ("sender.stopped", UntypedEvent("stopped", [
                "reason": "duration", "frames_captured": 1, "frames_encoded": 24, "frames_sent": 6,
                "keyframes_sent": 1, "packets_sent": 648, "bytes_sent": 782_484, "send_errors": 0, "encode_errors": 0,
                "nacks_received": 0, "retransmitted": 0, "receiver_reports": 0, "rtt_ms": .null, "packets_lost": .null,
                "width": 1920, "height": 1080, "duration_s": .double(4.0812),
            ])),
            ("sender.stopped.audio", UntypedEvent("stopped", [
                "reason": "requested", "frames_captured": 300, "frames_encoded": 300, "frames_sent": 290,
                "keyframes_sent": 2, "packets_sent": 2000, "bytes_sent": 1_500_000, "send_errors": 1, "encode_errors": 0,
                "nacks_received": 5, "retransmitted": 5, "receiver_reports": 9, "rtt_ms": .double(1.25), "packets_lost": 3,
                "width": 1280, "height": 720, "duration_s": .double(10.05),
                "audio_frames": 500, "audio_packets_sent": 480, "audio_bytes_sent": 60000, "audio_dtx_frames": 20,
                "audio_silent_frames": 100, "audio_cpu_s": .double(0.1234), "audio_underruns": 0,
                "audio_dropped_frames": 1, "audio_clipped_frames": 0,
                "audio_latency_ms_p50": .double(40.0), "audio_latency_ms_p95": .double(60.0),
            ])),
            ("sender.paused", UntypedEvent("paused")),
            ("sender.resumed", UntypedEvent("resumed")),
            ("sender.settings_changed", changed(faster, from: settings)),
            ("sender.settings_changed.toNull", changed(unlimited, from: faster)),
            ("sender.source_restored", UntypedEvent("source_restored", ["size": "640x360"])),
        ]
    }

    static func audio() -> [(label: String, event: any BroadcastEvent)] {
        [
            ("audio.app_attached", AudioSender.broadcastEvent(.appAttached(index: 12, name: "Firefox", binary: "firefox", pid: "4242"))),
            ("audio.app_detached", AudioSender.broadcastEvent(.appDetached(index: 12))),
            ("audio.source_lost", AudioSender.broadcastEvent(.sourceLost(reason: "PulseAudio went away"))),
            ("audio.reconnecting", AudioSender.broadcastEvent(.reconnecting(attempt: 2, delayMillis: 1000))),
            ("audio.resumed", AudioSender.broadcastEvent(.resumed)),
            ("audio.stream_failed", AudioSender.broadcastEvent(.streamFailed(what: "sink input 12", reason: "no such entity"))),
        ]
    }

    // MARK: - watch

    static func viewer() -> [(label: String, event: any BroadcastEvent)] {
        [
            ("viewer.started", UntypedEvent("started", [
                "rtp_port": 5004, "rtcp_port": 5005, "payload_type": 96, "window": false, "record": .null,
            ])),
            ("viewer.started.audio.record", UntypedEvent("started", [
                "rtp_port": 5004, "rtcp_port": 5005, "payload_type": 96, "window": true, "record": "/tmp/out.webm",
                "audio_port": 5006, "audio_playback": true,
            ])),
            ("viewer.started.room.audio", UntypedEvent("started", [
                "rtp_port": 40123, "rtcp_port": 40123, "payload_type": 96, "window": true, "record": .null,
                "room": "class", "server": "192.168.1.20:7600", "audio_port": .null, "audio_playback": false,
            ])),
            ("viewer.first_frame", UntypedEvent("first_frame", [
                "width": 1920, "height": 1080, "time_to_first_frame_ms": .double(118.0456),
            ])),
            ("viewer.first_frame.room", UntypedEvent("first_frame", [
                "width": 640, "height": 360, "time_to_first_frame_ms": .double(1500.5), "since_subscribed_ms": .double(80.25),
            ])),
            ("viewer.resolution_changed", UntypedEvent("resolution_changed", ["width": 1280, "height": 720])),
            ("viewer.sender_changed", UntypedEvent("sender_changed", ["ssrc": .int(4_000_000_000)])),
            ("viewer.sender_left", UntypedEvent("sender_left", ["ssrc": 12345])),
            ("viewer.stats", UntypedEvent("stats", [
                "fps": 15, "kbps": 400, "width": 1920, "height": 1080, "packets_received": 3000, "packets_lost": 2,
                "jitter_ms": .double(1.2345), "buffer_ms": .double(20.0), "frames_decoded": 150, "freeze_count": 0,
                "nack_count": 1, "pli_count": 0, "rtt_ms": .null,
            ])),
            ("viewer.stats.audio", UntypedEvent("stats", [
                "fps": 30, "kbps": 2000, "width": 1280, "height": 720, "packets_received": 9000, "packets_lost": 0,
                "jitter_ms": .double(0.05), "buffer_ms": .double(35.5), "frames_decoded": 900, "freeze_count": 1,
                "nack_count": 0, "pli_count": 1, "rtt_ms": .double(0.42),
                "av_offset_ms": .double(-12.3), "av_sync": true, "video_sync_delay_ms": .double(0.0), "audio_sync_delay_ms": .double(12.3),
                "audio_output_latency_ms": .double(25.1), "audio_output_flushes": 0, "audio_jitter_delay_ms": .double(40.0),
                "audio_target_delay_ms": .null, "audio_packets": 500, "audio_decoded": 498, "audio_fec_recovered": 1,
                "audio_concealed": 1, "audio_late": 0, "audio_silence_frames": 3, "audio_packets_lost": 2, "audio_playing": true,
            ])),
            ("viewer.stopped", UntypedEvent("stopped", [
                "reason": "duration", "frames_decoded": 0, "keyframes_decoded": 0, "frames_dropped": 0, "frames_received": 0,
                "freeze_count": 0, "total_freezes_duration_s": .double(0.0), "packets_received": 0, "packets_lost": 0,
                "jitter_ms": .double(0.0), "nack_count": 0, "pli_count": 0, "idle_probes": 0, "rtt_ms": .null,
                "packets_rejected": 0, "decode_errors": 0, "packets_foreign": 0, "time_to_first_frame_ms": .null,
                "width": 0, "height": 0, "recorded_frames": 0, "duration_s": .double(2.0004), "recorded_audio_packets": 0,
            ])),
            ("viewer.stopped.audio", UntypedEvent("stopped", [
                "reason": "requested", "frames_decoded": 900, "keyframes_decoded": 2, "frames_dropped": 1, "frames_received": 901,
                "freeze_count": 1, "total_freezes_duration_s": .double(0.3456), "packets_received": 9000, "packets_lost": 4,
                "jitter_ms": .double(0.75), "nack_count": 3, "pli_count": 1, "idle_probes": 7, "rtt_ms": .double(0.42),
                "packets_rejected": 1, "decode_errors": 0, "packets_foreign": 2, "time_to_first_frame_ms": .double(118.0456),
                "width": 1280, "height": 720, "recorded_frames": 880, "duration_s": .double(30.5), "recorded_audio_packets": 1500,
                "av_offset_ms": .null, "av_sync": false, "video_sync_delay_ms": .double(0.0), "audio_sync_delay_ms": .double(0.0),
                "audio_output_latency_ms": .null, "audio_output_flushes": 2, "audio_jitter_delay_ms": .null,
                "audio_target_delay_ms": .double(60.0), "audio_packets": 1500, "audio_decoded": 1490, "audio_fec_recovered": 0,
                "audio_concealed": 10, "audio_late": 1, "audio_silence_frames": 0, "audio_packets_lost": 10, "audio_playing": false,
            ])),
        ]
    }

    // MARK: - Room (start and watch)

    static let screen = StreamInfo(kind: .screen, ssrc: 0x1111, pt: 96, codec: "VP8", clock: 90000)
    static let sound = StreamInfo(kind: .audio, ssrc: 0x2222, pt: 111, codec: "opus", clock: 48000, channels: 2)

    static func room() -> [(label: String, event: any BroadcastEvent)] {
        let ann = PeerInfo(id: 1, name: "ann@laptop", role: "presenter", streams: [screen, sound])
        let bob = PeerInfo(id: 2, name: "bob@desk", role: "viewer")
        var mapper = RoomEventMapper(server: "192.168.1.20:7600")
        let presenter = presenterWhoSees(viewers: [(2, "bob@desk"), (3, "cy")])
        func one(_ e: RoomClientEvent) -> any BroadcastEvent {
            let out = mapper.map(e, client: presenter)
            precondition(out.count == 1, "\(e) maps to \(out.count) events")
            return out[0]
        }
        var cases: [(label: String, event: any BroadcastEvent)] = [
            ("room.connected", one(.connected(peer: 1, room: "class", peers: [], rejoined: false))),
            ("room.connected.rejoined", one(.connected(peer: 4, room: "class", peers: [ann, bob], rejoined: true))),
            ("room.peer_joined", one(.peerJoined(bob))),
            ("room.peer_left", one(.peerLeft(bob, reason: "timeout"))),
            ("room.substream_started", one(.substreamStarted(peer: ann, stream: screen))),
            ("room.substream_stopped", one(.substreamStopped(peer: ann, stream: sound))),
            ("room.subscribed", one(.subscribed(publisher: ann, streams: [screen, sound]))),
            ("room.unsubscribed", one(.unsubscribed(publisher: ann))),
        ]
        // The presenter's audience: one event per viewer who came or went.
        let came = mapper.map(.subscribers([2, 3]), client: presenter)
        precondition(came.count == 2)
        cases += [("room.viewer_subscribed", came[0]), ("room.viewer_subscribed.second", came[1])]
        let went = mapper.map(.subscribers([3]), client: presenter)
        precondition(went.count == 1)
        cases.append(("room.viewer_unsubscribed", went[0]))
        cases += [
            ("room.reconnecting", one(.reconnecting(attempt: 2, delayNanos: 1_000_000_000, reason: "no word from the relay for 3 s"))),
            ("room.error", one(.error(code: .unknownPeer, message: "no peer 'carol' in room class"))),
            ("room.disconnected", one(.disconnected(reason: "no answer after 3 retries"))),
        ]
        return cases
    }

    /// A presenter's room client that knows `viewers` (by id and name), as after they joined.
    static func presenterWhoSees(viewers: [(UInt32, String)]) -> RoomClient {
        final class Wire: RelayTransport {
            var sent: [(to: PeerAddress, bytes: [UInt8])] = []
            func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) { sent.append((address, Array(bytes))) }
        }
        let wire = Wire()
        let relay = RelayCore(transport: wire)
        var clients: [(PeerAddress, RoomClient)] = [(PeerAddress(ip: 0x7F00_0001, port: 40001),
                                                     RoomClient(room: "class", name: "ann@laptop", role: "presenter"))]
        for (i, v) in viewers.enumerated() {
            clients.append((PeerAddress(ip: 0x7F00_0001, port: 40002 + UInt16(i)), RoomClient(room: "class", name: v.1, role: "viewer")))
        }
        let now: UInt64 = 1_000_000_000
        // One at a time, in order, so the relay gives the ids 1, 2, 3, ...
        for i in clients.indices {
            clients[i].1.start(now: now)
            for _ in 0..<10 {
                for j in clients.indices {
                    for bytes in clients[j].1.takeOutgoing() {
                        bytes.withUnsafeBytes { relay.receive($0, from: clients[j].0, now: now, wallNanos: now) }
                    }
                }
                let sent = wire.sent
                wire.sent.removeAll()
                for (to, bytes) in sent {
                    guard let j = clients.firstIndex(where: { $0.0 == to }),
                          let e = bytes.withUnsafeBytes({ try? ControlEnvelope.parse($0) }) else { continue }
                    clients[j].1.receive(e, now: now)
                }
                if sent.isEmpty { break }
            }
        }
        let presenter = clients[0].1
        for (id, name) in viewers { precondition(presenter.peers[id]?.name == name, "viewer \(id) is not known as \(name)") }
        return presenter
    }

    // MARK: - serve

    static func relay() -> [(label: String, event: any BroadcastEvent)] {
        let bob = PeerInfo(id: 2, name: "bob@desk", role: "viewer")
        let address = PeerAddress(ip: 0xC0A8_0115, port: 51000)
        func mapped(_ e: RelayEvent) -> any BroadcastEvent { RelayServer.event(for: e)! }
        return [
            ("relay.started", RelayStarted(listen: "0.0.0.0:7600", protocolVersion: 1, receiveBuffer: 8_388_608, sendBuffer: 425_984)),
            ("relay.peer_joined", mapped(.peerJoined(room: "class", peer: bob, address: address))),
            ("relay.peer_left", mapped(.peerLeft(room: "class", peer: bob, reason: "left"))),
            ("relay.substream_started", mapped(.substreamStarted(room: "class", peer: 1, stream: screen))),
            ("relay.substream_stopped", mapped(.substreamStopped(room: "class", peer: 1, stream: sound))),
            ("relay.subscribed", mapped(.subscribed(room: "class", viewer: 2, publisher: 1, kinds: [.screen, .audio]))),
            ("relay.unsubscribed", mapped(.unsubscribed(room: "class", viewer: 2, publisher: 1))),
            ("relay.stats", RelayStats(
                rooms: 1, peers: 3, packetsIn: 450, packetsOut: 900, kbpsOut: 4100, retransmitted: 2, keyframeRequests: 0,
                rejected: 1, unknownSource: 0, sendErrors: 0, lostIn: 3)),
            ("relay.stopped", RelayStopped(
                rtpIn: 10000, rtpForwarded: 20000, bytesForwarded: 25_000_000, rtcpIn: 300, controlIn: 120, retransmitted: 4,
                keyframeRequests: 2, rejected: 1, unknownSource: 0, timeouts: 1, sendErrors: 0, lostIn: 3,
                durationSeconds: 61.23456)),
        ]
    }

    // MARK: - warning and error (all kinds)

    static func problems() -> [(label: String, event: any BroadcastEvent)] {
        func warning(_ kind: String, _ message: String) -> UntypedEvent {
            UntypedEvent("warning", ["kind": .string(kind), "message": .string(message)])
        }
        func error(_ kind: String, _ message: String) -> UntypedEvent {
            UntypedEvent("error", ["kind": .string(kind), "message": .string(message)])
        }
        return [
            ("warning.control_unavailable", warning("control_unavailable",
                "cannot listen on /run/x.sock: Address already in use; `screenshare ctl` cannot reach this broadcast")),
            ("warning.encoder_overshoot", UntypedEvent("warning", ["kind": "encoder_overshoot", "kbps": 3100, "target_kbps": 2000,
                "message": "sending 3100 kbps for a 2000 kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution"])),
            ("warning.audio_unavailable", warning("audio_unavailable",
                "audio: PulseAudio is not running; sending video only (use --no-audio to silence this)")),
            ("warning.source_resized", warning("source_resized",
                "source is now 1280x720 (was 1920x1080); restarting the encoder with a keyframe")),
            ("warning.source_unavailable", warning("source_unavailable",
                "window 0x200001 \"Slides\" is not mapped (minimised or hidden); sending a placeholder")),
            ("warning.encoder_reconfigure", warning("encoder_reconfigure", "vpx_codec_enc_config_set failed; re-creating it")),
            ("warning.send_failed", warning("send_failed", "packets to 127.0.0.1:5004 are refused (is a receiver listening?)")),
            ("warning.send_failed.audio", warning("send_failed",
                "audio packets to 127.0.0.1:5006 are refused (is a receiver listening?)")),
            ("warning.network_busy", warning("network_busy",
                "30 of 400 packets sent in the last second were lost on the way and resent (8 %)")),
            ("warning.audio_playback_unavailable", warning("audio_playback_unavailable",
                "audio playback: no PulseAudio server; video only")),
            ("error.source_switch_failed", error("source_switch_failed", "no window matches 'Slides'; keeping the previous source")),
            ("error.unsupported_resolution", UntypedEvent("error", ["kind": "unsupported_resolution", "width": 8, "height": 1,
                "message": "the source is 8x1, smaller than 16x16; holding the last picture until it grows"])),
            ("error.source_gone", error("source_gone", "the X server closed the connection")),
            ("error.encode_failure", error("encode_failure", "vpx_codec_encode: Invalid parameter")),
            ("error.record_failure", error("record_failure", "cannot write /tmp/out.webm: No space left on device")),
        ]
    }
}
