import MediaCore
import Basics
import Testing

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
        #expect(throws: SettingError.self) { try Bitrate.parse(text) }
    }

    @Test func errorNamesTheText() {
        do {
            _ = try Bitrate.parse("fast")
            Issue.record("no error")
        } catch let error as SettingError {
            #expect(error.description.contains("'fast'"))
        } catch { Issue.record("wrong error \(error)") }
    }

    @Test func describesRoundValues() {
        #expect(Bitrate(bitsPerSecond: 2_000_000).description == "2M")
        #expect(Bitrate(bitsPerSecond: 1_600_000).description == "1600k")
    }
}
