import RTP

/// Writes big-endian fields into a caller's buffer. Running past the end is a programming error
/// (the builders document the sizes they need), so it traps with a message instead of writing
/// out of bounds.
struct ByteWriter {
    let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset: Int

    init(_ buffer: UnsafeMutableRawBufferPointer, offset: Int = 0) {
        self.buffer = buffer
        self.offset = offset
    }

    var remaining: Int { buffer.count - offset }

    mutating func u8(_ v: UInt8) {
        precondition(offset < buffer.count, "RTCP buffer of \(buffer.count) bytes is too small")
        buffer[offset] = v
        offset += 1
    }

    mutating func u16(_ v: UInt16) { u8(UInt8(v >> 8)); u8(UInt8(truncatingIfNeeded: v)) }
    mutating func u24(_ v: UInt32) { u8(UInt8(truncatingIfNeeded: v >> 16)); u16(UInt16(truncatingIfNeeded: v)) }
    mutating func u32(_ v: UInt32) { u16(UInt16(v >> 16)); u16(UInt16(truncatingIfNeeded: v)) }
    mutating func zeros(_ n: Int) { for _ in 0..<n { u8(0) } }

    /// The RTCP common header (RFC 3550 §6.4.1): V=2, P=0, count/FMT, packet type, and the
    /// length in 32-bit words minus one, from the packet's full size in bytes.
    mutating func header(count: UInt8, packetType: UInt8, size: Int) {
        precondition(size % 4 == 0 && size >= 4, "RTCP packet size \(size) is not a positive multiple of 4")
        u8(0x80 | (count & 0x1F))
        u8(packetType)
        u16(UInt16(size / 4 - 1))
    }
}

/// Reads big-endian fields from one RTCP packet's body (after the common header, without
/// padding); every read checks the bounds and throws naming the packet.
struct ByteReader {
    let bytes: UnsafeRawBufferPointer
    let what: String
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer, what: String) {
        self.bytes = bytes
        self.what = what
    }

    var remaining: Int { bytes.count - offset }

    mutating func need(_ n: Int) throws {
        guard remaining >= n else {
            throw RTPParseError("RTCP \(what) truncated: needs \(n) more bytes at byte \(offset) of \(bytes.count)")
        }
    }

    mutating func u8() throws -> UInt8 {
        try need(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() throws -> UInt16 {
        try need(2)
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    mutating func u24() throws -> UInt32 {
        try need(3)
        defer { offset += 3 }
        return UInt32(bytes[offset]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2])
    }

    mutating func u32() throws -> UInt32 {
        try need(4)
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    /// `n` bytes as UTF-8 text (invalid sequences become U+FFFD).
    mutating func text(_ n: Int) throws -> String {
        try need(n)
        defer { offset += n }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + n)]), as: UTF8.self)
    }

    mutating func skip(_ n: Int) throws {
        try need(n)
        offset += n
    }
}

/// Text cut to at most `limit` UTF-8 bytes on a character boundary (SDES items and BYE reasons
/// hold at most 255 octets, RFC 3550 §6.5, §6.6).
func utf8Prefix(_ text: String, limit: Int = 255) -> Substring.UTF8View {
    let utf8 = text.utf8
    guard utf8.count > limit else { return utf8[...] }
    var end = utf8.index(utf8.startIndex, offsetBy: limit)
    while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }  // continuation byte
    return utf8[..<end]
}
