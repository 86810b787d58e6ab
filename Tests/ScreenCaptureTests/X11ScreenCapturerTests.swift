import CX11
import Foundation
import Logging
import MediaCore
import Basics
import Testing
import TestSupport
import VideoProcessing
@testable import ScreenCapture

/// Draws on the root window of the test X server (Scripts/test starts a private Xvfb).
final class RootPainter {
    let display: OpaquePointer
    let root: Window
    let width: Int, height: Int

    init() throws {
        let name = try #require(ProcessInfo.processInfo.environment["DISPLAY"], "DISPLAY is not set: run through Scripts/test")
        display = try #require(XOpenDisplay(name))
        let screen = cx11_default_screen(display)
        root = cx11_root_window(display, screen)
        width = Int(cx11_display_width(display, screen))
        height = Int(cx11_display_height(display, screen))
    }
    deinit { XCloseDisplay(display) }

    /// A deterministic BGRX pattern value for pixel (x, y), varied by `seed`.
    static func pixel(_ x: Int, _ y: Int, seed: UInt32) -> UInt32 {
        var h = UInt32(truncatingIfNeeded: x &* 73856093) ^ UInt32(truncatingIfNeeded: y &* 19349663) ^ seed
        h = h &* 2654435761
        return h & 0x00ffffff
    }

    /// Fills the rectangle with the pattern and waits until the server has drawn it.
    func paint(_ r: PixelRect, seed: UInt32) {
        let count = r.width * r.height
        let data = UnsafeMutablePointer<UInt32>.allocate(capacity: count)
        for y in 0..<r.height { for x in 0..<r.width { data[y * r.width + x] = Self.pixel(r.x + x, r.y + y, seed: seed) } }
        let screen = cx11_default_screen(display)
        let img = XCreateImage(display, cx11_default_visual(display, screen), 24, ZPixmap, 0,
                               UnsafeMutableRawPointer(data).assumingMemoryBound(to: CChar.self),
                               UInt32(r.width), UInt32(r.height), 32, Int32(r.width * 4))!
        let gc = XCreateGC(display, root, 0, nil)
        XPutImage(display, root, gc, img, 0, 0, Int32(r.x), Int32(r.y), UInt32(r.width), UInt32(r.height))
        XFreeGC(display, gc)
        XSync(display, 0)
        _ = cx11_destroy_image(img)  // frees `data` too
    }
}

extension RootPainter {
    /// Fills the rectangle with one colour (0xRRGGBB).
    func fill(_ r: PixelRect, color: UInt32) {
        XSetForeground(display, cx11_default_gc(display, cx11_default_screen(display)), UInt(color))
        XFillRectangle(display, root, cx11_default_gc(display, cx11_default_screen(display)), Int32(r.x), Int32(r.y), UInt32(r.width), UInt32(r.height))
        XSync(display, 0)
    }
}

/// Pixel-exact comparison of a captured view against the pattern.
func matchesPattern(_ view: BGRAImageView, origin: (Int, Int), seed: UInt32) -> Bool {
    for y in stride(from: 0, to: view.height, by: 7) {
        let row = view.base.advanced(by: y * view.stride).assumingMemoryBound(to: UInt32.self)
        for x in stride(from: 0, to: view.width, by: 5) {
            if row[x] & 0x00ffffff != RootPainter.pixel(origin.0 + x, origin.1 + y, seed: seed) { return false }
        }
    }
    return true
}

@Suite(.serialized) struct X11ScreenCapturerTests {
    let logger = Logger(label: "test")

    @Test(arguments: [true, false])
    func capturesTheWholeScreenExactly(shm: Bool) throws {
        let painter = try RootPainter()
        painter.paint(PixelRect(x: 0, y: 0, width: painter.width, height: painter.height), seed: 1)
        let cap = try X11ScreenCapturer(display: nil, source: .screen, useSharedMemory: shm, logger: logger)
        #expect(cap.usesSharedMemory == shm)
        #expect(cap.outputSize == PixelSize(width: 1920, height: 1080))
        var ok = false
        let outcome = cap.capture { view in
            ok = view.width == 1920 && view.height == 1080 && matchesPattern(view, origin: (0, 0), seed: 1)
        }
        #expect(outcome == .captured)
        #expect(ok)
    }

    @Test func capturesExactlyTheRegion() throws {
        let painter = try RootPainter()
        painter.paint(PixelRect(x: 0, y: 0, width: painter.width, height: painter.height), seed: 2)
        let region = PixelRect(x: 101, y: 57, width: 640, height: 480)
        let cap = try X11ScreenCapturer(display: nil, source: .region(region), logger: logger)
        var ok = false
        #expect(cap.capture { ok = $0.size == region.size && matchesPattern($0, origin: (101, 57), seed: 2) } == .captured)
        #expect(ok)
    }

    @Test func unchangedScreenIsNotCopiedAgainAndDamageIsSeen() throws {
        let painter = try RootPainter()
        let cap = try X11ScreenCapturer(display: nil, source: .region(PixelRect(x: 0, y: 0, width: 320, height: 240)), logger: logger)
        #expect(cap.capture { _ in } == .captured)  // first capture always
        var called = false
        #expect(cap.capture { _ in called = true } == .unchanged)
        #expect(!called)
        #expect(cap.waitForChange(timeoutNanos: 20_000_000) == false)
        painter.paint(PixelRect(x: 10, y: 10, width: 50, height: 50), seed: 3)
        // Damage arrives as an X event; wait (bounded) for it instead of sleeping.
        #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
        var ok = false
        #expect(cap.capture { ok = matchesPattern(BGRAImageView(base: $0.base.advanced(by: 10 * $0.stride + 40), stride: $0.stride, width: 50, height: 50), origin: (10, 10), seed: 3) } == .captured)
        #expect(ok)
        #expect(cap.capture(force: true) { _ in } == .captured)
    }

    /// A change is grabbed a moment after its first damage is seen, so what its application
    /// draws in further requests meanwhile comes in the same picture, not a frame later.
    @Test func aGrabWaitsForTheRestOfAChange() throws {
        let painter = try RootPainter()
        let clock = DrawingClock()
        clock.manualNanos = SystemClock().nowNanos()  // however slow the machine, the wait is due
        let cap = try X11ScreenCapturer(display: nil, source: .region(PixelRect(x: 0, y: 0, width: 320, height: 240)),
                                        clock: clock, logger: logger)
        #expect(cap.capture { _ in } == .captured)
        cap.settle(nanos: 2_000_000)
        #expect(clock.deadlines.isEmpty, "nothing changed, yet it waited")
        let before = clock.nowNanos()
        painter.paint(PixelRect(x: 10, y: 10, width: 50, height: 50), seed: 11)  // the first request
        #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
        let seen = clock.nowNanos()
        // The application's second request lands while the capturer waits.
        clock.whileSleeping = { painter.paint(PixelRect(x: 200, y: 150, width: 40, height: 40), seed: 12) }
        cap.settle(nanos: 2_000_000)
        let deadline = try #require(clock.deadlines.first, "it did not wait")
        #expect(clock.deadlines.count == 1)
        #expect(deadline >= before + 2_000_000 && deadline <= seen + 2_000_000, "waited until \(deadline - before) ns after the change")
        var first = false, second = false
        #expect(cap.capture { view in
            first = matchesPattern(BGRAImageView(base: view.base.advanced(by: 10 * view.stride + 40), stride: view.stride, width: 50, height: 50),
                                   origin: (10, 10), seed: 11)
            second = matchesPattern(BGRAImageView(base: view.base.advanced(by: 150 * view.stride + 800), stride: view.stride, width: 40, height: 40),
                                    origin: (200, 150), seed: 12)
        } == .captured)
        #expect(first && second, "first request in the picture: \(first), second: \(second)")
        // Grabbed: nothing waits any more.
        cap.settle(nanos: 2_000_000)
        #expect(clock.deadlines.count == 1)
    }

    /// Content faster than the frame rate: while a change waits, the capturer waits for the
    /// next one, and the grab has both, with both in what changed.
    @Test func aWaitingChangeWaitsForTheNextOne() throws {
        let painter = try RootPainter()
        let clock = DrawingClock()
        let region = PixelRect(x: 0, y: 0, width: 640, height: 360)
        let cap = try X11ScreenCapturer(display: nil, source: .region(region), clock: clock, logger: logger)
        #expect(cap.capture { _ in } == .captured)
        #expect(!cap.awaitNextChange(timeoutNanos: 2_000_000_000), "nothing waits, yet it waited for a change")
        painter.paint(PixelRect(x: 10, y: 10, width: 50, height: 50), seed: 21)
        #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
        // The next change is drawn once the capturer waits for it (it reads the time then).
        clock.whenAsked = { painter.paint(PixelRect(x: 300, y: 200, width: 40, height: 40), seed: 22) }
        #expect(cap.awaitNextChange(timeoutNanos: 2_000_000_000), "the next change was not seen")
        var first = false, second = false
        var changed: [PixelRect] = []
        #expect(cap.capture { view in
            first = matchesPattern(BGRAImageView(base: view.base.advanced(by: 10 * view.stride + 40), stride: view.stride, width: 50, height: 50),
                                   origin: (10, 10), seed: 21)
            second = matchesPattern(BGRAImageView(base: view.base.advanced(by: 200 * view.stride + 1200), stride: view.stride, width: 40, height: 40),
                                    origin: (300, 200), seed: 22)
            changed = view.changed.map(Array.init) ?? []
        } == .captured)
        #expect(first && second, "the first change in the picture: \(first), the next: \(second)")
        func inside(_ x: Int, _ y: Int) -> Bool { changed.contains { x >= $0.x && x < $0.x + $0.width && y >= $0.y && y < $0.y + $0.height } }
        #expect(inside(10, 10) && inside(59, 59) && inside(300, 200) && inside(339, 239), "\(changed)")
        #expect(changed.reduce(0) { $0 + $1.width * $1.height } == 50 * 50 + 40 * 40, "\(changed)")
        // No next change: it gives up, and the change that waited is still grabbed, and said.
        painter.paint(PixelRect(x: 100, y: 100, width: 30, height: 30), seed: 23)
        #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
        #expect(!cap.awaitNextChange(timeoutNanos: 20_000_000))
        #expect(cap.capture { view in changed = view.changed.map(Array.init) ?? [] } == .captured)
        #expect(changed.reduce(0) { $0 + $1.width * $1.height } == 30 * 30, "\(changed)")
        #expect(cap.capture { _ in } == .unchanged)
    }

    /// A grab says what changed since the one before, in the picture's pixels (XDamage's
    /// rectangles fetched with XFixes): the encoder skips the rest. A forced grab says nothing.
    @Test func aGrabSaysWhatChangedInThePicturesPixels() throws {
        let painter = try RootPainter()
        let region = PixelRect(x: 100, y: 60, width: 640, height: 360)
        let cap = try X11ScreenCapturer(display: nil, source: .region(region), logger: logger)
        func grab(force: Bool = false) -> [PixelRect]? {
            var changed: [PixelRect]?
            _ = cap.capture(force: force) { view in changed = view.changed.map(Array.init) }
            return changed
        }
        _ = grab()
        // Two boxes inside the region (one across its right edge) and one outside it.
        painter.paint(PixelRect(x: 150, y: 100, width: 40, height: 30), seed: 5)
        painter.paint(PixelRect(x: 700, y: 300, width: 100, height: 20), seed: 6)
        painter.paint(PixelRect(x: 900, y: 500, width: 20, height: 20), seed: 7)
        #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
        let changed = try #require(grab(), "no changed rectangles")
        let covered = changed.reduce(0) { $0 + $1.width * $1.height }
        func inside(_ x: Int, _ y: Int) -> Bool { changed.contains { x >= $0.x && x < $0.x + $0.width && y >= $0.y && y < $0.y + $0.height } }
        #expect(inside(50, 40) && inside(89, 69), "\(changed)")  // 150,100 in the picture's pixels
        #expect(inside(600, 240) && inside(639, 259), "\(changed)")  // 700,300 up to the region's edge
        #expect(!inside(0, 0) && !inside(300, 200), "\(changed)")
        #expect(covered == 40 * 30 + 40 * 20, "\(changed)")
        #expect(changed.allSatisfy { $0.x >= 0 && $0.y >= 0 && $0.x + $0.width <= 640 && $0.y + $0.height <= 360 })
        #expect(grab(force: true) == nil)
    }

    /// The sender's path: MIT-SHM holds one band, not the screen, and a pooled frame is brought
    /// up to date with only what changed since the picture it held. Each frame must be exactly
    /// the conversion of a whole grab (another capturer's), while converting a small part of it.
    @Test func bandedGrabsOfWhatChangedGiveTheWholePictureExactly() throws {
        let painter = try RootPainter()
        painter.paint(PixelRect(x: 0, y: 0, width: painter.width, height: painter.height), seed: 11)
        let cap = try X11ScreenCapturer(display: nil, source: .screen, logger: logger)
        let whole = try X11ScreenCapturer(display: nil, source: .screen, logger: logger)
        let size = cap.outputSize
        #expect(cap.sharedMemoryBytes > 0 && cap.sharedMemoryBytes <= 1 << 20, "segment of \(cap.sharedMemoryBytes) bytes")
        let pool = FramePool(size: size, capacity: 4)
        let assembler = FrameAssembler(pool: pool, nowNanos: { 0 })
        let converter = FrameConverter()
        let reference = VideoFrame(width: size.width, height: size.height)
        func sameAsWholeGrab(_ frame: VideoFrame) -> Bool {
            _ = whole.capture(force: true) { converter.convert(bgra: $0, into: reference) }
            return frame.samePixels(as: reference)
        }
        #expect(cap.capture(force: true, into: assembler) == .captured)
        var previous = try #require(assembler.takeFinished()).frame
        #expect(assembler.pixelsConverted == size.area)
        #expect(sameAsWholeGrab(previous))
        // A clip-sized box moving over a still screen, at odd places; frames go round as in the sender.
        for step in 0..<6 {
            painter.paint(PixelRect(x: 301 + step * 37, y: 203 + step * 11, width: 321, height: 181), seed: 20 + UInt32(step))
            #expect(cap.waitForChange(timeoutNanos: 2_000_000_000))
            #expect(cap.capture(into: assembler) == .captured)
            let frame = try #require(assembler.takeFinished()).frame
            #expect(sameAsWholeGrab(frame), "step \(step)")
            if step == 0 {
                #expect(assembler.pixelsConverted == size.area)  // a new frame: the pool had none free yet
            } else {
                #expect(assembler.pixelsConverted < size.area / 8, "step \(step): \(assembler.pixelsConverted) pixels converted")
            }
            pool.recycle(previous)
            previous = frame
        }
    }

    @Test func regionOutsideTheScreenIsRejected() {
        #expect(throws: CaptureError.self) {
            try X11ScreenCapturer(display: nil, source: .region(PixelRect(x: 1900, y: 0, width: 100, height: 100)), logger: logger)
        }
    }

    @Test func missingDisplayIsNamed() {
        do {
            _ = try X11ScreenCapturer(display: ":87", source: .screen, logger: logger)
            Issue.record("no error")
        } catch {
            #expect("\(error)".contains("\":87\""))
        }
    }

    @Test(arguments: [
        ("640x480+10+20", PixelRect(x: 10, y: 20, width: 640, height: 480)),
        ("1280x720", PixelRect(x: 0, y: 0, width: 1280, height: 720)),
    ])
    func parsesGeometry(text: String, rect: PixelRect) throws {
        #expect(try CaptureSourceSpec.parseRegion(text) == rect)
    }

    @Test(arguments: ["", "640x", "x480", "0x480", "640x480+10", "640x480-1+2", "abc", "640x480+1+2+3"])
    func rejectsBadGeometry(text: String) {
        #expect(throws: CaptureError.self) { try CaptureSourceSpec.parseRegion(text) }
    }
}

/// The system's clocks; a sleep first runs `whileSleeping` once (an application drawing
/// meanwhile) and notes until when it was asked to sleep.
final class DrawingClock: MediaClock, @unchecked Sendable {  // one test thread
    var whileSleeping: (() -> Void)?
    /// Runs once, the next time the capturer reads the time.
    var whenAsked: (() -> Void)?
    private(set) var deadlines: [UInt64] = []
    /// When set, the time stands still there until a sleep moves it to its deadline (no
    /// test depends on how fast the machine runs).
    var manualNanos: UInt64?
    func nowNanos() -> UInt64 {
        if let run = whenAsked {
            whenAsked = nil
            run()
        }
        return manualNanos ?? SystemClock().nowNanos()
    }
    func wallNanos() -> UInt64 { SystemClock().wallNanos() }
    func sleep(untilNanos deadline: UInt64) {
        deadlines.append(deadline)
        whileSleeping?()
        whileSleeping = nil
        if let now = manualNanos {
            manualNanos = max(now, deadline)
            return
        }
        SystemClock().sleep(untilNanos: deadline)
    }
}
