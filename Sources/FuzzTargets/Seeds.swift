import SRTP
import Foundation
import Room
import RTCP
import RTP
import Relay
import Transport
import WebRTC
import MediaCore
import VP8Codec

extension FuzzTarget {
    /// Valid inputs, made with the project's own writers, for the fuzzer to start from (the
    /// committed corpus began as these: `screenshare-fuzz --seed DIR`).
    public var seeds: [[UInt8]] {
        switch self {
        case .rtp: return [Self.vp8Packet(seq: 1, keyframe: true), Self.vp8Packet(seq: 2, keyframe: false), Self.opusPacket(),
                           Self.vp8PacketWithTransportSequence()]
        case .rtcp: return Self.rtcpPackets()
        case .vp8: return Self.descriptors().map { Self.write($0) }
        case .room: return Self.controlMessages().map { $0.encoded() }
        case .relay: return [Self.relaySession(), Self.relayLayeredSession(), Self.relayFECSession()]
        case .stun: return [Self.bindingRequest(nominate: true), Self.bindingRequest(nominate: false)]
        case .sdp: return [Array(Self.offer.utf8)]
        case .janus:
            // Janus 1.1.2's own answers (Debian 12), to `create` and to a wrong admin key.
            return [
                #"{"janus":"success","session_id":5462212018311893,"transaction":"t3","sender":5164558270088788,"plugindata":{"plugin":"janus.plugin.streaming","data":{"streaming":"created","created":"mp-6081659044656729","permanent":false,"stream":{"id":6081659044656729,"type":"live","description":"class","is_private":false,"ports":[{"type":"video","mid":"v","port":41002},{"type":"audio","mid":"a","port":41003}]}}}}"#,
                #"{"janus":"success","session_id":5462212018311893,"transaction":"t3","sender":5164558270088788,"plugindata":{"plugin":"janus.plugin.streaming","data":{"streaming":"created","created":"mp-1","permanent":false,"stream":{"id":1,"type":"live","ports":[{"type":"video","mid":"v","port":20000}]}}}}"#,
            ].map { Array($0.utf8) }
        case .invitation:
            return [
                "http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4\n{\"fingerprint\":\"sha256:4be1\",\"room\":\"class\",\"token\":\"eyJ.x.y\"}",
                "http://relay.example:7600/lab%232#token=eyJ.a.b&fp=sha256:00\n{\"fingerprint\":\"sha256:00\",\"room\":\"lab#2\"}",
            ].map { Array($0.utf8) }
        case .http:
            let offer = Self.offer
            return [
                "POST /whep/class?from=teacher HTTP/1.1\r\nHost: relay\r\nContent-Type: application/sdp\r\nContent-Length: \(offer.utf8.count)\r\n\r\n\(offer)",
                "GET /class HTTP/1.1\r\nHost: relay\r\n\r\nGET /rooms/class HTTP/1.1\r\nHost: relay\r\n\r\n",
                "DELETE /whep/class/0123456789abcdef HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n",
                "OPTIONS /whep/class HTTP/1.1\r\nHost: relay\r\nOrigin: http://elsewhere\r\n\r\n",
                "POST /invite/class HTTP/1.1\r\nHost: relay\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\n\(WHEPServer.fuzzInviteCode)",
            ].map { Array($0.utf8) }
        case .dtls:
            guard let certificate = try? DTLSCertificate(),
                  let client = try? DTLSTransport(role: .client, certificate: certificate, remoteFingerprint: nil) else { return [] }
            client.start()
            return client.takeOutgoing().map { [$0] } ?? []
        case .token:
            // Signed with `tokenSecret` by Python's hmac (an implementation that is not ours):
            // a viewer's with every claim, a presenter's with few.
            return [
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJzY3JlZW5zaGFyZSIsInN1YiI6InZpZXdlci0xIiwibmFtZSI6IkFkYSIsIm5iZiI6MTcwMDAwMDAwMCwiZXhwIjo0MTAyNDQ0ODAwLCJ2aWRlbyI6eyJyb29tIjoiY2xhc3MiLCJyb29tSm9pbiI6dHJ1ZSwiY2FuUHVibGlzaCI6ZmFsc2UsImNhblN1YnNjcmliZSI6dHJ1ZX19.980Bu27fbF9C6Jjtq_R5ZjRmGQ8HOs8eP4zur3sPsiM",
                "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0ZWFjaGVyIiwiZXhwIjo0MTAyNDQ0ODAwLCJ2aWRlbyI6eyJyb29tIjoiY2xhc3MiLCJyb29tSm9pbiI6dHJ1ZSwiY2FuUHVibGlzaCI6dHJ1ZX19.RF_3VJQQTIIVe7GsXzXm3jzRFCmneJc__Rb9bcUz9vw",
            ].map { Array($0.utf8) }
        case .frames: return Self.screenStreams()
        case .fec:
            // A frame of five packets and its two FEC packets, one media packet missing (and, in
            // the second, the FEC packets first).
            var encoder = ULPFECEncoder(capacity: 8)
            var media: [[UInt8]] = []
            for i in 0..<5 {
                var p = Self.vp8Packet(seq: UInt16(10 + i), keyframe: i == 0)
                if i == 4 { p[1] |= 0x80 }
                media.append(p)
                p.withUnsafeBytes { encoder.add($0) }
            }
            var fecs: [[UInt8]] = []
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 16)
            defer { buffer.deallocate() }
            encoder.finish(protection: 0.4, payloadType: ULPFEC.payloadType, sequence: 15, transportSequenceID: nil, into: buffer) {
                fecs.append(Array($0))
            }
            func framed(_ packets: [[UInt8]]) -> [UInt8] { packets.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 } }
            return [framed(media.enumerated().filter { $0.offset != 2 }.map(\.element) + fecs),
                    framed(fecs + media.enumerated().filter { $0.offset != 3 }.map(\.element))]
        case .congestion:
            // Feedback as a receiver sends it every 100 ms, then one whose clock went back (a
            // restarted receiver) and one far ahead.
            func feedback(base: UInt16, reference: Int32, count: Int, step: Int64) -> [UInt8] {
                var b = [UInt8](repeating: 0, count: 1500)
                let fb = TransportFeedback(senderSSRC: 1, mediaSSRC: 2, baseSequence: base, referenceTime: reference, feedbackCount: 0,
                                           arrivals: (0..<count).map { $0 % 17 == 5 ? nil : Int64($0) * step })
                let n = b.withUnsafeMutableBytes { RTCPPacket.transportFeedback(fb).marshal(into: $0) }
                return [UInt8(n >> 8), UInt8(n & 0xFF)] + b[0..<n]
            }
            let steady = (0..<10).flatMap { feedback(base: 65_000 &+ UInt16($0 * 100), reference: 100 + Int32($0), count: 100, step: 4) }
            return [steady, steady + feedback(base: 65_000 &+ 1000, reference: 1, count: 100, step: 4)
                        + feedback(base: 65_000 &+ 1100, reference: 0x7F_0000, count: 100, step: 40)]
        case .srtp:
            // What a sender protects with the key: a VP8 packet, an Opus one, a sender report.
            guard let flow = try? SRTPFlow(masterKey: Self.srtpKey) else { return [] }
            var report = [UInt8](repeating: 0, count: 256)
            let n = report.withUnsafeMutableBytes {
                RTCPPacket.buildSenderReport(ssrc: 7, ntp: NTPTimestamp(unixNanos: 1_000_000_000), rtpTimestamp: 9, packetCount: 1,
                                             octetCount: 100, cname: "fuzz", bye: false, into: $0)
            }
            return [Self.vp8Packet(seq: 1, keyframe: true), Self.opusPacket(), Array(report[0..<n])].compactMap { packet in
                packet.withUnsafeBytes { flow.protect($0) { Array($0) } }
            }
        }
    }

    static func write(_ d: VP8PayloadDescriptor) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 16)
        let n = b.withUnsafeMutableBytes { d.marshal(into: $0) }
        return Array(b[0..<n])
    }

    static func descriptors() -> [VP8PayloadDescriptor] {
        var key = VP8PayloadDescriptor()
        key.start = true
        key.pictureID = 0x1234
        var layered = key
        layered.tl0PictureIndex = 7
        layered.temporalLayer = 1
        layered.layerSync = true
        layered.keyIndex = 3
        var short = VP8PayloadDescriptor()
        short.pictureID = 42
        short.longPictureID = false
        short.partitionID = 2
        return [key, layered, short]
    }

    static func vp8Packet(seq: UInt16, keyframe: Bool, ssrc: UInt32 = 0x5EED_0001) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 12)
        _ = b.withUnsafeMutableBytes { RTPHeader(marker: true, payloadType: 96, sequenceNumber: seq, timestamp: UInt32(seq) * 3000, ssrc: ssrc).marshal(into: $0) }
        b += write(descriptors()[0])
        // A VP8 frame tag (keyframe bit clear) and start code, then some payload.
        b += keyframe ? [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x40, 0x01, 0xF0, 0x00] : [0x31, 0x02, 0x00]
        b += (0..<40).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        return b
    }

    /// A packet as the sender writes it in plain mode: the transport-wide sequence number after the header.
    static func vp8PacketWithTransportSequence() -> [UInt8] {
        var b = vp8Packet(seq: 3, keyframe: false)
        b.insert(contentsOf: [UInt8](repeating: 0, count: TransportWideSequence.blockSize), at: 12)
        b.withUnsafeMutableBytes {
            _ = TransportWideSequence.writeBlock(id: TransportWideSequence.defaultID, into: $0)
            TransportWideSequence.stamp(0x1234, into: $0)
        }
        return b
    }

    static func opusPacket() -> [UInt8] {
        var b = [UInt8](repeating: 0, count: 12)
        _ = b.withUnsafeMutableBytes { RTPHeader(payloadType: 111, sequenceNumber: 9, timestamp: 960, ssrc: 0x5EED_0002).marshal(into: $0) }
        return b + [0xFC, 0xFF, 0xFE]
    }

    static func rtcpPackets() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var b = [UInt8](repeating: 0, count: 1500)
        let report = ReceptionReport(ssrc: 0x5EED_0001, fractionLost: 3, cumulativeLost: 10, extendedHighestSequence: 70000, jitter: 12,
                                     lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 655)
        let writers: [(UnsafeMutableRawBufferPointer) -> Int] = [
            { RTCPPacket.buildSenderReport(ssrc: 0x5EED_0001, ntp: NTPTimestamp(seconds: 3_900_000_000, fraction: 1 << 31), rtpTimestamp: 90000,
                                           packetCount: 100, octetCount: 120_000, cname: "fuzz@host", bye: false, into: $0) },
            { RTCPPacket.buildReceiverReport(ssrc: 0xAAAA, reports: [report], cname: "viewer@host", into: $0) },
            { RTCPPacket.buildNACK(senderSSRC: 0xAAAA, mediaSSRC: 0x5EED_0001, sequenceNumbers: [10, 11, 13, 40], into: $0) },
            { RTCPPacket.buildPLI(senderSSRC: 0xAAAA, mediaSSRC: 0x5EED_0001, into: $0) },
            { RTCPPacket.buildFIR(senderSSRC: 0xAAAA, mediaSSRC: 0x5EED_0001, sequenceNumber: 4, into: $0) },
            { RTCPPacket.transportFeedback(TransportFeedback(senderSSRC: 0xAAAA, mediaSSRC: 0x5EED_0001, baseSequence: 65530, referenceTime: 12,
                                                             feedbackCount: 3, arrivals: [4, nil, 30, 700, 690] + [Int64?](repeating: nil, count: 9)))
                .marshal(into: $0) },
            { RTCPPacket.remb(REMB(senderSSRC: 0xAAAA, bitsPerSecond: 1_500_000, ssrcs: [0x5EED_0001])).marshal(into: $0) },
        ]
        for write in writers {
            let n = b.withUnsafeMutableBytes(write)
            out.append(Array(b[0..<n]))
        }
        return out
    }

    static func controlMessages() -> [ControlEnvelope] {
        let screen = StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)
        let audio = StreamInfo(kind: .audio, ssrc: 0x5EED_0002, pt: 111, codec: "opus", clock: 48000)
        return [
            ControlEnvelope(requestID: 1, .join(room: "class", name: "teacher", role: "presenter", token: nil)),
            ControlEnvelope(requestID: 1, .join(room: "class", name: "teacher", role: "presenter", token: nil, cookie: "00112233445566778899aabb")),
            ControlEnvelope(requestID: 1, .retry(cookie: "00112233445566778899aabb")),
            ControlEnvelope(requestID: 2, .publish(streams: [screen, audio])),
            ControlEnvelope(requestID: 3, .subscribe(publisher: 1, kinds: [.screen, .audio])),
            ControlEnvelope(requestID: 4, .ping(version: 3)),
            ControlEnvelope(requestID: 5, .unsubscribe(publisher: 1, kinds: [.screen])),
            ControlEnvelope(requestID: 6, .sync),
            ControlEnvelope(requestID: 7, .leave),
            ControlEnvelope(.link(publisher: 1, layers: .keyframes, estimateKbps: 120)),
        ]
    }

    /// A presenter joins and publishes and sends RTP and a sender report; a viewer joins,
    /// subscribes, asks for a retransmission and a keyframe, pings and leaves.
    static func relaySession() -> [UInt8] {
        let messages = controlMessages()
        var out = relayRoomOfTwo(messages)
        for seq in 1...3 { out += relayDatagram(vp8Packet(seq: UInt16(seq), keyframe: seq == 1), from: 0) }
        let rtcp = rtcpPackets()
        out += relayDatagram(rtcp[0], from: 0)
        out += relayDatagram(rtcp[2], from: 1)
        out += relayDatagram(rtcp[3], from: 1)
        out += relayDatagram(messages[5].encoded(), from: 1)
        out += relayDatagram(messages[8].encoded(), from: 1)
        return out
    }

    /// A presenter (sender 0) joins and publishes, a viewer (sender 1) joins and subscribes.
    static func relayRoomOfTwo(_ messages: [ControlEnvelope]) -> [UInt8] {
        var out: [UInt8] = []
        out += relayDatagram(ControlEnvelope(requestID: 1, .join(room: "class", name: "teacher", role: "presenter", token: nil,
                                                                 cookie: relayCookie(sender: 0))).encoded(), from: 0)
        out += relayDatagram(messages[3].encoded(), from: 0)
        out += relayDatagram(ControlEnvelope(requestID: 1, .join(room: "class", name: "pupil", role: "viewer", token: nil,
                                                                 cookie: relayCookie(sender: 1))).encoded(), from: 1)
        out += relayDatagram(messages[4].encoded(), from: 1)
        return out
    }

    /// A presenter sends a two-layer stream numbered transport-wide; the viewer sends transport
    /// feedback (its downlink's estimate: the relay's per-viewer layers) and a NACK.
    static func relayLayeredSession() -> [UInt8] {
        let messages = controlMessages()
        var out = relayRoomOfTwo(messages)
        var packetizer = VP8Packetizer(ssrc: 0x5EED_0001, initialSequence: 65530, initialPictureID: 0x7FFE)
        packetizer.temporalLayers = true
        packetizer.transportSequenceID = RoomProtocol.transportSequenceID
        var buffer = [UInt8](repeating: 0, count: 1500)
        var transport: UInt16 = 65534
        let frame = [UInt8](repeating: 1, count: 1500)
        for picture in 0..<6 {
            var packets: [[UInt8]] = []
            frame.withUnsafeBytes { f in
                buffer.withUnsafeMutableBytes { b in
                    _ = packetizer.packetize(frame: f, rtpTimestamp: UInt32(picture * 3000), temporalLayer: UInt8(picture % 2), into: b) {
                        packets.append(Array($0))
                    }
                }
            }
            for var p in packets {
                p.withUnsafeMutableBytes { TransportWideSequence.stamp(transport, into: $0) }
                transport &+= 1
                out += relayDatagram(p, from: 0)
            }
        }
        var b = [UInt8](repeating: 0, count: 1500)
        let feedback = TransportFeedback(senderSSRC: 0xAAAA, mediaSSRC: 0x5EED_0001, baseSequence: 65534, referenceTime: 1,
                                         feedbackCount: 0, arrivals: [0, 40, nil, 80, 120, nil, 160, 200, 240, 280, 320, 360])
        let n = b.withUnsafeMutableBytes { RTCPPacket.transportFeedback(feedback).marshal(into: $0) }
        out += relayDatagram(Array(b[0..<n]), from: 1)
        out += relayDatagram(rtcpPackets()[2], from: 1)
        return out
    }

    /// A presenter's screen with its FEC stream, a viewer subscribed to both: of a frame of five
    /// packets one is lost on the way in (the relay rebuilds it from the FEC packet), of the next
    /// one more (the relay asks the presenter for it).
    static func relayFECSession() -> [UInt8] {
        let screen = StreamInfo(kind: .screen, ssrc: 0x5EED_0001, pt: 96, codec: "VP8", clock: 90000)
        let fec = StreamInfo(kind: .fec, ssrc: 0x5EED_0F0C, pt: ULPFEC.payloadType, codec: "ulpfec", clock: 90000)
        var out: [UInt8] = []
        out += relayDatagram(ControlEnvelope(requestID: 1, .join(room: "class", name: "teacher", role: "presenter", token: nil,
                                                                 cookie: relayCookie(sender: 0))).encoded(), from: 0)
        out += relayDatagram(ControlEnvelope(requestID: 2, .publish(streams: [screen, fec])).encoded(), from: 0)
        out += relayDatagram(ControlEnvelope(requestID: 1, .join(room: "class", name: "pupil", role: "viewer", token: nil,
                                                                 cookie: relayCookie(sender: 1))).encoded(), from: 1)
        out += relayDatagram(ControlEnvelope(requestID: 3, .subscribe(publisher: 1, kinds: [.screen, .fec])).encoded(), from: 1)
        var encoder = ULPFECEncoder(capacity: 8)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ULPFEC.maxPacketSize, alignment: 16)
        defer { buffer.deallocate() }
        for frame in 0..<2 {
            var media: [[UInt8]] = []
            for i in 0..<5 {
                var p = Self.vp8Packet(seq: UInt16(100 + frame * 5 + i), keyframe: frame == 0 && i == 0)
                if i < 4 { p[1] &= 0x7F }  // the marker on the last packet only
                media.append(p)
                p.withUnsafeBytes { encoder.add($0) }
            }
            for (i, p) in media.enumerated() where i != 2 && !(frame == 1 && i == 3) { out += relayDatagram(p, from: 0) }
            encoder.finish(protection: 0.2, payloadType: ULPFEC.payloadType, sequence: UInt16(7 + frame), ssrc: fec.ssrc,
                           transportSequenceID: nil, into: buffer) { out += relayDatagram(Array($0), from: 0) }
        }
        return out
    }

    /// A binding request as a browser sends it to the relay's ICE-lite agent, signed with its password.
    static func bindingRequest(nominate: Bool) -> [UInt8] {
        var m = STUNMessageBuilder(type: .bindingRequest, transactionID: (0..<12).map { UInt8($0 * 7) })
        m.append(.username, Array("\(ufrag):remote".utf8))
        m.append(.priority, u32: 0x6E00_1EFF)
        m.append(.iceControlling, u64: 0x0123_4567_89AB_CDEF)
        if nominate { m.append(.useCandidate, []) }
        return m.finish(integrityKey: Array(password.utf8))
    }

    /// An offer as Chromium makes it for the page (recvonly VP8 and Opus, BUNDLE, rtcp-mux).
    static let offer = [
        "v=0", "o=- 4611731400430051336 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1", "a=extmap-allow-mixed",
        "a=msid-semantic: WMS",
        "m=video 9 UDP/TLS/RTP/SAVPF 96 97", "c=IN IP4 0.0.0.0", "a=rtcp:9 IN IP4 0.0.0.0", "a=ice-ufrag:hT8x",
        "a=ice-pwd:7qGJjTHv8w0ewv1Xr6gN0dT2", "a=ice-options:trickle",
        "a=fingerprint:sha-256 " + (0..<32).map { String(format: "%02X", $0 * 5) }.joined(separator: ":"),
        "a=setup:actpass", "a=mid:0", "a=extmap:1 urn:ietf:params:rtp-hdrext:toffset", "a=recvonly", "a=rtcp-mux", "a=rtcp-rsize",
        "a=rtpmap:96 VP8/90000", "a=rtcp-fb:96 goog-remb", "a=rtcp-fb:96 transport-cc", "a=rtcp-fb:96 ccm fir", "a=rtcp-fb:96 nack",
        "a=rtcp-fb:96 nack pli", "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
        "m=audio 9 UDP/TLS/RTP/SAVPF 111 63", "c=IN IP4 0.0.0.0", "a=rtcp:9 IN IP4 0.0.0.0", "a=ice-ufrag:hT8x",
        "a=ice-pwd:7qGJjTHv8w0ewv1Xr6gN0dT2", "a=ice-options:trickle",
        "a=fingerprint:sha-256 " + (0..<32).map { String(format: "%02X", $0 * 5) }.joined(separator: ":"),
        "a=setup:actpass", "a=mid:1", "a=recvonly", "a=rtcp-mux", "a=rtpmap:111 opus/48000/2", "a=rtcp-fb:111 transport-cc",
        "a=fmtp:111 minptime=10;useinbandfec=1", "a=rtpmap:63 red/48000/2", "a=fmtp:63 111/111", "",
    ].joined(separator: "\r\n")

    /// A 64x48 screen stream of a keyframe and five interframes, packetized in packets of at
    /// most 120 bytes, length-prefixed as the `frames` target reads them; and the same with
    /// two packets swapped and one sent twice.
    static func screenStreams() -> [[UInt8]] {
        guard let encoder = try? VP8Encoder(config: VP8EncoderConfig(size: PixelSize(width: 64, height: 48))) else { return [] }
        var packetizer = VP8Packetizer(ssrc: 0x5EED_0002, initialSequence: 65530, initialPictureID: 7, maxPayloadSize: 120)
        var packets: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: RTPHeader.fixedSize + 120)
        let picture = VideoFrame(width: 64, height: 48)
        for i in 0..<6 {
            // A square moving over grey: each interframe has something to say.
            for row in 0..<48 { for col in 0..<64 { picture.y[row * picture.strideY + col] = (col / 8 + i) % 8 == row / 6 ? 235 : 128 } }
            try? encoder.encode(picture, pts: Int64(i) * 3000, duration: 3000) { frame, _ in
                buffer.withUnsafeMutableBytes { b in
                    _ = packetizer.packetize(frame: frame, rtpTimestamp: UInt32(i) * 3000, into: b) { packets.append(Array($0)) }
                }
            }
        }
        func prefixed(_ list: [[UInt8]]) -> [UInt8] { list.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 } }
        var shuffled = packets
        if shuffled.count > 4 { shuffled.swapAt(1, 2); shuffled.append(shuffled[3]) }
        return [prefixed(packets), prefixed(shuffled)]
    }
}
