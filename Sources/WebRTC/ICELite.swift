/// The relay's side of ICE for one browser session: ICE-lite (RFC 8445 §2.5), as mediasoup and
/// Janus run it. The browser (a full agent, controlling) sends STUN binding requests to the one
/// candidate in our SDP answer; each valid one is answered with the address it came from
/// (XOR-MAPPED-ADDRESS), signed with our password (MESSAGE-INTEGRITY) and FINGERPRINTed. The
/// pair the browser nominates (USE-CANDIDATE) is where media goes. Its later checks are consent
/// (RFC 7675): without one for 30 s, media to it must stop.
///
/// Sans-I/O: a datagram, where it came from and `now` in; what to send back out. `Address` is
/// whatever the caller identifies peers by.
public struct ICELiteAgent<Address: Hashable & Sendable>: Sendable {
    /// What to do with a datagram that looked like STUN.
    public enum Outcome: Sendable, Equatable {
        /// Send this success response to the sender. `nominated`: the browser picked this
        /// address for media (it may change its mind later).
        case respond([UInt8], nominated: Bool)
        /// Send this error response (400, 401, 420) to the sender: it named us wrongly, or did
        /// not sign, or asked for what we do not understand.
        case reject([UInt8], reason: String)
        /// Nothing to send: not a request (responses and indications need no answer), or not
        /// worth one (a broken FINGERPRINT means it was not STUN after all, RFC 8489 §7.3).
        case ignore(reason: String)
    }

    /// RFC 7675 §5.1: consent expires 30 s after the last check that succeeded.
    public static var consentTimeoutNanos: UInt64 { 30_000_000_000 }

    public let localUfrag: String
    public let localPassword: String
    /// The browser's ufrag from its offer (the second half of USERNAME).
    public let remoteUfrag: String
    /// The address of the last nominated pair.
    public private(set) var selected: Address?
    /// Before any nomination, the address of the last check that succeeded: media may start
    /// there (a browser may finish DTLS before it nominates; mediasoup does the same).
    public private(set) var lastValid: Address?
    /// Where media goes: the nominated address, else the last one checked.
    public var mediaAddress: Address? { selected ?? lastValid }
    /// When the selected address last passed a check (consent).
    public private(set) var lastConsentNanos: UInt64?
    /// Requests answered, and requests refused or dropped (for stats).
    public private(set) var answered = 0
    public private(set) var refused = 0

    private let expectedUsername: String
    private let key: [UInt8]

    public init(localUfrag: String, localPassword: String, remoteUfrag: String) {
        self.localUfrag = localUfrag
        self.localPassword = localPassword
        self.remoteUfrag = remoteUfrag
        expectedUsername = "\(localUfrag):\(remoteUfrag)"
        key = Array(localPassword.utf8)
    }

    /// Whether media may still go to `mediaAddress` at `now` (a check from it succeeded in the
    /// last 30 s).
    public func hasConsent(at now: UInt64) -> Bool {
        guard mediaAddress != nil, let last = lastConsentNanos else { return false }
        return now <= last || now - last < Self.consentTimeoutNanos  // a check newer than `now` is consent
    }

    /// Handles a datagram from `source` (whose transport address, as the browser should learn
    /// it, is `mapped`) at `now`.
    public mutating func handle(_ bytes: UnsafeRawBufferPointer, from source: Address, mapped: STUNAddress,
                                now: UInt64) -> Outcome {
        let message: STUNMessage
        do {
            message = try STUNMessage.parse(bytes)
        } catch {
            refused += 1
            return .ignore(reason: "\(error)")
        }
        guard message.messageType == .bindingRequest else {
            return .ignore(reason: "not a binding request (type 0x\(String(message.type, radix: 16)))")
        }
        // ICE checks always carry FINGERPRINT (RFC 8445 §7.2.2); without a right one the
        // datagram is not taken for STUN at all (RFC 8489 §7.3).
        guard message.hasValidFingerprint(in: bytes) else {
            refused += 1
            return .ignore(reason: message.fingerprintOffset == nil ? "no FINGERPRINT" : "wrong FINGERPRINT")
        }
        if !message.unknownRequired.isEmpty {
            refused += 1
            var b = STUNMessageBuilder(type: .bindingError, transactionID: message.transactionID)
            b.append(errorCode: 420, reason: "Unknown Attribute")
            b.append(.unknownAttributes, message.unknownRequired.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })
            return .reject(b.finish(integrityKey: nil), reason: "unknown comprehension-required attributes")
        }
        guard let username = message.username, message.integrityOffset != nil else {
            refused += 1
            return reject(message, 400, "Bad Request", reason: "no USERNAME or MESSAGE-INTEGRITY")
        }
        guard username == expectedUsername else {
            refused += 1
            return reject(message, 401, "Unauthorized", reason: "USERNAME '\(username.prefix(64))' is not this session's")
        }
        guard message.hasValidIntegrity(in: bytes, key: key) else {
            refused += 1
            return reject(message, 401, "Unauthorized", reason: "wrong MESSAGE-INTEGRITY")
        }
        var nominated = false
        if message.useCandidate {
            nominated = selected != source
            selected = source
        }
        if selected == nil { lastValid = source }
        if source == mediaAddress { lastConsentNanos = now }
        answered += 1
        var b = STUNMessageBuilder(type: .bindingSuccess, transactionID: message.transactionID)
        b.append(xorMappedAddress: mapped)
        return .respond(b.finish(integrityKey: key), nominated: nominated)
    }

    private func reject(_ request: STUNMessage, _ code: Int, _ phrase: String, reason: String) -> Outcome {
        var b = STUNMessageBuilder(type: .bindingError, transactionID: request.transactionID)
        b.append(errorCode: code, reason: phrase)
        return .reject(b.finish(integrityKey: nil), reason: reason)
    }
}
