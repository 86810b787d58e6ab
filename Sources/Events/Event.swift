import Foundation
import Synchronization

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
