import FoundationEssentials
import Glibc
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
        all["time"] = .string(Self.rfc3339(time))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(all), let line = String(data: data, encoding: .utf8) else {
            return #"{"event":"error","kind":"event_encoding"}"#
        }
        return line
    }

    /// `time` in UTC to the nearest millisecond, as RFC 3339 writes it: 2026-11-18T11:06:40.125Z.
    /// Formatted here rather than by ISO8601DateFormatter, which loads ICU (6 MB resident).
    static func rfc3339(_ time: Date) -> String {
        let millis = Int64((time.timeIntervalSince1970 * 1000).rounded())
        var seconds = time_t(millis >= 0 ? millis / 1000 : (millis - 999) / 1000)
        let ms = Int(millis - Int64(seconds) * 1000)
        var t = tm()
        gmtime_r(&seconds, &t)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(t.tm_year + 1900)-\(two(t.tm_mon + 1))-\(two(t.tm_mday))T\(two(t.tm_hour)):\(two(t.tm_min)):\(two(t.tm_sec)).\(msText)Z"
    }

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
