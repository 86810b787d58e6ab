import MediaCore
import Basics
import ScreenCapture
#if canImport(Glibc)
import Glibc
#endif

/// A Wayland desktop's screen (or a window) through the xdg-desktop-portal and PipeWire, behind
/// the same ``ScreenCapturer`` protocol as X11: the capture loop, the pacing, the keep-alive
/// of a still screen and the placeholder are the sender's, shared.
///
/// The portal is asked when it is made (the dialog, once: the restore token is kept); the
/// PipeWire stream is opened on the capture thread at its first use, so its loop runs there.
/// The producer's damage says what changed; a still screen sends nothing, and the capture loop
/// repeats the last picture (`--min-fps`), which this keeps (the buffer is held until the next
/// one comes). `--region` crops the stream. The pointer comes as the producer's cursor metadata
/// (the portal's cursor mode "metadata", asked for when offered) and is drawn here by the same
/// ``CursorComposer`` as on X11: its old and new places are re-read from the held picture, so
/// a pointer moving over a still slide costs two small rectangles, not a picture.
public final class PortalScreenCapturer: ScreenCapturer {
    private let session: ScreenCastSession
    private let node: UInt32
    private let region: PixelRect?
    private let clock: any MediaClock
    private var stream: PipeWireStream?
    /// The newest picture taken from the stream and not captured yet (or, once captured, the
    /// last one, kept for a forced capture).
    private var frame: PipeWireStream.Frame?
    private var pending = false
    /// What changed since the picture last captured, in the stream's pixels, unless
    /// `wholeChanged` (kept with its capacity: nothing allocated per picture).
    private var damage: [PixelRect] = []
    private var wholeChanged = true
    /// More rectangles than this are taken as all of it.
    private static let maxDamage = 64
    private var changedAtNanos: UInt64 = 0
    private var failed: String?
    private var areas: [PixelRect] = []
    private var changed: [PixelRect] = []
    /// A band in BGRA for the producers that send RGB order (made once, grown as needed).
    private var swapped: UnsafeMutableRawPointer?
    private var swappedBytes = 0
    private let drawCursor: Bool
    private var cursor = CursorComposer()
    private var cursorSerial: UInt32?
    /// Where the pointer's hot spot is, in the stream's pixels (nil: not drawn).
    private var pointer: (x: Int, y: Int)?
    public private(set) var outputSize: PixelSize

    /// Asks the portal (the dialog, unless `tokens` has a token for this kind of source and
    /// `ask` is false) and keeps the token it gives.
    /// - Parameters:
    ///   - window: a window rather than a monitor (the portal's dialog lets the user pick which).
    ///   - region: the part of the stream to send (nil: all of it).
    /// - Throws: `CaptureError` (`displayUnavailable`) saying why, in one line.
    public init(window: Bool, region: PixelRect?, drawCursor: Bool, ask: Bool, tokens: RestoreTokens?, clock: any MediaClock,
                busAddress: String? = nil) throws {
        let source: ScreenCastRequest.Source = window ? .window : .monitor
        if ask { try? tokens?.keep(nil, for: source) }
        let request = ScreenCastRequest(source: source, drawCursor: drawCursor, restoreToken: ask ? nil : tokens?.token(for: source))
        do {
            session = try ScreenCastSession.open(request, busAddress: busAddress)
        } catch {
            throw CaptureError(.displayUnavailable, error.message)
        }
        // Kept for the next share; a token the portal did not renew is forgotten.
        try? tokens?.keep(session.restoreToken, for: source)
        let granted = session.streams[0]
        node = granted.node
        self.region = region
        self.clock = clock
        self.drawCursor = drawCursor
        let streamSize = PixelSize(width: Int(granted.width ?? 0), height: Int(granted.height ?? 0))
        outputSize = region.map { PixelSize(width: $0.width, height: $0.height) } ?? streamSize
        damage.reserveCapacity(Self.maxDamage)
    }

    deinit {
        swapped?.deallocate()
        stream = nil
        session.close()
    }

    /// Opens the stream (on the capture thread, at first use) and handles its events, waiting
    /// up to `timeoutMillis`; takes the newest picture.
    private func pump(timeoutMillis: Int32) {
        guard failed == nil else { return }
        do throws(PortalError) {
            if stream == nil {
                // A copy of the portal's descriptor (the stream closes its own); never -1, which
                // would mean PipeWire's default remote rather than the portal's.
                let fd = dup(session.pipewireFD)
                guard fd >= 0 else { throw PortalError(.failed, "cannot use the portal's PipeWire descriptor: \(SystemError.current)") }
                stream = try PipeWireStream(fd: fd, node: node)
            }
            try stream!.iterate(timeoutMillis: timeoutMillis)
        } catch {
            failed = error.message
            return
        }
        if drawCursor {
            let (moved, c) = stream!.readCursor()
            if moved {
                if c.serial != cursorSerial, let pixels = c.pixels {
                    cursorSerial = c.serial
                    cursor.setImage(width: c.width, height: c.height, hotX: c.hotX, hotY: c.hotY) { pixels[$0] }
                }
                pointer = c.visible ? (c.x, c.y) : nil
                // Over the picture held: its old and new places are drawn again from it.
                if frame != nil {
                    if !pending { changedAtNanos = clock.nowNanos() }
                    pending = true
                }
            }
        }
        guard let next = stream!.take() else { return }
        if !pending { changedAtNanos = clock.nowNanos() }
        pending = true
        // The picture replaces the one held; what changed adds up until it is captured.
        let sameSize = frame.map { $0.width == next.width && $0.height == next.height } ?? false
        if !wholeChanged, sameSize, let count = next.damageCount, damage.count + count <= Self.maxDamage {
            stream!.forEachDamage { damage.append($0) }
        } else {
            wholeChanged = true
            damage.removeAll(keepingCapacity: true)
        }
        frame = next
    }

    public func changePending() -> Bool {
        pump(timeoutMillis: 0)
        return pending || failed != nil
    }

    public func settle(nanos: UInt64) {
        guard pending else { return }
        while true {
            let now = clock.nowNanos()
            guard now < changedAtNanos &+ nanos else { return }
            pump(timeoutMillis: Int32(max(1, (changedAtNanos &+ nanos &- now) / 1_000_000)))
            if failed != nil { return }
        }
    }

    /// The portal cannot tell a change beginning from one done: false.
    public func awaitNextChange(timeoutNanos: UInt64) -> Bool { false }

    public func waitForChange(timeoutNanos: UInt64) -> Bool {
        if pending || failed != nil { return true }
        pump(timeoutMillis: Int32(min(UInt64(Int32.max), timeoutNanos / 1_000_000)))
        return pending || failed != nil
    }

    public func capture(force: Bool, into sink: CaptureSink) -> CaptureOutcome {
        pump(timeoutMillis: 0)
        if let failed { return .permanentError(failed) }
        // The picture held went with its buffer (a new size): the next one is awaited.
        if frame != nil, stream?.holdsFrame != true {
            frame = nil
            pending = false
        }
        guard let f = frame, pending || force else { return .unchanged }
        // The picture: the producer's crop, then --region inside it.
        var picture = PixelRect(x: f.crop.x, y: f.crop.y, width: f.crop.width, height: f.crop.height)
            .intersection(PixelRect(x: 0, y: 0, width: f.width, height: f.height)) ?? PixelRect(x: 0, y: 0, width: f.width, height: f.height)
        if let region {
            guard let inside = PixelRect(x: picture.x + region.x, y: picture.y + region.y, width: region.width, height: region.height)
                .intersection(picture), !inside.isEmpty else {
                return .temporaryError("--region \(region) is outside the shared \(picture.width)x\(picture.height) picture")
            }
            picture = inside
        }
        let size = PixelSize(width: picture.width, height: picture.height)
        outputSize = size
        areas.removeAll(keepingCapacity: true)
        let known = !wholeChanged && !force
        changed.removeAll(keepingCapacity: true)
        if known {
            for d in damage {
                if let r = d.intersection(picture) { changed.append(PixelRect(x: r.x - picture.x, y: r.y - picture.y, width: r.width, height: r.height)) }
            }
        }
        // The pointer's old and new places changed too (it is drawn in; no damage says so).
        if drawCursor { cursor.place(pointer: pointer, origin: (picture.x, picture.y), changed: &changed, known: known) }
        if known {
            changed.withUnsafeBufferPointer { sink.begin(size: size, changed: $0, areas: &areas) }
        } else {
            sink.begin(size: size, changed: nil, areas: &areas)
        }
        let whole = PixelRect(x: 0, y: 0, width: size.width, height: size.height)
        let swap = f.layout == .rgbx || f.layout == .rgba
        for asked in areas {
            guard let area = asked.intersection(whole) else { continue }
            let base = f.pixels.advanced(by: (picture.y + area.y) * f.stride + (picture.x + area.x) * 4)
            let underPointer = drawCursor && cursor.rect.flatMap { $0.intersection(area) } != nil
            if swap || underPointer {
                writeCopied(base, stride: f.stride, area: area, swap: swap, pointer: underPointer, into: sink)
            } else {
                sink.write(BGRAImageView(base: base, stride: f.stride, width: area.width, height: area.height), x: area.x, y: area.y)
            }
        }
        sink.end()
        pending = false
        damage.removeAll(keepingCapacity: true)
        wholeChanged = false
        return .captured
    }

    /// An area handed over in BGRA bands copied out of the producer's buffer (never written
    /// to: it is the producer's): swapped from RGB order when `swap`, the pointer drawn over
    /// it when `pointer`.
    private func writeCopied(_ base: UnsafeRawPointer, stride: Int, area: PixelRect, swap: Bool, pointer: Bool, into sink: CaptureSink) {
        let rowBytes = area.width * 4
        let rows = max(1, min(area.height, (1 << 20) / max(rowBytes, 1)))
        if swappedBytes < rows * rowBytes {
            swapped?.deallocate()
            swappedBytes = rows * rowBytes
            swapped = UnsafeMutableRawPointer.allocate(byteCount: swappedBytes, alignment: 64)
        }
        guard let swapped else { return }
        var y = 0
        while y < area.height {
            let n = min(rows, area.height - y)
            for r in 0..<n {
                let source = base.advanced(by: (y + r) * stride)
                if swap {
                    let src = source.assumingMemoryBound(to: UInt32.self)
                    let dst = swapped.advanced(by: r * rowBytes).assumingMemoryBound(to: UInt32.self)
                    for x in 0..<area.width {
                        let p = src[x]  // R G B A in memory: little-endian 0xAABBGGRR → 0xAARRGGBB
                        dst[x] = (p & 0xFF00_FF00) | ((p & 0xFF) << 16) | ((p >> 16) & 0xFF)
                    }
                } else {
                    swapped.advanced(by: r * rowBytes).copyMemory(from: source, byteCount: rowBytes)
                }
            }
            let band = PixelRect(x: area.x, y: area.y + y, width: area.width, height: n)
            if pointer { cursor.blend(into: swapped, stride: rowBytes, band: band) }
            sink.write(BGRAImageView(base: UnsafeRawPointer(swapped), stride: rowBytes, width: area.width, height: n), x: band.x, y: band.y)
            y += n
        }
    }
}
