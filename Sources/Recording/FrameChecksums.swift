internal import Crypto
import MediaCore
import Basics
#if canImport(Glibc)
import Glibc
#endif

/// One MD5 per decoded picture, in the layout of ffmpeg's `-f framemd5` for rawvideo yuv420p
/// (`#stream#, dts, pts, duration, size, hash`), so a test or a CI demo can compare our
/// decoder's pictures with ffmpeg's decode of the same stream line by line. The hash covers
/// the Y, U and V planes, row by row without stride padding, as ffmpeg's rawvideo packing.
public final class FrameChecksums {
    private let fd: Int32
    private var index = 0

    /// - Throws: `RecordingError` naming the file when it cannot be created.
    public init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RecordingError("--frames-md5 \(path): cannot create the file: \(SystemError.current)") }
        write("#format: frame checksums\n#version: 2\n#hash: MD5\n#stream#, dts,        pts, duration,     size, hash\n")
    }

    deinit {
        close(fd)
    }

    /// Adds one picture's line.
    public func add(y: UnsafePointer<UInt8>, u: UnsafePointer<UInt8>, v: UnsafePointer<UInt8>,
                    strideY: Int, strideU: Int, strideV: Int, width: Int, height: Int) {
        var md5 = Insecure.MD5()
        for r in 0..<height { md5.update(bufferPointer: UnsafeRawBufferPointer(start: y + r * strideY, count: width)) }
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        for r in 0..<ch { md5.update(bufferPointer: UnsafeRawBufferPointer(start: u + r * strideU, count: cw)) }
        for r in 0..<ch { md5.update(bufferPointer: UnsafeRawBufferPointer(start: v + r * strideV, count: cw)) }
        let hex = md5.finalize().hexString
        let size = width * height + 2 * cw * ch
        write("0, \(pad(index, 10)), \(pad(index, 10)), \(pad(1, 8)), \(pad(size, 8)), \(hex)\n")
        index += 1
    }

    /// Writes all of `line`; a failed write (a full disk) loses the rest of the line, as a
    /// checksum file is a check, not the recording.
    private func write(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return }
                done += n
            }
        }
    }

    private func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: " ", count: max(0, width - s.count)) + s
    }
}
