/// The VP8 payload descriptor, RFC 7741 §4.2, with every optional field.
///
/// ```
///       0 1 2 3 4 5 6 7
///      +-+-+-+-+-+-+-+-+
///      |X|R|N|S|R| PID | (REQUIRED)
///      +-+-+-+-+-+-+-+-+
/// X:   |I|L|T|K| RSV   | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
/// I:   |M| PictureID   | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
///      |   PictureID   | (second octet when M = 1: 15-bit PictureID)
///      +-+-+-+-+-+-+-+-+
/// L:   |   TL0PICIDX   | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
/// T/K: |TID|Y| KEYIDX  | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
/// ```
/// N: non-reference frame. S: first packet of a VP8 partition; S = 1 with PID = 0 starts a frame.
public struct VP8PayloadDescriptor: Sendable, Equatable {
    public var nonReference = false
    public var start = false
    /// Partition index, 0…7.
    public var partitionID: UInt8 = 0
    /// 7- or 15-bit PictureID (I bit), nil when absent.
    public var pictureID: UInt16?
    /// Whether the PictureID is written in 15 bits (M bit).
    public var longPictureID = true
    /// TL0PICIDX (L bit).
    public var tl0PictureIndex: UInt8?
    /// Temporal layer index (T bit), 0…3.
    public var temporalLayer: UInt8?
    /// Layer sync (Y), meaningful with T.
    public var layerSync = false
    /// Temporal key frame index (K bit), 0…31.
    public var keyIndex: UInt8?
    /// X = 1 with no optional field (legal, two bytes), kept so parse → marshal round-trips.
    private var emptyExtension = false

    /// Bytes the descriptor occupies; the VP8 data starts here.
    public var size: Int {
        guard hasExtension else { return 1 }
        return 2 + (pictureID == nil ? 0 : longPictureID ? 2 : 1) + (tl0PictureIndex == nil ? 0 : 1)
            + (temporalLayer == nil && keyIndex == nil ? 0 : 1)
    }

    public init(nonReference: Bool = false, start: Bool = false, partitionID: UInt8 = 0, pictureID: UInt16? = nil,
                longPictureID: Bool = true, tl0PictureIndex: UInt8? = nil, temporalLayer: UInt8? = nil,
                layerSync: Bool = false, keyIndex: UInt8? = nil) {
        self.nonReference = nonReference
        self.start = start
        self.partitionID = partitionID & 0x07
        self.pictureID = pictureID.map { $0 & (longPictureID ? 0x7FFF : 0x7F) }
        self.longPictureID = longPictureID
        self.tl0PictureIndex = tl0PictureIndex
        self.temporalLayer = temporalLayer.map { $0 & 0x03 }
        self.layerSync = layerSync
        self.keyIndex = keyIndex.map { $0 & 0x1F }
    }

    private var hasExtension: Bool {
        emptyExtension || pictureID != nil || tl0PictureIndex != nil || temporalLayer != nil || keyIndex != nil
    }

    /// Whether this packet starts a frame (S = 1 and PID = 0, RFC 7741 §4.2).
    public var startsFrame: Bool { start && partitionID == 0 }

    /// Parses the descriptor at the start of an RTP payload.
    /// - Throws: `RTPParseError` when the payload is empty or shorter than the fields it announces.
    public static func parse(_ p: UnsafeRawBufferPointer) throws -> VP8PayloadDescriptor {
        guard p.count >= 1 else { throw RTPParseError("VP8 payload empty") }
        let b0 = p[0]
        var d = VP8PayloadDescriptor(nonReference: b0 & 0x20 != 0, start: b0 & 0x10 != 0, partitionID: b0 & 0x07)
        var i = 1
        if b0 & 0x80 != 0 {
            guard p.count > i else { throw RTPParseError("VP8 descriptor truncated after X") }
            let x = p[i]
            i += 1
            d.emptyExtension = x & 0xF0 == 0
            if x & 0x80 != 0 {  // I
                guard p.count > i else { throw RTPParseError("VP8 descriptor truncated at PictureID") }
                if p[i] & 0x80 != 0 {
                    guard p.count > i + 1 else { throw RTPParseError("VP8 descriptor truncated in 15-bit PictureID") }
                    d.pictureID = UInt16(p[i] & 0x7F) << 8 | UInt16(p[i + 1])
                    i += 2
                } else {
                    d.pictureID = UInt16(p[i] & 0x7F)
                    d.longPictureID = false
                    i += 1
                }
            }
            if x & 0x40 != 0 {  // L
                guard p.count > i else { throw RTPParseError("VP8 descriptor truncated at TL0PICIDX") }
                d.tl0PictureIndex = p[i]
                i += 1
            }
            if x & 0x30 != 0 {  // T or K
                guard p.count > i else { throw RTPParseError("VP8 descriptor truncated at TID/KEYIDX") }
                if x & 0x20 != 0 {
                    d.temporalLayer = p[i] >> 6
                    d.layerSync = p[i] & 0x20 != 0
                }
                if x & 0x10 != 0 { d.keyIndex = p[i] & 0x1F }
                i += 1
            }
        }
        assert(d.size == i)
        return d
    }

    /// Writes the descriptor (X set only when an optional field is present). Returns ``size``.
    public func marshal(into b: UnsafeMutableRawBufferPointer) -> Int {
        precondition(b.count >= size, "VP8 descriptor needs \(size) bytes")
        b[0] = (hasExtension ? 0x80 : 0) | (nonReference ? 0x20 : 0) | (start ? 0x10 : 0) | (partitionID & 0x07)
        guard hasExtension else { return 1 }
        b[1] = (pictureID != nil ? 0x80 : 0) | (tl0PictureIndex != nil ? 0x40 : 0) | (temporalLayer != nil ? 0x20 : 0)
            | (keyIndex != nil ? 0x10 : 0)
        var i = 2
        if let pictureID {
            if longPictureID {
                b[i] = 0x80 | UInt8(pictureID >> 8 & 0x7F)
                b[i + 1] = UInt8(pictureID & 0xFF)
                i += 2
            } else {
                b[i] = UInt8(pictureID & 0x7F)
                i += 1
            }
        }
        if let tl0PictureIndex { b[i] = tl0PictureIndex; i += 1 }
        if temporalLayer != nil || keyIndex != nil {
            b[i] = (temporalLayer ?? 0) << 6 | (layerSync ? 0x20 : 0) | (keyIndex ?? 0)
            i += 1
        }
        return i
    }

    /// Whether the VP8 data of a frame's first packet (S = 1, PID = 0) begins a keyframe: the
    /// inverse key frame flag P, bit 0 of the VP8 payload header's first octet, is 0
    /// (RFC 7741 §4.3, RFC 6386 §9.1).
    public static func isKeyframe(vp8Data: UnsafeRawBufferPointer) -> Bool {
        guard let first = vp8Data.first else { return false }
        return first & 0x01 == 0
    }
}
