import MediaCore
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

    /// The keys `set` takes, with what each expects (for errors and `ctl --help`).
    public static let keys: [(String, String)] = [
        ("fps", "1-60"), ("min-fps", "0-fps"), ("bitrate", "e.g. 2M, 1600k"), ("min-bitrate", "e.g. 300k"),
        ("max-resolution", "720p, 1080p, 1440p, WxH or none"), ("content", "detail or motion"),
        ("keyframe-interval", "seconds, or none"), ("source", "screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE"),
    ]

    /// Returns the settings with `changes` (KEY → VALUE text) applied, all or nothing.
    /// - Throws: `SettingsError` naming the key and the value that is wrong.
    public func applying(_ changes: [(String, String)]) throws -> LiveSettings {
        var s = self
        guard !changes.isEmpty else { throw SettingsError("set: nothing to set; keys: \(Self.keys.map(\.0).joined(separator: ", "))") }
        for (key, value) in changes {
            func bad(_ why: String) -> SettingsError { SettingsError("set \(key)=\(value): \(why)") }
            switch key {
            case "fps":
                guard let v = Int(value), (1...60).contains(v) else { throw bad("must be a whole number from 1 to 60") }
                s.fps = v
            case "min-fps":
                guard let v = Double(value), v >= 0, v <= 60 else { throw bad("must be from 0 to 60") }
                s.minFps = v
            case "bitrate":
                do { s.bitrate = try Bitrate.parse(value) } catch { throw bad("\(error)") }
            case "min-bitrate":
                if value == "none" { s.minBitrate = nil } else {
                    do { s.minBitrate = try Bitrate.parse(value) } catch { throw bad("\(error)") }
                }
            case "max-resolution":
                if value == "none" { s.maxResolution = nil } else {
                    do { s.maxResolution = try MaxResolution.parse(value) } catch { throw bad("\(error)") }
                }
            case "content":
                guard let c = ContentPreference(rawValue: value) else { throw bad("use detail or motion") }
                s.content = c
            case "keyframe-interval":
                if value == "none" { s.keyframeIntervalSeconds = nil } else {
                    guard let v = Double(value), v > 0, v <= 3600 else { throw bad("must be seconds from 0 to 3600, or none") }
                    s.keyframeIntervalSeconds = v
                }
            case "source":
                guard case .x11(let display, _, let cursor) = s.source else {
                    throw bad("the source can be switched only when capturing the screen (not with --input)")
                }
                s.source = .x11(display: display, source: try Self.parseSource(value, key: key), drawCursor: cursor)
            default:
                throw SettingsError("set \(key): unknown setting; keys: \(Self.keys.map(\.0).joined(separator: ", "))")
            }
        }
        if s.minFps > Double(s.fps) { throw SettingsError("set: min-fps \(s.minFps) is above fps \(s.fps)") }
        if let min = s.minBitrate, min > s.bitrate { throw SettingsError("set: min-bitrate \(min) is above bitrate \(s.bitrate)") }
        return s
    }

    static func parseSource(_ value: String, key: String) throws -> CaptureSourceSpec {
        if value == "screen" { return .screen }
        let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[1].isEmpty else {
            throw SettingsError("set \(key)=\(value): use screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE")
        }
        switch parts[0] {
        case "region":
            do { return .region(try CaptureSourceSpec.parseRegion(parts[1])) } catch { throw SettingsError("set \(key)=\(value): \(error)") }
        case "monitor": return .monitor(parts[1])
        case "window": return .window(parts[1])
        default: throw SettingsError("set \(key)=\(value): use screen, region:WxH+X+Y, monitor:NAME or window:ID|TITLE")
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
        }
        return f
    }

    /// The names of the fields that differ from `old` (for settings_changed events).
    public func changedKeys(from old: LiveSettings) -> [String] {
        let a = fields, b = old.fields
        return a.keys.filter { a[$0] != b[$0] }.sorted()
    }
}
