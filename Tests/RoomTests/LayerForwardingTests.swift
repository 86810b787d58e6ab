import RTCP
import RTP
import RTPSession
import Testing
import TestSupport
@testable import Room
import NetworkAddress
import RoomEvents

/// The relay's per-viewer layers, in simulated time: a presenter's two-layer stream, one viewer
/// on a fast link and one behind a bottleneck smaller than the stream (a drop-tail queue in
/// front of it), each sending transport feedback as `watch` does.
@Suite struct LayerForwardingTests {
    /// A viewer's link: a rate (nil: no limit), a 300 ms drop-tail queue, 10 ms of delay, and
    /// up to `jitter` more for each packet on its own (later ones overtake earlier ones).
    struct Link {
        var rate: Double?
        /// The drop-tail queue in front of `rate` (ns of it).
        var queue: UInt64 = 300 * ms
        var jitter: UInt64 = 0
        /// Random loss, without a bottleneck (Wi-Fi's).
        var loss = 0.0
        var rng = SplitMix64(seed: 11)
        var free: UInt64 = 0
        var inFlight: [(arrival: UInt64, bytes: [UInt8])] = []
        var dropped = 0
        /// When the bottleneck's queue dropped a packet.
        var drops: [UInt64] = []
        mutating func send(_ bytes: [UInt8], now: UInt64) {
            guard let rate else {
                if loss > 0, Double.random(in: 0..<1, using: &rng) < loss { dropped += 1; return }
                inFlight.append((now + 10 * ms + (jitter > 0 ? UInt64.random(in: 0...jitter, using: &rng) : 0), bytes))
                return
            }
            let start = max(free, now)
            guard start - now <= queue else { dropped += 1; drops.append(now); return }
            free = start + UInt64(Double(bytes.count * 8) / rate * 1e9)
            inFlight.append((free + 10 * ms, bytes))
        }
        mutating func arrivals(until now: UInt64) -> [[UInt8]] {
            let due = inFlight.filter { $0.arrival <= now }.sorted { $0.arrival < $1.arrival }.map(\.bytes)
            inFlight.removeAll { $0.arrival <= now }
            return due
        }
    }

    struct Viewer {
        let address: PeerAddress
        var link: Link
        var recorder = TransportFeedbackRecorder()
        var got: [(at: UInt64, bytes: [UInt8])] = []
        /// What the relay said of its link (`link` messages), in order.
        var told: [LinkLayers] = []
    }

    /// Runs `seconds` of a 30 fps stream of 3 packets a frame (1000 bytes each: 720 kbit/s) in
    /// three temporal layers (TL0, TL2, TL1, TL2: TL0 a quarter of it, TL0 + TL1 half) to both
    /// viewers; returns them with what each received. In the seconds of `dips` each interframe
    /// is one packet (240 kbit/s), as an encoder's output dips after a keyframe.
    static func run(seconds: Int, slowRate: Double?, slowQueue: UInt64 = 300 * ms, slowJitter: UInt64 = 0, slowLoss: Double = 0,
                    feedbackLoss: Double = 0, seed: UInt64 = 11,
                    pattern: [UInt8] = [0, 2, 1, 2], dips: [ClosedRange<Int>] = [], browsers: Bool = false) throws -> (fast: Viewer, slow: Viewer, relay: RelayCore, sent: [[UInt8]]) {
        let wire = Wire()
        let relay = RelayCore(ssrc: 0xAAAA, wire: wire)
        let presenter = addr(1)
        var viewers = [Viewer(address: addr(2), link: Link()), Viewer(address: addr(3), link: Link(rate: slowRate, queue: slowQueue, jitter: slowJitter, loss: slowLoss, rng: SplitMix64(seed: seed)))]
        var feedbackRNG = SplitMix64(seed: seed &+ 1)
        func join(_ a: PeerAddress, _ name: String) -> UInt32 {
            relay.receive(ControlEnvelope(requestID: 1, .join(room: "class", name: name, role: "viewer", token: nil, cookie: relay.cookie(for: a, now: 0))),
                          from: a, now: 0)
            for e in wire.controls(a) { if case let .welcome(peer, _, _, _) = e.message { return peer } }
            return 0
        }
        let p = join(presenter, "teacher")
        relay.receive(ControlEnvelope(requestID: 2, .publish(streams: [screen])), from: presenter, now: 0)
        for v in viewers {
            if browsers {  // as the browsers' gateway adds them: subscribed to the presenter at once
                _ = try relay.addExternalViewer(room: "class", name: "browser", address: v.address, presenter: nil, now: 0)
                continue
            }
            _ = join(v.address, "pupil")
            relay.receive(ControlEnvelope(requestID: 3, .subscribe(publisher: p, kinds: [.screen])), from: v.address, now: 0)
        }
        wire.sent.removeAll()
        var packetizer = VP8Packetizer(ssrc: screen.ssrc, initialSequence: 65000, initialPictureID: 32700)
        packetizer.temporalLayers = true
        packetizer.transportSequenceID = RoomProtocol.transportSequenceID
        var transportSequence: UInt16 = 60000
        var buffer = [UInt8](repeating: 0, count: 1500)
        var sent: [[UInt8]] = []
        let frame = [UInt8](repeating: 0x01, count: 3 * 980)  // an interframe (P bit set), 3 packets
        let small = [UInt8](repeating: 0x01, count: 980)
        var key = frame
        key[0] = 0x00  // P bit clear: a keyframe
        var keyframeAsked = false, place = 0
        for tick in 0..<UInt64(seconds * 1000) {
            let now = 1_000 * ms + tick * ms
            // A keyframe request (PLI) makes the next frame a keyframe, which starts the pattern.
            if wire.take(presenter).contains(where: { DatagramKind.of(bytesOf: $0) == .rtcp && $0.count > 1 && $0[1] == 206 }) { keyframeAsked = true }
            if tick % 33 == 0 {
                let index = tick / 33
                let isKey = keyframeAsked
                keyframeAsked = false
                if isKey { place = 0 }
                let layer = pattern[place]
                place = (place + 1) % pattern.count
                var packets: [[UInt8]] = []
                let dipping = dips.contains { $0.contains(Int(tick / 1000)) }
                (isKey ? key : dipping ? small : frame).withUnsafeBytes { f in
                    buffer.withUnsafeMutableBytes { b in
                        _ = packetizer.packetize(frame: f, rtpTimestamp: UInt32(index * 3000), temporalLayer: layer, into: b) { packet in
                            packets.append(Array(packet))
                        }
                    }
                }
                for var packet in packets {
                    packet.withUnsafeMutableBytes { TransportWideSequence.stamp(transportSequence, into: $0) }
                    transportSequence &+= 1
                    sent.append(packet)
                    relay.receive(packet, from: presenter, now: now)
                }
            }
            if tick % 50 == 0 { relay.poll(now: now, wallNanos: 0) }
            if tick % 2000 == 0, !browsers {  // the viewers' keep-alive, as their room clients send it
                for v in viewers { relay.receive(ControlEnvelope(requestID: 9, .ping(version: 0)), from: v.address, now: now) }
            }
            for i in viewers.indices {
                for packet in wire.take(viewers[i].address) {
                    switch DatagramKind.of(bytesOf: packet) {
                    case .rtp: viewers[i].link.send(packet, now: now)
                    case .control:
                        if case let .link(_, layers, _)? = (try? ControlEnvelope.parse(packet))?.message { viewers[i].told.append(layers) }
                    default: break
                    }
                }
                for packet in viewers[i].link.arrivals(until: now) {
                    viewers[i].got.append((now, packet))
                    if let t = packet.withUnsafeBytes({ TransportWideSequence.find(id: RoomProtocol.transportSequenceID, in: $0) }) {
                        viewers[i].recorder.onPacket(sequence: t, now: now)
                    }
                }
                if let fb = viewers[i].recorder.poll(now: now, senderSSRC: 7, mediaSSRC: screen.ssrc),
                   i == 0 || feedbackLoss == 0 || Double.random(in: 0..<1, using: &feedbackRNG) >= feedbackLoss {
                    var rtcp = [UInt8](repeating: 0, count: 1500)
                    let n = rtcp.withUnsafeMutableBytes { RTCPPacket.transportFeedback(fb).marshal(into: $0) }
                    relay.receive(Array(rtcp[0..<n]), from: viewers[i].address, now: now + 10 * ms)
                }
            }
        }
        return (viewers[0], viewers[1], relay, sent)
    }

    static func descriptor(_ packet: [UInt8]) throws -> (sequence: UInt16, d: VP8PayloadDescriptor) {
        try packet.withUnsafeBytes { b in
            let (h, offset, length) = try RTPHeader.parse(b)
            return (h.sequenceNumber, try VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: b[offset..<(offset + length)])))
        }
    }

    /// The slow viewer (500 kbit/s for a 720 kbit/s stream) is moved to the two lower layers
    /// (half the frames, 360 kbit/s), renumbered without holes, and stays there but for short
    /// trials; the fast one gets every packet exactly as the presenter sent it.
    @Test func aSlowViewerGetsHalfTheFramesAndTheFastOneEverything() throws {
        let (fast, slow, relay, sent) = try Self.run(seconds: 20, slowRate: 500_000)
        // (The last frame may still be on its way.)
        #expect(fast.got.count >= sent.count - 3 && fast.got.map(\.bytes) == Array(sent.prefix(fast.got.count)),
                "the fast viewer: \(fast.got.count) of \(sent.count)")
        let late = try slow.got.filter { $0.at >= 12_000 * ms }.map { try Self.descriptor($0.bytes) }
        let upper = late.filter { $0.d.temporalLayer == 2 }.count
        let middle = late.filter { $0.d.temporalLayer == 1 }.count
        #expect(late.count > 100 && Double(upper) < 0.25 * Double(late.count), "TL2 packets \(upper) of \(late.count) in the last 9 s")
        #expect(Double(middle) > 0.3 * Double(late.count), "TL1 packets \(middle) of \(late.count) in the last 9 s")
        // Renumbered: no holes among what it got (besides the link's own drops).
        let sequences = late.map(\.sequence)
        let holes = zip(sequences, sequences.dropFirst()).filter { $1 != $0 &+ 1 }.count
        #expect(holes <= slow.link.dropped, "\(holes) holes, \(slow.link.dropped) dropped by the link")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        #expect(downlink.switchesDown >= 1)
        print("slow viewer: \(downlink), link drops \(slow.link.dropped), TL2 \(upper) of \(late.count) after 12 s")
        let fastDownlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == fast.address })
        #expect(fastDownlink.switchesDown == 0 && fastDownlink.layers == .all && fast.told.isEmpty)
        // It was told each switch: down, and back after each failed trial.
        #expect(slow.told.first == .half && !slow.told.contains(.keyframes) && !slow.told.contains(.base), "\(slow.told)")
        // Said again every 5 s while it gets fewer layers (the word may be lost on that link).
        #expect(slow.told.filter { $0 == .half }.count >= 4, "\(slow.told)")
    }

    /// Browsers start on half the frames, and one whose link carries the whole stream is
    /// tried on every layer at once and keeps them; the slow one never got more than half.
    /// (Started on every layer, a slow browser's queue filled in its first second and Chromium
    /// froze on the resends behind it: `BrowserBottleneckTests`.)
    @Test func browsersStartOnHalfTheFramesAndAFastOneIsRaisedAtOnce() throws {
        let (fast, slow, relay, sent) = try Self.run(seconds: 8, slowRate: 500_000, browsers: true)
        let downlinks = relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc)
        let fastLink = try #require(downlinks.first { $0.address == fast.address })
        let slowLink = try #require(downlinks.first { $0.address == slow.address })
        // The fast one: on every layer, raised once (its trial), never lowered.
        print("fast browser: \(fastLink); slow browser: \(slowLink), link drops \(slow.link.dropped)")
        #expect(fastLink.layers == .all && fastLink.switchesUp == 1 && fastLink.switchesDown == 0, "\(fastLink)")
        // Every TL2 packet from its second second on reached it.
        let tl2Sent = try sent.filter { try Self.descriptor($0).d.temporalLayer == 2 }.count
        let tl2Got = try fast.got.filter { try Self.descriptor($0.bytes).d.temporalLayer == 2 }.count
        #expect(tl2Got >= tl2Sent - 45, "TL2: \(tl2Got) of \(tl2Sent)")
        // The slow one: its queue never overflowed (every layer at the start overflowed it), and
        // after one trial it stays on half.
        #expect(slow.link.dropped == 0, "the slow link dropped \(slow.link.dropped)")
        #expect(slowLink.layers == .half && slowLink.switchesDown <= 1, "\(slowLink)")
    }

    /// The stream dips to a third for 3 s every 8 s (as an encoder's does after a keyframe): a
    /// trial of every layer in a dip proves nothing about the stream's usual rate, so it is not
    /// taken as passed. In CI the slow viewer of a room was raised to every layer in each dip,
    /// drowned when the stream came back, lost packets, asked for a keyframe (the next dip)
    /// and froze 1.8 s in 30 (`aSlowViewerGetsFewerLayersAndTheOthersAreNotTouched`).
    @Test func aTrialInADipOfTheStreamIsNotTakenAsPassed() throws {
        let dips = [5...7, 13...15, 21...23, 29...31]
        let (_, slow, relay, _) = try Self.run(seconds: 36, slowRate: 500_000, dips: dips)
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        let late = slow.link.drops.filter { $0 >= 5_000 * ms }
        print("dipping stream, slow viewer: \(downlink), told \(slow.told), drops after 4 s \(late.count) of \(slow.link.dropped)")
        // Its trials fail on the queue they start (at 720 kbit/s into 500), before it overflows.
        #expect(late.count <= 10, "\(late.count) dropped after 4 s: \(late.map { $0 / ms })")
        #expect(downlink.layers == .half, "\(downlink) told \(slow.told)")
    }

    /// A link that carries the base layer (180 kbit/s) but not half the frames (360): the base
    /// layer, a quarter of the frames, every one of them whole.
    @Test func aSlowerViewerGetsTheBaseLayer() throws {
        let (_, slow, relay, _) = try Self.run(seconds: 20, slowRate: 260_000)
        let late = try slow.got.filter { $0.at >= 12_000 * ms }.map { try Self.descriptor($0.bytes) }
        let above = late.filter { ($0.d.temporalLayer ?? 0) > 0 }.count
        #expect(late.count > 60 && Double(above) < 0.25 * Double(late.count), "TL1/TL2 packets \(above) of \(late.count) in the last 9 s")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        print("slower viewer: \(downlink), told \(slow.told), link drops \(slow.link.dropped)")
        #expect(slow.told.contains(.base) && !slow.told.contains(.keyframes), "\(slow.told)")
        let sequences = late.map(\.sequence)
        let holes = zip(sequences, sequences.dropFirst()).filter { $1 != $0 &+ 1 }.count
        #expect(holes <= slow.link.dropped, "\(holes) holes, \(slow.link.dropped) dropped by the link")
    }

    /// A stream of two layers (TL0 half of it, as a presenter of an older version sends):
    /// the slow viewer gets its base layer, there being no half between.
    @Test func aTwoLayerStreamGoesFromAllToItsBase() throws {
        let (_, slow, _, _) = try Self.run(seconds: 12, slowRate: 500_000, pattern: [0, 1])
        #expect(slow.told.first == .base && !slow.told.contains(.half), "\(slow.told)")
    }

    /// A viewer whose link carries the whole stream keeps it (none of its packets renumbered).
    @Test func aViewerWithRoomToSpareKeepsEveryLayer() throws {
        let (_, slow, relay, sent) = try Self.run(seconds: 10, slowRate: 2_000_000)
        #expect(slow.got.count >= sent.count - 3 && slow.got.map(\.bytes) == Array(sent.prefix(slow.got.count)), "\(slow.got.count) of \(sent.count)")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        #expect(downlink.switchesDown == 0)
    }

    /// Issue 38: a viewer on a Wi-Fi link with no bottleneck, every packet delayed 10–30 ms on
    /// its own (reordered), keeps every layer: its feedback reports the overtaken packets lost
    /// and then received, and its delays jump about, and neither is congestion.
    @Test func aJitteryLinkWithoutABottleneckKeepsEveryLayer() throws {
        let (_, slow, relay, sent) = try Self.run(seconds: 20, slowRate: nil, slowJitter: 20 * ms)
        #expect(slow.got.count >= sent.count - 10, "\(slow.got.count) of \(sent.count)")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        print("jittery viewer: \(downlink), told \(slow.told)")
        #expect(downlink.switchesDown == 0 && downlink.layers == .all && slow.told.isEmpty, "\(downlink) told \(slow.told)")
    }

    /// The same with 5 % random loss on top (no queue, no rising delay): the link's loss, for
    /// NACK and FEC to repair, not congestion (GoogCC acts on loss only over 10 %). Before, loss
    /// over 5 % in a second sent the viewer to the base layer, and its trials up failed on loss
    /// over 2 %: a Wi-Fi viewer lost half its frames for good.
    @Test func aJitteryLinkWithRandomLossKeepsEveryLayer() throws {
        let (_, slow, relay, sent) = try Self.run(seconds: 20, slowRate: nil, slowJitter: 20 * ms, slowLoss: 0.05)
        #expect(slow.got.count >= sent.count * 9 / 10, "\(slow.got.count) of \(sent.count)")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        print("jittery, lossy viewer: \(downlink), told \(slow.told), dropped \(slow.link.dropped)")
        #expect(slow.link.dropped > sent.count / 40, "the link lost \(slow.link.dropped)")
        #expect(downlink.switchesDown == 0 && downlink.layers == .all && slow.told.isEmpty, "\(downlink) told \(slow.told)")
    }

    /// 5 % random loss both ways (transport feedback lost too) and packets reordered by up to
    /// 60 ms, no bottleneck, 16 draws of it: a second of 90 packets at 5 % loses over 10 % now
    /// and then by chance alone, and that is not congestion. Before, the relay stepped the
    /// viewer down in most draws (6 of 8 at 40 ms), as it did one run in ten of the network
    /// bench's `room-slow-jitter`: resends refused over the lowered budget, keyframes asked for,
    /// 61 frames of 231 shown.
    @Test func randomLossOfFivePercentIsNotCongestionWhateverTheDraw() throws {
        var downs: [Int] = [], got = 0, sentCount = 0
        for seed in 1...16 {
            let (_, slow, relay, sent) = try Self.run(seconds: 15, slowRate: nil, slowJitter: 60 * ms, slowLoss: 0.05, feedbackLoss: 0.05,
                                                      seed: UInt64(seed))
            let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
            downs.append(downlink.switchesDown)
            got += slow.got.count
            sentCount += sent.count
        }
        print("5 % loss, 60 ms reordering, 16 draws: steps down \(downs), got \(got) of \(sentCount)")
        #expect(downs.reduce(0, +) <= 1, "\(downs)")
        #expect(got >= sentCount * 9 / 10, "got \(got) of \(sentCount)")
    }

    /// A policer, not a queue: 500 kbit/s for the 720 kbit/s stream with 60 ms of buffer (a frame's burst fits) loses
    /// about 30 % with no queue to see. That loss is far beyond chance: down to half the frames
    /// at once, and little lost after.
    @Test func aPolicedLinkThatLosesAThirdIsSteppedDownAtOnce() throws {
        let (_, slow, relay, _) = try Self.run(seconds: 12, slowRate: 500_000, slowQueue: 60 * ms)
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        let early = slow.link.drops.filter { $0 < 3_000 * ms }.count, late = slow.link.drops.filter { $0 >= 4_000 * ms }.count
        print("policed viewer: \(downlink), told \(slow.told), drops in the first 2 s \(early), after 3 s \(late)")
        #expect(slow.told.first == .half, "\(slow.told)")
        #expect(late <= 20, "dropped \(late) after its first 3 s")
    }

    /// A link that carries less than the base layer (100 kbit/s for 180): keyframes only, one
    /// asked for every 5 s (trials of the base layer aside), and the viewer told (`link` …
    /// `keyframes`).
    @Test func aLinkThatCarriesLessThanTheBaseGetsKeyframesOnly() throws {
        let (fast, slow, relay, sent) = try Self.run(seconds: 30, slowRate: 100_000)
        #expect(fast.got.count >= sent.count - 3 && fast.got.map(\.bytes) == Array(sent.prefix(fast.got.count)))
        #expect(slow.told.contains(.keyframes), "\(slow.told)")
        print("keyframes only: told \(slow.told), got \(slow.got.count), dropped \(slow.link.dropped), downlinks \(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc)), peers \(relay.peerCount)")
        let downlink = try #require(relay.subscriberDownlinks(room: "class", ssrc: screen.ssrc).first { $0.address == slow.address })
        #expect(downlink.layers == .keyframes, "\(downlink) told \(slow.told)")
        // The relay's stats list it, and only it.
        #expect(Array(relay.viewersOnFewerLayers.values) == [.keyframes], "\(relay.viewersOnFewerLayers)")
        // The last 10 s: keyframes, every packet of them, and more than one.
        let late = try slow.got.filter { $0.at >= 21_000 * ms }.map { try Self.descriptor($0.bytes) }
        let starts = late.filter { $0.d.start }
        let keyframes = try slow.got.filter { $0.at >= 21_000 * ms }.filter { packet in
            try packet.bytes.withUnsafeBytes { b in
                let (_, offset, _) = try RTPHeader.parse(b)
                let d = try VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: b[offset...]))
                return d.start && b[offset + d.size] & 1 == 0
            }
        }
        // Keyframes, but for the base layer's trials (each at most 2 s: 30 frames at 15 fps).
        #expect(keyframes.count >= 2 && starts.count - keyframes.count <= 30, "\(keyframes.count) keyframes of \(starts.count) frames")
    }

    /// The viewer's side: the relay repeating itself makes no new event; a change does.
    @Test func aRepeatedLinkWordIsNotANewEvent() {
        var mapper = RoomEventMapper(server: "relay")
        let client = RoomClient(room: "class", name: "pupil", role: "viewer", subscribe: .auto)
        let words: [LinkLayers] = [.half, .half, .base, .base, .all, .all, .base, .keyframes, .keyframes]
        let names = words.map { mapper.map(.link(publisher: 1, layers: $0, estimateKbps: 300), client: client).map(\.name) }
        #expect(names == [["link"], [], ["link"], [], ["link"], [], ["link"], ["link", "warning"], []])
    }
}
