import Access
import ArgumentParser
import AudioIO
import Congestion
import Control
import Events
import FoundationEssentials
import Synchronization
import Logging
import MediaCore
import Basics
import RTP
import Receiver
import Relay
import Room
import ScreenCapture
import Sender
import Transport
import VP8Codec
import WebRTC
import VideoProcessing
#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the room relay on its own, for any number of rooms.",
        discussion: """
            Presenters publish with `screenshare start --room NAME --server THIS-HOST:PORT --token T`; \
            viewers join with `screenshare watch --room NAME --server THIS-HOST:PORT --token T`, \
            browsers open http://THIS-HOST:PORT/NAME#token=T. Tokens come from \
            `screenshare token --secret-file FILE` with the same secret file; the relay refuses to \
            start without --secret-file or --open. \
            The relay forwards RTP without re-encoding, answers viewers' NACKs from its own \
            history and passes keyframe requests to the presenter (at most one per 300 ms).

            Examples:
              screenshare serve --secret-file /etc/screenshare/secret
              screenshare token --room class --role viewer --secret-file /etc/screenshare/secret
              screenshare serve --open --listen :7700 --json
            """)

    @Option(help: ArgumentHelp("Where to listen: ADDR:PORT or :PORT.", valueName: "addr:port"), transform: ListenAddress.init)
    var listen = ListenAddress.default

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("Require room tokens signed with the secret in FILE (made, mode 0600, when it does not exist).", valueName: "file"))
    var secretFile: String?

    @Flag(help: "Let anyone who reaches the relay join any room, without a token.")
    var open = false

    @Option(help: ArgumentHelp("Keep the relay's DTLS certificate (and so its fingerprint) in FILE across restarts (made, mode 0600, when missing).", valueName: "file"))
    var certFile: String?

    @Option(help: ArgumentHelp("""
        Forward error correction to browsers (RED + ULPFEC, when they offer it). \
        auto: for each browser whose loss × round trip is too high for resends alone; on: always; off: never.
        """, valueName: "mode"))
    var fec: FECPolicy.Mode = .auto

    @OptionGroup(title: "HTTPS") var https: TLSOptions

    @OptionGroup(title: "Janus") var janus: JanusOptions

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if secretFile != nil && open { throw ValidationError("--secret-file and --open contradict each other: require tokens, or not") }
        if secretFile == nil && !open {
            throw ValidationError("say who may join: --secret-file FILE (rooms need tokens from `screenshare token`) or --open (anyone may join any room)")
        }
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
    }

    func run() throws {
        let (sink, logger) = output.outputs()
        let at = listen
        var authority: TokenAuthority?
        if let secretFile {
            let secret: [UInt8]
            do {
                let (bytes, created) = try SecretFile.readOrCreate(secretFile)
                if created { printError("screenshare: made a new secret in \(secretFile) (mint tokens with `screenshare token --secret-file \(secretFile)`)") }
                secret = bytes
            } catch {
                printError("screenshare: --secret-file: \(error)")
                throw Exit.noInput
            }
            authority = try Blocking.run { try await TokenAuthority(secret: secret) }
        }
        var certificate: DTLSCertificate?
        if let certFile {
            do { certificate = try DTLSCertificate.loadOrCreate(file: certFile).certificate } catch {
                printError("screenshare: --cert-file: \(error)")
                throw Exit.noInput
            }
        }
        let tls = try https.files()
        let cascade = try janus.cascade()
        let relay: RelayServer
        do {
            var browserLimits = BrowserLimits()
            browserLimits.fec = fec
            relay = try RelayServer(host: at.host, port: at.port, events: sink, logger: logger, browsers: true, browserLimits: browserLimits,
                                    authorizer: authority, certificate: certificate, tls: tls, janus: cascade)
        } catch {
            printError("screenshare: --listen \(listen): \(error)")
            throw Exit.network
        }
        let stopped = Atomic<Bool>(false)
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { signal in
            if signal == SIGHUP {
                // A renewed certificate (certbot's deploy hook): taken without a restart.
                do {
                    try tls?.reload()
                    if let tls { logger.info("https: read \(tls.certificatePath) again") }
                } catch {
                    logger.warning("https: \(error); keeping the certificate in use")
                }
                return
            }
            guard signal == SIGINT || signal == SIGTERM else { return }
            stopped.store(true, ordering: .relaxed)
            relay.stop()
        }
        _ = relay.run(durationSeconds: duration)
        _ = signals
        if stopped.load(ordering: .relaxed) { throw Exit.interrupted }
    }
}
