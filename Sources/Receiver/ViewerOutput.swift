import Events
import MediaCore
import Basics
import RTPSession
import Recording
import VP8Codec
import VideoOutput

/// Where the viewer's pictures go: the VP8 decoder, then the X11 window (`watch` without
/// `--headless`) and the frame MD5s (`--frames-md5`); and the picture events (`first_frame`,
/// `resolution_changed`). The recording takes the frames as received (``ViewerRecording``).
struct ViewerOutput {
    private let decoder: VP8Decoder
    /// The window showing the pictures; nil when headless.
    let window: X11VideoWindow?
    private let checksums: FrameChecksums?
    private let events: EventSink
    /// When the viewer started (ns): `first_frame` counts from it.
    private let startedAt: UInt64
    /// The size of the last decoded picture (0x0 before the first).
    private(set) var pictureSize = PixelSize(width: 0, height: 0)
    /// Whether `first_frame` was sent for the stream shown (a new room subscription resets it).
    private var firstFrameReported = false
    /// In a room: when the relay confirmed the subscription to the stream shown (ns).
    private var subscribedAt: UInt64?
    /// The size of the last keyframe refused as too large (said once, not per keyframe).
    private var refusedSize: PixelSize?

    init(decoder: VP8Decoder, window: X11VideoWindow?, checksums: FrameChecksums?, events: EventSink, startedAt: UInt64) {
        self.decoder = decoder
        self.window = window
        self.checksums = checksums
        self.events = events
        self.startedAt = startedAt
    }

    /// A new screen stream was subscribed to at `now`: its first picture is reported again.
    mutating func subscribed(now: UInt64) {
        subscribedAt = now
        firstFrameReported = false
    }

    /// Decodes a frame released at `now` and shows the picture.
    mutating func decode(_ frame: BufferedFrame, now: UInt64) -> VideoReceivePath.Decoded {
        var shown = false
        if let size = VP8Decoder.keyframeSize(frame.data), size.area > decoder.maxPixels {
            if size != refusedSize {
                refusedSize = size
                events.emit(.warning(.pictureTooLarge(width: size.width, height: size.height),
                                     "refused a keyframe of \(size.width)x\(size.height): larger than the \(decoder.maxPixels) pixels a viewer takes; waiting for the next keyframe"))
            }
            return .failed
        }
        if frame.isKeyframe { refusedSize = nil }  // one that fits: a later refusal is said again
        do {
            try decoder.decode(frame.data) { picture in
                shown = true
                let size = PixelSize(width: picture.width, height: picture.height)
                if size != pictureSize {
                    if pictureSize.area > 0 {
                        events.emit(ResolutionChanged(size: size))
                    }
                    pictureSize = size
                }
                checksums?.add(y: picture.y, u: picture.u, v: picture.v, strideY: picture.strideY, strideU: picture.strideU,
                               strideV: picture.strideV, width: picture.width, height: picture.height)
                window?.show(I420View(y: picture.y, u: picture.u, v: picture.v, strideY: picture.strideY, strideU: picture.strideU,
                                      strideV: picture.strideV, width: picture.width, height: picture.height))
            }
        } catch {
            return .failed
        }
        return shown ? .picture : .nothing
    }

    /// A picture was shown at `now`: the first one of a stream is reported.
    mutating func shown(now: UInt64) {
        guard !firstFrameReported else { return }
        firstFrameReported = true
        events.emit(FirstFrame(size: pictureSize, timeToFirstFrameMillis: Double(now - startedAt) / 1e6,
                               sinceSubscribedMillis: subscribedAt.map { Double(now - $0) / 1e6 }))
    }
}
