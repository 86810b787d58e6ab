import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The relay's token secret in a file: its text (without the final newline) is the HS256 key,
/// as LiveKit's API secret is. `serve --secret-file` makes one when the file does not exist:
/// 32 random bytes as 64 hex digits, mode 0600.
public enum SecretFile {
    /// Reads the secret at `path`.
    /// - Throws: `AccessSetupError` naming the file and what is wrong: missing, unreadable,
    ///   readable by anyone (mode o+r), shorter than 32 bytes.
    public static func read(_ path: String) throws(AccessSetupError) -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw AccessSetupError("secret file '\(path)': \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw AccessSetupError("secret file '\(path)': not a regular file") }
        guard info.st_mode & S_IROTH == 0 else {
            throw AccessSetupError("secret file '\(path)': anyone on this machine can read it (mode \(String(info.st_mode & 0o777, radix: 8))); chmod o-r it")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AccessSetupError("secret file '\(path)': cannot read it")
        }
        var bytes = [UInt8](data)
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") { bytes.removeLast() }
        guard bytes.count >= TokenAuthority.minimumSecretBytes else {
            throw AccessSetupError("secret file '\(path)': \(bytes.count) bytes; a secret needs at least \(TokenAuthority.minimumSecretBytes) (make one with `head -c 32 /dev/urandom | xxd -p -c 64`)")
        }
        return bytes
    }

    /// Reads the secret at `path`, or makes it (mode 0600) when no file is there.
    /// - Returns: the secret, and whether it was made now.
    public static func readOrCreate(_ path: String) throws(AccessSetupError) -> (secret: [UInt8], created: Bool) {
        if access(path, F_OK) == 0 { return (try read(path), false) }
        let secret = random()
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AccessSetupError("secret file '\(path)': cannot create it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let text = Array((String(decoding: secret, as: UTF8.self) + "\n").utf8)
        guard text.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == text.count, fsync(fd) == 0 else {
            unlink(path)
            throw AccessSetupError("secret file '\(path)': cannot write it: \(String(cString: strerror(errno)))")
        }
        return (secret, true)
    }

    /// A new secret: 32 random bytes as 64 lowercase hex digits.
    public static func random() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        return Array(hex.utf8)
    }
}
