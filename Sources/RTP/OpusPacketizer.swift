/// Puts Opus packets into RTP per RFC 7587.
///
/// RFC 7587 §4.2: the RTP payload is exactly one Opus packet (RFC 6716), with no payload
/// header of its own:
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|X|  CC   |M|     PT      |       sequence number         |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |                           timestamp                           |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |           synchronization source (SSRC) identifier            |
/// +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// |                                                               |
/// +                 one Opus packet (RFC 6716)                    +
/// |                                                               |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
/// §4.1: the timestamp clock is always 48 kHz (960 ticks per 20 ms), whatever the audio
/// bandwidth; the marker bit is set on the first packet of a talkspurt, i.e. the first packet
/// of the stream and the first one after packets were left out for DTX. Written straight into
/// the caller's buffer; nothing is allocated per packet.
public struct OpusPacketizer: Sendable {
    /// RTP clock rate for Opus (RFC 7587 §4.1).
    public static let clockRate = 48_000
    public let ssrc: UInt32
    public let payloadType: UInt8
    public private(set) var sequenceNumber: UInt16
    public private(set) var packetsSent: UInt64 = 0
    public private(set) var payloadBytesSent: UInt64 = 0
    private var talkspurtStart = true

    public init(ssrc: UInt32, payloadType: UInt8 = 111, initialSequence: UInt16) {
        self.ssrc = ssrc
        self.payloadType = payloadType
        sequenceNumber = initialSequence
    }

    /// Notes that a frame was not sent (DTX); the next packet starts a talkspurt (marker bit).
    public mutating func skipped() { talkspurtStart = true }

    /// Writes one RTP packet carrying `opus` into `buffer` and returns it (valid until the
    /// buffer is reused). Returns nil for an empty Opus packet.
    /// - Parameter buffer: at least 12 + `opus.count` bytes.
    public mutating func packetize(opus: UnsafeRawBufferPointer, rtpTimestamp: UInt32,
                                   into buffer: UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard opus.count > 0 else { return nil }
        precondition(buffer.count >= RTPHeader.fixedSize + opus.count, "packet buffer too small")
        let header = RTPHeader(marker: talkspurtStart, payloadType: payloadType, sequenceNumber: sequenceNumber,
                               timestamp: rtpTimestamp, ssrc: ssrc)
        let n = header.marshal(into: buffer)
        UnsafeMutableRawBufferPointer(rebasing: buffer[n..<(n + opus.count)]).copyMemory(from: opus)
        talkspurtStart = false
        sequenceNumber &+= 1
        packetsSent += 1
        payloadBytesSent += UInt64(opus.count)
        return UnsafeRawBufferPointer(rebasing: buffer[0..<(n + opus.count)])
    }
}
