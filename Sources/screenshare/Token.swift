import Access
import ArgumentParser
import FoundationEssentials
import Glibc
import Synchronization

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mint a room token: who may watch or present in a room of `screenshare serve --secret-file`.",
        discussion: """
            Prints a signed token (a JWT, HS256, in LiveKit's claims) on standard output. Give it \
            to `watch --token`, `start --server … --token`, or in the browser link after #token=. \
            The relay checks it when the bearer joins; it does not need to stay valid after that.

            Examples:
              screenshare token --room class --role viewer --secret-file /etc/screenshare/secret
              screenshare token --room class --role presenter --name "Ms Smith" --ttl 2h \\
                  --secret-file /etc/screenshare/secret
            """)

    @Option(help: ArgumentHelp("The room the token admits to.", valueName: "name"))
    var room: String

    @Option(help: ArgumentHelp("viewer (watch) or presenter (watch and share).", valueName: "role"))
    var role: Role

    @Option(help: ArgumentHelp("The name the bearer has in the room (it replaces the one they give).", valueName: "name"))
    var name: String?

    @Option(help: ArgumentHelp("How long the token admits: seconds, or 90s, 45m, 12h, 7d (default: 12h, as `start --token-ttl`).", valueName: "duration"),
            transform: Parse.duration)
    var ttl: Double = 12 * 3600

    @Option(help: ArgumentHelp("The relay's secret (the file `serve --secret-file` uses).", valueName: "file"))
    var secretFile: String

    func validate() throws {
        do { _ = try Parse.room(room) } catch { throw ValidationError("--room \(error)") }
        if let name, name.utf8.count > 64 || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw ValidationError("--name: at most 64 bytes without control characters")
        }
    }

    func run() throws {
        let secret: [UInt8]
        do { secret = try SecretFile.read(secretFile) } catch {
            // The secret is the relay's: `serve --secret-file FILE` makes it when missing.
            let hint = FileManager.default.fileExists(atPath: secretFile) ? ""
                : " (the relay makes it: `screenshare serve --secret-file \(secretFile)` creates it when it is missing, readable by you only)"
            printError("screenshare: --secret-file: \(error)\(hint)")
            throw Exit.noInput
        }
        let (room, role, name, ttl) = (room, role, name, ttl)
        let token = try Blocking.run {
            try await TokenAuthority(secret: secret).mint(room: room, role: role, name: name, ttl: ttl)
        }
        print(token)
    }
}

extension Role: ExpressibleByArgument {}
