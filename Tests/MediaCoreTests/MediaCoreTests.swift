import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import MediaCore
import Basics

@Suite struct VideoFrameTests {
    @Test func planesAreLaidOutWithAlignedStrides() {
        let f = VideoFrame(width: 641, height: 481)
        #expect(f.strideY >= 641 && f.strideY % 32 == 0)
        #expect(f.chromaWidth == 321 && f.chromaHeight == 241)
        #expect(f.strideUV >= 321 && f.strideUV % 32 == 0)
        #expect(f.u == f.y + f.strideY * 481)
        #expect(f.v == f.u + f.strideUV * 241)
        f.fill(y: 200, u: 100, v: 50)
        #expect(f.y[640 + 480 * f.strideY] == 200)
        #expect(f.v[320 + 240 * f.strideUV] == 50)
    }

    @Test func rectIntersection() {
        let a = PixelRect(x: 0, y: 0, width: 100, height: 100)
        #expect(a.intersection(PixelRect(x: 50, y: 60, width: 100, height: 100)) == PixelRect(x: 50, y: 60, width: 50, height: 40))
        #expect(a.intersection(PixelRect(x: 100, y: 0, width: 10, height: 10)) == nil)
    }
}

@Suite struct FramePoolTests {
    @Test func reusesFramesInSteadyState() {
        let pool = FramePool(size: PixelSize(width: 64, height: 32), capacity: 3)
        for _ in 0..<1000 {
            let a = pool.take()
            let b = pool.take()
            pool.recycle(a)
            pool.recycle(b)
        }
        #expect(pool.allocatedCount == 2)
    }

    @Test func resizeDropsOldFrames() {
        let pool = FramePool(size: PixelSize(width: 64, height: 32))
        let a = pool.take()
        pool.resize(to: PixelSize(width: 32, height: 16))
        pool.recycle(a)  // wrong size: dropped
        let b = pool.take()
        #expect(b.size == PixelSize(width: 32, height: 16))
        #expect(pool.allocatedCount == 2)
    }
}

extension FramePoolTests {
    /// Pages of `frame`'s pixels resident in memory (mincore), of those wholly inside them.
    static func residentPages(_ frame: VideoFrame) -> (resident: Int, pages: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let pages = frame.byteCount / page
        var vector = [UInt8](repeating: 0, count: pages)
        let status = mincore(UnsafeMutableRawPointer(frame.y), pages * page, &vector)
        precondition(status == 0, "mincore failed")
        return (vector.filter { $0 & 1 != 0 }.count, pages)
    }

    /// Frames taken often (a video) stay as they are; a frame recycled while takes are a second
    /// or more apart (a still slide) gives its pages back and is handed out again as an unknown
    /// picture, without an allocation.
    @Test func aFrameRecycledWhileTakesAreSeldomGivesItsPagesBack() {
        let clock = ManualClock()
        let pool = FramePool(size: PixelSize(width: 640, height: 360), capacity: 4, clock: clock, idleNanos: 1_000_000_000)
        let a = pool.take()
        clock.advance(milliseconds: 33)
        let b = pool.take()
        a.y.update(repeating: 0xAB, count: a.strideY * a.height)
        a.pictureSerial = 7
        pool.recycle(a)  // takes 33 ms apart: kept
        #expect(pool.discardedCount == 0 && a.pictureSerial == 7 && a.y[1000] == 0xAB)
        #expect(Self.residentPages(a).resident == Self.residentPages(a).pages)

        clock.advance(milliseconds: 5_000)
        let c = pool.take()  // a, 5 s after b
        #expect(c === a)
        b.y.update(repeating: 0xCD, count: b.strideY * b.height)
        b.pictureSerial = 8
        pool.recycle(b)
        let (resident, pages) = Self.residentPages(b)
        #expect(pool.discardedCount == 1 && resident == 0, "\(resident) of \(pages) pages resident")
        #expect(b.pictureSerial == 0 && !b.changesKnown && b.y[1000] == 0)
        // Parked: passed over by takeResident, and taken again by take, written as any other.
        #expect(pool.takeResident() == nil)
        let d = pool.take()
        #expect(d === b && pool.allocatedCount == 2)
        d.y[1000] = 1
        #expect(Self.residentPages(d).resident >= 1)
    }
}

@Suite struct LatestFrameMailboxTests {
    @Test func newestItemWinsAndReplacedOneIsReturned() {
        let box = LatestFrameMailbox<Int>()
        #expect(box.put(1) == nil)
        #expect(box.put(2) == 1)
        #expect(box.replaced == 1)
        #expect(box.poll() == 2)
        #expect(box.poll() == nil)
    }

    @Test func takeReturnsNilAtDeadlineAndAfterClose() {
        let box = LatestFrameMailbox<Int>()
        #expect(box.take(timeoutNanos: 0) == nil)
        // A timed wait on CLOCK_MONOTONIC does not come back before its time.
        let before = SystemClock().nowNanos()
        #expect(box.take(timeoutNanos: 30_000_000) == nil)
        #expect(SystemClock().nowNanos() - before >= 30_000_000)
        box.close()
        #expect(box.take(timeoutNanos: .max) == nil)
        #expect(box.isClosed)
    }

    @Test func wakeInterruptsAWaitingTake() async {
        let box = LatestFrameMailbox<Int>()
        let started = Date()
        let t = Thread { box.wake() }
        t.start()
        let item = box.take(timeoutNanos: 30_000_000_000)
        #expect(item == nil)
        #expect(Date().timeIntervalSince(started) < 29)
    }

    @Test func handsOffAcrossThreads() {
        let box = LatestFrameMailbox<Int>()
        let producer = Thread {
            for i in 1...100 { box.put(i) }
            box.close()
        }
        producer.start()
        var last = 0
        while let v = box.take(timeoutNanos: .max) {
            #expect(v > last)
            last = v
        }
        #expect(last == 100 || box.isClosed)
    }
}

@Suite struct ManualClockTests {
    @Test func advancesOnlyWhenTold() {
        let c = ManualClock(startNanos: 5)
        #expect(c.nowNanos() == 5)
        c.advance(milliseconds: 2)
        #expect(c.nowNanos() == 2_000_005)
        #expect(c.wallNanos() > c.nowNanos())
    }
}

/// What changed, from the capturer's rectangles to the macroblocks the encoder works on.
@Suite struct FrameChangesTests {
    func marked(_ f: VideoFrame) -> Set<Int> { Set((0..<(f.macroblockColumns * f.macroblockRows)).filter { f.changes[$0] != 0 }) }

    @Test func rectanglesMarkTheMacroblocksTheyTouch() {
        let f = VideoFrame(width: 100, height: 50)  // 7 x 4 macroblocks, the last ones partial
        #expect(f.macroblockColumns == 7 && f.macroblockRows == 4 && !f.changesKnown)
        let rects = [PixelRect(x: 15, y: 0, width: 2, height: 1), PixelRect(x: 96, y: 48, width: 10, height: 10), PixelRect(x: 40, y: 40, width: 0, height: 5)]
        rects.withUnsafeBufferPointer { f.setChanges($0, source: f.size) }
        #expect(f.changesKnown)
        #expect(marked(f) == [0, 1, 3 * 7 + 6])  // 15–16 spans columns 0 and 1; the empty one nothing
        f.setChanges(nil, source: f.size)
        #expect(!f.changesKnown)
    }

    @Test func scaledRectanglesAreWidenedForTheScaler() {
        let f = VideoFrame(width: 960, height: 540)  // from 1920x1080
        [PixelRect(x: 640, y: 320, width: 32, height: 32)].withUnsafeBufferPointer { f.setChanges($0, source: PixelSize(width: 1920, height: 1080)) }
        // 320–336 scaled, widened by 2: 318–338 → columns 19–21; rows 158–178 → 9–11.
        let expected = Set((9...11).flatMap { r in (19...21).map { r * 60 + $0 } })
        #expect(marked(f) == expected)
    }

    @Test func aReplacedPicturesChangesAreKept() {
        let a = VideoFrame(width: 64, height: 64), b = VideoFrame(width: 64, height: 64)
        [PixelRect(x: 0, y: 0, width: 8, height: 8)].withUnsafeBufferPointer { a.setChanges($0, source: a.size) }
        [PixelRect(x: 48, y: 48, width: 8, height: 8)].withUnsafeBufferPointer { b.setChanges($0, source: b.size) }
        b.mergeChanges(from: a)
        #expect(marked(b) == [0, 15])
        a.markEverythingChanged()
        b.mergeChanges(from: a)
        #expect(!b.changesKnown)
        // Through the mailbox: the one that replaces an untaken picture carries its changes.
        let mailbox = LatestFrameMailbox<VideoFrame>()
        let c = VideoFrame(width: 64, height: 64), d = VideoFrame(width: 64, height: 64)
        [PixelRect(x: 0, y: 20, width: 4, height: 4)].withUnsafeBufferPointer { c.setChanges($0, source: c.size) }
        [PixelRect(x: 20, y: 0, width: 4, height: 4)].withUnsafeBufferPointer { d.setChanges($0, source: d.size) }
        mailbox.put(c, merging: { $0.mergeChanges(from: $1) })
        #expect(mailbox.put(d, merging: { $0.mergeChanges(from: $1) }) === c)
        #expect(mailbox.poll() === d && marked(d) == [4, 1])
    }
}
