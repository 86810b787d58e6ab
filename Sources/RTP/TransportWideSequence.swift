/// The transport-wide sequence number (draft-holmer-rmcat-transport-wide-cc-extensions-01 §2):
/// a 16-bit count over every packet a sender puts on one transport, carried as an RFC 8285
/// one-byte header extension, so the receiver's transport feedback can name each packet. The
/// SDP names the extension's ID with `a=extmap:ID` and this URI.
///
/// As written here it is the whole extension block, 8 bytes after the fixed header:
/// ```
///  0                   1                   2                   3
/// |      0xBE     |      0xDE     |           length=1            |
/// |  ID   | L=1   |transport-wide sequence number | zero padding  |
/// ```
public enum TransportWideSequence {
    public static let uri = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// The ID we send it with (the SDP's `a=extmap:3`).
    public static let defaultID: UInt8 = 3
    /// The extension block's size after a 12-byte header.
    public static let blockSize = 8
    /// Where the number sits in a packet we wrote (12 + 4 + 1).
    public static let offset = 17

    /// Writes the block with number 0 at `buffer[12...]`; the number is set by
    /// ``stamp(_:into:)`` when the packet is sent. Returns ``blockSize``.
    public static func writeBlock(id: UInt8, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(id >= 1 && id <= 14, "a one-byte header extension ID is 1 to 14")
        precondition(buffer.count >= RTPHeader.fixedSize + blockSize, "RTP header extension needs 20 bytes")
        buffer[0] |= 0x10  // X
        let b = RTPHeader.fixedSize
        buffer[b] = 0xBE; buffer[b + 1] = 0xDE; buffer[b + 2] = 0; buffer[b + 3] = 1
        buffer[b + 4] = id << 4 | 1
        buffer[b + 5] = 0; buffer[b + 6] = 0; buffer[b + 7] = 0
        return blockSize
    }

    /// Sets the number in a packet written with ``writeBlock(id:into:)``.
    public static func stamp(_ sequence: UInt16, into packet: UnsafeMutableRawBufferPointer) {
        packet[offset] = UInt8(sequence >> 8)
        packet[offset + 1] = UInt8(truncatingIfNeeded: sequence)
    }

    /// Whether `packet` carries the block as ``writeBlock(id:into:)`` writes it.
    public static func isStamped(_ packet: UnsafeRawBufferPointer) -> Bool {
        packet.count >= RTPHeader.fixedSize + blockSize && packet[0] & 0x1F == 0x10
            && packet[12] == 0xBE && packet[13] == 0xDE && packet[16] & 0x0F == 1
    }

    /// The number in a received packet's header extension with element `id` (RFC 8285: the
    /// one-byte form 0xBEDE and the two-byte form 0x100x), or nil when it has none. Never
    /// reads past the header extension or the packet.
    public static func find(id: UInt8, in packet: UnsafeRawBufferPointer) -> UInt16? {
        guard packet.count >= RTPHeader.fixedSize, packet[0] & 0x10 != 0 else { return nil }
        let start = RTPHeader.fixedSize + 4 * Int(packet[0] & 0x0F)
        guard start + 4 <= packet.count else { return nil }
        let profile = UInt16(packet[start]) << 8 | UInt16(packet[start + 1])
        let end = start + 4 + 4 * (Int(packet[start + 2]) << 8 | Int(packet[start + 3]))
        guard end <= packet.count else { return nil }
        var i = start + 4
        if profile == 0xBEDE {
            while i < end {
                let byte = packet[i]
                if byte == 0 { i += 1; continue }  // padding
                let elementID = byte >> 4, length = Int(byte & 0x0F) + 1
                if elementID == 15 { return nil }  // the rest is not to be read (RFC 8285 §4.2)
                guard i + 1 + length <= end else { return nil }
                if elementID == id { return length == 2 ? UInt16(packet[i + 1]) << 8 | UInt16(packet[i + 2]) : nil }
                i += 1 + length
            }
        } else if profile & 0xFFF0 == 0x1000 {
            while i < end {
                let elementID = packet[i]
                if elementID == 0 { i += 1; continue }
                guard i + 2 <= end else { return nil }
                let length = Int(packet[i + 1])
                guard i + 2 + length <= end else { return nil }
                if elementID == id { return length == 2 ? UInt16(packet[i + 2]) << 8 | UInt16(packet[i + 3]) : nil }
                i += 2 + length
            }
        }
        return nil
    }
}
