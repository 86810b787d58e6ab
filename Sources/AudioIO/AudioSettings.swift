/// Which application's sound to share: `--audio-app NAME` (application.name or
/// application.process.binary, compared without case) or `--audio-app pid:N`.
public struct AppMatcher: Sendable, Equatable, CustomStringConvertible {
    public enum Key: Sendable, Equatable {
        case name(String)
        case pid(Int)
    }
    public var key: Key

    /// Parses `NAME` or `pid:N`.
    public init(_ text: String) throws {
        let t = text.trimmed()
        guard !t.isEmpty else { throw AudioError("give an application name, binary or pid:N") }
        if t.lowercased().hasPrefix("pid:") {
            guard let pid = Int(t.dropFirst(4)), pid > 0 else { throw AudioError("'\(text)': pid:N needs a positive process id") }
            key = .pid(pid)
        } else {
            key = .name(t)
        }
    }

    /// Whether a sink input with these properties belongs to the application.
    public func matches(applicationName: String?, binary: String?, pid: String?) -> Bool {
        switch key {
        case .name(let n):
            return [applicationName, binary].contains { $0.map { $0.lowercased() == n.lowercased() } ?? false }
        case .pid(let p):
            return pid.flatMap { Int($0) } == p
        }
    }

    public var description: String {
        switch key {
        case .name(let n): return n
        case .pid(let p): return "pid:\(p)"
        }
    }
}

/// What the audio stream carries.
public struct AudioCaptureConfig: Sendable, Equatable {
    /// The non-microphone part: nothing, one application's streams, or a whole sink's output.
    public enum Program: Sendable, Equatable {
        case none
        case application(AppMatcher)
        /// A sink's monitor; nil: the default sink's.
        case output(sink: String?)
    }
    /// The microphone: nil for none; `.some(nil)` for the default source.
    public var mic: String??
    public var program: Program
    public var programGainDecibels: Double = 0
    public var micGainDecibels: Double = 0
    /// The PulseAudio server (nil: $PULSE_SERVER or the default).
    public var server: String?

    public init(program: Program = .none, mic: String?? = .some(nil)) {
        self.program = program
        self.mic = mic
    }

    /// True when there is something to capture.
    public var hasSources: Bool { program != .none || mic != nil }
}

/// An audio error; the message names the source or server and what went wrong.
public struct AudioError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

import FoundationEssentials
import Glibc
import MediaCore
import Basics
