/// Forward error correction for a browser, sent the way libwebrtc sends it and Chromium and
/// Firefox repair with it: ULPFEC (RFC 5109) inside RED (RFC 2198), in the video stream's own
/// SSRC and sequence numbers, under the payload types the browser offered for `red` and
/// `ulpfec`. While FEC is on, every media packet goes as a RED packet of one block (a one-byte
/// header naming VP8's payload type, then the packet's payload), and after a frame's last
/// packet come the FEC packets for it and the frames before it not yet covered (as many
/// frames as make one FEC packet's worth at the protection asked), RED-wrapped too. The FEC covers the media packets as
/// the browser will see them unwrapped: its SSRC, sequence numbers, timestamps and VP8 payload
/// type (libwebrtc's `UlpfecReceiver` strips the RED header before it stores a packet).
///
/// The FEC packets take sequence numbers of their own, so the media packets after them are
/// numbered on by as many: this keeps where each frame's were inserted, to number a resend or a
/// late packet as it was first sent, and to read the browser's NACKs and reports back.
///
/// Pure: no I/O, nothing allocated per packet (the FEC store is made when FEC first goes on).
public struct REDProtection: Sendable {
    /// The browser's payload types for RED and ULPFEC.
    public let redPT: UInt8
    public let fecPT: UInt8
    /// Where FEC packets were inserted: after the packet numbered `after` (in the numbers it
    /// is given, before the shift), `count` of them, with `before` inserted earlier.
    private struct Insertion {
        var after: UInt16 = 0
        var before: UInt16 = 0
        var count: UInt16 = 0
    }
    /// The newest insertions, a ring (about 8 s of frames at 30 fps: resends come within one).
    private var insertions = [Insertion](repeating: Insertion(), count: 256)
    private var insertionCount = 0
    private var nextInsertion = 0
    /// FEC packets inserted in all.
    private var inserted: UInt16 = 0
    /// The newest packet given (its number before the shift), and whether it ended a frame
    /// that FEC is owed for.
    private var newest: UInt16?
    private var frameEnd: UInt16?
    private var encoder: ULPFECEncoder?
    /// RTP header (12) + RED header (1) + the FEC packet.
    private var buffer = [UInt8]()
    /// FEC packets made.
    public private(set) var fecPackets = 0

    /// The most media packets of one frame the FEC covers.
    public static let frameCapacity = 96

    public init(redPT: UInt8, fecPT: UInt8) {
        self.redPT = redPT
        self.fecPT = fecPT
    }

    /// The number the packet numbered `sequence` goes out with (nil: it is older than what is
    /// kept, and is dropped).
    public func outgoing(_ sequence: UInt16) -> UInt16? {
        if let out = newestFirst({ p in Int16(bitPattern: sequence &- p.after) > 0 ? sequence &+ p.before &+ p.count : nil }) {
            return out
        }
        // Before every insertion kept: known only while none has been forgotten.
        return insertionCount < insertions.count ? sequence : nil
    }

    /// The number before the shift of the packet the browser names `sequence`; nil for an FEC
    /// packet (or one older than what is kept).
    public func original(_ sequence: UInt16) -> UInt16? {
        // Media after an insertion: shifted back; one of its FEC packets: none (`.some(nil)`).
        let found: UInt16?? = newestFirst { p in
            if Int16(bitPattern: sequence &- (p.after &+ p.before &+ p.count)) > 0 { return .some(sequence &- p.before &- p.count) }
            return Int16(bitPattern: sequence &- (p.after &+ p.before)) > 0 ? .some(nil) : nil
        }
        if let found { return found }
        return insertionCount < insertions.count ? sequence : nil
    }

    /// Like ``original(_:)``, but an FEC packet's number gives the media packet before it (a
    /// receiver report's highest number).
    public func originalOrPreceding(_ sequence: UInt16) -> UInt16 {
        original(sequence) ?? newestFirst { p in Int16(bitPattern: sequence &- (p.after &+ p.before)) > 0 ? p.after : nil } ?? sequence
    }

    /// The first value `body` gives for the insertions kept, newest first (nil: none gave one).
    private func newestFirst<T>(_ body: (Insertion) -> T?) -> T? {
        var i = nextInsertion
        for _ in 0..<insertionCount {
            i = (i + insertions.count - 1) % insertions.count
            if let value = body(insertions[i]) { return value }
        }
        return nil
    }

    /// Numbers a video RTP packet of `length` bytes at the start of `packet` (room to grow by
    /// one byte) for the browser, and wraps it in RED when `protection` (FEC packets per media
    /// packet) is above 0, keeping it for the frame's FEC. Its sequence number is the one
    /// before the shift; its payload type already the browser's VP8.
    /// - Returns: its new length; 0 to drop it.
    public mutating func prepare(_ packet: UnsafeMutableRawBufferPointer, length: Int, protection: Double) -> Int {
        guard length >= RTPHeader.fixedSize, length < packet.count else { return 0 }
        // The header's length: fixed part, CSRCs, extension.
        var headerLength = RTPHeader.fixedSize + 4 * Int(packet[0] & 0x0F)
        if packet[0] & 0x10 != 0 {
            guard headerLength + 4 <= length else { return 0 }
            headerLength += 4 + 4 * (Int(packet[headerLength + 2]) << 8 | Int(packet[headerLength + 3]))
        }
        guard headerLength <= length else { return 0 }
        let sequence = UInt16(packet[2]) << 8 | UInt16(packet[3])
        guard let out = outgoing(sequence) else { return 0 }
        packet[2] = UInt8(out >> 8)
        packet[3] = UInt8(out & 0xFF)
        let isNew = newest.map { Int16(bitPattern: sequence &- $0) > 0 } ?? true
        if isNew { newest = sequence }
        guard protection > 0, packet[0] & 0x20 == 0 else {  // no FEC, or padding (a probe): as it is
            if isNew { encoder?.reset() }
            return length
        }
        if isNew {
            if encoder == nil {
                encoder = ULPFECEncoder(capacity: Self.frameCapacity)
                buffer = [UInt8](repeating: 0, count: ULPFEC.maxPacketSize + 1)
            }
            encoder!.add(UnsafeRawBufferPointer(rebasing: packet[0..<length]))
            if packet[1] & 0x80 != 0 { frameEnd = sequence }
        }
        // RED, one block (RFC 2198 §3: F = 0, the block's payload type).
        let payloadType = packet[1] & 0x7F
        if length > headerLength {
            UnsafeMutableRawBufferPointer(rebasing: packet[(headerLength + 1)...])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: packet[headerLength..<length]))
        }
        packet[headerLength] = payloadType
        packet[1] = (packet[1] & 0x80) | redPT
        return length + 1
    }

    /// After a packet that ended a frame (``prepare(_:length:protection:)``): its FEC packets,
    /// each handed to `emit` (RED-wrapped, numbered after the frame's last packet), and the
    /// packets after them numbered on. Nothing when no frame ended.
    public mutating func finishFrame(protection: Double, emit: (UnsafeRawBufferPointer) -> Void) {
        guard let end = frameEnd, var encoder = self.encoder, let first = outgoing(end).map({ $0 &+ 1 }) else { return }
        frameEnd = nil
        // Too few packets yet for an FEC packet at this protection: the next frames' join them
        // (small frames protected together, as libwebrtc's `UlpfecGenerator` does, not most of
        // them left without any).
        if protection > 0, encoder.count < ULPFEC.maxProtected, encoder.fecCount(protection: protection) == 0 { return }
        self.encoder = nil  // the only reference while it works: no copy
        let made = buffer.withUnsafeMutableBytes { b -> Int in
            // The encoder writes each packet one byte in; its 12-byte header moves back over
            // that byte, and the RED header goes after it.
            encoder.finish(protection: protection, payloadType: fecPT, sequence: first, transportSequenceID: nil,
                           into: UnsafeMutableRawBufferPointer(rebasing: b[1...])) { fec in
                let n = fec.count
                UnsafeMutableRawBufferPointer(rebasing: b[0..<RTPHeader.fixedSize])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: b[1...RTPHeader.fixedSize]))
                b[1] = (b[1] & 0x80) | redPT
                b[RTPHeader.fixedSize] = fecPT
                emit(UnsafeRawBufferPointer(rebasing: b[0..<(n + 1)]))
            }
        }
        self.encoder = encoder
        guard made > 0 else { return }
        fecPackets += made
        insertions[nextInsertion] = Insertion(after: end, before: inserted, count: UInt16(made))
        nextInsertion = (nextInsertion + 1) % insertions.count
        insertionCount = min(insertionCount + 1, insertions.count)
        inserted &+= UInt16(made)
    }
}
