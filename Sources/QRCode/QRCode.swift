import CQREncode
#if canImport(Glibc)
import Glibc
#endif

/// A QR code (libqrencode: 8-bit mode, error correction level L, the smallest version that
/// holds the text), as a square of modules, and drawn for a terminal or as an image. Level L
/// (7 % of it may be lost), as `qrencode` draws by default: a code on a screen is not torn or
/// smudged, and L keeps an invitation link of up to 53 characters in version 3 (29 modules: 33
/// columns by 17 rows with its quiet zone), where M needed version 4 (37 by 19) from 43.
public struct QRCode: Sendable, Equatable {
    /// Modules per side.
    public let size: Int
    /// Row after row: true is a dark module.
    public let modules: [Bool]

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public init(_ text: String) throws(Failure) {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_L) else {
            throw Failure(description: "cannot draw a QR code for \(text.utf8.count) bytes: \(String(cString: strerror(errno)))")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        size = width
        // Each byte of libqrencode's data describes one module; bit 0 is dark.
        modules = (0..<width * width).map { code.pointee.data[$0] & 1 == 1 }
    }

    init(size: Int, modules: [Bool]) {
        self.size = size
        self.modules = modules
    }

    public func isDark(_ x: Int, _ y: Int) -> Bool {
        x >= 0 && y >= 0 && x < size && y < size && modules[y * size + x]
    }

    /// Quiet zone (light modules) around the code when drawn.
    public static let margin = 2

    /// Lines for a terminal, two module rows per line with half blocks. Light modules are drawn
    /// (full, upper and lower blocks in the terminal's text colour) and dark ones left blank, as
    /// `qrencode -t UTF8` does: on the usual light-on-dark terminal the code then reads dark on
    /// light, as scanners expect, with its quiet zone drawn too.
    public func terminalLines() -> [String] {
        let m = Self.margin
        var lines: [String] = []
        var y = -m
        while y < size + m {
            var line = ""
            for x in -m..<(size + m) {
                let top = !isDark(x, y), bottom = y + 1 < size + m && !isDark(x, y + 1)
                line += top ? (bottom ? "█" : "▀") : (bottom ? "▄" : " ")
            }
            lines.append(line)
            y += 2
        }
        return lines
    }

    /// Reads back what `terminalLines()` drew (tests check the drawing is the code).
    public static func parse(terminalLines lines: [String]) -> QRCode? {
        guard let width = lines.first?.count, width > 2 * margin, lines.allSatisfy({ $0.count == width }) else { return nil }
        let size = width - 2 * margin
        var modules = [Bool](repeating: false, count: size * size)
        for (row, line) in lines.enumerated() {
            for (column, c) in line.enumerated() {
                let x = column - margin
                let light: (Bool, Bool)
                switch c {
                case "█": light = (true, true)
                case "▀": light = (true, false)
                case "▄": light = (false, true)
                case " ": light = (false, false)
                default: return nil
                }
                for (dy, isLight) in [(0, light.0), (1, light.1)] {
                    let y = row * 2 + dy - margin
                    if x >= 0, x < size, y >= 0, y < size { modules[y * size + x] = !isLight }
                }
            }
        }
        return QRCode(size: size, modules: modules)
    }

    /// A plain PBM image (P1), `scale` pixels a module, with the quiet zone (tests hand it to a
    /// real decoder).
    public func pbm(scale: Int = 4) -> String {
        let side = (size + 2 * Self.margin) * scale
        var out = "P1\n\(side) \(side)\n"
        for py in 0..<side {
            let y = py / scale - Self.margin
            var row = [String]()
            row.reserveCapacity(side)
            for px in 0..<side { row.append(isDark(px / scale - Self.margin, y) ? "1" : "0") }
            out += row.joined(separator: " ") + "\n"
        }
        return out
    }
}
