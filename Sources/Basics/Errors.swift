#if canImport(Glibc)
import Glibc
#endif

/// A value the user gave that is refused: a flag's value, a `ctl set` KEY=VALUE, a value a
/// parser was handed (a bit rate, a size, an address). The one settings error: it keeps the
/// key and value apart, when it knows them, so each door words it its own way (`--fps 0: …`,
/// `set fps=0: …`); a value parser, which does not know which flag or key it was given for,
/// gives only its message (`SettingError("'2x' is not a bit rate …")`).
public struct SettingError: Error, CustomStringConvertible, Equatable {
    /// The setting's key, which is also `start`'s flag without the dashes; "" for a refusal of
    /// the settings together; nil for a value parser's message.
    public var key: String?
    public var value: String
    public var reason: String
    public init(key: String, value: String, reason: String) {
        self.key = key
        self.value = value
        self.reason = reason
    }
    /// A value parser's message, naming the value and what is wrong with it.
    public init(_ message: String) {
        key = nil
        value = ""
        reason = message
    }
    /// As `ctl set` words it: "set fps=0: must be …".
    public var description: String {
        guard let key else { return reason }
        return key.isEmpty ? "set: \(reason)" : "set \(key)=\(value): \(reason)"
    }
    /// As `start` words it: "--fps 0: must be …".
    public var flagDescription: String {
        guard let key else { return reason }
        return key.isEmpty ? reason : "--\(key) \(value): \(reason)"
    }
}

/// A file the user named (an --input, an --sdp, a recording) that cannot be read or written;
/// the message names the flag, the file and the reason.
public struct FileError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The one path from an errno value to the text a user reads.
public enum SystemError {
    /// The system's description of `code` ("Address already in use").
    public static func message(_ code: Int32) -> String { String(cString: strerror(code)) }
    /// The system's description of the current `errno`.
    public static var current: String { message(errno) }
}
