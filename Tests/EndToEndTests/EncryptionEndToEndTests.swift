import Foundation
import Testing
import X11TestSupport

/// What crosses the wire in a room, seen by tshark: a presenter (moving pictures and a tone from
/// its microphone) and a viewer, through `serve` with tokens. Every datagram is DTLS or SRTP;
/// none carries a room message, the room's name, a peer's name, the token, a VP8 keyframe's
/// start code or an Opus packet in clear; and the viewer still decodes both.
@Suite(.serialized) struct EncryptionEndToEndTests {
    /// Every UDP payload of a capture, in order: (source port, destination port, bytes).
    static func payloads(_ pcap: String, dir: String) throws -> [(src: Int, dst: Int, bytes: [UInt8])] {
        let t = try Child(which("tshark"), ["-r", pcap, "-T", "fields", "-e", "udp.srcport", "-e", "udp.dstport", "-e", "udp.payload"],
                          dir: dir, name: "tshark-read")
        #expect(t.finish(within: 60, interrupt: false) == 0, "\(t.stderr)")
        return t.stdout.split(separator: "\n").compactMap { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard f.count == 3, let src = Int(f[0]), let dst = Int(f[1]) else { return nil }
            let hex = Array(f[2].utf8)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(hex.count / 2)
            var i = 0
            while i + 1 < hex.count {
                bytes.append(UInt8(String(decoding: hex[i..<(i + 2)], as: UTF8.self), radix: 16) ?? 0)
                i += 2
            }
            return (src, dst, bytes)
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return true }
        }
        return false
    }

    /// Whether an RTP packet's payload, read in clear, is the start of a VP8 keyframe (RFC 7741
    /// descriptor, then the keyframe's start code 9d 01 2a, RFC 6386 §9.1).
    static func isKeyframeInClear(_ p: [UInt8]) -> Bool {
        guard p.count > 24, p[1] & 0x7F == 96 else { return false }
        var o = 12 + 4 * Int(p[0] & 0x0F)
        if p[0] & 0x10 != 0, p.count > o + 4 { o += 4 + 4 * (Int(p[o + 2]) << 8 | Int(p[o + 3])) }
        guard p.count > o + 10 else { return false }
        var d = o + 1
        if p[o] & 0x80 != 0 {
            let x = p[o + 1]
            d += 1
            if x & 0x80 != 0 { d += p[d] & 0x80 != 0 ? 2 : 1 }
            if x & 0x40 != 0 { d += 1 }
            if x & 0x30 != 0 { d += 1 }
        }
        guard p.count > d + 6 else { return false }
        return p[d + 3] == 0x9D && p[d + 4] == 0x01 && p[d + 5] == 0x2A
    }

    @Test func aCaptureOfARoomSessionShowsNothingInClear() throws {
        let dir = try makeTempDir()
        let pulse = try PrivatePulse()
        let port = freeEvenPort()
        let room = "grades-\(UUID().uuidString.prefix(6))"

        // tshark on loopback, the relay's port only, before anything is sent.
        let pcap = "\(dir)/room.pcap"
        let tshark = try Child(which("tshark"), ["-i", "lo", "-f", "udp port \(port)", "-w", pcap], dir: dir, name: "tshark")
        defer { _ = tshark.finish(within: 0) }
        try waitUntil(seconds: 20, pollMillis: 50, "tshark capturing: \(tshark.stderr)") { tshark.stderr.contains("Capturing on") }

        let secret = "\(dir)/secret"
        let serve = try RoomEndToEndTests.serve(dir, port: port, access: ["--secret-file", secret])
        defer { _ = serve.finish(within: 0) }
        let fingerprint = try #require(try EventLog.wait(for: "started", in: serve)["fingerprint"] as? String)
        let presenterToken = try AccessEndToEndTests.token(secret, room: room, role: "presenter", extra: ["--name", "Ms Smith"])
        let viewerToken = try AccessEndToEndTests.token(secret, room: room, role: "viewer", extra: ["--name", "Ada Lovelace"])

        let input = try RoomEndToEndTests.motion(dir, 320, 240, frames: 90)
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", room, "--server", "127.0.0.1:\(port)", "--token", presenterToken, "--fingerprint", fingerprint,
            "--input", input, "--input-format", "nv12", "--input-size", "320x240", "--fps", "15", "--content", "motion",
            "--bitrate", "1M", "--keyframe-interval", "1", "--duration", "8", "--json",
        ], dir: dir, name: "presenter", environment: pulse.environment)
        defer { _ = presenter.finish(within: 0) }
        _ = try EventLog.wait(for: "connected", in: presenter)
        let tone = try pulse.play(tone: 1000, app: "mic-feeder", device: "virtmic", dir: dir)
        defer { tone.finish(within: 0, interrupt: false) }
        let viewer = try Child(screenshareBinary(), [
            "watch", "--room", room, "--server", "127.0.0.1:\(port)", "--token", viewerToken, "--fingerprint", fingerprint,
            "--name", "pupil", "--headless", "--duration", "5", "--json",
        ], dir: dir, name: "viewer", environment: pulse.environment)
        #expect(viewer.finish(within: 30, interrupt: false) == 0, "\(viewer.stderr)")
        let stopped = try EventLog(viewer).stopped()
        #expect((stopped["frames_decoded"] as? Int ?? 0) >= 30, "\(stopped)")
        #expect((stopped["keyframes_decoded"] as? Int ?? 0) >= 2, "keyframes crossed the wire: \(stopped)")
        #expect((stopped["audio_decoded"] as? Int ?? 0) >= 50, "sound crossed the wire: \(stopped)")
        #expect(stopped["srtp_rejected"] as? Int == 0)
        _ = presenter.finish(within: 20)
        kill(tshark.pid, SIGINT)
        _ = tshark.finish(within: 10, interrupt: false)

        let datagrams = try Self.payloads(pcap, dir: dir)
        let media = datagrams.filter { (128...191).contains($0.bytes.first ?? 0) }
        let dtls = datagrams.filter { (20...63).contains($0.bytes.first ?? 0) }
        print("capture: \(datagrams.count) datagrams, \(dtls.count) DTLS, \(media.count) SRTP/SRTCP")
        #expect(media.count >= 300, "the session's media was captured: \(media.count) packets")
        // DTLS carried the handshakes (two ClientHellos at least) and the room messages
        // (application data, content type 23).
        #expect(dtls.filter { $0.bytes.count > 13 && $0.bytes[0] == 22 && $0.bytes[13] == 1 }.count >= 2)
        #expect(dtls.filter { $0.bytes[0] == 23 }.count >= 10, "room messages as DTLS application data")
        // Nothing else: no room message in clear ('S'), nothing unknown.
        let other = datagrams.filter { !(128...191).contains($0.bytes.first ?? 0) && !(20...63).contains($0.bytes.first ?? 0) }
        #expect(other.isEmpty, "datagrams neither DTLS nor SRTP: \(other.prefix(3).map { $0.bytes.prefix(16) })")
        // Not a byte of what matters, anywhere.
        let secrets: [(String, [UInt8])] = [
            ("the room's name", Array(room.utf8)), ("the presenter's name", Array("Ms Smith".utf8)),
            ("the viewer's name", Array("Ada Lovelace".utf8)), ("the viewer's display name", Array("pupil".utf8)),
            ("the presenter's token", Array(presenterToken.suffix(43).utf8)), ("the viewer's token", Array(viewerToken.suffix(43).utf8)),
            ("a room message's JSON", Array(#""version":"#.utf8)), ("a stream's description", Array(#""codec":"VP8""#.utf8)),
        ]
        for (what, bytes) in secrets {
            #expect(!datagrams.contains { Self.contains($0.bytes, bytes) }, "\(what) is readable on the wire")
        }
        // No keyframe in clear (the same test would find each keyframe of a plain RTP stream);
        // and Opus: its packets in clear would repeat their TOC byte (a 1000 Hz tone, same mode
        // every 20 ms) at offset 12; encrypted, that octet is uniform.
        #expect(!media.contains { Self.isKeyframeInClear($0.bytes) }, "a VP8 keyframe in clear")
        let audio = media.filter { $0.bytes.count > 13 && $0.bytes[1] & 0x7F == 111 }
        #expect(audio.count >= 50, "Opus packets captured: \(audio.count)")
        var tocs: [UInt8: Int] = [:]
        for p in audio { tocs[p.bytes[12], default: 0] += 1 }
        let commonest = tocs.values.max() ?? 0
        #expect(commonest * 4 < audio.count, "one octet starts \(commonest) of \(audio.count) Opus payloads: a TOC in clear")
    }
}
