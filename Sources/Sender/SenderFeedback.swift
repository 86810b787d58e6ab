import RTCP

/// What the video sender learns from its receivers' RTCP and what it must do about it: keyframe
/// requests (PLI/FIR), packets to resend (generic NACK, each at most once per round trip and
/// not while still in flight), the round trip (receiver reports answering our sender reports),
/// and the receivers' reference times (RFC 3611 RRTR) to answer with a DLRR in the next sender
/// report. Pure: times are passed in; the caller does the I/O.
struct SenderFeedback {
    /// What a packet asks of the sender.
    enum Action: Equatable {
        /// PLI or FIR: a keyframe (through the throttle).
        case keyframeRequested
        /// Resend these packets from the history. `inFlightNanos`: leave alone what was sent
        /// this recently (0 while the round trip is only assumed).
        case resend(GenericNACK, rttNanos: UInt64, inFlightNanos: UInt64)
        /// A receiver report about our stream: the round trip it gave (nil when it could not,
        /// e.g. before our first sender report reached it) and the loss it saw.
        case receiverReport(rttNanos: UInt64?, fractionLost: UInt8, cumulativeLost: Int)
        /// Transport-wide feedback (which packets arrived, when), for congestion control, with
        /// the round trip known so far.
        case transportFeedback(TransportFeedback, rttNanos: UInt64)
        /// A REMB naming our stream (or none): a cap on what we send in all (bit/s).
        case remb(bitsPerSecond: Double)
    }

    /// A receiver's RRTR, kept until the next sender report answers it.
    struct ReferenceTime: Equatable {
        var ssrc: UInt32
        /// The RRTR's middle 32 bits of NTP time.
        var lastReceiverReport: UInt32
        var arrival: UInt64
    }

    /// At most this many receivers' RRTRs wait for an answer.
    static let maxPendingReferenceTimes = 8

    /// Our video SSRC: NACKs and reports about other streams are not ours to act on.
    let ssrc: UInt32
    /// The round trip: assumed 100 ms until a receiver report measures it (at least 1 ms).
    private(set) var rttNanos: UInt64 = 100_000_000
    /// Whether `rttNanos` was measured rather than assumed.
    private(set) var rttMeasured = false
    private(set) var pendingReferenceTimes: [ReferenceTime] = []

    init(ssrc: UInt32) {
        self.ssrc = ssrc
        pendingReferenceTimes.reserveCapacity(Self.maxPendingReferenceTimes)
    }

    /// Takes the packets of one compound RTCP packet that arrived at `now` (monotonic) /
    /// `wallNow` (Unix nanoseconds, for the NTP arithmetic of round trips); `act` gets what each
    /// asks for, in order.
    mutating func handle(_ packets: [RTCPPacket], now: UInt64, wallNow: UInt64, _ act: (Action) -> Void) {
        for packet in packets {
            switch packet {
            case .pli, .fir:
                act(.keyframeRequested)
            case .nack(let nack) where nack.mediaSSRC == ssrc:
                act(.resend(nack, rttNanos: rttNanos, inFlightNanos: rttMeasured ? rttNanos / 2 : 0))
            case .transportFeedback(let fb):
                act(.transportFeedback(fb, rttNanos: rttNanos))
            case .remb(let r) where r.ssrcs.isEmpty || r.ssrcs.contains(ssrc):
                act(.remb(bitsPerSecond: Double(r.bitsPerSecond)))
            case .extendedReport(let xr):
                guard let t = xr.referenceTime else { break }
                pendingReferenceTimes.removeAll { $0.ssrc == xr.ssrc }
                if pendingReferenceTimes.count < Self.maxPendingReferenceTimes {
                    pendingReferenceTimes.append(ReferenceTime(ssrc: xr.ssrc, lastReceiverReport: t.middle32, arrival: now))
                }
            case .receiverReport(let rr):
                for block in rr.reports where block.ssrc == ssrc {
                    let rtt = block.roundTripNanos(arrival: NTPTimestamp(unixNanos: wallNow))
                    if let rtt {
                        rttNanos = max(rtt, 1_000_000)
                        rttMeasured = true
                    }
                    act(.receiverReport(rttNanos: rtt, fractionLost: block.fractionLost, cumulativeLost: Int(block.cumulativeLost)))
                }
            default:
                break
            }
        }
    }

    /// The DLRR items answering the pending RRTRs at `now` (RFC 3611 §4.5); they are answered once.
    mutating func takeDLRR(now: UInt64) -> [ExtendedReport.DLRRItem] {
        defer { pendingReferenceTimes.removeAll(keepingCapacity: true) }
        return pendingReferenceTimes.map {
            ExtendedReport.DLRRItem(ssrc: $0.ssrc, lastReceiverReport: $0.lastReceiverReport,
                                    delaySinceLastReceiverReport: NTPTimestamp.short(fromNanos: now &- $0.arrival))
        }
    }
}
