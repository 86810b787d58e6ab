import CPipeWire
import MediaCore

/// A PipeWire video stream, read for capture: connected through the portal's remote (or the
/// default one) to one node, the newest picture always taken (older ones the producer sent
/// meanwhile are given back, their changes kept), 4 bytes a pixel (BGRx, RGBx, BGRA or RGBA,
/// shared memory). Its loop runs on the caller's thread: ``iterate(timeoutMillis:)``.
///
/// Not `Sendable`: it belongs to the thread that runs its loop.
public final class PipeWireStream {
    private let capture: OpaquePointer
    /// The picture taken last, as the C side described it (its damage is read from here).
    private var last = ss_pw_frame()

    /// A picture, valid until ``release()`` or the next ``take()``.
    public struct Frame {
        public var pixels: UnsafeRawPointer
        public var stride: Int
        public var width: Int
        public var height: Int
        public enum Layout: UInt32, Sendable { case bgrx = 0, rgbx = 1, bgra = 2, rgba = 3 }
        public var layout: Layout
        /// The part of the buffer that is the picture.
        public var crop: (x: Int, y: Int, width: Int, height: Int)
        /// How many rectangles say what changed since the picture taken before (read them with
        /// ``PipeWireStream/forEachDamage(_:)``); nil when the producer did not say (all of it).
        public var damageCount: Int?
        /// Pictures replaced by a newer one before they were taken.
        public var skipped: Int
    }

    /// Connects to node `node` through `fd` (the portal's PipeWire remote: taken), or to the
    /// default PipeWire when `fd` is nil.
    /// - Throws: `PortalError` (`failed`) saying why.
    public init(fd: Int32?, node: UInt32) throws(PortalError) {
        var message = [CChar](repeating: 0, count: 256)
        guard let c = ss_pw_open(fd ?? -1, node, &message, message.count) else {
            let bytes = message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            throw PortalError(.failed, String(decoding: bytes, as: UTF8.self))
        }
        capture = c
    }

    deinit { ss_pw_close(capture) }

    /// The descriptor to poll for the stream's events.
    public var pollDescriptor: Int32 { ss_pw_fd(capture) }

    /// Waits up to `timeoutMillis` for the stream's events and handles them.
    /// - Throws: `PortalError` once the stream failed or ended (the share was stopped, PipeWire went away).
    public func iterate(timeoutMillis: Int32) throws(PortalError) {
        if ss_pw_iterate(capture, timeoutMillis) < 0 { throw PortalError(.failed, error ?? "the PipeWire stream failed") }
    }

    /// Why the stream ended (nil while it is fine).
    public var error: String? { ss_pw_error(capture).map { String(cString: $0) } }

    /// Whether the stream has a format and flows.
    public var isStreaming: Bool { ss_pw_streaming(capture) != 0 }

    /// The newest picture not taken yet.
    public func take() -> Frame? {
        var f = ss_pw_frame()
        guard ss_pw_take(capture, &f) == 1, let data = f.data else { return nil }
        last = f
        return Frame(pixels: UnsafeRawPointer(data), stride: Int(f.stride), width: Int(f.width), height: Int(f.height),
                     layout: Frame.Layout(rawValue: f.format) ?? .bgrx,
                     crop: (Int(f.crop.x), Int(f.crop.y), Int(f.crop.width), Int(f.crop.height)), damageCount: f.whole == 0 ? Int(f.damage_count) : nil, skipped: Int(f.skipped))
    }

    /// Whether the picture taken is still there to read (it goes with its buffer when the
    /// format changes or the stream ends).
    public var holdsFrame: Bool { ss_pw_holds_frame(capture) != 0 }

    /// The pointer as the producer's cursor metadata says (the portal's cursor mode
    /// "metadata"), its image valid until the next ``iterate(timeoutMillis:)``.
    public struct Cursor {
        /// False while there is no pointer to draw.
        public var visible: Bool
        /// The hot spot's place in the stream's pixels.
        public var x: Int, y: Int
        public var hotX: Int, hotY: Int
        public var width: Int, height: Int
        /// Changes with each new image.
        public var serial: UInt32
        /// `width × height` premultiplied ARGB pixels.
        public var pixels: UnsafePointer<UInt32>?
    }

    /// The pointer, and whether it moved, changed its image, or was shown or hidden since the
    /// last call.
    public func readCursor() -> (changed: Bool, cursor: Cursor) {
        var c = ss_pw_cursor()
        let changed = ss_pw_cursor_read(capture, &c) == 1
        return (changed, Cursor(visible: c.visible != 0, x: Int(c.x), y: Int(c.y), hotX: Int(c.hot_x), hotY: Int(c.hot_y),
                                width: Int(c.width), height: Int(c.height), serial: c.serial, pixels: c.pixels))
    }

    /// Gives the picture taken back to the producer.
    public func release() { ss_pw_release(capture) }

    /// The rectangles that changed, of the picture taken last (none when it did not say): read
    /// from where the stream keeps them, so taking a picture allocates nothing.
    public func forEachDamage(_ body: (PixelRect) -> Void) {
        guard last.whole == 0 else { return }
        withUnsafeBytes(of: last.damage) { raw in
            for r in raw.bindMemory(to: ss_pw_rect.self).prefix(Int(last.damage_count)) {
                body(PixelRect(x: Int(r.x), y: Int(r.y), width: Int(r.width), height: Int(r.height)))
            }
        }
    }
}
