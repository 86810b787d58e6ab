import Events
import MediaCore
@testable import RTPSession
import Testing
import VP8Codec
@testable import Receiver

/// What the viewer does with a keyframe larger than it takes: refuses it before the decoder
/// allocates for it, says so once (`warning` `picture_too_large`, with the size), and shows the
/// next keyframe that fits.
@Suite struct ViewerOutputTests {
    func decode(_ output: inout ViewerOutput, _ bytes: [UInt8], keyframe: Bool) -> VideoReceivePath.Decoded {
        bytes.withUnsafeBytes {
            output.decode(BufferedFrame(rtpTimestamp: 0, pictureID: nil, isKeyframe: keyframe, arrival: 0, playoutTime: 0, data: $0), now: 0)
        }
    }

    @Test func aKeyframeLargerThanTheViewerTakesIsRefusedAndSaidOnce() throws {
        let encoder = try VP8Encoder(config: VP8EncoderConfig(size: PixelSize(width: 64, height: 48)))
        var keyframe: [UInt8] = []
        try encoder.encode(VideoFrame(width: 64, height: 48), pts: 0, duration: 3000) { bytes, _ in keyframe = Array(bytes) }
        var forged = keyframe
        forged.replaceSubrange(6..<10, with: [0x80, 0x3E, 0x80, 0x3E])  // 16000x16000
        let events = EventRecorder()
        var output = ViewerOutput(decoder: try VP8Decoder.fastest(maxPixels: 1920 * 1080), window: nil, checksums: nil, events: events, startedAt: 0)
        #expect(decode(&output, forged, keyframe: true) == .failed)
        #expect(decode(&output, forged, keyframe: true) == .failed)
        let warnings = events.all(WarningEvent.self)
        #expect(warnings.map(\.kind) == [.pictureTooLarge(width: 16000, height: 16000)], "\(warnings)")
        #expect(warnings.first?.message.contains("16000x16000") == true)
        #expect(output.pictureSize.area == 0)
        // The stream goes on: the next keyframe that fits is shown.
        #expect(decode(&output, keyframe, keyframe: true) == .picture)
        #expect(output.pictureSize == PixelSize(width: 64, height: 48))
        // And a forged one after it is said again.
        #expect(decode(&output, forged, keyframe: true) == .failed)
        #expect(events.all(WarningEvent.self).count == 2)
    }
}
