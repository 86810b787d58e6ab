import Basics
#if canImport(Glibc)
import Glibc
#endif

/// Where the portal's restore tokens are kept between shares, so the dialog is shown only the
/// first time: one file per kind of source (the token stands for a choice of monitor, or of
/// window), mode 0600 in a 0700 directory, under `$XDG_STATE_HOME/screenshare/` (default
/// `~/.local/state/screenshare/`).
public struct RestoreTokens: Sendable {
    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// The directory for this user, from the environment.
    public static func forUser(environment: [String: String]) -> RestoreTokens? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return RestoreTokens(directory: state + "/screenshare") }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return RestoreTokens(directory: home + "/.local/state/screenshare")
    }

    func path(_ source: ScreenCastRequest.Source) -> String { directory + "/portal-\(source.rawValue).token" }

    /// The token kept for `source`, if any (a file that is not ours alone is not read).
    public func token(for source: ScreenCastRequest.Source) -> String? {
        guard let bytes = try? PrivateFile.read(path(source), what: "portal restore token"),
              let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let token = text.trimmingWhitespace
        return token.isEmpty || token.utf8.count > 512 ? nil : token
    }

    /// Keeps `token` for `source` (nil: forgets it — `--ask`, or the portal gave none).
    /// - Throws: `FileError` when the directory cannot be made or the file written.
    public func keep(_ token: String?, for source: ScreenCastRequest.Source) throws(FileError) {
        let file = path(source)
        unlink(file)
        guard let token else { return }
        try makeDirectories()
        try PrivateFile.create(file, contents: Array((token + "\n").utf8), what: "portal restore token")
    }

    private func makeDirectories() throws(FileError) {
        var path = ""
        for part in directory.split(separator: "/") {
            path += "/" + part
            if mkdir(path, 0o700) == 0 {
                // Whatever the umask is at this moment (another thread may have narrowed it for a
                // while: the control socket's), a directory made here is its owner's alone.
                chmod(path, 0o700)
            } else if errno != EEXIST {
                throw FileError("cannot make \(path): \(SystemError.current)")
            }
        }
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}
