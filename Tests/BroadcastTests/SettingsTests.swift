import Testing
@testable import Broadcast

@Suite struct BitrateTests {
    @Test(arguments: [
        ("2M", 2_000_000), ("1600k", 1_600_000), ("2.5m", 2_500_000), ("800000", 800_000),
        ("64kbps", 64_000), (" 1M ", 1_000_000), ("10k", 10_000),
    ])
    func parsesRates(text: String, bits: Int) throws {
        #expect(try Bitrate.parse(text).bitsPerSecond == bits)
    }

    @Test(arguments: ["", "fast", "-1M", "0", "1k", "200M", "1.2.3M", "M", "nan"])
    func rejectsBadRates(text: String) {
        #expect(throws: SettingsError.self) { try Bitrate.parse(text) }
    }

    @Test func errorNamesTheText() {
        do {
            _ = try Bitrate.parse("fast")
            Issue.record("no error")
        } catch let error as SettingsError {
            #expect(error.description.contains("'fast'"))
        } catch { Issue.record("wrong error \(error)") }
    }

    @Test func describesRoundValues() {
        #expect(Bitrate(bitsPerSecond: 2_000_000).description == "2M")
        #expect(Bitrate(bitsPerSecond: 1_600_000).description == "1600k")
    }
}

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
        #expect(throws: SettingsError.self) { try Endpoint.parse(text) }
    }
}

@Suite struct StaticScreenPolicyTests {
    let ms: UInt64 = 1_000_000

    @Test func noRepeatBeforeFirstPicture() {
        let p = StaticScreenPolicy(fps: 15, minFps: 1)
        #expect(p.nextRepeatNanos == nil)
    }

    @Test func refinesAtFullRateThenDropsToKeepAlive() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1)
        p.newPictureEncoded(at: 0)
        // During the refine second: every other frame period.
        var t: UInt64 = 0
        var repeats = 0
        while let next = p.nextRepeatNanos, next < 1000 * ms {
            t = next
            p.repeatEncoded(at: t)
            repeats += 1
        }
        #expect(repeats == 4)  // every 200 ms: half the frame rate
        // Past the refine window: keep-alive at 1 fps.
        p.repeatEncoded(at: 1000 * ms)
        #expect(p.nextRepeatNanos == 2000 * ms)
        p.repeatEncoded(at: 2000 * ms)
        #expect(p.nextRepeatNanos == 3000 * ms)
        #expect(!p.isRefining(at: 2000 * ms))
    }

    @Test func refinementEndsEarlyOnceRepeatsAreTiny() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1.5)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 100 * ms, bytes: 9000)   // still sharpening
        #expect(p.nextRepeatNanos == 300 * ms)
        p.repeatEncoded(at: 200 * ms, bytes: 100)    // one tiny repeat is not enough
        #expect(p.nextRepeatNanos == 400 * ms)
        p.repeatEncoded(at: 300 * ms, bytes: 40)     // two in a row: converged
        #expect(!p.isRefining(at: 300 * ms))
        #expect(p.nextRepeatNanos == 1300 * ms)      // keep-alive from now on
        p.newPictureEncoded(at: 2000 * ms)           // a change refines again
        #expect(p.isRefining(at: 2100 * ms))
        #expect(p.nextRepeatNanos == 2200 * ms)
        // A big new picture (80 kB): repeats under 2 kB are converged.
        p.newPictureEncoded(at: 3000 * ms, bytes: 80_000)
        p.repeatEncoded(at: 3100 * ms, bytes: 1900)
        p.repeatEncoded(at: 3200 * ms, bytes: 1800)
        #expect(!p.isRefining(at: 3200 * ms))
    }

    @Test func rateBucketDrainsAtTheBitRate() {
        var b = RateBucket()
        b.drain(at: 0, bitsPerSecond: 1_000_000)
        b.add(bits: 1_500_000)
        #expect(b.nanosUntil(atMost: 1_000_000, bitsPerSecond: 1_000_000) == 500 * ms)
        b.drain(at: 250 * ms, bitsPerSecond: 1_000_000)
        #expect(b.levelBits == 1_250_000)
        b.drain(at: 100 * ms, bitsPerSecond: 1_000_000)  // time going backwards changes nothing
        #expect(b.levelBits == 1_250_000)
        b.drain(at: 5000 * ms, bitsPerSecond: 1_000_000)
        #expect(b.levelBits == 0)
        #expect(b.nanosUntil(atMost: 1_000_000, bitsPerSecond: 1_000_000) == 0)
    }

    @Test func aNewPictureRestartsRefining() {
        var p = StaticScreenPolicy(fps: 10, minFps: 1, refineSeconds: 1)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 5000 * ms)
        #expect(p.nextRepeatNanos == 6000 * ms)
        p.newPictureEncoded(at: 5500 * ms)
        #expect(p.nextRepeatNanos == 5700 * ms)
        #expect(p.isRefining(at: 5600 * ms))
    }

    @Test func zeroMinFpsStopsRepeatsAfterRefining() {
        var p = StaticScreenPolicy(fps: 10, minFps: 0, refineSeconds: 0.5)
        p.newPictureEncoded(at: 0)
        p.repeatEncoded(at: 600 * ms)
        #expect(p.nextRepeatNanos == nil)
    }
}

@Suite struct KeyframeThrottleTests {
    let ms: UInt64 = 1_000_000

    @Test func atMostOneKeyframePer300ms() {
        var k = KeyframeThrottle()
        let first = k.request(at: 0)
        #expect(first)
        k.keyframeSent(at: 0)
        let early = k.request(at: 100 * ms)
        #expect(!early)
        #expect(k.pending)
        #expect(!k.pendingDue(at: 299 * ms))
        #expect(k.pendingDue(at: 300 * ms))
        k.keyframeSent(at: 300 * ms)
        #expect(!k.pending)
        let later = k.request(at: 650 * ms)
        #expect(later)
    }
}
