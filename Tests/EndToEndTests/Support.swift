import CX11
import Foundation
import RTP
import X11TestSupport
import Testing

func screenshareBinary() -> String {
    ProcessInfo.processInfo.environment["SCREENSHARE_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/screenshare"
}

/// A port that is free now for UDP and TCP, with the three after it (RTCP on PORT+1, audio on
/// PORT+2 and PORT+3; the relay's `--listen` takes the same number in TCP for browsers): a
/// multiple of 4, so two tests never share one another's ports. From 10000 to about 29000,
/// under the kernel's ephemeral range (32768–60999): there a browser's or Janus's outgoing
/// connection may take the port between this check and the bind (a CI run: `--listen :34132`
/// found TCP 34132 in use).
func freeEvenPort() -> UInt16 {
    let base = UInt16(10000 + (getpid() % 1000) * 16)
    var port = (base + UInt16.random(in: 0..<1500) * 2) & ~3
    while (0..<4).contains(where: { isUDPPortBound(port + $0) || isTCPPortInUse(port + $0) }) { port += 4 }
    return port
}

/// Whether some socket is bound to the UDP port (from /proc/net/udp and udp6).
func isUDPPortBound(_ port: UInt16) -> Bool { procNetLists(port, in: ["/proc/net/udp", "/proc/net/udp6"]) }

/// Whether a TCP socket has the port, listening or connected, at either end (from
/// /proc/net/tcp and tcp6; a remote port of the same number is a harmless false alarm).
func isTCPPortInUse(_ port: UInt16) -> Bool { procNetLists(port, in: ["/proc/net/tcp", "/proc/net/tcp6"]) }

private func procNetLists(_ port: UInt16, in files: [String]) -> Bool {
    let hex = String(format: ":%04X ", port)
    for file in files {
        // Not String(contentsOfFile:): it trusts the size stat reports (0 for /proc) and reads a
        // single page, missing every socket listed after the first ~30.
        guard let handle = FileHandle(forReadingAtPath: file) else { continue }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        try? handle.close()
        if text.contains(hex) { return true }
    }
    return false
}

/// Waits (bounded) until a receiver has bound `port`: receivers must listen before we send.
func waitUntilBound(_ port: UInt16, seconds: Double = 15) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while !isUDPPortBound(port) {
        guard Date() < deadline else { throw TestFailure("no receiver bound UDP port \(port) within \(seconds) s") }
        usleep(20_000)
    }
}

/// Runs a command to completion and returns its exit status.
@discardableResult
func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    return p.terminationStatus
}

/// Renders a slide with text and fine lines (ImageMagick) and returns its BGRA pixels.
func renderSlide(width: Int, height: Int, title: String, dir: String) throws -> [UInt8] {
    let raw = "\(dir)/slide.bgra"
    let status = try run(which("convert"), [
        "-size", "\(width)x\(height)", "xc:white", "-fill", "black", "-font", "DejaVu-Sans", "-pointsize", "40",
        "-annotate", "+120+160", title,
        "-pointsize", "26",
        "-annotate", "+120+260", "• Capture with MIT-SHM, convert with libyuv, encode VP8 with libvpx",
        "-annotate", "+120+320", "• RTP per RFC 7741; receivers: ffmpeg, GStreamer, VLC",
        "-fill", "none", "-stroke", "black", "-strokewidth", "1",
        "-draw", "line 120,420 1700,420", "-draw", "line 120,424 1700,424", "-draw", "line 120,428 1700,428",
        "-stroke", "navy", "-draw", "rectangle 120,500 900,900", "-draw", "line 120,500 900,900",
        "-stroke", "darkred", "-draw", "circle 1300,700 1300,900",
        "-depth", "8", "bgra:\(raw)",
    ])
    guard status == 0 else { throw TestFailure("ImageMagick convert failed (\(status))") }
    let data = try Data(contentsOf: URL(fileURLWithPath: raw))
    guard data.count == width * height * 4 else { throw TestFailure("slide has \(data.count) bytes") }
    return [UInt8](data)
}

/// Puts BGRA pixels on the root window at (x, y) of the display.
func paintRoot(_ pixels: [UInt8], width: Int, height: Int, x: Int = 0, y: Int = 0, on name: String) throws {
    let display = try #require(XOpenDisplay(name))
    defer { XCloseDisplay(display) }
    let screen = cx11_default_screen(display)
    let root = cx11_root_window(display, screen)
    let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: pixels.count)
    copy.initialize(from: pixels, count: pixels.count)
    let img = XCreateImage(display, cx11_default_visual(display, screen), 24, ZPixmap, 0,
                           UnsafeMutableRawPointer(copy).assumingMemoryBound(to: CChar.self),
                           UInt32(width), UInt32(height), 32, Int32(width * 4))!
    let gc = XCreateGC(display, root, 0, nil)
    XPutImage(display, root, gc, img, 0, 0, Int32(x), Int32(y), UInt32(width), UInt32(height))
    XFreeGC(display, gc)
    XSync(display, 0)
    _ = cx11_destroy_image(img)
}

/// BT.601 studio-range luma, exactly rounded (as `detail`'s conversion makes it; libyuv's, for
/// `motion`, is up to a level off).
func luma(bgra: [UInt8], width: Int, height: Int, crop: (x: Int, y: Int, w: Int, h: Int)? = nil) -> [UInt8] {
    let c = crop ?? (0, 0, width, height)
    var out = [UInt8](repeating: 0, count: c.w * c.h)
    for y in 0..<c.h {
        for x in 0..<c.w {
            let i = ((c.y + y) * width + c.x + x) * 4
            let b = Double(bgra[i]), g = Double(bgra[i + 1]), r = Double(bgra[i + 2])
            out[y * c.w + x] = UInt8((16.5 + (65.481 * r + 128.553 * g + 24.966 * b) / 255).rounded(.down))
        }
    }
    return out
}

func psnr(_ a: ArraySlice<UInt8>, _ b: [UInt8]) -> Double {
    precondition(a.count == b.count)
    var sse = 0
    a.withUnsafeBufferPointer { pa in
        b.withUnsafeBufferPointer { pb in
            for i in 0..<pb.count { let d = Int(pa[i]) - Int(pb[i]); sse += d * d }
        }
    }
    if sse == 0 { return 99 }
    return 10 * log10(255.0 * 255.0 * Double(b.count) / Double(sse))
}

/// An ffmpeg receiver reading our SDP; writes framemd5 lines and raw grey frames.
struct FFmpegReceiver {
    let child: Child
    let md5Path: String
    let yuvPath: String

    /// - Parameter protocols: what ffmpeg may open (`…,srtp,crypto` for an SRTP stream).
    init(sdpPath: String, dir: String, protocols: String = "file,udp,rtp") throws {
        md5Path = "\(dir)/frames.md5"
        yuvPath = "\(dir)/frames.yuv"
        child = try Child(which("ffmpeg"), [
            "-nostdin", "-loglevel", "error", "-protocol_whitelist", protocols, "-i", sdpPath,
            "-map", "0:v", "-fps_mode", "passthrough", "-autoscale", "0", "-f", "framemd5", "-y", md5Path,
            "-map", "0:v", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", yuvPath,
        ], dir: dir, name: "ffmpeg")
    }

    /// Decoded frame count and the size of the frames (from framemd5's #dimensions line).
    func results() throws -> (frames: Int, width: Int, height: Int) {
        let text = try String(contentsOfFile: md5Path, encoding: .utf8)
        let frames = text.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        guard let dims = text.split(separator: "\n").first(where: { $0.hasPrefix("#dimensions") }),
              let wh = dims.split(separator: " ").last?.split(separator: "x"), wh.count == 2,
              let w = Int(wh[0]), let h = Int(wh[1]) else { return (frames, 0, 0) }
        return (frames, w, h)
    }

    /// The luma planes of every decoded frame.
    func allFrames(width: Int, height: Int) throws -> [ArraySlice<UInt8>] {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuvPath)))
        let size = width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
        return (0..<(data.count / size)).map { data[($0 * size)..<($0 * size + width * height)] }
    }

    /// How coloured each decoded frame is: the mean of |U − 128| + |V − 128|.
    func chromaPerFrame(width: Int, height: Int) throws -> [Double] {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuvPath)))
        let luma = width * height, chroma = ((width + 1) / 2) * ((height + 1) / 2)
        let size = luma + 2 * chroma
        return (0..<(data.count / size)).map { f in
            var sum = 0
            for i in (f * size + luma)..<(f * size + size) { sum += abs(Int(data[i]) - 128) }
            return Double(sum) / Double(chroma)
        }
    }

    /// The luma plane of the last decoded frame, as decoded: studio range, no conversion
    /// (ffmpeg's `gray` output would stretch it to full range).
    func lastFrame(width: Int, height: Int) throws -> ArraySlice<UInt8> {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuvPath)))
        let size = width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
        guard data.count >= size else { throw TestFailure("no decoded frame in \(yuvPath)") }
        let n = data.count / size
        let start = (n - 1) * size
        return data[start..<(start + width * height)]
    }
}

/// Waits (bounded) until a sender has finished refining the picture it got at `changedAt` (after
/// a change it encodes the picture again at half the frame rate for up to 4 s, or until the
/// repeats are small at a fine quantizer): a whole stats second after that at the keep-alive
/// rate (1 fps).
/// Returns that stats event.
@discardableResult
func waitUntilRefined(_ sender: Child, since changedAt: Date, seconds: Double = 10) throws -> JSONObject {
    try EventLog.wait(for: "stats", in: sender, seconds: seconds) { stats in
        (stats["fps"] as? Int ?? .max) <= 1 && (stats.eventTime ?? .distantPast) >= changedAt.addingTimeInterval(1)
    }
}

/// Writes the SDP the sender will write, so the receiver can start first.
/// An SDP for receiving on `port`; `transportFeedback` names the transport-wide sequence number
/// (`a=extmap:3`), as the sender's own `--sdp` does (a `watch` reading it sends feedback).
func writeSDP(port: UInt16, fps: Int, transportFeedback: Bool = false, to path: String) throws {
    var description = SessionDescription(destination: "127.0.0.1", videoPort: port, framerate: fps)
    if transportFeedback { description.transportSequenceID = 3 }
    try description.render().write(toFile: path, atomically: true, encoding: .utf8)
}
