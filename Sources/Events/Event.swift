import Foundation
import Synchronization

// The events target: what every event is (`BroadcastEvent`), where events go (`EventSink`),
// and the events more than one command emits (`WarningEvent`, `ErrorEvent`, in Problems.swift).
//
// Each concrete event is a `Sendable` value type with typed stored properties, next to the code
// that emits it: sender events in Sender (SenderEvents.swift), viewer events in Receiver
// (ViewerEvents.swift), relay events in Relay (RelayEvents.swift), room and peer events in Room
// (RoomEvents.swift, shared by `start`, `watch` and `serve`). This target stays a leaf: it
// knows none of them, only the protocol they keep.

/// One event a command reports: a JSON line for machines (`{"event": NAME, "time": RFC 3339,
/// ...fields}`, documented in the README, parsed by scripts) and one line of text for people.
///
/// A conforming type owns its field names and its text: call sites say what happened with
/// typed values (`events.emit(SenderStarted(...))`, `events.emit(.warning(.networkBusy, message))`),
/// and the sinks print whichever form was asked for.
public protocol BroadcastEvent: Sendable {
    /// The `event` field (what scripts match on).
    var name: String { get }
    /// The other fields of the JSON line, `event` and `time` aside. A value of `.null` is
    /// printed as `null`; a field that is not there is absent from the line.
    var fields: [String: JSONValue] { get }
    /// The event as one line of text for people (what the CLI prints after "screenshare: ").
    var humanText: String { get }
}

extension BroadcastEvent {
    /// The event as one line of JSON (no trailing newline), stamped with `time`: keys sorted,
    /// doubles to three decimals (see `JSONValue`).
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

    /// The line of an event that has no text of its own: "NAME: - -" (what the CLI printed for
    /// it before events were typed; kept so that the output does not change unasked).
    public var untitledText: String { "\(name): - -" }
}

/// Where events go. The CLI prints them as JSON lines or as human text; tests collect them.
public protocol EventSink: Sendable {
    func emit(_ event: some BroadcastEvent)
}

/// Collects events in memory (for tests and for the final summary).
public final class EventRecorder: EventSink {
    private let events = Mutex<[any BroadcastEvent]>([])
    public init() {}
    public func emit(_ event: some BroadcastEvent) { events.withLock { $0.append(event) } }
    public var all: [any BroadcastEvent] { events.withLock { $0 } }
    public func named(_ name: String) -> [any BroadcastEvent] { all.filter { $0.name == name } }
    /// The events of one type, typed.
    public func all<E: BroadcastEvent>(_ type: E.Type) -> [E] { all.compactMap { $0 as? E } }
}
