import FoundationEssentials
import MediaCore
import Basics
#if canImport(Glibc)
import Glibc
#endif

/// Where the control sockets of running broadcasts are, and the client side of the protocol
/// (``ControlProtocol``): the socket is a UNIX stream socket, mode 0600, in a 0700 directory
/// of this user's.
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
    /// - Throws: `ControlError` saying there are none or several (and which).
    public static func pickOnly(in directory: String, entries: [String]) throws -> String {
        let sockets = entries.filter { $0.hasSuffix(".sock") }.sorted()
        switch sockets.count {
        case 0: throw ControlError("no screenshare broadcaster is running for this user (no socket in \(directory))")
        case 1: return directory + "/" + sockets[0]
        default:
            let names = sockets.map { String($0.dropLast(5)) }.joined(separator: ", ")
            throw ControlError("several broadcasters are running (\(names)); choose one with --room NAME or --socket PATH")
        }
    }

    /// The sockets in `directory` that a broadcaster listens on. A socket nobody listens on
    /// (`ECONNREFUSED`: its broadcaster died without removing it, e.g. killed) is removed, as
    /// ssh-agent's and tmux's clients do, so that a crash does not leave `ctl` asking which of
    /// several broadcasters to talk to.
    public static func listening(in directory: String, entries: [String]) -> [String] {
        entries.filter { $0.hasSuffix(".sock") }.filter { name in
            let path = directory + "/" + name
            guard isStale(path) else { return true }
            unlink(path)
            return false
        }
    }

    /// True when `path` is a socket that refuses connections: nobody listens there any more.
    static func isStale(_ path: String) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK, st.st_uid == getuid(),
              var addr = try? unixAddress(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        return rc != 0 && errno == ECONNREFUSED
    }

    /// Sends one request and returns the response.
    /// - Throws: `ControlError` when the socket cannot be reached or answers nonsense.
    public static func request(_ request: ControlRequest, socketPath: String, timeoutSeconds: Int = 5) throws -> ControlResponse {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ControlError("cannot create a UNIX socket: \(SystemError.current)") }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = try unixAddress(socketPath)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else {
            throw ControlError("cannot reach the broadcaster at \(socketPath): \(SystemError.current) (is it still running?)")
        }
        var line = try ControlCoding.encode(request)
        line.append(0x0A)
        _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let response = readLine(fd, limit: ControlProtocol.maxRequestBytes)
        guard let answer = try? ControlCoding.decoder.decode(ControlResponse.self, from: response) else {
            throw ControlError("the broadcaster at \(socketPath) sent no answer")
        }
        return answer
    }

    /// Reads up to the first newline (or `limit` bytes, or end of stream); the newline is left out.
    static func readLine(_ fd: Int32, limit: Int) -> Data {
        var data = Data()
        var buf = [UInt8](repeating: 0, count: 4096)
        while !data.contains(0x0A) && data.count < limit {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            data.append(contentsOf: buf[0..<n])
        }
        if let newline = data.firstIndex(of: 0x0A) { data = data[data.startIndex..<newline] }
        return Data(data)
    }

    static func unixAddress(_ path: String) throws -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw ControlError("socket path too long: \(path)") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }
}

/// The JSON coding of the protocol: compact, sorted keys.
enum ControlCoding {
    static let decoder = JSONDecoder()
    static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }
}
