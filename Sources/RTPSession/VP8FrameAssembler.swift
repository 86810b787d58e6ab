import RTP

/// One complete VP8 frame from ``VP8FrameAssembler``. `data` (the VP8 bitstream, payload
/// descriptors removed) is valid only during the delivery call.
public struct AssembledFrame {
    public var rtpTimestamp: UInt32
    /// PictureID from the payload descriptor, if the sender writes one.
    public var pictureID: UInt16?
    /// From the VP8 payload header: P bit 0 (RFC 7741 §4.3, RFC 6386 §9.1).
    public var isKeyframe: Bool
    public var firstSequenceNumber: UInt16
    public var lastSequenceNumber: UInt16
    public var packetCount: Int
    /// Arrival time (ns) of the packet that completed the frame.
    public var completedAt: UInt64
    public var data: UnsafeRawBufferPointer
}

/// Reassembles VP8 frames from RTP packets (RFC 7741) and decides which are decodable.
///
/// A frame starts with a packet whose descriptor has S = 1 and PartID = 0 and ends with the
/// packet carrying the RTP marker (or just before the next frame's first packet of another
/// timestamp); it is complete when every sequence number in between arrived, all with its
/// timestamp. Frames are delivered in sequence order. A delta frame is delivered only if the
/// frame before it was (the decoding chain); after a loss the chain is broken, delta frames are
/// dropped, and ``needsKeyframe`` asks for a keyframe (PLI) until one arrives that is not
/// already buffered. A complete keyframe is delivered as soon as possible, skipping older
/// incomplete frames.
///
/// Losses come from the caller (``markLost(through:)``, from ``NackGenerator/takeLoss()``) or
/// from the bounded window: packets are kept in `capacity` preallocated slots of
/// `maxPayloadSize` bytes; anything more than `capacity` packets behind the newest is dropped.
/// Nothing is allocated per packet; the frame buffer grows only for the largest frame yet.
public struct VP8FrameAssembler: Sendable {
    struct Slot: Sendable {
        var used = false
        var sequence: Int64 = 0
        var timestamp: UInt32 = 0
        var marker = false
        var startsFrame = false
        var keyframe = false
        var pictureID: UInt16?
        var length = 0
    }

    public let capacity: Int
    public let maxPayloadSize: Int
    private var slots: [Slot]
    private var storage: [UInt8]
    private var frame: [UInt8] = []
    private var unwrapper = SequenceUnwrapper()
    private var highest: Int64?
    /// Packets below this are delivered or discarded.
    private var floor: Int64 = .min
    /// First sequence number of the next frame in the decoding chain; nil when broken.
    private var chainNext: Int64?
    private var keyframeStarts = 0
    /// The last frame delivered: its picture ID, and whether its last packet had the marker.
    private var lastPictureID: UInt16?
    private var lastEndedWithMarker = false
    private var suspect: Int64?

    public private(set) var framesDelivered = 0
    public private(set) var keyframesDelivered = 0
    /// Frames with at least one packet received that were discarded (undecodable or lost).
    public private(set) var framesDropped = 0
    /// Packets ignored: malformed, duplicate, or arriving after their frame was done with.
    public private(set) var packetsDiscarded = 0
    /// Times the decoding chain broke (a loss, or a start without a keyframe).
    public private(set) var chainBreaks = 0

    /// - Parameters:
    ///   - capacity: packets buffered; a power of two (512 holds a 600 KB keyframe).
    ///   - maxPayloadSize: largest RTP payload kept (descriptor + VP8 data).
    public init(capacity: Int = 512, maxPayloadSize: Int = 1400) {
        precondition(capacity > 1 && capacity & (capacity - 1) == 0, "capacity must be a power of two")
        self.capacity = capacity
        self.maxPayloadSize = maxPayloadSize
        slots = Array(repeating: Slot(), count: capacity)
        storage = Array(repeating: 0, count: capacity * maxPayloadSize)
    }

    /// True while frames cannot be decoded for want of a keyframe and none is on its way
    /// (no keyframe's first packet is buffered): send a PLI (throttled by the caller).
    public var needsKeyframe: Bool { chainNext == nil && keyframeStarts == 0 }

    private func slotIndex(_ e: Int64) -> Int { Int(truncatingIfNeeded: e) & (capacity - 1) }

    private func slot(_ e: Int64) -> Slot? {
        let s = slots[slotIndex(e)]
        return s.used && s.sequence == e ? s : nil
    }

    /// Adds one RTP packet (header and payload) that arrived at `now` (ns) and calls `deliver`
    /// with every frame that became deliverable, in order.
    public mutating func insert(packet: UnsafeRawBufferPointer, now: UInt64, deliver: (AssembledFrame) -> Void) {
        guard let (header, offset, length) = try? RTPHeader.parse(packet), length > 0 else {
            packetsDiscarded += 1
            return
        }
        insert(header: header, payload: UnsafeRawBufferPointer(rebasing: packet[offset..<(offset + length)]), now: now,
               deliver: deliver)
    }

    /// Adds one parsed RTP packet; see ``insert(packet:now:deliver:)``.
    public mutating func insert(header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64,
                                deliver: (AssembledFrame) -> Void) {
        guard payload.count <= maxPayloadSize, let descriptor = try? VP8PayloadDescriptor.parse(payload) else {
            packetsDiscarded += 1
            return
        }
        var e = unwrapper.unwrap(header.sequenceNumber)
        if highest == nil {
            highest = e
            floor = e - Int64(capacity) + 1  // packets reordered before the first one are welcome
        }
        if e < floor {
            // Late; or, far behind and twice in a row, the sender restarted its sequence numbers.
            if e < floor - Int64(capacity), suspect == e - 1 {
                e = restart(at: header.sequenceNumber)
            } else {
                if e < floor - Int64(capacity) { suspect = e }
                packetsDiscarded += 1
                return
            }
        }
        suspect = nil
        if e > highest! {
            // Slide the window: anything `capacity` behind the newest packet is dropped.
            if e - Int64(capacity) >= floor { advanceFloor(to: e - Int64(capacity) + 1) }
            highest = e
        }
        let i = slotIndex(e)
        if slots[i].used {
            if slots[i].sequence == e {
                packetsDiscarded += 1  // duplicate
                return
            }
            clear(i)
        }
        let data = UnsafeRawBufferPointer(rebasing: payload[descriptor.size...])
        let starts = descriptor.startsFrame
        let key = starts && VP8PayloadDescriptor.isKeyframe(vp8Data: data)
        slots[i] = Slot(used: true, sequence: e, timestamp: header.timestamp, marker: header.marker, startsFrame: starts,
                        keyframe: key, pictureID: descriptor.pictureID, length: data.count)
        if key { keyframeStarts += 1 }
        let base = i * maxPayloadSize
        storage.withUnsafeMutableBytes {
            UnsafeMutableRawBufferPointer(rebasing: $0[base..<(base + data.count)]).copyMemory(from: data)
        }
        process(now: now, deliver: deliver)
    }

    /// Every packet missing up to and including `seq` will never arrive (the NACK generator gave
    /// up). Frames that needed them are dropped and the chain breaks if it needed them.
    public mutating func markLost(through seq: UInt16, now: UInt64, deliver: (AssembledFrame) -> Void) {
        guard let top = highest else { return }
        let x = min(unwrapper.extended(seq), top)
        guard x >= floor else { return }
        if let next = chainNext {
            var e = next
            var hole = false
            while e <= x { if slot(e) == nil { hole = true; break }; e += 1 }
            guard hole else { return }
            breakChain()
        }
        advanceFloor(to: x + 1)
        process(now: now, deliver: deliver)
    }

    /// Starts over at `seq`; returns its new extended value.
    private mutating func restart(at seq: UInt16) -> Int64 {
        advanceFloor(to: highest! + 1)  // drops what is buffered
        unwrapper.reset()
        let fresh = unwrapper.unwrap(seq)
        highest = fresh
        floor = fresh - Int64(capacity) + 1
        if chainNext != nil { breakChain() }
        return fresh
    }

    private mutating func breakChain() {
        chainNext = nil
        chainBreaks += 1
    }

    private mutating func clear(_ i: Int) {
        if slots[i].keyframe { keyframeStarts -= 1 }
        slots[i].used = false
    }

    /// Discards everything below `newFloor`, counting the frames that go with it.
    private mutating func advanceFloor(to newFloor: Int64) {
        guard newFloor > floor else { return }
        var lastTimestamp: UInt32?
        var e = max(floor, newFloor - Int64(capacity))
        while e < newFloor {
            let i = slotIndex(e)
            if slots[i].used, slots[i].sequence == e {
                if lastTimestamp != slots[i].timestamp { framesDropped += 1 }
                lastTimestamp = slots[i].timestamp
                clear(i)
            }
            e += 1
        }
        floor = newFloor
        if let next = chainNext, next < newFloor { breakChain() }
    }

    /// The last sequence number of the complete frame starting at `start`, or nil.
    private func completeFrame(at start: Int64) -> Int64? {
        guard let first = slot(start), first.startsFrame, let top = highest else { return nil }
        var e = start
        while e <= top {
            guard let s = slot(e), s.timestamp == first.timestamp, e == start || !s.startsFrame else { return nil }
            if s.marker { return e }
            if let next = slot(e + 1), next.startsFrame, next.timestamp != first.timestamp { return e }
            e += 1
        }
        return nil
    }

    private mutating func process(now: UInt64, deliver: (AssembledFrame) -> Void) {
        while true {
            if let next = chainNext, let end = completeFrame(at: next) {
                emit(from: next, through: end, now: now, deliver: deliver)
                continue
            }
            if let next = chainNext, let start = nextPictureAcrossGap(from: next) {
                // Numbers between two consecutive pictures carried no VP8 (FEC packets): the
                // chain goes on at the next picture.
                advanceFloor(to: start)
                chainNext = start
                continue
            }
            // No next frame in the chain: a complete keyframe, if any, restarts it.
            guard keyframeStarts > 0, let top = highest else { return }
            var found: (Int64, Int64)?
            var e = floor
            while e <= top {
                if let s = slot(e), s.keyframe, let end = completeFrame(at: e) { found = (e, end); break }
                e += 1
            }
            guard let (start, end) = found else { return }
            if chainNext != nil, start > chainNext! { breakChain() }
            advanceFloor(to: start)
            emit(from: start, through: end, now: now, deliver: deliver)
        }
    }

    /// Where the chain goes on when the numbers from `next` are missing but the next picture,
    /// within 16 numbers, is the one after the last delivered (its picture ID + 1) and that one
    /// ended with its marker: the missing numbers cannot be VP8 of any frame (FEC packets, in
    /// the same sequence). Nil otherwise.
    private func nextPictureAcrossGap(from next: Int64) -> Int64? {
        guard slot(next) == nil, lastEndedWithMarker, let last = lastPictureID, let top = highest else { return nil }
        var e = next + 1
        while e <= min(top, next + 16) {
            if let s = slot(e) {
                guard s.startsFrame, let id = s.pictureID, id == (last &+ 1) & 0x7FFF else { return nil }
                return e
            }
            e += 1
        }
        return nil
    }

    private mutating func emit(from start: Int64, through end: Int64, now: UInt64, deliver: (AssembledFrame) -> Void) {
        let first = slots[slotIndex(start)]
        lastPictureID = first.pictureID
        lastEndedWithMarker = slots[slotIndex(end)].marker
        frame.removeAll(keepingCapacity: true)
        storage.withUnsafeBytes { bytes in
            var e = start
            while e <= end {
                let i = slotIndex(e)
                let base = i * maxPayloadSize
                frame.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[base..<(base + slots[i].length)]))
                e += 1
            }
        }
        var e = start
        while e <= end { clear(slotIndex(e)); e += 1 }
        floor = end + 1
        chainNext = end + 1
        framesDelivered += 1
        if first.keyframe { keyframesDelivered += 1 }
        frame.withUnsafeBytes { data in
            deliver(AssembledFrame(rtpTimestamp: first.timestamp, pictureID: first.pictureID, isKeyframe: first.keyframe,
                                   firstSequenceNumber: UInt16(truncatingIfNeeded: start),
                                   lastSequenceNumber: UInt16(truncatingIfNeeded: end), packetCount: Int(end - start + 1),
                                   completedAt: now, data: data))
        }
    }
}
