import CX11
import Foundation
import Logging
import MediaCore
import Basics
import Testing
import X11TestSupport
@testable import ScreenCapture

/// One window captured from its own pixmap (XComposite): only that window, followed through
/// moves and resizes, a placeholder (never the screen) while it is hidden or gone.
/// An extension of the serialized capture suite: these tests map windows on the shared test
/// display, which would show in the whole-screen captures if they ran at the same time.
extension X11ScreenCapturerTests {

    /// Captures once (waiting, bounded, for the change to arrive) and returns the outcome and a
    /// copy of the picture.
    func captureNext(_ cap: X11ScreenCapturer) -> (CaptureOutcome, PixelSize, [UInt8]) {
        _ = cap.waitForChange(timeoutNanos: 2_000_000_000)
        var pixels: [UInt8] = []
        var size = PixelSize(width: 0, height: 0)
        let outcome = cap.capture { v in
            size = v.size
            pixels = [UInt8](repeating: 0, count: v.width * v.height * 4)
            for y in 0..<v.height {
                pixels.withUnsafeMutableBytes { dst in
                    dst.baseAddress!.advanced(by: y * v.width * 4).copyMemory(from: v.base.advanced(by: y * v.stride), byteCount: v.width * 4)
                }
            }
        }
        return (outcome, size, pixels)
    }

    func matches(_ pixels: [UInt8], _ size: PixelSize, _ expected: [UInt8]) -> Bool {
        pixels.withUnsafeBytes { sameBGR($0.baseAddress!, stride: size.width * 4, width: size.width, height: size.height, as: expected) }
    }

    @Test func showsOnlyTheWindowEvenWhenCoveredAndFollowsMoves() throws {
        let target = try TestWindow(title: "capture-target \(UUID().uuidString.prefix(6))", x: 100, y: 100, width: 320, height: 240)
        let cap = try X11ScreenCapturer(display: nil, source: .window(String(target.id)), logger: logger)
        let content = patternPixels(width: 320, height: 240, seed: 11)
        target.paint(content)
        // Another window in front, covering most of the target.
        let cover = try TestWindow(title: "capture-cover", x: 150, y: 150, width: 300, height: 200)
        cover.paint(patternPixels(width: 300, height: 200, seed: 12))
        var (outcome, size, pixels) = captureNext(cap)
        #expect(outcome == .captured)
        #expect(size == PixelSize(width: 320, height: 240))
        #expect(matches(pixels, size, content), "the covered window's own pixels, not the cover's")

        try target.move(x: 900, y: 600)
        target.paint(content)
        (outcome, size, pixels) = captureNext(cap)
        #expect(outcome == .captured)
        #expect(matches(pixels, size, content), "followed after the move")
    }

    @Test func followsResizes() throws {
        let target = try TestWindow(title: "capture-resize", x: 50, y: 50, width: 200, height: 100)
        let cap = try X11ScreenCapturer(display: nil, source: .window("0x" + String(target.id, radix: 16)), logger: logger)
        target.paint(patternPixels(width: 200, height: 100, seed: 21))
        _ = captureNext(cap)
        try target.resize(width: 400, height: 300)
        let bigger = patternPixels(width: 400, height: 300, seed: 22)
        target.paint(bigger)
        let (outcome, size, pixels) = captureNext(cap)
        #expect(outcome == .captured)
        #expect(size == PixelSize(width: 400, height: 300))
        #expect(cap.outputSize == PixelSize(width: 400, height: 300))
        #expect(matches(pixels, size, bigger))
    }

    @Test func hiddenOrClosedWindowGivesAPlaceholderNeverTheScreen() throws {
        // The screen behind has a distinct pattern: it must never appear.
        let painter = try RootPainter()
        painter.paint(PixelRect(x: 0, y: 0, width: 800, height: 600), seed: 31)
        var target: TestWindow? = try TestWindow(title: "capture-hide", x: 10, y: 10, width: 160, height: 120)
        let cap = try X11ScreenCapturer(display: nil, source: .window("capture-hide"), logger: logger)
        let content = patternPixels(width: 160, height: 120, seed: 32)
        target!.paint(content)
        #expect(captureNext(cap).0 == .captured)

        try target!.unmap()
        var (outcome, size, pixels) = captureNext(cap)
        guard case .placeholder(let reason) = outcome else { Issue.record("got \(outcome)"); return }
        #expect(reason.contains("not mapped"))
        #expect(size == PixelSize(width: 160, height: 120))
        #expect(Set(stride(from: 0, to: pixels.count, by: 4).map { pixels[$0] }).count == 1, "a flat placeholder")
        // Still hidden: nothing new to send.
        #expect(cap.capture { _ in } == .unchanged)

        try target!.map()
        target!.paint(content)
        (outcome, size, pixels) = captureNext(cap)
        #expect(outcome == .captured)
        #expect(matches(pixels, size, content))

        target = nil  // destroyed
        (outcome, _, pixels) = captureNext(cap)
        guard case .placeholder(let gone) = outcome else { Issue.record("got \(outcome)"); return }
        #expect(gone.contains("gone"))
        #expect(Set(stride(from: 0, to: pixels.count, by: 4).map { pixels[$0] }).count == 1)
    }

    @Test func windowsAreFoundByTitleOrIdAndBadNamesAreClearErrors() throws {
        let a = try TestWindow(title: "Quarterly Report — Draft", x: 0, y: 0, width: 64, height: 64)
        let b = try TestWindow(title: "Quarterly Report — Final", x: 70, y: 0, width: 64, height: 64)
        let list = try listDisplaySources(display: nil)
        let listed = try #require(list.windows.first { $0.id == a.id })
        #expect(listed.title == "Quarterly Report — Draft")
        #expect(listed.rect == PixelRect(x: 0, y: 0, width: 64, height: 64))
        #expect(listed.mapped)
        #expect(list.windows.contains { $0.id == b.id })

        #expect(try X11ScreenCapturer(display: nil, source: .window("report — final"), logger: logger).outputSize == PixelSize(width: 64, height: 64))
        do {
            _ = try X11ScreenCapturer(display: nil, source: .window("Quarterly Report"), logger: logger)
            Issue.record("an ambiguous title was accepted")
        } catch let e as CaptureError {
            #expect(e.message.contains("matches 2 windows"))
            #expect(e.message.contains("0x" + String(a.id, radix: 16)))
        }
        do {
            _ = try X11ScreenCapturer(display: nil, source: .window("no such window title"), logger: logger)
            Issue.record("a missing window was accepted")
        } catch let e as CaptureError {
            #expect(e.kind == .sourceNotFound)
            #expect(e.message.contains("no such window title"))
        }
        #expect(throws: CaptureError.self) { try X11ScreenCapturer(display: nil, source: .window("0x7ffffff0"), logger: logger) }
    }

    @Test func cursorIsDrawnInOnlyWhenAsked() throws {
        let painter = try RootPainter()
        let white = [UInt32](repeating: 0xffffff, count: 1)
        _ = white
        painter.fill(PixelRect(x: 1000, y: 500, width: 200, height: 200), color: 0xffffff)
        XWarpPointer(painter.display, 0, painter.root, 0, 0, 0, 0, 1100, 600)
        XSync(painter.display, 0)
        let region = CaptureSourceSpec.region(PixelRect(x: 1000, y: 500, width: 200, height: 200))
        func nonWhite(_ cap: X11ScreenCapturer) -> Int {
            var count = 0
            _ = cap.capture(force: true) { v in
                for y in 0..<v.height {
                    let row = v.base.advanced(by: y * v.stride).assumingMemoryBound(to: UInt32.self)
                    for x in 0..<v.width where row[x] & 0xffffff != 0xffffff { count += 1 }
                }
            }
            return count
        }
        let without = try X11ScreenCapturer(display: nil, source: region, drawCursor: false, logger: logger)
        #expect(nonWhite(without) == 0)
        let with = try X11ScreenCapturer(display: nil, source: region, drawCursor: true, logger: logger)
        let drawn = nonWhite(with)
        #expect(drawn > 20, "cursor pixels drawn: \(drawn)")
        // Let events of the set-up (cursor selection) settle, then: moving the pointer is
        // noticed without any damage on screen.
        for _ in 0..<3 where with.waitForChange(timeoutNanos: 50_000_000) { _ = with.capture { _ in } }
        #expect(with.waitForChange(timeoutNanos: 50_000_000) == false)
        XWarpPointer(painter.display, 0, painter.root, 0, 0, 0, 0, 1050, 550)
        XSync(painter.display, 0)
        #expect(with.waitForChange(timeoutNanos: 1_000_000_000))
    }
}
