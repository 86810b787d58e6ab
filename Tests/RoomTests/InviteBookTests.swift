import Synchronization
import Testing
@testable import Room

/// Invitation codes: 11 base-58 characters for 64 bits, one live code per room, lapsing with the
/// token they stand for, revoked when renewed or revoked.
@Suite struct InviteBookTests {
    let day: UInt64 = 86_400_000_000_000
    let now: UInt64 = 1_800_000_000_000_000_000

    @Test func codesAreElevenBase58CharactersCoveringSixtyFourBits() {
        #expect(InviteBook.encode(0) == "11111111111")
        #expect(InviteBook.encode(57) == "1111111111z")
        #expect(InviteBook.encode(58) == "11111111121")
        // 2^64 - 1 = 58^10 × 3 + … : still 11 characters, and every value its own code.
        let top = InviteBook.encode(.max)
        #expect(top.count == 11 && top.first == "j", "\(top)")
        #expect(InviteBook.isWellFormed(top) && InviteBook.isWellFormed("egw9EVN2z3G"))
        for bad in ["", "egw9EVN2z3", "egw9EVN2z3GG", "egw9EVN2z30", "egw9EVN2zOG", "egw9EVN2zIG", "egw9EVN2zlG", "egw9EVN2z3 "] {
            #expect(!InviteBook.isWellFormed(bad), "\(bad)")
        }
        var seen = Set<String>()
        for v in stride(from: UInt64(0), to: .max - (.max / 997), by: Int(UInt64.max / 997)) { seen.insert(InviteBook.encode(v)) }
        #expect(seen.count == 997)
    }

    @Test func aCodeAdmitsToItsRoomUntilItsTokenLapses() throws {
        let book = InviteBook()
        let code = book.issue(.init(room: "class", token: "T", expiresWallNanos: now + day))
        #expect(InviteBook.isWellFormed(code))
        #expect(try book.redeem(code, room: "class", wallNanos: now).token == "T")
        #expect(try book.redeem(code, room: "class", wallNanos: now + day - 1).token == "T", "used again: a code is not single-use")
        // Another room: reported as unknown (no answer says the code is live elsewhere).
        #expect(throws: InviteBook.Refusal.unknown) { try book.redeem(code, room: "other", wallNanos: now) }
        #expect(throws: InviteBook.Refusal.unknown) { try book.redeem("11111111111", room: "class", wallNanos: now) }
        #expect(throws: InviteBook.Refusal.expired) { try book.redeem(code, room: "class", wallNanos: now + day) }
        // Forgotten once lapsed.
        #expect(throws: InviteBook.Refusal.unknown) { try book.redeem(code, room: "class", wallNanos: now) }
    }

    @Test func renewingOrRevokingEndsTheRoomsCodeAndNoOtherRooms() throws {
        let counter = Counter()
        let book = InviteBook { counter.next() }
        let first = book.issue(.init(room: "class", token: "T", expiresWallNanos: now + day))
        let other = book.issue(.init(room: "lab", token: "L", expiresWallNanos: now + day))
        let second = book.issue(.init(room: "class", token: "T", expiresWallNanos: now + day))
        #expect(first != second)
        #expect(throws: InviteBook.Refusal.unknown) { try book.redeem(first, room: "class", wallNanos: now) }
        #expect(try book.redeem(second, room: "class", wallNanos: now).token == "T")
        #expect(book.revoke(room: "class"))
        #expect(!book.revoke(room: "class"))
        #expect(throws: InviteBook.Refusal.unknown) { try book.redeem(second, room: "class", wallNanos: now) }
        #expect(try book.redeem(other, room: "lab", wallNanos: now).token == "L")
    }

    @Test func refusalsSayWhatToDo() {
        #expect(InviteBook.Refusal.unknown.description.contains("ask the presenter for the current link"))
        #expect(InviteBook.Refusal.expired.description.contains("expired"))
    }
}

private final class Counter: Sendable {
    private let value = Mutex<UInt64>(0x1234_5678)
    func next() -> UInt64 { value.withLock { $0 &+= 0x9E37_79B9_7F4A_7C15; return $0 } }
}
