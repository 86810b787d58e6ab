internal import CX11
#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

/// What changed on an X11 drawable since the last grab: XDamage reports that its region went
/// from empty to changed (an event), and with XFixes ≥ 2 the region itself is moved into one
/// of ours at each grab and read as rectangles, for the encoder to skip the rest. While the
/// capturer waits for the next change (``hold()``), what changed so far is kept aside and
/// grabbed with it. Used from the capturer's thread only.
final class X11DamageTracker {
    private let display: OpaquePointer
    private var damage: Damage = 0
    private var eventBase: Int32 = 0
    /// XDamage's region moved here at each grab (XFixes ≥ 2); 0 without.
    private var changedRegion: XserverRegion = 0
    /// What XDamage held while a change waited for the next: grabbed with that one.
    private var heldRegion: XserverRegion = 0
    private var holding = false
    /// XDamage events seen (each says a region went from empty to changed).
    private(set) var events: UInt64 = 0
    /// What changed, in the picture's pixels, after ``take(force:area:)``; `known` false when
    /// it cannot say (forced grabs, windows, no XFixes).
    var changed: [PixelRect] = []
    private(set) var known = false

    /// Tracks `drawable`; nil when the server has no XDamage (every frame is captured then).
    init?(display: OpaquePointer, drawable: Drawable) {
        self.display = display
        var errorBase: Int32 = 0
        guard XDamageQueryExtension(display, &eventBase, &errorBase) != 0 else { return nil }
        damage = XDamageCreate(display, drawable, Int32(XDamageReportNonEmpty))
        var fixesEvent: Int32 = 0, fixesError: Int32 = 0, major: Int32 = 2, minor: Int32 = 0
        if XFixesQueryExtension(display, &fixesEvent, &fixesError) != 0, XFixesQueryVersion(display, &major, &minor) != 0, major >= 2 {
            changedRegion = XFixesCreateRegion(display, nil, 0)
            heldRegion = XFixesCreateRegion(display, nil, 0)
            changed.reserveCapacity(64)
        }
    }

    /// Whether it still reports (its drawable was not destroyed).
    var isActive: Bool { damage != 0 }

    /// Whether an event of `type` is its damage report (counted).
    func isDamageEvent(_ type: Int32) -> Bool {
        guard damage != 0, type == eventBase + XDamageNotify else { return false }
        events &+= 1
        return true
    }

    /// The drawable was destroyed, and its damage object with it.
    func drawableDestroyed() { damage = 0 }

    /// Empties the damage for the next grab, keeping what it covered as rectangles of the
    /// picture of `area` (root coordinates) when given; nil (a window) or `force` say nothing.
    func take(force: Bool, area: PixelRect?) {
        changed.removeAll(keepingCapacity: true)
        known = false
        defer {
            if holding {
                XFixesSetRegion(display, heldRegion, nil, 0)
                holding = false
            }
        }
        guard damage != 0 else { return }
        guard changedRegion != 0, !force, let area else {
            XDamageSubtract(display, damage, 0, 0)
            return
        }
        XDamageSubtract(display, damage, 0, changedRegion)
        if holding { XFixesUnionRegion(display, changedRegion, changedRegion, heldRegion) }
        var count: Int32 = 0
        let rects = XFixesFetchRegion(display, changedRegion, &count)
        guard rects != nil || count == 0 else { return }
        defer { if let rects { XFree(rects) } }
        for i in 0..<Int(count) {
            guard let r = rects?[i] else { break }
            let root = PixelRect(x: Int(r.x), y: Int(r.y), width: Int(r.width), height: Int(r.height))
            if let inside = root.intersection(area) {
                changed.append(PixelRect(x: inside.x - area.x, y: inside.y - area.y, width: inside.width, height: inside.height))
            }
        }
        known = true
    }

    /// Empties XDamage's region into the held one (the next change is then reported), before
    /// waiting for the next change.
    func hold() {
        guard damage != 0 else { return }
        if heldRegion != 0 {
            XDamageSubtract(display, damage, 0, changedRegion)
            XFixesUnionRegion(display, heldRegion, heldRegion, changedRegion)
            holding = true
        } else {
            XDamageSubtract(display, damage, 0, 0)
        }
    }

    /// Frees its server objects (the connection is alive).
    func destroy() {
        if damage != 0 { XDamageDestroy(display, damage) }
        if changedRegion != 0 { XFixesDestroyRegion(display, changedRegion) }
        if heldRegion != 0 { XFixesDestroyRegion(display, heldRegion) }
        damage = 0
        changedRegion = 0
        heldRegion = 0
    }
}
