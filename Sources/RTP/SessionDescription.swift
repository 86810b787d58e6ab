/// A session description (SDP, RFC 8866) for receiving the plain-RTP stream with ffmpeg,
/// ffplay, GStreamer or VLC.
public struct SessionDescription: Sendable, Equatable {
    public var destination: String
    public var videoPort: UInt16
    public var videoPayloadType: UInt8
    public var framerate: Int?
    public var sessionID: UInt64

    public init(destination: String, videoPort: UInt16, videoPayloadType: UInt8 = 96, framerate: Int? = nil, sessionID: UInt64 = 0) {
        self.destination = destination
        self.videoPort = videoPort
        self.videoPayloadType = videoPayloadType
        self.framerate = framerate
        self.sessionID = sessionID
    }

    /// The text, with CRLF line ends. `a=content:slides` (RFC 4796) marks the screen substream.
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
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
