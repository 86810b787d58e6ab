import MediaCore
import Basics

/// An error in a video-processing setting; the message names the bad value.
public struct VideoProcessingError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The largest picture to send: a named profile or an explicit WxH box.
public enum MaxResolution: Sendable, Equatable, CustomStringConvertible {
    case p720, p1080, p1440
    case custom(PixelSize)

    /// Parses "720p", "1080p", "1440p" or "WxH".
    public static func parse(_ text: String) throws -> MaxResolution {
        switch text.lowercased() {
        case "720p": return .p720
        case "1080p": return .p1080
        case "1440p": return .p1440
        default:
            let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
            guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w >= 2, h >= 2, w <= 16384, h <= 16384 else {
                throw VideoProcessingError("'\(text)' is not a resolution: use 720p, 1080p, 1440p or WxH (e.g. 1600x900)")
            }
            return .custom(PixelSize(width: w, height: h))
        }
    }

    /// The bounding box: (long side, short side) for profiles, literal for custom.
    public var bounds: PixelSize {
        switch self {
        case .p720: return PixelSize(width: 1280, height: 720)
        case .p1080: return PixelSize(width: 1920, height: 1080)
        case .p1440: return PixelSize(width: 2560, height: 1440)
        case .custom(let s): return s
        }
    }

    public var description: String {
        switch self {
        case .p720: return "720p"
        case .p1080: return "1080p"
        case .p1440: return "1440p"
        case .custom(let s): return "\(s)"
        }
    }
}

/// The scaling policy of DESIGN.md: keep the aspect ratio, never upscale, even dimensions.
public enum ScalingPolicy {
    /// The size to encode a `source` picture at.
    ///
    /// - A profile (720p/1080p/1440p) bounds the long side and the short side, whatever the
    ///   orientation (a portrait 1080x1920 under 720p becomes 720x1280).
    /// - A custom WxH is a literal box.
    /// - No maximum: the long side is clamped to 1920.
    /// - Never upscales; both sides are rounded down to even (minimum 2).
    public static func outputSize(source: PixelSize, max: MaxResolution?) -> PixelSize {
        let sw = Swift.max(source.width, 1), sh = Swift.max(source.height, 1)
        var boxW: Int, boxH: Int
        switch max {
        case nil:
            boxW = sw >= sh ? 1920 : Int.max
            boxH = sw >= sh ? Int.max : 1920
        case .custom(let s):
            boxW = s.width
            boxH = s.height
        case let profile?:
            let b = profile.bounds
            boxW = sw >= sh ? b.width : b.height
            boxH = sw >= sh ? b.height : b.width
        }
        // Scale factor = min(boxW/sw, boxH/sh, 1), done in integers to avoid rounding drift.
        var w = sw, h = sh
        if w > boxW {
            h = h * boxW / w
            w = boxW
        }
        if h > boxH {
            w = w * boxH / h
            h = boxH
        }
        return PixelSize(width: Swift.max(2, w & ~1), height: Swift.max(2, h & ~1))
    }
}
