/// Splits VP8 frames into RTP packets per RFC 7741.
///
/// Every packet carries the payload descriptor of RFC 7741 §4.2 with a 15-bit PictureID:
/// ```
///       0 1 2 3 4 5 6 7
///      +-+-+-+-+-+-+-+-+
///      |X|R|N|S|R| PID | (REQUIRED)
///      +-+-+-+-+-+-+-+-+
/// X:   |I|L|T|K| RSV   | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
/// I:   |M| PictureID   | (OPTIONAL)
///      +-+-+-+-+-+-+-+-+
///      |   PictureID   |
///      +-+-+-+-+-+-+-+-+
/// ```
/// With temporal layers (``temporalLayers``) the descriptor also carries TL0PICIDX and
/// TID/Y (6 bytes): TL0PICIDX counts the base-layer frames, TID is the frame's layer, Y is set
/// on upper-layer frames (they depend on the base layer only), and N on them too (nothing
/// references them).
/// S is set on the first packet of a frame, the RTP marker bit on the last (§4.1). Payloads
/// (descriptor + data) are at most `maxPayloadSize` bytes and of balanced sizes. Headers are
/// written straight into the caller's buffer; nothing is allocated per packet.
public struct VP8Packetizer: Sendable {
    public static let descriptorSize = 4
    public let ssrc: UInt32
    public let payloadType: UInt8
    public let maxPayloadSize: Int
    public private(set) var sequenceNumber: UInt16
    public private(set) var pictureID: UInt16
    public private(set) var packetsSent: UInt64 = 0
    public private(set) var payloadBytesSent: UInt64 = 0
    /// When set, every packet carries a transport-wide sequence number with this extension ID
    /// (``TransportWideSequence``; 0 until the sender stamps it), in 8 bytes taken from the payload.
    public var transportSequenceID: UInt8?
    /// Whether frames carry their temporal layer (TL0PICIDX and TID in the descriptor).
    public var temporalLayers = false
    /// The base-layer frames' running index (TL0PICIDX), as of the last one sent.
    public private(set) var tl0PictureIndex: UInt8 = 0

    /// The descriptor's size: 4, or 6 with temporal layers.
    public var descriptorLength: Int { temporalLayers ? 6 : Self.descriptorSize }

    /// The header's size: 12, or 20 with the transport-wide sequence number.
    public var headerSize: Int { RTPHeader.fixedSize + (transportSequenceID == nil ? 0 : TransportWideSequence.blockSize) }

    public init(ssrc: UInt32, payloadType: UInt8 = 96, initialSequence: UInt16, initialPictureID: UInt16, maxPayloadSize: Int = 1200) {
        precondition(maxPayloadSize > Self.descriptorSize, "payload must leave room for data")
        self.ssrc = ssrc
        self.payloadType = payloadType
        self.maxPayloadSize = maxPayloadSize
        sequenceNumber = initialSequence
        pictureID = initialPictureID & 0x7FFF
    }

    /// The packets a frame of `frameBytes` becomes and their bytes with their headers, as
    /// ``packetize(frame:rtpTimestamp:temporalLayer:into:emit:)`` splits it: what a frame will
    /// cost on the wire before it is sent.
    public func wireSize(frameBytes: Int) -> (packets: Int, bytes: Int) {
        guard frameBytes > 0 else { return (0, 0) }
        let perPacket = maxPayloadSize - descriptorLength - (headerSize - RTPHeader.fixedSize)
        let count = (frameBytes + perPacket - 1) / perPacket
        return (count, frameBytes + count * (headerSize + descriptorLength))
    }

    /// Packetizes one encoded frame, calling `emit` with each packet (valid only during the call).
    /// - Parameter buffer: at least 12 + `maxPayloadSize` bytes, reused for every packet.
    /// - Returns: the number of packets emitted (0 for an empty frame).
    @discardableResult
    /// - Parameter temporalLayer: the frame's layer (0 or 1) when ``temporalLayers`` is on.
    public mutating func packetize(frame: UnsafeRawBufferPointer, rtpTimestamp: UInt32, temporalLayer: UInt8 = 0,
                                   into buffer: UnsafeMutableRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Void) -> Int {
        guard frame.count > 0 else { return 0 }
        precondition(buffer.count >= RTPHeader.fixedSize + maxPayloadSize, "packet buffer too small")
        let layered = temporalLayers, upper = layered && temporalLayer > 0
        if layered && !upper { tl0PictureIndex &+= 1 }
        let perPacket = maxPayloadSize - descriptorLength - (headerSize - RTPHeader.fixedSize)
        let count = (frame.count + perPacket - 1) / perPacket
        let base = frame.count / count, extra = frame.count % count
        var offset = 0
        for i in 0..<count {
            let size = base + (i < extra ? 1 : 0)
            let header = RTPHeader(marker: i == count - 1, payloadType: payloadType, sequenceNumber: sequenceNumber,
                                   timestamp: rtpTimestamp, ssrc: ssrc)
            var n = header.marshal(into: buffer)
            if let id = transportSequenceID { n += TransportWideSequence.writeBlock(id: id, into: buffer) }
            buffer[n] = 0x80 | (upper ? 0x20 : 0) | (i == 0 ? 0x10 : 0)  // X, N, S, PID 0
            buffer[n + 1] = layered ? 0xE0 : 0x80  // I (L, T)
            buffer[n + 2] = 0x80 | UInt8(pictureID >> 8)  // M (15-bit PictureID)
            buffer[n + 3] = UInt8(pictureID & 0xFF)
            if layered {
                buffer[n + 4] = tl0PictureIndex
                buffer[n + 5] = (temporalLayer & 0x03) << 6 | (upper ? 0x20 : 0)  // TID, Y, KEYIDX 0
            }
            n += descriptorLength
            UnsafeMutableRawBufferPointer(rebasing: buffer[n..<(n + size)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: frame[offset..<(offset + size)]))
            n += size
            offset += size
            emit(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            sequenceNumber &+= 1
            packetsSent += 1
            payloadBytesSent += UInt64(n - headerSize)
        }
        pictureID = (pictureID + 1) & 0x7FFF
        return count
    }

    /// Takes `count` sequence numbers for packets sent among the frame's (FEC) and returns the
    /// first.
    public mutating func reserveSequenceNumbers(_ count: Int) -> UInt16 {
        defer { sequenceNumber &+= UInt16(truncatingIfNeeded: count) }
        return sequenceNumber
    }

    /// Parses an RFC 7741 §4.2 payload descriptor (the fields a depacketizer needs; see
    /// ``VP8PayloadDescriptor`` for all of them).
    public static func parseDescriptor(_ p: UnsafeRawBufferPointer) throws -> (start: Bool, partitionID: UInt8, pictureID: UInt16?, headerLength: Int) {
        let d = try VP8PayloadDescriptor.parse(p)
        return (d.start, d.partitionID, d.pictureID, d.size)
    }
}
