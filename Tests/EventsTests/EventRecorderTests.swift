import Events
import Testing
@testable import Sender

/// What tests of the emitters rely on: a recorder behind `EventSink` keeps the events, by name
/// and fields as before, and typed.
@Suite struct EventRecorderTests {
    @Test func keepsNamesFieldsAndTypes() {
        let recorder = EventRecorder()
        let sink: EventSink = recorder
        sink.emit(.warning(.encoderOvershoot(kbps: 3000, targetKbps: 2000), "too much"))
        sink.emit(BroadcastPaused())
        sink.emit(.error(.sourceGone, "gone"))
        #expect(recorder.all.map(\.name) == ["warning", "paused", "error"])
        #expect(recorder.named("warning").first?.fields == [
            "kind": "encoder_overshoot", "kbps": 3000, "target_kbps": 2000, "message": "too much",
        ])
        #expect(recorder.named("paused").first?.fields == [:])
        #expect(recorder.all(WarningEvent.self) == [WarningEvent(.encoderOvershoot(kbps: 3000, targetKbps: 2000), "too much")])
        #expect(recorder.all(ErrorEvent.self).map(\.kind) == [.sourceGone])
    }
}
