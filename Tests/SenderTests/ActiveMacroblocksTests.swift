import Testing
@testable import Sender

/// The macroblocks the encoder works on: what changed in the last 30 new pictures, a band of
/// rows that moves down the picture (the still rest keeps sharpening), and all of them again
/// after a keyframe.
@Suite struct ActiveMacroblocksTests {
    @Test func changesStayActiveForTheRefinementAndABandOfRowsRefreshesTheRest() {
        var a = ActiveMacroblocks()
        let columns = 2, rows = 20, period = ActiveMacroblocks.refreshPeriod
        var changes = [UInt8](repeating: 0, count: columns * rows)
        func next(_ c: [UInt8]?, columns: Int = 2, rows: Int = 20) -> Bool {
            guard let c else { return a.next(changes: nil, columns: columns, rows: rows) }
            return c.withUnsafeBufferPointer { a.next(changes: $0.baseAddress, columns: columns, rows: rows) }
        }
        func activeRows() -> [Int] { (0..<rows).filter { r in a.map[r * columns] == 1 && a.map[r * columns + 1] == 1 } }
        // Everything is new at first: no map during the refinement.
        for _ in 0..<ActiveMacroblocks.refinementFrames { #expect(!next(changes)) }
        // Then one band of rows a picture: every row once in `period` pictures.
        var seen = [Int](repeating: 0, count: rows)
        for _ in 0..<period {
            let partial = next(changes)
            let band = Int(a.picture) % period
            #expect(partial && activeRows() == [band, band + period].filter { $0 < rows })
            for r in activeRows() { seen[r] += 1 }
        }
        #expect(seen == [Int](repeating: 1, count: rows))
        // A change: its macroblock is active for the refinement, whatever the band.
        changes[5] = 1  // row 2, column 1
        var partial = next(changes)
        changes[5] = 0
        #expect(partial && a.map[5] == 1)
        for _ in 1..<ActiveMacroblocks.refinementFrames {
            partial = next(changes)
            #expect(partial && a.map[5] == 1 && a.map[4] == (Int(a.picture) % period == 2 ? 1 : 0))
        }
        repeat { partial = next(changes) } while Int(a.picture) % period == 2
        #expect(partial && a.map[5] == 0)
        // Unknown changes: everything; a keyframe: everything again.
        partial = next(nil)
        #expect(!partial)
        a.touchAll(columns: columns, rows: rows)
        partial = next(changes)
        #expect(!partial)
        // A new size starts over, all active.
        partial = next([0, 0], columns: 1, rows: 2)
        #expect(!partial && a.map == [1, 1])
    }
}
