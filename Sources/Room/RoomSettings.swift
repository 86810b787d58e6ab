/// How `start` and `watch` join a room.
public struct RoomSettings: Sendable, Equatable {
    /// The room's name.
    public var name: String
    /// Our display name in the room.
    public var displayName: String
    /// The relay, as given (for messages).
    public var server: String
    /// Whom a viewer receives.
    public var target: SubscriptionTarget
    /// For the presenter hosting the room: the line viewers run to join.
    public var watchCommand: String?
    /// For the presenter hosting the room: the page a browser opens to watch, with a short
    /// invitation code (`#k=…`) when the room takes tokens.
    public var browserURL: String?
    /// The same page with the viewer token itself and the relay's fingerprint (`#token=…&fp=…`),
    /// for scripts: it needs no exchange with the relay.
    public var browserTokenURL: String?
    /// The room token (nil: an open room).
    public var token: String?
    /// The relay's DTLS certificate SHA-256 the hop must find (nil: any relay is taken).
    public var fingerprint: [UInt8]?
    public init(name: String, displayName: String, server: String, target: SubscriptionTarget = .auto) {
        self.name = name
        self.displayName = displayName
        self.server = server
        self.target = target
    }
}
