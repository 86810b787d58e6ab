import RTP
import MediaCore
import Basics
import RTPSession
import NetworkAddress

final class RoomState {
    let name: String
    var version: UInt64 = 0
    var peers: [UInt32: PeerState] = [:]
    /// Join order, for snapshots.
    var order: [UInt32] = []
    var streams: [UInt32: StreamState] = [:]
    init(name: String) { self.name = name }

    func snapshot() -> [PeerInfo] { order.compactMap { peers[$0]?.info } }

    func subscriberIDs(of publisher: PeerState) -> [UInt32] {
        var ids = Set<UInt32>()
        for s in publisher.streams { for sub in streams[s.ssrc]?.subscribers ?? [] { ids.insert(sub.peer.id) } }
        return ids.sorted()
    }
}

final class PeerState {
    let id: UInt32
    let name: String
    let role: String
    let address: PeerAddress
    unowned let room: RoomState
    var lastHeard: UInt64
    var streams: [StreamInfo] = []
    /// A viewer that speaks no room protocol (a browser over WHEP): it never times out, and it
    /// follows a presenter by name (`follows`) or the first one sharing a screen.
    var external = false
    /// What an external viewer is (`browser`, or `janus` for a Janus mountpoint the relay
    /// feeds), as `peer_joined` says; nil for our own peers.
    var client: String?
    /// Whether its REMB caps what its presenter sends (a Janus mountpoint with `--janus-remb`;
    /// never a browser: one slow viewer must not slow the room).
    var capsWithREMB = false
    var follows: String?
    /// Whether its token lets it publish (always on an open relay; never for browsers).
    var canPublish = true
    /// What this peer asked to receive: publisher id → kinds (kept across the publisher's
    /// stream restarts).
    var subscriptions: [UInt32: Set<StreamKind>] = [:]
    /// A presenter whose RTP carries the transport-wide sequence number: its arrivals, for the
    /// transport feedback the relay sends it (made with its first such packet).
    var transportFeedback: TransportFeedbackRecorder?

    init(id: UInt32, name: String, role: String, address: PeerAddress, room: RoomState, now: UInt64) {
        self.id = id
        self.name = name
        self.role = role
        self.address = address
        self.room = room
        lastHeard = now
    }

    var info: PeerInfo { PeerInfo(id: id, name: name, role: role, streams: streams, client: client) }
}

struct Subscriber {
    unowned let peer: PeerState
    let address: PeerAddress
    var fractionLost = 0.0
    var rttNanos: UInt64?
    /// Its link's estimate and the layers it gets, once it sends transport feedback.
    var downlink: ViewerDownlink?
    /// The packets it asks for again and again.
    var resends = ResendWatch()
    init(peer: PeerState) {
        self.peer = peer
        address = peer.address
    }
}

/// The packets one viewer asks for again and again: a packet asked for a fourth time, 300 ms or
/// more after the first, will not get through this way — resent (something on the path drops it
/// every time: a resend has the same number), over its link's resend budget every time, or
/// gone from the history (a browser keeps asking for 3 s). Its frame, and every frame after it,
/// wait for a keyframe; a browser asks for one itself only after 3 s without a picture
/// (libwebrtc's wait for a decodable frame), so the relay asks the presenter then, once per
/// packet. Eight packets are watched, the oldest forgotten first: nothing grows.
struct ResendWatch {
    private struct Entry {
        var sequence: UInt16 = 0
        var asks: UInt8 = 0
        var firstAsked: UInt64 = 0
        var given = false
    }
    /// Made once with the subscriber (eight entries); changed in place.
    private var entries = [Entry](repeating: Entry(), count: 8)
    private var next = 0
    /// Resends of one packet after which it is taken for lost for good.
    static let asksBeforeKeyframe: UInt8 = 4
    /// ...if the first was this long before.
    static let spanBeforeKeyframe: UInt64 = 300_000_000

    /// The viewer asked for `sequence` at `now`: true when this makes it lost for good (once per packet).
    mutating func asked(_ sequence: UInt16, now: UInt64) -> Bool {
        guard let i = entries.firstIndex(where: { $0.asks > 0 && $0.sequence == sequence }) else {
            entries[next] = Entry(sequence: sequence, asks: 1, firstAsked: now)
            next = (next + 1) % entries.count
            return false
        }
        if entries[i].asks < UInt8.max { entries[i].asks += 1 }
        guard !entries[i].given, entries[i].asks >= Self.asksBeforeKeyframe, now &- entries[i].firstAsked >= Self.spanBeforeKeyframe else {
            return false
        }
        entries[i].given = true
        return true
    }
}

final class StreamState {
    let info: StreamInfo
    unowned let owner: PeerState
    /// Change with `addSubscriber` and `removeSubscriber(at:)`, which keep `addresses` in step.
    var subscribers: [Subscriber] = []
    /// `subscribers`' addresses in the same order: the fan-out list, handed to the transport
    /// as it is (no array built per packet).
    private(set) var addresses: [PeerAddress] = []
    var history: PacketHistory
    var receive: ReceiveStatistics
    var lastKeyframeRequest: UInt64?
    /// The caps its REMB-capping viewers sent (viewer id → bit/s, when), and when the relay
    /// last passed the lowest to the publisher.
    var rembCaps: [UInt32: (bitsPerSecond: UInt64, at: UInt64)] = [:]
    var lastREMBSent: UInt64?
    var keyframePending = false
    /// Subscribers with a ``ViewerDownlink`` (0: one fan-out for all, nothing parsed per viewer).
    var downlinks = 0
    /// When each packet was forwarded (made with the first downlink), the layers' rates, and
    /// the addresses one packet goes to unchanged (reused).
    lazy var forwardLog = ForwardLog()
    var layerRates = LayerRates()
    var shared: [PeerAddress] = []
    /// The screen's FEC decoder, made when the publisher publishes an FEC stream.
    var fec: ULPFECDecoder?
    /// An FEC stream's screen, set when both are published (nil: its FEC is refused).
    weak var protects: StreamState?
    /// A video stream's holes on the publisher's uplink, asked for again from the publisher
    /// (viewers' NACKs for them find nothing in the history until the resend comes); and the
    /// list each poll fills (reused).
    var uplinkNacks: NackGenerator?
    var uplinkNackList: [UInt16] = []
    /// The last sender reports forwarded: NTP middle 32 bits → wall clock when forwarded.
    private var forwarded: [(middle: UInt32, wall: UInt64)] = Array(repeating: (0, 0), count: 8)
    private var forwardedNext = 0

    init(info: StreamInfo, owner: PeerState, history capacity: Int) {
        self.info = info
        self.owner = owner
        history = PacketHistory(capacity: capacity, maxPacketSize: 1500, maxAge: 2_000_000_000)
        if info.kind == .screen || info.kind == .main {
            // Holes only, found from later packets: no tail probes. A presenter's pacer and send
            // budget may hold the rest of a frame for a while; asking for its next packet then
            // would have it sent twice, on the uplink and to every viewer.
            var c = NackGenerator.Configuration()
            c.tailDelay = nil
            uplinkNacks = NackGenerator(configuration: c)
            uplinkNackList.reserveCapacity(256)
        }
        var config = ReceiveStatistics.Configuration()
        config.clockRate = info.clock
        receive = ReceiveStatistics(ssrc: info.ssrc, configuration: config)
    }

    func keyframeRequestDue(now: UInt64) -> Bool {
        guard let last = lastKeyframeRequest else { return true }
        return now &- last >= RoomProtocol.keyframeRequestIntervalNanos
    }

    func subscriberIndex(_ peer: PeerState) -> Int? { subscribers.firstIndex { $0.peer === peer } }

    func addSubscriber(_ peer: PeerState) {
        subscribers.append(Subscriber(peer: peer))
        addresses.append(peer.address)
    }

    func removeSubscriber(at i: Int) {
        if subscribers[i].downlink != nil { downlinks -= 1 }
        subscribers.remove(at: i)
        addresses.remove(at: i)
    }

    func noteForwardedReport(middle: UInt32, wallNanos: UInt64) {
        forwarded[forwardedNext] = (middle, wallNanos)
        forwardedNext = (forwardedNext + 1) % forwarded.count
    }

    func forwardTime(middle: UInt32) -> UInt64? { forwarded.first { $0.middle == middle && $0.wall != 0 }?.wall }
}
