import FoundationEssentials
import Glibc
import MediaCore
import Basics

/// The relay's token secret in a file: its text (without the final newline) is the HS256 key,
/// as LiveKit's API secret is. `serve --secret-file` makes one when the file does not exist:
/// 32 random bytes as 64 hex digits, mode 0600.
public enum SecretFile {
    /// Reads the secret at `path`.
    /// - Throws: `AccessSetupError` naming the file and what is wrong: missing, unreadable,
    ///   readable by anyone (mode o+r), shorter than 32 bytes.
    public static func read(_ path: String) throws(AccessSetupError) -> [UInt8] {
        var bytes: [UInt8]
        do { bytes = try PrivateFile.read(path, what: "secret file") } catch { throw AccessSetupError(error.description) }
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") || last == UInt8(ascii: " ") { bytes.removeLast() }
        guard bytes.count >= TokenAuthority.minimumSecretBytes else {
            throw AccessSetupError("secret file '\(path)': \(bytes.count) bytes; a secret needs at least \(TokenAuthority.minimumSecretBytes) (make one with `head -c 32 /dev/urandom | xxd -p -c 64`)")
        }
        return bytes
    }

    /// Reads the secret at `path`, or makes it (mode 0600) when no file is there.
    /// - Returns: the secret, and whether it was made now.
    public static func readOrCreate(_ path: String) throws(AccessSetupError) -> (secret: [UInt8], created: Bool) {
        if PrivateFile.exists(path) { return (try read(path), false) }
        let secret = random()
        do { try PrivateFile.create(path, contents: secret + [UInt8(ascii: "\n")], what: "secret file") } catch {
            throw AccessSetupError(error.description)
        }
        return (secret, true)
    }

    /// A new secret: 32 random bytes as 64 lowercase hex digits.
    public static func random() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }.hexString
        return Array(hex.utf8)
    }
}
