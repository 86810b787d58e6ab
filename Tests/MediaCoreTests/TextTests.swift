import Glibc
import Testing
@testable import MediaCore
import Basics

/// The small text helpers that stand in for Foundation's (the binary links only
/// FoundationEssentials): printf formatting, hex, trimming, percent-encoding.
@Suite struct TextTests {
    @Test func cFormatGivesPrintfsDigits() {
        #expect(cFormat("%.1f", 2.25) == "2.2")  // round half to even, as printf
        #expect(cFormat("%.1f", 0.05 * 100) == "5.0")
        #expect(cFormat("%.0f %%", 12.6) == "13 %")
        #expect(cFormat("%g", 1.5) == "1.5")
        #expect(cFormat("%g", 2.0) == "2")
        #expect(cFormat("\\u%04x", UInt32(0x2028)) == "\\u2028")
        #expect(cFormat("%ld of %ld", 3, 40) == "3 of 40")
        // Longer than the first buffer: formatted again into one that fits.
        let long = cFormat("%0200d", 7)
        #expect(long.count == 200 && long.hasSuffix("07") && long.hasPrefix("000"))
    }

    @Test func hexStringIsTwoLowerCaseDigitsPerByte() {
        #expect([UInt8]([0x00, 0x0a, 0xff, 0x7f]).hexString == "000aff7f")
        #expect([UInt8]().hexString == "")
        #expect((0...255).map { UInt8($0) }.hexString.count == 512)
    }

    @Test func trimmedDropsBlanksAndNewlinesAtTheEndsOnly() {
        #expect("  2 Mbit/s\t\n".trimmed() == "2 Mbit/s")
        #expect("a b".trimmed() == "a b")
        #expect(" \n\t ".trimmed() == "")
        #expect("".trimmed() == "")
        #expect("x"[...].trimmed() == "x")
    }

    @Test func percentEncodingOfAPathSegment() {
        // RFC 3986 §2.3: unreserved characters stay; §2.1: others are %XX, upper-case hex.
        #expect(PercentEncoding.encodePath("maths-101_a.b~c") == "maths-101_a.b~c")
        #expect(PercentEncoding.encodePath("a b/c?d#e%f") == "a%20b%2Fc%3Fd%23e%25f")
        #expect(PercentEncoding.encodePath("a/b", keepSlash: true) == "a/b")
        #expect(PercentEncoding.encodePath("salle-été") == "salle-%C3%A9t%C3%A9")
        #expect(PercentEncoding.encodePath("x:@!$&'()*+,;=") == "x:@!$&'()*+,;=")
    }

    @Test func percentDecodingRefusesWhatIsNotEncodedText() {
        #expect(PercentEncoding.decode("salle-%C3%A9t%c3%a9") == "salle-été")
        #expect(PercentEncoding.decode("a%20b") == "a b")
        #expect(PercentEncoding.decode("plain") == "plain")
        #expect(PercentEncoding.decode("100%") == nil)
        #expect(PercentEncoding.decode("%4") == nil)
        #expect(PercentEncoding.decode("%zz") == nil)
        #expect(PercentEncoding.decode("%FF%FE") == nil)  // not UTF-8
        for text in ["maths 101", "a/b?c=d&e", "été ☃", "%"] {
            #expect(PercentEncoding.decode(PercentEncoding.encodePath(text)) == text)
        }
    }

    @Test func startedThreadsCarryTheirShortNameForTheKernel() {
        let lock = ConditionLock()
        nonisolated(unsafe) var seen: String?
        startThread(named: "screenshare-textcheck") {
            let fd = open("/proc/thread-self/comm", O_RDONLY)
            var buffer = [UInt8](repeating: 0, count: 32)
            let n = fd >= 0 ? read(fd, &buffer, buffer.count) : 0
            close(fd)
            lock.withLock { seen = String(decoding: buffer[0..<max(0, n)], as: UTF8.self).trimmed() }
            lock.signal()
        }
        let deadline = SystemClock().nowNanos() + 10_000_000_000
        lock.lock()
        while seen == nil && lock.wait(untilMonotonicNanos: deadline) {}
        let name = seen
        lock.unlock()
        #expect(name == "ss-textcheck")
    }
}
