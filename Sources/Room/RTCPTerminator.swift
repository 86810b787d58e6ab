import RTCP
import RTP
import RTPSession
import FoundationEssentials
import Glibc
import MediaCore
import Basics
import NetworkAddress

/// RTCP terminated per hop: publishers' reports kept and forwarded, viewers' reports, NACKs,
/// transport feedback and keyframe requests answered here; and on the relay's timers, its own
/// RTCP to the publishers (keyframe requests that were held back, transport feedback, receiver
/// reports). What it sends goes to the ``RelayWire`` it is handed.
struct RTCPTerminator {
    /// When the next receiver reports to the publishers are due.
    private var nextReport: UInt64 = 0

    func handle(_ bytes: UnsafeRawBufferPointer, from peer: PeerState, now: UInt64, wallNanos: UInt64, wire: inout RelayWire) {
        guard let packets = try? RTCPPacket.parseCompound(bytes) else { wire.counters.rejected += 1; return }
        let room = peer.room
        var forwardTo: StreamState?
        for packet in packets {
            switch packet {
            case .senderReport(let sr):
                // A publisher's report: kept for our receiver reports, forwarded to its
                // subscribers (with the rest of the compound: SDES, BYE).
                if let stream = room.streams[sr.ssrc], stream.owner === peer {
                    stream.receive.onSenderReport(sr, arrival: now)
                    stream.noteForwardedReport(middle: sr.ntp.middle32, wallNanos: wallNanos)
                    forwardTo = stream
                }
            case .goodbye(let bye):
                if forwardTo == nil, let first = bye.sources.first, let stream = room.streams[first], stream.owner === peer {
                    forwardTo = stream
                }
            case .receiverReport(let rr):
                for block in rr.reports {
                    guard let stream = room.streams[block.ssrc], let i = stream.subscriberIndex(peer) else { continue }
                    var s = stream.subscribers[i]
                    s.fractionLost = Double(block.fractionLost) / 256
                    if block.lastSenderReport != 0, let sent = stream.forwardTime(middle: block.lastSenderReport) {
                        let delay = NTPTimestamp.nanos(fromShort: block.delaySinceLastSenderReport)
                        let elapsed = wallNanos &- sent
                        if wallNanos >= sent, elapsed >= delay { s.rttNanos = elapsed - delay }
                    }
                    stream.subscribers[i] = s
                }
            case .nack(let nack):
                guard let stream = room.streams[nack.mediaSSRC], let i = stream.subscriberIndex(peer) else { continue }
                let downlink = stream.subscribers[i].downlink
                let filter = downlink?.filter
                // A viewer whose link is estimated gets resends within what its link has left.
                let allow: (Int) -> Bool = { downlink?.allowResend($0, now: now) ?? true }
                // A packet asked for again and again will not get through this way: resent
                // (each resend has its number, and something drops that number), over the
                // link's budget every time, or gone from the history. A keyframe will.
                func answered(_ seq: UInt16, _ outcome: PacketHistory.Outcome, wire: inout RelayWire) {
                    switch outcome {
                    case .sent: wire.counters.retransmitted += 1
                    case .tooSoon: wire.counters.resendsTooSoon += 1; return
                    case .unavailable: wire.counters.resendsGone += 1
                    case .overBudget: wire.counters.resendsOverBudget += 1
                    }
                    watch(seq, wire: &wire)
                }
                func watch(_ seq: UInt16, wire: inout RelayWire) {
                    if stream.subscribers[i].resends.asked(seq, now: now) {
                        wire.counters.lostForGood += 1
                        Self.requestKeyframe(stream, now: now, wire: &wire)
                    }
                }
                nack.forEachSequenceNumber { seq in
                    // Each viewer's NackGenerator spaces its own retries, so each request is
                    // answered (no cross-viewer RTT gate). A viewer that was left some layers
                    // names its own numbers: the source's packet goes back under them.
                    guard let filter, filter.isShifted else {
                        let outcome = stream.history.retransmit(sequenceNumber: seq, now: now, rtt: 0, allow: allow) {
                            wire.outbox.send(UnsafeRawBufferPointer($0), to: peer.address)
                        }
                        answered(seq, outcome, wire: &wire)
                        return
                    }
                    guard let source = filter.original(seq) else {
                        wire.counters.resendsUnmapped += 1
                        watch(seq, wire: &wire)
                        return
                    }
                    let outcome = stream.history.retransmit(sequenceNumber: source, now: now, rtt: 0, allow: allow) { stored in
                        let packet = UnsafeRawBufferPointer(stored)
                        var picture: UInt16?, pictureOffset = 0
                        if let (_, offset, length) = try? RTPHeader.parse(packet), length > 0,
                           let d = try? VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: packet[offset..<(offset + length)])) {
                            picture = d.pictureID.flatMap { filter.outgoingPicture($0) }
                            pictureOffset = offset + 2
                        }
                        wire.sendEdited(packet, sequence: seq, pictureID: picture, pictureOffset: pictureOffset, to: peer.address)
                    }
                    answered(seq, outcome, wire: &wire)
                }
            case .transportFeedback(let feedback):
                // A viewer's arrivals of a stream it receives: its downlink's estimate, and so
                // the layers it gets.
                guard let stream = room.streams[feedback.mediaSSRC], stream.info.kind != .audio,
                      let i = stream.subscriberIndex(peer) else { continue }
                if stream.subscribers[i].downlink == nil {
                    stream.subscribers[i].downlink = peer.external ? ViewerDownlink(startingOnHalf: stream.layerRates) : ViewerDownlink()
                    stream.downlinks += 1
                }
                let downlink = stream.subscribers[i].downlink!
                let before = downlink.layers
                downlink.onFeedback(feedback, log: stream.forwardLog, rates: stream.layerRates, now: now)
                wire.counters.viewerFeedbacks += 1
                Self.tellIfChanged(downlink, was: before, stream: stream, viewer: peer, now: now, wire: &wire)
            case .extendedReport(let xr):
                // A viewer's RRTR (RFC 3611 §4.4): answered at once with a DLRR, so it learns
                // its round trip to this relay (which answers its NACKs).
                guard let t = xr.referenceTime else { break }
                let item = ExtendedReport.DLRRItem(ssrc: xr.ssrc, lastReceiverReport: t.middle32, delaySinceLastReceiverReport: 0)
                let ssrc = wire.ssrc
                wire.sendRTCP(to: peer.address) {
                    RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: [], cname: Self.cname, dlrr: [item], into: $0)
                }
            case .pli(_, let media):
                if let stream = room.streams[media], stream.subscriberIndex(peer) != nil { Self.requestKeyframe(stream, now: now, wire: &wire) }
            case .fir(let fir):
                for entry in fir.entries {
                    if let stream = room.streams[entry.ssrc], stream.subscriberIndex(peer) != nil { Self.requestKeyframe(stream, now: now, wire: &wire) }
                }
            case .remb(let remb) where peer.capsWithREMB:
                for stream in room.streams.values where stream.info.kind == .screen && stream.subscriberIndex(peer) != nil {
                    Self.cap(stream, by: peer, remb.bitsPerSecond, now: now, wire: &wire)
                }
            default:
                break
            }
        }
        if let stream = forwardTo {
            wire.outbox.send(bytes, toEach: stream.addresses)
        }
    }

    /// The relay's timers, for RTCP: keyframe requests held back by the spacing; the
    /// publishers' uplinks (what did not arrive, nor was rebuilt from FEC, is asked for again,
    /// as a receiver would); the viewers' links (trials, and keyframes for those that get only
    /// keyframes); transport feedback to the presenters that send its numbers (every poll: the
    /// core polls every 50 ms); receiver reports once a second.
    mutating func poll(_ rooms: Dictionary<String, RoomState>.Values, now: UInt64, wire: inout RelayWire) {
        for room in rooms {
            for stream in room.streams.values where stream.keyframePending && stream.keyframeRequestDue(now: now) {
                Self.sendKeyframeRequest(stream, now: now, wire: &wire)
            }
            for stream in room.streams.values where stream.uplinkNacks != nil {
                RelayForwarder.askAgain(stream, now: now, wire: &wire)
            }
        }
        // Viewers' links: trials, and keyframes for those that get only keyframes.
        for room in rooms {
            for stream in room.streams.values where stream.downlinks > 0 {
                for s in stream.subscribers {
                    guard let downlink = s.downlink else { continue }
                    let before = downlink.layers
                    if downlink.poll(rates: stream.layerRates, now: now) { Self.requestKeyframe(stream, now: now, wire: &wire) }
                    Self.tellIfChanged(downlink, was: before, stream: stream, viewer: s.peer, now: now, wire: &wire)
                }
            }
        }
        let ssrc = wire.ssrc
        for room in rooms {
            for peer in room.peers.values where peer.transportFeedback != nil {
                guard let fb = peer.transportFeedback?.poll(now: now, senderSSRC: ssrc, mediaSSRC: peer.streams.first?.ssrc ?? 0) else { continue }
                wire.sendRTCP(to: peer.address) { RTCPPacket.transportFeedback(fb).marshal(into: $0) }
                wire.counters.transportFeedbacks += 1
            }
        }
        guard now >= nextReport else { return }
        nextReport = now + 1_000_000_000
        for room in rooms {
            for stream in room.streams.values where stream.receive.packetsReceived > 0 {
                let block = stream.receive.makeReport(now: now)
                wire.sendRTCP(to: stream.owner.address) {
                    RTCPPacket.buildReceiverReport(ssrc: ssrc, reports: [block], cname: Self.cname, into: $0)
                }
            }
        }
    }

    /// A viewer allowed to cap sent a REMB for `stream`: the publisher gets the lowest cap sent
    /// in the last 2.5 s, at most twice a second (a new lowest at once). A cap no viewer renews
    /// lapses at the publisher (its REMB lasts 3 s).
    static func cap(_ stream: StreamState, by viewer: PeerState, _ bps: UInt64, now: UInt64, wire: inout RelayWire) {
        stream.rembCaps[viewer.id] = (bps, now)
        stream.rembCaps = stream.rembCaps.filter { now &- $0.value.at <= 2_500_000_000 }
        guard let lowest = stream.rembCaps.values.map(\.bitsPerSecond).min() else { return }
        if let last = stream.lastREMBSent, now &- last < 500_000_000, bps > lowest { return }
        stream.lastREMBSent = now
        let ssrc = wire.ssrc
        wire.sendRTCP(to: stream.owner.address) {
            RTCPPacket.remb(REMB(senderSSRC: ssrc, bitsPerSecond: lowest, ssrcs: [stream.info.ssrc])).marshal(into: $0)
        }
    }

    /// The CNAME of the relay's own RTCP.
    static let cname = "screenshare-relay"

    /// A viewer's link carries more or less of a stream than before: it is told (`link`). A
    /// viewer that gets fewer layers is told again every 5 s (the message may be lost on the
    /// very link that is short; the viewer says only what changed).
    static func tellIfChanged(_ downlink: ViewerDownlink, was before: LinkLayers, stream: StreamState, viewer: PeerState, now: UInt64,
                              wire: inout RelayWire) {
        let changed = downlink.layers != before
        if changed { wire.counters.layerSwitches += 1 }
        guard changed || (downlink.layers != .all && now >= downlink.nextTell) else { return }
        downlink.nextTell = now + 5_000_000_000
        wire.sendControl(.link(publisher: stream.owner.id, layers: downlink.layers, estimateKbps: Int(downlink.controller.target / 1000)), to: viewer.address)
    }

    /// A keyframe of `stream` is wanted (a late joiner, a viewer's PLI or FIR, a link that now
    /// carries only keyframes): asked of the publisher now, or once the spacing allows
    /// (at most one request per 300 ms per stream: one keyframe answers a burst of joiners).
    static func requestKeyframe(_ stream: StreamState, now: UInt64, wire: inout RelayWire) {
        guard stream.info.kind == .screen || stream.info.kind == .main else { return }
        if stream.keyframeRequestDue(now: now) {
            sendKeyframeRequest(stream, now: now, wire: &wire)
        } else {
            stream.keyframePending = true
        }
    }

    static func sendKeyframeRequest(_ stream: StreamState, now: UInt64, wire: inout RelayWire) {
        stream.lastKeyframeRequest = now
        stream.keyframePending = false
        wire.counters.keyframeRequests += 1
        let ssrc = wire.ssrc
        wire.sendRTCP(to: stream.owner.address) { RTCPPacket.buildPLI(senderSSRC: ssrc, mediaSSRC: stream.info.ssrc, into: $0) }
    }
}
