#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics

/// Errors from the socket layer, each naming the address and the system's reason.
public struct NetworkError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }

    /// `what` followed by the system's text for `code` (default: the current `errno`).
    public static func errno(_ what: String, _ code: Int32 = Glibc.errno) -> NetworkError {
        NetworkError("\(what): \(SystemError.message(code))")
    }
}
