import Foundation
import Testing
import X11TestSupport

/// What a real browser shows is the slide on the presenter's screen: Chromium plays the room's
/// page, and the picture on its <video> (read through a canvas) is compared with the slide
/// painted on a private Xvfb.
@Suite(.serialized) struct BrowserPictureTests {
    /// Each test gets its own X server (Swift Testing makes a new suite value per test).
    let xvfb: PrivateXvfb
    init() throws { xvfb = try PrivateXvfb() }

    @Test func chromiumShowsTheSlideSharp() throws {
        let dir = try makeTempDir()
        let slide = try renderSlide(width: 1920, height: 1080, title: "Browser slide: sharp text and fine lines", dir: dir)
        try paintRoot(slide, width: 1920, height: 1080, on: xvfb.name)
        let port = freeEvenPort()
        let presenter = try Child(screenshareBinary(), [
            "start", "--room", "class", "--listen", "127.0.0.1:\(port)", "--display", xvfb.name, "--name", "teacher",
            "--fps", "15", "--bitrate", "2M", "--no-cursor", "--no-audio", "--duration", "40", "--json",
        ], dir: dir, name: "teacher")
        defer { _ = presenter.finish(within: 0) }
        let url = try #require(try EventLog.wait(for: "started", in: presenter)["browser_url"] as? String)
        let script = BrowserWHEPTests.script("browser-watch.py")
        let dump = "\(dir)/page.y"
        let chromium = try Child(BrowserWHEPTests.python, [script, url, "6", "--dump-luma", dump], dir: dir, name: "chromium")
        #expect(chromium.finish(within: 60) == 0, "\(chromium.stderr.suffix(2000))")
        let log = EventLog(chromium.stdout)
        let dumped = try #require(log.first(named: "dumped"), "no picture: \(chromium.stdout.suffix(1500))")
        #expect(dumped["width"] as? Int == 1920 && dumped["height"] as? Int == 1080)
        #expect(log.last(named: "page")?["presenter"] as? String == "teacher presents")
        let shown = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dump)))
        let p = psnr(shown[...], luma(bgra: slide, width: 1920, height: 1080))
        print("chromium: Y-PSNR of the page's picture against the slide \(String(format: "%.2f", p)) dB; first picture after \(log.first(named: "first_picture")?["seconds"] ?? "?") s")
        // The bar ffmpeg meets decoding such a stream (VideoEndToEndTests), through Chromium's
        // YUV → RGB → canvas → Y round trip (≈ 52 dB here). A wrong or stale picture scores under 20.
        #expect(p >= 40, "PSNR \(p) dB")
    }
}
