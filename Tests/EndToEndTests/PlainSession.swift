import Foundation
import RTP
import X11TestSupport

/// A plain-mode session through `Scripts/lossy-proxy`: `watch --sdp` listening, the proxy in
/// front of it (its impairments), and `start --to` the proxy sending a raw moving picture that
/// ffmpeg made (testsrc2). The tests of repair, freezes and congestion control share it.
struct PlainSession {
    let dir: String
    let viewer: Child
    let proxy: Child
    let sender: Child

    /// Makes `frames` of ffmpeg's testsrc2 at `width`x`height` as raw NV12 in `dir`.
    static func motion(width: Int, height: Int, fps: Int, frames: Int, in dir: String) throws -> String {
        let path = "\(dir)/motion-\(width)x\(height).nv12"
        guard try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height):rate=\(fps)",
                                        "-frames:v", "\(frames)", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path]) == 0 else {
            throw TestFailure("ffmpeg could not make \(path)")
        }
        return path
    }

    /// Starts the three. The viewer's SDP names the transport-wide sequence number (so it sends
    /// transport feedback) when `transportFeedback`, as the sender's own `--sdp` does.
    /// - Parameters:
    ///   - viewerSeconds: `watch --duration`.
    ///   - proxyArguments: the proxy's impairments (`--loss 0.05 --seed 7`, `--rate 1M`, …).
    ///   - senderArguments: what follows `start --to PROXY --input FILE --input-format FORMAT --input-size WxH`.
    init(dir: String, input: String, format: String = "nv12", width: Int, height: Int, fps: Int, transportFeedback: Bool = false,
         viewerSeconds: Double, viewerArguments: [String] = [], proxyArguments: [String] = [], senderArguments: [String]) throws {
        self.dir = dir
        let viewerPort = freeEvenPort()
        var proxyPort = freeEvenPort()
        while proxyPort == viewerPort || proxyPort == viewerPort + 1 || proxyPort + 1 == viewerPort { proxyPort = freeEvenPort() }
        var description = SessionDescription(destination: "127.0.0.1", videoPort: viewerPort, framerate: fps)
        if transportFeedback { description.transportSequenceID = TransportWideSequence.defaultID }
        let sdp = "\(dir)/v.sdp"
        try description.render().write(toFile: sdp, atomically: true, encoding: .utf8)
        viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--duration", "\(viewerSeconds)", "--json"]
                           + viewerArguments, dir: dir, name: "viewer")
        try waitUntilBound(viewerPort)
        proxy = try Child(which("python3"), [scriptPath("lossy-proxy"), "--listen", "\(proxyPort)", "--to", "127.0.0.1:\(viewerPort)"]
                          + proxyArguments, dir: dir, name: "proxy")
        try waitUntilBound(proxyPort)
        sender = try Child(screenshareBinary(), [
            "start", "--to", "127.0.0.1:\(proxyPort)", "--input", input, "--input-format", format, "--input-size", "\(width)x\(height)",
            "--fps", "\(fps)", "--no-audio", "--json",
        ] + senderArguments, dir: dir, name: "sender")
    }

    /// Waits for the sender and the viewer to end, then stops the proxy (its summary comes out).
    /// Returns whether both exited 0.
    func finish(within seconds: Double) -> (sender: Int32, viewer: Int32) {
        let s = sender.finish(within: seconds), v = viewer.finish(within: seconds)
        kill(proxy.pid, SIGCONT)
        proxy.finish(within: 0)
        return (s, v)
    }

    /// The proxy's per-second reports (`--rate`).
    var seconds: [JSONObject] { EventLog(proxy).events(named: "second") }
}
