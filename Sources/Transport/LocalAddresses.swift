#if canImport(Glibc)
import Glibc
#endif
import NetworkAddress

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
