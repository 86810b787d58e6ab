import Foundation
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
        #expect(first.cursorMode == 2, "the pointer embedded in the picture")
        let token = try #require(first.restoreToken, "persist_mode 2 gives a restore token")
        let selected = try #require(desktop.calls("SelectSources").first)
        #expect(selected["types"] as? Int == 1 && selected["multiple"] as? Bool == false)
        #expect(selected["persist_mode"] as? Int == 2 && selected["cursor_mode"] as? Int == 2)
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
    static func sources(_ environment: [String: String], json: Bool = false) throws -> String {
        let xvfb = try PrivateXvfb(width: 640, height: 480)
        defer { xvfb.stop() }
        let dir = try makeTempDir()
        let binary = ProcessInfo.processInfo.environment["SCREENSHARE_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/screenshare"
        let child = try Child(binary, ["sources", "--display", xvfb.name] + (json ? ["--json"] : []), dir: dir, name: "sources",
                              environment: environment)
        #expect(child.finish(within: 30) == 0, "\(child.stderr)")
        return child.stdout
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
