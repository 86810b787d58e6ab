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
            "m=video \(videoPort) RTP/AVP \(videoPayloadType)",
            "a=rtpmap:\(videoPayloadType) VP8/90000",
            "a=rtcp:\(Int(videoPort) + 1)",
        ]
        if let framerate { lines.append("a=framerate:\(framerate)") }
        lines.append("a=content:slides")
        lines.append("a=recvonly")
        if let audioPort {
            lines += [
                "m=audio \(audioPort) RTP/AVP \(audioPayloadType)",
                "a=rtpmap:\(audioPayloadType) opus/48000/2",
                "a=fmtp:\(audioPayloadType) minptime=10;useinbandfec=1",
                "a=rtcp:\(Int(audioPort) + 1)",
                "a=recvonly",
            ]
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
