#if canImport(Glibc)
import Glibc
#endif

/// An error in a user-supplied value; the message names the value and what is wrong.
public struct SettingsError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
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
