import MediaCore
import Basics

/// A UDP destination "HOST:PORT" or "[IPv6]:PORT".
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// - Parameter anyPort: also take port 0 (a listener: any free port, which the system picks).
    public static func parse(_ text: String, anyPort: Bool = false) throws -> Endpoint {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw SettingError("'\(text)': missing ']' after the IPv6 address")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw SettingError("'\(text)': expected ':PORT' after ']'") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else {
                throw SettingError("'\(text)' is not HOST:PORT (IPv6: [ADDR]:PORT)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw SettingError("'\(text)': the host is empty") }
        guard let port = Int(portText), ((anyPort ? 0 : 1)...65534).contains(port) else {
            throw SettingError("'\(text)': port must be a number from \(anyPort ? "0 (any free port)" : "1") to 65534 (RTCP uses PORT+1)")
        }
        return Endpoint(host: String(host), port: UInt16(port))
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

import FoundationEssentials
import Glibc
