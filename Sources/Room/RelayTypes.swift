import MediaCore
import Basics
import NetworkAddress

/// Bounds on what one relay keeps, so memory stays bounded whatever peers send.
public struct RelayLimits: Sendable {
    public var maxRooms = 1000
    /// An assembly: a thousand browsers from one relay (issue 43), with room to spare. About
    /// 100 kB of the relay's memory each.
    public var maxPeersPerRoom = 2000
    public var maxStreamsPerPeer = 4
    public var maxSubscriptionsPerPeer = 16
    public var maxNameLength = 64
    /// Error replies per second, all peers together (an error is never an amplifier).
    public var maxErrorsPerSecond = 100
    /// Error replies per second to one address.
    public var maxErrorsPerAddressPerSecond = 10
    /// Joins per second into one room (a flood of joins is refused with `limit`): above an
    /// assembly of 300 opening the link as the bell rings (`Scripts/bench-class`).
    public var maxJoinsPerRoomPerSecond = 1000
    /// Packets kept per video stream to answer NACKs (power of two).
    public var videoHistory = 1024
    public var audioHistory = 64
    public init() {}
}

/// A room as the relay's directory shows it.
public struct RoomSummary: Sendable, Equatable {
    public let name: String
    /// The peers sharing a screen, in the order they joined (a browser without `?from=` watches the first).
    public let presenters: [String]
    public let peers: Int
    public let browsers: Int
    public init(name: String, presenters: [String], peers: Int, browsers: Int) {
        self.name = name
        self.presenters = presenters
        self.peers = peers
        self.browsers = browsers
    }
}

/// What the relay reports as it goes.
public enum RelayEvent: Sendable, Equatable {
    case peerJoined(room: String, peer: PeerInfo, address: PeerAddress)
    case peerLeft(room: String, peer: PeerInfo, reason: String)
    case substreamStarted(room: String, peer: UInt32, stream: StreamInfo)
    case substreamStopped(room: String, peer: UInt32, stream: StreamInfo)
    case subscribed(room: String, viewer: UInt32, publisher: UInt32, kinds: [StreamKind])
    case unsubscribed(room: String, viewer: UInt32, publisher: UInt32)
    /// A datagram was dropped: malformed, unknown type, wrong version, from a stranger.
    case rejected(address: PeerAddress, reason: String)
}

/// Counters for stats events and tests.
public struct RelayCounters: Sendable, Equatable {
    public var rtpIn = 0
    public var rtpForwarded = 0
    public var bytesForwarded = 0
    public var rtcpIn = 0
    public var controlIn = 0
    public var retransmitted = 0
    /// Packets viewers asked for that were not resent, by why: resent already within the
    /// round trip; over the viewer's resend budget (its link is full); gone from the 2 s
    /// history; or not mapped back to the presenter's numbering (across a layer switch).
    public var resendsTooSoon = 0
    public var resendsOverBudget = 0
    public var resendsGone = 0
    public var resendsUnmapped = 0
    public var retransmitMissed: Int { resendsTooSoon + resendsOverBudget + resendsGone + resendsUnmapped }
    public var keyframeRequests = 0
    /// Packets a viewer asked for again and again (``ResendWatch``): taken for lost for good,
    /// each answered with a keyframe request.
    public var lostForGood = 0
    /// Malformed or unexpected datagrams (bad control messages, RTP of unpublished SSRCs…).
    public var rejected = 0
    /// Datagrams from addresses that are not in any room.
    public var unknownSource = 0
    public var errorsSent = 0
    /// Joins and publishes refused for want of a valid token (`unauthorized`).
    public var unauthorized = 0
    /// `retry` answers: joins that came without a valid cookie.
    public var retriesSent = 0
    /// Replies not sent to an address that has not proven it receives (larger than what it sent).
    public var repliesWithheld = 0
    public var timeouts = 0
    /// Transport feedback sent to presenters (their congestion control).
    public var transportFeedbacks = 0
    /// FEC packets from presenters, and the packets of theirs the relay recovered with them
    /// (lost on the way in; forwarded as if they had arrived).
    public var fecIn = 0
    public var fecRecovered = 0
    /// NACKs the relay sent presenters for packets their uplinks lost.
    public var uplinkNacks = 0
    /// Transport feedback from viewers (their downlinks' estimates), and the layer switches
    /// it led to (down to the base layer, or up to all).
    public var viewerFeedbacks = 0
    public var layerSwitches = 0
    public init() {}
}
