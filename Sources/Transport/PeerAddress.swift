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

/// The addresses viewers can use to reach this machine: its non-loopback IPv4 addresses.
public func localIPv4Addresses() -> [String] {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return [] }
    defer { freeifaddrs(list) }
    var out: [String] = []
    var p = list
    while let i = p {
        defer { p = i.pointee.ifa_next }
        guard let a = i.pointee.ifa_addr, a.pointee.sa_family == sa_family_t(AF_INET) else { continue }
        let sin = a.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
        let ip = UInt32(bigEndian: sin.sin_addr.s_addr)
        guard ip >> 24 != 127 else { continue }
        out.append(PeerAddress(ip: ip, port: 0).description.dropLast(2).description)
    }
    return out
}
