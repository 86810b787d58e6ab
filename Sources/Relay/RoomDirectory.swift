import Congestion
import Room
import Synchronization

/// The rooms as the relay's HTTP side sees them: published by the relay's thread when a room's
/// peers or streams change, read by the HTTP thread (a WHEP offer for a room nobody is in gets
/// a 404; the page asks who presents).
final class RoomDirectory: Sendable {
    private let rooms = Mutex<[String: RoomSummary]>([:])

    func publish(_ summaries: [RoomSummary]) {
        var byName: [String: RoomSummary] = [:]
        for s in summaries { byName[s.name] = s }
        rooms.withLock { $0 = byName }
    }

    func room(_ name: String) -> RoomSummary? { rooms.withLock { $0[name] } }
}

/// What the relay allows browsers that have not finished connecting (ICE and DTLS): each holds
/// a DTLS context and a place in the relay's tables until it connects or expires.
public struct BrowserLimits: Sendable {
    /// Sessions answered but not connected yet; more offers get 503 until some connect or expire.
    /// Each holds a DTLS context (tens of kB) for at most `setupTimeoutNanos`; a class of 300
    /// posting in the same second fits.
    public var maxConnecting = 512
    /// A session that has not connected after this long is dropped.
    public var setupTimeoutNanos: UInt64 = 30_000_000_000
    /// FEC (RED + ULPFEC) to browsers that offer it: by each one's loss and round trip
    /// (`auto`, as libwebrtc's hybrid NACK/FEC), always, or never.
    public var fec: FECPolicy.Mode = .auto
    /// The HTTP side's timeouts and connection caps.
    public var http = HTTPLimits()
    public init() {}
}
