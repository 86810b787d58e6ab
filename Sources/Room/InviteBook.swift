import Synchronization

/// Short invitation codes that stand for a room's viewer token, so the link a presenter shows
/// (and its QR code) stays short: `http://192.168.1.20:7600/class#k=7Hq2xZ9aLm4` instead of a
/// 400-character token and certificate fingerprint. A browser (or `watch`) exchanges the code
/// with the relay for the token it stands for.
///
/// A code is 64 random bits written in 11 base-58 characters (no 0, O, I or l to misread). It
/// admits only to its room, lapses when the token it stands for does, and is revoked when the
/// room's code is renewed or revoked (`ctl invite`). One code per room is live at a time.
///
/// Shared by the relay's HTTP threads (exchanging) and the presenter's control thread
/// (renewing, revoking): the mutex is what makes it `Sendable`.
public final class InviteBook: Sendable {
    /// What a code stands for.
    public struct Invite: Sendable, Equatable {
        public var room: String
        /// The viewer token it stands for (nil: the room is open, no token needed).
        public var token: String?
        /// When it lapses, in Unix nanoseconds: the token's expiry.
        public var expiresWallNanos: UInt64
        public init(room: String, token: String?, expiresWallNanos: UInt64) {
            self.room = room
            self.token = token
            self.expiresWallNanos = expiresWallNanos
        }
    }

    /// Why a code was not taken: the text is what the page and `watch` show.
    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case unknown, expired
        public var description: String {
            switch self {
            case .unknown: "this invitation link is not valid (mistyped, or replaced by a newer one): ask the presenter for the current link"
            case .expired: "this invitation link has expired: ask the presenter for a new one"
            }
        }
    }

    /// The code alphabet: base 58 (Bitcoin's), no look-alike characters.
    public static let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz")
    /// Characters in a code: 58^11 > 2^64.
    public static let codeLength = 11

    private let state = Mutex<[String: Invite]>([:])
    private let random: @Sendable () -> UInt64

    /// - Parameter random: 64 random bits a call (the system's generator; tests pass their own).
    public init(random: @escaping @Sendable () -> UInt64 = { UInt64.random(in: .min ... .max) }) {
        self.random = random
    }

    /// A new code for `room`; the room's earlier codes stop working.
    public func issue(_ invite: Invite) -> String {
        let code = Self.encode(random())
        state.withLock { book in
            book = book.filter { $0.value.room != invite.room }
            book[code] = invite
        }
        return code
    }

    /// Revokes `room`'s codes; true when there was one.
    @discardableResult
    public func revoke(room: String) -> Bool {
        state.withLock { book in
            let before = book.count
            book = book.filter { $0.value.room != room }
            return book.count != before
        }
    }

    /// What `code` stands for, if it is live and for `room` at `wallNanos`. Lapsed codes are
    /// forgotten on the way.
    public func redeem(_ code: String, room: String, wallNanos: UInt64) throws(Refusal) -> Invite {
        let found: Invite? = state.withLock { book in
            guard let invite = book[code] else { return nil }
            if invite.expiresWallNanos <= wallNanos { book[code] = nil }
            return invite
        }
        // A code for another room is reported as unknown: no answer tells a guesser that a
        // code is live somewhere.
        guard let found, found.room == room else { throw .unknown }
        guard found.expiresWallNanos > wallNanos else { throw .expired }
        return found
    }

    /// Whether `text` could be a code (its length and alphabet), before any lookup.
    public static func isWellFormed(_ text: some StringProtocol) -> Bool {
        text.count == codeLength && text.allSatisfy { alphabet.contains($0) }
    }

    /// `value` in base 58, most significant digit first, padded to `codeLength`.
    public static func encode(_ value: UInt64) -> String {
        var v = value
        var digits: [Character] = []
        for _ in 0..<codeLength {
            digits.append(alphabet[Int(v % 58)])
            v /= 58
        }
        return String(digits.reversed())
    }
}
