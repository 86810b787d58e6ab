import Broadcast
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Prints each event as one JSON line on stdout (flushed at once, for pipes).
struct JSONLineSink: EventSink {
    func emit(_ event: BroadcastEvent) {
        let line = event.jsonLine() + "\n"
        var s = line
        s.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
    }
}

/// Human-readable lines on stderr.
struct HumanSink: EventSink {
    let quiet: Bool
    func emit(_ event: BroadcastEvent) {
        if quiet && event.name != "error" { return }
        let f = event.fields
        func v(_ k: String) -> String {
            switch f[k] {
            case .string(let s)?: return s
            case .int(let i)?: return String(i)
            case .double(let d)?: return String(format: "%.1f", d)
            case .bool(let b)?: return String(b)
            default: return "-"
            }
        }
        let text: String
        switch event.name {
        case "started": text = "sending to \(v("destination")) (ssrc \(v("ssrc")), \(v("fps")) fps max, \(v("bitrate_kbps")) kbps)"
        case "first_frame_sent": text = "first frame sent: \(v("width"))x\(v("height"))"
        case "stats": text = "\(v("width"))x\(v("height")) \(v("fps")) fps \(v("kbps")) kbps, encode p50 \(v("encode_ms_p50")) ms"
        case "paused": text = "paused: the last picture is held (keep-alive only)"
        case "resumed": text = "resumed"
        case "settings_changed":
            let changed: String
            if case .array(let keys)? = f["changed"] {
                changed = keys.compactMap { if case .string(let k) = $0 { return "\(k)=\(v(k))" } else { return nil } }.joined(separator: " ")
            } else { changed = "" }
            text = "settings changed: \(changed)"
        case "stopped": text = "stopped (\(v("reason"))): \(v("frames_sent")) frames, \(v("bytes_sent")) bytes"
        default: text = "\(event.name): \(v("kind")) \(v("message"))"
        }
        FileHandleStderr.write("screenshare: \(text)\n")
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
