import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The local control channel of a running `start`: a UNIX stream socket (mode 0600, in a
/// 0700 directory of this user's), one JSON request line in, one JSON response line out.
///
/// Requests: `{"cmd":"pause"}`, `{"cmd":"resume"}`, `{"cmd":"stop"}`, `{"cmd":"status"}`,
/// `{"cmd":"set","set":[["bitrate","1M"],["fps","30"]]}`. Responses: `{"ok":true,…}` or
/// `{"ok":false,"error":"…"}`.
public enum ControlSocket {
    /// Where broadcasters put their sockets: $XDG_RUNTIME_DIR/screenshare, else
    /// /tmp/screenshare-UID.
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { return xdg + "/screenshare" }
        return "/tmp/screenshare-\(getuid())"
    }

    /// The socket path of a broadcast labelled `label` (room name, or "pid-N" in plain mode).
    public static func path(label: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let safe = String(label.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." ? $0 : "_" })
        return directory(environment: environment) + "/" + safe + ".sock"
    }

    /// Picks the socket to talk to when none was named: the only one there is.
    /// - Throws: `SettingsError` saying there are none or several (and which).
    public static func pickOnly(in directory: String, entries: [String]) throws -> String {
        let sockets = entries.filter { $0.hasSuffix(".sock") }.sorted()
        switch sockets.count {
        case 0: throw SettingsError("no screenshare broadcaster is running for this user (no socket in \(directory))")
        case 1: return directory + "/" + sockets[0]
        default:
            let names = sockets.map { String($0.dropLast(5)) }.joined(separator: ", ")
            throw SettingsError("several broadcasters are running (\(names)); choose one with --room NAME or --socket PATH")
        }
    }

    /// Sends one request and returns the response object.
    /// - Throws: `SettingsError` when the socket cannot be reached or answers nonsense.
    public static func request(_ request: [String: Any], socketPath: String, timeoutSeconds: Int = 5) throws -> [String: Any] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SettingsError("cannot create a UNIX socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = try unixAddress(socketPath)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else {
            throw SettingsError("cannot reach the broadcaster at \(socketPath): \(String(cString: strerror(errno))) (is it still running?)")
        }
        var line = try JSONSerialization.data(withJSONObject: request)
        line.append(0x0A)
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        var response = Data()
        var buf = [UInt8](repeating: 0, count: 4096)
        while !response.contains(0x0A) {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            response.append(contentsOf: buf[0..<n])
        }
        guard let obj = try? JSONSerialization.jsonObject(with: response) as? [String: Any] else {
            throw SettingsError("the broadcaster at \(socketPath) sent no answer")
        }
        return obj
    }

    static func unixAddress(_ path: String) throws -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw SettingsError("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }
}

/// Serves the control socket on its own thread until `close()`.
final class ControlServer: @unchecked Sendable {
    // `fd` is set once in init and closed once in close(); `running` is atomic.
    let path: String
    private let fd: Int32
    private let running = Atomic<Bool>(true)
    private let handler: @Sendable ([String: Any]) -> [String: Any]
    private let done = DispatchSemaphore(value: 0)

    /// - Throws: `SettingsError` naming the path when it cannot listen there.
    init(path: String, handler: @escaping @Sendable ([String: Any]) -> [String: Any]) throws {
        self.path = path
        self.handler = handler
        let dir = (path as NSString).deletingLastPathComponent
        mkdir(dir, 0o700)
        var st = stat()
        guard stat(dir, &st) == 0, st.st_uid == getuid() else {
            throw SettingsError("control socket directory \(dir) is not ours; pass --control-socket PATH")
        }
        chmod(dir, 0o700)
        // A socket left by a broadcaster that died: remove it if nobody answers there.
        if access(path, F_OK) == 0 {
            if (try? ControlSocket.request(["cmd": "status"], socketPath: path, timeoutSeconds: 1)) != nil {
                throw SettingsError("another broadcaster already listens on \(path); use another --room or --control-socket")
            }
            unlink(path)
        }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SettingsError("cannot create the control socket: \(String(cString: strerror(errno)))") }
        var addr = try ControlSocket.unixAddress(path)
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        umask(old)
        guard rc == 0, listen(fd, 8) == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(fd)
            throw SettingsError("cannot listen on control socket \(path): \(message)")
        }
        chmod(path, 0o600)
        let t = Thread { [self] in serve() }
        t.name = "screenshare-control"
        t.start()
    }

    private func serve() {
        defer { done.signal() }
        while running.load(ordering: .relaxed) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 200) == 1 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            handle(client)
            Glibc.close(client)
        }
    }

    private func handle(_ client: Int32) {
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var data = Data()
        var buf = [UInt8](repeating: 0, count: 4096)
        while !data.contains(0x0A) && data.count < 65_536 {
            let n = read(client, &buf, buf.count)
            if n <= 0 { break }
            data.append(contentsOf: buf[0..<n])
        }
        let response: [String: Any]
        if let line = data.split(separator: 0x0A).first,
           let obj = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] {
            response = handler(obj)
        } else {
            response = ["ok": false, "error": "the request is not one line of JSON (\(data.count) bytes)"]
        }
        guard var out = try? JSONSerialization.data(withJSONObject: response, options: [.sortedKeys]) else { return }
        out.append(0x0A)
        _ = out.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
    }

    /// Stops serving and removes the socket file.
    func close() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        done.wait()
        Glibc.close(fd)
        unlink(path)
    }
}

extension JSONValue {
    /// As a Foundation JSON object (for JSONSerialization).
    var foundationValue: Any {
        switch self {
        case .string(let s): return s
        case .int(let i): return i
        case .double(let d): return d
        case .bool(let b): return b
        case .object(let o): return o.mapValues(\.foundationValue)
        case .array(let a): return a.map(\.foundationValue)
        case .null: return NSNull()
        }
    }
}
