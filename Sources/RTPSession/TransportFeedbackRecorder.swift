import RTCP

/// The receiver's side of transport-wide congestion control: when each packet of a transport
/// arrived, by its transport-wide sequence number, and every ``interval`` a feedback
/// (``TransportFeedback``) naming the packets since the last one, as libwebrtc's
/// `RemoteEstimatorProxy` sends it. A packet missing when its feedback goes is reported lost;
/// if it arrives after all (overtaken on a reordering path), the next feedback starts again
/// from it, as libwebrtc's does, so the sender learns that it was late, not lost. Memory is
/// fixed: the ring and the feedback are made once.
public struct TransportFeedbackRecorder: Sendable {
    /// How often feedback goes (ns): 100 ms, as libwebrtc's default.
    public static let interval: UInt64 = 100_000_000
    /// Packets remembered between feedbacks.
    static let capacity = 4096
    /// The most packets one feedback names (about 1.2 kB at most on the wire).
    public static let maxPacketsPerFeedback = 500

    private var arrivals = [UInt64](repeating: 0, count: TransportFeedbackRecorder.capacity)
    private var sequences = [Int64](repeating: -1, count: TransportFeedbackRecorder.capacity)
    private var unwrapper = SequenceUnwrapper()
    /// The first packet the next feedback names (unwrapped), and the newest seen.
    private var start: Int64?
    private var newest: Int64?
    /// Arrival times are counted from the first packet (µs), so the reference time stays small.
    private var origin: UInt64?
    private var count: UInt8 = 0
    /// The next feedback, reused (its arrays keep their capacity).
    public private(set) var feedback = TransportFeedback(senderSSRC: 0, mediaSSRC: 0, baseSequence: 0, referenceTime: 0,
                                                          feedbackCount: 0, arrivals: [])
    /// When the next feedback is due (ns), once a packet came.
    public private(set) var nextDue: UInt64?

    public init() {
        feedback.arrivals.reserveCapacity(Self.maxPacketsPerFeedback)
    }

    /// A packet with transport-wide number `sequence` arrived at `now` (ns, monotonic).
    public mutating func onPacket(sequence: UInt16, now: UInt64) {
        let s = unwrapper.unwrap(sequence)
        if origin == nil { origin = now - now % 1000 }
        if let start, s < start {
            // Reported already, as lost. Still in the ring (and not a stray from long ago): the
            // next feedback names it again, and what came after it.
            guard start - s < Int64(Self.capacity) / 2, let newest, newest - s < Int64(Self.capacity) - 1 else { return }
            let i = Int(s & Int64(Self.capacity - 1))
            guard sequences[i] != s else { return }  // a duplicate
            sequences[i] = s
            arrivals[i] = now
            self.start = s
            if nextDue == nil { nextDue = now + Self.interval }
            return
        }
        if let newest, s > newest + Int64(Self.capacity) / 2 {
            // A jump (the sender restarted): start over from here.
            self.start = s
        }
        if start == nil { start = s }
        if let start, s - start >= Int64(Self.capacity) { self.start = s - Int64(Self.capacity) + 1 }
        newest = max(newest ?? s, s)
        let i = Int(s & Int64(Self.capacity - 1))
        sequences[i] = s
        arrivals[i] = now
        if nextDue == nil { nextDue = now + Self.interval }
    }

    /// The feedback due at `now` (valid until the next call), or nil when none is due or there
    /// is nothing to report. A feedback names at most ``maxPacketsPerFeedback`` packets; the
    /// rest go in the next one, due at once.
    public mutating func poll(now: UInt64, senderSSRC: UInt32, mediaSSRC: UInt32) -> TransportFeedback? {
        guard let due = nextDue, now >= due else { return nil }
        guard let first = start, let last = newest, last >= first, let origin else {
            // Nothing came since the last feedback: none is due until something does (left
            // due, a viewer's loop woke for it without end between a still slide's packets).
            nextDue = nil
            return nil
        }
        nextDue = now + Self.interval
        feedback.senderSSRC = senderSSRC
        feedback.mediaSSRC = mediaSSRC
        feedback.baseSequence = UInt16(truncatingIfNeeded: first)
        feedback.feedbackCount = count
        feedback.arrivals.removeAll(keepingCapacity: true)
        var reference: Int64?
        var previous: Int64 = 0
        var s = first
        while s <= last, feedback.arrivals.count < Self.maxPacketsPerFeedback {
            let i = Int(s & Int64(Self.capacity - 1))
            if sequences[i] == s {
                let micros = Int64((arrivals[i] - origin) / 1000)
                if reference == nil {
                    reference = micros / TransportFeedback.referenceMicros
                    feedback.referenceTime = Int32(truncatingIfNeeded: reference! & 0x7F_FFFF)
                }
                let ticks = (micros - reference! * TransportFeedback.referenceMicros) / TransportFeedback.tickMicros
                guard TransportFeedback.fits(delta: ticks - previous) else { break }  // the rest in the next one
                previous = ticks
                feedback.arrivals.append(ticks)
            } else {
                feedback.arrivals.append(nil)
            }
            s += 1
        }
        start = s
        if s <= last { nextDue = now }
        // Only losses (a burst of more than one feedback's worth): any reference time will do.
        if reference == nil { feedback.referenceTime = 0 }
        count &+= 1
        return feedback
    }
}
