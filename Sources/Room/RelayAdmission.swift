import Crypto
import MediaCore
import Basics
import NetworkAddress

/// Who the relay answers, and how often: return-routability cookies (a new address proves it
/// receives what is sent to it by echoing one in its join) and the per-second budgets that keep
/// the relay from being an amplifier or a join flood's target — error replies in all and per
/// address, joins per room. Pure: the time is passed in; bounded (the per-second maps are
/// emptied each second).
struct RelayAdmission {
    let limits: RelayLimits
    private let cookieKey: SymmetricKey
    private var second: UInt64 = 0
    private var errors = 0
    private var errorsByAddress: [PeerAddress: Int] = [:]
    private var joinsByRoom: [String: Int] = [:]

    /// How long a cookie stays valid: the epoch it was made in and the next.
    static let cookieEpochNanos: UInt64 = 30_000_000_000

    /// - Parameter cookieSecret: the cookies' key (random unless a test or the fuzzer needs
    ///   them predictable).
    init(limits: RelayLimits, cookieSecret: [UInt8]?) {
        self.limits = limits
        cookieKey = cookieSecret.map { SymmetricKey(data: $0) } ?? SymmetricKey(size: .bits256)
    }

    /// The cookie `address` must echo in its `join` at `now` (stateless, as QUIC's Retry and
    /// DTLS's HelloVerifyRequest: an HMAC of the address, the port and the time).
    func cookie(for address: PeerAddress, now: UInt64) -> String {
        cookie(address, epoch: now / Self.cookieEpochNanos)
    }

    private func cookie(_ address: PeerAddress, epoch: UInt64) -> String {
        var input = [UInt8](repeating: 0, count: 14)
        for i in 0..<4 { input[i] = UInt8(truncatingIfNeeded: address.ip >> (24 - 8 * i)) }
        input[4] = UInt8(address.port >> 8)
        input[5] = UInt8(address.port & 0xFF)
        for i in 0..<8 { input[6 + i] = UInt8(truncatingIfNeeded: epoch >> (56 - 8 * i)) }
        let mac = HMAC<SHA256>.authenticationCode(for: input, using: cookieKey)
        return mac.prefix(12).hexString
    }

    /// Whether `cookie` is the one `address` was given this epoch or the last.
    func isValid(_ cookie: String?, from address: PeerAddress, now: UInt64) -> Bool {
        guard let cookie else { return false }
        let epoch = now / Self.cookieEpochNanos
        return cookie == self.cookie(address, epoch: epoch) || (epoch > 0 && cookie == self.cookie(address, epoch: epoch - 1))
    }

    /// Whether one more reply (an error, a retry) may go out this second: to all, and to
    /// `address` (taken if so).
    mutating func takeReply(to address: PeerAddress, now: UInt64) -> Bool {
        roll(now)
        guard errors < limits.maxErrorsPerSecond, errorsByAddress[address, default: 0] < limits.maxErrorsPerAddressPerSecond
        else { return false }
        errors += 1
        errorsByAddress[address, default: 0] += 1
        return true
    }

    /// Whether one more join into `room` may be taken this second (taken if so).
    mutating func takeJoin(room: String, now: UInt64) -> Bool {
        roll(now)
        guard joinsByRoom[room, default: 0] < limits.maxJoinsPerRoomPerSecond else { return false }
        joinsByRoom[room, default: 0] += 1
        return true
    }

    /// A new second: the budgets start again.
    private mutating func roll(_ now: UInt64) {
        let s = now / 1_000_000_000
        guard s != second else { return }
        second = s
        errors = 0
        errorsByAddress.removeAll(keepingCapacity: true)
        joinsByRoom.removeAll(keepingCapacity: true)
    }
}
