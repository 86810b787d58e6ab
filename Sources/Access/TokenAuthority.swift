import FoundationEssentials
import Glibc
import JWTKit
import Room

/// Makes and checks room tokens (JWT, HS256) with one secret: `screenshare token` mints, the
/// relay checks every `join` and every browser's WHEP offer.
///
/// Tokens are made with jwt-kit's key collection and checked with its parser, its HMAC
/// algorithm (a constant-time comparison in swift-crypto) and its claim checks. The check is
/// synchronous, so the relay's thread runs it inline (a few microseconds): the algorithm is
/// taken out of the (actor) key collection once, when the authority is made.
public final class TokenAuthority: RoomAuthorizer {
    /// HS256 wants a key at least as long as its output (RFC 7518 §3.2).
    public static let minimumSecretBytes = 32
    /// Longer tokens are refused unread.
    public static let maximumTokenBytes = 4096
    /// A token is taken this long before its `nbf`: clocks of the minting and the checking
    /// machine may differ a little.
    public static let clockLeewaySeconds = 30.0

    private let keys: JWTKeyCollection
    private let algorithm: any JWTAlgorithm
    private let parser = DefaultJWTParser()

    /// - Throws: `AccessSetupError` when `secret` is shorter than `minimumSecretBytes`.
    public init(secret: [UInt8]) async throws {
        guard secret.count >= Self.minimumSecretBytes else {
            throw AccessSetupError("the secret is \(secret.count) bytes; HS256 needs at least \(Self.minimumSecretBytes)")
        }
        keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        algorithm = try await keys.getKey(alg: "HS256")
    }

    /// A signed token for `room`, valid from `now` for `ttl` seconds.
    public func mint(room: String, role: Role, name: String? = nil, ttl: Double, now: Date = Date()) async throws -> String {
        try await keys.sign(RoomToken(room: room, role: role, name: name, notBefore: now, expires: now.addingTimeInterval(ttl)))
    }

    /// The claims of `token` if this authority signed it and it is valid at `now` (the room
    /// and role are not checked here: `authorize` does).
    public func check(_ token: String?, now: Date) throws(AccessRefusal) -> RoomToken {
        guard let token, !token.isEmpty else {
            throw AccessRefusal(.missing, "no token: this room admits only invited people (the link the presenter gave, or --token)")
        }
        let bytes = Array(token.utf8)
        guard bytes.count <= Self.maximumTokenBytes else {
            throw AccessRefusal(.malformed, "the token is \(bytes.count) bytes, more than \(Self.maximumTokenBytes)")
        }
        let parts: (header: ArraySlice<UInt8>, payload: ArraySlice<UInt8>, signature: ArraySlice<UInt8>)
        let header: JWTHeader
        let claims: RoomToken
        let signature: Data
        do {
            parts = try parser.getTokenParts(bytes)
            (header, claims, signature) = try parser.parse(bytes, as: RoomToken.self)
        } catch {
            throw AccessRefusal(.malformed, "the token is not a room token (a JWT of three base64url parts with exp and a video grant)")
        }
        guard header.alg == algorithm.name else {
            throw AccessRefusal(.malformed, "the token is signed with \(header.alg.map { "'\($0)'" } ?? "no algorithm"), not \(algorithm.name)")
        }
        let valid = (try? algorithm.verify(signature, signs: parts.header + [UInt8(ascii: ".")] + parts.payload)) ?? false
        guard valid else {
            throw AccessRefusal(.badSignature, "the token's signature does not match this relay's secret (made for another relay, or altered)")
        }
        do {
            try claims.exp.verifyNotExpired(currentDate: now)
        } catch {
            throw AccessRefusal(.expired, "the token expired at \(Self.iso(claims.exp.value))")
        }
        if let nbf = claims.nbf {
            do {
                try nbf.verifyNotBefore(currentDate: now.addingTimeInterval(Self.clockLeewaySeconds))
            } catch {
                throw AccessRefusal(.notYetValid, "the token is valid only from \(Self.iso(nbf.value))")
            }
        }
        return claims
    }

    public func authorize(token: String?, room: String, presenting: Bool, wallNanos: UInt64) throws(AccessRefusal) -> RoomGrant {
        let claims = try check(token, now: Date(timeIntervalSince1970: Double(wallNanos) / 1e9))
        guard let grant = claims.video, grant.roomJoin != false, let granted = grant.room else {
            throw AccessRefusal(.malformed, "the token grants no room (its video grant has no room or roomJoin is false)")
        }
        guard granted == room else {
            throw AccessRefusal(.wrongRoom, "the token is for room '\(granted)', not '\(room)'")
        }
        if presenting, grant.canPublish != true {
            throw AccessRefusal(.wrongRole, "a viewer token cannot present: presenting needs a presenter token")
        }
        if !presenting, grant.canSubscribe == false {
            throw AccessRefusal(.wrongRole, "the token does not allow watching (canSubscribe is false)")
        }
        return RoomGrant(room: granted, canPublish: grant.canPublish == true, name: claims.name)
    }

    private static func iso(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

/// A secret or a secret file that cannot be used.
public struct AccessSetupError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
