public import CX11
import Foundation

/// A plain X window for capture tests: created, named, mapped, painted, moved, resized,
/// unmapped and destroyed on demand, each step waited for (bounded) rather than slept on.
public final class TestWindow {
    public let display: OpaquePointer
    public let window: Window
    public let root: Window
    public private(set) var width: Int
    public private(set) var height: Int

    /// Opens its own connection to `displayName` (nil: $DISPLAY) and maps a window there.
    public init(displayName: String? = nil, title: String, x: Int, y: Int, width: Int, height: Int) throws {
        let name = displayName ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
        guard let d = XOpenDisplay(name) else { throw TestWindowError("cannot open display \(name)") }
        display = d
        root = cx11_root_window(d, cx11_default_screen(d))
        self.width = width
        self.height = height
        window = XCreateSimpleWindow(d, root, Int32(x), Int32(y), UInt32(width), UInt32(height), 0, 0, 0)
        XStoreName(d, window, title)
        XSelectInput(d, window, StructureNotifyMask)
        XMapRaised(d, window)
        try waitFor(MapNotify)
    }

    deinit {
        XDestroyWindow(display, window)
        XSync(display, 0)
        XCloseDisplay(display)
    }

    public var id: UInt { UInt(window) }

    /// Waits (bounded) for a structure event of `type` on this window.
    public func waitFor(_ type: Int32, seconds: Double = 5) throws {
        XSync(display, 0)
        let deadline = Date().addingTimeInterval(seconds)
        var event = XEvent()
        while Date() < deadline {
            if XCheckTypedWindowEvent(display, window, type, &event) != 0 { return }
            usleep(2_000)
        }
        throw TestWindowError("no X event \(type) for window within \(seconds) s")
    }

    /// Fills the window with BGRA pixels (width × height × 4 bytes).
    public func paint(_ pixels: [UInt8]) {
        precondition(pixels.count == width * height * 4)
        let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: pixels.count)
        copy.initialize(from: pixels, count: pixels.count)
        let screen = cx11_default_screen(display)
        let img = XCreateImage(display, cx11_default_visual(display, screen), 24, ZPixmap, 0,
                               UnsafeMutableRawPointer(copy).assumingMemoryBound(to: CChar.self),
                               UInt32(width), UInt32(height), 32, Int32(width * 4))!
        let gc = XCreateGC(display, window, 0, nil)
        XPutImage(display, window, gc, img, 0, 0, 0, 0, UInt32(width), UInt32(height))
        XFreeGC(display, gc)
        XSync(display, 0)
        _ = cx11_destroy_image(img)  // frees `copy`
    }

    public func move(x: Int, y: Int) throws {
        XMoveWindow(display, window, Int32(x), Int32(y))
        try waitFor(ConfigureNotify)
    }

    public func resize(width: Int, height: Int) throws {
        XResizeWindow(display, window, UInt32(width), UInt32(height))
        self.width = width
        self.height = height
        try waitFor(ConfigureNotify)
    }

    public func unmap() throws {
        XUnmapWindow(display, window)
        try waitFor(UnmapNotify)
    }

    public func map() throws {
        XMapRaised(display, window)
        try waitFor(MapNotify)
    }
}

public struct TestWindowError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// A deterministic BGRA pattern (fine detail, every pixel different), varied by `seed`.
public func patternPixels(width: Int, height: Int, seed: UInt32) -> [UInt8] {
    var out = [UInt8](repeating: 255, count: width * height * 4)
    for y in 0..<height {
        for x in 0..<width {
            var h = UInt32(truncatingIfNeeded: x &* 73856093) ^ UInt32(truncatingIfNeeded: y &* 19349663) ^ seed
            h = h &* 2654435761
            let i = (y * width + x) * 4
            out[i] = UInt8(truncatingIfNeeded: h)
            out[i + 1] = UInt8(truncatingIfNeeded: h >> 8)
            out[i + 2] = UInt8(truncatingIfNeeded: h >> 16)
        }
    }
    return out
}

/// Whether a captured BGRA view equals `pixels` (ignoring the X byte).
public func sameBGR(_ base: UnsafeRawPointer, stride: Int, width: Int, height: Int, as pixels: [UInt8]) -> Bool {
    for y in 0..<height {
        let row = base.advanced(by: y * stride).assumingMemoryBound(to: UInt8.self)
        for x in 0..<width {
            let i = (y * width + x) * 4
            if row[x * 4] != pixels[i] || row[x * 4 + 1] != pixels[i + 1] || row[x * 4 + 2] != pixels[i + 2] { return false }
        }
    }
    return true
}
