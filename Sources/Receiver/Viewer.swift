import Events
import Logging
import MediaCore
import Basics
import RTP
import Room
import Synchronization
import Transport

/// Everything `screenshare watch --sdp` needs.
public struct ViewerConfig: Sendable {
    /// What to receive: the SDP's media (ports, payload types, encodings).
    public var description: ReceiveDescription
    /// Show the pictures in an X11 window; false: headless.
    public var window = true
    /// The X display for the window (nil: `$DISPLAY`).
    public var display: String?
    /// Record what arrives to this WebM file (`--record`).
    public var recordPath: String?
    /// Stop after this long (nil: when asked to).
    public var durationSeconds: Double?
    /// Our RTCP CNAME.
    public var cname: String
    /// Write one MD5 per decoded picture here (ffmpeg `framemd5` layout).
    public var framesMD5Path: String?
    /// Play the audio through PulseAudio (when the stream has audio).
    public var audioPlayback = true
    /// The PulseAudio sink to play to (nil: the default one).
    public var audioSink: String?
    /// Line the played audio up with the shown pictures (lip sync) from the sender reports.
    public var avSync = true
    /// Join a room through the relay at `server` instead of listening on the SDP's ports.
    public var room: RoomSettings?
    /// The room relay (with `room`).
    public var server: Endpoint?
    public init(description: ReceiveDescription, cname: String) {
        self.description = description
        self.cname = cname
    }

    /// A viewer of a room: what it receives is learnt from the room (VP8 and Opus).
    public init(room: RoomSettings, server: Endpoint, cname: String) {
        description = ReceiveDescription(connectionAddress: nil, media: [
            .init(kind: "video", port: 0, payloadType: 96, encoding: "VP8", clockRate: 90_000, channels: nil, rtcpPort: 0),
            .init(kind: "audio", port: 0, payloadType: 111, encoding: "opus", clockRate: 48_000, channels: 2, rtcpPort: 0),
        ])
        self.room = room
        self.server = server
        self.cname = cname
    }
}

/// Why the viewer ended.
extension ViewerStopReason {
    /// The reason in words, for people.
    public var words: String {
        switch self {
        case .duration: "duration reached"
        case .requested: "interrupted"
        case .windowClosed: "window closed"
        case .failed: "error"
        case .disconnected: "no relay"
        case .unauthorized: "not admitted"
        case .untrusted: "relay not trusted"
        case .ended: "share ended"
        }
    }
}

public enum ViewerStopReason: String, Sendable {
    case duration, requested, windowClosed = "window_closed", failed
    /// Lost the room relay and the retries failed.
    case disconnected
    /// The relay refused to admit us (the token).
    case unauthorized
    /// The relay is not the one pinned (`--fingerprint`).
    case untrusted = "untrusted_relay"
    /// The presenter ended the share (left the room on purpose, nobody else shares).
    case ended = "share_ended"
}

/// What ``Viewer/run()`` ended with.
public struct ViewerResult: Sendable {
    /// Why it stopped.
    public var reason: ViewerStopReason
    /// The summary (also sent as the `stopped` event).
    public var summary: [String: JSONValue]
    /// The recording (`--record`) failed (created, written or finished): an `error` event
    /// (`record_failure`) said why, and `watch` exits with a failure.
    public var recordingFailed: Bool
    /// Why the relay refused to admit us (`reason` is `unauthorized`).
    public var refusal: String? = nil
}

/// The viewer: receives the VP8 stream an SDP describes (or a room's presenter, through the
/// relay), sends RTCP back (receiver reports, generic NACK for lost packets, PLI when a frame
/// cannot be repaired), reassembles and decodes the frames through an adaptive jitter buffer,
/// shows them (X11 window) and/or records them (WebM), plays the audio, and reports statistics
/// as events.
///
/// `init` opens everything (ports, window, audio, files), so that what is missing fails
/// there; `run()` then runs the viewer on the calling thread until `stop` is called (from any
/// thread: a signal handler, a timer), the duration passes, the window closes or the relay is
/// lost. The parts: ``ViewerLoop`` (sockets, the poll loop, RTCP, the sinks),
/// ``VideoReceivePath`` (the screen stream's receive path, pure), ``ViewerRoom``,
/// ``ViewerStatsReport``, ``ViewerOutput`` and ``ViewerRecording``, ``AudioReceiver``.
public final class Viewer: Sendable {
    /// What it was made with.
    public let config: ViewerConfig
    /// The stop flag and reason, shared with the run loop.
    private let stopSignal: ViewerStopSignal
    /// The run loop `init` made (so that a port in use or a missing display fails there) and
    /// `run()` takes (nil once taken): handed over whole to the thread that runs it, never
    /// shared, so its state (sockets, window, decoder) needs no lock of its own.
    private let loop: Mutex<ViewerLoop?>

    /// - Throws: `NetworkError` when a port cannot be bound, `VideoOutputError` when the window
    ///   cannot be opened, `RecordingError`, or `FileError` when the SDP has no VP8 video.
    public init(config: ViewerConfig, events: EventSink, logger: Logger, clock: MediaClock = SystemClock()) throws {
        self.config = config
        let stopSignal = ViewerStopSignal()
        self.stopSignal = stopSignal
        loop = Mutex(try ViewerLoop(config: config, events: events, logger: logger, clock: clock, stop: stopSignal))
    }

    /// Asks the viewer to stop (from a signal handler or a timer).
    public func stop(_ reason: ViewerStopReason = .requested) {
        stopSignal.stop(reason)
    }

    /// Runs until stopped (once); returns why, the summary (also sent as the `stopped` event),
    /// and whether the recording failed to finish.
    public func run() -> ViewerResult {
        guard let loop = loop.withLock({ $0.take() }) else { preconditionFailure("Viewer.run() called twice") }
        return loop.run()
    }
}

/// Whether the viewer should go on, and the first reason it was asked to stop.
final class ViewerStopSignal: Sendable {
    private let running = Atomic<Bool>(true)
    private let reason = Mutex<ViewerStopReason?>(nil)

    /// Asks to stop; the first reason given is kept.
    func stop(_ reason: ViewerStopReason) {
        self.reason.withLock { if $0 == nil { $0 = reason } }
        running.store(false, ordering: .relaxed)
    }

    var isRunning: Bool { running.load(ordering: .relaxed) }

    /// Why it stopped (`requested` when it was not asked to).
    var stopReason: ViewerStopReason { reason.withLock { $0 } ?? .requested }
}
