/// One viewer's view of a VP8 stream with temporal layers, at a relay: which packets it gets
/// (the layers its link carries) and the numbers it sees them under. Dropping the upper layer's
/// frames would leave holes in the sequence numbers (which a receiver takes for loss, and asks
/// again for) and in the picture IDs, so what is forwarded is renumbered to run on without
/// them, as mediasoup's `SeqManager` and its VP8 picture-ID handling do; a NACK's numbers are
/// mapped back to the source's.
///
/// Switches take effect at a frame's first packet: down (drop TL1) at any TL1 frame, up
/// (forward TL1 again) at a TL1 frame that depends on the base layer only (Y, layer sync), so
/// the viewer never gets half a frame or a frame whose reference it lacks. With
/// ``keyframesOnly`` (a link that carries less than the base layer) only keyframes pass; that
/// mode ends at a keyframe, the one frame that needs nothing before it.
///
/// Pure and of fixed size (rings of the recent pictures and packets); no allocation per packet.
public struct LayerFilter: Sendable {
    /// The highest temporal layer the viewer should get (nil: all of them).
    public var maxLayer: UInt8?
    /// The highest layer forwarded now (nil: all), which follows `maxLayer` at switch points.
    public private(set) var currentMax: UInt8?
    /// Only keyframes should pass; and whether only keyframes pass now.
    public var keyframesOnly = false
    public private(set) var currentKeyframesOnly = false
    /// Packets dropped and pictures dropped so far: what the numbers are shifted by.
    public private(set) var droppedPackets: UInt64 = 0
    public private(set) var droppedPictures: UInt64 = 0
    private var sequenceOffset: UInt16 = 0
    private var pictureOffset: UInt16 = 0
    private var highest: UInt16?
    /// The recent pictures: source picture ID, whether dropped, and its outgoing ID.
    private var pictures = [(id: UInt16, dropped: Bool, out: UInt16)](repeating: (0xFFFF, false, 0), count: 16)
    private var pictureNext = 0
    /// Sequence numbers dropped most recently (to number a late packet among them).
    private var drops = [UInt16](repeating: 0, count: 64)
    private var dropsCount = 0
    /// Outgoing sequence number → source's, for NACKs (`original`): slot = out % size.
    private var outToIn = [(out: UInt16, source: UInt16, valid: Bool)](repeating: (0, 0, false), count: 1024)

    public init() {}

    /// Whether anything was ever dropped (the viewer's numbers are no longer the source's).
    public var isShifted: Bool { droppedPackets > 0 }

    /// What to do with one packet: nil to drop it, or its outgoing sequence number and picture
    /// ID (the source's when nothing was dropped). A packet without a layer (no T bit, or not
    /// VP8) is forwarded unless only keyframes are; `keyframe`: the packet starts a keyframe.
    public mutating func forward(sequence: UInt16, pictureID: UInt16?, temporalLayer: UInt8?, layerSync: Bool,
                                 startsFrame: Bool, keyframe: Bool = false) -> (sequence: UInt16, pictureID: UInt16?)? {
        let newer = highest.map { Int16(bitPattern: sequence &- $0) > 0 } ?? true
        var drop = false
        var outPicture = pictureID
        if let pictureID {
            if let i = pictures.firstIndex(where: { $0.id == pictureID }) {
                drop = pictures[i].dropped
                outPicture = pictures[i].out
            } else {
                // A new picture: the switch points are here.
                if keyframe {
                    // Needs nothing before it: every switch may happen here.
                    currentKeyframesOnly = keyframesOnly
                    currentMax = maxLayer
                } else if keyframesOnly || currentKeyframesOnly {
                    currentKeyframesOnly = true
                    drop = true
                } else if let layer = temporalLayer {
                    if let target = maxLayer, currentMax.map({ target < $0 }) ?? true, layer > target {
                        currentMax = target  // down: from any upper-layer frame on
                    } else if currentMax != maxLayer, layer > (currentMax ?? .max), startsFrame && (layerSync || layer == 0) {
                        currentMax = maxLayer  // up: at a frame that needs only the base layer
                    }
                    drop = layer > (currentMax ?? .max)
                }
                if drop { pictureOffset &+= 1 }
                outPicture = drop ? nil : (pictureID &- pictureOffset) & 0x7FFF
                pictures[pictureNext] = (pictureID, drop, outPicture ?? 0)
                pictureNext = (pictureNext + 1) % pictures.count
                if drop { droppedPictures += 1 }
            }
        }
        if drop {
            if newer {
                sequenceOffset &+= 1
                drops[dropsCount % drops.count] = sequence
                dropsCount += 1
                highest = sequence
            }
            droppedPackets += 1
            return nil
        }
        var out = sequence &- sequenceOffset
        if !newer {
            // Late: the drops numbered after it did not shift it.
            for i in 0..<min(dropsCount, drops.count) where Int16(bitPattern: drops[i] &- sequence) > 0 { out &+= 1 }
        } else {
            highest = sequence
        }
        outToIn[Int(out) % outToIn.count] = (out, sequence, true)
        return (out, outPicture)
    }

    /// The source's sequence number of an outgoing one (a NACK names it), nil when unknown
    /// (too old, or never sent).
    public func original(_ sequence: UInt16) -> UInt16? {
        guard isShifted else { return sequence }
        let e = outToIn[Int(sequence) % outToIn.count]
        return e.valid && e.out == sequence ? e.source : nil
    }

    /// The outgoing picture ID of a source's picture still remembered (a retransmission's).
    public func outgoingPicture(_ pictureID: UInt16) -> UInt16? {
        pictures.first { $0.id == pictureID && !$0.dropped }?.out
    }
}
