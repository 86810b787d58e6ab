import Foundation
import Testing
import X11TestSupport

/// Forward error correction end to end: `start --to` sends ULPFEC (RFC 5109) in the video
/// stream; `watch` recovers with it, and so does GStreamer's own `rtpulpfecdec` (an
/// independent check of the bytes).
@Suite(.serialized) struct FECEndToEndTests {
    /// GStreamer (rtpstorage, rtpjitterbuffer, rtpulpfecdec, vp8dec) behind 5 % random loss:
    /// it recovers packets from our FEC packets and decodes the stream. (It sends no feedback:
    /// a keyframe every 2 s, in case the first one is lost beyond repair.)
    @Test func gstreamerRecoversPacketsFromOurFEC() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 15, frames: 45, in: dir)
        let (port, proxyPort) = ViewerRobustnessTests.ports()
        let gst = try Child("/usr/bin/python3", [scriptPath("lib/gst-fec-receiver.py"), "\(port)", "117", "12"], dir: dir, name: "gst")
        try waitUntilBound(port)
        let proxy = try ViewerRobustnessTests.proxy(dir, listen: proxyPort, to: port, ["--loss", "0.05", "--seed", "5"])
        let sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", "nv12", "--input-size", "640x360",
            "--fps", "15", "--no-audio", "--fec", "on", "--bitrate", "1M", "--keyframe-interval", "2", "--duration", "6", "--json",
        ], dir: dir, name: "sender")
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        #expect(gst.finish(within: 20) == 0, "gst: \(gst.stderr)")
        proxy.finish(within: 0)
        let sent = try EventLog(sender).stopped()
        let dropped = try #require(try EventLog(proxy).stopped()["dropped"] as? Int)
        let lines = gst.stdout.split(separator: "\n")
        let summary = try #require(lines.last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] },
                                   "gst: \(gst.stdout.suffix(300)) \(gst.stderr)")
        let recovered = summary["recovered"] as? Int ?? 0, decoded = lines.count - 1
        let framesSent = sent["frames_sent"] as? Int ?? 0, fecPackets = sent["fec_packets"] as? Int ?? 0
        let record = "GStreamer recovered \(recovered) packets of \(dropped) dropped, decoded \(decoded) of \(framesSent) frames; "
            + "the sender sent \(fecPackets) FEC packets of \(sent["packets_sent"] ?? "?")"
        print("gstreamerFEC:", record)
        #expect(fecPackets > 0 && dropped >= 10, "\(record)")
        // About 60 % of single losses fall in a group with no other loss at this protection.
        #expect(Double(recovered) >= 0.3 * Double(dropped), "\(record)")
        #expect(Double(decoded) >= 0.6 * Double(framesSent), "\(record)")
    }

    /// 5 % loss both ways and 90–110 ms on the way to the viewer (a round trip of about 100 ms:
    /// a resend misses the next frame or two at 15 fps): `--fec auto` turns FEC on from the
    /// viewer's feedback, and the viewer recovers most losses from it without a resend.
    @Test func autoFECRepairsLossesWhereResendsAreTooSlow() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 15, frames: 60, in: dir)
        let session = try PlainSession(dir: dir, input: input, width: 640, height: 360, fps: 15, transportFeedback: true,
                                       viewerSeconds: 32,
                                       proxyArguments: ["--loss", "0.05", "--delay", "100", "--jitter", "10", "--all", "--seed", "9"],
                                       senderArguments: ["--bitrate", "1M", "--content", "motion", "--duration", "30"])
        let exits = session.finish(within: 60)
        #expect(exits.sender == 0 && exits.viewer == 0, "\(session.sender.stderr)\(session.viewer.stderr)")
        let sent = try EventLog(session.sender).stopped(), got = try EventLog(session.viewer).stopped()
        let proxied = try EventLog(session.proxy).stopped()
        let on = EventLog(session.sender).events(named: "stats").filter { ($0["fec_protection"] as? Double ?? 0) > 0 }.count
        let recovered = got["fec_recovered"] as? Int ?? 0, dropped = proxied["dropped"] as? Int ?? 0
        let freezes = got["total_freezes_duration_s"] as? Double ?? -1
        let record = "FEC on \(on) s of 30; viewer recovered \(recovered) packets (the proxy dropped \(dropped) both ways), "
            + "NACKed \(got["nack_count"] ?? "?"), froze \(got["freeze_count"] ?? "?") times for \(freezes) s; "
            + "decoded \(got["frames_decoded"] ?? "?") of \(sent["frames_sent"] ?? "?"); sender \(sent)"
        print("autoFEC:", record)
        #expect(on >= 20, "\(record)")
        #expect((sent["fec_packets"] as? Int ?? 0) > 0 && (got["fec_packets"] as? Int ?? 0) > 0, "\(record)")
        // Half the drops are forward media (the rest: feedback, FEC itself); most of those are repaired by FEC.
        #expect(Double(recovered) >= 0.2 * Double(dropped), "\(record)")
    }

    /// A room whose presenter's uplink loses 5 % (both ways) at about 100 ms: the presenter
    /// sends its FEC as a stream of its own, the relay recovers the lost packets itself and
    /// forwards them at once, asks the presenter for the rest (before, nothing asked for them:
    /// the viewer's NACKs found nothing at the relay, and it decoded 71 of 346 frames), and the
    /// viewer also gets the FEC stream.
    @Test func theRelayRecoversThePresentersLossesFromFEC() throws {
        let dir = try makeTempDir()
        let input = try PlainSession.motion(width: 640, height: 360, fps: 15, frames: 60, in: dir)
        let relayPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == relayPort || proxyPort == relayPort + 1 || proxyPort + 1 == relayPort { proxyPort = freeEvenPort() }
        let relay = try RoomEndToEndTests.serve(dir, port: relayPort, duration: 30)
        let proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(relayPort)",
                                                 "--loss", "0.05", "--delay", "100", "--jitter", "10", "--all", "--seed", "4"],
                              dir: dir, name: "proxy")
        try waitUntilBound(proxyPort)
        let viewer = try Child(screenshareBinary(), ["watch", "--room", "class", "--server", "127.0.0.1:\(relayPort)", "--headless",
                                                     "--duration", "24", "--json"], dir: dir, name: "viewer")
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "class", "--server", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", "nv12",
            "--input-size", "640x360", "--fps", "15", "--bitrate", "1M", "--content", "motion", "--no-audio", "--duration", "22", "--json",
        ], dir: dir, name: "presenter")
        #expect(presenter.finish(within: 45) == 0, "\(presenter.stderr)")
        #expect(viewer.finish(within: 20) == 0, "\(viewer.stderr)")
        proxy.finish(within: 0)
        relay.finish(within: 0)
        let relayed = try EventLog(relay).stopped(), got = try EventLog(viewer).stopped(), sent = try EventLog(presenter).stopped()
        let dropped = try #require(try EventLog(proxy).stopped()["dropped"] as? Int)
        let recovered = relayed["fec_recovered"] as? Int ?? 0
        let record = "the relay took \(relayed["fec_in"] ?? "?") FEC packets and recovered \(recovered) (the proxy dropped \(dropped) both ways); "
            + "the viewer got \(got["fec_packets"] ?? "?") FEC packets, decoded \(got["frames_decoded"] ?? "?") of \(sent["frames_sent"] ?? "?"), "
            + "froze \(got["total_freezes_duration_s"] ?? "?") s; presenter \(sent)"
        print("roomFEC:", record)
        #expect((sent["fec_packets"] as? Int ?? 0) > 0 && (got["fec_packets"] as? Int ?? 0) > 0, "\(record)")
        #expect(recovered >= 10 && Double(recovered) >= 0.15 * Double(dropped), "\(record)")
        #expect((relayed["uplink_nacks"] as? Int ?? 0) > 0 && (sent["retransmitted"] as? Int ?? 0) > 0, "\(record)")
        #expect(Double(got["frames_decoded"] as? Int ?? 0) >= 0.9 * Double(sent["frames_sent"] as? Int ?? .max), "\(record)")
    }
}
