import Foundation
import RTP
import Synchronization
import X11TestSupport

/// The one UDP socket the end-to-end tests listen with: bound on 127.0.0.1 (test traffic stays
/// on loopback), a thread that receives every datagram from the moment it exists (so nothing
/// sent to it is refused, and each arrival is timed as it happens), and a way to answer.
///
/// Read what arrived with `datagrams` (all so far), `datagrams(from:)` (after the first n) or
/// `receive(timeoutSeconds:)` (the next one not yet read this way); `stop()` ends it and
/// returns everything.
final class UDPReceiver: Sendable {
    struct Datagram: Sendable {
        var arrival: Date
        var bytes: [UInt8]
        var from: sockaddr_in

        /// The RTP header, when the datagram is an RTP packet (version 2 and a valid header).
        var rtp: (header: RTPHeader, payload: ArraySlice<UInt8>)? {
            guard bytes.count >= RTPHeader.fixedSize, bytes[0] >> 6 == 2,
                  let parsed = try? bytes.withUnsafeBytes({ try RTPHeader.parse($0) }) else { return nil }
            return (parsed.header, bytes[parsed.payloadOffset..<(parsed.payloadOffset + parsed.payloadLength)])
        }
    }

    /// The port bound (the one asked for, or the one the system chose for port 0).
    let port: UInt16
    private let core: Core

    /// The socket and what arrived on it: shared with the receiving thread, which closes the
    /// socket when it ends (after `stop()`, or within 50 ms of this value going away).
    private final class Core: Sendable {
        let fd: Int32
        let state = Mutex<(datagrams: [Datagram], read: Int)>(([], 0))
        let running = Atomic<Bool>(true)
        let finished = DispatchSemaphore(value: 0)
        init(fd: Int32) { self.fd = fd }
        deinit { close(fd) }

        func receiveLoop() {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while running.load(ordering: .relaxed) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 50) > 0 else { continue }
                var from = sockaddr_in()
                var len = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = withUnsafeMutablePointer(to: &from) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &len) }
                }
                guard n >= 0 else { continue }
                let d = Datagram(arrival: Date(), bytes: Array(buffer[0..<n]), from: from)
                state.withLock { $0.datagrams.append(d) }
            }
            finished.signal()
        }
    }

    init(port: UInt16 = 0) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TestFailure("cannot bind UDP 127.0.0.1:\(port): \(reason)")
        }
        self.port = UInt16(bigEndian: addr.sin_port)
        let core = Core(fd: fd)
        self.core = core
        let t = Thread { core.receiveLoop() }
        t.name = "test-udp-\(self.port)"
        t.start()
    }

    deinit { core.running.store(false, ordering: .relaxed) }

    /// Everything received so far, in order of arrival.
    var datagrams: [Datagram] { core.state.withLock { $0.datagrams } }

    /// What arrived after the first `index` datagrams.
    func datagrams(from index: Int) -> [Datagram] {
        core.state.withLock { Array($0.datagrams[min(index, $0.datagrams.count)...]) }
    }

    /// The next datagram not yet returned by this method, waiting for it up to `timeoutSeconds`.
    /// - Throws: `TestFailure` when none arrives in time.
    func receive(timeoutSeconds: Double) throws -> Datagram {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            let next = core.state.withLock { s -> Datagram? in
                guard s.read < s.datagrams.count else { return nil }
                s.read += 1
                return s.datagrams[s.read - 1]
            }
            if let next { return next }
            guard Date() < deadline else { throw TestFailure("nothing received on UDP port \(port) within \(timeoutSeconds) s") }
            usleep(2_000)
        }
    }

    /// Sends a datagram from this socket.
    func send(_ bytes: [UInt8], to address: sockaddr_in) {
        var a = address
        _ = withUnsafePointer(to: &a) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(core.fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// Sends a datagram to 127.0.0.1:`port`.
    func send(_ bytes: [UInt8], toPort port: UInt16) {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        send(bytes, to: addr)
    }

    /// Stops receiving and returns everything received.
    @discardableResult
    func stop() -> [Datagram] {
        if core.running.exchange(false, ordering: .relaxed) { core.finished.wait() }
        return datagrams
    }
}
