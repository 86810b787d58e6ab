import Events
import Foundation
import Testing

/// Pins what users see of every event: the JSON line (`--json`, on stdout) and the human line
/// (on stderr). The expected text is in `PinnedOutput.swift`, recorded from the code before
/// events were typed; it must not change unless the output is meant to.
@Suite struct EventOutputTests {
    static let time = Date(timeIntervalSince1970: 1_795_000_000.125)

    /// Every event name docs/EVENTS.md documents.
    static let documentedNames: Set<String> = [
        "started", "first_frame_sent", "connected", "peer_joined", "peer_left", "substream_started", "substream_stopped",
        "subscribed", "unsubscribed", "paused", "resumed", "settings_changed", "stats", "warning", "error", "reconnecting",
        "disconnected", "stopped", "source_restored", "audio_app_attached", "audio_app_detached", "audio_reconnecting",
        "audio_resumed", "first_frame", "resolution_changed", "sender_left", "sender_changed",
        "bitrate_changed", "link", "invitation",
    ]

    @Test func everyEventPrintsAsPinned() throws {
        let cases = EventCases.all()
        var dump = ""
        for (label, event) in cases {
            let json = event.jsonLine(time: Self.time), text = event.humanText
            dump += "        \"\(label)\": (\n            json: #\"\(json)\"#,\n            text: #\"\(text)\"#),\n"
            guard let pinned = PinnedOutput.expected[label] else {
                Issue.record("\(label) is not pinned: \(json) / \(text)")
                continue
            }
            #expect(json == pinned.json, "\(label): JSON")
            #expect(text == pinned.text, "\(label): human text")
        }
        if let path = ProcessInfo.processInfo.environment["EVENTS_PIN_DUMP"] {
            try dump.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let labels = cases.map(\.label)
        #expect(Set(labels).count == labels.count, "a label is used twice")
        #expect(Set(PinnedOutput.expected.keys).subtracting(labels).sorted() == [], "pinned but not rendered")
        #expect(Self.documentedNames.subtracting(cases.map(\.event.name)).sorted() == [], "documented events not pinned")
        #expect(Set(cases.map(\.event.name)).subtracting(Self.documentedNames).sorted() == [], "undocumented events")
    }

    /// The time stamp and the rounding of doubles (to 3 decimals) in the JSON line.
    @Test func jsonLineStampsTimeAndRoundsDoubles() {
        let line = EventCases.all().first { $0.label == "sender.first_frame_sent" }!.event.jsonLine(time: Self.time)
        #expect(line.contains(#""time":"2026-11-18T"#))
        #expect(line.contains(#".125Z""#))
        #expect(line.contains(#""latency_ms":20.123,"#))
    }

    /// RFC 3339 in UTC to the millisecond, written without ICU: what ISO8601DateFormatter wrote
    /// (`.withInternetDateTime, .withFractionalSeconds`), checked against it.
    @Test(arguments: [0.0, 0.005, 0.999_9, 59.04, 951_782_400.5, 1_763_464_000.125, 4_102_444_799.999])
    func timeStampsAreRFC3339InUTC(_ seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let ours = EventCases.all()[0].event.jsonLine(time: date)
        #expect(ours.contains(#""time":"\#(formatter.string(from: date))""#), "\(seconds): \(ours)")
    }
}
