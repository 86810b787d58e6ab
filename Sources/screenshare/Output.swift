import Events
import RoomEvents
import Logging
import QRCode
import Sender
import Dispatch
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Prints each event as one JSON line on stdout (flushed at once, for pipes).
struct JSONLineSink: EventSink {
    func emit(_ event: some BroadcastEvent) {
        let line = event.jsonLine() + "\n"
        var s = line
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
}

/// Human-readable output on stderr: on a terminal, one live status line rewritten every
/// second (resolution, fps, kbps, encode time) with events printed above it; otherwise plain
/// log lines, with a stats line every 10 s.
///
/// On a terminal, `start`'s browser link is also drawn as a QR code under its line, for a class
/// to scan from the projected screen.
final class HumanSink: EventSink {
    private let quiet: Bool
    private let live: Bool
    private let qrCode: Bool
    private let state = Mutex<(status: String, statsSeen: Int, blockShown: Bool)>(("", 0, false))

    init(quiet: Bool, qrCode: Bool = false, terminal: Bool = isatty(2) != 0) {
        self.quiet = quiet
        self.live = terminal
        self.qrCode = qrCode
    }

    func emit(_ event: some BroadcastEvent) {
        if quiet && event.name != "error" { return }
        let text = event.humanText
        state.withLock { st in
            // Under the start-up block (what is shared, the link, its QR code, how to stop: 23
            // rows) the routine start lines would push the block's top off an 80×24 terminal;
            // the status line says as much.
            if st.blockShown, event.name == "first_frame_sent" || (event as? RoomConnected)?.rejoined == false { return }
            if event.name == "stats" {
                st.statsSeen += 1
                if live {
                    st.status = text
                    FileHandleStderr.write("\r\u{1B}[K" + text)
                } else if st.statsSeen % 10 == 1 {
                    FileHandleStderr.write("screenshare: \(text)\n")
                }
                return
            }
            // The last line (`stopped`) replaces the status line rather than going above it.
            Self.write(text, above: live ? st.status : "", redraw: event.name != "stopped")
            if event.name == "stopped" { st.status = "" }
            if live, qrCode, let started = event as? SenderStarted, let url = started.room?.browserURL {
                FileHandleStderr.write(Self.qrDrawing(url))
                st.blockShown = true
            }
            if live, qrCode, let changed = event as? InvitationChanged, let url = changed.link {
                FileHandleStderr.write(Self.qrDrawing(url))
            }
        }
    }

    /// A log line (from `HumanLogHandler`): printed as events are, above the status line.
    func log(_ text: String) {
        state.withLock { st in Self.write(text, above: live ? st.status : "") }
    }

    /// "screenshare: TEXT" on a line of its own: above the live status line (cleared, then
    /// redrawn under it), so a line never lands in the middle of it.
    private static func write(_ text: String, above status: String, redraw: Bool = true) {
        if status.isEmpty {
            FileHandleStderr.write("screenshare: \(text)\n")
        } else {
            FileHandleStderr.write("\r\u{1B}[Kscreenshare: \(text)\n" + (redraw ? status : ""))
        }
    }

    /// `url` as a QR code drawn with half blocks, under a line saying what it is for.
    static func qrDrawing(_ url: String) -> String {
        do {
            return "scan to watch in a browser:\n" + (try QRCode(url).terminalLines()).joined(separator: "\n") + "\n"
        } catch {
            return "screenshare: (no QR code: \(error))\n"
        }
    }
}

/// swift-log's lines in the same words and place as the events: "screenshare: warning: …" on
/// stderr, above `HumanSink`'s status line (never in the middle of it), instead of swift-log's
/// own format with a timestamp. In `--json` mode (no status line) the same words, on stderr.
struct HumanLogHandler: LogHandler {
    let sink: HumanSink?
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(sink: HumanSink?, level: Logger.Level) {
        self.sink = sink
        logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // Info is the ordinary level: said without a prefix, as events are.
        let text = (event.level == .info || event.level == .notice ? "" : "\(event.level): ") + event.message.description
        if let sink { sink.log(text) } else { FileHandleStderr.write("screenshare: \(text)\n") }
    }
}

/// Turns SIGINT/SIGTERM into a clean stop (and the other signals given into what the command does
/// with them: SIGUSR1/2 pause and resume `start`, SIGHUP reloads the HTTPS certificate).
final class SignalWatcher {
    private let sources: [DispatchSourceSignal]
    init(signals: [Int32] = [SIGINT, SIGTERM, SIGUSR1, SIGUSR2], _ handler: @escaping @Sendable (Int32) -> Void) {
        var list: [DispatchSourceSignal] = []
        for sig in signals {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { handler(sig) }
            s.resume()
            list.append(s)
        }
        sources = list
    }
}
