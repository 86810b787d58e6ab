#if canImport(Glibc)
import Glibc
#endif
import CSocketBatch

/// A UDP socket bound to a local port (IPv4 any address) that receives from anyone and
/// replies to a learned address: the viewer's RTP and RTCP ports.
public final class UDPListener: Sendable {
    public let fd: Int32
    public let port: UInt16

    /// - Parameters:
    ///   - host: the local IPv4 address to bind (nil: all).
    ///   - port: the port (0: any free one; `port` then tells which).
    /// - Throws: `NetworkError` naming the port when it cannot be bound (in use?).
    public init(host: String? = nil, port: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NetworkError.errno("socket()") }
        // No SO_REUSEADDR: for UDP it would let a second receiver or relay bind the same port
        // silently and steal half the packets; UDP has no TIME_WAIT to wait out anyway.
        var rcvbuf: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = INADDR_ANY
        if let host {
            do { addr.sin_addr = try Self.resolve(host).sin_addr } catch { close(fd); throw error }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let e = NetworkError.errno("cannot listen on UDP \(host ?? "port") \(port) (in use by another receiver or relay?)")
            close(fd)
            throw e
        }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.port = UInt16(bigEndian: bound.sin_port)
    }

    /// Resolves an IPv4 host name or address to a socket address (port 0).
    public static func resolve(_ host: String, port: UInt16 = 0) throws -> sockaddr_in {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &result)
        guard rc == 0, let info = result, let a = info.pointee.ai_addr else {
            throw NetworkError("cannot resolve '\(host)' to an IPv4 address: \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(result) }
        var out = a.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
        out.sin_port = port.bigEndian
        return out
    }

    deinit { close(fd) }

    /// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`), read back with
    /// `ReceiveBatch.arrivalWallNanos`: when a packet really arrived, not when a busy thread got
    /// to it. Whether the kernel agreed.
    @discardableResult
    public func stampArrivals() -> Bool { ss_enable_timestamps(fd) == 0 }

    /// Asks for kernel socket buffers of these sizes (bytes): with `SO_RCVBUFFORCE`/
    /// `SO_SNDBUFFORCE` when the process may (CAP_NET_ADMIN), else within
    /// `net.core.rmem_max`/`wmem_max`. Returns what the kernel granted (Linux reports twice
    /// the size asked for: the other half is its bookkeeping).
    @discardableResult
    public func setBufferSizes(receive: Int32, send: Int32) -> (receive: Int, send: Int) {
        func set(_ force: Int32, _ plain: Int32, _ size: Int32) -> Int {
            var v = size
            let len = socklen_t(MemoryLayout<Int32>.size)
            if setsockopt(fd, SOL_SOCKET, force, &v, len) != 0 { setsockopt(fd, SOL_SOCKET, plain, &v, len) }
            var got: Int32 = 0
            var gotLen = len
            getsockopt(fd, SOL_SOCKET, plain, &got, &gotLen)
            return Int(got)
        }
        return (set(SO_RCVBUFFORCE, SO_RCVBUF, receive), set(SO_SNDBUFFORCE, SO_SNDBUF, send))
    }

    /// Reads one waiting datagram without blocking: its size (0 when none), and its source.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, from source: inout sockaddr_in) -> Int {
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = withUnsafeMutablePointer(to: &source) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT), $0, &len) }
        }
        return max(n, 0)
    }

    /// Sends one datagram to `destination`.
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, to destination: sockaddr_in) -> Bool {
        var d = destination
        let n = withUnsafePointer(to: &d) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return n == bytes.count
    }
}
