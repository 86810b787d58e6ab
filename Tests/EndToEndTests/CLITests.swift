import Foundation
import Testing
import X11TestSupport

/// Runs the built `screenshare` binary (Scripts/test exports SCREENSHARE_BIN).
func runScreenshare(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let bin = ProcessInfo.processInfo.environment["SCREENSHARE_BIN"]
        ?? FileManager.default.currentDirectoryPath + "/.build/debug/screenshare"
    let p = Process()
    p.executableURL = URL(fileURLWithPath: bin)
    p.arguments = arguments
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

@Suite struct CLITests {
    @Test func badDestinationIsAUsageErrorNamingTheFlag() throws {
        let r = try runScreenshare(["start", "--to", "nowhere"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--to"))
        #expect(r.stderr.contains("'nowhere'"))
    }

    @Test func badBitrateIsAUsageErrorNamingTheFlag() throws {
        let r = try runScreenshare(["start", "--to", "127.0.0.1:5004", "--bitrate", "fast"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--bitrate"))
    }

    @Test(arguments: [
        (["start", "--room", "bad room", "--no-audio"], "--room"),
        (["start", "--room", "a", "--to", "127.0.0.1:5004"], "cannot be used together"),
        (["start", "--room", "a", "--sdp", "x.sdp"], "--sdp"),
        (["start", "--room", "a", "--server", "nowhere"], "--server"),
        (["start", "--room", "a", "--listen", "7600"], "--listen"),
        (["start", "--room", "a", "--server", "127.0.0.1:0"], "port must be a number from 1"),
        (["start", "--room", "a", "--listen", "127.0.0.1:65535"], "from 0 (any free port) to 65534"),
        (["start", "--server", "127.0.0.1:7600"], "--server needs --room"),
        (["watch", "--room", "a", "--sdp", "x.sdp"], "cannot be used together"),
        (["watch", "--sdp", "x.sdp", "--from", "ann"], "--from needs --room"),
        (["watch", "--room", "a", "--server", "relay"], "--server"),
        (["serve", "--listen", "nowhere"], "--listen"),
        (["serve", "--duration", "0", "--open"], "--duration"),
        (["serve", "--listen", ":7600"], "--secret-file FILE"),
        (["serve", "--open", "--secret-file", "x"], "contradict"),
        (["watch", "--sdp", "x.sdp", "--token", "abc"], "--token needs --room"),
        (["watch", "--room", "a", "--token", "two words"], "printable ASCII"),
        (["start", "--room", "a", "--token", "abc"], "--token is for joining a relay"),
        (["start", "--room", "a", "--server", "127.0.0.1:7600", "--open-room"], "not with --server"),
        (["start", "--room", "a", "--open-room", "--secret-file", "s"], "contradict"),
        (["start", "--to", "127.0.0.1:5004", "--token", "abc"], "need --room"),
        (["start", "--room", "a", "--srtp"], "--srtp is for plain RTP"),
        (["start", "--to", "127.0.0.1:5004", "--srtp"], "--srtp needs --sdp"),
        (["start", "--room", "a", "--token-ttl", "0s"], "--token-ttl"),
        (["token", "--room", "a", "--role", "boss", "--secret-file", "x"], "--role"),
        (["token", "--room", "a", "--role", "viewer", "--secret-file", "x", "--ttl", "forever"], "--ttl"),
        (["token", "--room", "a b", "--role", "viewer", "--secret-file", "x"], "--room"),
        (["start", "--to", "127.0.0.1:5004", "--cpu-used", "20"], "--cpu-used"),
        (["start", "--to", "127.0.0.1:5004", "--capture", "portal", "--display", ":0"], "--display is for X11"),
        (["start", "--to", "127.0.0.1:5004", "--capture", "portal", "--monitor", "1"], "--monitor is for X11"),
        (["start", "--to", "127.0.0.1:5004", "--capture", "x11", "--ask"], "--ask is for the portal"),
        (["start", "--to", "127.0.0.1:5004", "--capture", "wayland"], "--capture"),
        (["start", "--room", "a", "--server", "127.0.0.1:7600", "--janus", "http://10.0.0.7:8088/janus"], "serve --janus"),
        (["start", "--to", "127.0.0.1:5004", "--janus", "http://10.0.0.7:8088/janus"], "--janus needs --room"),
        (["serve", "--open", "--janus", "10.0.0.7:8088"], "not an http:// or https:// URL"),
        (["serve", "--open", "--janus", "http://10.0.0.7:99999/janus"], "port"),
        (["serve", "--open", "--janus-admin-key", "k"], "goes with --janus URL"),
        (["serve", "--open", "--janus", "http://a/janus", "--janus-admin-key", "k", "--janus-admin-key-file", "f"], "give one of them"),
        (["serve", "--open", "--janus", "http://a/janus", "--janus", "http://a:8088/janus/"], "named twice"),
        (["serve", "--open", "--janus-remb"], "--janus-remb goes with --janus URL"),
        // Typos: the nearest command or option, the same one every time.
        (["strat", "--room", "a"], "unknown command 'strat'. Did you mean 'start'?"),
        (["wacth", "LINK"], "Did you mean 'watch'?"),
        (["share", "--room", "a"], "unknown command 'share'"),
        (["http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4"], "To watch a link: screenshare watch 'http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4'"),
        (["watch", "--rom", "a"], "unknown option '--rom'. Did you mean '--room'?"),
        (["start", "--romm", "a"], "Did you mean '--room'?"),
    ])
    func roomFlagsAreCheckedAndNamed(args: [String], message: String) throws {
        let r = try runScreenshare(args)
        #expect(r.status == 64, "\(args): \(r.stderr)")
        #expect(r.stderr.contains(message), "\(args): \(r.stderr)")
    }

    @Test func aRoomPortInUseIsANetworkErrorNamingIt() throws {
        let port = freeEvenPort()
        let taken = try UDPReceiver(port: port)
        let r = try runScreenshare(["start", "--room", "a", "--listen", "127.0.0.1:\(port)", "--no-audio", "--duration", "1"])
        #expect(r.status == 68, "\(r.stderr)")
        #expect(r.stderr.contains("--listen") && r.stderr.contains("\(port)"), "\(r.stderr)")
        let s = try runScreenshare(["serve", "--listen", "127.0.0.1:\(port)", "--open", "--duration", "1"])
        #expect(s.status == 68, "\(s.stderr)")
        _ = taken
    }

    /// The room port's TCP side (browsers) taken by another program: the same exit code, and
    /// a message that says TCP.
    @Test func aRoomPortWhoseTCPSideIsTakenIsANetworkError() throws {
        let port = freeEvenPort()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0 && listen(fd, 1) == 0)
        let s = try runScreenshare(["serve", "--listen", "127.0.0.1:\(port)", "--open", "--duration", "1"])
        #expect(s.status == 68, "\(s.stderr)")
        #expect(s.stderr.contains("TCP") && s.stderr.contains("\(port)"), "\(s.stderr)")
    }

    /// `serve --cert-file` makes the certificate once (private) and keeps its fingerprint across
    /// restarts; `started` prints it.
    @Test func serveKeepsItsCertificateInAFile() throws {
        let dir = try makeTempDir()
        let file = "\(dir)/relay.pem"
        func fingerprint() throws -> String {
            let r = try runScreenshare(["serve", "--listen", "127.0.0.1:\(freeEvenPort())", "--open", "--cert-file", file, "--duration", "0.3", "--json"])
            #expect(r.status == 0, "\(r.stderr)")
            let started = try #require(EventLog(r.stdout).last(named: "started"))
            return try #require(started["fingerprint"] as? String)
        }
        let first = try fingerprint()
        #expect(first.hasPrefix("sha256:") && first.count == 7 + 64, "\(first)")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try fingerprint() == first)
        chmod(file, 0o644)
        let refused = try runScreenshare(["serve", "--listen", "127.0.0.1:\(freeEvenPort())", "--open", "--cert-file", file, "--duration", "0.3"])
        #expect(refused.status == 66 && refused.stderr.contains("chmod o-r"), "\(refused.stderr)")
    }

    @Test func helpListsSubcommands() throws {
        let r = try runScreenshare(["--help"])
        #expect(r.status == 0)
        for name in ["start", "watch", "serve", "sources"] { #expect(r.stdout.contains(name)) }
    }

    @Test func watchNamesWhatIsMissingOrWrong() throws {
        let missing = try runScreenshare(["watch"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("--sdp"))
        let badRecord = try runScreenshare(["watch", "--sdp", "x.sdp", "--record", "out.mp4"])
        #expect(badRecord.status == 64)
        #expect(badRecord.stderr.contains("out.mp4"))
        let noFile = try runScreenshare(["watch", "--sdp", "/nonexistent/x.sdp", "--headless"])
        #expect(noFile.status == 66)
        #expect(noFile.stderr.contains("/nonexistent/x.sdp"))
        // An SRTP stream whose keys this viewer cannot use: the suite is named.
        let dir = try makeTempDir()
        let sdp = "\(dir)/gcm.sdp"
        try "v=0\r\nc=IN IP4 127.0.0.1\r\nm=video 5004 RTP/SAVP 96\r\na=rtpmap:96 VP8/90000\r\na=crypto:1 AEAD_AES_256_GCM inline:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd\r\n"
            .write(toFile: sdp, atomically: true, encoding: .utf8)
        let gcm = try runScreenshare(["watch", "--sdp", sdp, "--headless"])
        #expect(gcm.status == 66 && gcm.stderr.contains("AEAD_AES_256_GCM"), "\(gcm.stderr)")
    }
}
