import CZlib
import Crypto

/// A STUN message (RFC 8489) as ICE uses it (RFC 8445, RFC 8838's ICE-lite side): the header, the
/// attributes ICE needs, and where MESSAGE-INTEGRITY and FINGERPRINT sit so they can be checked.
///
/// Parsing never trusts a length: every attribute must fit the message, the message must fit
/// the datagram, and anything that does not is a `STUNError` naming what was wrong.
public struct STUNMessage: Sendable, Equatable {
    /// RFC 8489 §5: the fixed value in every message, which sets STUN apart from other traffic.
    public static let magicCookie: UInt32 = 0x2112_A442
    public static let headerSize = 20
    /// FINGERPRINT's XOR value (RFC 8489 §14.7): "STUN" in ASCII.
    static let fingerprintXOR: UInt32 = 0x5354_554E

    /// Message types (method and class) that ICE uses.
    public enum MessageType: UInt16, Sendable {
        case bindingRequest = 0x0001
        case bindingIndication = 0x0011
        case bindingSuccess = 0x0101
        case bindingError = 0x0111
    }

    /// Attribute types (RFC 8489 §18.3, RFC 8445 §16.1).
    public enum Attribute: UInt16, Sendable {
        case username = 0x0006
        case messageIntegrity = 0x0008
        case errorCode = 0x0009
        case unknownAttributes = 0x000A
        case xorMappedAddress = 0x0020
        case priority = 0x0024
        case useCandidate = 0x0025
        case software = 0x8022
        case fingerprint = 0x8028
        case iceControlled = 0x8029
        case iceControlling = 0x802A
    }

    public var type: UInt16
    public var transactionID: [UInt8]
    public var username: String?
    public var priority: UInt32?
    public var useCandidate = false
    /// ICE-CONTROLLING's or ICE-CONTROLLED's tie-breaker; which one in `controlling`.
    public var tieBreaker: UInt64?
    public var controlling: Bool?
    public var xorMappedAddress: STUNAddress?
    public var errorCode: Int?
    /// Offset of the MESSAGE-INTEGRITY attribute (its header), when there is one.
    public var integrityOffset: Int?
    /// Offset of the FINGERPRINT attribute, when there is one.
    public var fingerprintOffset: Int?
    /// Comprehension-required attributes (type < 0x8000) this parser does not know: a request
    /// carrying any is answered with a 420 error (RFC 8489 §6.3.1).
    public var unknownRequired: [UInt16] = []

    public init(type: MessageType, transactionID: [UInt8]) {
        self.type = type.rawValue
        self.transactionID = transactionID
    }

    public var messageType: MessageType? { MessageType(rawValue: type) }

    /// Whether a datagram looks like STUN: first two bits 0 (RFC 7983 §7: first octet 0–3), the
    /// magic cookie, and a length that is a multiple of 4 and matches the datagram.
    public static func isSTUN(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= headerSize, bytes[0] < 4 else { return false }
        let length = Int(bytes[2]) << 8 | Int(bytes[3])
        return length % 4 == 0 && length + headerSize == bytes.count && readU32(bytes, 4) == magicCookie
    }

    /// Parses a datagram.
    /// - Throws: `STUNError` when it is not a well-formed STUN message.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws -> STUNMessage {
        guard bytes.count >= headerSize else { throw STUNError("\(bytes.count) bytes: shorter than a STUN header (20)") }
        guard bytes[0] & 0xC0 == 0 else { throw STUNError("the first two bits are not 0: not STUN") }
        guard readU32(bytes, 4) == magicCookie else { throw STUNError("no magic cookie: not STUN (or the RFC 3489 kind)") }
        let length = Int(readU16(bytes, 2))
        guard length % 4 == 0 else { throw STUNError("message length \(length) is not a multiple of 4") }
        guard length + headerSize == bytes.count else {
            throw STUNError("message length \(length) does not match the \(bytes.count - headerSize) bytes after the header")
        }
        var message = STUNMessage(type: .bindingRequest, transactionID: Array(bytes[8..<20]))
        message.type = readU16(bytes, 0)
        var offset = headerSize
        while offset < bytes.count {
            guard offset + 4 <= bytes.count else { throw STUNError("attribute header at \(offset) runs past the message") }
            let type = readU16(bytes, offset), valueLength = Int(readU16(bytes, offset + 2))
            let value = offset + 4
            guard value + valueLength <= bytes.count else {
                throw STUNError("attribute 0x\(String(type, radix: 16)) of \(valueLength) bytes at \(offset) runs past the message")
            }
            if message.fingerprintOffset != nil {
                throw STUNError("attribute 0x\(String(type, radix: 16)) after FINGERPRINT")
            }
            // After MESSAGE-INTEGRITY only FINGERPRINT counts (RFC 8489 §14.5); others are ignored.
            let afterIntegrity = message.integrityOffset != nil && type != Attribute.fingerprint.rawValue
            if !afterIntegrity {
                try message.read(attribute: type, bytes: UnsafeRawBufferPointer(rebasing: bytes[value..<(value + valueLength)]),
                                 at: offset)
            }
            offset = value + (valueLength + 3) & ~3
        }
        guard offset == bytes.count else { throw STUNError("the last attribute's padding runs past the message") }
        return message
    }

    private mutating func read(attribute type: UInt16, bytes v: UnsafeRawBufferPointer, at offset: Int) throws {
        func need(_ n: Int, _ name: String) throws {
            guard v.count == n else { throw STUNError("\(name) is \(v.count) bytes, not \(n)") }
        }
        switch Attribute(rawValue: type) {
        case .username:
            guard v.count <= 513 else { throw STUNError("USERNAME is \(v.count) bytes (at most 513)") }
            guard let text = String(validating: v, as: UTF8.self) else { throw STUNError("USERNAME is not UTF-8") }
            username = text
        case .messageIntegrity:
            try need(20, "MESSAGE-INTEGRITY")
            integrityOffset = offset
        case .fingerprint:
            try need(4, "FINGERPRINT")
            fingerprintOffset = offset
        case .priority:
            try need(4, "PRIORITY")
            priority = Self.readU32(v, 0)
        case .useCandidate:
            try need(0, "USE-CANDIDATE")
            useCandidate = true
        case .iceControlled, .iceControlling:
            try need(8, type == Attribute.iceControlling.rawValue ? "ICE-CONTROLLING" : "ICE-CONTROLLED")
            tieBreaker = UInt64(Self.readU32(v, 0)) << 32 | UInt64(Self.readU32(v, 4))
            controlling = type == Attribute.iceControlling.rawValue
        case .xorMappedAddress:
            xorMappedAddress = try STUNAddress(xored: v, transactionID: transactionID)
        case .errorCode:
            guard v.count >= 4 else { throw STUNError("ERROR-CODE is \(v.count) bytes (at least 4)") }
            errorCode = Int(v[2] & 0x7) * 100 + Int(v[3])
        case .software, .unknownAttributes:
            break
        case nil:
            if type < 0x8000 && unknownRequired.count < 16 { unknownRequired.append(type) }
        }
    }

    /// Whether MESSAGE-INTEGRITY is there and right for `key` (ICE: the receiver's password).
    public func hasValidIntegrity(in bytes: UnsafeRawBufferPointer, key: [UInt8]) -> Bool {
        guard let mi = integrityOffset, mi + 24 <= bytes.count else { return false }
        let expected = Self.integrity(of: bytes, upTo: mi, key: key)
        // Constant time: the HMAC is a secret's proof.
        var diff: UInt8 = 0
        for i in 0..<20 { diff |= expected[i] ^ bytes[mi + 4 + i] }
        return diff == 0
    }

    /// Whether FINGERPRINT is there and right.
    public func hasValidFingerprint(in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let fp = fingerprintOffset, fp + 8 == bytes.count else { return false }
        return Self.fingerprint(of: bytes, upTo: fp) == Self.readU32(bytes, fp + 4)
    }

    /// HMAC-SHA1 of the message before `offset` with its length field covering the
    /// MESSAGE-INTEGRITY attribute that starts there (RFC 8489 §14.5).
    static func integrity(of bytes: UnsafeRawBufferPointer, upTo offset: Int, key: [UInt8]) -> [UInt8] {
        var hmac = HMAC<Insecure.SHA1>(key: SymmetricKey(data: key))
        let length = UInt16(offset + 24 - headerSize)
        hmac.update(data: UnsafeRawBufferPointer(rebasing: bytes[0..<2]))
        hmac.update(data: [UInt8(length >> 8), UInt8(length & 0xFF)])
        hmac.update(data: UnsafeRawBufferPointer(rebasing: bytes[4..<offset]))
        return Array(hmac.finalize())
    }

    /// CRC-32 of the message before `offset` with its length field covering the FINGERPRINT
    /// attribute that starts there, XORed with "STUN" (RFC 8489 §14.7).
    static func fingerprint(of bytes: UnsafeRawBufferPointer, upTo offset: Int) -> UInt32 {
        let length = UInt16(offset + 8 - headerSize)
        let header: [UInt8] = [bytes[0], bytes[1], UInt8(length >> 8), UInt8(length & 0xFF)]
        var crc = header.withUnsafeBufferPointer { crc32(0, $0.baseAddress, 4) }
        crc = crc32(crc, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + 4, uInt(offset - 4))
        return UInt32(truncatingIfNeeded: crc) ^ fingerprintXOR
    }

    static func readU16(_ b: UnsafeRawBufferPointer, _ i: Int) -> UInt16 { UInt16(b[i]) << 8 | UInt16(b[i + 1]) }
    static func readU32(_ b: UnsafeRawBufferPointer, _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
}

/// A transport address as XOR-MAPPED-ADDRESS carries it (RFC 8489 §14.2).
public enum STUNAddress: Sendable, Equatable {
    case v4(address: (UInt8, UInt8, UInt8, UInt8), port: UInt16)
    case v6(address: [UInt8], port: UInt16)

    public static func == (a: STUNAddress, b: STUNAddress) -> Bool {
        switch (a, b) {
        case let (.v4(x, p), .v4(y, q)): return x == y && p == q
        case let (.v6(x, p), .v6(y, q)): return x == y && p == q
        default: return false
        }
    }

    public var port: UInt16 {
        switch self {
        case .v4(_, let p), .v6(_, let p): return p
        }
    }

    init(xored v: UnsafeRawBufferPointer, transactionID: [UInt8]) throws {
        guard v.count >= 4 else { throw STUNError("XOR-MAPPED-ADDRESS is \(v.count) bytes") }
        let port = STUNMessage.readU16(v, 2) ^ UInt16(STUNMessage.magicCookie >> 16)
        let mask = Self.mask(transactionID)
        switch v[1] {
        case 1:
            guard v.count == 8 else { throw STUNError("an IPv4 XOR-MAPPED-ADDRESS is \(v.count) bytes, not 8") }
            self = .v4(address: (v[4] ^ mask[0], v[5] ^ mask[1], v[6] ^ mask[2], v[7] ^ mask[3]), port: port)
        case 2:
            guard v.count == 20 else { throw STUNError("an IPv6 XOR-MAPPED-ADDRESS is \(v.count) bytes, not 20") }
            self = .v6(address: (0..<16).map { v[4 + $0] ^ mask[$0] }, port: port)
        default:
            throw STUNError("XOR-MAPPED-ADDRESS family \(v[1]) is neither IPv4 (1) nor IPv6 (2)")
        }
    }

    /// The magic cookie followed by the transaction ID: what the address is XORed with.
    static func mask(_ transactionID: [UInt8]) -> [UInt8] { [0x21, 0x12, 0xA4, 0x42] + transactionID }

    /// The attribute's value.
    func xoredValue(transactionID: [UInt8]) -> [UInt8] {
        let mask = Self.mask(transactionID)
        let xport = port ^ UInt16(STUNMessage.magicCookie >> 16)
        switch self {
        case .v4(let a, _):
            return [0, 1, UInt8(xport >> 8), UInt8(xport & 0xFF), a.0 ^ mask[0], a.1 ^ mask[1], a.2 ^ mask[2], a.3 ^ mask[3]]
        case .v6(let a, _):
            return [0, 2, UInt8(xport >> 8), UInt8(xport & 0xFF)] + (0..<16).map { a[$0] ^ mask[$0] }
        }
    }
}

/// Builds a STUN message attribute by attribute; `finish(integrityKey:fingerprint:)` appends
/// MESSAGE-INTEGRITY and FINGERPRINT last, as RFC 8489 orders them.
public struct STUNMessageBuilder: Sendable {
    public private(set) var bytes: [UInt8]

    public init(type: STUNMessage.MessageType, transactionID: [UInt8]) {
        precondition(transactionID.count == 12, "a STUN transaction ID is 12 bytes")
        bytes = [UInt8(type.rawValue >> 8), UInt8(type.rawValue & 0xFF), 0, 0, 0x21, 0x12, 0xA4, 0x42] + transactionID
        bytes.reserveCapacity(128)
    }

    /// Appends an attribute, padded to 4 bytes with `padding`.
    public mutating func append(_ type: STUNMessage.Attribute, _ value: [UInt8], padding: UInt8 = 0) {
        append(rawType: type.rawValue, value, padding: padding)
    }

    /// Appends an attribute of any type (tests write ones this parser does not know).
    public mutating func append(rawType type: UInt16, _ value: [UInt8], padding: UInt8 = 0) {
        bytes += [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)]
        bytes += value
        while bytes.count % 4 != 0 { bytes.append(padding) }
        setLength(bytes.count - STUNMessage.headerSize)
    }

    public mutating func append(_ type: STUNMessage.Attribute, u32 value: UInt32) {
        append(type, [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)])
    }

    public mutating func append(_ type: STUNMessage.Attribute, u64 value: UInt64) {
        append(type, (0..<8).map { UInt8((value >> (56 - 8 * UInt64($0))) & 0xFF) })
    }

    public mutating func append(xorMappedAddress address: STUNAddress) {
        append(.xorMappedAddress, address.xoredValue(transactionID: Array(bytes[8..<20])))
    }

    /// An ERROR-CODE (RFC 8489 §14.8): the class and number, and a reason phrase.
    public mutating func append(errorCode code: Int, reason: String) {
        append(.errorCode, [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8))
    }

    /// Appends MESSAGE-INTEGRITY (when `integrityKey` is given) and FINGERPRINT (when asked);
    /// returns the message.
    public mutating func finish(integrityKey: [UInt8]?, fingerprint: Bool = true) -> [UInt8] {
        if let integrityKey {
            let offset = bytes.count
            let mac = bytes.withUnsafeBytes { STUNMessage.integrity(of: $0, upTo: offset, key: integrityKey) }
            append(.messageIntegrity, mac)
        }
        if fingerprint {
            let offset = bytes.count
            let crc = bytes.withUnsafeBytes { STUNMessage.fingerprint(of: $0, upTo: offset) }
            append(.fingerprint, u32: crc)
        }
        return bytes
    }

    private mutating func setLength(_ n: Int) {
        bytes[2] = UInt8(n >> 8)
        bytes[3] = UInt8(n & 0xFF)
    }
}

/// A datagram that is not (well-formed) STUN, with what was wrong.
public struct STUNError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
