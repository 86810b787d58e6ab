#if canImport(Glibc)
import Glibc
#endif

enum FileHandleStderr {
    static func write(_ string: String) {
        var s = string
        s.withUTF8 { _ = Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

func printError(_ message: String) {
    var stderr = StandardError()
    print(message, to: &stderr)
}

struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        FileHandleStderr.write(string)
    }
}
