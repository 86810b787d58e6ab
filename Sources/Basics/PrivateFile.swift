#if canImport(Glibc)
import Glibc
#endif

/// A file that holds a secret (a token key, a private key, an SDP with SRTP keys): read only
/// when nobody else on the machine can read it, and made with `O_EXCL` and mode 0600, so it is
/// never readable by others, not even for an instant, and never replaces a file already there.
public enum PrivateFile {
    /// The bytes of the file at `path`.
    /// - Parameter what: how messages name it ("secret file", "certificate file").
    /// - Throws: `FileError` naming it and what is wrong: missing, not a regular file, readable
    ///   by anyone on the machine (mode o+r), unreadable.
    public static func read(_ path: String, what: String) throws(FileError) -> [UInt8] {
        try readRegular(path, what: what, privateOnly: true)
    }

    /// The text of a file that holds no secret (an SDP): no check of who else can read it.
    /// - Throws: `FileError` naming it and what is wrong: missing, not a regular file, unreadable,
    ///   not UTF-8.
    public static func readText(_ path: String, what: String) throws(FileError) -> String {
        guard let text = String(validating: try readRegular(path, what: what, privateOnly: false), as: UTF8.self) else {
            throw FileError("\(what) '\(path)': not UTF-8 text")
        }
        return text
    }

    private static func readRegular(_ path: String, what: String, privateOnly: Bool) throws(FileError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileError("\(what) '\(path)': \(SystemError.current)") }
        defer { close(fd) }
        // fstat on the descriptor read from: what is checked is what is read.
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FileError("\(what) '\(path)': \(SystemError.current)") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw FileError("\(what) '\(path)': not a regular file") }
        guard !privateOnly || info.st_mode & S_IROTH == 0 else {
            throw FileError("\(what) '\(path)': anyone on this machine can read it (mode \(String(info.st_mode & 0o777, radix: 8))); chmod o-r it")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileError("\(what) '\(path)': cannot read it: \(SystemError.current)")
            }
            if n == 0 { break }
            bytes += chunk[0..<n]
        }
        return bytes
    }

    /// Whether something is at `path`.
    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// Makes a new file at `path` holding `contents`, written through to the disk.
    /// - Parameter mode: 0600 unless the contents are not secret.
    /// - Throws: `FileError` naming it: already there, the directory cannot be written, the
    ///   disk is full. Nothing is left behind.
    public static func create(_ path: String, contents: [UInt8], mode: mode_t = 0o600, what: String) throws(FileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FileError("\(what) '\(path)': cannot create it: \(SystemError.current)") }
        let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let ok = written == contents.count && fsync(fd) == 0
        let reason = SystemError.current
        close(fd)
        guard ok else {
            unlink(path)
            throw FileError("\(what) '\(path)': cannot write it: \(reason)")
        }
    }
}
