import Events
import MediaCore
import Basics
import Recording
import Synchronization

/// `start --record FILE`: what the room (or the receiver) gets — every VP8 frame the encoder
/// makes and every Opus packet, as sent, never re-encoded — written into a WebM file on the
/// presenter's machine. The file begins at the first keyframe; `finish` (a clean stop, Ctrl-C)
/// writes its index; after a crash it still plays to within a second of the end (a cluster a
/// second, written out as it closes: `WebMRecorder`). A file that cannot be written is an
/// `error` event (`record_failure`) and the share goes on without it.
///
/// The encode thread writes video and the audio thread audio, one at a time under the mutex.
final class SenderRecording: Sendable {
    private struct State {
        var recorder: WebMRecorder?
        var failed = false
    }
    private let state = Mutex(State())
    let path: String
    private let audio: Bool
    private let events: any EventSink

    /// Loads libavformat now (so the first keyframe does not wait for it).
    init(path: String, audio: Bool, events: any EventSink) {
        self.path = path
        self.audio = audio
        self.events = events
        do { try WebMRecorder.prepare(for: path) } catch {
            state.withLock { $0.failed = true }
            report("\(error)")
        }
    }

    /// An encoded frame (the file starts at the first keyframe; its size is the header's).
    func video(_ frame: UnsafeRawBufferPointer, keyframe: Bool, size: PixelSize, timestampNanos: UInt64) {
        // The caller's buffer, read under the lock on this thread before the call returns; passed
        // in as its address (the mutex's closure may not take a task's non-Sendable value).
        let (address, count) = (UInt(bitPattern: frame.baseAddress), frame.count)
        let failure = state.withLock { s -> String? in
            guard !s.failed else { return nil }
            do {
                if s.recorder == nil {
                    guard keyframe else { return nil }
                    s.recorder = try WebMRecorder(path: path, video: size, audio: audio)
                }
                try s.recorder?.writeVideo(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count), keyframe: keyframe, timestampNanos: timestampNanos)
                return nil
            } catch {
                return Self.failed(&s, error)
            }
        }
        if let failure { report(failure) }
    }

    /// An Opus packet, once the file has begun.
    func audio(_ packet: UnsafeRawBufferPointer, timestampNanos: UInt64) {
        let (address, count) = (UInt(bitPattern: packet.baseAddress), packet.count)
        let failure = state.withLock { s -> String? in
            guard !s.failed, let recorder = s.recorder else { return nil }
            do {
                try recorder.writeAudio(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address), count: count), timestampNanos: timestampNanos)
                return nil
            } catch {
                return Self.failed(&s, error)
            }
        }
        if let failure { report(failure) }
    }

    /// Finishes the file (its index and duration). Nothing more is written.
    func finish() {
        let failure = state.withLock { s -> String? in
            guard !s.failed, let recorder = s.recorder else { return nil }
            s.recorder = nil
            do {
                try recorder.finish()
                return nil
            } catch {
                return Self.failed(&s, error)
            }
        }
        if let failure { report(failure) }
    }

    private static func failed(_ s: inout State, _ error: any Error) -> String {
        s.failed = true
        s.recorder = nil
        return "\(error)"
    }

    private func report(_ failure: String) {
        events.emit(.error(.recordFailure, "\(failure); the share goes on without the recording"))
    }
}
