#if canImport(Glibc)
import Glibc
#endif

/// A connected UDP socket used from the media threads.
///
/// The media path sends with a plain `send(2)` from the encoder thread, straight out of the
/// packetizer's reused buffer: no allocation, no copy, no thread hop per packet. Being
/// connected, the socket also reports ICMP "port unreachable" as `ECONNREFUSED` on a later
/// send, which is counted, not fatal (a receiver may start later).
public final class UDPSocket: Sendable {
    /// The socket; the kernel serialises concurrent send/recv on it.
    public let fd: Int32
    public let remote: Endpoint
    /// The local port bound (the one asked for, or the one the system chose).
    public let localPort: UInt16

    /// Resolves `remote`, opens a socket of its family, binds it to `localPort` (0: any) and
    /// connects it.
    public init(connectTo remote: Endpoint, localPort: UInt16 = 0) throws {
        self.remote = remote
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(remote.host, String(remote.port), &hints, &result)
        guard rc == 0, let info = result else {
            throw NetworkError("cannot resolve '\(remote.host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        let family = info.pointee.ai_family
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetworkError.errno("socket()") }
        do {
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var sndbuf: Int32 = 1 << 20
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, socklen_t(MemoryLayout<Int32>.size))
            if localPort != 0 { try Self.bind(fd, family: family, port: localPort) }
            guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
                throw NetworkError.errno("cannot reach \(remote)")
            }
            var storage = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
            }
            self.localPort = Self.port(of: storage)
            self.fd = fd
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    private static func bind(_ fd: Int32, family: Int32, port: UInt16) throws {
        var storage = sockaddr_storage()
        let len: socklen_t
        if family == AF_INET6 {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6)
                    $0.pointee.sin6_port = port.bigEndian
                    $0.pointee.sin6_addr = in6addr_any
                }
            }
            len = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET)
                    $0.pointee.sin_port = port.bigEndian
                    $0.pointee.sin_addr.s_addr = INADDR_ANY
                }
            }
            len = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, len) }
        }
        guard rc == 0 else { throw NetworkError.errno("cannot bind local UDP port \(port)") }
    }

    private static func port(of storage: sockaddr_storage) -> UInt16 {
        var s = storage
        let family = Int32(s.ss_family)
        return withUnsafePointer(to: &s) { p in
            if family == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Sends one datagram. Returns 0 on success or the errno (ECONNREFUSED when the peer's
    /// port is closed, ENOBUFS/EAGAIN when the queue is full).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        return n < 0 ? errno : 0
    }

    /// Waits up to `timeoutMillis` for a datagram and copies it into `buffer`.
    /// Returns the byte count, 0 on timeout, or -errno.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, timeoutMillis: Int32) -> Int {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, timeoutMillis)
        if ready <= 0 { return ready == 0 ? 0 : -Int(errno) }
        let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
        return n < 0 ? -Int(errno) : n
    }
}
