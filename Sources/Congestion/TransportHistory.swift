import RTCP

/// The sender's side of transport-wide feedback: each packet's transport-wide sequence number
/// (stamped as it leaves), send time and size, kept in a ring until a feedback reports it, and
/// turned into ``PacketResult``s for the ``CongestionController``. Memory is fixed; nothing is
/// allocated per packet.
public struct TransportHistory: Sendable {
    /// Packets remembered: about 10 s at 1000 packets a second.
    public static let capacity = 8192

    struct Slot: Sendable {
        var sequence: UInt16 = 0
        var sendTime: UInt64 = 0
        var size: Int = 0
        var used = false
        var reported = false
        /// Reported, as lost: a later feedback may still report it received (reordered).
        var lost = false
        var probeCluster: Int32 = -1
    }

    private var slots = [Slot](repeating: Slot(), count: TransportHistory.capacity)
    /// The next transport-wide sequence number to stamp.
    public private(set) var nextSequence: UInt16
    /// Results of the last feedback, reused.
    public private(set) var results: [PacketResult] = []
    /// Feedback packets taken, and packets they named that are not (or no longer) here.
    public private(set) var feedbacks = 0
    public private(set) var unknown = 0
    /// Packets named again after a feedback reported them (a repeated feedback, or one that
    /// starts again from a late packet), left out.
    public private(set) var repeated = 0

    public init(firstSequence: UInt16 = 0) {
        nextSequence = firstSequence
        results.reserveCapacity(1024)
    }

    /// A packet of `size` bytes (on the wire) leaves at `now`, in probe cluster `probeCluster`
    /// or as media: its number, to stamp into it.
    public mutating func sent(size: Int, now: UInt64, probeCluster: Int? = nil) -> UInt16 {
        let sequence = nextSequence
        nextSequence &+= 1
        slots[Int(sequence) & (Self.capacity - 1)] = Slot(sequence: sequence, sendTime: now, size: size, used: true,
                                                          probeCluster: Int32(truncatingIfNeeded: probeCluster ?? -1))
        return sequence
    }

    /// Bias added to arrival times, which may be negative on the receiver's clock: only their
    /// differences matter.
    static let arrivalBiasMicros: Int64 = 1 << 40

    /// A feedback's arrival time (its `ticks`) in ns on a positive scale: what a
    /// ``PacketResult`` carries.
    public static func arrivalNanos(_ feedback: TransportFeedback, ticks: Int64) -> UInt64 {
        UInt64(max(0, feedback.arrivalMicros(ticks: ticks) + arrivalBiasMicros)) * 1000
    }

    /// The results one feedback gives, in send order (``results``, valid until the next call).
    /// A packet reported before is left out (a repeated feedback, or a receiver that reports
    /// again from a late packet on, as libwebrtc's does), unless it was reported lost and now
    /// arrived: then it comes again, ``PacketResult/recovered``. Unknown ones (never sent, or
    /// overwritten) are left out and counted.
    public mutating func take(_ feedback: TransportFeedback) -> [PacketResult] {
        results.removeAll(keepingCapacity: true)
        feedbacks += 1
        for (i, arrival) in feedback.arrivals.enumerated() {
            let sequence = feedback.baseSequence &+ UInt16(truncatingIfNeeded: i)
            let index = Int(sequence) & (Self.capacity - 1)
            guard slots[index].used, slots[index].sequence == sequence else { unknown += 1; continue }
            let recovered = slots[index].reported && slots[index].lost && arrival != nil
            if slots[index].reported && !recovered {
                repeated += 1
                continue
            }
            slots[index].reported = true
            slots[index].lost = arrival == nil
            let time = arrival.map { Self.arrivalNanos(feedback, ticks: $0) }
            let cluster = slots[index].probeCluster
            results.append(PacketResult(sendTime: slots[index].sendTime, size: slots[index].size, arrivalTime: time,
                                        probeCluster: cluster < 0 ? nil : Int(cluster), recovered: recovered))
        }
        return results
    }
}
