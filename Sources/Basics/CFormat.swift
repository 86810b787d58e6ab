#if canImport(Glibc)
import Glibc
#endif

/// C's printf for numbers (`%.1f`, `%02x`, `%g`; `%ld` for an `Int`, which is 64 bits), as
/// `String(format:)` gives them without Foundation. Only numeric conversions: a `%s` or `%@`
/// has no C string to read.
public func cFormat(_ format: String, _ arguments: CVarArg...) -> String {
    var capacity = 64
    while true {
        let (text, needed): (String?, Int) = withVaList(arguments) { list in
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { buffer in
                let n = Int(vsnprintf(buffer.baseAddress, capacity, format, list))
                guard n >= 0, n < capacity else { return (nil, n) }
                return (String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: n), as: UTF8.self), n)
            }
        }
        if let text { return text }
        guard needed >= 0 else { return "" }
        capacity = needed + 1
    }
}

extension Sequence<UInt8> {
    /// The bytes in lower-case hex, two digits each ("0a1b…").
    public var hexString: String {
        var out = ""
        for byte in self {
            out.append(Character(Unicode.Scalar(hexDigits[Int(byte >> 4)])))
            out.append(Character(Unicode.Scalar(hexDigits[Int(byte & 15)])))
        }
        return out
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

extension StringProtocol {
    /// The text without the white space (blanks and newlines) at either end.
    public func trimmed() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
