import RTCP
import RTP
import RTPSession
import Room

/// The receive path of the screen substream as a pure state machine: RTP packets, RTCP
/// sender reports and goodbyes, and time in; decisions out (frames due for decoding, NACKs and
/// PLIs to send, the next wakeup). No sockets, clocks or events inside: every call takes
/// `now` (ns of a monotonic clock), so tests drive it with explicit times.
///
/// A packet goes through `ReceiveStatistics` (RFC 3550 A.1/A.8), the `NackGenerator` (holes
/// become generic NACKs, RFC 4585 §6.2.1), the `VP8FrameAssembler` (RFC 7741) and the
/// `JitterBuffer`; ``poll(now:)`` gives up on holes and decides the feedback, ``playOut(now:_:)``
/// releases the frames due. A frame that cannot be repaired asks for a keyframe (PLI, RFC 4585
/// §6.3.1) at most once per ``pliInterval``.
///
/// Whose packets it takes: in a room only the screen stream subscribed to (any other SSRC the
/// relay should never send is counted foreign); in plain mode the first sender, and another
/// one after ``senderTakeoverSilence`` of silence or a BYE. A new sender starts the path
/// afresh.
///
/// Nothing is allocated per packet: the parts preallocate, the NACK list is reused.
struct VideoReceivePath {
    /// Keyframe requests for a frame that cannot be repaired: at most one per this (ns).
    static let pliInterval: UInt64 = 300_000_000
    /// In plain mode, how long a sender must be silent before another SSRC is followed (ns).
    static let senderTakeoverSilence: UInt64 = 2_000_000_000
    /// The RTT NACK retries wait for until an answer measures it (libwebrtc's default, ns).
    static let assumedRTT: UInt64 = 100_000_000

    /// What became of a packet given to ``receive(_:payload:now:)``.
    enum Outcome: Equatable {
        /// Taken into the path.
        case accepted
        /// Taken, and the first of a new sender (or the same one restarted): the path started
        /// afresh. `previous`: the sender followed until now (nil for the first one).
        case newSender(previous: UInt32?)
        /// Not for us: another payload type, or another sender while the current one talks.
        case rejected
        /// In a room, an SSRC we did not subscribe to (the relay should never send one).
        case foreign
        /// In a room, another stream of the publisher we watch (not the screen).
        case otherStream
    }

    /// What ``poll(now:)`` asks to send.
    struct Feedback: Equatable {
        /// Send a generic NACK for ``nacks`` to ``senderSSRC``.
        var nack = false
        /// Send a PLI to ``senderSSRC``.
        var pli = false
    }

    /// What the decoder made of a frame ``playOut(now:_:)`` released.
    enum Decoded {
        /// A picture, shown.
        case picture
        /// Nothing to show (the decoder gave no picture).
        case nothing
        /// The decoder failed.
        case failed
    }

    /// The payload type of the screen stream (the room may change it on subscribing).
    private(set) var payloadType: UInt8
    /// Its RTP clock rate (Hz).
    private(set) var clockRate: Int
    /// Whether the packets come from a room relay (streams chosen by subscribing).
    let inRoom: Bool
    /// In a room: the screen stream we subscribed to (other SSRCs are not ours to show).
    private(set) var expectedSSRC: UInt32?
    /// In a room: every stream of the publisher we receive; other SSRCs are foreign.
    private var subscribedSSRCs: Set<UInt32> = []
    /// The sender followed; nil until its first packet (or after subscribing to another).
    private(set) var senderSSRC: UInt32?
    /// Arrival of its last packet; nil after its BYE (another sender may take over at once).
    private var lastPacketAt: UInt64?
    /// The sender whose BYE came, and when: its copies are not news, nor is a packet it sent
    /// before the BYE and that arrived after it (reordered); a packet later than that is the
    /// same stream again (a publication resumed with its SSRC).
    private var senderLeft: (ssrc: UInt32, at: UInt64)?
    private static let goodbyeReordering: UInt64 = 1_000_000_000
    private(set) var receive: ReceiveStatistics?
    private var nack = VideoReceivePath.makeNackGenerator()
    private var assembler = VP8FrameAssembler()
    private var jitter = JitterBuffer()
    /// Frame and feedback counters for `stats` and `stopped` (kept across sender changes).
    private(set) var stats: ReceiverStats
    /// The sequence numbers the last ``poll(now:)`` asked to NACK (reused, never reallocated).
    private(set) var nacks: [UInt16] = []
    /// When the last PLI was decided (ns).
    private var lastPLI: UInt64 = 0
    /// A sender's first packets may arrive out of order (a Wi-Fi path reorders): until a frame
    /// of it has come whole, the want of a keyframe must last this long before a PLI goes, or
    /// the keyframe's own first packet, overtaken by its second, reads as a keyframe missed
    /// (and a second keyframe at once halves the first second's frame rate on a tight budget).
    static let startGrace: UInt64 = 100_000_000
    /// The sender's frames received when it started (`stats` counts across senders), and since
    /// when a keyframe has been wanted.
    private var framesAtSenderStart = 0
    private var wantedKeyframeSince: UInt64?
    /// RTP timestamps of the last frames a retransmission completed (their lateness is not
    /// jitter): a ring, `repairedNext` its next slot.
    private var repairedTimestamps = [UInt32](repeating: 0, count: 8)
    private var repairedNext = 0
    /// Packets refused (wrong payload type, a second sender) and foreign ones (see ``Outcome``).
    private(set) var packetsRejected = 0
    private(set) var packetsForeign = 0
    /// Frames the decoder failed on.
    private(set) var decodeErrors = 0
    /// The payload type of FEC packets in the stream (ULPFEC, RFC 5109; plain mode); nil: none.
    private(set) var fecPayloadType: UInt8?
    /// In a room: the SSRC of the screen's FEC stream (its own numbers), once subscribed.
    private(set) var fecSSRC: UInt32?
    /// The FEC decoder, made at the first FEC packet (its rings are 800 kB).
    private var fec: ULPFECDecoder?
    /// FEC packets taken and packets they recovered.
    private(set) var fecPackets = 0
    private(set) var fecRecovered = 0

    /// - Parameters:
    ///   - startedAt: when the viewer started (ns), the origin of the time to first frame.
    init(payloadType: UInt8, clockRate: Int, inRoom: Bool, startedAt: UInt64) {
        self.payloadType = payloadType
        self.clockRate = clockRate
        self.inRoom = inRoom
        fecPayloadType = inRoom || payloadType == ULPFEC.payloadType ? nil : ULPFEC.payloadType
        stats = ReceiverStats(clockRate: UInt32(max(clockRate, 1)), startedAt: startedAt)
        nacks.reserveCapacity(512)
    }

    /// Retries wait for the answer: the RTT measured from NACK to retransmission (the sender
    /// resends a packet at most once per its RTT, so asking faster only wastes requests).
    /// Idle probes every 100 ms: on a still slide a keep-alive frame lost whole is asked for
    /// within about 100 ms + RTT instead of when the next one comes a second later.
    private static func makeNackGenerator() -> NackGenerator {
        var c = NackGenerator.Configuration()
        c.idleProbeInterval = 100_000_000
        return NackGenerator(configuration: c)
    }

    /// The RTT NACK retries wait for: measured from NACK answers, else ``assumedRTT`` (with 0 a
    /// 100 ms path was asked every 20 ms, about 9 NACKs per lost packet, and never measured:
    /// only an answer to a single request is a clean sample). Not the RTCP XR round trip: with
    /// it, a path whose resends never arrive gave up after 10 × ~25 ms and asked for a keyframe
    /// 6 times in 4 s; the keyframes starved the encoder's rate (the
    /// whenRetransmissionsAreLost test decoded too few frames after the loss, 1 run in 4).
    private var nackRTT: UInt64 { nack.measuredRTT ?? Self.assumedRTT }

    // MARK: - Packets

    /// Takes one RTP packet of the video flow that arrived at `now`: `payload` within `packet`
    /// (the whole packet, which FEC needs; nil: no FEC).
    mutating func receive(_ header: RTPHeader, payload: UnsafeRawBufferPointer, packet: UnsafeRawBufferPointer? = nil,
                          now: UInt64) -> Outcome {
        if inRoom, header.ssrc == fecSSRC, let packet {
            return receiveFEC(header, payload: payload, packet: packet, ownStream: true, now: now)
        }
        if !inRoom, header.payloadType == fecPayloadType, let packet {
            return receiveFEC(header, payload: payload, packet: packet, ownStream: false, now: now)
        }
        guard header.payloadType == payloadType else {
            packetsRejected += 1
            return .rejected
        }
        if inRoom {
            guard header.ssrc == expectedSSRC else {
                if subscribedSSRCs.contains(header.ssrc) { return .otherStream }
                packetsForeign += 1
                return .foreign
            }
        }
        var outcome = Outcome.accepted
        if senderSSRC != header.ssrc {
            // A new sender (or the same one restarted): follow it after a silence or a BYE.
            if senderSSRC != nil, expectedSSRC == nil, let last = lastPacketAt, now < last &+ Self.senderTakeoverSilence {
                packetsRejected += 1
                return .rejected
            }
            outcome = .newSender(previous: senderSSRC)
            senderSSRC = header.ssrc
            receive = ReceiveStatistics(ssrc: header.ssrc)
            if fec != nil { fec = ULPFECDecoder() }  // a fresh one: the packets kept were another sender's
            nack = Self.makeNackGenerator()
            assembler = VP8FrameAssembler()
            jitter = JitterBuffer()
            framesAtSenderStart = stats.framesReceived
            wantedKeyframeSince = nil
            senderLeft = nil
            stats.senderStarted()
        }
        lastPacketAt = now
        if let left = senderLeft, now > left.at &+ Self.goodbyeReordering {
            senderLeft = nil
            stats.senderStarted()
        }
        receive?.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now,
                          payloadBytes: payload.count)
        if nack.onPacket(sequenceNumber: header.sequenceNumber, now: now, endsFrame: header.marker) {
            repairedTimestamps[repairedNext] = header.timestamp
            repairedNext = (repairedNext + 1) % repairedTimestamps.count
        }
        Self.assemble(&assembler, &jitter, &stats, repaired: repairedTimestamps, header: header, payload: payload, now: now)
        if fec != nil, let packet {
            fec?.addMedia(packet)
            recoverFromFEC(now: now)
        }
        return outcome
    }

    /// An FEC packet of the sender followed; it may recover a missing packet now. In plain mode
    /// it counts in the stream's sequence numbers (its loss is asked for like any other); in a
    /// room it comes in a stream of its own (`ownStream`) and protects the screen's.
    private mutating func receiveFEC(_ header: RTPHeader, payload: UnsafeRawBufferPointer, packet: UnsafeRawBufferPointer,
                                     ownStream: Bool, now: UInt64) -> Outcome {
        guard let sender = senderSSRC, ownStream || header.ssrc == sender, let base = packet.baseAddress, let start = payload.baseAddress else {
            packetsRejected += 1
            return .rejected
        }
        if !ownStream {
            lastPacketAt = now
            receive?.onPacket(sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: now,
                              payloadBytes: payload.count)
            nack.onPacket(sequenceNumber: header.sequenceNumber, now: now, endsFrame: true)
        }
        fecPackets += 1
        if fec == nil { fec = ULPFECDecoder() }
        fec?.addFEC(packet, payloadOffset: start - base, payloadLength: payload.count, protectedSSRC: ownStream ? sender : nil)
        recoverFromFEC(now: now)
        return .accepted
    }

    /// Packets the FEC packets kept can rebuild go the way of arrived ones (but say nothing of
    /// the path: not in the loss counts, nor the NACK timing).
    private mutating func recoverFromFEC(now: UInt64) {
        guard fec?.hasPending == true else { return }
        withUnsafeTemporaryAllocation(byteCount: ULPFEC.maxPacketSize, alignment: 16) { buffer in
            while let n = fec?.recoverOne(into: buffer) {
                let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                guard let (h, offset, length) = try? RTPHeader.parse(bytes), h.ssrc == senderSSRC, h.payloadType == payloadType else { continue }
                fecRecovered += 1
                if nack.onPacket(sequenceNumber: h.sequenceNumber, now: now, endsFrame: h.marker, recovered: true) {
                    repairedTimestamps[repairedNext] = h.timestamp
                    repairedNext = (repairedNext + 1) % repairedTimestamps.count
                }
                Self.assemble(&assembler, &jitter, &stats, repaired: repairedTimestamps, header: h,
                              payload: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)]), now: now)
            }
        }
    }

    /// The assembler hands complete frames to the jitter buffer (separate parameters: the
    /// closure may not capture `self` while the assembler, part of it, is being changed).
    private static func assemble(_ assembler: inout VP8FrameAssembler, _ jitter: inout JitterBuffer, _ stats: inout ReceiverStats,
                                 repaired: [UInt32], header: RTPHeader, payload: UnsafeRawBufferPointer, now: UInt64) {
        assembler.insert(header: header, payload: payload, now: now) { frame in
            stats.frameArrived(rtpTimestamp: frame.rtpTimestamp)
            jitter.insert(frame, now: now, repaired: repaired.contains(frame.rtpTimestamp))
        }
    }

    /// Frames the loss of `sequenceNumber` (and before) completed go to the jitter buffer.
    private static func markLost(_ assembler: inout VP8FrameAssembler, _ jitter: inout JitterBuffer, _ stats: inout ReceiverStats,
                                 through sequenceNumber: UInt16, now: UInt64) {
        assembler.markLost(through: sequenceNumber, now: now) { frame in
            stats.frameArrived(rtpTimestamp: frame.rtpTimestamp)
            jitter.insert(frame, now: now, repaired: true)  // it waited for the loss to be given up on
        }
    }

    // MARK: - Time

    /// How long the want of a keyframe must last before a PLI: ``startGrace`` until a frame of
    /// the sender came whole, then none.
    private var keyframeGrace: UInt64 { stats.framesReceived == framesAtSenderStart ? Self.startGrace : 0 }

    /// When ``poll(now:)`` or ``playOut(now:_:)`` next has something to do, or nil.
    var nextWakeup: UInt64? {
        let keyframe = wantedKeyframeSince.map { max($0 &+ keyframeGrace, lastPLI &+ Self.pliInterval) }
        func earlier(_ a: UInt64?, _ b: UInt64?) -> UInt64? { a.map { a in b.map { min(a, $0) } ?? a } ?? b }
        return earlier(earlier(jitter.nextWakeup, nack.nextWakeup(rtt: nackRTT)), keyframe)
    }

    /// Asks for lost packets (``nacks``), gives up on the hopeless ones, and decides whether
    /// a keyframe is needed (throttled to one per ``pliInterval``).
    mutating func poll(now: UInt64) -> Feedback {
        var feedback = Feedback()
        nacks.removeAll(keepingCapacity: true)
        let probes = nack.idleProbes
        nack.poll(now: now, rtt: nackRTT, into: &nacks)
        if !nacks.isEmpty, senderSSRC != nil {
            feedback.nack = true
            stats.nackSent(count: nacks.count - (nack.idleProbes - probes))  // idle probes are not losses
        }
        if let lost = nack.takeLoss() {
            Self.markLost(&assembler, &jitter, &stats, through: lost, now: now)
        }
        if assembler.needsKeyframe, senderSSRC != nil {
            let since = wantedKeyframeSince ?? now
            wantedKeyframeSince = since
            if now >= since &+ keyframeGrace, now >= lastPLI &+ Self.pliInterval { feedback.pli = requestKeyframe(now: now) }
        } else {
            wantedKeyframeSince = nil
        }
        return feedback
    }

    /// Releases the oldest frame if it is due at `now`, handing it to `decode` (its data is
    /// valid only during the call), and counts what the decoder made of it.
    /// - Returns: whether a frame was released, and whether to send a PLI (the decoder failed:
    ///   asked at once, whatever the throttle).
    mutating func playOut(now: UInt64, _ decode: (BufferedFrame) -> Decoded) -> (released: Bool, pli: Bool) {
        var decoded = Decoded.nothing
        var rtpTimestamp: UInt32 = 0
        var isKeyframe = false
        let released = jitter.pop(now: now) { frame in
            decoded = decode(frame)
            rtpTimestamp = frame.rtpTimestamp
            isKeyframe = frame.isKeyframe
        }
        guard released else { return (false, false) }
        switch decoded {
        case .picture:
            stats.frameDecoded(isKeyframe: isKeyframe)
            stats.frameRendered(rtpTimestamp: rtpTimestamp, now: now)
        case .nothing:
            break
        case .failed:
            decodeErrors += 1
            stats.frameDropped()
            return (true, requestKeyframe(now: now))
        }
        return (true, false)
    }

    /// Decides a PLI to the sender, if there is one.
    private mutating func requestKeyframe(now: UInt64) -> Bool {
        guard senderSSRC != nil else { return false }
        lastPLI = now
        stats.pliSent()
        return true
    }

    /// Lip sync's extra delay on the pictures (ns); a new sender starts at 0.
    var extraDelay: UInt64 {
        get { jitter.extraDelay }
        set { jitter.extraDelay = newValue }
    }

    // MARK: - RTCP and the room

    /// Takes a sender report (RFC 3550 §6.4.1).
    /// - Returns: whether it is our sender's (its clock then maps our RTP timestamps).
    mutating func onSenderReport(_ sr: SenderReport, now: UInt64) -> Bool {
        guard sr.ssrc == senderSSRC else { return false }
        receive?.onSenderReport(sr, arrival: now)
        stats.senderReported(packetCount: sr.packetCount)
        return true
    }

    /// Takes a BYE (RFC 3550 §6.6).
    /// - Returns: our sender, when it is the one leaving (a new one may then take over at once).
    mutating func onGoodbye(_ sources: [UInt32], now: UInt64) -> UInt32? {
        guard let sender = senderSSRC, sources.contains(sender), senderLeft?.ssrc != sender else { return nil }
        senderLeft = (sender, now)  // senders repeat their BYE: the copies are not news
        lastPacketAt = nil
        stats.senderLeft(now: now)
        return sender
    }

    /// The reception report block for our next receiver report, if a sender was heard.
    mutating func makeReport(now: UInt64) -> ReceptionReport? {
        receive?.makeReport(now: now)
    }

    /// The relay confirmed a subscription to these streams.
    /// - Returns: whether the screen stream is a new one (its first packet starts afresh).
    mutating func subscribed(to streams: [StreamInfo]) -> Bool {
        for s in streams { subscribedSSRCs.insert(s.ssrc) }
        if let f = streams.first(where: { $0.kind == .fec }) {
            fecSSRC = f.ssrc
            fecPayloadType = f.pt
            if fec == nil { fec = ULPFECDecoder() }  // keeps the screen's packets from the first on
        }
        guard let screen = streams.first(where: { $0.kind == .screen }) else { return false }
        defer {
            payloadType = screen.pt
            clockRate = Int(screen.clock)
        }
        guard expectedSSRC != screen.ssrc else { return false }
        expectedSSRC = screen.ssrc
        senderSSRC = nil  // the next packet of this SSRC starts a fresh receive state
        return true
    }

    /// The subscription ended: no screen stream is ours until the next one.
    mutating func unsubscribed(now: UInt64) {
        expectedSSRC = nil
        stats.senderLeft(now: now)
    }

    // MARK: - Statistics

    /// Copies the packet counters into ``stats`` and looks for a freeze in progress at `now`
    /// (call before reading it).
    mutating func updateStats(now: UInt64) {
        if let r = receive { stats.update(from: r) }
        stats.observe(now: now)
    }

    /// Interarrival jitter (RFC 3550 A.8) in ms.
    var jitterMillis: Double { (receive?.jitterSeconds ?? 0) * 1000 }
    /// The jitter buffer's target delay in ms.
    var bufferMillis: Double { Double(jitter.targetDelay) / 1e6 }
    /// NACKs sent for the next packet while nothing newer arrived.
    var idleProbes: Int { nack.idleProbes }
}
