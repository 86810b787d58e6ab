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
