import MediaCore
import Basics
import Testing
@testable import Sender

/// `ctl set`'s wait for the capture thread: each source change takes a ticket, and a verdict
/// answers it and every earlier one (a later source replaced them).
@Suite struct SourceSwitchesTests {
    let soon = SystemClock().nowNanos() + 1_000_000_000

    @Test func aVerdictAnswersItsTicketAndTheEarlierOnes() {
        let switches = SourceSwitches()
        let first = switches.ask(), second = switches.ask()
        #expect(switches.latest == second)
        switches.answer(second, failure: "region 5000x5000+0+0 is outside the screen")
        #expect(switches.wait(for: first, untilMonotonicNanos: soon) == .some("region 5000x5000+0+0 is outside the screen"))
        #expect(switches.wait(for: second, untilMonotonicNanos: soon) == .some("region 5000x5000+0+0 is outside the screen"))
        // An older verdict coming late changes nothing.
        switches.answer(first, failure: nil)
        #expect(switches.wait(for: second, untilMonotonicNanos: soon) == .some("region 5000x5000+0+0 is outside the screen"))
        let third = switches.ask()
        switches.answer(third, failure: nil)
        #expect(switches.wait(for: third, untilMonotonicNanos: soon) == .some(nil))
    }

    @Test func noVerdictByTheDeadlineIsSaidSo() {
        let switches = SourceSwitches()
        let ticket = switches.ask()
        #expect(switches.wait(for: ticket, untilMonotonicNanos: SystemClock().nowNanos() + 20_000_000) == nil)
    }

    @Test func aWaiterWakesWhenTheCaptureThreadAnswers() async {
        let switches = SourceSwitches()
        let ticket = switches.ask()
        async let verdict = Task.detached { switches.wait(for: ticket, untilMonotonicNanos: SystemClock().nowNanos() + 5_000_000_000) }.value
        switches.answer(ticket, failure: nil)
        #expect(await verdict == .some(nil))
    }
}
