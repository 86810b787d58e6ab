import Synchronization

/// Which Janus mountpoints serve which room now, for the relay's HTTP side: a browser the relay
/// admitted (by its token or invitation) asks `POST /janus/ROOM` and is sent to one of them —
/// the server the relay has sent the fewest browsers to, in turn when they are even. Published
/// by the relay's thread as mountpoints come and go; read by the HTTP threads.
public final class JanusBoard: Sendable {
    /// A mountpoint a browser may be sent to.
    public struct Placement: Equatable, Sendable {
        public var server: Int
        public var url: String
        public var room: String
        public var presenter: String
        public var id: UInt64
        public var pin: String?
    }

    private struct State {
        var placements: [Placement] = []
        /// Browsers sent to each server so far.
        var sent: [Int]
        var turn = 0
    }
    private let state: Mutex<State>

    public init(servers: Int) { state = Mutex(State(sent: [Int](repeating: 0, count: servers))) }

    /// The mountpoints being fed now (the relay thread's view, in the order they were made).
    public func publish(_ placements: [Placement]) { state.withLock { $0.placements = placements } }

    /// Sends a browser: to a mountpoint of `presenter`'s screen (nil: the first presenter's
    /// with one), on the server the fewest were sent to (ties in turn); nil when no server
    /// serves the room now (the browser stays on the relay).
    public func assign(room: String, presenter: String?) -> Placement? {
        state.withLock { s in
            let inRoom = s.placements.filter { $0.room == room }
            guard let chosen = presenter ?? inRoom.first?.presenter else { return nil }
            let candidates = inRoom.filter { $0.presenter == chosen }
            guard !candidates.isEmpty else { return nil }
            let fewest = candidates.map { s.sent[$0.server] }.min() ?? 0
            let even = candidates.filter { s.sent[$0.server] == fewest }
            let pick = even[s.turn % even.count]
            s.turn &+= 1
            s.sent[pick.server] += 1
            return pick
        }
    }

    /// Browsers sent to each server so far.
    public var sent: [Int] { state.withLock { $0.sent } }
}
