import Testing
@testable import Room
import NetworkAddress

/// The relay's admission: cookies and per-second budgets, in simulated time.
@Suite struct RelayAdmissionTests {
    static let a = PeerAddress(ip: 0x0A00_0001, port: 5000), b = PeerAddress(ip: 0x0A00_0002, port: 5000)

    @Test func aCookieIsGoodForItsAddressThisEpochAndTheNext() {
        let admission = RelayAdmission(limits: RelayLimits(), cookieSecret: Array(repeating: 7, count: 32))
        let epoch = RelayAdmission.cookieEpochNanos
        let cookie = admission.cookie(for: Self.a, now: 5)
        #expect(cookie.count == 24 && cookie == admission.cookie(for: Self.a, now: epoch - 1))
        #expect(admission.isValid(cookie, from: Self.a, now: epoch + 1), "the next epoch")
        #expect(!admission.isValid(cookie, from: Self.a, now: 2 * epoch), "two epochs on")
        #expect(!admission.isValid(cookie, from: Self.b, now: 5), "another address")
        #expect(!admission.isValid(cookie, from: PeerAddress(ip: Self.a.ip, port: 5001), now: 5), "another port")
        #expect(!admission.isValid(nil, from: Self.a, now: 5))
        let other = RelayAdmission(limits: RelayLimits(), cookieSecret: Array(repeating: 8, count: 32))
        #expect(!other.isValid(cookie, from: Self.a, now: 5), "another relay's key")
    }

    @Test func repliesAreBudgetedPerAddressAndInAllEachSecond() {
        var limits = RelayLimits()
        limits.maxErrorsPerAddressPerSecond = 3
        limits.maxErrorsPerSecond = 5
        var admission = RelayAdmission(limits: limits, cookieSecret: nil)
        let toA = (0..<4).map { _ in admission.takeReply(to: Self.a, now: 1_000_000_000) }
        #expect(toA == [true, true, true, false])
        let toB = (0..<3).map { _ in admission.takeReply(to: Self.b, now: 1_500_000_000) }
        #expect(toB == [true, true, false], "five in all")
        let nextSecond = admission.takeReply(to: Self.a, now: 2_000_000_000)
        #expect(nextSecond, "a new second")
    }

    @Test func joinsAreBudgetedPerRoomEachSecond() {
        var limits = RelayLimits()
        limits.maxJoinsPerRoomPerSecond = 2
        var admission = RelayAdmission(limits: limits, cookieSecret: nil)
        let joins = (0..<3).map { _ in admission.takeJoin(room: "class", now: 10) }
        #expect(joins == [true, true, false])
        let other = admission.takeJoin(room: "other", now: 10), later = admission.takeJoin(room: "class", now: 1_000_000_010)
        #expect(other && later)
    }
}
