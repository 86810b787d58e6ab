/// What a room token lets its bearer do (LiveKit's video grant: the room, joining, publishing).
public struct RoomGrant: Sendable, Equatable {
    public var room: String
    /// May share a screen or sound (role `presenter`).
    public var canPublish: Bool
    /// The name the token gives its bearer (it replaces the one the peer asks for), if any.
    public var name: String?
    public init(room: String, canPublish: Bool, name: String? = nil) {
        self.room = room
        self.canPublish = canPublish
        self.name = name
    }
}

/// Why a peer may not enter a room: the text names the reason, for the `unauthorized` error
/// and the CLI's exit 77.
public struct AccessRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable, Equatable {
        case missing, malformed, badSignature = "bad_signature", expired, notYetValid = "not_yet_valid", wrongRoom = "wrong_room"
        case wrongRole = "wrong_role"
    }
    public let reason: Reason
    public let description: String
    public init(_ reason: Reason, _ description: String) {
        self.reason = reason
        self.description = description
    }
}

/// Decides who enters a room and what they may do there. A relay without one is open: anyone
/// who reaches it joins any room.
public protocol RoomAuthorizer: Sendable {
    /// Checks `token` for entering `room` (as a presenter when `presenting`) at `wallNanos`
    /// (Unix time). Cheap and synchronous: it runs on the relay's thread.
    func authorize(token: String?, room: String, presenting: Bool, wallNanos: UInt64) throws(AccessRefusal) -> RoomGrant
}
