import MediaCore
import Basics
import Testing
import Transport

@Suite struct EndpointTests {
    @Test func parsesIPv4AndNames() throws {
        #expect(try Endpoint.parse("127.0.0.1:5004") == Endpoint(host: "127.0.0.1", port: 5004))
        #expect(try Endpoint.parse("localhost:9") == Endpoint(host: "localhost", port: 9))
    }

    @Test func parsesBracketedIPv6() throws {
        let e = try Endpoint.parse("[::1]:6000")
        #expect(e == Endpoint(host: "::1", port: 6000))
        #expect(e.description == "[::1]:6000")
    }

    @Test(arguments: ["127.0.0.1", ":5004", "host:", "host:0", "host:65535", "host:70000", "::1:5004", "[::1]5004", "[::1", "h:p"])
    func rejectsBadEndpoints(text: String) {
        #expect(throws: SettingError.self) { try Endpoint.parse(text) }
    }
}
