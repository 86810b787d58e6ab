import MediaCore
import Basics

/// What is sent instead of a source that cannot be shown now (a window minimised or closed, a
/// stream paused): a dark picture of the source's last size, delivered once per reason —
/// never the screen in its place. Any backend hands it to the sink the same way. Its buffer is
/// kept for the next time (made again only for another size).
public final class PlaceholderPicture {
    /// Why it is shown now; nil while the source is.
    public private(set) var reason: String?
    public private(set) var size = PixelSize(width: 0, height: 0)
    private var pixels: UnsafeMutableRawPointer?
    private var areas: [PixelRect] = []
    /// The size when the source never had one.
    public static let defaultSize = PixelSize(width: 640, height: 360)
    /// Its colour, BGRA: a dark grey.
    public static let pixel: UInt32 = 0xFF26_2626

    public init() {}

    deinit { pixels?.deallocate() }

    /// Hands the sink the placeholder of `size` (the source's last; empty: ``defaultSize``)
    /// for `reason`, unless it was handed over for that reason already (and not `force`).
    /// - Returns: whether the sink got it.
    public func show(_ reason: String, size asked: PixelSize, force: Bool, into sink: CaptureSink) -> Bool {
        if self.reason == reason && !force { return false }
        self.reason = reason
        let size = asked.area > 0 ? asked : Self.defaultSize
        if pixels == nil || self.size != size {
            pixels?.deallocate()
            let p = UnsafeMutableRawPointer.allocate(byteCount: size.area * 4, alignment: 64)
            p.initializeMemory(as: UInt32.self, repeating: Self.pixel, count: size.area)
            pixels = p
            self.size = size
        }
        guard let pixels else { return false }
        areas.removeAll(keepingCapacity: true)
        sink.begin(size: size, changed: nil, areas: &areas)
        let whole = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        for asked in areas {
            guard let a = asked.intersection(whole) else { continue }
            sink.write(BGRAImageView(base: UnsafeRawPointer(pixels + (a.y * size.width + a.x) * 4), stride: size.width * 4,
                                     width: a.width, height: a.height), x: a.x, y: a.y)
        }
        sink.end()
        return true
    }

    /// The source is shown again: the next placeholder is handed over whatever its reason.
    public func sourceShown() { reason = nil }
}
