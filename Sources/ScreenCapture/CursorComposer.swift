import MediaCore
import Basics

/// The pointer drawn into captured pictures, whatever the backend: its image (premultiplied
/// ARGB, as XFixes and PipeWire's cursor metadata give it), its hot spot, and where it was drawn
/// into the last picture — whose old and new places changed too (no damage reports a pointer
/// that is drawn in). Pure: the backend reads the image and the pointer's position.
public struct CursorComposer {
    /// The image: `size.area` premultiplied ARGB pixels, row after row.
    public private(set) var pixels: [UInt32] = []
    public private(set) var size = PixelSize(width: 0, height: 0)
    public private(set) var hotSpot = (x: 0, y: 0)
    /// Where it is drawn into the picture being made (its pixels); nil when it is not.
    public private(set) var rect: PixelRect?
    /// The pointer's last position (source coordinates); `Int.min` before the first.
    private var lastPointer = (x: Int.min, y: Int.min)

    public init() {}

    /// A new image of `width` × `height`, its pixels read one by one (`pixel(i)`, row after
    /// row), with its hot spot.
    public mutating func setImage(width: Int, height: Int, hotX: Int, hotY: Int, pixel: (Int) -> UInt32) {
        size = PixelSize(width: max(width, 0), height: max(height, 0))
        hotSpot = (hotX, hotY)
        pixels.removeAll(keepingCapacity: true)
        pixels.reserveCapacity(size.area)
        for i in 0..<size.area { pixels.append(pixel(i)) }
    }

    /// The rectangle the image covers with the pointer at `p` (source coordinates; at least a
    /// pixel, so a pointer without an image still counts where it is).
    public func rect(at p: (x: Int, y: Int)) -> PixelRect {
        PixelRect(x: p.x - hotSpot.x, y: p.y - hotSpot.y, width: max(size.width, 1), height: max(size.height, 1))
    }

    /// Places it for the next picture, whose top-left is at `origin` (source coordinates), with
    /// the pointer at `pointer` (nil: unknown, not drawn). Appends to `changed` (when given) its
    /// old and new places in the picture.
    public mutating func place(pointer: (x: Int, y: Int)?, origin: (Int, Int), changed: inout [PixelRect], known: Bool) {
        if known, let old = rect { changed.append(old) }
        rect = nil
        if let p = pointer {
            lastPointer = p
            if size.area > 0 {
                rect = PixelRect(x: p.x - hotSpot.x - origin.0, y: p.y - hotSpot.y - origin.1, width: size.width, height: size.height)
            }
        }
        if known, let new = rect { changed.append(new) }
    }

    /// Not drawn into the next picture (a placeholder was shown).
    public mutating func hide() { rect = nil }

    /// Whether the pointer moved to `p` so that the picture of `view` (source coordinates)
    /// changes: its image touches the view where it is now or where it was. A move outside the
    /// view is remembered and not reported.
    public mutating func moved(to p: (x: Int, y: Int), in view: PixelRect) -> Bool {
        guard p != lastPointer else { return false }
        let touchesNew = rect(at: p).intersection(view) != nil
        let touchesOld = lastPointer.x != Int.min && rect(at: lastPointer).intersection(view) != nil
        if !touchesNew && !touchesOld {
            lastPointer = p
            return false
        }
        return true
    }

    /// Blends the image at ``rect`` into a BGRA band of the picture holding `band` (its pixels
    /// at `base`, `stride` bytes a row).
    public func blend(into base: UnsafeMutableRawPointer, stride: Int, band: PixelRect) {
        guard let cursor = rect, let part = cursor.intersection(band) else { return }
        for y in part.y..<(part.y + part.height) {
            let row = base.advanced(by: (y - band.y) * stride).assumingMemoryBound(to: UInt32.self)
            for x in part.x..<(part.x + part.width) {
                let src = pixels[(y - cursor.y) * size.width + (x - cursor.x)]
                let a = src >> 24
                if a == 0 { continue }
                let dst = row[x - band.x]
                let inv = 255 - a
                func channel(_ shift: UInt32) -> UInt32 {
                    let s = (src >> shift) & 0xff, d = (dst >> shift) & 0xff
                    return min(255, s + (d * inv + 127) / 255) << shift
                }
                row[x - band.x] = 0xff00_0000 | channel(16) | channel(8) | channel(0)
            }
        }
    }
}
