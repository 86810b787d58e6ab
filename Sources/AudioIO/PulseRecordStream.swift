internal import CPulse

/// One record stream feeding one mixer slot. Touched only on the mainloop thread.
final class RecordStream {
    /// The slot of a stream whose samples are read and dropped (a latency anchor).
    static let discard = -1
    let stream: OpaquePointer
    let slot: Int
    let sinkInput: UInt32?
    let device: String?
    let what: String
    weak var owner: PulseCapture?

    init(stream: OpaquePointer, slot: Int, sinkInput: UInt32?, device: String?, what: String, owner: PulseCapture) {
        self.stream = stream
        self.slot = slot
        self.sinkInput = sinkInput
        self.device = device
        self.what = what
        self.owner = owner
    }

    /// Moves every fragment PulseAudio has into the mixer (no copy beyond the mixer's ring),
    /// with the time its first sample was captured: now minus the stream's latency (the age of
    /// the oldest unread sample), when PulseAudio's timing information is there yet.
    func readAvailable() {
        var captured: UInt64?
        if slot != Self.discard {
            var usec: pa_usec_t = 0
            var negative: Int32 = 0
            if pa_stream_get_latency(stream, &usec, &negative) == 0, let now = owner?.clockNow() {
                captured = negative != 0 ? now &+ usec * 1_000 : now &- min(usec * 1_000, now)
            }
        }
        while pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var bytes = 0
            guard pa_stream_peek(stream, &data, &bytes) >= 0, bytes > 0 else { return }
            let frames = bytes / (MemoryLayout<Float>.size * AudioMixer.channels)
            if let data {
                let samples = UnsafeBufferPointer(start: data.assumingMemoryBound(to: Float.self), count: bytes / MemoryLayout<Float>.size)
                owner?.push(samples, slot: slot, capturedAtNanos: captured)
            }
            captured = captured.map { $0 &+ AudioMixer.nanos(frames: frames) }
            // data == nil with bytes > 0 is a hole in the stream: skipped (the mixer pads silence).
            pa_stream_drop(stream)
        }
    }
}
