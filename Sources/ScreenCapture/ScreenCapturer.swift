import MediaCore
import Basics

/// A screen capture backend, as libwebrtc's `DesktopCapturer` is one: X11 today
/// (``X11ScreenCapturer``), the next beside it. The sender's capture loop drives any of them the
/// same way, on one thread: wait for a change (``waitForChange(timeoutNanos:)``), let it settle,
/// and capture into a ``CaptureSink`` — which learns what changed, asks for the areas it wants,
/// and takes their pixels band by band. What a backend shares with the others lives beside
/// this: the pointer drawn in (``CursorComposer``), the placeholder for a source that cannot be
/// shown (``PlaceholderPicture``).
///
/// The outcomes are libwebrtc's three — a frame (``CaptureOutcome/captured``, and its two
/// cases without new pixels: ``CaptureOutcome/unchanged``, ``CaptureOutcome/placeholder(_:)``),
/// a temporary error, a permanent one.
public protocol ScreenCapturer: AnyObject {
    /// The size of the pictures delivered now (a window's changes as it is resized).
    var outputSize: PixelSize { get }
    /// Captures a picture if the source changed (or `force`): the sink learns what changed and
    /// gets the areas it asks for.
    func capture(force: Bool, into sink: CaptureSink) -> CaptureOutcome
    /// Waits until `nanos` after the change waiting to be grabbed was first seen (at once when
    /// none waits): the rest of a picture its application draws in further requests comes too.
    func settle(nanos: UInt64)
    /// Whether a change waits to be grabbed.
    func changePending() -> Bool
    /// While a change waits, waits up to `timeoutNanos` for the next one to begin (content
    /// faster than the frame rate is grabbed whole, just after it); false at once when none
    /// waits, or when the backend cannot tell.
    func awaitNextChange(timeoutNanos: UInt64) -> Bool
    /// Waits up to `timeoutNanos` for the picture to change; true if it may have.
    func waitForChange(timeoutNanos: UInt64) -> Bool
}

/// What to capture.
public enum CaptureSourceSpec: Sendable, Equatable {
    /// The whole X screen.
    case screen
    /// A fixed rectangle of the screen.
    case region(PixelRect)
    /// One RandR monitor, by name or index.
    case monitor(String)
    /// One window, by id (decimal or 0x hex) or a substring of its title. Follows moves and
    /// resizes, shows only that window (XComposite), never falls back to the screen.
    case window(String)

    /// Parses X11 geometry "WxH+X+Y" (or "WxH" at +0+0).
    /// - Throws: `CaptureError` naming the text when it is not a geometry.
    public static func parseRegion(_ text: String) throws -> PixelRect {
        let bad = CaptureError(.badArgument, "'\(text)' is not a region: expected WxH+X+Y, e.g. 1280x720+100+50")
        let parts = text.split(separator: "+", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 3 else { throw bad }
        let dims = parts[0].split(separator: "x", omittingEmptySubsequences: false)
        guard dims.count == 2, let w = Int(dims[0]), let h = Int(dims[1]), w > 0, h > 0 else { throw bad }
        var x = 0, y = 0
        if parts.count == 3 {
            guard let px = Int(parts[1]), let py = Int(parts[2]), px >= 0, py >= 0 else { throw bad }
            x = px
            y = py
        }
        return PixelRect(x: x, y: y, width: w, height: h)
    }
}

/// Result of one capture attempt, as libwebrtc's DesktopCapturer reports it.
public enum CaptureOutcome: Sendable, Equatable {
    /// New pixels were handed to the sink.
    case captured
    /// Nothing changed since the last capture; nothing was copied, the sink was not called.
    case unchanged
    /// The source cannot be shown now (a window unmapped or gone): the sink was handed a
    /// placeholder picture instead, once per change of state; the text says why.
    case placeholder(String)
    /// Try again later.
    case temporaryError(String)
    /// The source is gone for good.
    case permanentError(String)
}

/// An error opening or using a capture source; the message names what was wrong.
public struct CaptureError: Error, CustomStringConvertible, Equatable {
    public struct Kind: Hashable, Sendable {
        let name: String
        public static let displayUnavailable = Kind(name: "display_unavailable")
        public static let badArgument = Kind(name: "bad_argument")
        public static let unsupportedVisual = Kind(name: "unsupported_visual")
        public static let captureFailed = Kind(name: "capture_failed")
        public static let sourceNotFound = Kind(name: "source_not_found")
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}
