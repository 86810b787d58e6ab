/// Source description, RFC 3550 §6.5 (PT 202). Only the CNAME item (type 1, §6.5.1) is kept;
/// other items are skipped.
///
/// ```
///         0                   1                   2                   3
///         0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// header |V=2|P|    SC   |  PT=SDES=202  |             length            |
///        +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// chunk  |                          SSRC/CSRC_1                          |
///   1    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        |    CNAME=1    |     length    | user and domain name        ...
///        +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///        | ... items, then a null octet and padding to 32 bits           |
/// ```
public struct SourceDescription: Sendable, Equatable {
    public static let packetType: UInt8 = 202

    public struct Chunk: Sendable, Equatable {
        public var ssrc: UInt32
        /// The CNAME, or nil if the chunk had none. At most 255 bytes of UTF-8 are written.
        public var cname: String?
        public init(ssrc: UInt32, cname: String?) {
            self.ssrc = ssrc
            self.cname = cname
        }

        var size: Int {
            let text = cname.map { 2 + utf8Prefix($0).count } ?? 0
            return (4 + text + 1 + 3) & ~3  // SSRC, item, null, padding
        }
    }

    /// At most 31 chunks.
    public var chunks: [Chunk]

    public init(chunks: [Chunk]) { self.chunks = chunks }

    public var marshalSize: Int { chunks.reduce(4) { $0 + $1.size } }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        write(&w)
        return w.offset
    }

    func write(_ w: inout ByteWriter) {
        precondition(chunks.count <= 31, "an SDES carries at most 31 chunks")
        w.header(count: UInt8(chunks.count), packetType: Self.packetType, size: marshalSize)
        for chunk in chunks {
            let start = w.offset
            w.u32(chunk.ssrc)
            if let cname = chunk.cname { Self.writeCNAME(cname, &w) }
            w.u8(0)  // end of the item list
            while (w.offset - start) % 4 != 0 { w.u8(0) }
        }
    }

    /// Writes a one-chunk SDES with a CNAME, allocating nothing.
    static func writeCNAME(ssrc: UInt32, cname: String, _ w: inout ByteWriter) {
        let size = Chunk(ssrc: ssrc, cname: cname).size
        w.header(count: 1, packetType: packetType, size: 4 + size)
        w.u32(ssrc)
        writeCNAME(cname, &w)
        w.zeros(size - 4 - 2 - utf8Prefix(cname).count)
    }

    private static func writeCNAME(_ cname: String, _ w: inout ByteWriter) {
        let text = utf8Prefix(cname)
        w.u8(1)
        w.u8(UInt8(text.count))
        for c in text { w.u8(c) }
    }

    static func parse(count: UInt8, body: UnsafeRawBufferPointer) throws -> SourceDescription {
        var r = ByteReader(body, what: "SDES")
        var sdes = SourceDescription(chunks: [])
        for _ in 0..<count {
            let start = r.offset
            var chunk = Chunk(ssrc: try r.u32(), cname: nil)
            while true {
                let type = try r.u8()
                if type == 0 { break }
                let length = Int(try r.u8())
                if type == 1 { chunk.cname = try r.text(length) } else { try r.skip(length) }
            }
            try r.skip((4 - (r.offset - start) % 4) % 4)  // padding to the next 32-bit boundary
            sdes.chunks.append(chunk)
        }
        return sdes
    }
}

/// Goodbye, RFC 3550 §6.6 (PT 203).
///
/// ```
///        0                   1                   2                   3
///        0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
///       +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///       |V=2|P|    SC   |   PT=BYE=203  |             length            |
///       +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///       |                           SSRC/CSRC                           |
///       +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
///       :                              ...                              :
///       +=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+=+
/// (opt) |     length    |               reason for leaving            ...
///       +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// ```
public struct Goodbye: Sendable, Equatable {
    public static let packetType: UInt8 = 203
    /// At most 31 sources.
    public var sources: [UInt32]
    /// Why, at most 255 bytes of UTF-8.
    public var reason: String?

    public init(sources: [UInt32], reason: String? = nil) {
        self.sources = sources
        self.reason = reason
    }

    public var marshalSize: Int {
        4 + 4 * sources.count + (reason.map { (1 + utf8Prefix($0).count + 3) & ~3 } ?? 0)
    }

    /// Writes the packet into `buffer` (at least ``marshalSize`` bytes). Returns the bytes written.
    public func marshal(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var w = ByteWriter(buffer)
        write(&w)
        return w.offset
    }

    func write(_ w: inout ByteWriter) {
        precondition(sources.count <= 31, "a BYE carries at most 31 sources")
        w.header(count: UInt8(sources.count), packetType: Self.packetType, size: marshalSize)
        for s in sources { w.u32(s) }
        if let reason {
            let text = utf8Prefix(reason)
            w.u8(UInt8(text.count))
            for c in text { w.u8(c) }
            w.zeros((4 - (1 + text.count) % 4) % 4)
        }
    }

    static func parse(count: UInt8, body: UnsafeRawBufferPointer) throws -> Goodbye {
        var r = ByteReader(body, what: "BYE")
        var bye = Goodbye(sources: [])
        for _ in 0..<count { bye.sources.append(try r.u32()) }
        if r.remaining > 0 {
            let length = Int(try r.u8())
            bye.reason = try r.text(length)
        }
        return bye
    }
}
