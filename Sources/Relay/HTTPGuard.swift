import Logging
import MediaCore
import Basics
import NIOCore
import NIOHTTP1
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the relay's HTTP side holds to, as nginx and Caddy do: a whole request (headers and
/// body) must arrive within a timeout, and connections are capped per address and in all, so
/// one address holding connections open (half-sent requests, or just idle) cannot keep a
/// browser with a valid link from loading the page or posting its offer.
public struct HTTPLimits: Sendable {
    /// A request must arrive whole this long after the connection opened or the last request
    /// ended (so it is also how long a kept-alive connection may sit idle).
    public var requestTimeoutNanos: UInt64 = 10_000_000_000
    /// Connections open at once from one address (a class behind one NAT shares one).
    public var maxPerAddress = 128
    /// Connections open at once in all (at most half the open-file limit).
    public var maxConnections = 4096
    public init() {}
}

/// Counts the open connections per address and in all, admits or refuses new ones, and says
/// when a cap refuses some (a `warning`, at most once per 10 s per cap, with how many).
final class ConnectionGate: Sendable {
    private struct State {
        var open: [String: Int] = [:]
        var total = 0
        var refusedPerAddress = 0
        var refusedInAll = 0
        var lastWarned: UInt64 = 0
    }
    private let state = Mutex(State())
    let limits: HTTPLimits
    private let logger: Logger
    private let clock: any MediaClock

    init(limits: HTTPLimits, logger: Logger, clock: any MediaClock = SystemClock()) {
        self.limits = limits
        self.logger = logger
        self.clock = clock
    }

    /// Whether a new connection from `address` may stay; if so, `release` must follow when it closes.
    func admit(_ address: String) -> Bool {
        let now = clock.nowNanos()
        let (admitted, warning) = state.withLock { s -> (Bool, String?) in
            var admitted = true
            if s.total >= limits.maxConnections {
                s.refusedInAll += 1
                admitted = false
            } else if s.open[address, default: 0] >= limits.maxPerAddress {
                s.refusedPerAddress += 1
                admitted = false
            } else {
                s.open[address, default: 0] += 1
                s.total += 1
            }
            guard !admitted, now &- s.lastWarned >= 10_000_000_000 || s.lastWarned == 0 else { return (admitted, nil) }
            s.lastWarned = now
            let text = "http: refused \(s.refusedPerAddress + s.refusedInAll) connection(s) since the last warning: "
                + (s.refusedInAll > 0 ? "\(limits.maxConnections) are open in all" : "\(limits.maxPerAddress) are open from \(address)")
                + " (requests that do not arrive whole within \(limits.requestTimeoutNanos / 1_000_000_000) s are closed)"
            s.refusedPerAddress = 0
            s.refusedInAll = 0
            return (admitted, text)
        }
        if let warning { logger.warning("\(warning)") }
        return admitted
    }

    func release(_ address: String) {
        state.withLock { s in
            s.total -= 1
            if let n = s.open[address], n > 1 { s.open[address] = n - 1 } else { s.open[address] = nil }
        }
    }

}

/// Closes a connection whose request does not arrive whole in time: the clock starts when the
/// connection opens and again when a request ends. Sits after swift-nio's HTTP decoder.
final class RequestDeadline: ChannelInboundHandler {
    // Made and used on its channel's event loop only.
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    private let timeoutNanos: UInt64
    private var timer: Scheduled<Void>?

    init(timeoutNanos: UInt64) { self.timeoutNanos = timeoutNanos }

    func handlerAdded(context: ChannelHandlerContext) { arm(context) }
    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { arm(context) }
        context.fireChannelRead(data)
    }

    private func arm(_ context: ChannelHandlerContext) {
        timer?.cancel()
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeoutNanos))) { channel.close(promise: nil) }
    }
}

/// Raises this process's open-file limit as far as the hard limit allows (a relay holds a
/// socket per browser connection; the usual soft limit is 1,024) and returns the soft limit now.
@discardableResult
public func raiseOpenFileLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)  // RLIM_INFINITY is the largest rlim_t: Int.max
}
