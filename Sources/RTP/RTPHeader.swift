/// An error parsing a packet; the message names what is wrong.
public struct RTPParseError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The RTP fixed header, RFC 3550 §5.1.
///
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
/// |            contributing source (CSRC) identifiers             |
/// |                             ....                              |
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
public struct RTPHeader: Sendable, Equatable {
    public static let fixedSize = 12

    public var padding = false
    public var hasExtension = false
    public var csrcCount: UInt8 = 0
    public var marker = false
    public var payloadType: UInt8
    public var sequenceNumber: UInt16
    public var timestamp: UInt32
    public var ssrc: UInt32

    public init(marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
    }

    /// Writes the 12-byte fixed header (no CSRCs, no extension). Returns 12.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(buffer.count >= Self.fixedSize, "RTP header needs 12 bytes")
        buffer[0] = 0x80 | (padding ? 0x20 : 0) | (hasExtension ? 0x10 : 0) | (csrcCount & 0x0F)
        buffer[1] = (marker ? 0x80 : 0) | (payloadType & 0x7F)
        buffer.storeBytes(of: sequenceNumber.bigEndian, toByteOffset: 2, as: UInt16.self)
        buffer.storeBytes(of: timestamp.bigEndian, toByteOffset: 4, as: UInt32.self)
        buffer.storeBytes(of: ssrc.bigEndian, toByteOffset: 8, as: UInt32.self)
        return Self.fixedSize
    }

    /// Parses a packet's header, skipping CSRCs and the header extension (RFC 3550 §5.3.1) and
    /// removing padding. Returns the header and where the payload is.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws -> (header: RTPHeader, payloadOffset: Int, payloadLength: Int) {
        guard bytes.count >= fixedSize else { throw RTPParseError("RTP packet too short: \(bytes.count) bytes, need 12") }
        guard bytes[0] >> 6 == 2 else { throw RTPParseError("RTP version \(bytes[0] >> 6), expected 2") }
        var h = RTPHeader(marker: bytes[1] & 0x80 != 0, payloadType: bytes[1] & 0x7F,
                          sequenceNumber: UInt16(bytes[2]) << 8 | UInt16(bytes[3]),
                          timestamp: readUInt32(bytes, 4), ssrc: readUInt32(bytes, 8))
        h.padding = bytes[0] & 0x20 != 0
        h.hasExtension = bytes[0] & 0x10 != 0
        h.csrcCount = bytes[0] & 0x0F
        var offset = fixedSize + 4 * Int(h.csrcCount)
        guard offset <= bytes.count else { throw RTPParseError("RTP packet too short for \(h.csrcCount) CSRCs: \(bytes.count) bytes") }
        if h.hasExtension {
            guard offset + 4 <= bytes.count else { throw RTPParseError("RTP header extension truncated") }
            let words = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            offset += 4 + 4 * words
            guard offset <= bytes.count else { throw RTPParseError("RTP header extension of \(words) words runs past the packet") }
        }
        var end = bytes.count
        if h.padding {
            guard end > offset else { throw RTPParseError("RTP padding flag set on an empty payload") }
            let pad = Int(bytes[end - 1])
            guard pad >= 1, end - pad >= offset else { throw RTPParseError("RTP padding length \(pad) is invalid") }
            end -= pad
        }
        return (h, offset, end - offset)
    }
}

@inline(__always)
func readUInt32(_ b: UnsafeRawBufferPointer, _ o: Int) -> UInt32 {
    UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
}
