/// What changed in the last few captured pictures, so that a pooled frame holding an older
/// picture is brought up to date by converting only those areas (a compositor's "buffer age"):
/// a frame that holds picture N needs what changed in pictures N+1 … now, not a whole new
/// conversion.
///
/// Pictures are numbered from 1 by ``record(_:size:)``; 0 means "holds no picture". No
/// allocation after `init`: `depth` pictures of at most `perPicture` rectangles each (a picture
/// with more is kept as their bounding box).
public struct ChangeHistory {
    public let depth: Int
    public let perPicture: Int
    /// At most this many areas are asked for; more, or areas covering most of the picture,
    /// become the whole picture (one grab is cheaper than many).
    public let maxAreas: Int
    private var rects: [PixelRect]
    /// Rectangles kept per picture, -1 when unknown (anything may have changed).
    private var counts: [Int]
    private var pictureSize = PixelSize(width: 0, height: 0)
    /// The number of the newest picture recorded.
    public private(set) var serial: UInt64 = 0

    public init(depth: Int = 8, perPicture: Int = 16, maxAreas: Int = 16) {
        precondition(depth > 0 && perPicture > 0 && maxAreas > 0)
        self.depth = depth
        self.perPicture = perPicture
        self.maxAreas = maxAreas
        rects = Array(repeating: PixelRect(x: 0, y: 0, width: 0, height: 0), count: depth * perPicture)
        counts = Array(repeating: -1, count: depth)
    }

    /// Records the next picture, of `size`, in which `changed` changed since the previous one
    /// (nil: unknown; a new size is unknown too). Returns its number.
    @discardableResult
    public mutating func record(_ changed: UnsafeBufferPointer<PixelRect>?, size: PixelSize) -> UInt64 {
        serial += 1
        let slot = Int(serial % UInt64(depth))
        let base = slot * perPicture
        guard let changed, size == pictureSize else {
            pictureSize = size
            counts[slot] = -1
            return serial
        }
        if changed.count <= perPicture {
            for (i, r) in changed.enumerated() { rects[base + i] = r }
            counts[slot] = changed.count
        } else {
            var x0 = Int.max, y0 = Int.max, x1 = Int.min, y1 = Int.min
            for r in changed where !r.isEmpty {
                x0 = min(x0, r.x); y0 = min(y0, r.y); x1 = max(x1, r.x + r.width); y1 = max(y1, r.y + r.height)
            }
            rects[base] = x1 > x0 ? PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0) : PixelRect(x: 0, y: 0, width: 0, height: 0)
            counts[slot] = 1
        }
        return serial
    }

    /// Records a picture in which anything may have changed (a grab that failed part way).
    public mutating func recordUnknown() {
        serial += 1
        counts[Int(serial % UInt64(depth))] = -1
    }

    /// Appends to `areas` what a picture-sized frame holding picture `held` (0: none) needs to
    /// show the newest one: the changes since, widened to even pixels (whole 4:2:0 chroma
    /// samples) and without rectangles inside others; the whole picture when that is unknown.
    public func areas(since held: UInt64, into areas: inout [PixelRect]) {
        let whole = PixelRect(x: 0, y: 0, width: pictureSize.width, height: pictureSize.height)
        let start = areas.count
        guard !whole.isEmpty else { return }
        guard held != 0, held <= serial, serial - held <= UInt64(depth) else { areas.append(whole); return }
        var covered = 0
        var n = held + 1
        while n <= serial {
            let slot = Int(n % UInt64(depth))
            let count = counts[slot]
            guard count >= 0 else { areas.removeSubrange(start...); areas.append(whole); return }
            for i in 0..<count {
                guard let r = Self.even(rects[slot * perPicture + i], in: whole) else { continue }
                if areas[start...].contains(where: { $0.contains(r) }) { continue }
                var j = start
                while j < areas.count {
                    if r.contains(areas[j]) { covered -= areas[j].width * areas[j].height; areas.remove(at: j) } else { j += 1 }
                }
                areas.append(r)
                covered += r.width * r.height
                if areas.count - start > maxAreas || covered * 4 > whole.width * whole.height * 3 {
                    areas.removeSubrange(start...)
                    areas.append(whole)
                    return
                }
            }
            n += 1
        }
    }

    /// `r` clipped to `whole`, its edges moved outwards to even pixels (the far edges may stop
    /// at an odd picture size); nil when nothing is left.
    static func even(_ r: PixelRect, in whole: PixelRect) -> PixelRect? {
        guard let c = r.intersection(whole) else { return nil }
        let x0 = c.x & ~1, y0 = c.y & ~1
        let x1 = min(whole.width, (c.x + c.width + 1) & ~1), y1 = min(whole.height, (c.y + c.height + 1) & ~1)
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}

extension PixelRect {
    /// True when `other` lies wholly inside `self`.
    public func contains(_ other: PixelRect) -> Bool {
        other.x >= x && other.y >= y && other.x + other.width <= x + width && other.y + other.height <= y + height
    }
}
