import CX11
import Foundation
import MediaCore
import Basics
import Testing
import X11TestSupport
@testable import VideoOutput

/// The viewer window on a private Xvfb, read back with XGetImage.
@Suite struct X11VideoWindowTests {
    /// An I420 picture: left half one grey, right half another.
    final class Picture {
        let w: Int, h: Int
        var y: [UInt8], u: [UInt8], v: [UInt8]
        init(width: Int, height: Int, left: UInt8, right: UInt8) {
            w = width; h = height
            y = (0..<(width * height)).map { ($0 % width) < width / 2 ? left : right }
            u = [UInt8](repeating: 128, count: (width / 2) * (height / 2))
            v = u
        }
        func view<R>(_ body: (I420View) -> R) -> R {
            y.withUnsafeBufferPointer { yp in u.withUnsafeBufferPointer { up in v.withUnsafeBufferPointer { vp in
                body(I420View(y: yp.baseAddress!, u: up.baseAddress!, v: vp.baseAddress!, strideY: w, strideU: w / 2, strideV: w / 2, width: w, height: h))
            } } }
        }
    }

    /// The green channel of window pixel (x, y).
    func pixel(_ d: OpaquePointer, _ w: UInt, _ x: Int, _ y: Int) -> Int {
        let img = XGetImage(d, Window(w), Int32(x), Int32(y), 1, 1, UInt.max, ZPixmap)!
        defer { _ = cx11_destroy_image(img) }
        let p = UnsafeRawPointer(img.pointee.data!).load(as: UInt32.self)
        return Int((p >> 8) & 0xff)
    }

    @Test func showsThePictureAndLetterboxesWhenResized() throws {
        let xvfb = try PrivateXvfb(width: 1280, height: 720)
        let window = try X11VideoWindow(display: xvfb.name, title: "viewer", size: PixelSize(width: 320, height: 240))
        let picture = Picture(width: 320, height: 240, left: 50, right: 200)
        picture.view { window.show($0) }
        window.sync()
        let d = try #require(XOpenDisplay(xvfb.name))
        defer { XCloseDisplay(d) }
        // Studio-range Y 50 → (50-16)*255/219 ≈ 40; Y 200 → ≈ 214 (±3 for rounding).
        #expect(abs(pixel(d, window.windowID, 40, 120) - 40) <= 3)
        #expect(abs(pixel(d, window.windowID, 280, 120) - 214) <= 3)

        // Twice as wide: the 4:3 picture is centred between black bars.
        XResizeWindow(d, Window(window.windowID), 640, 240)
        XSync(d, 0)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            picture.view { window.show($0) }
            window.sync()
            if pixel(d, window.windowID, 10, 120) == 0 && abs(pixel(d, window.windowID, 200, 120) - 40) <= 3 { break }
            usleep(10_000)
        }
        #expect(pixel(d, window.windowID, 10, 120) == 0, "left bar is black")
        #expect(pixel(d, window.windowID, 630, 120) == 0, "right bar is black")
        #expect(abs(pixel(d, window.windowID, 200, 120) - 40) <= 3)
        #expect(abs(pixel(d, window.windowID, 440, 120) - 214) <= 3)
        #expect(window.framesShown >= 2)
    }

    func windowSize(_ d: OpaquePointer, _ w: UInt) -> PixelSize {
        var attributes = XWindowAttributes()
        XGetWindowAttributes(d, Window(w), &attributes)
        return PixelSize(width: Int(attributes.width), height: Int(attributes.height))
    }

    @Test func takesThePicturesSizeUntilTheUserResizesIt() throws {
        let xvfb = try PrivateXvfb(width: 1280, height: 720)
        let window = try X11VideoWindow(display: xvfb.name, title: "viewer", size: PixelSize(width: 320, height: 240))
        let d = try #require(XOpenDisplay(xvfb.name))
        defer { XCloseDisplay(d) }

        // A 640x360 picture: the window grows to it and draws it unscaled.
        let wide = Picture(width: 640, height: 360, left: 50, right: 200)
        wide.view { window.show($0) }
        window.sync()
        #expect(windowSize(d, window.windowID) == PixelSize(width: 640, height: 360))
        #expect(window.framesScaled == 0)
        #expect(abs(pixel(d, window.windowID, 10, 180) - 40) <= 3)
        #expect(abs(pixel(d, window.windowID, 630, 180) - 214) <= 3)

        // Larger than the screen: clamped to it, and scaled into it.
        let huge = Picture(width: 1920, height: 1080, left: 50, right: 200)
        huge.view { window.show($0) }
        window.sync()
        #expect(windowSize(d, window.windowID) == PixelSize(width: 1280, height: 720))
        #expect(window.framesScaled == 1)
        #expect(abs(pixel(d, window.windowID, 1270, 700) - 214) <= 3)

        // The user sizes it: from then on it keeps that size, and pictures are fitted into it.
        XResizeWindow(d, Window(window.windowID), 500, 300)
        XSync(d, 0)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            wide.view { window.show($0) }
            window.sync()
            if windowSize(d, window.windowID) == PixelSize(width: 500, height: 300),
               abs(pixel(d, window.windowID, 490, 150) - 214) <= 3 { break }
            usleep(10_000)
        }
        for _ in 0..<3 { wide.view { window.show($0) } }
        window.sync()
        #expect(windowSize(d, window.windowID) == PixelSize(width: 500, height: 300))
        #expect(abs(pixel(d, window.windowID, 10, 150) - 40) <= 3)
        #expect(abs(pixel(d, window.windowID, 490, 150) - 214) <= 3)
    }

    @Test func convertsOnlyTheBandsThatChanged() throws {
        let xvfb = try PrivateXvfb(width: 1280, height: 720)
        let window = try X11VideoWindow(display: xvfb.name, title: "viewer", size: PixelSize(width: 640, height: 360))
        let d = try #require(XOpenDisplay(xvfb.name))
        defer { XCloseDisplay(d) }
        let picture = Picture(width: 640, height: 360, left: 50, right: 200)
        picture.view { window.show($0) }
        #expect(window.bandsConverted == 23, "360 rows: 22 bands of 16 and one of 8")
        // The same picture again: nothing to convert, and the window still shows it.
        picture.view { window.show($0) }
        window.sync()
        #expect(window.bandsConverted == 23)
        #expect(abs(pixel(d, window.windowID, 10, 350) - 40) <= 3)
        // Rows 100–110 change in luma (bands 6 of rows 96–111), row 300's chroma only (band 18).
        for row in 100...110 { for col in 0..<320 { picture.y[row * 640 + col] = 120 } }
        for col in 0..<320 { picture.u[150 * 320 + col] = 90 }
        picture.view { window.show($0) }
        window.sync()
        #expect(window.bandsConverted == 25)
        #expect(abs(pixel(d, window.windowID, 10, 105) - 121) <= 3, "the changed band is drawn")
        #expect(abs(pixel(d, window.windowID, 10, 95) - 40) <= 3, "the band above is untouched")
        #expect(abs(pixel(d, window.windowID, 10, 200) - 40) <= 3)
        #expect(pixel(d, window.windowID, 10, 300) != pixel(d, window.windowID, 10, 280), "the chroma change is drawn")
        #expect(window.framesShown == 3)

    }

    @Test(arguments: [
        (PixelSize(width: 1920, height: 1080), PixelSize(width: 640, height: 480), PixelSize(width: 640, height: 360)),
        (PixelSize(width: 640, height: 480), PixelSize(width: 1280, height: 480), PixelSize(width: 640, height: 480)),
        (PixelSize(width: 1080, height: 1920), PixelSize(width: 1280, height: 720), PixelSize(width: 404, height: 720)),
    ])
    func fitsKeepingTheAspectRatio(picture: PixelSize, box: PixelSize, expected: PixelSize) {
        #expect(X11VideoWindow.fitAspect(picture, into: box) == expected)
    }

    @Test func missingDisplayIsNamed() {
        do {
            _ = try X11VideoWindow(display: ":89", title: "x", size: PixelSize(width: 16, height: 16))
            Issue.record("no error")
        } catch {
            #expect("\(error)".contains(":89"))
            #expect("\(error)".contains("--headless"))
        }
    }
}
