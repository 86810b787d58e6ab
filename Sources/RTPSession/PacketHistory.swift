/// Sender side of NACK: the last packets sent, to retransmit on request (RFC 4585 §6.2.1),
/// after libwebrtc's `RtpPacketHistory`.
///
/// A ring of `capacity` slots (a power of two dividing 65536, so slot = sequence number mod
/// capacity stays right across the wrap) for what is known of each packet, and a ring of
/// `byteCapacity` bytes for the packets themselves, one after the other: a packet is kept until
/// `capacity` newer packets or `byteCapacity` newer bytes were stored, whichever comes first.
/// Both are allocated once, the bytes left untouched until written (only what was sent is
/// resident); storing a packet copies its bytes and allocates nothing. A packet is resent at most once per RTT, and
/// not for a NACK that comes less than half an RTT after it was first sent: no receiver can
/// have missed it yet (it is in flight; an idle probe or a reordering guess asked for it).
public struct PacketHistory: Sendable {
    /// What ``retransmit(sequenceNumber:now:rtt:_:)`` did.
    public enum Outcome: Sendable, Equatable {
        /// The packet was passed to the closure.
        case sent
        /// Already resent less than one RTT ago, or first sent less than half an RTT ago.
        case tooSoon
        /// Never stored, overwritten by newer packets, or older than the age limit.
        case unavailable
        /// The caller's budget for resends did not allow its size.
        case overBudget
    }

    struct Slot: Sendable {
        var sequenceNumber: UInt16 = 0
        /// Where its bytes start, counted over all bytes the ring ever advanced by.
        var start: UInt64 = 0
        var length = 0
        var sentAt: UInt64 = 0
        var resentAt: UInt64?
        var retransmissions = 0
        var used = false
    }

    public let capacity: Int
    public let maxPacketSize: Int
    /// Bytes of packets kept.
    public let byteCapacity: Int
    /// Packets older than this (ns) are not resent; 0 keeps them until overwritten.
    public let maxAge: UInt64
    private var slots: [Slot]
    private var storage: [UInt8]
    /// How far the byte ring advanced, ever (a packet that would not fit before the ring's end
    /// starts at its beginning: the bytes skipped count).
    private var written: UInt64 = 0

    /// Retransmissions made.
    public private(set) var retransmitted = 0
    /// Requests refused by the RTT gate (in flight or resent within an RTT).
    public private(set) var throttled = 0
    /// Requests for packets no longer (or never) here.
    public private(set) var missed = 0
    /// The sequence number stored last.
    public private(set) var newest: UInt16?

    /// - Parameters:
    ///   - capacity: packets kept; a power of two from 1 to 32768 (e.g. 512 ≈ 0.6 s at 6 Mbit/s).
    ///   - maxPacketSize: the largest RTP packet stored (header + payload).
    ///   - maxAge: ns after sending beyond which a packet is not resent (0: no limit).
    ///   - byteCapacity: bytes of packets kept, at least `maxPacketSize` (nil: `capacity` full-size
    ///     packets).
    public init(capacity: Int = 512, maxPacketSize: Int = 1500, maxAge: UInt64 = 1_000_000_000, byteCapacity: Int? = nil) {
        precondition(capacity > 0 && capacity <= 32768 && capacity & (capacity - 1) == 0,
                     "capacity must be a power of two up to 32768")
        let bytes = byteCapacity ?? capacity * maxPacketSize
        precondition(bytes >= maxPacketSize, "byteCapacity must hold a packet of maxPacketSize")
        self.capacity = capacity
        self.maxPacketSize = maxPacketSize
        self.maxAge = maxAge
        self.byteCapacity = bytes
        slots = Array(repeating: Slot(), count: capacity)
        // Not zeroed: a byte is read only after a packet was written there.
        storage = [UInt8](unsafeUninitializedCapacity: bytes) { _, count in count = bytes }
    }

    /// Stores a copy of an RTP packet sent at `now` (ns); its sequence number is read from the
    /// header. Packets that are too short or longer than `maxPacketSize` are not stored.
    /// - Returns: whether it was stored.
    @discardableResult
    public mutating func store(_ packet: UnsafeRawBufferPointer, now: UInt64) -> Bool {
        guard packet.count >= 12, packet.count <= maxPacketSize else { return false }
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        let i = Int(seq) & (capacity - 1)
        var start = written
        if offset(start) + packet.count > byteCapacity {
            start += UInt64(byteCapacity - offset(start))  // from the ring's start
        }
        written = start + UInt64(packet.count)
        slots[i] = Slot(sequenceNumber: seq, start: start, length: packet.count, sentAt: now, resentAt: nil, retransmissions: 0, used: true)
        newest = seq
        let base = offset(start)
        storage.withUnsafeMutableBytes {
            UnsafeMutableRawBufferPointer(rebasing: $0[base..<(base + packet.count)]).copyMemory(from: packet)
        }
        return true
    }

    /// Whether the packet is here and young enough to resend.
    public func contains(sequenceNumber seq: UInt16, now: UInt64) -> Bool {
        let slot = slots[Int(seq) & (capacity - 1)]
        return holds(slot, seq) && (maxAge == 0 || now <= slot.sentAt &+ maxAge)
    }

    /// Where in the byte ring a position counted over all bytes the ring advanced by falls.
    private func offset(_ position: UInt64) -> Int { Int(position % UInt64(byteCapacity)) }

    /// Whether `slot` is packet `seq`'s and its bytes were not written over since.
    private func holds(_ slot: Slot, _ seq: UInt16) -> Bool {
        slot.used && slot.sequenceNumber == seq && written <= slot.start + UInt64(byteCapacity)
    }

    /// Resends packet `seq` for a NACK received at `now`: calls `send` with its bytes (valid
    /// during the call) unless it is unavailable, was already resent within `rtt` ns, or was
    /// first sent within `inFlight` ns (nil: `rtt / 2`; pass 0 while the RTT is only a guess).
    @discardableResult
    public mutating func retransmit(sequenceNumber seq: UInt16, now: UInt64, rtt: UInt64, inFlight: UInt64? = nil,
                                    _ send: (UnsafeRawBufferPointer) -> Void) -> Outcome {
        retransmit(sequenceNumber: seq, now: now, rtt: rtt, inFlight: inFlight, restamping: { send(UnsafeRawBufferPointer($0)) })
    }

    /// ``retransmit(sequenceNumber:now:rtt:inFlight:_:)`` with the stored bytes writable, for a
    /// sender that stamps each packet as it leaves (a new transport-wide sequence number).
    /// `allow` is asked with the packet's size once the RTT gate passed it (a budget for
    /// resends); refused, the packet is left as if not asked for.
    @discardableResult
    public mutating func retransmit(sequenceNumber seq: UInt16, now: UInt64, rtt: UInt64, inFlight: UInt64? = nil,
                                    allow: (Int) -> Bool = { _ in true },
                                    restamping send: (UnsafeMutableRawBufferPointer) -> Void) -> Outcome {
        guard contains(sequenceNumber: seq, now: now) else {
            missed += 1
            return .unavailable
        }
        let i = Int(seq) & (capacity - 1)
        if let last = slots[i].resentAt, now < last &+ rtt {
            throttled += 1
            return .tooSoon
        }
        if slots[i].resentAt == nil, now < slots[i].sentAt &+ (inFlight ?? rtt / 2) {
            throttled += 1
            return .tooSoon
        }
        guard allow(slots[i].length) else { return .overBudget }
        slots[i].resentAt = now
        slots[i].retransmissions += 1
        retransmitted += 1
        let base = offset(slots[i].start), length = slots[i].length
        storage.withUnsafeMutableBytes { send(UnsafeMutableRawBufferPointer(rebasing: $0[base..<(base + length)])) }
        return .sent
    }

    /// Copies up to `count` of the newest packets (newest first) into `buffer`, one per
    /// `slotSize`-byte slot, their lengths into `lengths` (emptied first, its capacity kept):
    /// what a sender resends as a probe (receivers drop the duplicates). Returns how many.
    public func copyNewest(_ count: Int, into buffer: UnsafeMutableRawBufferPointer, slotSize: Int, lengths: inout [Int]) -> Int {
        lengths.removeAll(keepingCapacity: true)
        guard var seq = newest else { return 0 }
        storage.withUnsafeBytes { bytes in
            while lengths.count < count, (lengths.count + 1) * slotSize <= buffer.count {
                let slot = slots[Int(seq) & (capacity - 1)]
                guard holds(slot, seq), slot.length <= slotSize else { break }
                let from = offset(slot.start), to = lengths.count * slotSize
                UnsafeMutableRawBufferPointer(rebasing: buffer[to..<(to + slot.length)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[from..<(from + slot.length)]))
                lengths.append(slot.length)
                seq &-= 1
            }
        }
        return lengths.count
    }
}
