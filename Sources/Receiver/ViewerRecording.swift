import Events
import MediaCore
import Basics
import RTCP
import RTP
import RTPSession
import Recording

/// `watch --record`: what arrived, VP8 frames and Opus packets as received, into a WebM file
/// (`WebMRecorder`) on the video's timeline.
///
/// libavformat is opened when the viewer starts (``init``), before anything arrives: opened at
/// the first keyframe, its ~100 libraries held that picture and the ones after it for up to a
/// second on a busy machine (a freeze). The file is created at the first decoded keyframe (a
/// file starts with one, and the picture size is known then). A library that cannot be opened,
/// or a file that cannot be created, written or finished (its trailer: cues, duration) is an
/// `error` event (`record_failure`, once); recording stops there (a later keyframe never starts
/// the file again over what was written), the viewer goes on watching, and ``finish()`` says
/// so, for `watch` to exit with a failure.
struct ViewerRecording {
    /// The `--record` path.
    let path: String
    /// Whether the stream has audio (the file then has an Opus track).
    private let withAudio: Bool
    private let events: EventSink
    private var recorder: WebMRecorder?
    /// The recording failed (reported once); nothing more is written.
    private(set) var failed = false
    /// The first recorded picture: its RTP time (extended ticks) and when it became complete.
    private var originTicks: Int64?
    private var originArrival: UInt64?
    /// Extends the video's RTP timestamps; a new sender starts a new one (see ``restart()``).
    private var unwrapper = TimestampUnwrapper()

    /// A library that cannot be opened, reported by ``started()``.
    private var openFailure: RecordingError?

    /// Opens libavformat (``WebMRecorder/prepare(for:)``); a failure is reported by ``started()``.
    init(path: String, withAudio: Bool, events: EventSink) {
        self.path = path
        self.withAudio = withAudio
        self.events = events
        do { try WebMRecorder.prepare(for: path) } catch {
            openFailure = error as? RecordingError ?? RecordingError("--record \(path): \(error)")
        }
    }

    /// The viewer has said it started: a library that could not be opened is reported now, and
    /// nothing is recorded.
    mutating func started() {
        if let openFailure { fail(openFailure) }
    }

    /// Pictures written so far.
    var videoFramesWritten: Int { recorder?.videoFramesWritten ?? 0 }
    /// Opus packets written so far.
    var audioPacketsWritten: Int { recorder?.audioPacketsWritten ?? 0 }

    /// A new sender: its RTP timestamps start from anywhere.
    mutating func restart() {
        unwrapper = TimestampUnwrapper()
    }

    /// Writes a decoded frame (`size`: the decoded picture's).
    mutating func video(_ frame: BufferedFrame, size: PixelSize, clockRate: Int) {
        guard !failed else { return }
        if recorder == nil {
            guard frame.isKeyframe else { return }  // a file starts with a keyframe
            do {
                recorder = try WebMRecorder(path: path, video: size, audio: withAudio)
            } catch {
                fail(error)
                return
            }
        }
        let ticks = unwrapper.unwrap(frame.rtpTimestamp)
        if originTicks == nil {
            originTicks = ticks
            originArrival = frame.arrival
        }
        let nanos = UInt64(max(0, ticks - originTicks!)) * 1_000_000_000 / UInt64(max(clockRate, 1))
        do {
            try recorder?.writeVideo(frame.data, keyframe: frame.isKeyframe, timestampNanos: nanos)
        } catch {
            fail(error)
        }
    }

    /// Writes an Opus packet, on the video's timeline: both streams' sender reports map RTP
    /// time to the sender's wall clock (before they arrive: arrival times).
    /// - Parameters:
    ///   - videoReport, audioReport: the last sender report of each stream (RFC 3550 §6.4.1).
    ///   - clockRate: the video's RTP clock rate.
    mutating func audio(_ header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64,
                        videoReport: (ntp: NTPTimestamp, rtpTimestamp: UInt32)?, audioReport: SenderReport?, clockRate: Int) {
        guard !failed, let recorder, let originTicks else { return }
        var nanos: Int64
        if let v = videoReport, let a = audioReport {
            func ntpNanos(_ t: NTPTimestamp) -> Int64 { Int64(t.seconds) * 1_000_000_000 + Int64((UInt64(t.fraction) * 1_000_000_000) >> 32) }
            let originTs = UInt32(truncatingIfNeeded: originTicks)
            let videoOrigin = ntpNanos(v.ntp) + Int64(Int32(bitPattern: originTs &- v.rtpTimestamp)) * 1_000_000_000 / Int64(max(clockRate, 1))
            let audioTime = ntpNanos(a.ntp) + Int64(Int32(bitPattern: header.timestamp &- a.rtpTimestamp)) * 1_000_000_000 / 48_000
            nanos = audioTime - videoOrigin
        } else if let origin = originArrival {
            nanos = Int64(now) - Int64(origin)
        } else {
            return
        }
        guard nanos >= 0 else { return }  // before the first recorded picture
        do { try recorder.writeAudio(payload, timestampNanos: UInt64(nanos)) } catch {
            fail(error)
        }
    }

    /// Writes the file's trailer and closes it (after a failed write too: what was written may
    /// still play).
    /// - Returns: false when the recording failed, now or before (reported as an `error` event,
    ///   `record_failure`, whose message names the path and the reason).
    mutating func finish() -> Bool {
        guard let recorder else { return !failed }
        do {
            try recorder.finish()
        } catch {
            if !failed { fail(error) }
        }
        return !failed
    }

    /// Reports the first failure and stops recording.
    private mutating func fail(_ error: any Error) {
        guard !failed else { return }
        failed = true
        events.emit(.error(.recordFailure, "\(error)"))
    }
}
