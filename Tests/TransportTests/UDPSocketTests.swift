#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import Transport

@Suite struct UDPSocketTests {
    @Test func sendsDatagramsOverLoopback() throws {
        // Connected UDP sockets only accept datagrams from their peer, so pair two sockets:
        // find a free port, connect B to it, then bind C to that port connected back to B.
        let freePort = try UDPSocket(connectTo: Endpoint(host: "127.0.0.1", port: 9)).localPort
        let b = try UDPSocket(connectTo: Endpoint(host: "127.0.0.1", port: freePort))
        let c = try UDPSocket(connectTo: Endpoint(host: "127.0.0.1", port: b.localPort), localPort: freePort)
        #expect(c.localPort == freePort)
        let payload: [UInt8] = [1, 2, 3, 4, 5]
        #expect(payload.withUnsafeBytes { b.send($0) } == 0)
        var buf = [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { c.receive(into: $0, timeoutMillis: 2000) }
        #expect(n == 5)
        #expect(Array(buf[0..<5]) == payload)
    }

    /// A listener that stamps arrivals gets, with each datagram of a batch, the kernel's wall
    /// clock time of its arrival: after it was sent, before it was read. One that does not, none.
    @Test func aBatchCarriesTheKernelsArrivalStamps() throws {
        func wallNanos() -> UInt64 {
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        }
        for stamped in [true, false] {
            let listener = try UDPListener(host: "127.0.0.1", port: 0)
            if stamped { #expect(listener.stampArrivals()) }
            let sender = try UDPSocket(connectTo: Endpoint(host: "127.0.0.1", port: listener.port))
            let before = wallNanos()
            for i in 0..<3 { #expect([UInt8(i), 9, 9].withUnsafeBytes { sender.send($0) } == 0) }
            // On loopback a send has queued its datagram by the time it returns.
            let batch = ReceiveBatch(count: 8)
            let got = batch.receive(fd: listener.fd)
            let after = wallNanos()
            #expect(got == 3)
            for i in 0..<3 {
                if stamped {
                    let t = try #require(batch.arrivalWallNanos(i))
                    #expect(t >= before && t <= after, "stamp \(t) outside [\(before), \(after)]")
                } else {
                    #expect(batch.arrivalWallNanos(i) == nil)
                }
            }
        }
    }

    @Test func unresolvableHostIsAClearError() {
        do {
            _ = try UDPSocket(connectTo: Endpoint(host: "no-such-host.invalid", port: 5004))
            Issue.record("no error")
        } catch let error as NetworkError {
            #expect(error.description.contains("no-such-host.invalid"))
        } catch { Issue.record("wrong error \(error)") }
    }

    @Test func receiveTimesOut() throws {
        let s = try UDPSocket(connectTo: Endpoint(host: "127.0.0.1", port: 9))
        var buf = [UInt8](repeating: 0, count: 16)
        #expect(buf.withUnsafeMutableBytes { s.receive(into: $0, timeoutMillis: 10) } == 0)
    }
}
