/// A browser's SDP offer (RFC 8866, JSEP RFC 8829) as WHEP (RFC 9725) carries it, read for what
/// the relay needs to answer: per media section its mid, the payload type the browser gave VP8
/// or Opus (and what feedback it accepts), and the session's ICE credentials and DTLS
/// fingerprint. Everything else is ignored, as JSEP allows.
///
/// Input is hostile until proven otherwise: bounded in size and lines, every field checked, and
/// each refusal names what is missing or wrong (it becomes the 4xx body).
public struct SDPOffer: Sendable, Equatable {
    public struct Media: Sendable, Equatable {
        public var kind: String
        public var mid: String
        /// The payload types on the m= line, in the browser's order of preference.
        public var payloadTypes: [UInt8]
        /// rtpmap: payload type → "NAME/CLOCK[/CHANNELS]" as written.
        public var encodings: [UInt8: String]
        /// fmtp: payload type → parameters.
        public var formats: [UInt8: String]
        /// rtcp-fb: payload type → the feedback it accepts ("nack", "nack pli", "ccm fir", …).
        public var feedback: [UInt8: [String]]
        public var direction: String
        public var rtcpMux: Bool
        /// extmap (RFC 8285): extension URI → the ID the browser gave it (1–14, the one-byte
        /// form; others are not kept). At most 16.
        public var extensions: [String: UInt8] = [:]
        /// Media-level ICE credentials and fingerprint (when not at session level).
        var iceUfrag: String?
        var icePassword: String?
        var fingerprint: Fingerprint?
        var setup: String?

        /// The first payload type (in preference order) whose encoding is `name` at `clock`
        /// Hz (and a plain one: no RTX, RED or FEC wrapper).
        public func payloadType(for name: String, clock: Int) -> UInt8? {
            payloadTypes.first { pt in
                guard let enc = encodings[pt] else { return false }
                let parts = enc.split(separator: "/")
                return parts.count >= 2 && parts[0].lowercased() == name.lowercased() && Int(parts[1]) == clock
            }
        }
    }

    /// A DTLS certificate fingerprint (RFC 8122): the hash function and its bytes.
    public struct Fingerprint: Sendable, Equatable {
        public var algorithm: String
        public var bytes: [UInt8]

        public init(algorithm: String, bytes: [UInt8]) {
            self.algorithm = algorithm
            self.bytes = bytes
        }

        /// "sha-256 AB:CD:…", as the attribute's value.
        public var attributeValue: String {
            "\(algorithm) " + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined(separator: ":")
        }

        /// Of several a=fingerprint lines (RFC 8122 allows one per hash; aiortc sends SHA-256,
        /// -384 and -512), the SHA-256 one; else the first.
        static func prefer(_ old: Fingerprint?, _ new: Fingerprint) -> Fingerprint {
            guard let old else { return new }
            return old.algorithm != "sha-256" && new.algorithm == "sha-256" ? new : old
        }

        init(parsing value: Substring) throws {
            let parts = value.split(separator: " ", omittingEmptySubsequences: true)
            guard parts.count == 2 else { throw SDPError("a=fingerprint '\(value.prefix(120))' is not 'HASH HEX:HEX:…'") }
            algorithm = parts[0].lowercased()
            let hex = parts[1].split(separator: ":")
            guard (16...64).contains(hex.count) else { throw SDPError("a=fingerprint has \(hex.count) bytes") }
            bytes = try hex.map {
                guard $0.count == 2, let b = UInt8($0, radix: 16) else { throw SDPError("a=fingerprint has '\($0.prefix(8))', not a hex byte") }
                return b
            }
        }
    }

    /// Offers larger than this are refused (a real one is 3–8 kB).
    public static let maxSize = 64 * 1024
    public static let maxMedia = 16

    public var media: [Media]
    public var bundle: [String]
    public var iceUfrag: String
    public var icePassword: String
    public var fingerprint: Fingerprint
    /// The offer's a=setup (actpass, active or passive).
    public var setup: String

    /// Parses an offer.
    /// - Throws: `SDPError` saying what is wrong or missing.
    public init(parsing text: String) throws {
        guard text.utf8.count <= Self.maxSize else { throw SDPError("the offer is \(text.utf8.count) bytes (at most \(Self.maxSize))") }
        var media: [Media] = []
        var session: (ufrag: String?, pwd: String?, fingerprint: Fingerprint?, setup: String?) = (nil, nil, nil, nil)
        var bundle: [String] = []
        var sawVersion = false
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline) {
            let line = Substring(raw)
            guard line.count >= 2, line[line.index(after: line.startIndex)] == "=" else {
                throw SDPError("line '\(line.prefix(80))' is not TYPE=VALUE")
            }
            let type = line.first!, value = line.dropFirst(2)
            switch type {
            case "v":
                guard value == "0" else { throw SDPError("v=\(value.prefix(10)): only version 0 exists") }
                sawVersion = true
            case "m":
                guard media.count < Self.maxMedia else { throw SDPError("more than \(Self.maxMedia) media sections") }
                let parts = value.split(separator: " ")
                guard parts.count >= 3 else { throw SDPError("m=\(value.prefix(80)) is not 'KIND PORT PROTO FORMATS'") }
                let pts = try parts.dropFirst(3).map {
                    guard let pt = UInt8($0), pt < 128 else { throw SDPError("m=\(parts[0]) payload type '\($0.prefix(8))' is not 0–127") }
                    return pt
                }
                media.append(Media(kind: String(parts[0]), mid: "", payloadTypes: pts, encodings: [:], formats: [:], feedback: [:],
                                   direction: "sendrecv", rtcpMux: false))
            case "a":
                let (name, attr) = Self.split(value)
                if media.isEmpty {
                    switch name {
                    case "group":
                        let parts = attr.split(separator: " ")
                        if parts.first == "BUNDLE" { bundle = parts.dropFirst().map(String.init) }
                    case "ice-ufrag": session.ufrag = String(attr)
                    case "ice-pwd": session.pwd = String(attr)
                    case "fingerprint": session.fingerprint = Fingerprint.prefer(session.fingerprint, try Fingerprint(parsing: attr))
                    case "setup": session.setup = String(attr)
                    default: break
                    }
                } else {
                    try Self.read(name, attr, into: &media[media.count - 1])
                }
            default:
                break  // o=, s=, t=, c=, b= …: nothing the answer depends on.
            }
        }
        guard sawVersion else { throw SDPError("no v=0 line: not an SDP offer") }
        guard !media.isEmpty else { throw SDPError("no media sections (m=)") }
        for m in media where m.mid.isEmpty { throw SDPError("m=\(m.kind) has no a=mid (BUNDLE needs one)") }
        let first = media[0]
        guard let ufrag = first.iceUfrag ?? session.ufrag, let pwd = first.icePassword ?? session.pwd else {
            throw SDPError("no a=ice-ufrag and a=ice-pwd")
        }
        guard (4...256).contains(ufrag.count), (22...256).contains(pwd.count) else {
            throw SDPError("a=ice-ufrag is 4–256 characters and a=ice-pwd 22–256 (RFC 8839)")
        }
        guard let fingerprint = first.fingerprint ?? session.fingerprint else { throw SDPError("no a=fingerprint: DTLS needs it") }
        guard fingerprint.algorithm == "sha-256" else {
            throw SDPError("a=fingerprint uses \(fingerprint.algorithm.prefix(16)); sha-256 is what browsers and this relay use")
        }
        self.media = media
        self.bundle = bundle
        iceUfrag = ufrag
        icePassword = pwd
        self.fingerprint = fingerprint
        setup = first.setup ?? session.setup ?? "actpass"
    }

    private static func read(_ name: Substring, _ attr: Substring, into m: inout Media) throws {
        func ptAndRest() throws -> (UInt8, Substring) {
            let space = attr.firstIndex(of: " ") ?? attr.endIndex
            guard let pt = UInt8(attr[..<space]), pt < 128 else { throw SDPError("a=\(name):\(attr.prefix(40)) has no payload type") }
            return (pt, attr[space...].drop { $0 == " " })
        }
        switch name {
        case "mid":
            guard (1...32).contains(attr.count) else { throw SDPError("a=mid is 1–32 characters") }
            m.mid = String(attr)
        case "rtpmap":
            let (pt, rest) = try ptAndRest()
            m.encodings[pt] = String(rest.prefix(64))
        case "fmtp":
            let (pt, rest) = try ptAndRest()
            m.formats[pt] = String(rest.prefix(256))
        case "rtcp-fb":
            if attr.hasPrefix("* ") { return }
            let (pt, rest) = try ptAndRest()
            if m.feedback[pt, default: []].count < 16 { m.feedback[pt, default: []].append(String(rest.prefix(32))) }
        case "extmap":
            // "ID[/direction] URI [attributes]"
            let parts = attr.split(separator: " ")
            guard parts.count >= 2, let id = UInt8(parts[0].prefix(while: { $0 != "/" })), (1...14).contains(id) else { return }
            if m.extensions.count < 16 { m.extensions[String(parts[1].prefix(128))] = id }
        case "sendrecv", "sendonly", "recvonly", "inactive": m.direction = String(name)
        case "rtcp-mux": m.rtcpMux = true
        case "ice-ufrag": m.iceUfrag = String(attr)
        case "ice-pwd": m.icePassword = String(attr)
        case "fingerprint": m.fingerprint = Fingerprint.prefer(m.fingerprint, try Fingerprint(parsing: attr))
        case "setup": m.setup = String(attr)
        default: break
        }
    }

    /// "name:value" → (name, value); "flag" → (flag, "").
    private static func split(_ value: Substring) -> (Substring, Substring) {
        guard let colon = value.firstIndex(of: ":") else { return (value, "") }
        return (value[..<colon], value[value.index(after: colon)...])
    }
}

/// What the relay answers a WHEP offer with: sendonly VP8 and Opus in the browser's payload
/// types, ICE-lite with its one host candidate, DTLS passive (the browser connects), BUNDLE and
/// rtcp-mux required.
public struct WHEPAnswer: Sendable {
    /// A media section of the answer.
    public struct Media: Sendable, Equatable {
        public var kind: String
        public var mid: String
        /// The payload type the browser gave this codec; nil: the section is refused (port 0).
        public var payloadType: UInt8?
        public var encoding: String
        public var fmtp: String?
        public var feedback: [String]
        public var ssrc: UInt32
        /// The transport-wide sequence number's extension ID in the browser's offer, when it
        /// offered it (then it sends transport feedback: the relay estimates its link).
        public var transportSequenceID: UInt8?
        /// The payload types the browser offered for RED and ULPFEC (both, or neither), when
        /// the relay may send it FEC: it answers them (``REDProtection``).
        public var redPT: UInt8?
        public var ulpfecPT: UInt8?
    }

    public var media: [Media]
    public let offer: SDPOffer
    /// draft-holmer-rmcat-transport-wide-cc-extensions-01's URI.
    public static let transportSequenceURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"

    /// Chooses, per media section of the offer, what to send: VP8 for video, Opus for audio;
    /// with `fec`, also RED and ULPFEC for video when the browser offered both (Chromium and
    /// Firefox do).
    /// - Throws: `SDPError` when the browser cannot receive VP8 video or Opus audio, or would
    ///   not receive at all, naming what is missing.
    public init(offer: SDPOffer, videoSSRC: UInt32, audioSSRC: UInt32, fec: Bool = false) throws {
        self.offer = offer
        var media: [Media] = []
        var haveVideo = false, haveAudio = false
        for m in offer.media {
            var answer = Media(kind: m.kind, mid: m.mid, payloadType: nil, encoding: "", fmtp: nil, feedback: [], ssrc: 0)
            let wants = m.direction == "recvonly" || m.direction == "sendrecv"
            switch m.kind {
            case "video" where wants && !haveVideo:
                guard let pt = m.payloadType(for: "VP8", clock: 90_000) else {
                    throw SDPError("the offer's video (mid \(m.mid)) has no VP8/90000: this relay forwards VP8 (no re-encoding)")
                }
                answer.payloadType = pt
                answer.encoding = "VP8/90000"
                let accepted = Set(m.feedback[pt] ?? [])
                // transport-cc with its header extension (the relay forwards the presenter's
                // numbers; the browser's feedback on them is its link's estimate), not without.
                answer.transportSequenceID = m.extensions[Self.transportSequenceURI]
                answer.feedback = ["nack", "nack pli", "ccm fir", "goog-remb", "transport-cc"].filter {
                    accepted.contains($0) && ($0 != "transport-cc" || answer.transportSequenceID != nil)
                }
                answer.ssrc = videoSSRC
                if fec, let red = m.payloadType(for: "red", clock: 90_000), let ulpfec = m.payloadType(for: "ulpfec", clock: 90_000) {
                    answer.redPT = red
                    answer.ulpfecPT = ulpfec
                }
                haveVideo = true
            case "audio" where wants && !haveAudio:
                guard let pt = m.payloadType(for: "opus", clock: 48_000) else {
                    throw SDPError("the offer's audio (mid \(m.mid)) has no opus/48000/2: this relay forwards Opus")
                }
                answer.payloadType = pt
                answer.encoding = "opus/48000/2"
                answer.fmtp = "minptime=10;useinbandfec=1"
                answer.ssrc = audioSSRC
                haveAudio = true
            default:
                break
            }
            if answer.payloadType != nil && !m.rtcpMux {
                throw SDPError("m=\(m.kind) (mid \(m.mid)) without a=rtcp-mux: RTP and RTCP share one port here")
            }
            media.append(answer)
        }
        guard haveVideo else { throw SDPError("the offer receives no video: add a recvonly video transceiver (VP8)") }
        for m in media where m.payloadType != nil && !offer.bundle.contains(m.mid) {
            throw SDPError("mid \(m.mid) is not in the offer's BUNDLE group: everything shares one port here")
        }
        self.media = media
    }

    /// The answer's text.
    /// - Parameters:
    ///   - iceUfrag, icePassword: this session's ICE credentials.
    ///   - fingerprint: the relay's DTLS certificate (sha-256).
    ///   - host, port: the relay's one candidate (ICE-lite).
    ///   - cname: the RTCP CNAME, as the presenter's streams carry it.
    public func render(iceUfrag: String, icePassword: String, fingerprint: SDPOffer.Fingerprint, host: String, port: UInt16,
                       cname: String, sessionID: UInt64) -> String {
        let family = host.contains(":") ? "IP6" : "IP4"
        var lines = [
            "v=0", "o=- \(sessionID) 1 IN \(family) \(host)", "s=screenshare", "t=0 0",
            "a=group:BUNDLE " + media.filter { $0.payloadType != nil }.map(\.mid).joined(separator: " "),
            "a=ice-lite", "a=msid-semantic: WMS screenshare",
        ]
        for m in media {
            guard let pt = m.payloadType else {
                lines += ["m=\(m.kind) 0 UDP/TLS/RTP/SAVPF 0", "c=IN \(family) \(host)", "a=mid:\(m.mid)", "a=inactive"]
                continue
            }
            let fec = m.redPT.flatMap { red in m.ulpfecPT.map { (red, $0) } }
            lines += [
                "m=\(m.kind) \(port) UDP/TLS/RTP/SAVPF \(pt)" + (fec.map { " \($0.0) \($0.1)" } ?? ""), "c=IN \(family) \(host)",
                "a=ice-ufrag:\(iceUfrag)", "a=ice-pwd:\(icePassword)", "a=fingerprint:\(fingerprint.attributeValue)",
                "a=setup:passive", "a=mid:\(m.mid)", "a=sendonly", "a=rtcp-mux", "a=rtpmap:\(pt) \(m.encoding)",
            ]
            if let fmtp = m.fmtp { lines.append("a=fmtp:\(pt) \(fmtp)") }
            if let (red, ulpfec) = fec { lines += ["a=rtpmap:\(red) red/90000", "a=rtpmap:\(ulpfec) ulpfec/90000"] }
            if let id = m.transportSequenceID { lines.append("a=extmap:\(id) \(Self.transportSequenceURI)") }
            lines += m.feedback.map { "a=rtcp-fb:\(pt) \($0)" }
            lines += ["a=ssrc:\(m.ssrc) cname:\(cname)", "a=msid:screenshare \(m.kind)",
                      "a=candidate:1 1 udp 2130706431 \(host) \(port) typ host", "a=end-of-candidates"]
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}

/// An offer the relay cannot answer, with why (the WHEP 4xx body).
public struct SDPError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
