import ArgumentParser
import Congestion
import FoundationEssentials
import Glibc
import AudioIO
import MediaCore
import Basics
import ScreenCapture
import Sender
import Transport
import VP8Codec
import VideoProcessing
import WebRTC

// Flag values, parsed once, by the parser of their own type.
//
// Enumerations are `ExpressibleByArgument` (the parser lists their values in help and errors).
// Values whose parser can say *why* a text is wrong (a bit rate, an endpoint, a geometry) are
// read with `@Option(transform: Parse.…)` instead: ExpressibleByArgument's initializer is
// failable and would drop that reason ("'fast' is not a bit rate (examples: 2M, 1600k)").

extension ContentPreference: ExpressibleByArgument {}
extension FECPolicy.Mode: ExpressibleByArgument {}
extension RawPixelFormat: ExpressibleByArgument {}

/// The parsers `@Option(transform:)` uses.
enum Parse {
    static func bitrate(_ text: String) throws -> Bitrate { try Bitrate.parse(text) }
    static func endpoint(_ text: String) throws -> Endpoint { try Endpoint.parse(text) }
    static func resolution(_ text: String) throws -> MaxResolution { try MaxResolution.parse(text) }
    static func region(_ text: String) throws -> PixelRect { try CaptureSourceSpec.parseRegion(text) }
    static func app(_ text: String) throws -> AppMatcher { try AppMatcher(text) }

    /// A frame size, WxH.
    static func size(_ text: String) throws -> PixelSize {
        let p = text.lowercased().split(separator: "x")
        guard p.count == 2, let w = Int(p[0]), let h = Int(p[1]), w > 0, h > 0 else {
            throw SettingError("'\(text)': expected WxH, e.g. 1280x720")
        }
        return PixelSize(width: w, height: h)
    }

    /// Room names: 1–64 bytes, no spaces or control characters (the relay checks the same).
    static func room(_ name: String) throws -> String {
        guard !name.isEmpty, name.utf8.count <= 64,
              name.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x21 && $0.value != 0x7F }) else {
            let shown = name.count > 40 ? String(name.prefix(39)) + "…" : name
            throw SettingError("'\(shown)': a room name is 1 to 64 characters without spaces")
        }
        return name
    }

    /// A duration: seconds, or a number with s, m, h or d (90s, 45m, 12h, 7d); more than 0.
    static func duration(_ text: String) throws -> Double {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var number = Substring(text), unit = 1.0
        if let last = text.last, let u = units[last] {
            number = text.dropLast()
            unit = u
        }
        guard let value = Double(number), value > 0, value.isFinite, value * unit <= 366 * 86_400 else {
            throw SettingError("'\(text)': expected a duration up to a year, e.g. 90s, 45m, 12h or 7d")
        }
        return value * unit
    }

    /// A room token as given: one line of printable ASCII (a JWT), not checked here (the relay does).
    static func token(_ text: String) throws -> String {
        let t = text.trimmed()
        guard !t.isEmpty, t.utf8.count <= 4096, t.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw SettingError("a token is one line of printable ASCII up to 4096 bytes, as `screenshare token` prints it")
        }
        return t
    }

    /// The relay's certificate fingerprint as `serve` prints it: `sha256:` and 64 hex digits.
    static func fingerprint(_ text: String) throws -> [UInt8] {
        guard let f = DTLSCertificate.parseFingerprint(text.trimmed()) else {
            throw SettingError("'\(text)': expected sha256: and 64 hex digits, as `serve` prints it in its started event")
        }
        return f
    }

    /// A window: an id or part of its title, not blank.
    static func window(_ text: String) throws -> String {
        guard !text.allSatisfy({ $0 == " " }) else { throw SettingError("give a window id or part of its title") }
        return text
    }
}

/// `--listen`: ADDR:PORT, or :PORT for all addresses (port 0: any free port, reported in the
/// `started` event); the text as given is kept for messages.
struct ListenAddress: CustomStringConvertible, Sendable {
    let text: String
    let endpoint: Endpoint
    var host: String { endpoint.host }
    var port: UInt16 { endpoint.port }
    var description: String { text }

    init(_ text: String) throws {
        self.text = text
        endpoint = try Endpoint.parse(text.hasPrefix(":") ? "0.0.0.0" + text : text, anyPort: true)
    }

    /// All addresses, port 7600.
    static let `default` = try! ListenAddress("0.0.0.0:7600")
}
