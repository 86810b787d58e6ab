internal import Crypto
import Foundation

/// One MD5 per decoded picture, in the layout of ffmpeg's `-f framemd5` for rawvideo yuv420p
/// (`#stream#, dts, pts, duration, size, hash`), so a test or a CI demo can compare our
/// decoder's pictures with ffmpeg's decode of the same stream line by line. The hash covers
/// the Y, U and V planes, row by row without stride padding, as ffmpeg's rawvideo packing.
public final class FrameChecksums {
    private let file: FileHandle
    private var index = 0

    /// - Throws: `RecordingError` naming the file when it cannot be created.
    public init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let f = FileHandle(forWritingAtPath: path) else {
            throw RecordingError("--frames-md5 \(path): cannot create the file")
        }
        file = f
        file.write(Data("#format: frame checksums\n#version: 2\n#hash: MD5\n#stream#, dts,        pts, duration,     size, hash\n".utf8))
    }

    deinit {
        try? file.close()
    }

    /// Adds one picture's line.
    public func add(y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>,
                    strideY: Int, strideU: Int, strideV: Int, width: Int, height: Int) {
        var md5 = Insecure.MD5()
        for r in 0..<height { md5.update(bufferPointer: UnsafeRawBufferPointer(start: y + r * strideY, count: width)) }
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        for r in 0..<ch { md5.update(bufferPointer: UnsafeRawBufferPointer(start: u + r * strideU, count: cw)) }
        for r in 0..<ch { md5.update(bufferPointer: UnsafeRawBufferPointer(start: v + r * strideV, count: cw)) }
        let hex = md5.finalize().map { String(format: "%02x", $0) }.joined()
        let size = width * height + 2 * cw * ch
        file.write(Data("0, \(pad(index, 10)), \(pad(index, 10)), \(pad(1, 8)), \(pad(size, 8)), \(hex)\n".utf8))
        index += 1
    }

    private func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: " ", count: max(0, width - s.count)) + s
    }
}
