/// Receiver side of generic NACK (RFC 4585 §6.2.1): which lost packets to ask for, and when.
///
/// A hole in the sequence becomes a candidate once it is unlikely to be mere reordering
/// (``Configuration/reorderPackets`` newer packets arrived, or ``Configuration/reorderDelay``
/// passed). When the path has been seen to reorder by more than that (a hole filled before it
/// was asked for, or too soon after to be the answer), holes wait for the observed reordering
/// time instead, whatever arrived after them (``reorderWindow``, a decaying maximum up to
/// ``Configuration/maxReorderWait``), as libwebrtc's NACK module waits by its reordering
/// histogram: a burst of packets that all overtake one must not turn it into a NACK. It is
/// asked for again at most once per ``retryInterval(rtt:)`` (the RTT plus twice its measured
/// variation, as TCP's RTO (RFC 6298) allows for it, at least ``Configuration/minRetryInterval``:
/// a retry sent at exactly the RTT races its answer on a jittery path), at most ``Configuration/maxRetries`` times; holes older than ``Configuration/maxAge`` or
/// ``Configuration/maxPacketAge`` packets, and the oldest beyond ``Configuration/maxListSize``,
/// are given up: the caller then asks for a keyframe (PLI) and tells the frame assembler.
/// Give-ups are always oldest first, so "given up through N" covers every older hole.
///
/// A hole is normally seen only when a later packet arrives. On a still screen the next packet
/// may be a second away, so when the caller says which packets end a frame (the RTP marker) and
/// the newest packet does not, and nothing newer arrives for ``Configuration/tailDelay``, the
/// packet after it is asked for too (a tail probe; a sender that never sent it ignores the NACK).
/// And while nothing newer arrives at all, the next packet is asked for every
/// ``Configuration/idleProbeInterval`` (an idle probe): a keep-alive frame lost whole on a still
/// slide would otherwise be noticed only when the next one comes a second later. Idle probes
/// are not holes: they are never retried, given up or counted in ``requested``.
///
/// Time is in nanoseconds of a monotonic clock; memory is one preallocated list.
public struct NackGenerator: Sendable {
    public struct Configuration: Sendable {
        public var reorderPackets: Int64 = 2
        public var reorderDelay: UInt64 = 5_000_000
        public var minRetryInterval: UInt64 = 20_000_000
        public var maxRetries = 10
        public var maxAge: UInt64 = 1_000_000_000
        public var maxPacketAge: Int64 = 1000
        public var maxListSize = 500
        /// How long after a newest packet that does not end a frame the next one is asked for;
        /// nil: never (holes are found from later packets only). Longer than the reordering
        /// within one frame's burst.
        public var tailDelay: UInt64? = 30_000_000
        /// The longest a hole waits for a reordered packet before it is asked for.
        public var maxReorderWait: UInt64 = 100_000_000
        /// While no newer packet arrives, how often the next one is asked for; nil: never.
        public var idleProbeInterval: UInt64?
        public init() {}
    }

    struct Entry: Sendable {
        var sequence: Int64
        var detectedAt: UInt64
        var lastSentAt: UInt64?
        var retries: Int
        var firstSentAt: UInt64? = nil
    }

    public let configuration: Configuration
    private var list: [Entry]
    private var unwrapper = SequenceUnwrapper()
    private var newest: Int64?
    private var suspect: Int64?
    private var lostThrough: Int64?
    /// Arrival of the newest packet while it does not end a frame (a tail probe is due after
    /// ``Configuration/tailDelay``); nil otherwise or once probed.
    private var tailSince: UInt64?

    /// How late reordered packets have been arriving (ns; a decaying maximum), 0 until seen.
    public private(set) var reorderWindow: UInt64 = 0
    /// NACKed packets that arrived too soon after the request to be its answer (reordered).
    public private(set) var spurious = 0

    /// Arrival of the newest packet, and the last idle probe since.
    private var newestAt: UInt64 = 0
    private var idleProbedAt: UInt64?
    /// Idle probes sent (see ``Configuration/idleProbeInterval``).
    public private(set) var idleProbes = 0

    /// Sequence numbers put in NACKs (each retry counts).
    public private(set) var requested = 0
    /// NACKed packets that arrived afterwards.
    public private(set) var recovered = 0
    /// Missing packets given up (too old, too many retries, list full, huge gap).
    public private(set) var givenUp = 0
    /// Round-trip time measured from NACK to retransmission (ns), as libwebrtc's receiver does
    /// without RTCP XR: a smoothed average of packets answered after their first request;
    /// nil before the first one. Pass it back as `rtt` so retries wait for the answer.
    public private(set) var measuredRTT: UInt64?
    /// How much the NACK-to-answer time varies (ns): a smoothed mean deviation (RFC 6298's
    /// RTTVAR), 0 before the first answer.
    public private(set) var rttVariation: UInt64 = 0

    /// How long to wait for a NACK's answer before asking again.
    public func retryInterval(rtt: UInt64) -> UInt64 {
        max(rtt &+ 2 * rttVariation, configuration.minRetryInterval)
    }

    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.maxListSize > 0 && configuration.maxPacketAge > 0)
        self.configuration = configuration
        list = []
        list.reserveCapacity(configuration.maxListSize)
    }

    /// Missing packets currently tracked.
    public var missingCount: Int { list.count }

    /// Records a packet's arrival (a retransmission too).
    /// - Parameter endsFrame: the packet's RTP marker (the last packet of a video frame), if
    ///   the caller knows it; nil turns tail probing off for this packet.
    /// - Parameter recovered: rebuilt from FEC, not arrived: it fills its hole but says nothing
    ///   of the path's reordering or round trip.
    /// - Returns: true if it filled a hole this generator had asked for.
    @discardableResult
    public mutating func onPacket(sequenceNumber seq: UInt16, now: UInt64, endsFrame: Bool? = nil, recovered fromFEC: Bool = false) -> Bool {
        let e = unwrapper.extended(seq)
        guard let top = newest else {
            newest = unwrapper.unwrap(seq)
            tailSince = endsFrame == false ? now : nil
            newestAt = now
            return false
        }
        if e > top {
            suspect = nil
            newestAt = now
            idleProbedAt = nil
            reorderWindow -= reorderWindow >> 10  // forgotten over some thousand packets
            _ = unwrapper.unwrap(seq)
            tailSince = endsFrame == false ? now : nil
            var filledProbe = false
            if let last = list.last, last.sequence > top {
                // The tail probe (the only entry above the newest packet, always newest + 1):
                // answered, or still a hole below this packet.
                if last.sequence == e {
                    filledProbe = last.retries > 0
                    list.removeLast()
                }
                addMissing(from: top + 2, to: e, now: now)
            } else {
                addMissing(from: top + 1, to: e, now: now)
            }
            if filledProbe { recovered += 1 }
            newest = e
            // Holes now too many packets behind the newest.
            if let first = list.first, first.sequence < e - configuration.maxPacketAge {
                let cut = list.firstIndex { $0.sequence >= e - configuration.maxPacketAge } ?? list.count
                giveUp(count: cut, through: list[cut - 1].sequence)
            }
            return filledProbe
        }
        if e < top - configuration.maxPacketAge {
            // Far behind everything tracked: a stale packet, or the sender restarted its
            // sequence. Two in a row mean a restart.
            if suspect == e - 1 {
                if !list.isEmpty { giveUp(count: list.count, through: list[list.count - 1].sequence) }
                unwrapper.reset()
                newest = unwrapper.unwrap(seq)
                suspect = nil
                tailSince = nil
            } else {
                suspect = e
            }
            return false
        }
        guard let i = index(of: e) else { return false }
        let asked = list[i].retries > 0
        if fromFEC {
            list.remove(at: i)
            return asked
        }
        // Reordering: filled before it was asked for, or sooner after than half an RTT.
        let rtt = measuredRTT ?? 100_000_000
        if !asked || list[i].firstSentAt.map({ now < $0 &+ rtt / 2 }) == true {
            if asked { spurious += 1 }
            // How late it was: since the hole was seen; for one already asked for, only since the
            // NACK (the wait before it is ours, and counting it made the allowance feed itself).
            let since = asked ? list[i].firstSentAt ?? list[i].detectedAt : list[i].detectedAt
            let late = min(now &- min(now, since), configuration.maxReorderWait)
            reorderWindow = max(late, reorderWindow - reorderWindow / 256)
        }
        // An RTT sample, from a packet asked for once (Karn). Without RTX (RFC 4588) an answer
        // cannot be told from the original arriving late, so a sample no longer than the path's
        // reordering may be the original and is not taken: such samples (a few ms on a path
        // reordering by 20 ms) pulled the RTT down, which made more of the reordered packets
        // look like answers — the RTT fell to 5 ms and each loss was asked for 5 times.
        if list[i].retries == 1, let sent = list[i].firstSentAt, now > sent, now - sent > reorderWindow {
            let sample = min(now - sent, 2_000_000_000)
            if let srtt = measuredRTT {
                let error = sample > srtt ? sample - srtt : srtt - sample
                rttVariation = rttVariation - rttVariation / 4 + error / 4
                measuredRTT = srtt - srtt / 8 + sample / 8
            } else {
                measuredRTT = sample
                rttVariation = sample / 2
            }
        }
        list.remove(at: i)
        if asked { recovered += 1 }
        return asked
    }

    private mutating func addMissing(from first: Int64, to end: Int64, now: UInt64) {
        guard end > first else { return }
        // Only the newest holes that could still be asked for are kept.
        let keep = min(Int64(configuration.maxListSize), configuration.maxPacketAge)
        let start = max(first, end - keep)
        if start > first {
            givenUp += Int(start - first)
            lostThrough = max(lostThrough ?? .min, start - 1)
        }
        let room = configuration.maxListSize - list.count
        let adding = Int(end - start)
        if adding > room {
            let drop = min(list.count, adding - room)
            if drop > 0 { giveUp(count: drop, through: list[drop - 1].sequence) }
        }
        var s = start
        while s < end {
            list.append(Entry(sequence: s, detectedAt: now, lastSentAt: nil, retries: 0))
            s += 1
        }
    }

    private func index(of e: Int64) -> Int? {
        var lo = 0, hi = list.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if list[mid].sequence < e { lo = mid + 1 } else { hi = mid }
        }
        return lo < list.count && list[lo].sequence == e ? lo : nil
    }

    private mutating func giveUp(count: Int, through: Int64) {
        givenUp += count
        lostThrough = max(lostThrough ?? .min, through)
        list.removeFirst(count)
    }

    /// Appends to `nacks` the sequence numbers to ask for at `now`, oldest first, and gives up
    /// on holes past their limits (see ``takeLoss()``).
    /// - Parameters:
    ///   - rtt: current round-trip time estimate (ns); 0 if unknown.
    ///   - nacks: the caller's reusable array (not cleared here).
    public mutating func poll(now: UInt64, rtt: UInt64, into nacks: inout [UInt16]) {
        guard let top = newest else { return }
        let interval = retryInterval(rtt: rtt)
        // Give up first (oldest first, so a prefix of the list).
        var cut = 0
        for (i, entry) in list.enumerated() {
            let tooOld = now >= entry.detectedAt &+ configuration.maxAge
            let exhausted = entry.retries >= configuration.maxRetries && now >= (entry.lastSentAt ?? 0) &+ interval
            if tooOld || exhausted { cut = i + 1 }
        }
        if cut > 0 { giveUp(count: cut, through: list[cut - 1].sequence) }
        if let since = tailSince, let delay = configuration.tailDelay, now >= since &+ delay,
           list.count < configuration.maxListSize {
            // Asked for at once: it is past any reordering already.
            list.append(Entry(sequence: top + 1, detectedAt: now &- min(now, configuration.reorderDelay), lastSentAt: nil, retries: 0))
            tailSince = nil
        }
        for i in list.indices {
            let entry = list[i]
            let settled = now >= entry.detectedAt &+ reorderWait
                || (reorderWindow <= configuration.reorderDelay && top - entry.sequence >= configuration.reorderPackets)
            guard settled, entry.retries < configuration.maxRetries else { continue }
            if let last = entry.lastSentAt, now < last &+ interval { continue }
            list[i].lastSentAt = now
            if list[i].retries == 0 { list[i].firstSentAt = now }
            list[i].retries += 1
            requested += 1
            nacks.append(UInt16(truncatingIfNeeded: entry.sequence))
        }
        if let probe = idleProbeDue, now >= probe {
            idleProbedAt = now
            idleProbes += 1
            nacks.append(UInt16(truncatingIfNeeded: top + 1))
        }
    }

    /// When the next idle probe is due: only while no tail probe or hole above the newest
    /// packet is pending (those ask for the same packet already).
    private var idleProbeDue: UInt64? {
        guard let interval = configuration.idleProbeInterval, newest != nil, tailSince == nil else { return nil }
        if let last = list.last, let top = newest, last.sequence > top { return nil }
        return (idleProbedAt ?? newestAt) &+ interval
    }

    /// How long a new hole waits before it is asked for (unless packets say so sooner while
    /// the path does not reorder).
    private var reorderWait: UInt64 { max(configuration.reorderDelay, min(reorderWindow + reorderWindow / 4, configuration.maxReorderWait)) }

    /// When ``poll(now:rtt:into:)`` next has something to do, or nil with no holes.
    public func nextWakeup(rtt: UInt64) -> UInt64? {
        let interval = retryInterval(rtt: rtt)
        var earliest: UInt64?
        for entry in list {
            var t = entry.detectedAt &+ configuration.maxAge
            if entry.retries < configuration.maxRetries {
                t = min(t, entry.lastSentAt.map { $0 &+ interval } ?? entry.detectedAt &+ reorderWait)
            } else if let last = entry.lastSentAt {
                t = min(t, last &+ interval)
            }
            earliest = min(earliest ?? t, t)
        }
        if let since = tailSince, let delay = configuration.tailDelay {
            earliest = min(earliest ?? since &+ delay, since &+ delay)
        }
        if let probe = idleProbeDue { earliest = min(earliest ?? probe, probe) }
        return earliest
    }

    /// The newest sequence number given up since the last call (every older hole is given up
    /// too), or nil. A non-nil answer means frames were lost: send a PLI and pass it to
    /// ``VP8FrameAssembler/markLost(through:)``.
    public mutating func takeLoss() -> UInt16? {
        defer { lostThrough = nil }
        return lostThrough.map { UInt16(truncatingIfNeeded: $0) }
    }
}
