/// An error in a user-supplied value; the message names the value and what is wrong.
public struct SettingsError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A bit rate in bits per second, parsed from "2M", "1600k", "2.5m", "800000".
public struct Bitrate: Sendable, Equatable, Comparable, CustomStringConvertible {
    public var bitsPerSecond: Int
    public init(bitsPerSecond: Int) { self.bitsPerSecond = bitsPerSecond }
    public init(kbps: Int) { self.bitsPerSecond = kbps * 1000 }

    public var kbps: Int { bitsPerSecond / 1000 }

    /// Parses a rate: a number with an optional suffix k/K (×1000) or m/M (×1,000,000),
    /// optionally followed by "bps" or "b". Between 10 kbit/s and 100 Mbit/s.
    public static func parse(_ text: String) throws -> Bitrate {
        var s = Substring(text.trimmingCharacters(in: .whitespaces).lowercased())
        if s.hasSuffix("bps") { s = s.dropLast(3) } else if s.hasSuffix("b") { s = s.dropLast(1) }
        var multiplier = 1.0
        if s.hasSuffix("k") { multiplier = 1_000; s = s.dropLast() } else if s.hasSuffix("m") { multiplier = 1_000_000; s = s.dropLast() }
        guard let value = Double(s), value.isFinite, value > 0 else {
            throw SettingsError("'\(text)' is not a bit rate (examples: 2M, 1600k, 800000)")
        }
        let bits = Int((value * multiplier).rounded())
        guard bits >= 10_000, bits <= 100_000_000 else {
            throw SettingsError("bit rate '\(text)' is out of range (10k to 100M)")
        }
        return Bitrate(bitsPerSecond: bits)
    }

    public static func < (a: Bitrate, b: Bitrate) -> Bool { a.bitsPerSecond < b.bitsPerSecond }

    public var description: String {
        bitsPerSecond % 1_000_000 == 0 ? "\(bitsPerSecond / 1_000_000)M" : "\(kbps)k"
    }
}

/// A UDP destination "HOST:PORT" or "[IPv6]:PORT".
public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    public static func parse(_ text: String) throws -> Endpoint {
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw SettingsError("'\(text)': missing ']' after the IPv6 address")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw SettingsError("'\(text)': expected ':PORT' after ']'") }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else {
                throw SettingsError("'\(text)' is not HOST:PORT (IPv6: [ADDR]:PORT)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw SettingsError("'\(text)': the host is empty") }
        guard let port = Int(portText), (1...65534).contains(port) else {
            throw SettingsError("'\(text)': port must be a number from 1 to 65534 (RTCP uses PORT+1)")
        }
        return Endpoint(host: String(host), port: UInt16(port))
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

import Foundation
