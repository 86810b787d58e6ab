import Testing
import RTP
@testable import RTCP
import TestSupport

/// Builds an SR compound into a fresh buffer and returns exactly the bytes written.
func senderReport(ssrc: UInt32 = 0x1122_3344, ntp: NTPTimestamp = NTPTimestamp(seconds: 0xE8A1_B2C3, fraction: 0x8000_0000),
                  rtpTimestamp: UInt32 = 0x0102_0304, packetCount: UInt32 = 10, octetCount: UInt32 = 12_000,
                  cname: String = "ab", bye: Bool = false) -> [UInt8] {
    var buffer = [UInt8](repeating: 0xEE, count: 2048)
    let n = buffer.withUnsafeMutableBytes {
        RTCPPacket.buildSenderReport(ssrc: ssrc, ntp: ntp, rtpTimestamp: rtpTimestamp, packetCount: packetCount,
                                     octetCount: octetCount, cname: cname, bye: bye, into: $0)
    }
    return Array(buffer[0..<n])
}

func parse(_ bytes: [UInt8]) throws -> [RTCPPacket] {
    try bytes.withUnsafeBytes { try RTCPPacket.parseCompound($0) }
}

/// SR (RFC 3550 §6.4.1), SDES (§6.5) and BYE (§6.6) as the sender writes them. Every
/// `length` is the packet size in 32-bit words minus one.
@Suite struct SenderReportBuildTests {
    @Test func srSdesByeCompoundByteForByte() {
        #expect(senderReport(bye: true) == [
            // SR: V=2 P=0 RC=0, PT=200, length 6 (28 bytes)
            0x80, 0xC8, 0x00, 0x06,
            0x11, 0x22, 0x33, 0x44,  // SSRC of sender
            0xE8, 0xA1, 0xB2, 0xC3,  // NTP timestamp, most significant word (seconds)
            0x80, 0x00, 0x00, 0x00,  // NTP timestamp, least significant word (fraction: 0.5 s)
            0x01, 0x02, 0x03, 0x04,  // RTP timestamp
            0x00, 0x00, 0x00, 0x0A,  // sender's packet count
            0x00, 0x00, 0x2E, 0xE0,  // sender's octet count (12000)
            // SDES: V=2 P=0 SC=1, PT=202, length 3 (16 bytes)
            0x81, 0xCA, 0x00, 0x03,
            0x11, 0x22, 0x33, 0x44,  // SSRC/CSRC_1
            0x01, 0x02, 0x61, 0x62,  // CNAME=1, length 2, "ab"
            0x00, 0x00, 0x00, 0x00,  // end of list (null) + padding to 32 bits
            // BYE: V=2 P=0 SC=1, PT=203, length 1 (8 bytes)
            0x81, 0xCB, 0x00, 0x01,
            0x11, 0x22, 0x33, 0x44,
        ])
    }

    @Test func withoutByeEndsAfterSdes() {
        let bytes = senderReport(cname: "user@host", bye: false)
        // "user@host" is 9 bytes: SSRC(4) + type(1) + len(1) + 9 + null(1) = 16, no further padding.
        #expect(bytes.count == 28 + 4 + 16)
        #expect(Array(bytes[28...]) == [
            0x81, 0xCA, 0x00, 0x04,
            0x11, 0x22, 0x33, 0x44,
            0x01, 0x09, 0x75, 0x73, 0x65, 0x72, 0x40, 0x68, 0x6F, 0x73, 0x74,
            0x00,
        ])
    }

    /// Per CNAME length: the SDES length field and the number of null octets (one end-of-list
    /// null, then padding to a 32-bit boundary: 1 to 4 nulls in all).
    @Test(arguments: [
        (0, 2, 2), (1, 2, 1), (2, 3, 4), (3, 3, 3), (4, 3, 2), (5, 3, 1), (6, 4, 4), (9, 4, 1), (11, 5, 3),
    ])
    func sdesIsPaddedTo32Bits(cnameLength: Int, lengthField: Int, nulls: Int) {
        let cname = String(repeating: "x", count: cnameLength)
        let sdes = Array(senderReport(cname: cname)[28...])
        #expect(sdes.count == (lengthField + 1) * 4)
        #expect(sdes.count % 4 == 0)
        let expected: [UInt8] = [0x81, 0xCA, 0x00, UInt8(lengthField), 0x11, 0x22, 0x33, 0x44, 0x01, UInt8(cnameLength)]
            + [UInt8](repeating: 0x78, count: cnameLength) + [UInt8](repeating: 0, count: nulls)
        #expect(sdes == expected)
    }

    @Test func longCnameIsCutTo255Bytes() {
        let sdes = Array(senderReport(cname: String(repeating: "a", count: 300))[28...])
        // 4 + 1 + 1 + 255 + 1 = 262 → padded to 264; + 4-byte header = 268 = 67 words.
        #expect(sdes.count == 268)
        #expect(Array(sdes[0..<4]) == [0x81, 0xCA, 0x00, 66])
        #expect(sdes[9] == 255)
        #expect(sdes[10..<265].allSatisfy { $0 == 0x61 })
        #expect(Array(sdes[265...]) == [0, 0, 0])
    }

    @Test func longCnameIsCutOnACharacterBoundary() throws {
        // 254 ASCII bytes + "é" (0xC3 0xA9): cutting at 255 bytes would leave half a character,
        // and SDES text is UTF-8 (RFC 3550 §6.5).
        let sdes = Array(senderReport(cname: String(repeating: "a", count: 254) + "é")[28...])
        let length = Int(sdes[9])
        let text = Array(sdes[10..<(10 + length)])
        #expect(length == 254)
        #expect(String(validating: text, as: UTF8.self) == String(repeating: "a", count: 254))
        #expect(sdes.count % 4 == 0)
        #expect(Int(sdes[3]) == sdes.count / 4 - 1)
        #expect(sdes[(10 + length)...].allSatisfy { $0 == 0 })
    }

    @Test func multiByteCnameKeepsItsBytes() {
        let sdes = Array(senderReport(cname: "é")[28...])
        #expect(sdes == [0x81, 0xCA, 0x00, 0x03, 0x11, 0x22, 0x33, 0x44, 0x01, 0x02, 0xC3, 0xA9, 0x00, 0x00, 0x00, 0x00])
    }

    @Test func lengthFieldsWalkTheCompoundExactly() {
        for n in [0, 1, 7, 31, 64, 200] {
            let bytes = senderReport(cname: String(repeating: "q", count: n), bye: true)
            var offset = 0
            var types: [UInt8] = []
            while offset < bytes.count {
                #expect(bytes[offset] >> 6 == 2)
                types.append(bytes[offset + 1])
                offset += (Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3]) + 1) * 4
            }
            #expect(offset == bytes.count)
            #expect(types == [200, 202, 203])
        }
    }
}

/// NTP timestamps (RFC 5905 §6; RFC 3550 §4): seconds since 1900 and a 32-bit binary fraction.
@Suite struct NTPTimestampTests {
    @Test(arguments: [
        (UInt64(0), UInt32(2_208_988_800), UInt32(0)),
        (1_500_000_000, 2_208_988_801, 0x8000_0000),  // 1.5 s
        (250_000_000, 2_208_988_800, 0x4000_0000),  // 0.25 s
        (999_999_999, 2_208_988_800, 0xFFFF_FFFB),  // ⌊(1 − 1e-9) · 2^32⌋
        (1_704_067_200_000_000_000, 3_913_056_000, 0),  // 2024-01-01T00:00:00Z
        (2_085_978_496_000_000_000, 0, 0),  // 2036-02-07T06:28:16Z: era 1 starts, seconds wrap
    ])
    func fromUnixNanoseconds(nanos: UInt64, seconds: UInt32, fraction: UInt32) {
        #expect(NTPTimestamp(unixNanos: nanos) == NTPTimestamp(seconds: seconds, fraction: fraction))
    }

    @Test func middle32IsLowSecondsAndHighFraction() {
        #expect(NTPTimestamp(seconds: 0x1234_5678, fraction: 0x9ABC_DEF0).middle32 == 0x5678_9ABC)
    }
}

/// Parsing feedback a receiver sends: RR (RFC 3550 §6.4.2), SDES, BYE, generic NACK
/// (RFC 4585 §6.2.1), PLI (§6.3.1) and FIR (RFC 5104 §4.3.1).
@Suite struct RTCPParseTests {
    @Test func parsesOwnSenderReportCompound() throws {
        let sr = RTCPPacket.senderReport(SenderReport(ssrc: 0x1122_3344, ntp: NTPTimestamp(seconds: 0xE8A1_B2C3, fraction: 0x8000_0000),
                                                      rtpTimestamp: 0x0102_0304, packetCount: 10, octetCount: 12_000))
        let sdes = RTCPPacket.sourceDescription(SourceDescription(chunks: [.init(ssrc: 0x1122_3344, cname: "ab")]))
        #expect(try parse(senderReport(bye: true)) == [sr, sdes, .goodbye(Goodbye(sources: [0x1122_3344]))])
        #expect(try parse(senderReport(bye: false)) == [sr, sdes])
    }

    @Test func parsesPLI() throws {
        // V=2 P=0 FMT=1, PT=206 (PSFB), length 2; SSRC of packet sender; SSRC of media source.
        let pli: [UInt8] = [0x81, 0xCE, 0x00, 0x02, 0xAA, 0xAA, 0xAA, 0x01, 0xBB, 0xBB, 0xBB, 0x02]
        #expect(try parse(pli) == [.pli(senderSSRC: 0xAAAA_AA01, mediaSSRC: 0xBBBB_BB02)])
    }

    @Test func parsesFIRWithTheRequestedSSRCFromTheFCI() throws {
        // FMT=4, PT=206, length 4; media source SSRC is 0 (RFC 5104 §4.3.1.2); FCI: SSRC, seq nr, reserved.
        let fir: [UInt8] = [0x84, 0xCE, 0x00, 0x04,
                            0xAA, 0xAA, 0xAA, 0x01,
                            0x00, 0x00, 0x00, 0x00,
                            0xBB, 0xBB, 0xBB, 0x02,
                            0x05, 0x00, 0x00, 0x00]
        #expect(try parse(fir) == [.fir(FullIntraRequest(senderSSRC: 0xAAAA_AA01, mediaSSRC: 0,
                                                         entries: [.init(ssrc: 0xBBBB_BB02, sequenceNumber: 5)]))])
    }

    @Test func parsesGenericNACK() throws {
        // FMT=1, PT=205 (RTPFB), length 3; one FCI: PID 0x0010, BLP 0x0003.
        let nack: [UInt8] = [0x81, 0xCD, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x10, 0x00, 0x03]
        let expected = GenericNACK(senderSSRC: 1, mediaSSRC: 2, pairs: [.init(packetID: 0x0010, lostBitmask: 0x0003)])
        #expect(try parse(nack) == [.nack(expected)])
        #expect(expected.sequenceNumbers == [0x10, 0x11, 0x12])
    }

    @Test func parsesReceiverReportCompoundWithPaddingAndUnknownTypes() throws {
        let rr: [UInt8] = [0x81, 0xC9, 0x00, 0x07, 0x00, 0x00, 0x00, 0x09] + [UInt8](repeating: 0x11, count: 24)
        let sdes: [UInt8] = [0x81, 0xCA, 0x00, 0x02, 0x00, 0x00, 0x00, 0x09, 0x01, 0x01, 0x72, 0x00]
        let app: [UInt8] = [0x80, 0xCC, 0x00, 0x02, 0x00, 0x00, 0x00, 0x09, 0x6E, 0x61, 0x6D, 0x65]  // APP "name"
        let remb: [UInt8] = [0x8F, 0xCE, 0x00, 0x02, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00]  // PSFB FMT 15
        let tmmbr: [UInt8] = [0x83, 0xCD, 0x00, 0x02, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00]  // RTPFB FMT 3
        // Last packet padded (P=1): its length counts the 4 padding octets, the last being the count.
        let paddedPLI: [UInt8] = [0xA1, 0xCE, 0x00, 0x03, 0, 0, 0, 9, 0, 0, 0, 7, 0, 0, 0, 4]
        let packets = try parse(rr + sdes + app + remb + tmmbr + paddedPLI)
        let block = ReceptionReport(ssrc: 0x1111_1111, fractionLost: 0x11, cumulativeLost: 0x11_1111, extendedHighestSequence: 0x1111_1111,
                                    jitter: 0x1111_1111, lastSenderReport: 0x1111_1111, delaySinceLastSenderReport: 0x1111_1111)
        #expect(packets == [.receiverReport(ReceiverReport(ssrc: 9, reports: [block])),
                            .sourceDescription(SourceDescription(chunks: [.init(ssrc: 9, cname: "r")])), .unknown(packetType: 204),
                            .unknown(packetType: 206), .unknown(packetType: 205), .pli(senderSSRC: 9, mediaSSRC: 7)])
    }

    @Test func emptyDatagramHasNoPackets() throws {
        #expect(try parse([]) == [])
    }

    @Test(arguments: [
        [UInt8]([0x80]),
        [0x80, 0xC8, 0x00],
        [0x40, 0xC9, 0x00, 0x00],  // version 1
        [0x00, 0xC9, 0x00, 0x00],  // version 0
        [0x80, 0xC8, 0x00, 0x06, 0, 0, 0, 1],  // length runs past the datagram
        [0x80, 0xC9, 0xFF, 0xFF],
        [0x81, 0xCE, 0x00, 0x01, 0, 0, 0, 1],  // PLI without the media SSRC
        [0x84, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 0],  // FIR without an FCI entry
        [0x81, 0xCD, 0x00, 0x01, 0, 0, 0, 1],  // NACK without the media SSRC
        [0x81, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2, 0x81],  // trailing byte after a valid PLI
    ])
    func malformedInputThrows(_ bytes: [UInt8]) {
        #expect(throws: RTPParseError.self) { try parse(bytes) }
    }

    @Test func everyCutOfACompoundThrowsUnlessOnAPacketBoundary() throws {
        let bytes = senderReport(cname: "screenshare@example", bye: true)
        let boundaries: Set<Int> = [0, 28, bytes.count - 8, bytes.count]
        for n in 0...bytes.count {
            let prefix = Array(bytes[0..<n])
            if boundaries.contains(n) {
                #expect(try parse(prefix).count == [0, 1, 2, 3][boundaries.sorted().firstIndex(of: n)!])
            } else {
                #expect(throws: RTPParseError.self, "prefix of \(n) bytes") { try parse(prefix) }
            }
        }
    }

    @Test func randomBytesNeverCrash() {
        var rng = SplitMix64(seed: 3550)
        var parsed = 0
        for _ in 0..<20_000 {
            var bytes = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if bytes.count >= 4 {
                // P clear: a random padding count is rejected (RFC 3550 §6.4.1) and would hide the rest.
                bytes[0] = 0x80 | (bytes[0] & 0x1F)
                bytes[1] = UInt8.random(in: 200...206, using: &rng)
                bytes[2] = 0
                bytes[3] = UInt8.random(in: 0...16, using: &rng)
            }
            if let packets = try? parse(bytes) { parsed += 1; #expect(packets.count <= bytes.count / 4) }
        }
        #expect(parsed > 400)  // the body of each packet type is checked too, so fewer random ones pass
    }
}
