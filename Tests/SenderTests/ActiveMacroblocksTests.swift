import Testing
@testable import Sender

/// The macroblocks the encoder works on: what changed in the last 30 new pictures, and all of
/// them again after a keyframe.
@Suite struct ActiveMacroblocksTests {
    @Test func aChangedMacroblockStaysActiveForTheRefinementThenIsLeftOut() {
        var a = ActiveMacroblocks()
        var changes: [UInt8] = [0, 0, 0, 0, 0, 0]  // 3 x 2
        func next(_ c: [UInt8]?, columns: Int = 3, rows: Int = 2) -> Bool {
            guard let c else { return a.next(changes: nil, columns: columns, rows: rows) }
            return c.withUnsafeBufferPointer { a.next(changes: $0.baseAddress, columns: columns, rows: rows) }
        }
        // Everything is new at first: no map until the refinement is over.
        for _ in 0..<ActiveMacroblocks.refinementFrames { #expect(!next(changes)) }
        var partial = next(changes)
        #expect(partial && a.activeCount == 0)
        changes[4] = 1
        partial = next(changes)
        #expect(partial && a.map == [0, 0, 0, 0, 1, 0])
        changes[4] = 0
        for _ in 1..<ActiveMacroblocks.refinementFrames {
            partial = next(changes)
            #expect(partial && a.map == [0, 0, 0, 0, 1, 0])
        }
        partial = next(changes)
        #expect(partial && a.activeCount == 0)
        // Unknown changes: everything; a keyframe: everything again.
        partial = next(nil)
        #expect(!partial)
        for _ in 0..<ActiveMacroblocks.refinementFrames { _ = next(changes) }
        #expect(a.activeCount == 0)
        a.touchAll(columns: 3, rows: 2)
        partial = next(changes)
        #expect(!partial)
        // A new size starts over, all active.
        partial = next([0, 0], columns: 1, rows: 2)
        #expect(!partial && a.map == [1, 1])
    }
}
