import MediaCore
import Basics
import ScreenCapture
import VP8Codec
import VideoProcessing
import Events
import Transport

/// The settings of a running broadcast that `screenshare ctl set` may change, and pause.
/// Pure: parsing and applying changes is tested without a broadcast.
public struct LiveSettings: Sendable, Equatable {
    public var fps: Int
    public var minFps: Double
    public var bitrate: Bitrate
    public var minBitrate: Bitrate?
    public var maxResolution: MaxResolution?
    public var content: ContentPreference
    public var keyframeIntervalSeconds: Double?
    /// The capture source (X11 sources only can be switched while running).
    public var source: VideoSource
    public var paused = false

    public init(config: BroadcastConfig) {
        fps = config.fps
        minFps = config.minFps
        bitrate = config.bitrate
        minBitrate = config.minBitrate
        maxResolution = config.maxResolution
        content = config.content
        keyframeIntervalSeconds = config.keyframeIntervalSeconds
        source = config.source
    }

    /// The settings as given (checked by ``validate()`` before use).
    public init(fps: Int, minFps: Double, bitrate: Bitrate, minBitrate: Bitrate?, maxResolution: MaxResolution?,
                content: ContentPreference, keyframeIntervalSeconds: Double?, source: VideoSource) {
        self.fps = fps
        self.minFps = minFps
        self.bitrate = bitrate
        self.minBitrate = minBitrate
        self.maxResolution = maxResolution
        self.content = content
        self.keyframeIntervalSeconds = keyframeIntervalSeconds
        self.source = source
    }

    /// The keys `set` takes, with what each expects (for errors and `ctl --help`); each is
    /// also the name of `start`'s flag.
    public static let keys: [(String, String)] = [
        ("fps", "1-60"), ("min-fps", "0-fps"), ("bitrate", "e.g. 2M, 1600k"), ("min-bitrate", "e.g. 300k"),
        ("max-resolution", "720p, 1080p, 1440p, WxH or none"), ("content", "detail or motion"),
        ("keyframe-interval", "seconds, or none"), ("source", "screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE"),
    ]

    /// Most seconds between periodic keyframes.
    public static let maxKeyframeInterval = 3600.0

    /// The one check of a whole set of settings, for `start`'s flags and `ctl set` alike: each
    /// value in its range, and the minimums not above what they are the minimum of.
    /// - Throws: `SettingError` naming the first setting that is wrong.
    public func validate() throws {
        func bad(_ key: String, _ value: String, _ why: String) -> SettingError { SettingError(key: key, value: value, reason: why) }
        guard (1...60).contains(fps) else { throw bad("fps", "\(fps)", "must be a whole number from 1 to 60") }
        guard minFps >= 0, minFps <= 60 else { throw bad("min-fps", Self.text(minFps), "must be from 0 to 60") }
        guard minFps <= Double(fps) else { throw bad("min-fps", Self.text(minFps), "must not be above fps (\(fps))") }
        for (key, rate) in [("bitrate", bitrate), ("min-bitrate", minBitrate)] {
            guard let rate else { continue }
            guard Bitrate.range.contains(rate.bitsPerSecond) else { throw bad(key, "\(rate)", "must be from 10k to 100M") }
        }
        if let min = minBitrate, min > bitrate { throw bad("min-bitrate", "\(min)", "must not be above bitrate (\(bitrate))") }
        if let k = keyframeIntervalSeconds, !(k > 0 && k <= Self.maxKeyframeInterval) {
            throw bad("keyframe-interval", Self.text(k), "must be seconds from 0 to 3600, or none")
        }
    }

    /// A number as a user typed it: 5, not 5.0.
    static func text(_ v: Double) -> String { cFormat("%g", v) }

    /// Returns the settings with `changes` (KEY → VALUE text) applied, all or nothing, checked
    /// by ``validate()``.
    /// - Throws: `SettingError` naming the key and the value that is wrong.
    public func applying(_ changes: [(String, String)]) throws -> LiveSettings {
        var s = self
        guard !changes.isEmpty else {
            throw SettingError(key: "", value: "", reason: "nothing to set; keys: \(Self.keys.map(\.0).joined(separator: ", "))")
        }
        for (key, value) in changes {
            func bad(_ why: String) -> SettingError { SettingError(key: key, value: value, reason: why) }
            func parsed<T>(_ parse: (String) throws -> T) throws -> T {
                do { return try parse(value) } catch { throw bad("\(error)") }
            }
            switch key {
            case "fps":
                guard let v = Int(value) else { throw bad("must be a whole number from 1 to 60") }
                s.fps = v
            case "min-fps":
                guard let v = Double(value) else { throw bad("must be from 0 to 60") }
                s.minFps = v
            case "bitrate":
                s.bitrate = try parsed(Bitrate.parse)
            case "min-bitrate":
                s.minBitrate = value == "none" ? nil : try parsed(Bitrate.parse)
            case "max-resolution":
                s.maxResolution = value == "none" ? nil : try parsed(MaxResolution.parse)
            case "content":
                guard let c = ContentPreference(rawValue: value) else { throw bad("use detail or motion") }
                s.content = c
            case "keyframe-interval":
                if value == "none" { s.keyframeIntervalSeconds = nil } else {
                    guard let v = Double(value) else { throw bad("must be seconds from 0 to 3600, or none") }
                    s.keyframeIntervalSeconds = v
                }
            case "source":
                guard case .x11(let display, _, let cursor) = s.source else {
                    throw bad("the source can be switched only when capturing an X11 screen (not with --input, nor through the portal: its dialog chooses)")
                }
                s.source = .x11(display: display, source: try Self.parseSource(value, key: key), drawCursor: cursor)
            default:
                throw SettingError(key: key, value: value, reason: "unknown setting; keys: \(Self.keys.map(\.0).joined(separator: ", "))")
            }
        }
        try s.validate()
        return s
    }

    static func parseSource(_ value: String, key: String) throws -> CaptureSourceSpec {
        if value == "screen" { return .screen }
        let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[1].isEmpty else {
            throw SettingError(key: key, value: value, reason: "use screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE")
        }
        switch parts[0] {
        case "region":
            do { return .region(try CaptureSourceSpec.parseRegion(parts[1])) } catch { throw SettingError(key: key, value: value, reason: "\(error)") }
        case "monitor": return .monitor(parts[1])
        case "window": return .window(parts[1])
        default: throw SettingError(key: key, value: value, reason: "use screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE")
        }
    }

    /// The settings as event/status fields.
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = [
            "fps": .int(fps), "min_fps": .double(minFps), "bitrate_kbps": .int(bitrate.kbps),
            "content": .string(content.rawValue), "paused": .bool(paused),
            "max_resolution": maxResolution.map { .string("\($0)") } ?? .null,
            "min_bitrate_kbps": minBitrate.map { .int($0.kbps) } ?? .null,
            "keyframe_interval_s": keyframeIntervalSeconds.map { .double($0) } ?? .null,
        ]
        switch source {
        case .x11(_, let spec, _):
            switch spec {
            case .screen: f["source"] = "screen"
            case .region(let r): f["source"] = .string("region:\(r)")
            case .monitor(let m): f["source"] = .string("monitor:\(m)")
            case .window(let w): f["source"] = .string("window:\(w)")
            }
        case .raw(let path, _, _, _): f["source"] = .string("input:\(path)")
        case .portal(let window, let region, _, _):
            f["source"] = .string("portal:\(window ? "window" : "monitor")" + (region.map { ":region:\($0)" } ?? ""))
        }
        return f
    }

    /// The names of the fields that differ from `old` (for settings_changed events).
    public func changedKeys(from old: LiveSettings) -> [String] {
        let a = fields, b = old.fields
        return a.keys.filter { a[$0] != b[$0] }.sorted()
    }
}

// A refused live setting is a `SettingError` (MediaCore), by `start` (as a flag) or `ctl set`.
