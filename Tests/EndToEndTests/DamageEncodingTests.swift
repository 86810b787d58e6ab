import CX11
import Foundation
import Synchronization
import Testing
import X11TestSupport

/// A clip playing in a still slide: the sender encodes only the macroblocks XDamage says
/// changed lately (libvpx's active map) and leaves the rest as they were. What it leaves out
/// must really be unchanged: a slide change elsewhere while the clip plays reaches the viewer
/// whole and sharp, with nothing of the old slide left.
@Suite struct DamageEncodingTests {
    /// Set from the test, read by the painting thread.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    @Test func aSlideChangeWhileAClipPlaysLeavesNothingStale() throws {
        let xvfb = try PrivateXvfb()
        let dir = try makeTempDir()
        let before = try renderSlide(width: 1920, height: 1080, title: "Before: the old slide", dir: dir)
        let after = try renderSlide(width: 1920, height: 1080, title: "After: a new slide, the clip still playing", dir: dir)
        try paintRoot(before, width: 1920, height: 1080, on: xvfb.name)
        // The "clip": a 160x96 box at 1720,40 repainted 60 times a second with another colour.
        let stop = Flag()
        let name = xvfb.name
        let painter = Thread {
            guard let d = XOpenDisplay(name) else { return }
            let screen = cx11_default_screen(d), root = cx11_root_window(d, screen)
            let gc = XCreateGC(d, root, 0, nil)
            var i: UInt = 0
            while !stop.isSet {
                i &+= 1
                XSetForeground(d, gc, (i &* 0x3F1D27) & 0xFFFFFF)
                XFillRectangle(d, root, gc, 1720, 40, 160, 96)
                XSync(d, 0)
                usleep(15_000)  // the clip's frame rate (faster than the capture's 30 fps: every grab is a
                                // new picture, none a repeat, which would encode everything); not a wait
            }
            XFreeGC(d, gc)
            XCloseDisplay(d)
        }
        painter.start()
        defer { stop.set() }
        let port = freeEvenPort()
        let sdp = "\(dir)/v.sdp"
        try writeSDP(port: port, fps: 30, to: sdp)
        let viewer = try Child(screenshareBinary(), ["watch", "--sdp", sdp, "--headless", "--record", "\(dir)/got.webm", "--duration", "9", "--json"],
                               dir: dir, name: "viewer")
        try waitUntilBound(port)
        let sender = try Child(screenshareBinary(), [
            "start", "--display", xvfb.name, "--to", "127.0.0.1:\(port)", "--fps", "30", "--duration", "7", "--no-cursor", "--json",
        ], dir: dir, name: "sender")
        try EventLog.wait(for: "first_frame", in: viewer)
        // Past the first second (everything is refined then, the picture being new): the
        // sender's second `stats`. Then the new slide, left of the clip (its columns keep changing).
        try EventLog.wait(for: "stats", in: sender, count: 2)
        let left = 1680
        var part = [UInt8](repeating: 0, count: left * 1080 * 4)
        for row in 0..<1080 { part[(row * left * 4)..<((row + 1) * left * 4)] = after[(row * 1920 * 4)..<(row * 1920 * 4 + left * 4)] }
        try paintRoot(part, width: left, height: 1080, on: xvfb.name)
        #expect(sender.finish(within: 30) == 0, "sender: \(sender.stderr)")
        stop.set()
        #expect(viewer.finish(within: 30) == 0, "viewer: \(viewer.stderr)")
        let stats = try EventLog(sender).stopped()
        #expect((stats["frames_sent"] as? Int ?? 0) >= 100, "the clip makes new pictures: \(stats)")

        let yuv = "\(dir)/got.yuv"
        #expect(try run(which("ffmpeg"), ["-nostdin", "-loglevel", "error", "-i", "\(dir)/got.webm", "-fps_mode", "passthrough",
                                          "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", yuv]) == 0)
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuv)))
        let size = 1920 * 1080 * 3 / 2
        let frames = data.count / size
        #expect(frames >= 100, "\(frames) frames recorded")
        guard frames > 0 else { return }
        let last = (frames - 1) * size
        var gotY = [UInt8](repeating: 0, count: left * 1080)
        for row in 0..<1080 { gotY[(row * left)..<((row + 1) * left)] = data[(last + row * 1920)..<(last + row * 1920 + left)] }
        let want = luma(bgra: after, width: 1920, height: 1080, crop: (0, 0, left, 1080))
        let old = luma(bgra: before, width: 1920, height: 1080, crop: (0, 0, left, 1080))
        let p = psnr(gotY[...], want), pOld = psnr(gotY[...], old)
        print("the new slide at the end: \(p) dB (against the old one: \(pOld) dB), \(frames) frames")
        #expect(p >= 40, "the new slide, as the viewer has it at the end: \(p) dB (against the old one: \(pOld) dB)")
        #expect(pOld < p - 10, "\(pOld) dB against the old slide")
    }
}
