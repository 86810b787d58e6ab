import Foundation
import MediaCore
import Testing
import Portal
import X11TestSupport

/// The xdg-desktop-portal's ScreenCast, through the real `xdg-desktop-portal` and PipeWire on a
/// private session bus (``PortalDesktop``), with the test's backend in the place of GNOME's or
/// KDE's dialog.
@Suite(.serialized) struct PortalTests {
    /// The first share asks (no restore data reaches the backend) and keeps the token the
    /// portal gives; the next passes it back, and the portal hands the backend the choice it
    /// made the first time — the dialog is not shown again.
    @Test func theFirstShareAsksAndTheNextIsRestored() throws {
        let desktop = try PortalDesktop(node: 77)
        let first = try ScreenCastSession.open(ScreenCastRequest(source: .monitor), busAddress: desktop.busAddress)
        #expect(first.streams == [ScreenCastStream(node: 77, width: 640, height: 360, sourceType: 1)])
        var info = stat()
        #expect(fstat(first.pipewireFD, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK, "the PipeWire remote is a socket")
        #expect(first.cursorMode == 4, "the pointer as metadata, offered and preferred")
        let token = try #require(first.restoreToken, "persist_mode 2 gives a restore token")
        let selected = try #require(desktop.calls("SelectSources").first)
        #expect(selected["types"] as? Int == 1 && selected["multiple"] as? Bool == false)
        #expect(selected["persist_mode"] as? Int == 2 && selected["cursor_mode"] as? Int == 4)
        #expect(selected["restore_data"] == nil)
        first.close()
        try desktop.waitForCalls("Close", count: 1)

        let tokens = RestoreTokens(directory: desktop.dir + "/state/screenshare")
        try tokens.keep(token, for: .monitor)
        #expect(tokens.token(for: .monitor) == token)
        let again = try ScreenCastSession.open(ScreenCastRequest(source: .monitor, restoreToken: tokens.token(for: .monitor)),
                                               busAddress: desktop.busAddress)
        defer { again.close() }
        #expect(again.streams.map(\.node) == [77])
        let restored = try #require(desktop.calls("SelectSources").last)
        #expect(restored["restore_data"] as? [Any] != nil, "the portal passed the first choice back: \(restored)")
        #expect((restored["restore_data"] as? [Any])?.first as? String == "screenshare-test")
    }

    /// The stream the portal grants is read through the remote it opened: the producer's
    /// picture arrives, its size and its pixels as sent.
    @Test func theGrantedStreamIsReadThroughThePortalsRemote() throws {
        let desktop = try PortalDesktop()
        let node = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360)
        let session = try ScreenCastSession.open(ScreenCastRequest(), busAddress: desktop.busAddress)
        defer { session.close() }
        #expect(session.streams.map(\.node) == [node])
        let stream = try PipeWireStream(fd: dup(session.pipewireFD), node: node)
        let deadline = Date().addingTimeInterval(10)
        var frame: PipeWireStream.Frame?
        while frame == nil, Date() < deadline {
            try stream.iterate(timeoutMillis: 100)
            frame = stream.take()
        }
        let f = try #require(frame, "no picture in 10 s (streaming: \(stream.isStreaming), \(stream.error ?? "no error"))")
        defer { stream.release() }
        #expect(f.width == 640 && f.height == 360 && f.layout == .bgrx && f.stride >= 640 * 4)
        let middle = f.pixels.advanced(by: 180 * f.stride + 320 * 4).assumingMemoryBound(to: UInt8.self)
        #expect((middle[0], middle[1], middle[2]) == (0x99, 0x66, 0x33), "BGR \(middle[0]) \(middle[1]) \(middle[2])")
    }

    /// A sink that keeps the whole picture as it is delivered, asks for exactly what the
    /// capturer says changed, and remembers what that was.
    final class PictureSink: CaptureSink {
        var pixels: [UInt32] = []
        var size = PixelSize(width: 0, height: 0)
        /// What the last capture said changed (nil: all of it).
        var changed: [PixelRect]?
        func begin(size: PixelSize, changed: UnsafeBufferPointer<PixelRect>?, areas: inout [PixelRect]) {
            if size != self.size {
                self.size = size
                pixels = [UInt32](repeating: 0, count: size.area)
            }
            self.changed = changed.map(Array.init)
            areas.append(contentsOf: self.changed ?? [PixelRect(x: 0, y: 0, width: size.width, height: size.height)])
        }
        func write(_ band: BGRAImageView, x: Int, y: Int) {
            for row in 0..<band.height {
                let source = band.base.advanced(by: row * band.stride).assumingMemoryBound(to: UInt32.self)
                for column in 0..<band.width { pixels[(y + row) * size.width + x + column] = source[column] & 0xFF_FFFF }
            }
        }
        func end() {}
        func cancel() {}
        func at(_ x: Int, _ y: Int) -> UInt32 { pixels[y * size.width + x] }
    }

    /// Captures the next change (10 s at most).
    static func captureNext(_ capturer: PortalScreenCapturer, into sink: PictureSink, _ what: String, _ source: ScriptedSource) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            _ = capturer.waitForChange(timeoutNanos: 100_000_000)
            switch capturer.capture(force: false, into: sink) {
            case .captured: return
            case .permanentError(let why): throw TestFailure(why)
            default: continue
            }
        }
        throw TestFailure("\(what): nothing captured in 10 s (the source sent \(source.sent) buffers)\n\(source.child.stdout)\n\(source.child.stderr)")
    }

    /// The producer's metadata drives what is read (real PipeWire, the test's producer): the
    /// damage it reports is read again, and only that — a change it does not report stays
    /// unseen; the pointer comes as cursor metadata, is drawn in by the capturer, and moves
    /// over a still picture in a buffer with no picture, its old and new places read again
    /// from the picture held. Without `drawCursor` it is never drawn.
    @Test(arguments: [true, false])
    func damageAndThePointerMetadataDecideWhatIsRead(drawCursor: Bool) throws {
        let desktop = try PortalDesktop()
        let source = try desktop.provideScripted(width: 640, height: 360)
        let capturer = try PortalScreenCapturer(window: false, region: nil, drawCursor: drawCursor, ask: false, tokens: nil,
                                                clock: SystemClock(), busAddress: desktop.busAddress)
        let sink = PictureSink()
        try Self.captureNext(capturer, into: sink, "step 1", source)
        #expect(sink.changed == nil && sink.size == PixelSize(width: 640, height: 360), "the first picture is read whole")
        #expect(sink.at(320, 180) == 0x808080)
        let pointerAt100 = PixelRect(x: 92, y: 92, width: 16, height: 16), pointerAt300 = PixelRect(x: 292, y: 242, width: 16, height: 16)
        // The pointer appears: a buffer that carries only it. (Without drawCursor nothing is
        // read for it, so it comes with the next picture: two buffers sent back to back from
        // the test's producer were seen to reach the capturer as one, the second held back.)
        if drawCursor {
            try source.send("cursor 100 100 FF0000", "frame")
            try Self.captureNext(capturer, into: sink, "step 2", source)
            #expect(sink.changed == [pointerAt100], "\(sink.changed ?? [])")
            #expect(sink.at(100, 100) == 0xFF0000 && sink.at(91, 100) == 0x808080)
        } else {
            try source.send("cursor 100 100 FF0000")
        }
        // A change reported (blue) and one not (green), in one picture: only the blue is read.
        try source.send("sneak 400 40 100 100 00FF00", "rect 40 200 120 100 0000FF", "frame")
        try Self.captureNext(capturer, into: sink, "step 3", source)
        let blue = PixelRect(x: 40, y: 200, width: 120, height: 100)
        #expect(sink.changed == (drawCursor ? [blue, pointerAt100, pointerAt100] : [blue]), "\(sink.changed ?? [])")
        #expect(sink.at(100, 250) == 0x0000FF && sink.at(450, 90) == 0x808080)
        // The pointer moves: its old place is read again from the picture held.
        try source.send("cursor 300 250 FF0000", drawCursor ? "frame" : "")
        if drawCursor {
            try Self.captureNext(capturer, into: sink, "step 4", source)
            #expect(sink.changed == [pointerAt100, pointerAt300], "\(sink.changed ?? [])")
            #expect(sink.at(100, 100) == 0x808080 && sink.at(300, 250) == 0xFF0000)
        }
        // A whole picture reported: the green is seen now; the pointer is drawn only if asked.
        try source.send("fill 808080", "rect 400 40 100 100 00FF00", "frame")
        try Self.captureNext(capturer, into: sink, "step 5", source)
        #expect(sink.at(450, 90) == 0x00FF00 && sink.at(100, 250) == 0x808080)
        #expect(sink.at(300, 250) == (drawCursor ? 0xFF0000 : 0x808080), "the pointer with drawCursor \(drawCursor)")
        #expect(!sink.pixels.contains(0xFF0000) || drawCursor)
    }

    /// `--no-cursor` asks for a hidden pointer; a window is asked for as a window.
    @Test func aWindowWithoutThePointer() throws {
        let desktop = try PortalDesktop(node: 91)
        let session = try ScreenCastSession.open(ScreenCastRequest(source: .window, drawCursor: false), busAddress: desktop.busAddress)
        defer { session.close() }
        #expect(session.cursorMode == 1)
        let selected = try #require(desktop.calls("SelectSources").first)
        #expect(selected["types"] as? Int == 2 && selected["cursor_mode"] as? Int == 1)
    }

    /// The user cancels the dialog: one clear error, and the session the portal made is closed.
    @Test func aCancelledDialogIsAClearErrorAndTheSessionIsClosed() throws {
        let desktop = try PortalDesktop(cancel: true)
        #expect {
            try ScreenCastSession.open(ScreenCastRequest(), busAddress: desktop.busAddress)
        } throws: { error in
            (error as? PortalError)?.kind == .cancelled && "\(error)" == "the screen-sharing dialog was cancelled: nothing is shared"
        }
        try desktop.waitForCalls("Close", count: 1)
    }

    /// A session bus with no portal on it (a desktop without xdg-desktop-portal): one clear
    /// error that says what to install.
    @Test func noPortalIsAClearError() throws {
        let desktop = try PortalDesktop(.noPortal)
        #expect {
            try ScreenCastSession.availability(busAddress: desktop.busAddress)
        } throws: { error in
            (error as? PortalError)?.kind == .noPortal && "\(error)".contains("install xdg-desktop-portal")
        }
    }

    /// The portal runs but no backend of the desktop's can share the screen (it offers no
    /// source types): one clear error that names the backends, before any dialog.
    @Test func aPortalWithoutAScreenCastBackendIsAClearError() throws {
        let desktop = try PortalDesktop(.noBackend)
        #expect {
            try ScreenCastSession.open(ScreenCastRequest(), busAddress: desktop.busAddress)
        } throws: { error in
            (error as? PortalError)?.kind == .noScreenCast && "\(error)".contains("xdg-desktop-portal-gnome")
        }
    }

    /// What the portal offers, asked without a dialog (`sources`).
    @Test func availabilityAsksNothing() throws {
        let desktop = try PortalDesktop()
        let offered = try ScreenCastSession.availability(busAddress: desktop.busAddress)
        #expect(offered == ScreenCastAvailability(version: 4, sourceTypes: 3, cursorModes: 7) || offered.version >= 4)
        #expect(desktop.calls("CreateSession").isEmpty)
    }
}

/// `screenshare sources` says what the portal offers, or why it cannot be used.
@Suite(.serialized) struct SourcesPortalTests {
    static func sources(_ environment: [String: String], json: Bool = false, x11: Bool = true, status: Int32 = 0) throws -> String {
        let xvfb = x11 ? try PrivateXvfb(width: 640, height: 480) : nil
        defer { xvfb?.stop() }
        let dir = try makeTempDir()
        let binary = ProcessInfo.processInfo.environment["SCREENSHARE_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/screenshare"
        let child = try Child(binary, ["sources"] + (xvfb.map { ["--display", $0.name] } ?? []) + (json ? ["--json"] : []), dir: dir,
                              name: "sources", environment: environment.merging(x11 ? [:] : ["DISPLAY": ""]) { a, _ in a })
        #expect(child.finish(within: 30) == status, "\(child.stderr)")
        return child.stdout + child.stderr
    }

    /// A Wayland session without X (no XWayland): the portal is listed, the missing display
    /// said; with neither, one line and exit 69.
    @Test func sourcesWithoutAnXDisplayListsThePortal() throws {
        let desktop = try PortalDesktop()
        let out = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress], x11: false)
        #expect(out.contains("X11: unavailable (") && out.contains("portal (Wayland): monitors and windows"), "\(out)")
        let json = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress], json: true, x11: false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["display"] is NSNull && object["display_error"] is String && (object["portal"] as? [String: Any])?["available"] as? Bool == true)
        let nothing = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": desktop.dir + "/nothing"], x11: false, status: 69)
        #expect(nothing.contains("and no portal either (no D-Bus session bus"), "\(nothing)")
    }

    @Test func sourcesNamesWhatThePortalOffers() throws {
        let desktop = try PortalDesktop()
        let out = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress])
        #expect(out.contains("portal (Wayland): monitors and windows, the pointer drawn (ScreenCast v4)"), "\(out)")
        let json = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress], json: true)
        let portal = try #require((try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["portal"] as? [String: Any])
        #expect(portal["available"] as? Bool == true && portal["source_types"] as? [String] == ["monitor", "window"])
        #expect(portal["cursor_modes"] as? [String] == ["hidden", "embedded", "metadata"])
        #expect(desktop.calls("CreateSession").isEmpty, "sources asks nothing of the user")
    }

    @Test func sourcesSaysWhyThereIsNoPortal() throws {
        let desktop = try PortalDesktop(.noBackend)
        let out = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress])
        #expect(out.contains("portal (Wayland): unavailable (the desktop's portal has no screen-cast backend: install your desktop's (xdg-desktop-portal-gnome, -kde or -wlr))"), "\(out)")
        let none = try Self.sources(["DBUS_SESSION_BUS_ADDRESS": "", "XDG_RUNTIME_DIR": desktop.dir + "/nothing"])
        #expect(none.contains("portal (Wayland): unavailable (no D-Bus session bus"), "\(none)")
    }
}

/// `screenshare start --capture portal`: the desktop's dialog (the test's backend), PipeWire,
/// and the sender's own pipeline; what is sent is recorded (`--record`) and decoded by ffmpeg.
@Suite(.serialized) struct PortalShareTests {
    static var binary: String {
        ProcessInfo.processInfo.environment["SCREENSHARE_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/screenshare"
    }

    /// Runs `start --capture portal` for `seconds` to a UDP socket of the test's, recording.
    static func share(_ desktop: PortalDesktop, _ extra: [String] = [], seconds: Int = 4, name: String) throws -> (Child, String) {
        let receiver = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(receiver) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(receiver, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(receiver, $0, &length) } }
        let port = UInt16(bigEndian: address.sin_port)
        let recording = desktop.dir + "/\(name).webm"
        let child = try Child(binary, ["start", "--capture", "portal", "--to", "127.0.0.1:\(port)", "--no-audio", "--duration", "\(seconds)",
                                       "--record", recording, "--json"] + extra,
                              dir: desktop.dir, name: name,
                              environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state",
                                            "DISPLAY": "", "WAYLAND_DISPLAY": "wayland-test"])
        #expect(child.finish(within: Double(seconds) + 20) == 0, "\(child.stderr)")
        #expect(!child.stderr.contains("failed at"), "an assertion of PipeWire's: \(child.stderr)")
        return (child, recording)
    }

    /// The last picture of a recording, decoded by ffmpeg: its mean colour in the middle.
    static func middleColour(_ recording: String, width: Int, height: Int) throws -> (Double, Double, Double) {
        let raw = recording + ".rgb"
        let ffmpeg = try Child(which("ffmpeg"), ["-v", "error", "-y", "-sseof", "-1", "-i", recording, "-frames:v", "1", "-f", "rawvideo",
                                                 "-pix_fmt", "rgb24", raw], dir: URL(fileURLWithPath: recording).deletingLastPathComponent().path,
                               name: "ffmpeg")
        #expect(ffmpeg.finish(within: 30) == 0, "\(ffmpeg.stderr)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: raw)))
        try #require(bytes.count == width * height * 3, "decoded \(bytes.count) bytes")
        var sum = (0.0, 0.0, 0.0), n = 0.0
        for y in (height / 4)..<(height * 3 / 4) {
            for x in (width / 4)..<(width * 3 / 4) {
                let i = (y * width + x) * 3
                sum.0 += Double(bytes[i]); sum.1 += Double(bytes[i + 1]); sum.2 += Double(bytes[i + 2])
                n += 1
            }
        }
        return (sum.0 / n, sum.1 / n, sum.2 / n)
    }

    @Test func theChosenScreenIsSentAndTheNextShareAsksNothing() throws {
        let desktop = try PortalDesktop()
        _ = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360)
        let (first, recording) = try Self.share(desktop, name: "first")
        let started = first.stdout.split(separator: "\n").first { $0.contains(#""event":"started""#) }
        #expect(started?.contains("the screen chosen in the desktop's dialog") == true, "\(first.stdout.prefix(2000))")
        #expect(first.stdout.contains(#""width":640"#) && first.stdout.contains(#""height":360"#), "\(first.stdout.suffix(2000))")
        let (r, g, b) = try Self.middleColour(recording, width: 640, height: 360)
        #expect(abs(r - 0x33) < 6 && abs(g - 0x66) < 6 && abs(b - 0x99) < 6, "decoded \(r) \(g) \(b), sent 51 102 153")
        // The token is kept, private, and the next share passes it: the portal restores the
        // choice (its backend gets the restore data) instead of asking.
        var info = stat()
        #expect(stat(desktop.dir + "/state/screenshare/portal-monitor.token", &info) == 0 && info.st_mode & 0o777 == 0o600)
        _ = try Self.share(desktop, seconds: 2, name: "second")
        let selections = desktop.calls("SelectSources")
        #expect(selections.count == 2 && selections[0]["restore_data"] == nil && selections[1]["restore_data"] != nil, "\(selections)")
        // --ask forgets it: the dialog again.
        _ = try Self.share(desktop, ["--ask"], seconds: 2, name: "third")
        #expect(desktop.calls("SelectSources").last?["restore_data"] == nil)
    }

    /// Every picture of a recording, decoded by ffmpeg as they were sent (no frame added or
    /// dropped), `width`×`height` RGB.
    static func pictures(_ recording: String, width: Int, height: Int) throws -> [[UInt8]] {
        let raw = recording + ".all.rgb"
        let ffmpeg = try Child(which("ffmpeg"), ["-v", "error", "-y", "-i", recording, "-vsync", "0", "-f", "rawvideo", "-pix_fmt", "rgb24", raw],
                               dir: URL(fileURLWithPath: recording).deletingLastPathComponent().path, name: "ffmpeg-all")
        #expect(ffmpeg.finish(within: 60) == 0, "\(ffmpeg.stderr)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: raw)))
        let size = width * height * 3
        return stride(from: 0, to: bytes.count - size + 1, by: size).map { Array(bytes[$0..<($0 + size)]) }
    }

    /// The mean colour of the 6×6 pixels around (x, y) of a picture `width` wide.
    static func colour(_ picture: [UInt8], width: Int, at x: Int, _ y: Int) -> (Int, Int, Int) {
        var sum = (0, 0, 0)
        for j in (y - 3)..<(y + 3) {
            for i in (x - 3)..<(x + 3) {
                let k = (j * width + i) * 3
                sum.0 += Int(picture[k]); sum.1 += Int(picture[k + 1]); sum.2 += Int(picture[k + 2])
            }
        }
        return (sum.0 / 36, sum.1 / 36, sum.2 / 36)
    }

    static func near(_ c: (Int, Int, Int), _ rgb: UInt32) -> Bool {
        abs(c.0 - Int(rgb >> 16 & 0xFF)) < 24 && abs(c.1 - Int(rgb >> 8 & 0xFF)) < 24 && abs(c.2 - Int(rgb & 0xFF)) < 24
    }

    /// What `start --json` has captured so far, from its stats (one line a second, each with
    /// the count since the start), and how many stats lines there are.
    static func captured(_ child: Child) -> (frames: Int, lines: Int) {
        var frames = 0, lines = 0
        for line in child.stdout.split(separator: "\n") where line.contains(#""event":"stats""#) {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            frames = object["frames_captured"] as? Int ?? frames
            lines += 1
        }
        return (frames, lines)
    }

    /// Sends `lines` to the source, then waits until the share has captured what they sent and
    /// then a whole stats second passed with nothing captured (so the next step's capture is
    /// told apart from this one's).
    static func step(_ source: ScriptedSource, _ child: Child, _ lines: String...) throws {
        let before = captured(child).frames
        try source.send(lines.joined(separator: "\n"))
        _ = try PortalDesktop.waitFor(child, { captured($0).frames > before }, "the share capturing \(lines)")
        var last = captured(child)
        _ = try PortalDesktop.waitFor(child, { c in
            let now = captured(c)
            if now.frames != last.frames { last = now; return false }
            return now.lines >= last.lines + 1
        }, "a stats second with nothing captured after \(lines)")
    }

    /// The pointer from the stream's cursor metadata, end to end: drawn where it is, moved over
    /// a still picture (a buffer with no picture), its old place clean again in what is
    /// sent; with `--no-cursor`, never drawn.
    @Test func thePointerFromTheStreamsMetadataIsSent() throws {
        let desktop = try PortalDesktop()
        let source = try desktop.provideScripted(width: 640, height: 360)
        let grey: UInt32 = 0x808080, red: UInt32 = 0xFF0000, blue: UInt32 = 0x0000FF
        for drawn in [true, false] {
            let name = drawn ? "pointer" : "no-pointer", recording = desktop.dir + "/\(name).webm"
            let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "60",
                                                "--record", recording, "--json"] + (drawn ? [] : ["--no-cursor"]),
                                  dir: desktop.dir, name: name,
                                  environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state"])
            _ = try PortalDesktop.waitFor(child, { $0.stdout.contains(#""event":"first_frame_sent""#) }, "the first frame sent")
            if drawn {
                // The pointer appears over the still grey picture, then moves.
                try Self.step(source, child, "cursor 100 100 FF0000", "frame")
                try Self.step(source, child, "cursor 300 250 FF0000", "frame")
            } else {
                // Nothing to capture for a pointer that is not drawn: a picture comes with it.
                try Self.step(source, child, "cursor 300 250 FF0000", "rect 40 200 120 100 0000FF", "frame")
            }
            #expect(child.finish(within: 0) == 130, "interrupted: \(child.stderr)")
            #expect(!child.stderr.contains("failed at"), "an assertion of PipeWire's: \(child.stderr)")
            let pictures = try Self.pictures(recording, width: 640, height: 360)
            let last = try #require(pictures.last)
            func at(_ x: Int, _ y: Int) -> (Int, Int, Int) { Self.colour(last, width: 640, at: x, y) }
            #expect(Self.near(at(100, 100), grey), "the pointer's old place: \(at(100, 100))")
            if drawn {
                #expect(pictures.contains { Self.near(Self.colour($0, width: 640, at: 100, 100), red) }, "the pointer never drawn at its first place")
                #expect(Self.near(at(300, 250), red), "the pointer: \(at(300, 250))")
            } else {
                #expect(Self.near(at(100, 250), blue), "the picture sent with the pointer: \(at(100, 250))")
                #expect(!pictures.contains { Self.near(Self.colour($0, width: 640, at: 300, 250), red) }, "the pointer drawn with --no-cursor")
            }
            // The next share starts from a grey picture without a pointer.
            try source.send("hide", "fill 808080", "frame")
        }
    }

    /// A slide through the portal, end to end: text-like lines, a title bar and a chart, sent
    /// still; what `start --capture portal` records decodes (ffmpeg) at Y-PSNR ≥ 40 dB against
    /// the slide (its luma as libyuv's BT.601 conversion gives it).
    @Test func aSlideArrivesSharp() throws {
        let (w, h) = (960, 540)
        var slide = [UInt32](repeating: 0xFFFF_FFFF, count: w * h)
        func fill(_ x: Int, _ y: Int, _ rw: Int, _ rh: Int, _ argb: UInt32) {
            for j in y..<min(h, y + rh) { for i in x..<min(w, x + rw) { slide[j * w + i] = argb } }
        }
        var seed: UInt32 = 12345
        func next(_ n: Int) -> Int { seed = seed &* 1_103_515_245 &+ 12345; return Int((seed >> 16) % UInt32(n)) }
        fill(0, 0, w, 80, 0xFF1A_3D7C)  // the title bar, its "words" white
        var x = 40
        while x < w - 120 { let word = 30 + next(90); fill(x, 28, word, 24, 0xFFFF_FFFF); x += word + 18 }
        for line in 0..<14 {  // lines of text: black "words" with gaps
            var x = 60
            let y = 110 + line * 28
            while x < w / 2 + 100 { let word = 12 + next(70); fill(x, y, word, 14, 0xFF10_1010); x += word + 10 }
        }
        for bar in 0..<6 { let bh = 40 + next(200); fill(640 + bar * 45, 480 - bh, 32, bh, [0xFFC0_392B, 0xFF27_AE60, 0xFF8E_44AD][bar % 3]) }
        let desktop = try PortalDesktop()
        let path = desktop.dir + "/slide.bgrx"
        try slide.withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: path)) }
        let source = try desktop.provideScripted(width: w, height: h)
        let recording = desktop.dir + "/slide.webm"
        let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "60",
                                            "--record", recording, "--json"],
                              dir: desktop.dir, name: "slide",
                              environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state"])
        _ = try PortalDesktop.waitFor(child, { $0.stdout.contains(#""event":"first_frame_sent""#) }, "the first frame sent")
        try Self.step(source, child, "load \(path)", "frame")
        // The still slide is refined by the repeats that follow it: three more seconds.
        let lines = Self.captured(child).lines
        _ = try PortalDesktop.waitFor(child, { Self.captured($0).lines >= lines + 3 }, "three stats seconds of the still slide")
        #expect(child.finish(within: 0) == 130, "interrupted: \(child.stderr)")
        // The last picture's luma, as decoded.
        let yuv = recording + ".yuv"
        let ffmpeg = try Child(which("ffmpeg"), ["-v", "error", "-y", "-sseof", "-1", "-i", recording, "-frames:v", "1", "-f", "rawvideo",
                                                 "-pix_fmt", "yuv420p", yuv], dir: desktop.dir, name: "ffmpeg-slide")
        #expect(ffmpeg.finish(within: 30) == 0, "\(ffmpeg.stderr)")
        let decoded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: yuv)))
        try #require(decoded.count == w * h * 3 / 2, "decoded \(decoded.count) bytes")
        var squared = 0.0
        for i in 0..<(w * h) {
            let p = slide[i], r = Int(p >> 16 & 0xFF), g = Int(p >> 8 & 0xFF), b = Int(p & 0xFF)
            let y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
            let d = Double(y - Int(decoded[i]))
            squared += d * d
        }
        let mse = max(squared / Double(w * h), 1e-10)
        let psnr = 10 * log10(255 * 255 / mse)
        #expect(psnr >= 40, "Y-PSNR \(psnr) dB")
        print("slide through the portal: Y-PSNR \(String(format: "%.1f", psnr)) dB")
    }

    /// The source changes size mid-share (a monitor's resolution, a window resized): the share
    /// says so and sends the new size from a keyframe.
    @Test func aNewSizeIsSentFromAKeyframe() throws {
        let desktop = try PortalDesktop()
        let source = try desktop.provideScripted(width: 640, height: 360)
        let recording = desktop.dir + "/resized.webm"
        let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "60",
                                            "--record", recording, "--json"],
                              dir: desktop.dir, name: "resized",
                              environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state"])
        _ = try PortalDesktop.waitFor(child, { $0.stdout.contains(#""event":"first_frame_sent""#) }, "the first frame sent")
        try Self.step(source, child, "size 800 450")
        try Self.step(source, child, "rect 40 40 100 100 0000FF", "frame")
        #expect(child.finish(within: 0) == 130, "interrupted: \(child.stderr)")
        #expect(child.stdout.contains("source is now 800x450 (was 640x360)"), "\(child.stdout.suffix(3000))")
        let probe = try Child(which("ffprobe"), ["-v", "error", "-select_streams", "v", "-show_entries", "frame=width,height,key_frame",
                                                 "-of", "json", recording], dir: desktop.dir, name: "ffprobe")
        #expect(probe.finish(within: 30) == 0, "\(probe.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any])
        let frames = try #require(object["frames"] as? [[String: Any]])
        let sizes = frames.map { ($0["width"] as? Int ?? 0, $0["height"] as? Int ?? 0, $0["key_frame"] as? Int ?? 0) }
        let first = try #require(sizes.firstIndex { $0.0 == 800 }, "no picture at the new size: \(sizes.suffix(10))")
        #expect(first > 0 && sizes[first].1 == 450 && sizes[first].2 == 1, "the first picture at 800x450 is not a keyframe: \(sizes[first])")
        #expect(sizes[first...].allSatisfy { $0.0 == 800 && $0.1 == 450 }, "\(sizes.suffix(10))")
        #expect(sizes[..<first].allSatisfy { $0.0 == 640 && $0.1 == 360 })
    }

    /// The stream goes away mid-share (the producer, or PipeWire, stops; the user stops sharing
    /// from the desktop's indicator): the share stops cleanly, and says why in one line.
    @Test func theStreamGoingAwayEndsTheShareSayingWhy() throws {
        let desktop = try PortalDesktop()
        _ = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360)
        let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "30", "--json"],
                              dir: desktop.dir, name: "gone",
                              environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state"])
        _ = try PortalDesktop.waitFor(child, { $0.stdout.contains(#""event":"first_frame_sent""#) }, "the first frame sent")
        desktop.stopProducers()
        let status = child.finish(within: 10, interrupt: false)
        #expect(status == 69, "exit \(status): \(child.stderr)")
        #expect(child.stderr.contains("PipeWire stream"), "\(child.stderr)")
        #expect(!child.stderr.contains("failed at"), "an assertion of PipeWire's: \(child.stderr)")
    }

    /// PipeWire itself dies mid-share (a crash, a session restart): the share stops cleanly,
    /// exit 69, and says why in one line.
    @Test func pipeWireDyingEndsTheShareSayingWhy() throws {
        let desktop = try PortalDesktop()
        _ = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360)
        let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "30", "--json"],
                              dir: desktop.dir, name: "pipewire-gone",
                              environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.busAddress, "XDG_STATE_HOME": desktop.dir + "/state"])
        _ = try PortalDesktop.waitFor(child, { $0.stdout.contains(#""event":"first_frame_sent""#) }, "the first frame sent")
        desktop.killPipeWire()
        let status = child.finish(within: 10, interrupt: false)
        #expect(status == 69, "exit \(status): \(child.stderr)")
        #expect(child.stderr.contains("PipeWire"), "\(child.stderr)")
        #expect(!child.stderr.contains("failed at"), "an assertion of PipeWire's: \(child.stderr)")
    }

    /// A still screen: the portal sends no new pictures, and the share keeps `--min-fps` by
    /// repeating the last one (held, not copied).
    @Test func aStillScreenKeepsTheMinimumFrameRate() throws {
        let desktop = try PortalDesktop()
        _ = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360, fps: 1)
        let (child, _) = try Self.share(desktop, ["--fps", "15", "--min-fps", "5"], seconds: 4, name: "still")
        let stopped = try #require(child.stdout.split(separator: "\n").last { $0.contains(#""event":"stopped""#) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stopped.utf8)) as? [String: Any])
        let sent = object["frames_sent"] as? Int ?? 0
        #expect(sent >= 15, "\(sent) frames sent in 4 s of a screen that changed once a second: \(stopped)")
    }

    /// `--region` crops the stream; a cancelled dialog stops `start` with one line, exit 69,
    /// before anything is sent.
    @Test func aRegionOfTheStreamAndACancelledDialog() throws {
        let desktop = try PortalDesktop()
        _ = try desktop.provideSolidColor(argb: 0xFF33_6699, width: 640, height: 360)
        let (cropped, _) = try Self.share(desktop, ["--region", "320x180+100+50"], seconds: 2, name: "cropped")
        #expect(cropped.stdout.contains(#""width":320"#) && cropped.stdout.contains(#""height":180"#), "\(cropped.stdout.suffix(1500))")

        let refusing = try PortalDesktop(cancel: true)
        let child = try Child(Self.binary, ["start", "--capture", "portal", "--to", "127.0.0.1:9", "--no-audio", "--duration", "2"],
                              dir: refusing.dir, name: "cancelled",
                              environment: ["DBUS_SESSION_BUS_ADDRESS": refusing.busAddress, "XDG_STATE_HOME": refusing.dir + "/state"])
        #expect(child.finish(within: 20) == 69, "\(child.stderr)")
        #expect(child.stderr.contains("the screen-sharing dialog was cancelled: nothing is shared"), "\(child.stderr)")
    }
}

/// The restore tokens kept between shares.
@Suite struct RestoreTokenTests {
    @Test func keptPrivateReadBackAndForgotten() throws {
        let dir = try makeTempDir() + "/a/b/screenshare"
        let tokens = RestoreTokens(directory: dir)
        #expect(tokens.token(for: .monitor) == nil)
        try tokens.keep("3f1c-token", for: .monitor)
        #expect(tokens.token(for: .monitor) == "3f1c-token" && tokens.token(for: .window) == nil)
        var info = stat()
        #expect(stat(dir + "/portal-monitor.token", &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(dir, &info) == 0 && info.st_mode & 0o777 == 0o700)
        try tokens.keep("next", for: .monitor)  // replaced, not refused
        #expect(tokens.token(for: .monitor) == "next")
        chmod(dir + "/portal-monitor.token", 0o644)  // readable by anyone: not trusted
        #expect(tokens.token(for: .monitor) == nil)
        try tokens.keep(nil, for: .monitor)  // --ask: forgotten
        #expect(!FileManager.default.fileExists(atPath: dir + "/portal-monitor.token"))
    }

    @Test func whereTheyAreKept() {
        #expect(RestoreTokens.forUser(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"])?.directory == "/s/screenshare")
        #expect(RestoreTokens.forUser(environment: ["HOME": "/h"])?.directory == "/h/.local/state/screenshare")
        #expect(RestoreTokens.forUser(environment: ["XDG_STATE_HOME": "relative", "HOME": "/h"])?.directory == "/h/.local/state/screenshare")
        #expect(RestoreTokens.forUser(environment: [:]) == nil)
    }
}
