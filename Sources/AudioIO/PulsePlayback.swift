internal import CPulse
import Foundation
import Synchronization

/// Plays 48 kHz stereo float audio through PulseAudio.
///
/// The viewer's thread pushes decoded samples into a ring (`push`); a playback thread of its
/// own writes them to a `pa_simple` stream in 10 ms blocks — `pa_simple_write` blocks at the
/// server's pace, so the viewer never waits on the sound card. When the ring runs dry the
/// thread writes silence (counted as underruns) so the stream never stalls.
public final class PulsePlayback: @unchecked Sendable {
    // `stream` is used by the playback thread only (and freed after it ended); the ring by
    // its Mutex.
    private let stream: OpaquePointer
    private let ring: Mutex<Ring>
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)
    public let sinkName: String?

    struct Ring {
        var samples: [Float]
        var read = 0
        var count = 0
        var underruns = 0
        var overruns = 0
        var written = 0
    }

    /// Capacity: 1 s of audio (more is dropped, oldest first).
    static let capacity = 48_000 * 2

    /// - Parameters:
    ///   - sink: a PulseAudio sink name, or nil for the default one.
    ///   - latencyMillis: the target buffer in the server (what is queued ahead of the speaker).
    /// - Throws: `AudioError` naming PulseAudio's reason (no server, no such sink).
    public init(sink: String?, appName: String = "screenshare watch", latencyMillis: Int = 60) throws {
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: 48_000, channels: 2)
        let bytesPerMs = UInt32(48 * 2 * 4)
        var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: bytesPerMs * UInt32(latencyMillis),
                                  prebuf: UInt32.max, minreq: UInt32.max, fragsize: UInt32.max)
        var error: Int32 = 0
        guard let s = pa_simple_new(nil, appName, PA_STREAM_PLAYBACK, sink, "screen share", &spec, nil, &attr, &error) else {
            let reason = String(cString: pa_strerror(error))
            throw AudioError(sink.map { "cannot play to PulseAudio sink '\($0)': \(reason)" } ?? "cannot play through PulseAudio: \(reason)")
        }
        stream = s
        sinkName = sink
        ring = Mutex(Ring(samples: [Float](repeating: 0, count: Self.capacity)))
        let t = Thread { [self] in playLoop() }
        t.name = "screenshare-playback"
        t.start()
    }

    deinit {
        stop()
        pa_simple_free(stream)
    }

    /// Queues interleaved stereo samples for playback (never blocks).
    public func push(_ pcm: UnsafeBufferPointer<Float>) {
        ring.withLock { r in
            let cap = r.samples.count
            for s in pcm {
                if r.count == cap {  // full: drop the oldest
                    r.read = (r.read + 1) % cap
                    r.count -= 1
                    r.overruns += 1
                }
                r.samples[(r.read + r.count) % cap] = s
                r.count += 1
            }
        }
    }

    /// Samples queued here (not yet handed to PulseAudio).
    public var queuedFrames: Int { ring.withLock { $0.count / 2 } }
    /// Blocks written as silence because nothing was queued.
    public var underruns: Int { ring.withLock { $0.underruns } }

    /// Stops the playback thread (idempotent; waits for it).
    public func stop() {
        if running.exchange(false, ordering: .relaxed) { finished.wait() }
    }

    private func playLoop() {
        let block = 480 * 2  // 10 ms
        var buffer = [Float](repeating: 0, count: block)
        var error: Int32 = 0
        var started = false
        while running.load(ordering: .relaxed) {
            let got = ring.withLock { r -> Int in
                let n = min(block, r.count)
                let cap = r.samples.count
                for i in 0..<n { buffer[i] = r.samples[(r.read + i) % cap] }
                r.read = (r.read + n) % cap
                r.count -= n
                if n < block && started { r.underruns += 1 }
                r.written += n
                return n
            }
            if got == 0 && !started {
                // Nothing to play yet: do not fill the server with silence ahead of the first sound.
                usleep(5_000)
                continue
            }
            started = true
            for i in got..<block { buffer[i] = 0 }
            let rc = buffer.withUnsafeBytes { pa_simple_write(stream, $0.baseAddress, $0.count, &error) }
            if rc < 0 { usleep(10_000) }  // the server went away: keep the viewer going, silently
        }
        finished.signal()
    }
}
