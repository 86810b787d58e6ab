import Events
import Foundation
import Testing
import TestSupport
@testable import Control
import Synchronization

/// The ctl protocol (version 1) as bytes: what `ctl` sends, what a broadcaster answers, and
/// what it answers to lines that are not requests.
@Suite struct ControlProtocolTests {
    func respond(_ line: String) -> ControlResponse {
        ControlServer.respond(to: Data(line.utf8)) { request in
            ControlResponse(settings: ["cmd": .string(request.cmd), "changes": .int(request.set?.count ?? 0)])
        }
    }

    @Test func requestsEncodeAsVersionOneLines() throws {
        let set = ControlRequest(.set, set: [SettingChange("bitrate", "1M"), SettingChange("fps", "30")])
        #expect(String(decoding: try ControlCoding.encode(set), as: UTF8.self)
                == #"{"cmd":"set","set":[["bitrate","1M"],["fps","30"]],"v":1}"#)
        #expect(String(decoding: try ControlCoding.encode(ControlRequest(.pause)), as: UTF8.self) == #"{"cmd":"pause","v":1}"#)
        #expect(String(decoding: try ControlCoding.encode(ControlRequest(.invite, revoke: true)), as: UTF8.self)
                == #"{"cmd":"invite","revoke":true,"v":1}"#)
        #expect(ControlResponse(link: "http://h:7600/class#k=egw9EVN2z3G").jsonText == #"{"link":"http:\/\/h:7600\/class#k=egw9EVN2z3G","ok":true,"v":1}"#
                || ControlResponse(link: "http://h:7600/class#k=egw9EVN2z3G").jsonText == #"{"link":"http://h:7600/class#k=egw9EVN2z3G","ok":true,"v":1}"#)
    }

    @Test func responsesEncodeWithSortedKeysAndNoAbsentFields() {
        #expect(ControlResponse(paused: true).jsonText == #"{"ok":true,"paused":true,"v":1}"#)
        #expect(ControlResponse.failure("no").jsonText == #"{"error":"no","ok":false,"v":1}"#)
        let status = ControlResponse(settings: ["fps": 15, "max_resolution": .null], stats: ["uptime_s": 1.5])
        #expect(status.jsonText == #"{"ok":true,"settings":{"fps":15,"max_resolution":null},"stats":{"uptime_s":1.5},"v":1}"#)
    }

    @Test func responsesDecodeBack() throws {
        let status = ControlResponse(settings: ["fps": 15, "content": "detail", "paused": false, "min_fps": 1.5], stats: ["x": .null])
        let back = try ControlCoding.decoder.decode(ControlResponse.self, from: Data(status.jsonText.utf8))
        #expect(back == status)
    }

    /// Requests as sent before the protocol had a version (no "v") are version 1.
    @Test func unversionedRequestsAreVersionOne() {
        let r = respond(#"{"cmd":"set","set":[["fps","5"]]}"#)
        #expect(r.ok && r.settings?["cmd"] == "set" && r.settings?["changes"] == 1)
        #expect(respond(#"{"cmd":"status"}"#).ok)
    }

    @Test(arguments: [
        (#"{"cmd":"louder"}"#, "unknown command 'louder'"),
        (#"{"v":2,"cmd":"pause"}"#, "version 2 is not supported"),
        (#"{"cmd":"set"}"#, "[[KEY, VALUE], ...]"),
        (#"{"cmd":"set","set":[]}"#, "[[KEY, VALUE], ...]"),
        (#"{"cmd":"set","set":[["fps"]]}"#, "not one line of JSON"),
        (#"{"cmd":"set","set":[["fps","5","6"]]}"#, "not one line of JSON"),
        (#"{"cmd":5}"#, "not one line of JSON"),
        ("pause", "not one line of JSON"),
        ("", "not one line of JSON"),
    ])
    func badRequestsGetAnErrorNamingWhy(line: String, mention: String) {
        let r = respond(line)
        #expect(!r.ok)
        #expect(r.error?.contains(mention) == true, "\(r.error ?? "nil")")
    }

    /// Random and mutated lines never crash the server; each gets an answer.
    @Test func mutatedRequestsAlwaysGetAnAnswer() {
        let seeds = [#"{"v":1,"cmd":"set","set":[["bitrate","1M"],["fps","30"]]}"#, #"{"cmd":"status"}"#]
        var rng = SplitMix64(seed: 0x5EED)
        func next() -> UInt64 { rng.next() }
        var answered = 0
        for i in 0..<20_000 {
            var bytes = Array(seeds[i % seeds.count].utf8)
            for _ in 0..<(1 + Int(next() % 4)) {
                let at = Int(next() % UInt64(bytes.count))
                switch next() % 3 {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: next())
                case 1: bytes.remove(at: at)
                default: bytes.insert(UInt8(truncatingIfNeeded: next()), at: at)
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            let r = ControlServer.respond(to: Data(bytes)) { _ in ControlResponse() }
            if r.ok || r.error != nil { answered += 1 }
        }
        #expect(answered == 20_000)
    }
}

/// Where the control socket lives: a directory the server makes is made private (0700); one
/// that was there, such as the working directory of a relative `--control-socket`, keeps its mode.
@Suite struct ControlSocketDirectoryTests {
    func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : 0
    }

    /// A client that goes before the answer (or only looks whether anyone listens, as `ctl`
    /// does with each socket) costs the broadcast nothing: no SIGPIPE (which would end this
    /// process), and the next request is answered.
    @Test func aClientGoneBeforeTheAnswerDoesNotEndTheBroadcast() throws {
        let base = "/tmp/screenshare-ctl-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let served = Mutex(0)
        let server = try ControlServer(path: "\(base)/a.sock", handler: { _ in
            served.withLock { $0 += 1 }
            return ControlResponse()
        })
        defer { server.close() }
        func connected() throws -> Int32 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = try ControlSocket.unixAddress("\(base)/a.sock")
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            try #require(rc == 0)
            return fd
        }
        close(try connected())  // looked and left
        let asked = try connected()  // asked and left before the answer
        let line = Array(#"{"cmd":"status","v":1}"#.utf8) + [0x0A]
        _ = line.withUnsafeBytes { send(asked, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var linger = linger(l_onoff: 1, l_linger: 0)  // a reset, not a clean close
        setsockopt(asked, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(asked)
        for _ in 0..<3 {
            let answer = try ControlSocket.request(ControlRequest(.status), socketPath: "\(base)/a.sock")
            #expect(answer.ok)
        }
        #expect(served.withLock { $0 } >= 3)
    }

    @Test func onlyADirectoryTheServerMakesIsMadePrivate() throws {
        let base = "/tmp/screenshare-ctl-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        #expect(mkdir(base, 0o755) == 0)
        chmod(base, 0o755)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let handler: @Sendable (ControlRequest) -> ControlResponse = { _ in ControlResponse() }
        let given = try ControlServer(path: "\(base)/a.sock", handler: handler)
        defer { given.close() }
        #expect(mode(base) == 0o755)
        #expect(mode("\(base)/a.sock") == 0o600)
        let made = try ControlServer(path: "\(base)/new/b.sock", handler: handler)
        defer { made.close() }
        #expect(mode("\(base)/new") == 0o700)
        #expect(mode("\(base)/new/b.sock") == 0o600)
    }
}
