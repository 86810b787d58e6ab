import Foundation
import FuzzTargets

// Built by Scripts/fuzz with -sanitize=fuzzer,address -DFUZZING: libFuzzer drives the target
// that SCREENSHARE_FUZZ_TARGET names. Built normally: a command that runs files through a target
// once (a crash libFuzzer found, reproduced with a symbolised trace) or writes the seed corpus.

#if FUZZING
nonisolated(unsafe) private var target: FuzzTarget = .rtp

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// SwiftPM names an executable's entry point after its module and aliases `main` to it; libFuzzer's
/// driver runs from here.
@_cdecl("screenshare_fuzz_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    let name = ProcessInfo.processInfo.environment["SCREENSHARE_FUZZ_TARGET"] ?? ""
    guard let chosen = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(Data("SCREENSHARE_FUZZ_TARGET must name one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
        return 2
    }
    target = chosen
    FuzzTarget.prepareBlocking()
    var c = argc
    var v = argv
    return LLVMFuzzerRunDriver(&c, &v, fuzzOne)
}
#else
@main struct FuzzReplay {
    static func main() {
        FuzzTarget.prepareBlocking()
        let args = Array(CommandLine.arguments.dropFirst())
        let usage = """
            usage: screenshare-fuzz TARGET FILE...   run each file through TARGET once
                   screenshare-fuzz --seed DIR       write the seed corpus (DIR/TARGET/seed-N)
            targets: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))

            """
        if args.count == 2, args[0] == "--seed" {
            for target in FuzzTarget.allCases {
                let dir = "\(args[1])/\(target.rawValue)"
                try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                for (i, seed) in target.seeds.enumerated() {
                    _ = FileManager.default.createFile(atPath: "\(dir)/seed-\(i)", contents: Data(seed))
                }
            }
            return
        }
        guard args.count >= 2, let target = FuzzTarget(rawValue: args[0]) else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(2)
        }
        for path in args.dropFirst() {
            guard let data = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("screenshare-fuzz: cannot read \(path)\n".utf8))
                exit(66)
            }
            let accepted = data.withUnsafeBytes { target.run($0) }
            print("\(target.rawValue): \(path) (\(data.count) bytes): \(accepted ? "accepted" : "refused"), no crash")
        }
    }
}
#endif
