import Foundation
import FuzzTargets
import Testing

/// What libFuzzer found interesting (the committed corpus, Fuzz/corpus/TARGET) goes through
/// every parser again on each test run, in a normal build: a parser change that crashes on one
/// of them fails here, not only under Scripts/fuzz. The seeds must be valid input, or the
/// fuzzer would start from nothing.
@Suite struct FuzzCorpusTests {
    static let root = FileManager.default.currentDirectoryPath + "/Fuzz/corpus"

    @Test(arguments: FuzzTarget.allCases) func theCommittedCorpusRunsThrough(_ target: FuzzTarget) async throws {
        await FuzzTarget.prepare()
        let dir = "\(Self.root)/\(target.rawValue)"
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(files.count >= target.seeds.count, "\(dir) holds \(files.count) inputs")
        for file in files {
            let data = try #require(FileManager.default.contents(atPath: "\(dir)/\(file)"))
            _ = data.withUnsafeBytes { target.run($0) }
        }
    }

    @Test(arguments: FuzzTarget.allCases) func seedsAreWhatTheirParsersAccept(_ target: FuzzTarget) async throws {
        await FuzzTarget.prepare()
        #expect(!target.seeds.isEmpty)
        for (i, seed) in target.seeds.enumerated() {
            #expect(seed.withUnsafeBytes { target.run($0) }, "seed \(i) of \(target.rawValue) is not accepted")
        }
    }
}
