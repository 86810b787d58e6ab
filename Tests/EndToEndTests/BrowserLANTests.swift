import Foundation
import Testing
import X11TestSupport

/// A host of its own on a virtual LAN: a network namespace joined to this one by a veth pair
/// (10.77.N.1 here, 10.77.N.2 there). Test traffic crosses it and nothing else; the namespace
/// and the pair go when it is dropped.
final class VirtualHost {
    let name: String
    let relayAddress: String
    let address: String
    private let hostLink: String

    init() throws {
        let n = Int.random(in: 1...250)
        name = "ss-lan-\(getpid())-\(n)"
        hostLink = "ssv\(n)h\(getpid() % 10000)"
        relayAddress = "10.77.\(n).1"
        address = "10.77.\(n).2"
        let peerLink = "ssv\(n)p\(getpid() % 10000)"
        try Self.ip(["netns", "add", name])
        do {
            try Self.ip(["link", "add", hostLink, "type", "veth", "peer", "name", peerLink])
            try Self.ip(["link", "set", peerLink, "netns", name])
            try Self.ip(["addr", "add", "\(relayAddress)/24", "dev", hostLink])
            try Self.ip(["link", "set", hostLink, "up"])
            try Self.ip(["netns", "exec", name, "ip", "addr", "add", "\(address)/24", "dev", peerLink])
            try Self.ip(["netns", "exec", name, "ip", "link", "set", peerLink, "up"])
            try Self.ip(["netns", "exec", name, "ip", "link", "set", "lo", "up"])
        } catch {
            cleanUp()
            throw error
        }
    }

    deinit { cleanUp() }

    /// A bottleneck on the way here (the host's side of the pair: what it sends this host):
    /// the kernel's token bucket, `rate` (tc's units: "400kbit") with a queue of `queueMs`
    /// beyond which it drops.
    func shape(rate: String, queueMs: Int) throws {
        let tc = try Child(which("tc"), ["qdisc", "replace", "dev", hostLink, "root", "tbf", "rate", rate, "burst", "4kb",
                                         "latency", "\(queueMs)ms"], dir: try makeTempDir(), name: "tc")
        let status = tc.finish(within: 10)
        guard status == 0 else { throw TestFailure("tc qdisc tbf on \(hostLink): exit \(status): \(tc.stderr)") }
    }

    /// Loss on the way here that no resend can repair: RTP packets from `port` whose sequence
    /// number hashes into `permille` of a thousand are dropped as they arrive, every time
    /// (a resend has the number of the packet it repeats). nftables' `jhash` over the RTP
    /// header's sequence number (netem does not exist here); STUN, DTLS and RTCP pass.
    func loseRTP(permille: Int, fromPort port: UInt16) throws {
        let rules = """
            table inet screenshare_loss {
              chain input {
                type filter hook input priority 0;
                udp sport \(port) @th,64,8 & 0xc0 == 0x80 @th,72,8 != 200-206 jhash @th,80,16 mod 1000 < \(permille) drop
              }
            }
            """
        let file = try makeTempDir() + "/loss.nft"
        try rules.write(toFile: file, atomically: true, encoding: .utf8)
        let nft = try Child(which("ip"), ["netns", "exec", name, which("nft"), "-f", file], dir: try makeTempDir(), name: "nft")
        let status = nft.finish(within: 10)
        guard status == 0 else { throw TestFailure("nft in \(name): exit \(status): \(nft.stderr)") }
    }

    private func cleanUp() {
        try? Self.ip(["link", "del", hostLink])  // deletes both ends
        try? Self.ip(["netns", "del", name])
    }

    /// `executable arguments` run inside the namespace.
    func run(_ executable: String, _ arguments: [String], dir: String, name child: String, environment: [String: String] = [:]) throws -> Child {
        try Child(which("ip"), ["netns", "exec", name, executable] + arguments, dir: dir, name: child, environment: environment)
    }

    private static func ip(_ arguments: [String]) throws {
        let c = try Child(which("ip"), arguments, dir: try makeTempDir(), name: "ip")
        let status = c.finish(within: 10)
        guard status == 0 else { throw TestFailure("ip \(arguments.joined(separator: " ")): exit \(status): \(c.stderr)") }
    }
}

/// The issue's "done when": a browser on another machine of the LAN opens the printed link and
/// watches, with sound (an application's 440 Hz tone, shared from a private PulseAudio). Here
/// the other machine is a network namespace behind a veth pair, and the browser a real headless
/// Chromium or Firefox in it, without the loopback allowance the other tests need: the relay's
/// address, the link, the ICE candidate and the media are the LAN's.
@Suite(.serialized) struct BrowserLANTests {
    let pulse: PrivatePulse
    init() throws { pulse = try PrivatePulse() }

    /// Chromium, and Firefox ESR (which is tested this way only: on loopback it offers no
    /// candidate the relay can reach).
    @Test(arguments: ["chromium", "firefox"]) func aBrowserOnAnotherHostOfTheLANWatchesThroughThePrintedLink(_ browser: String) throws {
        let lan = try VirtualHost()
        let dir = try makeTempDir()
        let port = freeEvenPort()
        let presenter = try BrowserWHEPTests.presenter(dir, at: ["--listen", "\(lan.relayAddress):\(port)"],
                                                       extra: ["--audio-app", "lecture-app", "--no-mic"], environment: pulse.environment)
        defer { _ = presenter.finish(within: 0) }
        let tone = try pulse.play(tone: 440, app: "lecture-app", dir: dir)
        defer { tone.finish(within: 0, interrupt: false) }
        let url = try #require(try EventLog.wait(for: "started", in: presenter)["browser_url"] as? String)
        // The short link: the page exchanges its code for the token, across the LAN.
        #expect(url.hasPrefix("http://\(lan.relayAddress):\(port)/class#k="), "\(url)")
        let script = BrowserWHEPTests.script("browser-watch.py")
        // The browser plays the sound out (into the private PulseAudio's null sink): a browser that
        // plays nothing decodes nothing, and its stats would say no energy either way.
        let page = try lan.run(BrowserWHEPTests.python, [script, url, "8", "--browser", browser, "--no-loopback", "--unmute"],
                               dir: dir, name: browser, environment: pulse.environment)
        #expect(page.finish(within: 90) == 0, "\(page.stderr.suffix(2000))")
        let log = EventLog(page.stdout)
        let last = try #require(log.last(named: "page"), "\(page.stdout.suffix(1500)) \(page.stderr.suffix(1500))")
        #expect(last["state"] as? String == "connected" && last["width"] as? Int == 64, "\(last)")
        #expect((last["frames"] as? Int ?? 0) >= 30, "\(last)")
        #expect(last["presenter"] as? String == "teacher presents")
        // With sound: Opus packets arrived (50 a second) and what the browser decoded is not silence.
        #expect((last["audio_packets"] as? Int ?? 0) >= 100, "\(last)")
        #expect((last["audio_energy"] as? Double ?? 0) > 0.01, "\(last)")
        _ = try EventLog.wait(for: "subscribed", in: presenter)
        print("\(browser) on the LAN: first picture \(log.first(named: "first_picture")?["seconds"] ?? "?") s after asking for the page")
    }
}
