import NetworkAddress

/// Where the relay's datagrams go once its caller drains them: a socket (`RelayServer`), or a
/// test's wire.
public protocol RelayTransport: AnyObject {
    func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress)
    /// Sends the same datagram to each address, in order: one forwarded packet's fan-out.
    /// A socket sends them with one `sendmmsg`; the default calls `send(_:to:)` for each.
    func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: ArraySlice<PeerAddress>)
}

extension RelayTransport {
    public func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: ArraySlice<PeerAddress>) {
        for a in addresses { send(bytes, to: a) }
    }
}

/// What the relay has to send, in the order it decided it, until its caller drains it
/// (``RelayCore/drain(into:)``): the core never calls into I/O, as str0m's `poll_output` and
/// mediasoup's channel keep theirs apart.
///
/// The bytes are copied into one arena kept from drain to drain (it grows once, to the largest
/// burst between two drains), and a fan-out's addresses into a list kept the same way: queueing
/// allocates nothing per packet. (Holding the caller's array instead would make the relay's
/// per-viewer list, cleared and refilled for each packet, copy itself on every packet.)
struct RelayOutbox {
    private struct Entry {
        var start: Int
        var count: Int
        /// One address; nil for a fan-out to `fanOut[eachStart..<eachEnd]`.
        var to: PeerAddress?
        var eachStart: Int
        var eachEnd: Int
    }
    private var arena: [UInt8]
    private var used = 0
    private var entries: [Entry] = []
    private var fanOut: [PeerAddress] = []

    init(arenaBytes: Int = 256 * 1024) {
        arena = [UInt8](repeating: 0, count: arenaBytes)
        entries.reserveCapacity(1024)
        fanOut.reserveCapacity(4096)
    }

    /// Datagrams queued.
    var count: Int { entries.count }

    mutating func send(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress) {
        append(bytes, to: address, each: [])
    }

    mutating func send(_ bytes: UnsafeRawBufferPointer, toEach addresses: [PeerAddress]) {
        guard !addresses.isEmpty else { return }
        append(bytes, to: nil, each: addresses)
    }

    private mutating func append(_ bytes: UnsafeRawBufferPointer, to address: PeerAddress?, each: [PeerAddress]) {
        guard !bytes.isEmpty else { return }
        let eachStart = fanOut.count
        fanOut.append(contentsOf: each)
        if used + bytes.count > arena.count {
            arena.append(contentsOf: repeatElement(0, count: max(arena.count, bytes.count)))
        }
        let start = used
        arena.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[start..<(start + bytes.count)]).copyMemory(from: bytes) }
        used += bytes.count
        entries.append(Entry(start: start, count: bytes.count, to: address, eachStart: eachStart, eachEnd: fanOut.count))
    }

    /// Hands every queued datagram to `transport`, in order, and empties the queue (keeping its
    /// room). The transport must not give the core input while it drains.
    mutating func drain(into transport: RelayTransport) {
        arena.withUnsafeBytes { arena in
            for e in entries {
                let bytes = UnsafeRawBufferPointer(rebasing: arena[e.start..<(e.start + e.count)])
                if let to = e.to { transport.send(bytes, to: to) } else { transport.send(bytes, toEach: fanOut[e.eachStart..<e.eachEnd]) }
            }
        }
        entries.removeAll(keepingCapacity: true)
        fanOut.removeAll(keepingCapacity: true)
        used = 0
    }
}
