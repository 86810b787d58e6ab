import Events
import Foundation
import Logging
import MediaCore
import Basics
import Room
import Testing
import Transport
import VP8Codec
@testable import Sender

/// What the encoder is made with: `motion` opens under quantizer ceilings on a plain RTP path
/// not under congestion control, and nowhere else.
@Suite struct EncoderConfigTests {
    func broadcaster(content: ContentPreference, room: Bool) throws -> Broadcaster {
        var config = BroadcastConfig(source: .raw(path: "/dev/null", format: .nv12, size: PixelSize(width: 64, height: 64), fps: 30),
                                     destination: Endpoint(host: "127.0.0.1", port: 9), cname: "encoder-config-test")
        config.content = content
        if room { config.room = RoomSettings(name: "class", displayName: "ann", server: "127.0.0.1:9") }
        return try Broadcaster(config: config, events: EventRecorder(), logger: Logger(label: "test"))
    }

    @Test func onlyAPlainMotionStreamNotUnderCongestionControlOpensUnderCeilings() throws {
        let size = PixelSize(width: 1920, height: 1080)
        let rate = Bitrate(bitsPerSecond: 2_000_000)
        let plain = try broadcaster(content: .motion, room: false)
        let open = plain.encoderConfig(size: size, plain.settings, bitrate: rate)
        #expect(open.openingCeiling && open.maxIntraBitratePercent == 900)
        let congested = plain.encoderConfig(size: size, plain.settings, bitrate: rate, congested: true)
        #expect(!congested.openingCeiling && congested.maxIntraBitratePercent == Broadcaster.congestedMaxIntraPercent)
        let room = try broadcaster(content: .motion, room: true)
        #expect(!room.encoderConfig(size: size, room.settings, bitrate: rate).openingCeiling)
        let slides = try broadcaster(content: .detail, room: false)
        #expect(!slides.encoderConfig(size: size, slides.settings, bitrate: rate).openingCeiling)
    }
}
