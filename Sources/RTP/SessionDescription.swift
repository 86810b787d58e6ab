/// A session description (SDP, RFC 8866) for receiving the plain-RTP stream with ffmpeg,
/// ffplay, GStreamer or VLC.
public struct SessionDescription: Sendable, Equatable {
    public var destination: String
    public var videoPort: UInt16
    public var videoPayloadType: UInt8
    public var framerate: Int?
    public var sessionID: UInt64
    /// The Opus stream's RTP port (its RTCP on the next port), or nil for video only.
    public var audioPort: UInt16?
    public var audioPayloadType: UInt8
    /// SRTP keys (`--srtp`): the media sections become `RTP/SAVP` with these `a=crypto` lines.
    public var videoCrypto: SDESCrypto?
    public var audioCrypto: SDESCrypto?
    /// The video carries the transport-wide sequence number with this extension ID
    /// (`a=extmap`) and asks for transport-wide feedback (`a=rtcp-fb:PT transport-cc`); nil: not.
    public var transportSequenceID: UInt8?

    public init(destination: String, videoPort: UInt16, videoPayloadType: UInt8 = 96, framerate: Int? = nil, sessionID: UInt64 = 0,
                audioPort: UInt16? = nil, audioPayloadType: UInt8 = 111) {
        self.destination = destination
        self.videoPort = videoPort
        self.videoPayloadType = videoPayloadType
        self.framerate = framerate
        self.sessionID = sessionID
        self.audioPort = audioPort
        self.audioPayloadType = audioPayloadType
    }

    /// The text, with CRLF line ends. `a=content:slides` (RFC 4796) marks the screen substream.
    /// The audio section follows RFC 7587 §7: `opus/48000/2` whatever is sent, `useinbandfec=1`
    /// because the encoder adds FEC, `minptime=10` as RFC 7587 recommends.
    public func render() -> String {
        let family = destination.contains(":") ? "IP6" : "IP4"
        var lines = [
            "v=0",
            "o=- \(sessionID) 1 IN \(family) \(destination)",
            "s=screenshare",
            "c=IN \(family) \(destination)",
            "t=0 0",
            "m=video \(videoPort) \(videoCrypto == nil ? "RTP/AVP" : "RTP/SAVP") \(videoPayloadType)",
            "a=rtpmap:\(videoPayloadType) VP8/90000",
            "a=rtcp:\(Int(videoPort) + 1)",
        ]
        if let videoCrypto { lines.append(videoCrypto.line) }
        if let id = transportSequenceID {
            lines.append("a=extmap:\(id) \(TransportWideSequence.uri)")
            lines.append("a=rtcp-fb:\(videoPayloadType) transport-cc")
        }
        if let framerate { lines.append("a=framerate:\(framerate)") }
        lines.append("a=content:slides")
        lines.append("a=recvonly")
        if let audioPort {
            lines += [
                "m=audio \(audioPort) \(audioCrypto == nil ? "RTP/AVP" : "RTP/SAVP") \(audioPayloadType)",
                "a=rtpmap:\(audioPayloadType) opus/48000/2",
                "a=fmtp:\(audioPayloadType) minptime=10;useinbandfec=1",
                "a=rtcp:\(Int(audioPort) + 1)",
            ]
            if let audioCrypto { lines.append(audioCrypto.line) }
            lines.append("a=recvonly")
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}

/// What a receiver needs from an SDP (RFC 8866): per media section the port, payload type,
/// encoding and clock rate, and the RTCP port (RFC 3605 `a=rtcp`, else port + 1).
public struct ReceiveDescription: Sendable, Equatable {
    public struct Media: Sendable, Equatable {
        public var kind: String
        public var port: UInt16
        public var payloadType: UInt8
        public var encoding: String
        public var clockRate: Int
        public var channels: Int?
        public var rtcpPort: UInt16
        /// The SRTP key (`RTP/SAVP` with `a=crypto`); nil: plain RTP.
        public var crypto: SDESCrypto?
        /// The transport-wide sequence number's extension ID (`a=extmap:ID` with its URI), nil: none.
        public var transportSequenceID: UInt8?
        public init(kind: String, port: UInt16, payloadType: UInt8, encoding: String, clockRate: Int, channels: Int?, rtcpPort: UInt16,
                    crypto: SDESCrypto? = nil) {
            self.crypto = crypto
            self.kind = kind
            self.port = port
            self.payloadType = payloadType
            self.encoding = encoding
            self.clockRate = clockRate
            self.channels = channels
            self.rtcpPort = rtcpPort
        }
    }
    public var connectionAddress: String?
    public var media: [Media]

    public init(connectionAddress: String?, media: [Media]) {
        self.connectionAddress = connectionAddress
        self.media = media
    }

    public var video: Media? { media.first { $0.kind == "video" } }
    public var audio: Media? { media.first { $0.kind == "audio" } }

    /// Parses SDP text (CRLF or LF).
    /// - Throws: `RTPParseError` naming the line that is wrong.
    public static func parse(_ text: String) throws -> ReceiveDescription {
        var result = ReceiveDescription(connectionAddress: nil, media: [])
        var current: Media?
        var rtpmaps: [UInt8: (String, Int, Int?)] = [:]
        var explicitRTCP: UInt16?
        var secure = false
        func finish() throws {
            guard var m = current else { return }
            if secure, m.crypto == nil {
                throw RTPParseError("SDP: the \(m.kind) stream is SRTP (RTP/SAVP) but no a=crypto line gives its key")
            }
            if let map = rtpmaps[m.payloadType] {
                m.encoding = map.0
                m.clockRate = map.1
                m.channels = map.2
            }
            if let explicitRTCP { m.rtcpPort = explicitRTCP }
            result.media.append(m)
        }
        for (number, raw) in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline).enumerated() {
            // "\r\n" is one Character in Swift, and a newline.
            let line = String(raw)
            guard line.count >= 2, line[line.index(after: line.startIndex)] == "=" else {
                if line.isEmpty { continue }
                throw RTPParseError("SDP line \(number + 1) '\(line)' is not TYPE=VALUE")
            }
            let value = line.dropFirst(2)
            switch line.first {
            case "c":
                // c=IN IP4 ADDRESS[/ttl]
                let parts = value.split(separator: " ")
                guard parts.count >= 3 else { throw RTPParseError("SDP line \(number + 1) '\(line)': expected c=IN IP4 ADDRESS") }
                result.connectionAddress = String(parts[2].split(separator: "/").first ?? parts[2])
            case "m":
                try finish()
                rtpmaps = [:]
                explicitRTCP = nil
                let parts = value.split(separator: " ")
                guard parts.count >= 4, let port = UInt16(parts[1].split(separator: "/")[0]), let pt = UInt8(parts[3]), pt < 128 else {
                    throw RTPParseError("SDP line \(number + 1) '\(line)': expected m=KIND PORT RTP/AVP PAYLOADTYPE")
                }
                let (rtcp, overflow) = port.addingReportingOverflow(1)
                current = Media(kind: String(parts[0]), port: port, payloadType: pt, encoding: "", clockRate: 0, channels: nil,
                                rtcpPort: overflow ? port : rtcp)
                secure = parts[2].hasPrefix("RTP/SAVP")
            case "a" where current != nil:
                if value.hasPrefix("rtpmap:") {
                    // a=rtpmap:PT NAME/CLOCK[/CHANNELS]
                    let body = value.dropFirst(7).split(separator: " ", maxSplits: 1)
                    guard body.count == 2, let pt = UInt8(body[0]) else { throw RTPParseError("SDP line \(number + 1) '\(line)': bad rtpmap") }
                    let enc = body[1].split(separator: "/")
                    guard enc.count >= 2, let clock = Int(enc[1]), clock > 0 else { throw RTPParseError("SDP line \(number + 1) '\(line)': bad rtpmap clock") }
                    rtpmaps[pt] = (String(enc[0]), clock, enc.count > 2 ? Int(enc[2]) : nil)
                } else if value.hasPrefix("rtcp:") {
                    guard let port = UInt16(value.dropFirst(5).split(separator: " ")[0]) else {
                        throw RTPParseError("SDP line \(number + 1) '\(line)': bad rtcp port")
                    }
                    explicitRTCP = port
                } else if value.hasPrefix("extmap:") {
                    // a=extmap:ID[/direction] URI [attributes] (RFC 8285 §8)
                    let body = value.dropFirst(7).split(separator: " ")
                    guard body.count >= 2, let id = UInt8(body[0].split(separator: "/")[0]), id >= 1 else {
                        throw RTPParseError("SDP line \(number + 1) '\(line)': bad extmap")
                    }
                    if body[1] == TransportWideSequence.uri { current?.transportSequenceID = id }
                } else if value.hasPrefix("crypto:"), current?.crypto == nil {
                    do { current?.crypto = try SDESCrypto.parse(value.dropFirst(7)) } catch let error as RTPParseError {
                        throw RTPParseError("SDP line \(number + 1): \(error.description)")
                    }
                }
            default:
                break
            }
        }
        try finish()
        return result
    }
}
