import AudioIO
import Events
import MediaCore
import Basics
import Room
import Transport
import VP8Codec
@testable import Receiver
@testable import Relay
@testable import Sender
import NetworkAddress
import RoomEvents

/// The events the pinning test renders, one per label of `PinnedOutput.expected`: the typed
/// events the emitters emit (the room, relay and audio events made by the emitters' own mapping
/// functions), with the values the pinned output was recorded with.
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
        func changed(_ new: LiveSettings, from old: LiveSettings) -> SettingsChanged {
            SettingsChanged(settings: new, changed: new.changedKeys(from: old))
        }
        var hosting = RoomSettings(name: "class", displayName: "ann@laptop", server: "192.168.1.20:7600")
        hosting.watchCommand = "screenshare watch --room class --server 192.168.1.20:7600"
        hosting.browserURL = "http://192.168.1.20:7600/class"
        let joining = RoomSettings(name: "class", displayName: "bob@desk", server: "192.168.1.20:7600")
        return [
            ("sender.started", SenderStarted(
                destination: Endpoint(host: "127.0.0.1", port: 5004), ssrc: 2_718_522_738, fps: 15, bitrateKbps: 2000,
                content: .detail, controlSocket: "/run/user/1000/screenshare/pid-42.sock")),
            ("sender.started.noControl.audio", SenderStarted(
                destination: Endpoint(host: "10.0.0.2", port: 6000), ssrc: 7, fps: 30, bitrateKbps: 4000, content: .motion,
                controlSocket: nil, audio: .init(ssrc: 3_000_000_001, port: 6002, bitrateKbps: 64))),
            ("sender.started.room.hosting", SenderStarted(
                destination: Endpoint(host: "127.0.0.1", port: 7600), ssrc: 2_895_255_438, fps: 15, bitrateKbps: 2000,
                content: .detail, controlSocket: "/run/user/1000/screenshare/class.sock", room: hosting)),
            ("sender.started.room.joining", SenderStarted(
                destination: Endpoint(host: "192.168.1.20", port: 7600), ssrc: 99, fps: 15, bitrateKbps: 2000,
                content: .detail, controlSocket: nil, room: joining,
                audio: .init(ssrc: 5, port: 7600, bitrateKbps: 48, microphone: ("Built-in Audio Analog Stereo", "alsa_input.pci-0000_00_1f.3.analog-stereo")),
                shared: "window 'Slides'")),
            ("sender.invitation", InvitationChanged(link: "http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4")),
            ("sender.invitation.revoked", InvitationChanged(link: nil)),
            ("sender.first_frame_sent", FirstFrameSent(size: PixelSize(width: 1920, height: 1080), keyframe: true, latencyMillis: 20.123_456)),
            ("sender.stats", SenderStats(
                fps: 15, kbps: 412, framesSent: 61, keyframesSent: 1,
                encodeMillis: Quantiles(p50: 3.2449, p95: 5.0), captureMillis: Quantiles(p50: 0.9, p95: 1.1),
                convertMillis: Quantiles(p50: 0.7, p95: 0.8), sendMillis: Quantiles(p50: 0.0504, p95: 0.07),
                size: PixelSize(width: 1920, height: 1080), sendErrors: 0, rttMillis: nil, loss: nil, retransmitted: 0,
                targetKbps: 500, framesCaptured: 75, framesEncoded: 61)),
            ("sender.stats.room.audio", SenderStats(
                fps: 30, kbps: 2100, framesSent: 600, keyframesSent: 3,
                encodeMillis: Quantiles(p50: 8.25, p95: 12.96), captureMillis: Quantiles(p50: 1.0, p95: 2.0),
                convertMillis: Quantiles(p50: 0.5, p95: 0.75), sendMillis: Quantiles(p50: 0.1, p95: 0.2),
                size: PixelSize(width: 1280, height: 720), sendErrors: 2, rttMillis: 0.4321, loss: 0.0123, retransmitted: 4,
                viewers: 3,
                audio: .init(packetsSent: 250, bytesSent: 40000, kbps: 64, latencyP50Millis: 42.5, latencyP95Millis: nil),
                targetKbps: 1960, estimateKbps: 2210, framesCaptured: 598, framesEncoded: 600, quantizer: 31.46)),
            ("sender.bitrate_changed", BitrateChanged(targetKbps: 870, previousKbps: 3000, estimateKbps: 1024, loss: 0.36, rttMillis: 26.016)),
            ("sender.stopped", SenderStopped(
                reason: .duration, framesCaptured: 1, framesEncoded: 24, framesSent: 6, keyframesSent: 1, packetsSent: 648,
                bytesSent: 782_484, sendErrors: 0, encodeErrors: 0, nacksReceived: 0, retransmitted: 0, receiverReports: 0,
                packetsRejected: 0, rttMillis: nil, packetsLost: nil, size: PixelSize(width: 1920, height: 1080), durationSeconds: 4.0812)),
            ("sender.stopped.audio", SenderStopped(
                reason: .requested, framesCaptured: 300, framesEncoded: 300, framesSent: 290, keyframesSent: 2, packetsSent: 2000,
                bytesSent: 1_500_000, sendErrors: 1, encodeErrors: 0, nacksReceived: 5, retransmitted: 5, receiverReports: 9,
                packetsRejected: 2, rttMillis: 1.25, packetsLost: 3, size: PixelSize(width: 1280, height: 720), durationSeconds: 10.05,
                audio: .init(frames: 500, packetsSent: 480, bytesSent: 60000, dtxFrames: 20, silentFrames: 100, cpuSeconds: 0.1234,
                             underruns: 0, droppedFrames: 1, clippedFrames: 0, latencyP50Millis: 40.0, latencyP95Millis: 60.0))),
            ("sender.paused", BroadcastPaused()),
            ("sender.resumed", BroadcastResumed()),
            ("sender.settings_changed", changed(faster, from: settings)),
            ("sender.settings_changed.toNull", changed(unlimited, from: faster)),
            ("sender.source_restored", SourceRestored(size: PixelSize(width: 640, height: 360))),
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
        let room = RoomSettings(name: "class", displayName: "pupil", server: "192.168.1.20:7600")
        return [
            ("viewer.started", ViewerStarted(rtpPort: 5004, rtcpPort: 5005, payloadType: 96, window: false, record: nil)),
            ("viewer.started.audio.record", ViewerStarted(
                rtpPort: 5004, rtcpPort: 5005, payloadType: 96, window: true, record: "/tmp/out.webm",
                audio: .init(port: 5006, playback: true))),
            ("viewer.started.room.audio", ViewerStarted(
                rtpPort: 40123, rtcpPort: 40123, payloadType: 96, window: true, record: nil, room: room,
                audio: .init(port: nil, playback: false))),
            ("viewer.first_frame", FirstFrame(size: PixelSize(width: 1920, height: 1080), timeToFirstFrameMillis: 118.0456)),
            ("viewer.first_frame.room", FirstFrame(size: PixelSize(width: 640, height: 360), timeToFirstFrameMillis: 1500.5,
                                                   sinceSubscribedMillis: 80.25)),
            ("viewer.resolution_changed", ResolutionChanged(size: PixelSize(width: 1280, height: 720))),
            ("viewer.sender_changed", SenderChanged(ssrc: 4_000_000_000)),
            ("viewer.sender_left", SenderLeft(ssrc: 12345)),
            ("viewer.stats", ViewerStats(
                fps: 15, kbps: 400, size: PixelSize(width: 1920, height: 1080), packetsReceived: 3000, packetsLost: 2,
                jitterMillis: 1.2345, bufferMillis: 20.0, framesDecoded: 150, freezeCount: 0, frameGapMillis: 66.7,
                freezesDurationSeconds: 0, nackCount: 1, pliCount: 0,
                rttMillis: nil)),
            ("viewer.stats.audio", ViewerStats(
                fps: 30, kbps: 2000, size: PixelSize(width: 1280, height: 720), packetsReceived: 9000, packetsLost: 0,
                jitterMillis: 0.05, bufferMillis: 35.5, framesDecoded: 900, freezeCount: 1, frameGapMillis: 2400.1,
                freezesDurationSeconds: 2.267, nackCount: 0, pliCount: 1,
                rttMillis: 0.42,
                audio: ViewerAudioStats(
                    avOffsetMillis: -12.3, avSync: true, videoSyncDelayMillis: 0.0, audioSyncDelayMillis: 12.3,
                    outputLatencyMillis: 25.1, outputFlushes: 0, jitterDelayMillis: 40.0, targetDelayMillis: nil,
                    packets: 500, decoded: 498, fecRecovered: 1, concealed: 1, late: 0, silenceFrames: 3, packetsLost: 2,
                    playing: true))),
            ("viewer.stopped", ViewerStopped(
                reason: .duration, framesDecoded: 0, keyframesDecoded: 0, framesDropped: 0, framesReceived: 0, freezeCount: 0,
                totalFreezesDurationSeconds: 0.0, packetsReceived: 0, packetsLost: 0, jitterMillis: 0.0, nackCount: 0, pliCount: 0,
                idleProbes: 0, rttMillis: nil, packetsRejected: 0, decodeErrors: 0, packetsForeign: 0, timeToFirstFrameMillis: nil,
                size: PixelSize(width: 0, height: 0), recordedFrames: 0, durationSeconds: 2.0004, recordedAudioPackets: 0)),
            ("viewer.stopped.audio", ViewerStopped(
                reason: .requested, framesDecoded: 900, keyframesDecoded: 2, framesDropped: 1, framesReceived: 901, freezeCount: 1,
                totalFreezesDurationSeconds: 0.3456, packetsReceived: 9000, packetsLost: 4, jitterMillis: 0.75, nackCount: 3,
                pliCount: 1, idleProbes: 7, rttMillis: 0.42, packetsRejected: 1, decodeErrors: 0, packetsForeign: 2,
                timeToFirstFrameMillis: 118.0456, size: PixelSize(width: 1280, height: 720), recordedFrames: 880,
                durationSeconds: 30.5, recordedAudioPackets: 1500,
                audio: ViewerAudioStats(
                    avOffsetMillis: nil, avSync: false, videoSyncDelayMillis: 0.0, audioSyncDelayMillis: 0.0,
                    outputLatencyMillis: nil, outputFlushes: 2, jitterDelayMillis: nil, targetDelayMillis: 60.0,
                    packets: 1500, decoded: 1490, fecRecovered: 0, concealed: 10, late: 1, silenceFrames: 0, packetsLost: 10,
                    playing: false))),
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
            ("room.connected.one", one(.connected(peer: 3, room: "class", peers: [ann], rejoined: false))),
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
            ("room.disconnected.never", {
                var fresh = RoomEventMapper(server: "192.168.1.20:7600")
                return fresh.map(.disconnected(reason: "no answer after 3 retries"), client: presenter)[0]
            }()),
            ("room.link", one(.link(publisher: 1, layers: .base, estimateKbps: 420))),
        ]
        // A link that carries only keyframes: the event, and a network_busy warning.
        let busy = mapper.map(.link(publisher: 1, layers: .keyframes, estimateKbps: 120), client: presenter)
        precondition(busy.count == 2)
        cases += [("room.link.keyframes", busy[0]), ("room.link.network_busy", busy[1])]
        return cases
    }

    /// A presenter's room client that knows `viewers` (by id and name), as after they joined.
    static func presenterWhoSees(viewers: [(UInt32, String)]) -> RoomClient {
        final class Wire: RelayTransport {
            var sent: [(to: PeerAddress, bytes: [UInt8])] = []
            func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) { sent.append((address, Array(bytes))) }
        }
        let wire = Wire()
        let relay = RelayCore()
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
                relay.drain(into: wire)
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
            ("relay.started", RelayStarted(listen: "0.0.0.0:7600", protocolVersion: 2, receiveBuffer: 8_388_608, sendBuffer: 425_984, access: "tokens",
                                           fingerprint: "sha256:3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f3f")),
            ("relay.started.open", RelayStarted(listen: "127.0.0.1:7600", protocolVersion: 2, receiveBuffer: 8_388_608, sendBuffer: 425_984, access: "open")),
            ("relay.peer_joined", mapped(.peerJoined(room: "class", peer: bob, address: address))),
            ("relay.peer_joined.browser", mapped(.peerJoined(room: "class", peer: PeerInfo(id: 3, name: "browser-1a2b3c", role: "viewer",
                                                                                           client: "browser"), address: address))),
            ("relay.peer_left", mapped(.peerLeft(room: "class", peer: bob, reason: "left"))),
            ("relay.substream_started", mapped(.substreamStarted(room: "class", peer: 1, stream: screen))),
            ("relay.substream_stopped", mapped(.substreamStopped(room: "class", peer: 1, stream: sound))),
            ("relay.subscribed", mapped(.subscribed(room: "class", viewer: 2, publisher: 1, kinds: [.screen, .audio]))),
            ("relay.unsubscribed", mapped(.unsubscribed(room: "class", viewer: 2, publisher: 1))),
            ("relay.stats", RelayStats(
                rooms: 1, peers: 3, browsers: 1, packetsIn: 450, packetsOut: 900, kbpsOut: 4100, retransmitted: 2, keyframeRequests: 0,
                rejected: 1, unknownSource: 0, sendErrors: 0, lostIn: 3, viewersOnBaseLayer: 1, layerSwitches: 2,
                viewerLayers: ["class/2": "base"], resendsNotSent: 3)),
            ("relay.stopped", RelayStopped(
                rtpIn: 10000, rtpForwarded: 20000, bytesForwarded: 25_000_000, rtcpIn: 300, controlIn: 120, retransmitted: 4,
                keyframeRequests: 2, rejected: 1, unknownSource: 0, timeouts: 1, sendErrors: 0, lostIn: 3,
                durationSeconds: 61.23456, viewerFeedbacks: 600, layerSwitches: 3,
                resendsOverBudget: 5, resendsGone: 2, lostForGood: 1)),
        ]
    }

    // MARK: - warning and error (all kinds)

    static func problems() -> [(label: String, event: any BroadcastEvent)] {
        [
            ("warning.control_unavailable", WarningEvent(.controlUnavailable,
                "cannot listen on /run/x.sock: Address already in use; `screenshare ctl` cannot reach this broadcast")),
            ("warning.encoder_overshoot", WarningEvent(.encoderOvershoot(kbps: 3100, targetKbps: 2000),
                "sending 3100 kbps for a 2000 kbps target: the content needs more; raise --bitrate, lower --fps or --max-resolution")),
            ("warning.audio_unavailable", WarningEvent(.audioUnavailable,
                "audio: PulseAudio is not running; sending video only (use --no-audio to silence this)")),
            ("warning.source_resized", WarningEvent(.sourceResized,
                "source is now 1280x720 (was 1920x1080); restarting the encoder with a keyframe")),
            ("warning.source_unavailable", WarningEvent(.sourceUnavailable,
                "window 0x200001 \"Slides\" is not mapped (minimised or hidden); sending a placeholder")),
            ("warning.encoder_reconfigure", WarningEvent(.encoderReconfigure, "vpx_codec_enc_config_set failed; re-creating it")),
            ("warning.send_failed", WarningEvent(.sendFailed, "packets to 127.0.0.1:5004 are refused (is a receiver listening?)")),
            ("warning.send_failed.audio", WarningEvent(.sendFailed,
                "audio packets to 127.0.0.1:5006 are refused (is a receiver listening?)")),
            ("warning.network_busy", WarningEvent(.networkBusy,
                "30 of 400 packets sent in the last second were lost on the way and resent (8 %)")),
            ("warning.audio_playback_unavailable", WarningEvent(.audioPlaybackUnavailable,
                "audio playback: no PulseAudio server; video only")),
            ("error.source_switch_failed", ErrorEvent(.sourceSwitchFailed, "no window matches 'Slides'; keeping the previous source")),
            ("error.unsupported_resolution", ErrorEvent(.unsupportedResolution(width: 8, height: 1),
                "the source is 8x1, smaller than 16x16; holding the last picture until it grows")),
            ("error.source_gone", ErrorEvent(.sourceGone, "the X server closed the connection")),
            ("error.encode_failure", ErrorEvent(.encodeFailure, "vpx_codec_encode: Invalid parameter")),
            ("error.record_failure", ErrorEvent(.recordFailure, "cannot write /tmp/out.webm: No space left on device")),
            ("error.unauthorized", ErrorEvent(.unauthorized, "join: the token expired at 2026-11-18T10:00:00Z")),
            ("error.untrusted_relay", ErrorEvent(.untrustedRelay, "the relay's certificate is sha256:0f0f…, not the sha256:abab… pinned with --fingerprint")),
        ]
    }
}
