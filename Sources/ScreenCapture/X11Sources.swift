internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

/// A RandR monitor (RandR 1.5 `XRRGetMonitors`).
public struct MonitorInfo: Sendable, Equatable {
    public var index: Int
    public var name: String
    public var primary: Bool
    public var rect: PixelRect
}

/// A top-level window as a user sees it: the client window with its title, and its geometry
/// on the root window.
public struct WindowInfo: Sendable, Equatable {
    public var id: UInt
    public var title: String
    public var rect: PixelRect
    public var mapped: Bool
}

/// Everything `screenshare sources` lists from one X display.
public struct DisplaySources: Sendable {
    public var display: String
    public var screen: PixelSize
    public var monitors: [MonitorInfo]
    public var windows: [WindowInfo]
}

/// Opens a display by name (nil: $DISPLAY); the error names the display.
func openDisplay(_ name: String?) throws -> (OpaquePointer, String) {
    let shownName = name ?? (getenv("DISPLAY").map { String(cString: $0) } ?? "")
    guard !shownName.isEmpty else {
        throw CaptureError(.displayUnavailable, "no X display: set DISPLAY or pass --display :N")
    }
    guard let d = XOpenDisplay(shownName) else {
        throw CaptureError(.displayUnavailable, "cannot open X display \"\(shownName)\" (is an X server running there, and may you connect?)")
    }
    return (d, shownName)
}

/// Lists monitors and top-level windows of an X display.
public func listDisplaySources(display name: String?) throws -> DisplaySources {
    let (d, shownName) = try openDisplay(name)
    defer { XCloseDisplay(d) }
    cx11_install_error_handler()
    let screen = cx11_default_screen(d)
    let size = PixelSize(width: Int(cx11_display_width(d, screen)), height: Int(cx11_display_height(d, screen)))
    let root = cx11_root_window(d, screen)
    return DisplaySources(display: shownName, screen: size, monitors: X11Query.monitors(d, root: root),
                          windows: X11Query.topLevelWindows(d, root: root))
}

/// Xlib queries shared by the capturer and the source listing. Callers own the display.
enum X11Query {
    static func monitors(_ d: OpaquePointer, root: Window) -> [MonitorInfo] {
        var ev: Int32 = 0, er: Int32 = 0
        guard XRRQueryExtension(d, &ev, &er) != 0 else { return [] }
        var count: Int32 = 0
        guard let list = XRRGetMonitors(d, root, 1, &count) else { return [] }
        defer { XRRFreeMonitors(list) }
        var out: [MonitorInfo] = []
        for i in 0..<Int(count) {
            let m = list[i]
            var name = "monitor-\(i)"
            if let cName = XGetAtomName(d, m.name) {
                name = String(cString: cName)
                XFree(cName)
            }
            out.append(MonitorInfo(index: i, name: name, primary: m.primary != 0,
                                   rect: PixelRect(x: Int(m.x), y: Int(m.y), width: Int(m.width), height: Int(m.height))))
        }
        return out
    }

    /// The window's title: _NET_WM_NAME (UTF-8) or else WM_NAME; nil when it has none.
    static func title(_ d: OpaquePointer, _ w: Window) -> String? {
        let netName = XInternAtom(d, "_NET_WM_NAME", 0)
        let utf8 = XInternAtom(d, "UTF8_STRING", 0)
        var type: Atom = 0
        var format: Int32 = 0
        var items: UInt = 0, after: UInt = 0
        var data: UnsafeMutablePointer<UInt8>?
        if XGetWindowProperty(d, w, netName, 0, 1024, 0, utf8, &type, &format, &items, &after, &data) == Success,
           let data {
            defer { XFree(data) }
            if type == utf8, format == 8, items > 0 {
                return String(decoding: UnsafeBufferPointer(start: data, count: Int(items)), as: UTF8.self)
            }
        }
        var name: UnsafeMutablePointer<CChar>?
        if XFetchName(d, w, &name) != 0, let name {
            defer { XFree(name) }
            return String(cString: name)
        }
        return nil
    }

    static func children(_ d: OpaquePointer, _ w: Window) -> [Window] {
        var rootReturn: Window = 0, parent: Window = 0
        var list: UnsafeMutablePointer<Window>?
        var count: UInt32 = 0
        guard XQueryTree(d, w, &rootReturn, &parent, &list, &count) != 0, let list else { return [] }
        defer { XFree(list) }
        return Array(UnsafeBufferPointer(start: list, count: Int(count)))
    }

    static func parent(_ d: OpaquePointer, _ w: Window) -> Window? {
        var rootReturn: Window = 0, parent: Window = 0
        var list: UnsafeMutablePointer<Window>?
        var count: UInt32 = 0
        guard XQueryTree(d, w, &rootReturn, &parent, &list, &count) != 0 else { return nil }
        if let list { XFree(list) }
        return parent
    }

    /// The child of the root that contains `w` (the window manager's frame, or `w` itself).
    static func topLevel(_ d: OpaquePointer, root: Window, of w: Window) -> Window? {
        var current = w
        for _ in 0..<64 {
            guard let p = parent(d, current) else { return nil }
            if p == root || p == 0 { return current }
            current = p
        }
        return nil
    }

    /// Geometry on the root window, and whether the window is viewable.
    static func geometry(_ d: OpaquePointer, root: Window, _ w: Window) -> (PixelRect, Bool)? {
        var attrs = XWindowAttributes()
        guard XGetWindowAttributes(d, w, &attrs) != 0 else { return nil }
        var x: Int32 = 0, y: Int32 = 0
        var child: Window = 0
        XTranslateCoordinates(d, w, root, 0, 0, &x, &y, &child)
        return (PixelRect(x: Int(x), y: Int(y), width: Int(attrs.width), height: Int(attrs.height)),
                attrs.map_state == IsViewable)
    }

    /// Top-level client windows with a title, in stacking order (bottom first): each child of
    /// the root with a title, or else its first titled descendant (under a window manager the
    /// title is on the client window inside the frame).
    static func topLevelWindows(_ d: OpaquePointer, root: Window) -> [WindowInfo] {
        var out: [WindowInfo] = []
        func titled(_ w: Window, depth: Int) -> (Window, String)? {
            if let t = title(d, w), !t.isEmpty { return (w, t) }
            guard depth < 3 else { return nil }
            for c in children(d, w) { if let found = titled(c, depth: depth + 1) { return found } }
            return nil
        }
        for top in children(d, root) {
            guard let (client, name) = titled(top, depth: 0),
                  let (rect, mapped) = geometry(d, root: root, client) else { continue }
            out.append(WindowInfo(id: UInt(client), title: name, rect: rect, mapped: mapped))
        }
        _ = cx11_take_error()
        return out
    }

    /// Finds the window a `--window` argument names: a window id (decimal or 0x hex) that
    /// exists, or a case-insensitive substring of one window's title.
    /// - Throws: `CaptureError` saying that none or several windows match.
    static func findWindow(_ d: OpaquePointer, root: Window, spec: String, displayName: String) throws -> Window {
        let trimmed = String(spec.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
        let id: UInt? = trimmed.lowercased().hasPrefix("0x") ? UInt(trimmed.dropFirst(2), radix: 16) : UInt(trimmed)
        if let id {
            var attrs = XWindowAttributes()
            _ = cx11_take_error()
            let ok = XGetWindowAttributes(d, Window(id), &attrs) != 0
            XSync(d, 0)
            if ok && cx11_take_error() == 0 { return Window(id) }
            throw CaptureError(.sourceNotFound, "--window \(spec): no window with that id on \"\(displayName)\" (see `screenshare sources`)")
        }
        guard !trimmed.isEmpty else { throw CaptureError(.badArgument, "--window: give a window id or part of its title") }
        let needle = trimmed.lowercased()
        let windows = topLevelWindows(d, root: root)
        let matches = windows.filter { $0.title.lowercased().contains(needle) }
        let exact = matches.filter { $0.title.lowercased() == needle }
        if exact.count == 1 { return Window(exact[0].id) }
        if matches.count == 1 { return Window(matches[0].id) }
        if matches.isEmpty {
            throw CaptureError(.sourceNotFound, "--window '\(spec)': no window title contains it on \"\(displayName)\" (see `screenshare sources`)")
        }
        let list = matches.prefix(8).map { "0x\(String($0.id, radix: 16)) \"\($0.title)\"" }.joined(separator: ", ")
        throw CaptureError(.badArgument, "--window '\(spec)' matches \(matches.count) windows (\(list)); pass the window id")
    }

    /// Finds a RandR monitor by name or index.
    static func findMonitor(_ d: OpaquePointer, root: Window, spec: String, displayName: String) throws -> MonitorInfo {
        let all = monitors(d, root: root)
        if let i = Int(spec), all.indices.contains(i) { return all[i] }
        if let m = all.first(where: { $0.name == spec }) { return m }
        let names = all.map { "\($0.index): \($0.name) \($0.rect)" }.joined(separator: ", ")
        throw CaptureError(.sourceNotFound, "--monitor \(spec): no such monitor on \"\(displayName)\" (monitors: \(names.isEmpty ? "none" : names))")
    }
}
