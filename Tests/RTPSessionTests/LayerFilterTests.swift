import Testing
import TestSupport
@testable import RTPSession

/// A relay's per-viewer layer filter: whole frames of the layers asked for, numbered without
/// holes, NACKs mapped back.
@Suite struct LayerFilterTests {
    /// A two-layer stream: picture p is TL(p % 2), 3 packets each, sequence numbers from `first`.
    struct Packet: Equatable {
        var sequence: UInt16, picture: UInt16, layer: UInt8, starts: Bool
    }
    static func stream(pictures: Range<UInt16>, first: UInt16 = 65530, packetsPerPicture: Int = 3) -> [Packet] {
        var out: [Packet] = []
        var seq = first
        for p in pictures {
            for i in 0..<packetsPerPicture {
                out.append(Packet(sequence: seq, picture: p & 0x7FFF, layer: UInt8(p % 2), starts: i == 0))
                seq &+= 1
            }
        }
        return out
    }

    static func run(_ filter: inout LayerFilter, _ packets: [Packet], switches: [Int: UInt8?] = [:])
        -> [(in: Packet, out: (sequence: UInt16, pictureID: UInt16?))] {
        var forwarded: [(in: Packet, out: (sequence: UInt16, pictureID: UInt16?))] = []
        for (i, p) in packets.enumerated() {
            if let s = switches[i] { filter.maxLayer = s }
            if let out = filter.forward(sequence: p.sequence, pictureID: p.picture, temporalLayer: p.layer, layerSync: p.layer > 0,
                                        startsFrame: p.starts) {
                forwarded.append((p, out))
            }
        }
        return forwarded
    }

    @Test func everythingPassesUnchangedWithoutALimit() {
        var f = LayerFilter()
        let packets = Self.stream(pictures: 32760..<32780)  // both counters wrap
        let got = Self.run(&f, packets)
        #expect(got.count == packets.count)
        #expect(got.allSatisfy { $0.out.sequence == $0.in.sequence && $0.out.pictureID == $0.in.picture })
        #expect(!f.isShifted && f.original(123) == 123)
    }

    @Test func theBaseLayerAloneRunsOnWithoutHoles() {
        var f = LayerFilter()
        f.maxLayer = 0
        let packets = Self.stream(pictures: 32760..<32780)
        let got = Self.run(&f, packets)
        #expect(got.allSatisfy { $0.in.layer == 0 })
        #expect(got.count == 30)  // 10 base pictures × 3
        // Sequence numbers one after another (across the wrap), pictures too.
        #expect(zip(got, got.dropFirst()).allSatisfy { $1.out.sequence == $0.out.sequence &+ 1 }, "\(got.map(\.out.sequence))")
        let pictures = got.compactMap(\.out.pictureID).enumerated().filter { $0.offset % 3 == 0 }.map(\.element)
        #expect(zip(pictures, pictures.dropFirst()).allSatisfy { $1 == ($0 + 1) & 0x7FFF }, "\(pictures)")
        // Every outgoing number names its source packet (a NACK), and nothing else does.
        #expect(got.allSatisfy { f.original($0.out.sequence) == $0.in.sequence })
        #expect(f.droppedPackets == 30 && f.droppedPictures == 10)
    }

    @Test func switchesHappenAtFrameBoundariesAndUpOnlyAtALayerSyncFrame() {
        var f = LayerFilter()
        let packets = Self.stream(pictures: 0..<12)
        // Asked to go down in the middle of picture 1 (a TL1 frame, already started): it is kept
        // whole, and 3 (the next TL1) is dropped. Asked up in the middle of picture 6 (TL0):
        // picture 7 (TL1, Y) is the first upper frame again.
        let got = Self.run(&f, packets, switches: [4: UInt8?.some(0), 19: UInt8?.none])
        let pictures = Set(got.map(\.in.picture)).sorted()
        #expect(pictures == [0, 1, 2, 4, 6, 7, 8, 9, 10, 11], "\(pictures)")
        for p in pictures { #expect(got.filter { $0.in.picture == p }.count == 3, "picture \(p) is whole") }
        #expect(zip(got, got.dropFirst()).allSatisfy { $1.out.sequence == $0.out.sequence &+ 1 })
    }

    @Test func upSwitchWaitsForALayerSyncFrame() {
        var f = LayerFilter()
        f.maxLayer = 0
        var forwarded: [UInt16] = []
        // Pictures 0…7; 1 is dropped (TL0 only); asked up from 2 on, TL1 frames 3 and 5 lack
        // Y (they need an upper frame the viewer never got): up-switching waits for 7.
        for p: UInt16 in 0..<8 {
            if p == 2 { f.maxLayer = nil }
            let layer = UInt8(p % 2)
            if f.forward(sequence: p, pictureID: p, temporalLayer: layer, layerSync: p == 7, startsFrame: true) != nil { forwarded.append(p) }
        }
        #expect(forwarded == [0, 2, 4, 6, 7])
        #expect(f.currentMax == nil)
    }

    @Test func aLatePacketIsNumberedAmongTheOthers() {
        var f = LayerFilter()
        f.maxLayer = 0
        // Picture 0: 100, 101; picture 1 (TL1): 102, 103 dropped; picture 2: 104, 105 — and
        // 101 comes after 104.
        let order: [(UInt16, UInt16, UInt8)] = [(100, 0, 0), (102, 1, 1), (103, 1, 1), (104, 2, 0), (101, 0, 0), (105, 2, 0)]
        var out: [UInt16: UInt16] = [:]
        for (seq, pic, layer) in order {
            if let o = f.forward(sequence: seq, pictureID: pic, temporalLayer: layer, layerSync: layer > 0, startsFrame: true) {
                out[seq] = o.sequence
            }
        }
        #expect(out == [100: 100, 101: 101, 104: 102, 105: 103])
        #expect(f.original(101) == 101 && f.original(102) == 104 && f.original(103) == 105 && f.original(104) == nil)
    }

    /// Random switches and a little reordering: every packet forwarded gets a number of its
    /// own, frames are whole, and NACKs map back.
    @Test func randomSwitchesKeepFramesWholeAndNumbersUnique() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<50 {
            var f = LayerFilter()
            var packets = Self.stream(pictures: 0..<200, first: UInt16(truncatingIfNeeded: rng.next()), packetsPerPicture: Int(rng.next() % 4) + 1)
            for i in stride(from: 0, to: packets.count - 1, by: 7) where rng.next() % 3 == 0 { packets.swapAt(i, i + 1) }
            var switches: [Int: UInt8?] = [:]
            for _ in 0..<10 { switches[Int(rng.next() % UInt64(packets.count))] = .some(rng.next() % 2 == 0 ? UInt8?.some(0) : UInt8?.none) }
            let got = Self.run(&f, packets, switches: switches)
            #expect(Set(got.map(\.out.sequence)).count == got.count)
            let byPicture = Dictionary(grouping: packets, by: \.picture)
            for (p, all) in byPicture {
                let sent = got.filter { $0.in.picture == p }.count
                #expect(sent == 0 || sent == all.count, "picture \(p): \(sent) of \(all.count)")
            }
            #expect(got.suffix(100).allSatisfy { f.original($0.out.sequence) == $0.in.sequence })
        }
    }
}

