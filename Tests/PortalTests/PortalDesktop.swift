import Foundation
import X11TestSupport

/// A desktop's screen-sharing plumbing, private to one test: its own D-Bus session bus
/// (`dbus-daemon --session`), PipeWire and WirePlumber under a runtime directory of its own, the
/// real `xdg-desktop-portal`, and the test's ScreenCast backend (`screencast-backend.py`), which
/// the portal finds through `XDG_DESKTOP_PORTAL_DIR` and answers the dialog with PipeWire node
/// `node` (or cancels it). Everything it started is stopped when it goes away.
final class PortalDesktop {
    let dir: String
    /// The bus the code under test connects to.
    let busAddress: String
    private var children: [Child] = []
    private var backend: Child?
    private var env: [String: String] = [:]

    enum Setup {
        /// The portal with the test's ScreenCast backend.
        case full
        /// The real portal, but no ScreenCast backend (a desktop without GNOME's, KDE's or wlr's).
        case noBackend
        /// A session bus that has no portal and cannot start one.
        case noPortal
    }

    init(node: UInt32 = 77, cancel: Bool = false, _ setup: Setup = .full) throws {
        dir = try makeTempDir()
        let run = dir + "/run", home = dir + "/home", portals = dir + "/portals"
        for d in [run, home, portals] { mkdir(d, 0o700) }
        try """
        [portal]
        DBusName=org.freedesktop.impl.portal.desktop.screensharetest
        Interfaces=org.freedesktop.impl.portal.ScreenCast;
        UseIn=screensharetest

        """.write(toFile: portals + "/screenshare-test.portal", atomically: true, encoding: .utf8)
        // The bus daemon's environment is that of the services it starts on demand (the
        // portal's permission store, which keeps the restore data under HOME).
        var env = ["XDG_RUNTIME_DIR": run, "PIPEWIRE_RUNTIME_DIR": run, "HOME": home, "XDG_DATA_HOME": home + "/.local/share",
                   "XDG_CONFIG_HOME": home + "/.config", "XDG_STATE_HOME": home + "/.local/state",
                   "XDG_CURRENT_DESKTOP": "screensharetest", "XDG_DESKTOP_PORTAL_DIR": portals]
        // The standard session configuration starts the portal (and its permission store) on
        // demand; without a portal, a configuration that starts nothing.
        var config = ["--session"]
        if setup == .noPortal {
            try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(dir)/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
            </busconfig>
            """.write(toFile: dir + "/bus.conf", atomically: true, encoding: .utf8)
            config = ["--config-file=\(dir)/bus.conf"]
        }
        let bus = try Child("/usr/bin/dbus-daemon", config + ["--nofork", "--print-address=1", "--address=unix:path=\(dir)/bus"],
                            dir: dir, name: "dbus", environment: env)
        children.append(bus)
        busAddress = try Self.waitFor(bus, { $0.stdout.contains("\n") }, "the session bus's address")
            .stdout.split(separator: "\n")[0].trimmingCharacters(in: .whitespaces)
        env["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        self.env = env
        guard setup != .noPortal else { return }
        let pipewire = try Child(which("pipewire"), [], dir: dir, name: "pipewire", environment: env)
        children.append(pipewire)
        _ = try Self.waitFor(pipewire, { _ in FileManager.default.fileExists(atPath: run + "/pipewire-0") }, "PipeWire's socket")
        children.append(try Child(which("wireplumber"), [], dir: dir, name: "wireplumber", environment: env))
        if setup == .full { try startBackend(node: node, cancel: cancel, env: env) }
        let xdp = try Child("/usr/libexec/xdg-desktop-portal", ["-v"], dir: dir, name: "xdg-desktop-portal", environment: env)
        children.append(xdp)
        _ = try Self.waitFor(xdp, { $0.stderr.contains("org.freedesktop.portal.Desktop acquired") }, "xdg-desktop-portal")
    }

    private func startBackend(node: UInt32, cancel: Bool, env: [String: String]) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("screencast-backend.py").path
        let backend = try Child("/usr/bin/python3", [script, "--node", "\(node)", "--node-file", dir + "/granted-node"] + (cancel ? ["--cancel"] : []),
                                dir: dir, name: "backend", environment: env)
        children.append(backend)
        self.backend = backend
        _ = try Self.waitFor(backend, { $0.stdout.contains(#""call": "ready""#) }, "the ScreenCast backend")
    }

    deinit {
        for child in children.reversed() {
            kill(child.pid, SIGTERM)
            child.finish(within: 3, interrupt: false)
        }
    }

    /// Starts a PipeWire video source (GStreamer's `pipewiresink mode=provide`) of a solid
    /// `width`×`height` picture in `argb` (0xAARRGGBB) at `fps`, and has the backend grant its
    /// node at the next Start. Returns the node's id, read back from `pw-dump`.
    func provideSolidColor(argb: UInt32, width: Int, height: Int, fps: Int = 10) throws -> UInt32 {
        let name = "screenshare-test-\(children.count)"
        let gst = try Child(which("gst-launch-1.0"), [
            "-q", "videotestsrc", "pattern=solid-color", "foreground-color=\(argb)", "is-live=true", "!",
            "video/x-raw,format=BGRx,width=\(width),height=\(height),framerate=\(fps)/1", "!",
            "pipewiresink", "mode=provide", "stream-properties=p,media.class=Video/Source,node.name=\(name)",
        ], dir: dir, name: "gst", environment: env)
        children.append(gst)
        var node: UInt32?
        _ = try Self.waitFor(gst, { _ in
            node = self.nodeID(named: name)
            return node != nil
        }, "the GStreamer source's PipeWire node")
        try "\(node!)".write(toFile: dir + "/granted-node", atomically: true, encoding: .utf8)
        return node!
    }

    /// A PipeWire video source of the test's own (`ss-test-pw-producer`), `width`×`height`,
    /// grey, driven by ``ScriptedSource/send(_:)``; the backend grants its node at the next Start.
    func provideScripted(width: Int, height: Int) throws -> ScriptedSource {
        let name = "screenshare-scripted-\(children.count)", fifo = dir + "/\(name).fifo"
        guard mkfifo(fifo, 0o600) == 0 else { throw TestFailure("mkfifo \(fifo): \(String(cString: strerror(errno)))") }
        let binary = URL(fileURLWithPath: PortalShareTests.binary).deletingLastPathComponent().appendingPathComponent("ss-test-pw-producer").path
        let producer = try Child(binary, [name, "\(width)", "\(height)", fifo], dir: dir, name: "gst", environment: env)
        children.append(producer)
        let line = try Self.waitFor(producer, { $0.stdout.contains("node ") }, "the scripted source's PipeWire node")
            .stdout.split(separator: "\n").first { $0.hasPrefix("node ") }
        guard let node = line.flatMap({ UInt32($0.dropFirst(5)) }) else { throw TestFailure("no node: \(producer.stdout)") }
        try "\(node)".write(toFile: dir + "/granted-node", atomically: true, encoding: .utf8)
        return ScriptedSource(child: producer, fifo: fifo, node: node)
    }

    /// Stops the video sources started with ``provideSolidColor(argb:width:height:fps:)``: their nodes go away.
    func stopProducers() {
        for child in children where URL(fileURLWithPath: child.stdoutPath).lastPathComponent == "gst.out" {
            kill(child.pid, SIGTERM)
            child.finish(within: 5, interrupt: false)
        }
    }

    /// Kills the PipeWire daemon (as a crash would): every client loses its connection.
    func killPipeWire() {
        for child in children where URL(fileURLWithPath: child.stdoutPath).lastPathComponent == "pipewire.out" {
            kill(child.pid, SIGKILL)
            child.finish(within: 5, interrupt: false)
        }
    }

    /// The id of the PipeWire node named `name`, from `pw-dump`.
    private func nodeID(named name: String) -> UInt32? {
        guard let dump = try? Child(which("pw-dump"), [], dir: dir, name: "pw-dump", environment: env) else { return nil }
        guard dump.finish(within: 5) == 0,
              let objects = try? JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [[String: Any]] else { return nil }
        for object in objects where object["type"] as? String == "PipeWire:Interface:Node" {
            let props = (object["info"] as? [String: Any])?["props"] as? [String: Any]
            if props?["node.name"] as? String == name, let id = object["id"] as? Int { return UInt32(id) }
        }
        return nil
    }

    /// The backend's calls named `name`, in order: each the options it got.
    func calls(_ name: String) -> [[String: Any]] {
        (backend?.stdout ?? "").split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  object["call"] as? String == name else { return nil }
            return object["options"] as? [String: Any] ?? [:]
        }
    }

    /// Waits until the backend has logged `count` calls named `name` (the portal's calls to it
    /// may come after our call returned: `Close` is not answered).
    func waitForCalls(_ name: String, count: Int) throws {
        guard let backend else { return }
        _ = try Self.waitFor(backend, { _ in self.calls(name).count >= count }, "\(count) \(name) call(s) at the backend")
    }

    /// Waits (up to 20 s, looking every 10 ms) until `done` holds of `child`, which must keep running.
    @discardableResult
    static func waitFor(_ child: Child, _ done: (Child) -> Bool, _ what: String) throws -> Child {
        let deadline = Date().addingTimeInterval(20)
        while !done(child) {
            guard child.isRunning else { throw TestFailure("\(what): the process ended\n\(child.stdout)\n\(child.stderr)") }
            guard Date() < deadline else { throw TestFailure("\(what): not ready in 20 s\n\(child.stdout)\n\(child.stderr)") }
            usleep(10_000)
        }
        return child
    }
}

/// The test's PipeWire source (`Tests/PipeWireProducer/producer.c`), told what to draw and send.
struct ScriptedSource {
    let child: Child
    let fifo: String
    let node: UInt32

    /// Buffers it has sent.
    var sent: Int { child.stdout.split(separator: "\n").filter { $0.hasPrefix("sent ") }.count }

    /// Writes commands (one a line) to it; `frame` sends what they changed.
    func send(_ lines: String...) throws {
        let fd = open(fifo, O_WRONLY | O_NONBLOCK)
        guard fd >= 0 else { throw TestFailure("\(fifo): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let text = lines.joined(separator: "\n") + "\n"
        guard text.utf8.count < 512, text.withCString({ write(fd, $0, strlen($0)) }) == text.utf8.count else {
            throw TestFailure("cannot write \(lines) to the scripted source")
        }
    }
}
