import Testing
import RTP
@testable import Relay

/// A browser that takes FEC names packets in numbers that count the FEC packets inserted
/// among them: its NACKs are read back to the numbers before, FEC packets left out.
@Suite struct BrowserNACKMappingTests {
    /// Two frames of four packets (0–3, 4–7) with two FEC packets after each: the browser's
    /// numbers are 0–3, FEC 4–5, 6–9, FEC 10–11, then 12 on for 8 on.
    static func protection() -> REDProtection {
        var red = REDProtection(redPT: 123, fecPT: 127)
        var b = [UInt8](repeating: 0, count: 256)
        for seq in UInt16(0)..<8 {
            let packet: [UInt8] = [0x80, (seq % 4 == 3 ? 0x80 : 0) | 96, 0, UInt8(seq), 0, 0, 0, 1, 0, 0, 0, 2] + Array(repeating: 7, count: 40)
            _ = b.withUnsafeMutableBytes { buffer in
                packet.withUnsafeBytes { buffer.copyMemory(from: $0) }
                return red.prepare(buffer, length: packet.count, protection: 0.5)
            }
            red.finishFrame(protection: 0.5) { _ in }
        }
        return red
    }

    @Test func nackItemsLoseTheFECNumbersAndCloseUp() {
        let red = Self.protection()
        #expect(red.fecPackets == 4)
        // PID 3 and the next 8 (4–11): media 3, 6–9 → 3, 4–7; FEC 4, 5, 10, 11 out.
        let mapped = BrowserGateway.withoutFEC(pid: 3, mask: 0b1111_1111, red: red)
        #expect(mapped.pid == 3 && mapped.mask == 0b1111)
        // PID 4 (FEC) with 6 (media 4): 4.
        #expect(BrowserGateway.withoutFEC(pid: 4, mask: 0b10, red: red) == (4, 0))
        // Only FEC numbers: the media packet before them (a harmless resend).
        #expect(BrowserGateway.withoutFEC(pid: 10, mask: 0b1, red: red) == (7, 0))
        // After every insertion: shifted by four.
        #expect(BrowserGateway.withoutFEC(pid: 12, mask: 0b1000_0000_0000_0001, red: red) == (8, 0b1000_0000_0000_0001))
    }
}
