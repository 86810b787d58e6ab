#if canImport(Glibc)
import Glibc
#endif
import MediaCore
import Basics
import Events
import Transport

/// Pixel layouts accepted by `--input-format`.
public enum RawPixelFormat: String, Sendable, CaseIterable {
    case nv12, bgra, i420

    /// Bytes in one frame of `size`.
    public func frameByteCount(_ size: PixelSize) -> Int {
        switch self {
        case .bgra: return size.width * size.height * 4
        case .nv12, .i420: return size.width * size.height + 2 * ((size.width + 1) / 2) * ((size.height + 1) / 2)
        }
    }
}

/// Reads raw frames of a fixed size and layout from a file (looping at its end) or from a pipe
/// (`-`: standard input; ends at end of input), into one reused buffer.
public final class RawFrameReader {
    public let format: RawPixelFormat
    public let size: PixelSize
    public let frameBytes: Int
    public let loops: Bool
    private let fd: Int32
    private let ownsFD: Bool
    private let buffer: UnsafeMutableRawBufferPointer
    private let previous: UnsafeMutableRawBufferPointer
    private var hasPrevious = false
    public private(set) var framesRead = 0

    /// - Throws: `FileError` naming the file when it cannot be opened, is empty, or is not a
    ///   whole number of frames long.
    public init(path: String, format: RawPixelFormat, size: PixelSize) throws {
        guard size.width > 0, size.height > 0, size.width <= 16384, size.height <= 16384 else {
            throw SettingError("--input-size \(size) is not a usable frame size")
        }
        self.format = format
        self.size = size
        frameBytes = format.frameByteCount(size)
        if path == "-" {
            fd = 0
            ownsFD = false
            loops = false
        } else {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw FileError("--input '\(path)': \(SystemError.current)")
            }
            ownsFD = true
            var st = stat()
            fstat(fd, &st)
            let isRegular = (st.st_mode & S_IFMT) == S_IFREG
            loops = isRegular
            if isRegular {
                let length = Int(st.st_size)
                guard length >= frameBytes else {
                    close(fd)
                    throw FileError("--input '\(path)' holds \(length) bytes, less than one \(format.rawValue) frame of \(size) (\(frameBytes) bytes)")
                }
                guard length % frameBytes == 0 else {
                    close(fd)
                    throw FileError("--input '\(path)' is \(length) bytes, not a whole number of \(format.rawValue) \(size) frames (\(frameBytes) bytes each): check --input-size and --input-format")
                }
            }
        }
        buffer = .allocate(byteCount: frameBytes, alignment: 64)
        previous = .allocate(byteCount: frameBytes, alignment: 64)
    }

    deinit {
        if ownsFD { close(fd) }
        buffer.deallocate()
        previous.deallocate()
    }

    /// Outcome of reading one frame.
    public enum ReadResult: Equatable {
        case frame(changed: Bool)
        case endOfInput
        case failed(String)
    }

    /// Reads the next frame into the internal buffer; `changed` is false when it is byte-identical
    /// to the frame before (a looping still image costs no conversion or new encode).
    public func readNext() -> ReadResult {
        // Keep the last frame to compare against: swap by copying (only when we had one).
        if hasPrevious { previous.copyMemory(from: UnsafeRawBufferPointer(buffer)) }
        var filled = 0
        var rewound = false
        while filled < frameBytes {
            let n = read(fd, buffer.baseAddress! + filled, frameBytes - filled)
            if n > 0 { filled += n; continue }
            if n < 0 {
                if errno == EINTR { continue }
                return .failed("reading input: \(SystemError.current)")
            }
            // End of input.
            if loops && filled == 0 && !rewound {
                lseek(fd, 0, SEEK_SET)
                rewound = true
                continue
            }
            return .endOfInput
        }
        framesRead += 1
        let changed = !hasPrevious || memcmp(previous.baseAddress!, buffer.baseAddress!, frameBytes) != 0
        hasPrevious = true
        return .frame(changed: changed)
    }

    /// The frame just read (valid until the next `readNext`).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(buffer) }
}
