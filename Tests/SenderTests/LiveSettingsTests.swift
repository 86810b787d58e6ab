@testable import Control
import Transport
import Testing
import MediaCore
import Basics
import ScreenCapture
import VideoProcessing
import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import Sender

@Suite struct LiveSettingsTests {
    let base = LiveSettings(config: BroadcastConfig(source: .x11(display: ":0", source: .screen, drawCursor: true),
                                                    destination: Endpoint(host: "127.0.0.1", port: 5004), cname: "c"))

    @Test func appliesSeveralChangesTogether() throws {
        let s = try base.applying([("bitrate", "1M"), ("fps", "30"), ("content", "motion"), ("max-resolution", "720p"),
                                   ("keyframe-interval", "2"), ("source", "window:Slides")])
        #expect(s.bitrate.bitsPerSecond == 1_000_000 && s.fps == 30 && s.content == .motion)
        #expect(s.maxResolution == .p720 && s.keyframeIntervalSeconds == 2)
        #expect(s.source == .x11(display: ":0", source: .window("Slides"), drawCursor: true))
        #expect(s.changedKeys(from: base) == ["bitrate_kbps", "content", "fps", "keyframe_interval_s", "max_resolution", "source"])
        let back = try s.applying([("max-resolution", "none"), ("keyframe-interval", "none"), ("source", "region:640x480+10+20")])
        #expect(back.maxResolution == nil && back.keyframeIntervalSeconds == nil)
        #expect(back.source == .x11(display: ":0", source: .region(PixelRect(x: 10, y: 20, width: 640, height: 480)), drawCursor: true))
    }

    @Test(arguments: [
        ("fps", "0", "fps=0"), ("fps", "fast", "fps=fast"), ("bitrate", "lots", "bitrate=lots"), ("volume", "3", "unknown setting"),
        ("source", "elsewhere", "source=elsewhere"), ("source", "region:10x", "region:10x"), ("content", "cartoon", "detail or motion"),
        ("min-fps", "-1", "min-fps=-1"),
    ])
    func badValuesAreNamedAndNothingChanges(key: String, value: String, mention: String) {
        do {
            _ = try base.applying([("fps", "20"), (key, value)])
            Issue.record("accepted \(key)=\(value)")
        } catch {
            #expect("\(error)".contains(mention), "\(error)")
        }
    }

    @Test func crossChecksWholeSettings() {
        #expect(throws: SettingError.self) { try base.applying([("fps", "5"), ("min-fps", "10")]) }
        #expect(throws: SettingError.self) { try base.applying([("bitrate", "500k"), ("min-bitrate", "1M")]) }
        #expect(throws: SettingError.self) { try base.applying([]) }
    }

    @Test func rawInputCannotSwitchSource() {
        let raw = LiveSettings(config: BroadcastConfig(source: .raw(path: "f", format: .nv12, size: PixelSize(width: 2, height: 2), fps: 1),
                                                       destination: Endpoint(host: "h", port: 1), cname: "c"))
        #expect(throws: SettingError.self) { try raw.applying([("source", "screen")]) }
    }

    @Test func picksTheOnlySocketOrSaysWhy() throws {
        #expect(try ControlSocket.pickOnly(in: "/run/x", entries: ["pid-12.sock", "notes.txt"]) == "/run/x/pid-12.sock")
        do { _ = try ControlSocket.pickOnly(in: "/run/x", entries: []); Issue.record("none accepted") }
        catch { #expect("\(error)".contains("no screenshare broadcaster is running")) }
        do { _ = try ControlSocket.pickOnly(in: "/run/x", entries: ["a.sock", "b.sock"]); Issue.record("several accepted") }
        catch { #expect("\(error)".contains("a, b") && "\(error)".contains("--room")) }
    }

    /// A broadcaster killed with SIGKILL leaves its socket: `ctl` passes over (and removes) a
    /// socket nobody listens on, instead of asking which of "several" to talk to.
    @Test func aSocketNobodyListensOnIsPassedOverAndRemoved() throws {
        var template = Array("/tmp/ctl-stale-XXXXXX".utf8CString)
        let dir = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) })
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        func bound(_ name: String, listening: Bool) throws -> Int32 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = try ControlSocket.unixAddress(dir + "/" + name)
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            try #require(rc == 0)
            if listening { try #require(listen(fd, 1) == 0) }
            return fd
        }
        let live = try bound("lecture.sock", listening: true)
        defer { close(live) }
        close(try bound("dead.sock", listening: false))  // the file stays; nobody listens
        _ = FileManager.default.createFile(atPath: dir + "/notes.txt", contents: nil)
        let entries = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(entries.count == 3)
        #expect(ControlSocket.listening(in: dir, entries: entries) == ["lecture.sock"])
        #expect(!FileManager.default.fileExists(atPath: dir + "/dead.sock"))
        #expect(FileManager.default.fileExists(atPath: dir + "/lecture.sock"))
        #expect(try ControlSocket.pickOnly(in: dir, entries: ControlSocket.listening(in: dir, entries: ["lecture.sock"])) == dir + "/lecture.sock")
    }

    @Test func socketPathsAreSafeAndPerUser() {
        #expect(ControlSocket.path(label: "my room/../x", environment: ["XDG_RUNTIME_DIR": "/run/user/7"]) == "/run/user/7/screenshare/my_room_.._x.sock")
        #expect(ControlSocket.directory(environment: [:]).hasPrefix("/tmp/screenshare-"))
    }
}

/// `start` checks its flags with `validate()`, `ctl set` with `applying(_:)`: the same rule
/// refuses the same values, in the same words.
@Suite struct OneValidatorTests {
    let base = LiveSettings(config: BroadcastConfig(source: .x11(display: nil, source: .screen, drawCursor: true),
                                                    destination: Endpoint(host: "127.0.0.1", port: 5004), cname: "t"))

    @Test(arguments: [
        ([("min-bitrate", "3M")], "min-bitrate=3M: must not be above bitrate (2M)"),
        ([("keyframe-interval", "4000")], "keyframe-interval=4000: must be seconds from 0 to 3600, or none"),
        ([("fps", "5"), ("min-fps", "10")], "min-fps=10: must not be above fps (5)"),
        ([("fps", "61")], "fps=61: must be a whole number from 1 to 60"),
        ([("min-fps", "-1")], "min-fps=-1: must be from 0 to 60"),
    ])
    func ctlAndStartRefuseAlike(changes: [(String, String)], message: String) throws {
        var ctlError: SettingError?
        do { _ = try base.applying(changes) } catch let e as SettingError { ctlError = e }
        #expect(ctlError?.description == "set \(message)")
        // The same values as start's flags would give them.
        var s = base
        for (k, v) in changes {
            switch k {
            case "fps": s.fps = Int(v)!
            case "min-fps": s.minFps = Double(v)!
            case "min-bitrate": s.minBitrate = try Bitrate.parse(v)
            case "keyframe-interval": s.keyframeIntervalSeconds = Double(v)!
            default: Issue.record("unexpected key \(k)")
            }
        }
        var startError: SettingError?
        do { try s.validate() } catch let e as SettingError { startError = e }
        #expect(startError?.flagDescription == "--" + message.replacingOccurrences(of: "=", with: " ", options: [], range: message.range(of: "=")))
    }

    @Test func validSettingsPass() throws {
        try base.validate()
        _ = try base.applying([("fps", "60"), ("min-fps", "60"), ("min-bitrate", "2M"), ("keyframe-interval", "3600")])
    }
}
