import Testing
import TestSupport
@testable import WebRTC

/// STUN against RFC 5769's test vectors (the exact bytes), and ICE-lite's answers.
@Suite struct STUNTests {
    static let password = Array("VOkJxbRl1RmTxUk/WvJxBt".utf8)
    static let transactionID: [UInt8] = [0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86, 0xfa, 0x87, 0xdf, 0xae]

    /// RFC 5769 §2.1: a binding request with SOFTWARE, PRIORITY, ICE-CONTROLLED, USERNAME,
    /// MESSAGE-INTEGRITY and FINGERPRINT.
    static let request: [UInt8] = [
        0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
        0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x10, 0x53, 0x54, 0x55, 0x4e, 0x20, 0x74, 0x65, 0x73,
        0x74, 0x20, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x00, 0x24, 0x00, 0x04, 0x6e, 0x00, 0x01, 0xff,
        0x80, 0x29, 0x00, 0x08, 0x93, 0x2f, 0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36, 0x00, 0x06, 0x00, 0x09,
        0x65, 0x76, 0x74, 0x6a, 0x3a, 0x68, 0x36, 0x76, 0x59, 0x20, 0x20, 0x20, 0x00, 0x08, 0x00, 0x14,
        0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e, 0xf2, 0xb5, 0xb2, 0xd3, 0xf2, 0x49,
        0xc1, 0xb5, 0x71, 0xa2, 0x80, 0x28, 0x00, 0x04, 0xe5, 0x7a, 0x3b, 0xcf,
    ]

    /// RFC 5769 §2.2: the IPv4 response (192.0.2.1:32853).
    static let responseV4: [UInt8] = [
        0x01, 0x01, 0x00, 0x3c, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
        0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63,
        0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x08, 0x00, 0x01, 0xa1, 0x47, 0xe1, 0x12, 0xa6, 0x43,
        0x00, 0x08, 0x00, 0x14, 0x2b, 0x91, 0xf5, 0x99, 0xfd, 0x9e, 0x90, 0xc3, 0x8c, 0x74, 0x89, 0xf9,
        0x2a, 0xf9, 0xba, 0x53, 0xf0, 0x6b, 0xe7, 0xd7, 0x80, 0x28, 0x00, 0x04, 0xc0, 0x7d, 0x4c, 0x96,
    ]

    /// RFC 5769 §2.3: the IPv6 response ([2001:db8:1234:5678:11:2233:4455:6677]:32853).
    static let responseV6: [UInt8] = [
        0x01, 0x01, 0x00, 0x48, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6, 0x86,
        0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x0b, 0x74, 0x65, 0x73, 0x74, 0x20, 0x76, 0x65, 0x63,
        0x74, 0x6f, 0x72, 0x20, 0x00, 0x20, 0x00, 0x14, 0x00, 0x02, 0xa1, 0x47, 0x01, 0x13, 0xa9, 0xfa,
        0xa5, 0xd3, 0xf1, 0x79, 0xbc, 0x25, 0xf4, 0xb5, 0xbe, 0xd2, 0xb9, 0xd9, 0x00, 0x08, 0x00, 0x14,
        0xa3, 0x82, 0x95, 0x4e, 0x4b, 0xe6, 0x7b, 0xf1, 0x17, 0x84, 0xc9, 0x7c, 0x82, 0x92, 0xc2, 0x75,
        0xbf, 0xe3, 0xed, 0x41, 0x80, 0x28, 0x00, 0x04, 0xc8, 0xfb, 0x0b, 0x4c,
    ]

    static let v6Address: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]

    @Test func parsesTheSampleRequest() throws {
        let m = try Self.request.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(m.messageType == .bindingRequest)
        #expect(m.transactionID == Self.transactionID)
        #expect(m.username == "evtj:h6vY")
        #expect(m.priority == 0x6e00_01ff)
        #expect(m.tieBreaker == 0x932f_f9b1_5126_3b36 && m.controlling == false)
        #expect(!m.useCandidate)
        Self.request.withUnsafeBytes {
            #expect(m.hasValidIntegrity(in: $0, key: Self.password))
            #expect(!m.hasValidIntegrity(in: $0, key: Array("VOkJxbRl1RmTxUk/WvJxBr".utf8)))
            #expect(m.hasValidFingerprint(in: $0))
        }
    }

    @Test func buildsTheSampleRequestByteForByte() {
        var b = STUNMessageBuilder(type: .bindingRequest, transactionID: Self.transactionID)
        b.append(.software, Array("STUN test client".utf8))
        b.append(.priority, u32: 0x6e00_01ff)
        b.append(.iceControlled, u64: 0x932f_f9b1_5126_3b36)
        b.append(.username, Array("evtj:h6vY".utf8), padding: 0x20)
        #expect(b.finish(integrityKey: Self.password) == Self.request)
    }

    @Test func parsesAndBuildsTheSampleResponses() throws {
        let v4 = try Self.responseV4.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(v4.messageType == .bindingSuccess)
        #expect(v4.xorMappedAddress == .v4(address: (192, 0, 2, 1), port: 32853))
        Self.responseV4.withUnsafeBytes { #expect(v4.hasValidIntegrity(in: $0, key: Self.password) && v4.hasValidFingerprint(in: $0)) }
        let v6 = try Self.responseV6.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(v6.xorMappedAddress == .v6(address: Self.v6Address, port: 32853))
        Self.responseV6.withUnsafeBytes { #expect(v6.hasValidIntegrity(in: $0, key: Self.password) && v6.hasValidFingerprint(in: $0)) }

        for (address, expected) in [(STUNAddress.v4(address: (192, 0, 2, 1), port: 32853), Self.responseV4),
                                    (.v6(address: Self.v6Address, port: 32853), Self.responseV6)] {
            var b = STUNMessageBuilder(type: .bindingSuccess, transactionID: Self.transactionID)
            b.append(.software, Array("test vector".utf8), padding: 0x20)
            b.append(xorMappedAddress: address)
            #expect(b.finish(integrityKey: Self.password) == expected)
        }
    }

    /// Broken copies of the sample request, each with what the error must say.
    static let malformed: [([UInt8], String)] = {
        let r = request
        var cases: [([UInt8], String)] = [([], "shorter than a STUN header"), (Array(r.prefix(19)), "shorter than a STUN header")]
        var bits = r; bits[0] = 0x80
        cases.append((bits, "first two bits"))
        var cookie = r; cookie[4] = 0
        cases.append((cookie, "magic cookie"))
        var odd = r; odd[3] = 0x5a
        cases.append((odd, "not a multiple of 4"))
        var long = r; long[3] = 0x5c
        cases.append((long, "does not match"))
        var user = r; user[63] = 0x99  // USERNAME claims 0x99 bytes
        cases.append((user, "runs past the message"))
        var priority = r; priority[43] = 0x08  // PRIORITY of 8 bytes
        cases.append((priority, "PRIORITY is 8 bytes"))
        return cases
    }()

    @Test(arguments: malformed)
    func refusesMalformedMessagesSayingWhy(bytes: [UInt8], why: String) {
        do {
            _ = try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
            Issue.record("parsed a malformed message (\(why))")
        } catch {
            #expect("\(error)".contains(why), "\(error)")
        }
    }
}

/// The ICE-lite agent's answers, with a browser-like request signed as Chromium signs it.
@Suite struct ICELiteTests {
    let mapped = STUNAddress.v4(address: (127, 0, 0, 1), port: 50000)

    func agent() -> ICELiteAgent<String> { ICELiteAgent(localUfrag: "relayU", localPassword: "relay-password-0123456789", remoteUfrag: "brws") }

    func request(username: String = "relayU:brws", password: String = "relay-password-0123456789", useCandidate: Bool = false,
                 id: UInt8 = 1, extra: (STUNMessage.Attribute, [UInt8])? = nil, sign: Bool = true) -> [UInt8] {
        var b = STUNMessageBuilder(type: .bindingRequest, transactionID: [UInt8](repeating: id, count: 12))
        b.append(.username, Array(username.utf8))
        b.append(.priority, u32: 0x7e7f_00ff)
        b.append(.iceControlling, u64: 0x1234)
        if useCandidate { b.append(.useCandidate, []) }
        if let extra { b.append(extra.0, extra.1) }
        return b.finish(integrityKey: sign ? Array(password.utf8) : nil)
    }

    func handle(_ a: inout ICELiteAgent<String>, _ bytes: [UInt8], from: String = "browser:1", now: UInt64 = 0) -> ICELiteAgent<String>.Outcome {
        bytes.withUnsafeBytes { a.handle($0, from: from, mapped: mapped, now: now) }
    }

    @Test func answersAValidCheckWithTheMappedAddressSignedAndFingerprinted() throws {
        var a = agent()
        guard case .respond(let bytes, let nominated) = handle(&a, request(id: 7)) else { Issue.record("not answered"); return }
        #expect(!nominated)
        let response = try bytes.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(response.messageType == .bindingSuccess)
        #expect(response.transactionID == [UInt8](repeating: 7, count: 12))
        #expect(response.xorMappedAddress == mapped)
        bytes.withUnsafeBytes {
            #expect(response.hasValidIntegrity(in: $0, key: Array("relay-password-0123456789".utf8)))
            #expect(response.hasValidFingerprint(in: $0))
        }
        // Not nominated yet: media may start at the address that checked, with consent.
        #expect(a.selected == nil && a.mediaAddress == "browser:1" && a.hasConsent(at: 0))
        #expect(!a.hasConsent(at: 30_000_000_000))
    }

    @Test func nominationSelectsWhereMediaGoesAndConsentLasts30Seconds() {
        var a = agent()
        guard case .respond(_, true) = handle(&a, request(useCandidate: true), from: "browser:1", now: 1_000) else {
            Issue.record("nomination not answered"); return
        }
        #expect(a.selected == "browser:1")
        #expect(a.hasConsent(at: 999), "a check newer than the turn's clock is consent, not 584 years old")
        #expect(a.hasConsent(at: 1_000 + 29_999_999_999))
        #expect(!a.hasConsent(at: 1_000 + 30_000_000_000))
        // A consent check renews it; one from another address does not.
        _ = handle(&a, request(id: 2), from: "elsewhere:9", now: 20_000_000_000)
        #expect(!a.hasConsent(at: 31_000_000_000))
        _ = handle(&a, request(id: 3), from: "browser:1", now: 20_000_000_000)
        #expect(a.hasConsent(at: 49_999_999_999))
        // The browser may move (a new network): a new nomination moves the media.
        guard case .respond(_, true) = handle(&a, request(useCandidate: true, id: 4), from: "browser:2", now: 21_000_000_000) else {
            Issue.record("renomination not answered"); return
        }
        #expect(a.selected == "browser:2")
    }

    @Test func refusesWrongNamesAndSignaturesWithErrorResponses() throws {
        for (bytes, code) in [(request(username: "other:brws"), 401), (request(password: "guess"), 401), (request(sign: false), 400)] {
            var a = agent()
            guard case .reject(let response, _) = handle(&a, bytes) else { Issue.record("not refused"); continue }
            let m = try response.withUnsafeBytes { try STUNMessage.parse($0) }
            #expect(m.messageType == .bindingError && m.errorCode == code)
            // Never larger than what was asked: the relay amplifies nothing.
            #expect(response.count <= bytes.count)
            #expect(a.selected == nil && a.refused == 1)
        }
    }

    @Test func unknownRequiredAttributesGet420() throws {
        var a = agent()
        var b = STUNMessageBuilder(type: .bindingRequest, transactionID: [UInt8](repeating: 5, count: 12))
        b.append(.username, Array("relayU:brws".utf8))
        b.append(rawType: 0x0077, [])  // unknown, comprehension-required
        let bytes = b.finish(integrityKey: Array("relay-password-0123456789".utf8))
        guard case .reject(let response, _) = handle(&a, bytes) else { Issue.record("not refused"); return }
        let m = try response.withUnsafeBytes { try STUNMessage.parse($0) }
        #expect(m.errorCode == 420)
    }

    @Test func aBrokenFingerprintOrAResponseIsNotAnswered() {
        var a = agent()
        var bytes = request()
        bytes[bytes.count - 1] ^= 1
        guard case .ignore = handle(&a, bytes) else { Issue.record("answered a broken fingerprint"); return }
        var r = STUNMessageBuilder(type: .bindingSuccess, transactionID: [UInt8](repeating: 1, count: 12))
        r.append(xorMappedAddress: mapped)
        guard case .ignore = handle(&a, r.finish(integrityKey: nil)) else { Issue.record("answered a response"); return }
    }

    /// Mutated and random datagrams: the agent answers, refuses or ignores, and never crashes;
    /// it answers only what carries the right signature.
    @Test func fuzzedDatagramsNeverCrashAndNeverPassWithoutTheKey() {
        var rng = SplitMix64(seed: 0x5EED)
        let seeds = [request(), request(useCandidate: true), STUNTests.request, STUNTests.responseV4, STUNTests.responseV6]
        let signed = Array(seeds.prefix(2))
        var a = agent()
        var answeredOther = 0, answered = 0
        for i in 0..<30_000 {
            var bytes = seeds[i % seeds.count]
            switch rng.next() % 4 {
            case 0: for _ in 0...(rng.next() % 4) { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            case 1: bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))))
            case 2: bytes += (0..<(rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            default: bytes = (0..<(rng.next() % 120)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            if case .respond = handle(&a, bytes) {
                answered += 1
                if !signed.contains(bytes) { answeredOther += 1 }
            }
        }
        // Every byte of a request is under its signature or its fingerprint: only a mutation
        // that changed nothing (or only the fingerprint-free tail, which has none) passes.
        #expect(answeredOther == 0, "\(answeredOther) altered requests answered")
        #expect(answered > 0)
    }
}

