/// Forward error correction for RTP, ULPFEC (RFC 5109) with one protection level, sent in the
/// media stream itself: the same SSRC and sequence numbers, its own payload type (as
/// GStreamer's `rtpulpfecenc` sends it and `rtpulpfecdec` takes it; no RED).
///
/// An FEC packet is the XOR of the packets it protects (RFC 5109 §6): of their first two header
/// bytes (P, X, CC, M, PT), timestamps and lengths (less the 12-byte fixed header) in its FEC
/// header (§7.3), and of everything after their fixed headers (CSRCs, header extension,
/// payload, zero-padded to the longest) in its level-0 payload (§7.4). Its mask says which
/// packets from `SN base` on it covers, 16 of them (L = 0) or 48 (L = 1). One protected packet
/// missing, the others and the FEC packet present: the missing one is their XOR.
public enum ULPFEC {
    /// The payload type our streams use for ULPFEC (plain mode; a room's stream says its own).
    public static let payloadType: UInt8 = 117
    /// The FEC header (§7.3).
    public static let headerSize = 10
    /// The most packets one FEC packet covers (the long mask).
    public static let maxProtected = 48
    /// The largest packet kept or made.
    public static let maxPacketSize = 1500

    /// How many FEC packets protect `media` packets at `protection` (FEC packets per media
    /// packet; 0: none), over blocks of at most ``maxProtected``. A frame of one block gets the
    /// whole part of `media × protection + credit` (what earlier frames left over), so small
    /// frames share FEC packets over time instead of each rounding up (6 packets at 17.5 %:
    /// one FEC packet, and now and then two); each block of a bigger frame gets its rounded-up
    /// share.
    public static func fecCount(media: Int, protection: Double, credit: Double = 0) -> Int {
        guard media > 0, protection > 0 else { return 0 }
        if media <= maxProtected { return min(media, Int(Double(media) * protection + credit)) }
        var total = 0
        forEachBlock(media: media) { _, size in total += blockFEC(size: size, protection: protection) }
        return total
    }

    /// FEC packets for one block of a frame of several: at least one, at most one per packet.
    static func blockFEC(size: Int, protection: Double) -> Int {
        min(size, max(1, Int((Double(size) * protection).rounded(.up))))
    }

    /// Splits `media` packets into even blocks of at most ``maxProtected``: (first, size).
    static func forEachBlock(media: Int, _ body: (Int, Int) -> Void) {
        let blocks = (media + maxProtected - 1) / maxProtected
        guard blocks > 0 else { return }
        let base = media / blocks, extra = media % blocks
        var first = 0
        for b in 0..<blocks {
            let size = base + (b < extra ? 1 : 0)
            body(first, size)
            first += size
        }
    }
}

/// The sender's half: keeps the packets of one frame as they are sent, then makes the FEC
/// packets that protect them. In a block of `n` packets with `k` FEC packets, FEC packet `j`
/// covers packets `j, j + k, j + 2k, …`: any one loss per group is repaired, so is any burst
/// of up to `k` consecutive losses. Preallocated; nothing is allocated per packet.
public struct ULPFECEncoder: Sendable {
    /// The most packets of one frame protected (the rest of a bigger frame is not).
    public let capacity: Int
    private var store: [UInt8]
    private var lengths: [Int]
    private var firstSequence: UInt16 = 0
    /// Packets kept for the frame so far.
    public private(set) var count = 0
    /// The fraction of an FEC packet earlier frames were owed (see ``ULPFEC/fecCount(media:protection:credit:)``).
    public private(set) var credit = 0.0

    public init(capacity: Int = 256) {
        self.capacity = capacity
        // Not zeroed: a slot is read only after a packet was written there, so a stream
        // without FEC never makes these pages resident.
        store = [UInt8](unsafeUninitializedCapacity: capacity * ULPFEC.maxPacketSize) { _, count in count = capacity * ULPFEC.maxPacketSize }
        lengths = [Int](repeating: 0, count: capacity)
    }

    /// Keeps a media packet as it was sent (header extension values included): the frame's
    /// packets, in sequence order. A packet that does not follow the last one starts afresh.
    public mutating func add(_ packet: UnsafeRawBufferPointer) {
        guard packet.count >= RTPHeader.fixedSize, packet.count <= ULPFEC.maxPacketSize else { return }
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        if count > 0, seq != firstSequence &+ UInt16(truncatingIfNeeded: count) { count = 0 }
        guard count < capacity else { return }
        if count == 0 { firstSequence = seq }
        let base = count * ULPFEC.maxPacketSize
        store.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[base..<(base + packet.count)]).copyMemory(from: packet) }
        lengths[count] = packet.count
        count += 1
    }

    /// Forgets the frame's packets.
    public mutating func reset() { count = 0 }

    /// FEC packets ``finish(protection:payloadType:sequence:transportSequenceID:into:emit:)``
    /// will make.
    public func fecCount(protection: Double) -> Int { ULPFEC.fecCount(media: count, protection: protection, credit: credit) }

    /// Makes the FEC packets for the packets kept and forgets them. They take the sequence
    /// numbers from `sequence` on (reserved by the caller, after the frame's), the SSRC and
    /// timestamp of the last packet, and carry the transport-wide block when
    /// `transportSequenceID` is set (numbered when sent).
    /// - Parameter buffer: at least ``ULPFEC/maxPacketSize`` bytes, reused for each packet.
    /// - Returns: how many were made.
    @discardableResult
    /// - Parameter ssrc: the FEC packets' SSRC when they are a stream of their own (nil: the
    ///   media's, in its sequence numbers).
    public mutating func finish(protection: Double, payloadType: UInt8, sequence: UInt16, ssrc fecSSRC: UInt32? = nil,
                                transportSequenceID: UInt8?, into buffer: UnsafeMutableRawBufferPointer,
                                emit: (UnsafeMutableRawBufferPointer) -> Void) -> Int {
        defer { count = 0 }
        guard count > 0, protection > 0 else { credit = 0; return 0 }
        precondition(buffer.count >= ULPFEC.maxPacketSize, "FEC buffer too small")
        let planned = fecCount(protection: protection)
        credit = count <= ULPFEC.maxProtected ? min(1, max(0, Double(count) * protection + credit - Double(planned))) : 0
        guard planned > 0 else { return 0 }
        var made = 0
        store.withUnsafeBytes { store in
            let last = (count - 1) * ULPFEC.maxPacketSize
            let timestamp = readUInt32(store, last + 4), ssrc = fecSSRC ?? readUInt32(store, last + 8)
            ULPFEC.forEachBlock(media: count) { first, size in
                let k = size == count ? planned : ULPFEC.blockFEC(size: size, protection: protection)
                for j in 0..<k {
                    let header = RTPHeader(payloadType: payloadType, sequenceNumber: sequence &+ UInt16(truncatingIfNeeded: made),
                                           timestamp: timestamp, ssrc: ssrc)
                    var n = header.marshal(into: buffer)
                    if let id = transportSequenceID { n += TransportWideSequence.writeBlock(id: id, into: buffer) }
                    let length = Self.write(store: store, lengths: lengths, first: first + j, group: stride(from: first + j, to: first + size, by: k),
                                            base: firstSequence &+ UInt16(truncatingIfNeeded: first + j), into: buffer, at: n)
                    guard length > 0 else { continue }
                    emit(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<(n + length)]))
                    made += 1
                }
            }
        }
        return made
    }

    /// Writes the FEC header, level header and payload for the packets in `group` (indices
    /// into the store; the first, `first`, is `SN base`) at `buffer[at...]`. Returns the bytes
    /// written, 0 if they do not fit.
    private static func write(store: UnsafeRawBufferPointer, lengths: [Int], first firstIndex: Int, group: StrideTo<Int>, base: UInt16,
                              into buffer: UnsafeMutableRawBufferPointer, at start: Int) -> Int {
        var protectionLength = 0, lastOffset = 0
        for i in group {
            protectionLength = max(protectionLength, lengths[i] - RTPHeader.fixedSize)
            lastOffset = i
        }
        let long = lastOffset - firstIndex >= 16
        let levelHeader = long ? 8 : 4
        let payload = start + ULPFEC.headerSize + levelHeader
        guard payload + protectionLength <= buffer.count else { return 0 }
        var b0: UInt8 = 0, b1: UInt8 = 0, ts: UInt32 = 0, len: UInt16 = 0, mask: UInt64 = 0
        for i in 0..<(ULPFEC.headerSize + levelHeader + protectionLength) { buffer[start + i] = 0 }
        for i in group {
            let p = i * ULPFEC.maxPacketSize, n = lengths[i]
            b0 ^= store[p]
            b1 ^= store[p + 1]
            ts ^= readUInt32(store, p + 4)
            len ^= UInt16(truncatingIfNeeded: n - RTPHeader.fixedSize)
            mask |= 1 << (47 - UInt64(i - firstIndex))
            for x in RTPHeader.fixedSize..<n { buffer[payload + x - RTPHeader.fixedSize] ^= store[p + x] }
        }
        buffer[start] = (long ? 0x40 : 0) | (b0 & 0x3F)  // E = 0, L, P X CC recovery
        buffer[start + 1] = b1  // M, PT recovery
        buffer[start + 2] = UInt8(base >> 8)
        buffer[start + 3] = UInt8(base & 0xFF)
        for s in 0..<4 { buffer[start + 4 + s] = UInt8(truncatingIfNeeded: ts >> (24 - 8 * UInt32(s))) }
        buffer[start + 8] = UInt8(len >> 8)
        buffer[start + 9] = UInt8(len & 0xFF)
        let level = start + ULPFEC.headerSize
        buffer[level] = UInt8(protectionLength >> 8)
        buffer[level + 1] = UInt8(protectionLength & 0xFF)
        for s in 0..<(levelHeader - 2) { buffer[level + 2 + s] = UInt8(truncatingIfNeeded: mask >> (40 - 8 * UInt64(s))) }
        return ULPFEC.headerSize + levelHeader + protectionLength
    }
}

/// The receiver's half: keeps the recent media packets and FEC packets of one stream and
/// recovers a missing packet when an FEC packet covers it and everything else it covers has
/// arrived. A recovered packet is kept too, so it can complete another FEC packet's group.
/// Preallocated rings; nothing is allocated per packet. FEC packets are checked before use:
/// a malformed one (E bit, lengths past the packet, a recovered length over its protection
/// length) is counted and ignored.
public struct ULPFECDecoder: Sendable {
    private let mediaSlots: Int
    private let fecSlots: Int
    private var media: [UInt8]
    private var mediaSequence: [Int32]
    private var mediaLength: [Int]
    private var fec: [UInt8]
    private var fecLength: [Int]
    /// Per FEC slot: waiting for its group (true), or done with.
    private var fecPending: [Bool]
    /// How many of `fecPending` are true.
    private var pendingCount = 0
    private var fecNext = 0
    private var newest: UInt16?
    /// FEC packets taken, malformed ones refused, packets recovered.
    public private(set) var fecReceived = 0
    public private(set) var malformed = 0
    public private(set) var recovered = 0

    public init(mediaSlots: Int = 512, fecSlots: Int = 32) {
        precondition(mediaSlots > 0 && mediaSlots & (mediaSlots - 1) == 0, "mediaSlots must be a power of two")
        self.mediaSlots = mediaSlots
        self.fecSlots = fecSlots
        media = [UInt8](repeating: 0, count: mediaSlots * ULPFEC.maxPacketSize)
        mediaSequence = [Int32](repeating: -1, count: mediaSlots)
        mediaLength = [Int](repeating: 0, count: mediaSlots)
        fec = [UInt8](repeating: 0, count: fecSlots * ULPFEC.maxPacketSize)
        fecLength = [Int](repeating: 0, count: fecSlots)
        fecPending = [Bool](repeating: false, count: fecSlots)
    }

    /// Whether an FEC packet waits for its group (``recoverOne(into:)`` may then recover).
    public var hasPending: Bool { pendingCount > 0 }

    /// Keeps a media packet (the whole RTP packet) that arrived.
    public mutating func addMedia(_ packet: UnsafeRawBufferPointer) {
        guard packet.count >= RTPHeader.fixedSize, packet.count <= ULPFEC.maxPacketSize else { return }
        let seq = UInt16(packet[2]) << 8 | UInt16(packet[3])
        if let n = newest { if Int16(bitPattern: seq &- n) > 0 { newest = seq } } else { newest = seq }
        let i = Int(seq) & (mediaSlots - 1), base = i * ULPFEC.maxPacketSize
        media.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[base..<(base + packet.count)]).copyMemory(from: packet) }
        mediaSequence[i] = Int32(seq)
        mediaLength[i] = packet.count
    }

    /// Keeps an FEC packet (the whole RTP packet; its payload from `payloadOffset`, of
    /// `payloadLength` bytes). Returns false, and counts it, if it is malformed.
    /// - Parameter protectedSSRC: the media's SSRC when the FEC packets are a stream of their
    ///   own (nil: the FEC packet's, in the media's stream); recovered packets carry it.
    @discardableResult
    public mutating func addFEC(_ packet: UnsafeRawBufferPointer, payloadOffset: Int, payloadLength: Int,
                                protectedSSRC: UInt32? = nil) -> Bool {
        fecReceived += 1
        guard payloadOffset >= 0, payloadLength >= 0, payloadOffset + payloadLength <= packet.count,
              Self.parse(UnsafeRawBufferPointer(rebasing: packet[payloadOffset..<(payloadOffset + payloadLength)])) != nil,
              payloadLength + 4 <= ULPFEC.maxPacketSize else {
            malformed += 1
            return false
        }
        // Slot layout: SSRC (4 bytes), then the FEC payload.
        let base = fecNext * ULPFEC.maxPacketSize
        fec.withUnsafeMutableBytes { f in
            for s in 0..<4 { f[base + s] = protectedSSRC.map { UInt8(truncatingIfNeeded: $0 >> (24 - 8 * UInt32(s))) } ?? packet[8 + s] }
            UnsafeMutableRawBufferPointer(rebasing: f[(base + 4)..<(base + 4 + payloadLength)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: packet[payloadOffset..<(payloadOffset + payloadLength)]))
        }
        fecLength[fecNext] = payloadLength
        if !fecPending[fecNext] { pendingCount += 1 }
        fecPending[fecNext] = true
        fecNext = (fecNext + 1) % fecSlots
        return true
    }

    /// An FEC payload's fields: SN base, mask (48 bits, MSB first: SN base + 0 …), where the
    /// level-0 payload starts and its protection length. Nil if malformed.
    static func parse(_ p: UnsafeRawBufferPointer) -> (base: UInt16, mask: UInt64, payload: Int, protectionLength: Int)? {
        guard p.count >= ULPFEC.headerSize + 4, p[0] & 0x80 == 0 else { return nil }
        let long = p[0] & 0x40 != 0
        let level = ULPFEC.headerSize, payload = level + (long ? 8 : 4)
        guard p.count >= payload else { return nil }
        let protectionLength = Int(p[level]) << 8 | Int(p[level + 1])
        guard payload + protectionLength <= p.count else { return nil }
        var mask: UInt64 = 0
        for s in 0..<(long ? 6 : 2) { mask |= UInt64(p[level + 2 + s]) << (40 - 8 * UInt64(s)) }
        guard mask != 0 else { return nil }
        return (UInt16(p[2]) << 8 | UInt16(p[3]), mask, payload, protectionLength)
    }

    private func has(_ seq: UInt16) -> Bool { mediaSequence[Int(seq) & (mediaSlots - 1)] == Int32(seq) }

    /// Recovers one packet if a waiting FEC packet can, writing it to `buffer` (at least
    /// ``ULPFEC/maxPacketSize`` bytes) and keeping it. Returns its length, or nil when none
    /// can be recovered now. Call until nil: one recovery can enable the next.
    public mutating func recoverOne(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        precondition(buffer.count >= ULPFEC.maxPacketSize, "recovery buffer too small")
        for f in 0..<fecSlots where fecPending[f] {
            let base = f * ULPFEC.maxPacketSize, length = fecLength[f]
            let outcome: Int? = fec.withUnsafeBytes { all -> Int? in
                let p = UnsafeRawBufferPointer(rebasing: all[(base + 4)..<(base + 4 + length)])
                guard let (snBase, mask, payload, protectionLength) = Self.parse(p) else { return -1 }
                // Too old for the ring to hold its group: give up on it.
                if let n = newest, Int16(bitPattern: n &- snBase) > Int16(mediaSlots / 2) { return -1 }
                var missing: UInt16?
                for bit in 0..<48 where mask & (1 << (47 - UInt64(bit))) != 0 {
                    let seq = snBase &+ UInt16(bit)
                    if !has(seq) {
                        if missing != nil { return nil }  // two or more: wait
                        missing = seq
                    }
                }
                guard let missing else { return -1 }  // nothing missing: done with
                return Self.recover(missing, fec: p, ssrc: UnsafeRawBufferPointer(rebasing: all[base..<(base + 4)]), snBase: snBase,
                                    mask: mask, payload: payload, protectionLength: protectionLength, media: self, into: buffer)
            }
            guard let outcome else { continue }
            fecPending[f] = false
            pendingCount -= 1
            if outcome < 0 {
                if outcome == -2 { malformed += 1 }
                continue
            }
            addMedia(UnsafeRawBufferPointer(rebasing: buffer[0..<outcome]))
            recovered += 1
            return outcome
        }
        return nil
    }

    /// XORs the FEC packet with the others of its group into `buffer`: the missing packet's
    /// length, or -2 if the result is not a packet.
    private static func recover(_ missing: UInt16, fec p: UnsafeRawBufferPointer, ssrc: UnsafeRawBufferPointer, snBase: UInt16, mask: UInt64,
                                payload: Int, protectionLength: Int, media d: ULPFECDecoder,
                                into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var b0 = p[0], b1 = p[1]
        var ts = readUInt32(p, 4)
        var len = UInt16(p[8]) << 8 | UInt16(p[9])
        for i in 0..<protectionLength { buffer[RTPHeader.fixedSize + i] = p[payload + i] }
        d.media.withUnsafeBytes { m in
            for bit in 0..<48 where mask & (1 << (47 - UInt64(bit))) != 0 {
                let seq = snBase &+ UInt16(bit)
                guard seq != missing else { continue }
                let i = Int(seq) & (d.mediaSlots - 1), base = i * ULPFEC.maxPacketSize, n = d.mediaLength[i]
                b0 ^= m[base]
                b1 ^= m[base + 1]
                ts ^= readUInt32(m, base + 4)
                len ^= UInt16(truncatingIfNeeded: n - RTPHeader.fixedSize)
                for x in RTPHeader.fixedSize..<min(n, RTPHeader.fixedSize + protectionLength) { buffer[x] ^= m[base + x] }
            }
        }
        let length = Int(len)
        guard length <= protectionLength, RTPHeader.fixedSize + length <= buffer.count else { return -2 }
        buffer[0] = 0x80 | (b0 & 0x3F)
        buffer[1] = b1
        buffer[2] = UInt8(missing >> 8)
        buffer[3] = UInt8(missing & 0xFF)
        for s in 0..<4 { buffer[4 + s] = UInt8(truncatingIfNeeded: ts >> (24 - 8 * UInt32(s))) }
        for s in 0..<4 { buffer[8 + s] = ssrc[s] }
        return RTPHeader.fixedSize + length
    }
}
