#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 address and port, the relay's name for a peer's flow.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address in host byte order (127.0.0.1 is 0x7F000001).
    public var ip: UInt32
    public var port: UInt16
    public init(ip: UInt32, port: UInt16) {
        self.ip = ip
        self.port = port
    }
    public var description: String {
        "\(ip >> 24).\((ip >> 16) & 0xFF).\((ip >> 8) & 0xFF).\(ip & 0xFF):\(port)"
    }
}

extension PeerAddress {
    public init(_ a: sockaddr_in) { self.init(ip: UInt32(bigEndian: a.sin_addr.s_addr), port: UInt16(bigEndian: a.sin_port)) }
    public var sockaddr: sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = ip.bigEndian
        return a
    }
}
