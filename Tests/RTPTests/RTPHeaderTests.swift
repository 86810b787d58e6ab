import Testing
@testable import RTP
import TestSupport

/// RTP fixed header, RFC 3550 §5.1: byte 0 = V(2) P(1) X(1) CC(4), byte 1 = M(1) PT(7),
/// then sequence number (16), timestamp (32) and SSRC (32), all big-endian.
@Suite struct RTPHeaderTests {
    @Test func marshalsTheFixedHeaderByteForByte() {
        let h = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0x1234, timestamp: 0xAABB_CCDD, ssrc: 0x1122_3344)
        #expect(marshal(h) == [0x80, 0xE0, 0x12, 0x34, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44])

        let plain = RTPHeader(marker: false, payloadType: 0, sequenceNumber: 0xFFFF, timestamp: 1, ssrc: 0xFFFF_FFFF)
        #expect(marshal(plain) == [0x80, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF])
    }

    @Test func marshalsPaddingExtensionAndCSRCCountBits() {
        var h = RTPHeader(marker: false, payloadType: 127, sequenceNumber: 0, timestamp: 0, ssrc: 0)
        h.padding = true
        #expect(marshal(h)[0] == 0xA0)
        h.padding = false
        h.hasExtension = true
        #expect(marshal(h)[0] == 0x90)
        h.hasExtension = false
        h.csrcCount = 15
        #expect(marshal(h)[0] == 0x8F)
        h.padding = true
        h.hasExtension = true
        h.marker = true
        #expect(Array(marshal(h)[0...1]) == [0xBF, 0xFF])
    }

    @Test func parsesAPlainPacket() throws {
        let packet: [UInt8] = [0x80, 0xE0, 0x12, 0x34, 0xAA, 0xBB, 0xCC, 0xDD, 0x11, 0x22, 0x33, 0x44, 0xDE, 0xAD]
        let (h, offset, length) = try parseHeader(packet)
        #expect(h == RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0x1234, timestamp: 0xAABB_CCDD, ssrc: 0x1122_3344))
        #expect(offset == 12)
        #expect(length == 2)
    }

    @Test(arguments: [
        RTPHeader(marker: false, payloadType: 0, sequenceNumber: 0, timestamp: 0, ssrc: 0),
        RTPHeader(marker: true, payloadType: 127, sequenceNumber: 0xFFFF, timestamp: 0xFFFF_FFFF, ssrc: 0xFFFF_FFFF),
        RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0x8000, timestamp: 0x8000_0000, ssrc: 0x8000_0001),
        RTPHeader(marker: false, payloadType: 111, sequenceNumber: 1, timestamp: 90_000, ssrc: 0xDEAD_BEEF),
    ])
    func marshalThenParseGivesTheSameHeader(_ header: RTPHeader) throws {
        let bytes = marshal(header)
        let (parsed, offset, length) = try parseHeader(bytes)
        #expect(parsed == header)
        #expect(offset == 12)
        #expect(length == 0)
        #expect(marshal(parsed) == bytes)
    }

    @Test func skipsCSRCs() throws {
        let packet: [UInt8] = [0x82, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0xC1, 0xC1, 0xC1, 0xC1, 0xC2, 0xC2, 0xC2, 0xC2,
                               0xAB, 0xCD]
        let (h, offset, length) = try parseHeader(packet)
        #expect(h.csrcCount == 2)
        #expect(h.payloadType == 96 && !h.marker && h.sequenceNumber == 1 && h.timestamp == 2 && h.ssrc == 3)
        #expect(offset == 20)
        #expect(length == 2)
        #expect(marshal(h) == Array(packet[0..<12]))
    }

    @Test func skipsTheHeaderExtension() throws {
        // RFC 3550 §5.3.1: 16-bit profile, 16-bit length in 32-bit words (excluding this word).
        let packet: [UInt8] = [0x90, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0xBE, 0xDE, 0x00, 0x01, 0x10, 0xFF, 0x00, 0x00,
                               0x01, 0x02, 0x03]
        let (h, offset, length) = try parseHeader(packet)
        #expect(h.hasExtension)
        #expect(offset == 20)
        #expect(length == 3)
    }

    @Test func skipsCSRCsThenTheExtension() throws {
        let packet: [UInt8] = [0x91, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0xC1, 0xC1, 0xC1, 0xC1,
                               0x10, 0x00, 0x00, 0x02, 1, 2, 3, 4, 5, 6, 7, 8,
                               0x77]
        let (h, offset, length) = try parseHeader(packet)
        #expect(h.csrcCount == 1 && h.hasExtension)
        #expect(offset == 28)
        #expect(length == 1)
    }

    @Test func removesPadding() throws {
        // The last octet counts the padding octets, itself included (RFC 3550 §5.1).
        let packet: [UInt8] = [0xA0, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0x01, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, 0x05]
        let (h, offset, length) = try parseHeader(packet)
        #expect(h.padding)
        #expect(offset == 12)
        #expect(length == 3)

        // A packet of padding only has an empty payload.
        let onlyPadding: [UInt8] = Array(packet[0..<12]) + [0x00, 0x00, 0x00, 0x04]
        #expect(try parseHeader(onlyPadding).payloadLength == 0)
    }

    @Test func rejectsBadPadding() {
        let header: [UInt8] = [0xA0, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03]
        #expect(throws: RTPParseError.self) { try parseHeader(header) }  // padding flag, nothing after the header
        #expect(throws: RTPParseError.self) { try parseHeader(header + [0x01, 0x00]) }  // count 0
        #expect(throws: RTPParseError.self) { try parseHeader(header + [0x01, 0x03]) }  // count past the header
        #expect(throws: RTPParseError.self) { try parseHeader(header + [0x01, 0xFF]) }
    }

    @Test func rejectsEveryTruncationOfTheHeaders() {
        let packet: [UInt8] = [0x91, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0xC1, 0xC1, 0xC1, 0xC1,
                               0x10, 0x00, 0x00, 0x02, 1, 2, 3, 4, 5, 6, 7, 8]
        for n in 0..<packet.count {
            #expect(throws: RTPParseError.self, "prefix of \(n) bytes") { try parseHeader(Array(packet[0..<n])) }
        }
        #expect(throws: Never.self) { try parseHeader(packet) }
    }

    @Test func errorsNameTheProblem() {
        let short = #expect(throws: RTPParseError.self) { try parseHeader([0x80, 0x60, 0x00]) }
        #expect(short?.description.contains("3 bytes") == true)
        let version = #expect(throws: RTPParseError.self) { try parseHeader([0x40] + [UInt8](repeating: 0, count: 11)) }
        #expect(version?.description.contains("version 1") == true)
    }

    @Test(arguments: [UInt8(0x00), 0x40, 0xC0])
    func rejectsVersionsOtherThan2(_ firstByte: UInt8) {
        let packet = [firstByte] + [UInt8](repeating: 0, count: 19)
        #expect(throws: RTPParseError.self) { try parseHeader(packet) }
    }

    @Test func rejectsAnExtensionLongerThanThePacket() {
        let packet: [UInt8] = [0x90, 0x60, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03,
                               0xBE, 0xDE, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00]
        #expect(throws: RTPParseError.self) { try parseHeader(packet) }
    }

    @Test func randomBytesNeverCrashAndParsedBoundsStayInside() {
        var rng = SplitMix64(seed: 0x5EED)
        var parsedCount = 0
        for _ in 0..<20_000 {
            let count = Int.random(in: 0...48, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if count > 0, Bool.random(using: &rng) { bytes[0] = 0x80 | (bytes[0] & 0x3F) }  // mostly version 2
            guard let (h, offset, length) = try? parseHeader(bytes) else { continue }
            parsedCount += 1
            #expect(offset >= 12 + 4 * Int(h.csrcCount))
            #expect(length >= 0 && offset + length <= bytes.count)
            #expect(marshal(h) == Array(bytes[0..<12]))
        }
        #expect(parsedCount > 500)  // the property was exercised on many packets
    }
}
