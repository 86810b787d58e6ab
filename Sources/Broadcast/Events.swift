import Foundation
import Synchronization

/// A JSON value for event fields.
public enum JSONValue: Sendable, Equatable, Encodable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral
{
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case object([String: JSONValue])
    case array([JSONValue])
    case null

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d.isFinite ? (d * 1000).rounded() / 1000 : 0)
        case .bool(let b): try c.encode(b)
        case .object(let o): try c.encode(o)
        case .array(let a): try c.encode(a)
        case .null: try c.encodeNil()
        }
    }

    /// Compact JSON text with sorted keys.
    public var jsonText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(self), as: UTF8.self)) ?? "null"
    }
}

/// One machine-readable event: `{"event": NAME, "time": RFC 3339, ...fields}`.
public struct BroadcastEvent: Sendable, Equatable {
    public var name: String
    public var fields: [String: JSONValue]
    public init(_ name: String, _ fields: [String: JSONValue] = [:]) {
        self.name = name
        self.fields = fields
    }

    /// The event as one line of JSON (no trailing newline), stamped with `time`.
    public func jsonLine(time: Date = Date()) -> String {
        var all = fields
        all["event"] = .string(name)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        all["time"] = .string(formatter.string(from: time))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(all), let line = String(data: data, encoding: .utf8) else {
            return #"{"event":"error","kind":"event_encoding"}"#
        }
        return line
    }
}

/// Where events go. The CLI prints them as JSON lines or as human text; tests collect them.
public protocol EventSink: Sendable {
    func emit(_ event: BroadcastEvent)
}

/// Collects events in memory (for tests and for the final summary).
public final class EventRecorder: EventSink {
    private let events = Mutex<[BroadcastEvent]>([])
    public init() {}
    public func emit(_ event: BroadcastEvent) { events.withLock { $0.append(event) } }
    public var all: [BroadcastEvent] { events.withLock { $0 } }
    public func named(_ name: String) -> [BroadcastEvent] { all.filter { $0.name == name } }
}
