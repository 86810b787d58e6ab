import Events
import Room
import Transport
import RoomEvents

// The events only `serve` prints: the relay started, its stats every second, its summary, and
// who subscribed to whom in its rooms. They live here, next to RelayServer, which emits them; the
// peer and substream events it shares with the room clients are in Room (RoomEvents.swift).

/// `started`: the relay listens (`receive_buffer`/`send_buffer`: the socket buffers it got).
public struct RelayStarted: BroadcastEvent, Equatable {
    /// HOST:PORT.
    public var listen: String
    public var protocolVersion: Int
    public var receiveBuffer: Int
    public var sendBuffer: Int
    /// "tokens" (a room token is needed to join) or "open" (anyone joins any room).
    public var access: String
    /// The DTLS certificate's SHA-256 (`sha256:…`; stable across restarts with `--cert-file`).
    public var fingerprint: String? = nil

    public var name: String { "started" }
    public var fields: [String: JSONValue] {
        var f: [String: JSONValue] = ["listen": .string(listen), "protocol_version": .int(protocolVersion),
                                      "receive_buffer": .int(receiveBuffer), "send_buffer": .int(sendBuffer), "access": .string(access)]
        if let fingerprint { f["fingerprint"] = .string(fingerprint) }
        return f
    }
    /// What an admin needs: where it listens, who may enter, the certificate peers pin, and
    /// how presenters and browsers reach a room.
    public var humanText: String {
        "relay listening on \(listen) (protocol v\(protocolVersion)); "
            + (access == "open" ? "OPEN: anyone who reaches it joins any room" : "rooms need a token (`screenshare token`)")
            + "\n  certificate: \(fingerprint ?? "-") (presenters and viewers pin it with --fingerprint)"
            + "\n  presenters: screenshare start --room NAME --server HOST:\(listen.split(separator: ":").last ?? "7600")"
            + (access == "open" ? "" : " --token T")
            + "\n  browsers: http://HOST:\(listen.split(separator: ":").last ?? "7600")/NAME" + (access == "open" ? "" : "#token=VIEWER_TOKEN")
    }
}

/// `stats`, every second: the last second's traffic (counts since the last stats), and totals
/// for `rejected`, `unknown_source` and `lost_in`.
public struct RelayStats: BroadcastEvent, Equatable {
    public var rooms: Int
    /// All peers, browsers among them.
    public var peers: Int
    /// Peers watching in a browser (WHEP).
    public var browsers: Int
    public var packetsIn: Int
    public var packetsOut: Int
    public var kbpsOut: Int
    public var retransmitted: Int
    public var keyframeRequests: Int
    public var rejected: Int
    public var unknownSource: Int
    public var sendErrors: Int
    public var lostIn: Int
    /// Viewers whose links carry only the base layer, now; layer switches in the last second.
    public var viewersOnBaseLayer = 0
    public var layerSwitches = 0
    /// Each viewer that gets fewer layers, now: "ROOM/PEER-ID" → `base` or `keyframes`.
    public var viewerLayers: [String: String] = [:]
    /// FEC packets sent to browsers (RED + ULPFEC) in the last second.
    public var fecOut = 0
    /// Packets viewers asked for in the last second that were not resent (for any reason:
    /// `stopped` says which).
    public var resendsNotSent = 0
    /// Each Janus server fed (`--janus`), in order: its mountpoints now, and in the last second
    /// the packets and kbit/s sent there and the keyframe requests its viewers sent back, and
    /// the browsers sent there since the start.
    public var janus: [JanusStats] = []

    public struct JanusStats: Equatable, Sendable {
        public var server: String
        public var mountpoints: Int
        public var packets: Int
        public var kbps: Int
        public var keyframeRequests: Int
        /// Browsers the relay's page sent there, since the start.
        public var browsersSent: Int
        public init(server: String, mountpoints: Int, packets: Int, kbps: Int, keyframeRequests: Int, browsersSent: Int) {
            self.server = server
            self.mountpoints = mountpoints
            self.packets = packets
            self.kbps = kbps
            self.keyframeRequests = keyframeRequests
            self.browsersSent = browsersSent
        }
    }

    public var name: String { "stats" }
    public var fields: [String: JSONValue] {
        ["rooms": .int(rooms), "peers": .int(peers), "browsers": .int(browsers), "packets_in": .int(packetsIn), "packets_out": .int(packetsOut),
         "kbps_out": .int(kbpsOut), "retransmitted": .int(retransmitted), "keyframe_requests": .int(keyframeRequests),
         "rejected": .int(rejected), "unknown_source": .int(unknownSource), "send_errors": .int(sendErrors), "lost_in": .int(lostIn),
         "viewers_base_layer": .int(viewersOnBaseLayer), "layer_switches": .int(layerSwitches),
         "viewer_layers": .object(viewerLayers.mapValues { .string($0) }), "fec_out": .int(fecOut),
         "resends_not_sent": .int(resendsNotSent)]
            .merging(janus.isEmpty ? [:] : ["janus": .array(janus.map {
                .object(["server": .string($0.server), "mountpoints": .int($0.mountpoints), "packets": .int($0.packets), "kbps": .int($0.kbps),
                         "keyframe_requests": .int($0.keyframeRequests), "browsers_sent": .int($0.browsersSent)])
            })]) { a, _ in a }
    }
    public var humanText: String {
        "\(rooms) rooms  \(peers) peers (\(browsers) in browsers)  \(packetsIn) pkt/s in  \(packetsOut) pkt/s out  \(kbpsOut) kbps out"
    }
}

/// `stopped`: the relay's totals.
public struct RelayStopped: BroadcastEvent, Equatable {
    public var rtpIn: Int
    public var rtpForwarded: Int
    public var bytesForwarded: Int
    public var rtcpIn: Int
    public var controlIn: Int
    public var retransmitted: Int
    public var keyframeRequests: Int
    public var rejected: Int
    public var unknownSource: Int
    public var timeouts: Int
    public var sendErrors: Int
    public var lostIn: Int
    public var durationSeconds: Double
    /// Transport feedback from viewers, and the layer switches it led to.
    public var viewerFeedbacks = 0
    public var layerSwitches = 0
    /// Presenters' FEC packets, and the packets lost on their way in that the relay recovered.
    public var fecIn = 0
    public var fecRecovered = 0
    /// NACKs sent presenters for what their uplinks lost.
    public var uplinkNacks = 0
    /// FEC packets sent to browsers.
    public var fecOut = 0
    /// Packets viewers asked for that were not resent, by why (``RelayCounters``), and packets
    /// asked for again and again, each answered with a keyframe request.
    public var resendsTooSoon = 0
    public var resendsOverBudget = 0
    public var resendsGone = 0
    public var resendsUnmapped = 0
    public var lostForGood = 0

    public var name: String { "stopped" }
    public var fields: [String: JSONValue] {
        ["rtp_in": .int(rtpIn), "rtp_forwarded": .int(rtpForwarded), "bytes_forwarded": .int(bytesForwarded),
         "rtcp_in": .int(rtcpIn), "control_in": .int(controlIn), "retransmitted": .int(retransmitted),
         "keyframe_requests": .int(keyframeRequests), "rejected": .int(rejected), "unknown_source": .int(unknownSource),
         "timeouts": .int(timeouts), "send_errors": .int(sendErrors), "lost_in": .int(lostIn),
         "duration_s": .double(durationSeconds), "viewer_feedbacks": .int(viewerFeedbacks), "layer_switches": .int(layerSwitches),
         "fec_in": .int(fecIn), "fec_recovered": .int(fecRecovered), "uplink_nacks": .int(uplinkNacks), "fec_out": .int(fecOut),
         "resends_not_sent": .object(["too_soon": .int(resendsTooSoon), "over_budget": .int(resendsOverBudget),
                                      "gone": .int(resendsGone), "unmapped": .int(resendsUnmapped)]),
         "lost_for_good": .int(lostForGood)]
    }
    public var humanText: String { "relay stopped: \(rtpForwarded) packets forwarded, \(rejected) rejected" }
}

/// `subscribed`: in `room`, `viewer` receives `publisher`'s streams of `kinds`.
public struct RelaySubscribed: BroadcastEvent, Equatable {
    public var room: String
    public var viewer: UInt32
    public var publisher: UInt32
    public var kinds: [StreamKind]

    public var name: String { "subscribed" }
    public var fields: [String: JSONValue] {
        ["room": .string(room), "viewer": .int(Int(viewer)), "publisher": .int(Int(publisher)),
         "kinds": .array(kinds.map { .string($0.rawValue) })]
    }
    /// (The relay does not name the publisher here: "-", as the line has always read.)
    public var humanText: String { "watching - (peer \(publisher))" }
}

/// `unsubscribed`: in `room`, `viewer` no longer receives `publisher`.
public struct RelayUnsubscribed: BroadcastEvent, Equatable {
    public var room: String
    public var viewer: UInt32
    public var publisher: UInt32

    public var name: String { "unsubscribed" }
    public var fields: [String: JSONValue] {
        ["room": .string(room), "viewer": .int(Int(viewer)), "publisher": .int(Int(publisher))]
    }
    public var humanText: String { "no longer watching peer \(publisher)" }
}

/// `janus_mountpoint`: a Janus server's mountpoint for a screen shared in a room was `created`,
/// `lost` (the server stopped answering or restarted), `recreated`, or `removed`. Neither the
/// pin nor the secret is in it.
public struct JanusMountpointEvent: BroadcastEvent, Equatable {
    /// The server's URL, as `--janus` gave it.
    public var server: String
    public var room: String
    public var presenter: String
    public var id: UInt64
    public var state: String

    public var name: String { "janus_mountpoint" }
    public var fields: [String: JSONValue] {
        ["server": .string(server), "room": .string(room), "presenter": .string(presenter), "id": .int(Int(truncatingIfNeeded: id)),
         "state": .string(state)]
    }
    public var humanText: String { "Janus \(server): mountpoint \(id) for \(presenter)'s screen in room \(room) \(state)" }
}
