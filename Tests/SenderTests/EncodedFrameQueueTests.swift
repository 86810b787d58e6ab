import Foundation
import MediaCore
import Synchronization
import Testing
@testable import Sender

/// The bounded, ordered hand-off between the encode and send threads.
@Suite struct EncodedFrameQueueTests {
    func frame(_ timestamp: UInt32, keyframe: Bool = false) -> EncodedFrameQueue.Frame {
        .init(rtpTimestamp: timestamp, temporalLayer: 0, keyframe: keyframe, bitsPerSecond: 1_000_000, networkLimited: false,
              size: PixelSize(width: 64, height: 48), captureNanos: UInt64(timestamp))
    }

    @Test func framesComeOutInOrderWithTheirBytes() {
        let queue = EncodedFrameQueue(capacity: 2, initialBytes: 16)
        // Bigger than the slot's first buffer: it grows and keeps every byte.
        let big = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        big.withUnsafeBytes { #expect(queue.push($0, frame(1, keyframe: true))) }
        [UInt8]([9, 8, 7]).withUnsafeBytes { #expect(queue.push($0, frame(2))) }
        #expect(queue.count == 2)
        var seen: [(UInt32, [UInt8], Bool)] = []
        for _ in 0..<2 { queue.withNext(timeoutNanos: 0) { seen.append(($1.rtpTimestamp, Array($0), $1.keyframe)) } }
        #expect(seen.map(\.0) == [1, 2])
        #expect(seen[0].1 == big && seen[0].2)
        #expect(seen[1].1 == [9, 8, 7] && !seen[1].2)
        #expect(queue.count == 0)
        #expect(!queue.withNext(timeoutNanos: 1_000_000) { _, _ in Issue.record("nothing was queued") })
    }

    @Test func aFullQueueHasNoRoomUntilTheSenderTakesOne() throws {
        let queue = EncodedFrameQueue(capacity: 2)
        [UInt8]([1]).withUnsafeBytes { _ = queue.push($0, frame(1)) }
        #expect(queue.waitForRoom(timeoutNanos: 0))
        [UInt8]([2]).withUnsafeBytes { _ = queue.push($0, frame(2)) }
        #expect(!queue.waitForRoom(timeoutNanos: 1_000_000), "room in a full queue")
        // The frame being sent still counts: no room while the sender holds it.
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let sender = Thread {
            queue.withNext(timeoutNanos: 1_000_000_000) { _, _ in
                holding.signal()
                release.wait()
            }
        }
        sender.start()
        holding.wait()
        #expect(!queue.waitForRoom(timeoutNanos: 1_000_000), "room while the sender still holds the frame")
        release.signal()
        // Woken by the sender's hand-back, well before this long timeout.
        let started = Date()
        #expect(queue.waitForRoom(timeoutNanos: 30_000_000_000))
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test func closingLetsTheSenderFinishWhatWasQueued() {
        let queue = EncodedFrameQueue(capacity: 2)
        [UInt8]([1]).withUnsafeBytes { _ = queue.push($0, frame(1)) }
        queue.close()
        [UInt8]([2]).withUnsafeBytes { #expect(!queue.push($0, frame(2)), "pushed after the close") }
        #expect(!queue.waitForRoom(timeoutNanos: 30_000_000_000), "room after the close")
        var taken: [UInt32] = []
        while queue.withNext(timeoutNanos: 30_000_000_000, { taken.append($1.rtpTimestamp) }) {}
        #expect(taken == [1])
    }

    @Test func aSenderWaitingForAFrameWakesWhenOneIsPushed() {
        let queue = EncodedFrameQueue(capacity: 2)
        let got = Mutex<UInt32?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            queue.withNext(timeoutNanos: 30_000_000_000) { _, f in got.withLock { $0 = f.rtpTimestamp } }
            done.signal()
        }.start()
        [UInt8]([5]).withUnsafeBytes { _ = queue.push($0, frame(42)) }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(got.withLock { $0 } == 42)
    }
}
