import Testing
import WebRTC

/// A browser's stream runs on across presenters: sequence numbers continue by one, timestamps by
/// the time that passed, late packets of the replaced presenter are dropped, feedback maps back.
@Suite struct StreamSplicerTests {
    @Test func theFirstSourcePassesUnchanged() {
        var s = StreamSplicer(clockRate: 90_000)
        #expect(s.rewrite(ssrc: 7, sequence: 100, timestamp: 5000, now: 0)! == (100, 5000))
        #expect(s.rewrite(ssrc: 7, sequence: 101, timestamp: 8000, now: 33_000_000)! == (101, 8000))
        #expect(s.original(101) == 101)
        #expect(s.rewriteReport(ssrc: 7, timestamp: 9000) == 9000)
    }

    @Test func aNewPresenterRunsOnFromTheLastPacketSent() {
        var s = StreamSplicer(clockRate: 90_000)
        _ = s.rewrite(ssrc: 7, sequence: 65_534, timestamp: 4_294_960_000, now: 1_000_000_000)
        _ = s.rewrite(ssrc: 7, sequence: 65_535, timestamp: 4_294_963_000, now: 1_033_000_000)
        // A reordered older packet does not move the high-water mark.
        #expect(s.rewrite(ssrc: 7, sequence: 65_533, timestamp: 4_294_957_000, now: 1_034_000_000)! == (65_533, 4_294_957_000))
        // 500 ms later the next presenter's stream, from its own random start.
        let first = s.rewrite(ssrc: 9, sequence: 1234, timestamp: 777, now: 1_533_000_000)!
        #expect(first.sequence == 0, "65535 + 1 wraps to 0")
        #expect(first.timestamp == 4_294_963_000 &+ 45_000, "half a second of the 90 kHz clock after the last")
        #expect(s.rewrite(ssrc: 9, sequence: 1235, timestamp: 777 + 3000, now: 1_566_000_000)! == (1, 4_294_963_000 &+ 48_000))
        // The browser's NACK for sequence 1 is the new presenter's 1235; its reports follow.
        #expect(s.original(1) == 1235)
        #expect(s.rewriteReport(ssrc: 9, timestamp: 777 + 6000) == 4_294_963_000 &+ 51_000)
        #expect(s.rewriteReport(ssrc: 7, timestamp: 1) == nil, "the old presenter's reports are dropped")
    }

    @Test func theReplacedPresentersLatePacketsAreDroppedThenItMayComeBack() {
        var s = StreamSplicer(clockRate: 48_000)
        _ = s.rewrite(ssrc: 1, sequence: 10, timestamp: 960, now: 0)
        _ = s.rewrite(ssrc: 2, sequence: 500, timestamp: 100, now: 20_000_000)
        #expect(s.rewrite(ssrc: 1, sequence: 11, timestamp: 1920, now: 40_000_000) == nil, "in flight from before the switch")
        #expect(s.source == 2)
        #expect(s.rewrite(ssrc: 2, sequence: 501, timestamp: 1060, now: 40_000_000)! == (12, 960 + 960 + 960))
        // Well after the switch the first presenter returns: a switch like any other.
        let back = s.rewrite(ssrc: 1, sequence: 90, timestamp: 50_000, now: 2_040_000_000)!
        #expect(back.sequence == 13 && back.timestamp == 2880 &+ 96_000)
        #expect(s.source == 1)
    }
}
