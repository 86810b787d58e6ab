import Events
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
    private let state = Mutex<(status: String, statsSeen: Int)>(("", 0))

    init(quiet: Bool, qrCode: Bool = false, terminal: Bool = isatty(2) != 0) {
        self.quiet = quiet
        self.live = terminal
        self.qrCode = qrCode
    }

    func emit(_ event: some BroadcastEvent) {
        if quiet && event.name != "error" { return }
        let text = event.humanText
        state.withLock { st in
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
            if live && !st.status.isEmpty {
                // Print above the status line, then redraw it.
                FileHandleStderr.write("\r\u{1B}[Kscreenshare: \(text)\n" + (event.name == "stopped" ? "" : st.status))
                if event.name == "stopped" { st.status = "" }
            } else {
                FileHandleStderr.write("screenshare: \(text)\n")
            }
            if live, qrCode, let started = event as? SenderStarted, let url = started.room?.browserURL {
                FileHandleStderr.write(Self.qrDrawing(url))
            }
            if live, qrCode, let changed = event as? InvitationChanged, let url = changed.link {
                FileHandleStderr.write(Self.qrDrawing(url))
            }
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

/// Turns SIGINT/SIGTERM into a clean stop.
final class SignalWatcher {
    private let sources: [DispatchSourceSignal]
    init(_ handler: @escaping @Sendable (Int32) -> Void) {
        var list: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM, SIGUSR1, SIGUSR2] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { handler(sig) }
            s.resume()
            list.append(s)
        }
        sources = list
    }
}
