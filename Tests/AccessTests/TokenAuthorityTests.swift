import Access
import Foundation
import JWTKit
import Room
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Room tokens: made and checked with jwt-kit, in LiveKit's claims, each refusal naming why.
@Suite struct TokenAuthorityTests {
    static let secret = Array("0123456789abcdef0123456789abcdef-test-secret".utf8)
    /// 2025-11-24T16:00:00Z, inside the Python-made token's validity.
    static let now = Date(timeIntervalSince1970: 1_764_000_100)
    static func nanos(_ date: Date) -> UInt64 { UInt64(date.timeIntervalSince1970 * 1e9) }

    func refusal(_ body: () throws(AccessRefusal) -> RoomGrant) -> AccessRefusal? {
        do { _ = try body(); return nil } catch { return error }
    }

    @Test func aMintedViewerTokenAdmitsToItsRoomOnly() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let token = try await authority.mint(room: "class", role: .viewer, name: "Ada", ttl: 3600, now: Self.now)
        let grant = try authority.authorize(token: token, room: "class", presenting: false, wallNanos: Self.nanos(Self.now))
        #expect(grant == RoomGrant(room: "class", canPublish: false, name: "Ada"))
        let wrongRoom = refusal { () throws(AccessRefusal) in try authority.authorize(token: token, room: "other", presenting: false, wallNanos: Self.nanos(Self.now)) }
        #expect(wrongRoom?.reason == .wrongRoom)
        #expect(wrongRoom?.description.contains("'class', not 'other'") == true)
        let presenting = refusal { () throws(AccessRefusal) in try authority.authorize(token: token, room: "class", presenting: true, wallNanos: Self.nanos(Self.now)) }
        #expect(presenting?.reason == .wrongRole)
    }

    @Test func aPresenterTokenMayPresentAndWatch() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let token = try await authority.mint(room: "class", role: .presenter, ttl: 60, now: Self.now)
        #expect(try authority.authorize(token: token, room: "class", presenting: true, wallNanos: Self.nanos(Self.now)).canPublish)
        #expect(try authority.authorize(token: token, room: "class", presenting: false, wallNanos: Self.nanos(Self.now)).canPublish)
    }

    /// The claims are LiveKit's: a token another implementation made (Python's hmac and base64,
    /// as LiveKit's server SDKs do) is taken, and ours decode with the library's own verify.
    @Test func tokensAreInteroperableJWTs() async throws {
        let python = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJBUElrZXkiLCJzdWIiOiJhZGEiLCJuYW1lIjoiQWRhIExvdmVsYWNlIiwibmJmIjoxNzY0MDAwMDAwLCJleHAiOjE3NjQwMDM2MDAsInZpZGVvIjp7InJvb20iOiJjbGFzcyIsInJvb21Kb2luIjp0cnVlLCJjYW5QdWJsaXNoIjp0cnVlLCJjYW5TdWJzY3JpYmUiOnRydWV9fQ._TCrFSu3KRoGXZbyS0HKZjHxd18yLOy3JpQ0J5evsjs"
        let authority = try await TokenAuthority(secret: Self.secret)
        let grant = try authority.authorize(token: python, room: "class", presenting: true, wallNanos: Self.nanos(Self.now))
        #expect(grant == RoomGrant(room: "class", canPublish: true, name: "Ada Lovelace"))

        let ours = try await authority.mint(room: "class", role: .viewer, name: "Bob", ttl: 3600)
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Self.secret), digestAlgorithm: .sha256)
        let claims = try await keys.verify(ours, as: RoomToken.self)
        #expect(claims.video == RoomToken.VideoGrant(room: "class", canPublish: false))
        #expect(claims.name == "Bob")
        #expect(claims.iss?.value == "screenshare")
        // The payload is plain JSON with LiveKit's field names.
        let payload = try #require(Data(base64Encoded: Self.base64(String(ours.split(separator: ".")[1]))))
        let json = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        let video = try #require(json["video"] as? [String: Any])
        #expect(video["room"] as? String == "class" && video["canPublish"] as? Bool == false && video["roomJoin"] as? Bool == true)
        #expect(json["exp"] is Double || json["exp"] is Int)
    }

    static func base64(_ url: String) -> String {
        var s = url.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while s.count % 4 != 0 { s += "=" }
        return s
    }

    @Test func expiredAndNotYetValidTokensAreRefusedWithTheirTimes() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let old = try await authority.mint(room: "class", role: .viewer, ttl: 3600, now: Self.now.addingTimeInterval(-7200))
        let expired = refusal { () throws(AccessRefusal) in try authority.authorize(token: old, room: "class", presenting: false, wallNanos: Self.nanos(Self.now)) }
        #expect(expired?.reason == .expired)
        #expect(expired?.description.contains("expired at 2025-11-24T15:01:40Z") == true)
        let future = try await authority.mint(room: "class", role: .viewer, ttl: 7200, now: Self.now.addingTimeInterval(3600))
        #expect(refusal { () throws(AccessRefusal) in try authority.authorize(token: future, room: "class", presenting: false, wallNanos: Self.nanos(Self.now)) }?.reason == .notYetValid)
        // Within the leeway for clocks that differ a little.
        let soon = try await authority.mint(room: "class", role: .viewer, ttl: 60, now: Self.now.addingTimeInterval(10))
        #expect(throws: Never.self) { try authority.authorize(token: soon, room: "class", presenting: false, wallNanos: Self.nanos(Self.now)) }
    }

    @Test func forgedAlteredAndForeignTokensAreRefused() async throws {
        let authority = try await TokenAuthority(secret: Self.secret)
        let other = try await TokenAuthority(secret: Array("another relay's secret, 32 bytes or more".utf8))
        let foreign = try await other.mint(room: "class", role: .presenter, ttl: 60, now: Self.now)
        let check = { (token: String?) -> AccessRefusal? in
            self.refusal { () throws(AccessRefusal) in try authority.authorize(token: token, room: "class", presenting: false, wallNanos: Self.nanos(Self.now)) }
        }
        #expect(check(foreign)?.reason == .badSignature)

        // A viewer token whose payload is swapped for a presenter's keeps its old signature.
        let viewer = try await authority.mint(room: "class", role: .viewer, ttl: 60, now: Self.now)
        let parts = viewer.split(separator: ".")
        let presenterPayload = try await other.mint(room: "class", role: .presenter, ttl: 60, now: Self.now).split(separator: ".")[1]
        #expect(check("\(parts[0]).\(presenterPayload).\(parts[2])")?.reason == .badSignature)

        // "alg": "none" (RFC 7519 §6: an unsecured JWT) and another algorithm (refused on its
        // name, before any signature is checked; HS512 wants a 64-byte key).
        let none = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.\(parts[1])."
        #expect(check(none)?.reason == .malformed)
        #expect(check(none)?.description.contains("'none'") == true)
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Self.secret + Self.secret), digestAlgorithm: .sha512)
        let hs512 = try await keys.sign(RoomToken(room: "class", role: .presenter, name: nil, notBefore: Self.now, expires: Self.now + 60))
        #expect(check(hs512)?.reason == .malformed)

        #expect(check(nil)?.reason == .missing)
        #expect(check("")?.reason == .missing)
        for garbage in ["hello", "a.b", "a.b.c", "...", "\(parts[0]).\(parts[1])", String(repeating: "A", count: 5000), "é.ü.ß"] {
            #expect(check(garbage)?.reason == .malformed, "\(garbage.prefix(20))")
        }
    }

    @Test func aShortSecretIsRefused() async throws {
        await #expect(throws: AccessSetupError.self) { _ = try await TokenAuthority(secret: Array("short".utf8)) }
    }

    @Test func secretFilesAreMadePrivateAndCheckedOnRead() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/secret"
        let made = try SecretFile.readOrCreate(path)
        #expect(made.created && made.secret.count == 64 && made.secret.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let again = try SecretFile.readOrCreate(path)
        #expect(!again.created && again.secret == made.secret)
        #expect(made.secret != SecretFile.random())

        chmod(path, 0o644)
        #expect { try SecretFile.read(path) } throws: { ($0 as? AccessSetupError)?.description.contains("chmod o-r") == true }
        let short = dir + "/short"
        _ = FileManager.default.createFile(atPath: short, contents: Data("tooshort\n".utf8), attributes: [.posixPermissions: 0o600])
        #expect { try SecretFile.read(short) } throws: { ($0 as? AccessSetupError)?.description.contains("8 bytes") == true }
        #expect { try SecretFile.read(dir + "/missing") } throws: { ($0 as? AccessSetupError)?.description.contains("No such file") == true }
    }
}
