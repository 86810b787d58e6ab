import Events
import Foundation
import Logging
import MediaCore
import Basics
import RTCP
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

    /// The broadcast's end: its BYE goes out three times (one lost on a lossy path left the
    /// viewers counting the silence after the end as a freeze), each in a compound with its
    /// sender report, to the RTCP port (RTP's + 1).
    @Test func theGoodbyeGoesOutThreeTimes() throws {
        let size = PixelSize(width: 64, height: 64)
        let path = NSTemporaryDirectory() + "bye-\(UUID().uuidString).nv12"
        try Data([UInt8](repeating: 90, count: RawPixelFormat.nv12.frameByteCount(size))).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        // An RTP port whose next one is free too, for RTCP.
        var pair: (rtp: UDPListener, rtcp: UDPListener)?
        for _ in 0..<20 where pair == nil {
            let rtp = try UDPListener(host: "127.0.0.1", port: 0)
            guard rtp.port < 65535, let rtcp = try? UDPListener(host: "127.0.0.1", port: rtp.port + 1) else { continue }
            pair = (rtp, rtcp)
        }
        let (sink, rtcp) = try #require(pair)
        var config = BroadcastConfig(source: .raw(path: path, format: .nv12, size: size, fps: 10),
                                     destination: Endpoint(host: "127.0.0.1", port: sink.port), cname: "bye-test")
        config.durationSeconds = 2
        let clock = ManualClock()
        let events = EventRecorder()
        let broadcaster = try Broadcaster(config: config, events: events, logger: Logger(label: "test"), clock: clock)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = try? broadcaster.run()
            finished.signal()
        }.start()
        try waitUntil("the first frame") { !events.all(FirstFrameSent.self).isEmpty }
        clock.advance(nanos: 3_000_000_000)
        let ended = finished.wait(timeout: .now() + 20)
        if ended == .timedOut { broadcaster.stop() }
        #expect(ended == .success)
        // What reached the RTCP port, all of it there by now (loopback, sent before run returned).
        var byes: [[UInt32]] = [], reports = 0
        var buffer = [UInt8](repeating: 0, count: 2048)
        var from = sockaddr_in()
        while true {
            let n = buffer.withUnsafeMutableBytes { rtcp.receive(into: $0, from: &from) }
            guard n > 0 else { break }
            let packets = try buffer.withUnsafeBytes { try RTCPPacket.parseCompound(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            for p in packets {
                switch p {
                case .goodbye(let bye): byes.append(bye.sources)
                case .senderReport: reports += 1
                default: break
                }
            }
        }
        #expect(byes.count == 3 && Set(byes).count == 1 && byes[0].count == 1, "BYEs: \(byes)")
        #expect(reports >= 3, "\(reports) sender reports")
    }
}

struct BroadcasterTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
