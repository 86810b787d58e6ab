import ArgumentParser
import AudioIO
import Control
import Events
import Foundation
import Synchronization
import Logging
import MediaCore
import RTP
import Receiver
import Relay
import Room
import ScreenCapture
import Sender
import Transport
import VP8Codec
import VideoProcessing
#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the room relay on its own, for any number of rooms.",
        discussion: """
            Presenters publish with `screenshare start --room NAME --server THIS-HOST:PORT`; \
            viewers join with `screenshare watch --room NAME --server THIS-HOST:PORT`. \
            The relay forwards RTP without re-encoding, answers viewers' NACKs from its own \
            history and passes keyframe requests to the presenter (at most one per 300 ms).

            Examples:
              screenshare serve
              screenshare serve --listen :7700 --json
            """)

    @Option(help: ArgumentHelp("Where to listen: ADDR:PORT or :PORT.", valueName: "addr:port"), transform: ListenAddress.init)
    var listen = ListenAddress.default

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let duration, !(duration > 0) { throw ValidationError("--duration \(duration): must be more than 0") }
    }

    func run() throws {
        let logger = output.logger()
        let sink = output.sink()
        let at = listen
        let relay: RelayServer
        do {
            relay = try RelayServer(host: at.host, port: at.port, events: sink, logger: logger, browsers: true)
        } catch {
            printError("screenshare: --listen \(listen): \(error)")
            throw Exit.network
        }
        let stopped = Atomic<Bool>(false)
        let signals = SignalWatcher { signal in
            guard signal == SIGINT || signal == SIGTERM else { return }
            stopped.store(true, ordering: .relaxed)
            relay.stop()
        }
        _ = relay.run(durationSeconds: duration)
        _ = signals
        if stopped.load(ordering: .relaxed) { throw Exit.interrupted }
    }
}
