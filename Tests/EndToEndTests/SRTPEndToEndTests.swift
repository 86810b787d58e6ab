import Foundation
import Testing
import X11TestSupport

/// `start --to … --srtp`: the SDP carries fresh keys (mode 0600); ffmpeg, GStreamer and
/// `watch --sdp` decrypt the stream; nothing of the pictures crosses the wire in clear; a
/// replayed or forged packet is refused, counted, and the picture goes on.
@Suite(.serialized) struct SRTPEndToEndTests {
    static func sender(_ dir: String, port: UInt16, sdp: String, input: String, duration: Int, srtp: Bool = true) throws -> Child {
        try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(port)", "--sdp", sdp, "--input", input, "--input-size", "320x240", "--fps", "15",
            "--content", "motion", "--no-audio", "--keyframe-interval", "1", "--duration", String(duration), "--json",
        ] + (srtp ? ["--srtp"] : []), dir: dir, name: "sender-\(port)")
    }

    /// Issue 40: `--keyframe-interval` is wall-clock seconds, whatever the frame rate. On a
    /// still screen (encoded at the 1 fps keep-alive) an ffmpeg that starts 3 s late and sends
    /// no PLI decodes a picture within 2 s, plain and with SRTP; counted in frames, as libvpx
    /// counts, `--keyframe-interval 1` meant 15 frames, 15 s at 1 fps. (`-analyzeduration 0
    /// -probesize 32`: ffmpeg 5.1 otherwise waits for many frames to learn the stream, see the
    /// README.)
    @Test(arguments: [false, true]) func aLateFFmpegSeesAStillScreenWithinTwoSeconds(srtp: Bool) throws {
        let xvfb = try PrivateXvfb(width: 640, height: 480)
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let sdp = "\(dir)/still.sdp"
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--sdp", sdp, "--no-audio", "--keyframe-interval", "1",
            "--duration", "20", "--json",
        ] + (srtp ? ["--srtp"] : []), dir: dir, name: "sender")
        defer { _ = sender.finish(within: 0) }
        try EventLog.wait(for: "first_frame_sent", in: sender)
        hold(3, "the receiver joins 3 s after the stream began, past its first keyframe")
        let began = Date()
        let ffmpeg = try Child(which("ffmpeg"), [
            "-nostdin", "-loglevel", "error", "-analyzeduration", "0", "-probesize", "32",
            "-protocol_whitelist", srtp ? "file,udp,rtp,srtp,crypto" : "file,udp,rtp", "-i", sdp,
            "-frames:v", "1", "-f", "framemd5", "-y", "\(dir)/first.md5",
        ], dir: dir, name: "ffmpeg")
        #expect(ffmpeg.finish(within: 10) == 0, "\(ffmpeg.stderr)")
        let took = Date().timeIntervalSince(began)
        let md5 = (try? String(contentsOfFile: "\(dir)/first.md5", encoding: .utf8)) ?? ""
        #expect(md5.split(separator: "\n").contains { !$0.hasPrefix("#") } && md5.contains("#dimensions 0: 640x480"), "\(md5)")
        #expect(took < 2, "ffmpeg's first picture \(took) s after it started")
        print("still screen, \(srtp ? "SRTP" : "plain"): ffmpeg's first picture \(String(format: "%.2f", took)) s after it started")
    }

    @Test func ffmpegAndGStreamerDecryptIt() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)

        // ffmpeg reads the keys from the SDP the sender wrote.
        let port = freeEvenPort()
        let sdp = "\(dir)/srtp.sdp"
        let sender = try Self.sender(dir, port: port, sdp: sdp, input: input, duration: 5)
        _ = try EventLog.wait(for: "started", in: sender)
        var mode = stat()
        #expect(stat(sdp, &mode) == 0 && mode.st_mode & 0o777 == 0o600, "the SDP holds keys: owner only")
        let text = try String(contentsOfFile: sdp, encoding: .utf8)
        #expect(text.contains("RTP/SAVP 96") && text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:"), "\(text)")
        let ffmpeg = try FFmpegReceiver(sdpPath: sdp, dir: dir, protocols: "file,udp,rtp,srtp,crypto")
        #expect(sender.finish(within: 30) == 0, "\(sender.stderr)")
        _ = ffmpeg.child.finish(within: 5)
        let sent = try #require(try EventLog(sender).stopped()["frames_sent"] as? Int)
        let r = try ffmpeg.results()
        #expect(r.frames >= sent / 2 && r.width == 320 && r.height == 240, "ffmpeg decoded \(r.frames) of \(sent): \(ffmpeg.child.stderr)")

        // GStreamer's srtpdec takes the key (and the SSRC it is for) in its caps.
        let gport = freeEvenPort()
        let gsdp = "\(dir)/gst.sdp"
        let gsender = try Self.sender(dir, port: gport, sdp: gsdp, input: input, duration: 5)
        let started = try EventLog.wait(for: "started", in: gsender)
        let ssrc = try #require(started["ssrc"] as? Int)
        let inline = try #require(try String(contentsOfFile: gsdp, encoding: .utf8).firstMatch(of: /inline:([A-Za-z0-9+\/=]+)/)?.1)
        let key = try #require(Data(base64Encoded: String(inline))).map { String(format: "%02x", $0) }.joined()
        let gst = try Child(which("gst-launch-1.0"), [
            "-e", "-q", "udpsrc", "port=\(gport)",
            "caps=application/x-srtp,media=(string)video,clock-rate=(int)90000,encoding-name=(string)VP8,payload=(int)96,ssrc=(uint)\(ssrc),"
                + "srtp-key=(buffer)\(key),srtp-cipher=(string)aes-128-icm,srtp-auth=(string)hmac-sha1-80,"
                + "srtcp-cipher=(string)aes-128-icm,srtcp-auth=(string)hmac-sha1-80",
            "!", "srtpdec", "!", "rtpjitterbuffer", "latency=50", "!", "rtpvp8depay", "!", "vp8dec", "!", "checksumsink",
        ], dir: dir, name: "gst")
        #expect(gsender.finish(within: 30) == 0, "\(gsender.stderr)")
        _ = gst.finish(within: 2)
        let gsent = try #require(try EventLog(gsender).stopped()["frames_sent"] as? Int)
        let decoded = gst.stdout.split(separator: "\n").filter { !$0.isEmpty }.count
        #expect(decoded >= gsent / 2, "GStreamer decoded \(decoded) of \(gsent): \(gst.stderr)")
    }

    /// A proxy between sender and viewer sees every datagram (it looks for VP8's keyframe start
    /// code, 9d 01 2a, in clear), and halfway it sends the viewer one packet again and a copy of
    /// another with one byte flipped.
    static let proxy = """
    import json, socket, sys, time
    listen, to, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", listen))
    s.settimeout(2.0)
    seen, clear, injected = [], 0, 0
    def keyframe_in_clear(d):
        # Where a VP8 keyframe's start code (9d 01 2a) sits in a plain RTP packet that starts a
        # frame: after the RTP header and the RFC 7741 descriptor, 3 octets into the payload.
        # (Anywhere in an encrypted packet, those 3 octets turn up by chance in a few runs in 100.)
        if len(d) < 24 or d[0] >> 6 != 2:
            return False
        o = 12 + 4 * (d[0] & 0x0F)
        if d[0] & 0x10 and len(d) > o + 4:
            o += 4 + 4 * ((d[o + 2] << 8) | d[o + 3])
        if len(d) <= o + 10 or not d[o] & 0x10:
            return False
        p = o + 1
        if d[o] & 0x80:
            x = d[o + 1]
            p += 1
            if x & 0x80:
                p += 2 if d[p] & 0x80 else 1
            if x & 0x40:
                p += 1
            if x & 0x30:
                p += 1
        return len(d) > p + 6 and d[p + 3:p + 6] == b"\\x9d\\x01\\x2a"
    while True:
        try:
            d, _ = s.recvfrom(65536)
        except socket.timeout:
            break
        seen.append(d)
        if keyframe_in_clear(d):
            clear += 1
        s.sendto(d, ("127.0.0.1", to))
        if len(seen) == 60:
            s.sendto(seen[30], ("127.0.0.1", to))
            forged = bytearray(seen[31]); forged[40] ^= 0x01
            s.sendto(bytes(forged), ("127.0.0.1", to))
            injected = 2
    json.dump({"datagrams": len(seen), "keyframes_in_clear": clear, "injected": injected}, open(out, "w"))
    """

    static func throughProxy(_ dir: String, input: String, srtp: Bool) throws -> (proxy: [String: Any], viewer: [String: Any]) {
        let senderPort = freeEvenPort(), viewerPort = freeEvenPort()
        let report = "\(dir)/proxy-\(srtp).json"
        let proxy = try Child(which("python3"), ["-c", Self.proxy, String(senderPort), String(viewerPort), report], dir: dir, name: "proxy-\(srtp)")
        try waitUntilBound(senderPort)
        let sdp = "\(dir)/sent-\(srtp).sdp"
        let sender = try Self.sender(dir, port: senderPort, sdp: sdp, input: input, duration: 6, srtp: srtp)
        _ = try EventLog.wait(for: "started", in: sender)
        // The viewer listens behind the proxy: the same SDP, its own port.
        let viewerSDP = "\(dir)/viewer-\(srtp).sdp"
        try String(contentsOfFile: sdp, encoding: .utf8)
            .replacingOccurrences(of: "m=video \(senderPort) ", with: "m=video \(viewerPort) ")
            .replacingOccurrences(of: "a=rtcp:\(senderPort + 1)", with: "a=rtcp:\(viewerPort + 1)")
            .write(toFile: viewerSDP, atomically: true, encoding: .utf8)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", viewerSDP, "--headless", "--duration", "6", "--json"],
                               dir: dir, name: "viewer-\(srtp)")
        #expect(sender.finish(within: 30) == 0, "\(sender.stderr)")
        #expect(viewer.finish(within: 30, interrupt: false) == 0, "\(viewer.stderr)")
        #expect(proxy.finish(within: 10, interrupt: false) == 0, "\(proxy.stderr)")
        let data = try Data(contentsOf: URL(fileURLWithPath: report))
        let p = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (p, try #require(EventLog(viewer.stdout).last(named: "stopped")))
    }

    @Test func watchDecryptsNothingIsInClearAndReplaysAreRefused() throws {
        let dir = try makeTempDir()
        let input = try RoomEndToEndTests.motion(dir, 320, 240)

        // Without --srtp the proxy sees VP8 keyframes in clear (so it would notice them).
        let plain = try Self.throughProxy(dir, input: input, srtp: false)
        #expect((plain.proxy["keyframes_in_clear"] as? Int ?? 0) >= 3, "\(plain.proxy)")

        let secure = try Self.throughProxy(dir, input: input, srtp: true)
        #expect((secure.proxy["datagrams"] as? Int ?? 0) > 60 && secure.proxy["injected"] as? Int == 2, "\(secure.proxy)")
        #expect(secure.proxy["keyframes_in_clear"] as? Int == 0, "\(secure.proxy)")
        let v = secure.viewer
        #expect((v["frames_decoded"] as? Int ?? 0) >= 40, "\(v)")
        #expect(v["srtp_rejected"] as? Int == 2, "the replay and the forgery: \(v)")
        #expect(v["decode_errors"] as? Int == 0 && v["width"] as? Int == 320, "\(v)")
    }
}
