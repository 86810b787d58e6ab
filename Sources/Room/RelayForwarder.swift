import RTCP
import RTP
import RTPSession
import FoundationEssentials
import Glibc
import MediaCore
import Basics
import NetworkAddress

/// RTP in, RTP out: a publisher's packets to its subscribers — each viewer whose link is
/// estimated gets the layers that fit it, renumbered when some were left out —, FEC recovering
/// what the uplink lost, NACKs to the publisher for the rest. It keeps no state of its own:
/// what it needs per stream is the stream's (``StreamState``: history, FEC decoder, layer
/// rates, the viewers' filters), and what it sends goes to the ``RelayWire`` it is handed.
enum RelayForwarder {
    /// - Parameter recovered: rebuilt here from the publisher's FEC, not received: forwarded and
    ///   kept for resends, but not counted as an arrival.
    /// - Parameter arrival: when the kernel received it (monotonic ns), if known: its arrival in
    ///   the publisher's transport feedback, as it really was, not as late as a busy turn read it.
    static func forwardRTP(_ bytes: UnsafeRawBufferPointer, from peer: PeerState, now: UInt64, recovered: Bool = false,
                           arrival: UInt64? = nil, wire: inout RelayWire) {
        guard bytes.count >= 12 else { wire.counters.rejected += 1; return }
        let ssrc = UInt32(bytes[8]) << 24 | UInt32(bytes[9]) << 16 | UInt32(bytes[10]) << 8 | UInt32(bytes[11])
        guard let stream = peer.room.streams[ssrc], stream.owner === peer else {
            wire.counters.rejected += 1  // not published (yet): nobody asked for it
            return
        }
        guard let (header, offset, length) = try? RTPHeader.parse(bytes) else { wire.counters.rejected += 1; return }
        let transportSequence = TransportWideSequence.find(id: RoomProtocol.transportSequenceID, in: bytes)
        if let sequence = transportSequence, !recovered {
            if peer.transportFeedback == nil { peer.transportFeedback = TransportFeedbackRecorder() }
            peer.transportFeedback?.onPacket(sequence: sequence, now: arrival ?? now)
        }
        if stream.info.kind == .fec {
            forwardFEC(bytes, header: header, payloadOffset: offset, payloadLength: length, transportSequence: transportSequence,
                       stream: stream, from: peer, now: now, wire: &wire)
            return
        }
        if !recovered {
            stream.receive.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now, payloadBytes: length)
        }
        stream.uplinkNacks?.onPacket(sequenceNumber: header.sequenceNumber, now: now, endsFrame: header.marker, recovered: recovered)
        stream.history.store(bytes, now: now)
        defer { if !recovered, stream.fec != nil { stream.fec?.addMedia(bytes); recover(stream, from: peer, now: now, wire: &wire) } }
        var descriptor: VP8PayloadDescriptor?
        var keyframe = false
        if stream.info.kind != .audio, length > 0 {
            let payload = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
            descriptor = try? VP8PayloadDescriptor.parse(payload)
            if let d = descriptor, d.startsFrame, d.size < payload.count,
               VP8PayloadDescriptor.isKeyframe(vp8Data: UnsafeRawBufferPointer(rebasing: payload[d.size...])) {
                stream.keyframePending = false  // whoever asked gets this one
                keyframe = true
            }
        }
        guard stream.downlinks > 0, let d = descriptor else {
            wire.forward(bytes, toEach: stream.addresses)
            return
        }
        forwardPerViewer(bytes, header: header, payloadOffset: offset, descriptor: d, keyframe: keyframe,
                         transportSequence: transportSequence, stream: stream, now: now, wire: &wire)
    }

    /// A video packet of a stream some viewers of which send transport feedback: each of those
    /// gets the layers its link carries (``ViewerDownlink``), renumbered when some were left
    /// out; the others, and those whose numbers are still the source's, share one fan-out.
    static func forwardPerViewer(_ bytes: UnsafeRawBufferPointer, header: RTPHeader, payloadOffset: Int, descriptor d: VP8PayloadDescriptor,
                                 keyframe: Bool, transportSequence: UInt16?, stream: StreamState, now: UInt64, wire: inout RelayWire) {
        if let t = transportSequence { stream.forwardLog.record(t, size: bytes.count + Self.srtpOverhead, now: now) }
        stream.layerRates.add(bytes.count, layer: d.temporalLayer, now: now)
        stream.shared.removeAll(keepingCapacity: true)
        for i in stream.subscribers.indices {
            guard let downlink = stream.subscribers[i].downlink else {
                stream.shared.append(stream.subscribers[i].address)
                continue
            }
            let out = downlink.filter.forward(sequence: header.sequenceNumber, pictureID: d.pictureID, temporalLayer: d.temporalLayer,
                                              layerSync: d.layerSync, startsFrame: d.start, keyframe: keyframe)
            if let t = transportSequence { downlink.noteForwarded(t, sent: out != nil) }
            guard let out else { continue }
            if out.sequence == header.sequenceNumber && out.pictureID == d.pictureID {
                stream.shared.append(stream.subscribers[i].address)
            } else {
                wire.sendEdited(bytes, sequence: out.sequence, pictureID: out.pictureID, pictureOffset: payloadOffset + 2, to: stream.subscribers[i].address)
            }
        }
        wire.forward(bytes, toEach: stream.shared)
    }

    /// An FEC packet of a publisher's screen (its `fec` stream): the relay recovers what its
    /// own uplink lost at once (every viewer then gets the packet without a resend from the
    /// presenter), and forwards it to the viewers whose numbers are still the source's (it names
    /// the source's; a viewer left some layers gets renumbered packets, which it cannot repair).
    static func forwardFEC(_ bytes: UnsafeRawBufferPointer, header: RTPHeader, payloadOffset: Int, payloadLength: Int,
                           transportSequence: UInt16?, stream: StreamState, from peer: PeerState, now: UInt64, wire: inout RelayWire) {
        guard let screen = stream.protects else {
            wire.counters.rejected += 1
            return
        }
        wire.counters.fecIn += 1
        screen.fec?.addFEC(bytes, payloadOffset: payloadOffset, payloadLength: payloadLength, protectedSSRC: screen.info.ssrc)
        recover(screen, from: peer, now: now, wire: &wire)
        if let t = transportSequence, screen.downlinks > 0 { screen.forwardLog.record(t, size: bytes.count + Self.srtpOverhead, now: now) }
        stream.shared.removeAll(keepingCapacity: true)
        for s in stream.subscribers {
            let downlink = screen.subscriberIndex(s.peer).flatMap { screen.subscribers[$0].downlink }
            let send = !(downlink?.filter.isShifted ?? false)
            if let t = transportSequence { downlink?.noteForwarded(t, sent: send) }
            if send { stream.shared.append(s.address) }
        }
        wire.forward(bytes, toEach: stream.shared)
    }

    /// NACKs the publisher for the stream's holes that are due (the NACK generator's timing:
    /// after the reordering wait, then once per measured round trip).
    static func askAgain(_ stream: StreamState, now: UInt64, wire: inout RelayWire) {
        guard let rtt = stream.uplinkNacks.map({ $0.measuredRTT ?? 100_000_000 }) else { return }
        stream.uplinkNackList.removeAll(keepingCapacity: true)
        stream.uplinkNacks?.poll(now: now, rtt: rtt, into: &stream.uplinkNackList)  // in place: no copy of its list
        _ = stream.uplinkNacks?.takeLoss()
        guard !stream.uplinkNackList.isEmpty else { return }
        let ssrc = wire.ssrc
        var built = false
        wire.sendRTCP(to: stream.owner.address) {
            let n = RTCPPacket.buildNACK(senderSSRC: ssrc, mediaSSRC: stream.info.ssrc, sequenceNumbers: stream.uplinkNackList, into: $0)
            built = n > 0
            return n
        }
        if built { wire.counters.uplinkNacks += 1 }
    }

    /// Forwards what `screen`'s FEC packets can rebuild of what the publisher's uplink lost.
    static func recover(_ screen: StreamState, from peer: PeerState, now: UInt64, wire: inout RelayWire) {
        guard screen.fec?.hasPending == true else { return }
        withUnsafeTemporaryAllocation(byteCount: ULPFEC.maxPacketSize, alignment: 16) { buffer in
            while let n = screen.fec?.recoverOne(into: buffer) {
                wire.counters.fecRecovered += 1
                forwardRTP(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), from: peer, now: now, recovered: true, wire: &wire)
            }
        }
    }

    /// What SRTP adds to a packet on a hop (its authentication tag), counted in what a viewer's
    /// link carries.
    static let srtpOverhead = 10
}
