import FoundationEssentials
import Glibc

/// One SDES key in an SDP (RFC 4568 §9.1): `a=crypto:TAG SUITE inline:BASE64(KEY||SALT)`, what
/// `start --to … --srtp` writes and `watch --sdp`, ffmpeg and Janus read.
public struct SDESCrypto: Sendable, Equatable {
    /// The one suite written and read: AES-128 counter mode with an 80-bit HMAC-SHA1 tag
    /// (RFC 4568 §6.2.1), which ffmpeg, GStreamer, Janus and browsers all take.
    public static let suite = "AES_CM_128_HMAC_SHA1_80"
    /// Its master key (16) and salt (14) bytes.
    public static let keySaltLength = 30

    public var tag: Int
    /// The master key followed by the master salt.
    public var keySalt: [UInt8]

    public init(tag: Int = 1, keySalt: [UInt8]) {
        precondition(keySalt.count == Self.keySaltLength, "an SDES key and salt are 30 bytes")
        self.tag = tag
        self.keySalt = keySalt
    }

    /// A fresh random key and salt.
    public static func random() -> SDESCrypto {
        var generator = SystemRandomNumberGenerator()
        return SDESCrypto(keySalt: (0..<keySaltLength).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The attribute line, without the line end.
    public var line: String { "a=crypto:\(tag) \(Self.suite) inline:\(Data(keySalt).base64EncodedString())" }

    /// Reads the value of an `a=crypto:` attribute (what follows `crypto:`).
    /// - Throws: `RTPParseError` naming what is wrong: a suite other than ours (named), a key
    ///   that is not 30 bytes of base64, several keys or an MKI (which this reader does not do).
    public static func parse(_ value: Substring) throws -> SDESCrypto {
        let fields = value.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 3, let tag = Int(fields[0]), tag >= 0, tag <= 999_999_999 else {
            throw RTPParseError("a=crypto:\(value.prefix(60)): expected TAG SUITE inline:KEY")
        }
        guard fields[1] == suite else {
            throw RTPParseError("a=crypto suite '\(fields[1].prefix(40))' cannot be decrypted here (only \(suite))")
        }
        let params = fields[2].split(separator: ";")
        guard params.count == 1 else { throw RTPParseError("a=crypto: several keys in one line are not supported") }
        guard params[0].hasPrefix("inline:") else { throw RTPParseError("a=crypto: the key must be inline:BASE64") }
        let parts = params[0].dropFirst(7).split(separator: "|", omittingEmptySubsequences: false)
        // inline:KEY[|LIFETIME][|MKI:LENGTH]
        guard parts.count <= 2, parts.dropFirst().allSatisfy({ !$0.contains(":") }) else {
            throw RTPParseError("a=crypto: an MKI is not supported")
        }
        guard let data = Data(base64Encoded: String(parts[0])), data.count == keySaltLength else {
            throw RTPParseError("a=crypto: the inline key is not \(keySaltLength) bytes of base64")
        }
        return SDESCrypto(tag: tag, keySalt: [UInt8](data))
    }
}
