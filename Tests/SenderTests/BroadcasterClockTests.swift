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

    /// Runs a broadcast on a test clock, on a thread of its own; `finished` is signalled when
    /// `run` returns.
    static func start(_ config: BroadcastConfig) throws -> (Broadcaster, ManualClock, EventRecorder, DispatchSemaphore) {
        let clock = ManualClock()
        let events = EventRecorder()
        let broadcaster = try Broadcaster(config: config, events: events, logger: Logger(label: "test"), clock: clock)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = try? broadcaster.run()
            finished.signal()
        }.start()
        return (broadcaster, clock, events, finished)
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
        let (broadcaster, clock, events, finished) = try Self.start(config)
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

    /// The encode and send stages are threads of their own: while the pacer holds back the
    /// rest of a large keyframe (the test clock stands still, so it cannot go), the encoder
    /// takes and encodes the next picture instead of waiting with the packets. One frame
    /// ahead, no more (the queue between them is bounded), and the frames leave in order.
    @Test func theEncoderDoesNotWaitForThePacer() throws {
        // 720p noise: a keyframe far over what leaves unpaced (16 kB) and at the pacer's rate
        // (8 Mbit/s) in the 40 ms the clock is moved below.
        let size = PixelSize(width: 1280, height: 720)
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 2 * RawPixelFormat.nv12.frameByteCount(size))
        for i in stride(from: 0, to: bytes.count, by: 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { r in for k in 0..<min(8, bytes.count - i) { bytes[i + k] = r[k] } }
        }
        let path = NSTemporaryDirectory() + "pacer-\(UUID().uuidString).nv12"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sink = try UDPListener(host: "127.0.0.1", port: 0)
        _ = sink.setBufferSizes(receive: 8 << 20, send: 1 << 16)
        var config = BroadcastConfig(source: .raw(path: path, format: .nv12, size: size, fps: 30),
                                     destination: Endpoint(host: "127.0.0.1", port: sink.port), cname: "pacer-test")
        config.durationSeconds = 3600
        // `motion`: `detail` keeps its own bit budget before it encodes (EncodeScheduler), and
        // the test clock would hold the second picture there, not at the pacer.
        config.content = .motion
        config.fps = 30
        let (broadcaster, clock, events, finished) = try Self.start(config)
        defer {
            broadcaster.stop()
            _ = finished.wait(timeout: .now() + 20)
        }
        // What has arrived: bytes, and the RTP timestamps whose last packet (marker) came.
        var received = 0
        var completed: [UInt32] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        func drain() {
            var from = sockaddr_in()
            while true {
                let n = buffer.withUnsafeMutableBytes { sink.receive(into: $0, from: &from) }
                guard n >= 12 else { return }
                received += n
                if buffer[1] & 0x80 != 0 {
                    completed.append(UInt32(buffer[4]) << 24 | UInt32(buffer[5]) << 16 | UInt32(buffer[6]) << 8 | UInt32(buffer[7]))
                }
            }
        }
        let encoded = { broadcaster.counters.withLock { $0.framesEncoded } }
        try waitUntil("the first frame encoded") { encoded() >= 1 }
        // Time for the next picture (30 fps), not for the whole keyframe.
        clock.advance(milliseconds: 40)
        try waitUntil("the second frame encoded while the first is being paced") { encoded() >= 2 }
        drain()
        #expect(completed.isEmpty, "the first frame was sent whole (\(received) bytes) before the second was encoded: the test proves nothing")
        #expect(received < 16_000 + 8_000_000 / 8 * 40 / 1000 + 2 * 1300, "\(received) bytes left in 40 ms of the pacer's 8 Mbit/s")
        // Bounded: one frame waits, one is being sent; the encoder takes no third picture.
        clock.advance(milliseconds: 40)
        try waitUntil("the capture's next picture") { broadcaster.counters.withLock { $0.framesCaptured } >= 3 }
        #expect(encoded() == 2, "the encoder ran \(encoded() - 2) frames ahead of the send stage's queue")
        // Time enough for everything: the frames leave whole and in order.
        for _ in 0..<2000 where completed.count < 3 {
            clock.advance(milliseconds: 10)
            usleep(2_000)
            drain()
        }
        #expect(completed.count >= 3 && zip(completed, completed.dropFirst()).allSatisfy { Int32(bitPattern: $1 &- $0) > 0 },
                "frames completed: \(completed), \(received) bytes, clock at \(clock.nowNanos())")
        #expect(!events.all(FirstFrameSent.self).isEmpty)
    }
}

struct BroadcasterTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
