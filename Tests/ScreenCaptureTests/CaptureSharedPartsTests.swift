import MediaCore
import Basics
import Testing
@testable import ScreenCapture

/// What every capture backend shares: the pointer drawn in, the placeholder.
@Suite struct CaptureSharedPartsTests {
    /// A 2×2 pointer (premultiplied ARGB): opaque white, half-transparent black, clear, opaque red.
    static func composer() -> CursorComposer {
        var c = CursorComposer()
        let pixels: [UInt32] = [0xFFFF_FFFF, 0x8000_0000, 0x0000_0000, 0xFFFF_0000]
        c.setImage(width: 2, height: 2, hotX: 1, hotY: 1) { pixels[$0] }
        return c
    }

    @Test func thePointerIsPlacedByItsHotSpotAndItsOldAndNewPlacesChanged() {
        var c = Self.composer()
        var changed: [PixelRect] = []
        c.place(pointer: (10, 20), origin: (5, 5), changed: &changed, known: true)
        #expect(c.rect == PixelRect(x: 4, y: 14, width: 2, height: 2))
        #expect(changed == [PixelRect(x: 4, y: 14, width: 2, height: 2)])
        changed.removeAll()
        c.place(pointer: (12, 20), origin: (5, 5), changed: &changed, known: true)
        #expect(changed == [PixelRect(x: 4, y: 14, width: 2, height: 2), PixelRect(x: 6, y: 14, width: 2, height: 2)])
        changed.removeAll()
        c.place(pointer: nil, origin: (5, 5), changed: &changed, known: false)
        #expect(c.rect == nil && changed.isEmpty, "unknown changes: nothing added; no pointer: not drawn")
    }

    @Test func thePointerIsBlendedIntoTheBandsItCrosses() {
        var c = Self.composer()
        var none: [PixelRect] = []
        c.place(pointer: (1, 2), origin: (0, 0), changed: &none, known: false)  // covers (0,1)–(1,2)
        // A band of rows 2–3 of a 4-wide picture, grey: only the pointer's second row is in it.
        var band = [UInt32](repeating: 0xFF80_8080, count: 8)
        band.withUnsafeMutableBytes { c.blend(into: $0.baseAddress!, stride: 16, band: PixelRect(x: 0, y: 2, width: 4, height: 2)) }
        #expect(band[0] == 0xFF80_8080, "a clear pixel leaves the picture")
        #expect(band[1] == 0xFFFF_0000, "an opaque one replaces it")
        #expect(band[2...] == [0xFF80_8080, 0xFF80_8080, 0xFF80_8080, 0xFF80_8080, 0xFF80_8080, 0xFF80_8080])
        var above = [UInt32](repeating: 0xFF80_8080, count: 4)
        above.withUnsafeMutableBytes { c.blend(into: $0.baseAddress!, stride: 16, band: PixelRect(x: 0, y: 1, width: 4, height: 1)) }
        #expect(above[0] == 0xFFFF_FFFF)
        #expect(above[1] == 0xFF40_4040, "half-transparent black over grey: half as bright")
    }

    @Test func aMoveCountsOnlyWhereTheViewSeesIt() {
        var c = Self.composer()
        var none: [PixelRect] = []
        c.place(pointer: (500, 500), origin: (0, 0), changed: &none, known: false)
        let view = PixelRect(x: 0, y: 0, width: 100, height: 100)
        let outside = c.moved(to: (600, 600), in: view), again = c.moved(to: (600, 600), in: view)
        #expect(!outside, "outside, from outside")
        #expect(!again, "and remembered")
        let into = c.moved(to: (50, 50), in: view)
        #expect(into, "into the view")
    }

    /// A sink that keeps what it was handed.
    final class Sink: CaptureSink {
        var begun: [PixelSize] = []
        var pixels: [UInt32] = []
        func begin(size: PixelSize, changed: UnsafeBufferPointer<PixelRect>?, areas: inout [PixelRect]) {
            #expect(changed == nil, "a placeholder says nothing of what changed")
            begun.append(size)
            areas.append(PixelRect(x: 0, y: 0, width: size.width, height: 1))
        }
        func write(_ band: BGRAImageView, x: Int, y: Int) {
            pixels += (0..<band.width).map { band.base.load(fromByteOffset: $0 * 4, as: UInt32.self) }
        }
        func end() {}
        func cancel() {}
    }

    @Test func thePlaceholderIsHandedOverOncePerReason() {
        let placeholder = PlaceholderPicture(), sink = Sink()
        #expect(placeholder.show("minimised", size: PixelSize(width: 8, height: 4), force: false, into: sink))
        #expect(!placeholder.show("minimised", size: PixelSize(width: 8, height: 4), force: false, into: sink))
        #expect(placeholder.show("minimised", size: PixelSize(width: 8, height: 4), force: true, into: sink))
        #expect(placeholder.show("closed", size: PixelSize(width: 0, height: 0), force: false, into: sink))
        #expect(sink.begun == [PixelSize(width: 8, height: 4), PixelSize(width: 8, height: 4), PlaceholderPicture.defaultSize])
        #expect(sink.pixels.allSatisfy { $0 == PlaceholderPicture.pixel } && sink.pixels.count == 8 + 8 + 640)
        placeholder.sourceShown()
        #expect(placeholder.reason == nil && placeholder.show("closed", size: PixelSize(width: 8, height: 4), force: false, into: sink))
    }
}
