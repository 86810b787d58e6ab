import Foundation
import MediaCore
import Basics
import Testing
@testable import Sender

@Suite struct RawFrameReaderTests {
    func tempFile(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "raw-\(UUID().uuidString).yuv"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func loopsAndDetectsUnchangedFrames() throws {
        let size = PixelSize(width: 4, height: 2)
        let frameBytes = RawPixelFormat.nv12.frameByteCount(size)
        #expect(frameBytes == 12)
        // Two frames: A then B.
        let path = try tempFile([UInt8](repeating: 1, count: 12) + [UInt8](repeating: 2, count: 12))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try RawFrameReader(path: path, format: .nv12, size: size)
        #expect(reader.readNext() == .frame(changed: true))
        #expect(reader.bytes.first == 1)
        #expect(reader.readNext() == .frame(changed: true))
        #expect(reader.bytes.first == 2)
        #expect(reader.readNext() == .frame(changed: true))  // looped to A
        #expect(reader.bytes.first == 1)
        #expect(reader.framesRead == 3)
    }

    @Test func aStillImageIsUnchangedAfterTheFirstRead() throws {
        let size = PixelSize(width: 2, height: 2)
        let path = try tempFile([UInt8](repeating: 7, count: 16))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try RawFrameReader(path: path, format: .bgra, size: size)
        #expect(reader.readNext() == .frame(changed: true))
        #expect(reader.readNext() == .frame(changed: false))
        #expect(reader.readNext() == .frame(changed: false))
    }

    @Test func rejectsAFileThatIsNotWholeFrames() throws {
        let path = try tempFile([UInt8](repeating: 0, count: 13))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: FileError.self) {
            try RawFrameReader(path: path, format: .nv12, size: PixelSize(width: 4, height: 2))
        }
    }

    @Test func namesAMissingFile() {
        do {
            _ = try RawFrameReader(path: "/nonexistent/x.yuv", format: .i420, size: PixelSize(width: 2, height: 2))
            Issue.record("no error")
        } catch {
            #expect("\(error)".contains("/nonexistent/x.yuv"))
        }
    }
}
