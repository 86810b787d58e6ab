import Dispatch
import FoundationEssentials
import MediaCore
import Basics
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Serves the control socket on its own thread until `close()`: one request per connection,
/// answered by the handler.
public final class ControlServer: Sendable {
    public let path: String
    private let fd: Int32
    private let running = Atomic<Bool>(true)
    private let handler: @Sendable (ControlRequest) -> ControlResponse
    private let done = DispatchSemaphore(value: 0)

    /// - Throws: `ControlError` naming the path when it cannot listen there, or when another
    ///   broadcaster answers on it.
    public init(path: String, handler: @escaping @Sendable (ControlRequest) -> ControlResponse) throws {
        self.path = path
        self.handler = handler
        let dir = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        // A directory made here is ours alone; one that was there (the working directory of a
        // relative --control-socket, /) keeps its mode: the socket itself is made 0600 below.
        if mkdir(dir, 0o700) == 0 { chmod(dir, 0o700) }
        var st = stat()
        guard stat(dir, &st) == 0, st.st_uid == getuid() else {
            throw ControlError("control socket directory \(dir) is not ours; pass --control-socket PATH")
        }
        // A socket left by a broadcaster that died: remove it if nobody answers there.
        if access(path, F_OK) == 0 {
            if (try? ControlSocket.request(ControlRequest(.status), socketPath: path, timeoutSeconds: 1)) != nil {
                throw ControlError("another broadcaster already listens on \(path); use another --room or --control-socket")
            }
            unlink(path)
        }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ControlError("cannot create the control socket: \(SystemError.current)") }
        var addr = try ControlSocket.unixAddress(path)
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        umask(old)
        guard rc == 0, listen(fd, 8) == 0 else {
            let message = SystemError.current
            Glibc.close(fd)
            throw ControlError("cannot listen on control socket \(path): \(message)")
        }
        chmod(path, 0o600)
        startThread(named: "screenshare-control") { [self] in serve() }
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
        let line = ControlSocket.readLine(client, limit: ControlProtocol.maxRequestBytes)
        // A client that sent nothing (it only looked whether anyone listens: `ctl`) gets nothing.
        guard !line.isEmpty else { return }
        let response = Self.respond(to: line, handler)
        guard var out = try? ControlCoding.encode(response) else { return }
        out.append(0x0A)
        // MSG_NOSIGNAL: a client gone before the answer is an EPIPE here, not a SIGPIPE that
        // ends the broadcast.
        _ = out.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The answer to one request line: the handler's, or an error naming what is wrong with it.
    static func respond(to line: Data, _ handler: (ControlRequest) -> ControlResponse) -> ControlResponse {
        guard let request = try? ControlCoding.decoder.decode(ControlRequest.self, from: line) else {
            return .failure("the request is not one line of JSON with a \"cmd\" (\(line.count) bytes)")
        }
        if case .failure(let error) = request.command { return .failure(error.description) }
        return handler(request)
    }

    /// Stops serving and removes the socket file.
    public func close() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        done.wait()
        Glibc.close(fd)
        unlink(path)
    }
}
