import FoundationEssentials
import Glibc
import JWTKit

/// A room token's claims, in LiveKit's shape, so a token server written for LiveKit (or its
/// CLI, `lk token create`) makes tokens this relay takes:
///
/// ```json
/// {"iss": "screenshare", "sub": "viewer-1f0c2a9b", "name": "Ada", "nbf": 1764000000, "exp": 1764003600,
///  "video": {"room": "class", "roomJoin": true, "canPublish": false, "canSubscribe": true}}
/// ```
///
/// HS256, signed with the relay's secret. Role `presenter` is `canPublish: true`.
public struct RoomToken: JWTPayload, Equatable {
    /// LiveKit's `VideoGrant` (the fields this relay reads).
    public struct VideoGrant: Codable, Sendable, Equatable {
        public var room: String?
        public var roomJoin: Bool?
        public var canPublish: Bool?
        public var canSubscribe: Bool?
        public init(room: String, roomJoin: Bool = true, canPublish: Bool, canSubscribe: Bool = true) {
            self.room = room
            self.roomJoin = roomJoin
            self.canPublish = canPublish
            self.canSubscribe = canSubscribe
        }
    }

    public var iss: IssuerClaim?
    /// The bearer's identity.
    public var sub: SubjectClaim?
    /// The display name the bearer gets in the room.
    public var name: String?
    public var nbf: NotBeforeClaim?
    public var exp: ExpirationClaim
    public var video: VideoGrant?

    public init(room: String, role: Role, name: String?, notBefore: Date, expires: Date, identity: String? = nil) {
        iss = IssuerClaim(value: "screenshare")
        sub = SubjectClaim(value: identity ?? "\(role.rawValue)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))")
        self.name = name
        // NumericDate in whole seconds (RFC 7519 §2 allows fractions; not every library reads them).
        nbf = NotBeforeClaim(value: Date(timeIntervalSince1970: notBefore.timeIntervalSince1970.rounded(.down)))
        exp = ExpirationClaim(value: Date(timeIntervalSince1970: expires.timeIntervalSince1970.rounded(.down)))
        video = VideoGrant(room: room, canPublish: role == .presenter)
    }

    /// Checked by `TokenAuthority` against its own clock (the library's default is the wall
    /// clock, which tests cannot move); a library verification (`JWTKeyCollection.verify`) checks
    /// the expiry here.
    public func verify(using algorithm: some JWTAlgorithm) async throws {
        try exp.verifyNotExpired()
    }
}

/// What a token lets its bearer do: watch, or also present.
public enum Role: String, Sendable, CaseIterable {
    case viewer, presenter
}

extension RoomToken {
    /// The name a token gives its bearer (its `name` claim), read without checking the
    /// signature: only to show a presenter the name the relay will give them (the relay checks
    /// the token). Nil when there is none or the token cannot be read.
    public static func unverifiedName(of token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64: String = String(parts[1]).replacing("-", with: "+").replacing("_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64),
              let claims = try? JSONDecoder().decode([String: JSONClaimValue].self, from: data) else { return nil }
        if case .string(let name)? = claims["name"] { return name }
        return nil
    }

    /// A claim's value, for reading `name` among claims of any type.
    private enum JSONClaimValue: Decodable {
        case string(String), other
        init(from decoder: any Decoder) throws {
            self = (try? decoder.singleValueContainer().decode(String.self)).map(JSONClaimValue.string) ?? .other
        }
    }
}
