import RTP

/// Runs the packetizer over `frame` and returns copies of the packets it emitted.
func packetize(_ packetizer: inout VP8Packetizer, _ frame: [UInt8], timestamp: UInt32, layer: UInt8 = 0) -> [[UInt8]] {
    var packets: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: RTPHeader.fixedSize + packetizer.maxPayloadSize)
    let returned = frame.withUnsafeBytes { f in
        buffer.withUnsafeMutableBytes { b in
            packetizer.packetize(frame: f, rtpTimestamp: timestamp, temporalLayer: layer, into: b) { packets.append(Array($0)) }
        }
    }
    precondition(returned == packets.count, "packetize returned \(returned) but emitted \(packets.count)")
    return packets
}

func parseHeader(_ packet: [UInt8]) throws -> (header: RTPHeader, payloadOffset: Int, payloadLength: Int) {
    try packet.withUnsafeBytes { try RTPHeader.parse($0) }
}

func parseDescriptor(_ payload: [UInt8]) throws -> (start: Bool, partitionID: UInt8, pictureID: UInt16?, headerLength: Int) {
    try payload.withUnsafeBytes { try VP8Packetizer.parseDescriptor($0) }
}

func marshal(_ header: RTPHeader) -> [UInt8] {
    var out = [UInt8](repeating: 0xEE, count: RTPHeader.fixedSize)
    let n = out.withUnsafeMutableBytes { header.marshal(into: $0) }
    precondition(n == RTPHeader.fixedSize)
    return out
}
