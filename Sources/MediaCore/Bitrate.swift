import FoundationEssentials
import Glibc
import Basics

/// A bit rate in bits per second, parsed from "2M", "1600k", "2.5m", "800000".
public struct Bitrate: Sendable, Equatable, Comparable, CustomStringConvertible {
    public var bitsPerSecond: Int
    public init(bitsPerSecond: Int) { self.bitsPerSecond = bitsPerSecond }
    public init(kbps: Int) { self.bitsPerSecond = kbps * 1000 }

    public var kbps: Int { bitsPerSecond / 1000 }

    /// Parses a rate: a number with an optional suffix k/K (×1000) or m/M (×1,000,000),
    /// optionally followed by "bps" or "b". Between 10 kbit/s and 100 Mbit/s.
    public static func parse(_ text: String) throws -> Bitrate {
        var s = Substring(text.trimmed().lowercased())
        if s.hasSuffix("bps") { s = s.dropLast(3) } else if s.hasSuffix("b") { s = s.dropLast(1) }
        var multiplier = 1.0
        if s.hasSuffix("k") { multiplier = 1_000; s = s.dropLast() } else if s.hasSuffix("m") { multiplier = 1_000_000; s = s.dropLast() }
        guard let value = Double(s), value.isFinite, value > 0 else {
            throw SettingError("'\(text)' is not a bit rate (examples: 2M, 1600k, 800000)")
        }
        let bits = Int((value * multiplier).rounded())
        guard range.contains(bits) else {
            throw SettingError("bit rate '\(text)' is out of range (10k to 100M)")
        }
        return Bitrate(bitsPerSecond: bits)
    }

    /// The rates accepted: 10 kbit/s to 100 Mbit/s.
    public static let range = 10_000...100_000_000

    public static func < (a: Bitrate, b: Bitrate) -> Bool { a.bitsPerSecond < b.bitsPerSecond }

    public var description: String {
        bitsPerSecond % 1_000_000 == 0 ? "\(bitsPerSecond / 1_000_000)M" : "\(kbps)k"
    }
}
