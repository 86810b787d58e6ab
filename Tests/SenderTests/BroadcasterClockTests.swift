import Events
import Foundation
import Logging
import MediaCore
import Synchronization
import Testing
import Transport
@testable import Sender

/// The broadcast keeps time only by its clock: a test clock decides when `--duration` ends and
/// when each second's `stats` goes out (no wall clock or real sleep decides either).
@Suite struct BroadcasterClockTests {
    /// Waits (bounded, real time) until `condition` holds.
    func waitUntil(_ what: String, seconds: Double = 20, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            guard Date() < deadline else { throw BroadcasterTestFailure("timed out waiting for \(what)") }
            usleep(5_000)
        }
    }

    @Test func aTestClockDrivesTheDurationAndTheStats() throws {
        // A raw 64x64 NV12 source whose every frame differs.
        let size = PixelSize(width: 64, height: 64)
        var bytes = [UInt8]()
        for f in 0..<4 { bytes += [UInt8](repeating: UInt8(40 * f), count: RawPixelFormat.nv12.frameByteCount(size)) }
        let path = NSTemporaryDirectory() + "clock-\(UUID().uuidString).nv12"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try UDPListener(host: "127.0.0.1", port: 0)  // bound: the packets are not refused

        var config = BroadcastConfig(source: .raw(path: path, format: .nv12, size: size, fps: 10),
                                     destination: Endpoint(host: "127.0.0.1", port: sink.port), cname: "clock-test")
        config.durationSeconds = 3600  // an hour, as the test clock counts it
        let clock = ManualClock()
        let events = EventRecorder()
        let broadcaster = try Broadcaster(config: config, events: events, logger: Logger(label: "test"), clock: clock)
        let result = Mutex<(reason: StopReason, summary: [String: JSONValue])?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            if let r = try? broadcaster.run() { result.withLock { $0 = (r.reason, r.summary) } }
            finished.signal()
        }.start()

        try waitUntil("the first frame") { !events.all(FirstFrameSent.self).isEmpty }
        // Three seconds by the test clock: three stats events, one per second.
        for second in 1...3 {
            clock.advance(nanos: 1_000_000_000)
            try waitUntil("stats \(second)") { events.all(SenderStats.self).count >= second }
        }
        // The rest of the hour: the broadcast ends at once, by its clock.
        clock.advance(nanos: 3597 * 1_000_000_000)
        let ended = finished.wait(timeout: .now() + 20)
        if ended == .timedOut { broadcaster.stop() }
        #expect(ended == .success, "a one-hour --duration did not end when the test clock passed the hour")
        let r = try #require(result.withLock { $0 })
        #expect(r.reason == .duration)
        #expect(r.summary["duration_s"] == .double(3600))
        #expect(events.all(SenderStats.self).count == 3, "\(events.all(SenderStats.self).count) stats events in 3 clock seconds")
        if case .int(let sent)? = r.summary["frames_sent"] { #expect(sent >= 1) } else { Issue.record("no frames_sent") }
    }
}

struct BroadcasterTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
