import Foundation
import QRCode
import Testing
import X11TestSupport

/// The browser link as a QR code: what libqrencode makes, drawn for a terminal or as an image,
/// is read back by a real decoder (zbarimg, from zbar-tools) as the same link.
@Suite struct QRCodeTests {
    /// The text zbarimg reads from a PBM image.
    static func decode(_ pbm: String) throws -> String {
        let dir = try makeTempDir()
        let path = "\(dir)/code.pbm"
        try pbm.write(toFile: path, atomically: true, encoding: .ascii)
        let z = try Child(which("zbarimg"), ["--raw", "-q", path], dir: dir, name: "zbarimg")
        let status = z.finish(within: 20)
        guard status == 0 else { throw TestFailure("zbarimg exit \(status): \(z.stderr)") }
        return z.stdout.hasSuffix("\n") ? String(z.stdout.dropLast()) : z.stdout
    }

    static let links = ["http://192.168.1.20:7600/class", "http://10.0.0.7:7600/lab%232%3Cb%3E", "http://[fe80::1]:7600/" + String(repeating: "r", count: 60)]

    @Test(arguments: links) func aScannerReadsTheLinkBack(_ link: String) throws {
        let code = try QRCode(link)
        #expect(code.size >= 21 && (code.size - 17) % 4 == 0, "a QR code is 17 + 4 × version modules wide: \(code.size)")
        #expect(try Self.decode(code.pbm()) == link)
    }

    @Test(arguments: links) func theTerminalDrawingIsTheCode(_ link: String) throws {
        let code = try QRCode(link)
        let lines = code.terminalLines()
        #expect(lines.count == (code.size + 2 * QRCode.margin + 1) / 2)
        let back = try #require(QRCode.parse(terminalLines: lines))
        #expect(back == code)
        #expect(try Self.decode(back.pbm()) == link)
    }

    @Test func aMangledDrawingIsNotACode() throws {
        var lines = try QRCode("http://127.0.0.1:7600/x").terminalLines()
        lines[3] = "x" + lines[3].dropFirst()
        #expect(QRCode.parse(terminalLines: lines) == nil)
        #expect(QRCode.parse(terminalLines: []) == nil)
    }
}
