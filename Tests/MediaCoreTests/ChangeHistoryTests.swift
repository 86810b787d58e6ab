import Testing
@testable import MediaCore
import Basics

/// ``ChangeHistory``: what a pooled frame holding an older picture needs to show the newest.
@Suite struct ChangeHistoryTests {
    let size = PixelSize(width: 640, height: 360)
    var whole: PixelRect { PixelRect(x: 0, y: 0, width: 640, height: 360) }

    func areas(_ h: ChangeHistory, since held: UInt64) -> [PixelRect] {
        var out: [PixelRect] = []
        h.areas(since: held, into: &out)
        return out
    }

    @discardableResult
    func record(_ h: inout ChangeHistory, _ rects: [PixelRect]?, size: PixelSize? = nil) -> UInt64 {
        guard let rects else { return h.record(nil, size: size ?? self.size) }
        return rects.withUnsafeBufferPointer { h.record($0, size: size ?? self.size) }
    }

    @Test func aFrameHoldingNoPictureNeedsAllOfIt() {
        var h = ChangeHistory()
        record(&h, nil)
        record(&h, [PixelRect(x: 10, y: 10, width: 4, height: 4)])
        #expect(areas(h, since: 0) == [whole])
    }

    @Test func theFirstPictureAndANewSizeAreUnknown() {
        var h = ChangeHistory()
        let first = record(&h, [PixelRect(x: 10, y: 10, width: 4, height: 4)])
        #expect(first == 1)
        #expect(areas(h, since: 0) == [whole])
        record(&h, [PixelRect(x: 20, y: 20, width: 4, height: 4)])
        #expect(areas(h, since: 1) == [PixelRect(x: 20, y: 20, width: 4, height: 4)])
        // Another size: the frames of the old one hold nothing of it.
        let other = PixelSize(width: 320, height: 180)
        record(&h, [PixelRect(x: 0, y: 0, width: 2, height: 2)], size: other)
        #expect(areas(h, since: 2) == [PixelRect(x: 0, y: 0, width: 320, height: 180)])
    }

    @Test func theNewestPictureNeedsNothing() {
        var h = ChangeHistory()
        record(&h, nil)
        let n = record(&h, [PixelRect(x: 10, y: 10, width: 4, height: 4)])
        #expect(areas(h, since: n).isEmpty)
    }

    /// 4:2:0 chroma covers 2x2 pixels: an area starts and ends on even pixels, clipped to the picture.
    @Test func areasAreWidenedToEvenPixelsAndClipped() {
        var h = ChangeHistory()
        record(&h, nil)
        record(&h, [PixelRect(x: 3, y: 5, width: 10, height: 7), PixelRect(x: 635, y: 355, width: 20, height: 20),
                    PixelRect(x: 700, y: 10, width: 5, height: 5)])
        #expect(areas(h, since: 1) == [PixelRect(x: 2, y: 4, width: 12, height: 8), PixelRect(x: 634, y: 354, width: 6, height: 6)])
        // An odd-sized picture: the far edge stops at the picture.
        var odd = ChangeHistory()
        let oddSize = PixelSize(width: 641, height: 361)
        record(&odd, nil, size: oddSize)
        record(&odd, [PixelRect(x: 639, y: 359, width: 2, height: 2)], size: oddSize)
        #expect(areas(odd, since: 1) == [PixelRect(x: 638, y: 358, width: 3, height: 3)])
    }

    /// A frame two pictures old needs the changes of both; a video playing in the same place
    /// gives the same rectangle each time, converted once.
    @Test func theChangesOfEveryNewerPictureAreUnitedWithoutRepeats() {
        var h = ChangeHistory()
        record(&h, nil)
        let clip = PixelRect(x: 100, y: 100, width: 200, height: 100)
        let held = record(&h, [clip])
        record(&h, [clip, PixelRect(x: 500, y: 10, width: 10, height: 10)])
        record(&h, [clip, PixelRect(x: 150, y: 120, width: 20, height: 20)])  // inside the clip
        #expect(areas(h, since: held) == [clip, PixelRect(x: 500, y: 10, width: 10, height: 10)])
        // A later rectangle containing earlier ones replaces them.
        record(&h, [PixelRect(x: 400, y: 0, width: 200, height: 100)])
        #expect(areas(h, since: held) == [clip, PixelRect(x: 400, y: 0, width: 200, height: 100)])
    }

    @Test func anUnknownPictureInBetweenNeedsAllOfIt() {
        var h = ChangeHistory()
        record(&h, nil)
        let held = record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        record(&h, nil)
        record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        #expect(areas(h, since: held) == [whole])
        // So does a grab that failed part way.
        let after = record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        h.recordUnknown()
        #expect(areas(h, since: after) == [whole])
    }

    @Test func aFrameOlderThanTheHistoryNeedsAllOfIt() {
        var h = ChangeHistory(depth: 4)
        record(&h, nil)
        let held = record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        for _ in 0..<4 { record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)]) }
        #expect(areas(h, since: held) == [PixelRect(x: 0, y: 0, width: 8, height: 8)])  // 4 newer pictures: all kept
        record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        #expect(areas(h, since: held + 1) == [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        #expect(areas(h, since: held) == [whole])  // 5 newer: the oldest is no longer kept
    }

    @Test func manyRectanglesInAPictureAreKeptAsTheirBoundingBox() {
        var h = ChangeHistory(perPicture: 4)
        record(&h, nil)
        let rects = (0..<6).map { PixelRect(x: 10 + $0 * 20, y: 50 + $0 * 2, width: 4, height: 4) }
        record(&h, rects)
        #expect(areas(h, since: 1) == [PixelRect(x: 10, y: 50, width: 104, height: 14)])
    }

    /// Many areas, or areas over most of the picture, are one grab of all of it.
    @Test func tooManyOrTooLargeAreasBecomeTheWholePicture() {
        var h = ChangeHistory(maxAreas: 3)
        record(&h, nil)
        record(&h, (0..<4).map { PixelRect(x: $0 * 20, y: 0, width: 4, height: 4) })
        #expect(areas(h, since: 1) == [whole])
        var big = ChangeHistory()
        record(&big, nil)
        record(&big, [PixelRect(x: 0, y: 0, width: 640, height: 200), PixelRect(x: 0, y: 200, width: 640, height: 100)])
        #expect(areas(big, since: 1) == [whole])
        var most = ChangeHistory()
        record(&most, nil)
        record(&most, [PixelRect(x: 0, y: 0, width: 640, height: 200)])
        #expect(areas(most, since: 1) == [PixelRect(x: 0, y: 0, width: 640, height: 200)])
    }

    @Test func areasAreAppendedAfterWhatTheListHeld() {
        var h = ChangeHistory()
        record(&h, nil)
        record(&h, [PixelRect(x: 0, y: 0, width: 8, height: 8)])
        var out = [PixelRect(x: 1, y: 1, width: 1, height: 1)]
        h.areas(since: 1, into: &out)
        #expect(out == [PixelRect(x: 1, y: 1, width: 1, height: 1), PixelRect(x: 0, y: 0, width: 8, height: 8)])
    }
}
