import RTCP
import NetworkAddress

/// What the relay's parts write to: the queue of datagrams (``RelayOutbox``), the counters,
/// and the buffers an RTCP packet or a renumbered RTP packet is built in (made once: nothing
/// is allocated per packet). ``RelayForwarder`` and ``RTCPTerminator`` are handed it `inout`;
/// ``RelayCore`` owns it and its caller drains it.
struct RelayWire {
    /// The relay's own SSRC, the sender of its RTCP.
    let ssrc: UInt32
    var outbox = RelayOutbox()
    var counters = RelayCounters()
    private var rtcpBuffer = [UInt8](repeating: 0, count: 1500)
    private var editBuffer = [UInt8](repeating: 0, count: 1500)

    init(ssrc: UInt32) { self.ssrc = ssrc }

    /// Queues the RTCP packet `build` writes (its length; 0: nothing) to `address`.
    mutating func sendRTCP(to address: PeerAddress, _ build: (UnsafeMutableRawBufferPointer) -> Int) {
        let n = rtcpBuffer.withUnsafeMutableBytes(build)
        guard n > 0 else { return }
        rtcpBuffer.withUnsafeBytes { outbox.send(UnsafeRawBufferPointer(rebasing: $0[0..<n]), to: address) }
    }

    /// Queues a control message to `address` (one small enough not to need cutting: `link`).
    mutating func sendControl(_ message: ControlMessage, to address: PeerAddress) {
        ControlEnvelope(requestID: 0, message).encoded().withUnsafeBytes { outbox.send($0, to: address) }
    }

    /// Queues a copy of a VP8 packet with its sequence number and picture ID (15 or 7 bits, at
    /// `pictureOffset`, as the descriptor had it) replaced.
    mutating func sendEdited(_ bytes: UnsafeRawBufferPointer, sequence: UInt16, pictureID: UInt16?, pictureOffset: Int, to address: PeerAddress) {
        guard bytes.count <= editBuffer.count else { return }
        editBuffer.withUnsafeMutableBytes { b in
            b.copyMemory(from: bytes)
            b[2] = UInt8(sequence >> 8)
            b[3] = UInt8(sequence & 0xFF)
            if let pictureID, pictureOffset + 1 < bytes.count, b[pictureOffset - 1] & 0x80 != 0 {  // X byte: I
                if b[pictureOffset] & 0x80 != 0 {
                    b[pictureOffset] = 0x80 | UInt8((pictureID >> 8) & 0x7F)
                    b[pictureOffset + 1] = UInt8(pictureID & 0xFF)
                } else {
                    b[pictureOffset] = UInt8(pictureID & 0x7F)
                }
            }
        }
        editBuffer.withUnsafeBytes { outbox.send(UnsafeRawBufferPointer(rebasing: $0[0..<bytes.count]), to: address) }
        counters.rtpForwarded += 1
        counters.bytesForwarded += bytes.count
    }

    /// Queues `bytes` to each of `addresses` (one forwarded packet's fan-out), counted.
    mutating func forward(_ bytes: UnsafeRawBufferPointer, toEach addresses: [PeerAddress]) {
        outbox.send(bytes, toEach: addresses)
        counters.rtpForwarded += addresses.count
        counters.bytesForwarded += addresses.count * bytes.count
    }
}
