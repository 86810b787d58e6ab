import MediaCore
import Basics
import Testing
import TestSupport
@testable import VideoProcessing

/// ``FrameAssembler``: pooled frames brought up to date with only what changed must hold exactly
/// what a conversion of the whole picture gives, whichever older picture a frame held.
@Suite struct FrameAssemblerTests {
    /// A BGRX picture that changes in random rectangles, handed to a sink as a capturer does:
    /// the changed rectangles first, then the asked areas in bands of `bandRows` rows.
    final class Screen {
        let size: PixelSize
        var pixels: [UInt32]
        var rng = SplitMix64(seed: 7)

        init(_ size: PixelSize) {
            self.size = size
            pixels = Array(repeating: 0, count: size.area)
            for i in pixels.indices { pixels[i] = UInt32(truncatingIfNeeded: rng.next()) | 0xff00_0000 }
        }

        /// Paints `count` random rectangles of noise, up to `maxSide` pixels a side (odd places
        /// and sizes too); returns them.
        func change(count: Int, maxSide: Int) -> [PixelRect] {
            (0..<count).map { _ in
                let w = Int.random(in: 1...maxSide, using: &rng), h = Int.random(in: 1...maxSide, using: &rng)
                let r = PixelRect(x: Int.random(in: 0...(size.width - w), using: &rng), y: Int.random(in: 0...(size.height - h), using: &rng),
                                  width: w, height: h)
                for y in r.y..<(r.y + r.height) {
                    for x in r.x..<(r.x + r.width) { pixels[y * size.width + x] = UInt32(truncatingIfNeeded: rng.next()) | 0xff00_0000 }
                }
                return r
            }
        }

        /// Hands the picture to `sink`; true when it wrote everything it was asked.
        func deliver(_ changed: [PixelRect]?, to sink: CaptureSink, bandRows: Int = 16, failAfterBands: Int? = nil) -> Bool {
            var areas: [PixelRect] = []
            if let changed {
                changed.withUnsafeBufferPointer { sink.begin(size: size, changed: $0, areas: &areas) }
            } else {
                sink.begin(size: size, changed: nil, areas: &areas)
            }
            var bands = 0
            return pixels.withUnsafeBytes { raw in
                for a in areas {
                    var y = a.y
                    while y < a.y + a.height {
                        if let failAfterBands, bands == failAfterBands { sink.cancel(); return false }
                        let h = min(bandRows, a.y + a.height - y)
                        sink.write(BGRAImageView(base: raw.baseAddress! + (y * size.width + a.x) * 4, stride: size.width * 4,
                                                 width: a.width, height: h), x: a.x, y: y)
                        bands += 1
                        y += h
                    }
                }
                sink.end()
                return true
            }
        }

        /// What a conversion of the whole picture gives, scaled to `output`.
        func reference(_ output: PixelSize) -> VideoFrame {
            let frame = VideoFrame(width: output.width, height: output.height)
            pixels.withUnsafeBytes {
                FrameConverter().convert(bgra: BGRAImageView(base: $0.baseAddress!, stride: size.width * 4, width: size.width, height: size.height),
                                         into: frame)
            }
            return frame
        }
    }

    /// Frames go round as in the sender: the newest waits in the mailbox, the one before is the
    /// encoder's, so a frame comes back two or three pictures old, or younger when one is replaced.
    @Test(arguments: [PixelSize(width: 320, height: 180), PixelSize(width: 321, height: 179)])
    func framesHoldExactlyTheWholeConversion(size: PixelSize) throws {
        let screen = Screen(size)
        let pool = FramePool(size: size, capacity: 4)
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 })
        var inFlight: [VideoFrame] = []
        var partial = 0
        for picture in 0..<40 {
            let changed: [PixelRect]? = picture == 0 ? nil : screen.change(count: picture % 4, maxSide: 40)
            #expect(screen.deliver(changed, to: assembler))
            let (frame, _) = try #require(assembler.takeFinished())
            #expect(frame.samePixels(as: screen.reference(size)), "picture \(picture)")
            if assembler.pixelsConverted < size.area / 2 { partial += 1 }
            inFlight.append(frame)
            // Every fifth picture replaces the one waiting (it goes back one picture old).
            let keep = picture % 5 == 4 ? 1 : 2
            while inFlight.count > keep { pool.recycle(inFlight.removeFirst()) }
        }
        #expect(partial >= 30, "only \(partial) of 40 pictures were converted in part")
        #expect(pool.allocatedCount <= 3)
    }

    /// A 320x180 screen and an assembler that takes back what waits in the mailbox, as the
    /// sender's.
    func takingBack() -> (PixelSize, Screen, FramePool, LatestFrameMailbox<VideoFrame>, FrameAssembler) {
        let size = PixelSize(width: 320, height: 180)
        let pool = FramePool(size: size, capacity: 4)
        let mailbox = LatestFrameMailbox<VideoFrame>()
        return (size, Screen(size), pool, mailbox, FrameAssembler(pool: pool, nowNanos: { 0 }, reclaim: { mailbox.reclaim() }))
    }

    /// The sender's two frames: the encoder holds one, and a picture it has not taken yet is
    /// taken back from the mailbox and brought up to date in place. Every frame the encoder
    /// takes holds exactly the newest picture and marks every macroblock that changed since the
    /// encoder's previous frame, in the pictures it never took too.
    @Test func aPictureTakenBackKeepsWhatTheEncoderHasNotSeen() throws {
        let (size, screen, pool, mailbox, assembler) = takingBack()
        var encoders: VideoFrame?
        var unseen: [PixelRect] = []  // changed since the encoder's frame
        var rng = SplitMix64(seed: 3)
        var checked = 0
        for picture in 0..<60 {
            let changed: [PixelRect]? = picture == 0 ? nil : screen.change(count: 1 + picture % 3, maxSide: 30)
            #expect(screen.deliver(changed, to: assembler))
            let (frame, _) = try #require(assembler.takeFinished())
            #expect(mailbox.put(frame) == nil, "a picture was left waiting instead of being taken back")
            unseen += changed ?? []
            // The encoder is slower than the capture: it takes the newest picture one time in three.
            guard picture == 0 || rng.next() % 3 == 0 else { continue }
            let taken = try #require(mailbox.poll())
            #expect(taken.samePixels(as: screen.reference(size)), "picture \(picture)")
            if picture > 0 {
                #expect(taken.changesKnown)
                for r in unseen {
                    for row in (r.y / 16)...((r.y + r.height - 1) / 16) {
                        for column in (r.x / 16)...((r.x + r.width - 1) / 16) {
                            #expect(taken.changes[row * taken.macroblockColumns + column] == 1, "picture \(picture): \(r) unmarked")
                        }
                    }
                }
                checked += 1
            }
            if let old = encoders { pool.recycle(old) }
            encoders = taken
            unseen = []
        }
        #expect(checked >= 10)
        #expect(mailbox.replaced >= 20, "only \(mailbox.replaced) pictures were taken back")
        #expect(pool.allocatedCount == 2)
    }

    /// A grab that fails in a picture taken back loses what the encoder had not seen in it: the
    /// next frame marks everything, so the encoder skips nothing that changed.
    @Test func aFailedGrabOfATakenBackPictureMarksEverythingNext() throws {
        let (size, screen, pool, mailbox, assembler) = takingBack()
        #expect(screen.deliver(nil, to: assembler))
        mailbox.put(try #require(assembler.takeFinished()).frame)
        let encoders = try #require(mailbox.poll())
        #expect(screen.deliver(screen.change(count: 1, maxSide: 20), to: assembler))
        mailbox.put(try #require(assembler.takeFinished()).frame)
        #expect(!screen.deliver(screen.change(count: 1, maxSide: 20), to: assembler, bandRows: 2, failAfterBands: 0))
        #expect(assembler.takeFinished() == nil)
        #expect(mailbox.poll() == nil)  // the waiting picture was taken back, and failed
        #expect(screen.deliver([], to: assembler))
        let (frame, _) = try #require(assembler.takeFinished())
        #expect(!frame.changesKnown)
        #expect(frame.samePixels(as: screen.reference(size)))
        pool.recycle(encoders)
    }

    /// A still screen: the pool has no resident frame free, so the encoder's idle picture is
    /// borrowed, brought up to date with what changed only, and comes back as the next picture:
    /// one frame in all. A grab that fails in it gives it back to the encoder, and the next
    /// picture marks everything.
    @Test func anIdleEncodersPictureIsBorrowedAndBroughtUpToDateInPlace() throws {
        let size = PixelSize(width: 320, height: 180)
        let screen = Screen(size)
        let pool = FramePool(size: size, capacity: 4)
        final class Encoder: @unchecked Sendable {
            var held: VideoFrame?
            var lent = false
            var busy = false
        }
        let encoder = Encoder()
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 }, borrow: {
            guard !encoder.busy, let f = encoder.held else { return nil }
            encoder.held = nil
            encoder.lent = true
            return (f, false)
        }, giveBack: { f in
            guard encoder.lent else { return false }
            encoder.held = f
            encoder.lent = false
            return true
        })
        #expect(screen.deliver(nil, to: assembler))
        encoder.held = try #require(assembler.takeFinished()).frame
        let first = encoder.held
        for picture in 1...8 {
            let changed = screen.change(count: 1 + picture % 2, maxSide: 30)
            #expect(screen.deliver(changed, to: assembler))
            let (frame, _) = try #require(assembler.takeFinished())
            #expect(frame === first && encoder.lent, "picture \(picture) was not the encoder's")
            #expect(assembler.pixelsConverted <= 2 * 32 * 32, "picture \(picture): \(assembler.pixelsConverted) pixels converted")
            #expect(frame.samePixels(as: screen.reference(size)), "picture \(picture)")
            #expect(frame.changesKnown)
            for r in changed {
                #expect(frame.changes[(r.y / 16) * frame.macroblockColumns + r.x / 16] == 1, "picture \(picture): \(r) unmarked")
            }
            encoder.held = frame  // published: the encoder has it back
            encoder.lent = false
        }
        // The encoder is encoding: the pool makes a second frame.
        encoder.busy = true
        #expect(screen.deliver(screen.change(count: 1, maxSide: 20), to: assembler))
        let second = try #require(assembler.takeFinished()).frame
        #expect(second !== first && encoder.held === first && pool.allocatedCount == 2)
        #expect(second.samePixels(as: screen.reference(size)))
        encoder.busy = false
        pool.recycle(second)
        // A failed grab in the borrowed picture: it goes back to the encoder, not to the pool.
        encoder.held = first
        _ = pool.takeResident()  // the pool's resident frame is out (as a parked one would be)
        #expect(!screen.deliver(screen.change(count: 1, maxSide: 20), to: assembler, bandRows: 2, failAfterBands: 1))
        #expect(encoder.held === first && !encoder.lent)
        #expect(screen.deliver([], to: assembler))
        let (next, _) = try #require(assembler.takeFinished())
        #expect(next === first && !next.changesKnown)
        #expect(next.samePixels(as: screen.reference(size)))
        #expect(pool.allocatedCount == 2)
    }

    /// Scaled: the bands go into a source-sized copy, scaled whole into each frame.
    @Test func scaledFramesHoldExactlyTheWholeConversionScaled() throws {
        let size = PixelSize(width: 640, height: 360), output = PixelSize(width: 320, height: 180)
        let screen = Screen(size)
        let pool = FramePool(size: output, capacity: 4)
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 })
        for picture in 0..<12 {
            #expect(screen.deliver(picture == 0 ? nil : screen.change(count: 2, maxSide: 60), to: assembler))
            let (frame, _) = try #require(assembler.takeFinished())
            #expect(frame.size == output)
            #expect(frame.samePixels(as: screen.reference(output)), "picture \(picture)")
            if picture > 0 { #expect(assembler.pixelsConverted <= 2 * 62 * 62) }
            pool.recycle(frame)
        }
    }

    /// A change XDamage did not report (some GL drivers, compositors) is converted at the next
    /// whole refresh, at most 2 s later, and then held by every frame that comes round.
    @Test func aChangeNobodyReportedShowsWithinTheRefreshTime() throws {
        let size = PixelSize(width: 320, height: 180)
        let screen = Screen(size)
        let pool = FramePool(size: size, capacity: 4)
        final class Clock: @unchecked Sendable { var nanos: UInt64 = 5_000_000_000 }
        let clock = Clock()
        let assembler = FrameAssembler(pool: pool, nowNanos: { clock.nanos })
        var inFlight: [VideoFrame] = []
        func next(_ changed: [PixelRect]) -> VideoFrame? {
            #expect(screen.deliver(changed, to: assembler))
            guard let (frame, _) = assembler.takeFinished() else { return nil }
            inFlight.append(frame)
            while inFlight.count > 2 { pool.recycle(inFlight.removeFirst()) }
            return frame
        }
        for _ in 0..<3 { _ = try #require(next([])) }  // the three frames that go round exist
        _ = screen.change(count: 3, maxSide: 30)  // drawn, but never reported
        var sawMissed = false
        for step in 1...70 {
            clock.nanos += 33_000_000
            let reported = screen.change(count: 1, maxSide: 10)
            let frame = try #require(next(reported))
            let whole = frame.samePixels(as: screen.reference(size))
            if whole { sawMissed = true }
            // Before 2 s the frames cannot know; from then on every frame holds it.
            if UInt64(step) * 33_000_000 < FrameAssembler.fullRefreshNanos { #expect(!whole, "step \(step)") }
            if sawMissed { #expect(whole, "step \(step): a frame lost the refreshed change") }
        }
        #expect(sawMissed)
    }

    /// A grab that fails part way leaves no frame, and the next picture is whole again.
    @Test func aFailedGrabGivesNoFrameAndTheNextIsWhole() throws {
        let size = PixelSize(width: 320, height: 180)
        let screen = Screen(size)
        let pool = FramePool(size: size, capacity: 4)
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 })
        #expect(screen.deliver(nil, to: assembler))
        pool.recycle(try #require(assembler.takeFinished()).frame)
        #expect(!screen.deliver(screen.change(count: 1, maxSide: 20), to: assembler, bandRows: 2, failAfterBands: 1))
        #expect(assembler.takeFinished() == nil)
        // Nothing new was drawn, but what failed is not in any frame.
        #expect(screen.deliver([], to: assembler))
        let (frame, _) = try #require(assembler.takeFinished())
        #expect(assembler.pixelsConverted == size.area)
        #expect(frame.samePixels(as: screen.reference(size)))
    }

    /// A source too small to encode: nothing is asked, no frame comes, and what changed meanwhile
    /// is still converted once it is accepted.
    @Test func aRefusedPictureIsNotGrabbed() throws {
        let size = PixelSize(width: 64, height: 64)
        let screen = Screen(size)
        var accepting = true
        let pool = FramePool(size: size, capacity: 4)
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 }) { _ in accepting }
        #expect(screen.deliver(nil, to: assembler))
        pool.recycle(try #require(assembler.takeFinished()).frame)
        accepting = false
        #expect(screen.deliver(screen.change(count: 1, maxSide: 10), to: assembler))
        #expect(assembler.takeFinished() == nil)
        #expect(assembler.pixelsConverted == 0)
        accepting = true
        #expect(screen.deliver([], to: assembler))
        let (frame, _) = try #require(assembler.takeFinished())
        #expect(frame.samePixels(as: screen.reference(size)))
    }
}
