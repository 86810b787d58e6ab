/// Percent-encoding of URL parts (RFC 3986 §2.1), for the relay's paths and queries and the
/// browser link, without Foundation.
public enum PercentEncoding {
    /// `text` with every byte that is not a path segment's own character (RFC 3986 `pchar`:
    /// unreserved, sub-delims, ":" and "@") written as %XX; "/" too unless `keepSlash`.
    public static func encodePath(_ text: String, keepSlash: Bool = false) -> String {
        var out = ""
        for byte in text.utf8 {
            if isPathCharacter(byte) || (keepSlash && byte == UInt8(ascii: "/")) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + [byte].hexString.uppercased()
            }
        }
        return out
    }

    /// `text` with each %XX decoded; nil when a % is not followed by two hex digits or the bytes
    /// are not UTF-8.
    public static func decode(_ text: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var it = text.utf8.makeIterator()
        while let byte = it.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = it.next().flatMap(hexValue), let low = it.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func isPathCharacter(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return "-._~!$&'()*+,;=:@".utf8.contains(b)
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
