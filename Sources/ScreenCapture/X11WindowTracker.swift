internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import Logging
import MediaCore
import Basics

/// One top-level X11 window followed for capture: its size, border and place on the root,
/// whether it is mapped or gone, and its own off-screen pixmap (XComposite, automatic
/// redirection), so windows in front of it never show. Used from the capturer's thread only.
final class X11WindowTracker {
    let top: Window
    /// "window 0x… "title"", for messages.
    let label: String
    private let display: OpaquePointer
    private let root: Window
    private(set) var usesComposite = false
    private var pixmap: Pixmap = 0
    /// Its inside on the root window, and its border's width.
    private(set) var rect = PixelRect(x: 0, y: 0, width: 0, height: 0)
    private(set) var border = 0
    /// Destroyed (closed): for good.
    private(set) var gone = false

    init(display: OpaquePointer, root: Window, top: Window, label: String, displayName: String, logger: Logger) {
        self.display = display
        self.root = root
        self.top = top
        self.label = label
        var major: Int32 = 0, minor: Int32 = 0, ev: Int32 = 0, er: Int32 = 0
        if XCompositeQueryExtension(display, &ev, &er) != 0, XCompositeQueryVersion(display, &major, &minor) != 0,
           major > 0 || minor >= 2 {
            XCompositeRedirectWindow(display, top, Int32(CompositeRedirectAutomatic))
            usesComposite = true
            // Without a compositing manager the new pixmap starts as a copy of the screen,
            // windows in front included. Clear it to the windows' backgrounds and ask the
            // application to repaint (Expose), so no other window's pixels are ever sent.
            Self.clearAndExpose(display, top)
        } else {
            logger.warning("XComposite unavailable on \"\(displayName)\": windows in front of \(label) may show in the capture")
        }
        XSelectInput(display, top, StructureNotifyMask)
        refreshGeometry()
    }

    private static func clearAndExpose(_ d: OpaquePointer, _ w: Window, depth: Int = 0) {
        XClearArea(d, w, 0, 0, 0, 0, 1)
        guard depth < 4 else { return }
        for child in X11Query.children(d, w) { clearAndExpose(d, child, depth: depth + 1) }
    }

    /// Takes an X event about the window. Returns whether its picture changed (resized,
    /// mapped, unmapped, destroyed); `destroyed` is set when it was.
    func handle(_ event: inout XEvent, destroyed: inout Bool) -> Bool {
        switch event.type {
        case ConfigureNotify where event.xconfigure.window == top:
            let c = event.xconfigure
            let resized = PixelSize(width: Int(c.width), height: Int(c.height)) != rect.size
            if resized { freePixmap() }
            refreshGeometry()
            return resized
        case MapNotify where event.xmap.window == top, UnmapNotify where event.xunmap.window == top:
            freePixmap()
            return true
        case DestroyNotify where event.xdestroywindow.window == top:
            gone = true
            destroyed = true
            freePixmap()
            return true
        default:
            return false
        }
    }

    /// Reads its size, border and position on the root; false if it is not viewable.
    @discardableResult
    func refreshGeometry() -> Bool {
        var attrs = XWindowAttributes()
        _ = cx11_take_error()
        guard XGetWindowAttributes(display, top, &attrs) != 0, cx11_take_error() == 0 else {
            gone = true
            return false
        }
        var x: Int32 = 0, y: Int32 = 0
        var child: Window = 0
        XTranslateCoordinates(display, top, root, 0, 0, &x, &y, &child)
        border = Int(attrs.border_width)
        rect = PixelRect(x: Int(x), y: Int(y), width: Int(attrs.width), height: Int(attrs.height))
        return attrs.map_state == IsViewable
    }

    /// What to grab it from and at what offset: its pixmap (inside its border) with
    /// XComposite, else the window itself; nil when the pixmap cannot be had yet.
    func source() -> (drawable: Drawable, offset: Int)? {
        guard usesComposite else { return (top, 0) }
        if pixmap == 0 {
            _ = cx11_take_error()
            pixmap = XCompositeNameWindowPixmap(display, top)
            XSync(display, 0)
            if cx11_take_error() != 0 { pixmap = 0 }
        }
        return pixmap == 0 ? nil : (pixmap, border)
    }

    /// Forgets the pixmap (a resize or a map makes a new one).
    func freePixmap() {
        if pixmap != 0 { XFreePixmap(display, pixmap) }
        pixmap = 0
    }
}
