import Foundation
import Synchronization
import X11TestSupport

/// A JSON object as Foundation parses it.
typealias JSONObject = [String: Any]

/// Parses text that is one JSON object (`ctl status --json`, `sources --json`, ffprobe's output).
/// - Throws: `TestFailure` quoting the text when it is not one.
func parseJSONObject(_ text: String) throws -> JSONObject {
    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? JSONObject else {
        throw TestFailure("not a JSON object: \(text.prefix(2000))")
    }
    return object
}

/// The events a command printed with `--json`: one JSON object per stdout line, each with an
/// `event` name (and a `time`). The one reader of them for every end-to-end test.
struct EventLog {
    /// Every line that parsed as a JSON object, in order.
    let all: [JSONObject]
    /// The lines that did not (none, from our commands: EventTests checks that).
    let malformedLines: [String]

    init(_ stdout: String) {
        var all: [JSONObject] = [], malformed: [String] = []
        for line in stdout.split(separator: "\n") {
            if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? JSONObject {
                all.append(object)
            } else {
                malformed.append(String(line))
            }
        }
        self.all = all
        malformedLines = malformed
    }

    /// What the child printed on stdout so far.
    init(_ child: Child) { self.init(child.stdout) }

    /// The event names, in order.
    var names: [String] { all.compactMap { $0["event"] as? String } }

    func events(named name: String) -> [JSONObject] { all.filter { $0["event"] as? String == name } }
    func first(named name: String) -> JSONObject? { all.first { $0["event"] as? String == name } }
    func last(named name: String) -> JSONObject? { all.last { $0["event"] as? String == name } }
    func contains(_ name: String) -> Bool { first(named: name) != nil }

    /// The `stopped` event (its fields are a command's summary).
    /// - Throws: `TestFailure` quoting the log when there is none.
    func stopped() throws -> JSONObject {
        guard let stopped = last(named: "stopped") else {
            throw TestFailure("no stopped event in: \(all.suffix(20))")
        }
        return stopped
    }

    /// When an event happened: our events carry an RFC 3339 `time`, Scripts/lossy-proxy's carry
    /// Unix seconds.
    static func time(of event: JSONObject) -> Date? {
        if let text = event["time"] as? String { return rfc3339.withLock { $0.date(from: text) } }
        if let seconds = event["time"] as? Double { return Date(timeIntervalSince1970: seconds) }
        return nil
    }

    private static let rfc3339: Mutex<ISO8601DateFormatter> = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return Mutex(f)
    }()

    /// Waits (bounded) until `child` has printed `count` events named `name` that `match`, and
    /// returns the last of those `count`.
    /// - Throws: `TestFailure` with the child's output when the deadline passes or the child exits
    ///   first.
    @discardableResult
    static func wait(for name: String, in child: Child, count: Int = 1, seconds: Double = 20,
                     where match: (JSONObject) -> Bool = { _ in true }) throws -> JSONObject {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            // Whether it still runs before reading: an event printed just before exiting is seen.
            let running = child.isRunning
            let found = EventLog(child).events(named: name).filter(match)
            if found.count >= count { return found[count - 1] }
            guard running, Date() < deadline else {
                throw TestFailure("\(running ? "after \(seconds) s" : "the child exited (status \(child.finish(within: 0))) with"): "
                    + "\(found.count) of \(count) \(name) events in \(child.stdoutPath): \(child.stdout.suffix(2000)) \(child.stderr.suffix(1000))")
            }
            usleep(20_000)
        }
    }
}

extension Dictionary where Key == String, Value == Any {
    /// When this event happened (`EventLog.time(of:)`).
    var eventTime: Date? { EventLog.time(of: self) }
}

/// Waits (bounded) until `condition` holds, checking every `pollMillis`.
/// - Throws: `TestFailure` naming `what` at the deadline.
func waitUntil(seconds: Double, pollMillis: Int = 10, _ what: @autoclosure () -> String, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(seconds)
    while try !condition() {
        guard Date() < deadline else { throw TestFailure("timed out after \(seconds) s waiting for \(what())") }
        usleep(UInt32(pollMillis) * 1000)
    }
}

/// A stretch of time that is part of a scenario, not a wait for something to happen: an app
/// stays away for 1.2 s, a pause lasts 1.5 s. Every fixed delay in the end-to-end tests goes
/// through here, with its reason (`grep -rn "hold(" Tests/EndToEndTests` lists them).
/// Nothing when `seconds` is not positive (the stretch has passed already).
func hold(_ seconds: Double, _ why: String) {
    _ = why
    guard seconds > 0 else { return }
    usleep(UInt32(seconds * 1_000_000))
}
