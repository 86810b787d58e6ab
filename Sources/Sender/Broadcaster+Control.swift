import Control
import Events
import FoundationEssentials
import Glibc
import Synchronization
import MediaCore

/// What `screenshare ctl` and signals can do to a running broadcast: pause, resume, stop,
/// status and live settings.
extension Broadcaster {
    /// The current live settings.
    public var settings: LiveSettings { live.withLock { $0 } }

    /// Pauses (video holds the last picture, keep-alive only) or resumes.
    public func setPaused(_ paused: Bool) {
        let changed = live.withLock { s -> Bool in
            defer { s.paused = paused }
            return s.paused != paused
        }
        guard changed else { return }
        liveGeneration.add(1, ordering: .sequentiallyConsistent)
        mailbox.wake()
        if paused { events.emit(BroadcastPaused()) } else { events.emit(BroadcastResumed()) }
    }

    /// Applies `set` changes (all or nothing) and reports them in a settings_changed event.
    /// - Throws: `SettingError` naming the bad key or value; nothing changes then.
    public func apply(_ changes: [(String, String)]) throws {
        let (old, new) = try live.withLock { s -> (LiveSettings, LiveSettings) in
            let old = s
            s = try s.applying(changes)
            return (old, s)
        }
        congestion?.withLock { $0.setBounds(bitrate: new.bitrate, minBitrate: new.minBitrate) }
        liveGeneration.add(1, ordering: .sequentiallyConsistent)
        mailbox.wake()
        events.emit(SettingsChanged(settings: new, changed: new.changedKeys(from: old)))
    }

    /// Answers one control request (see `ControlProtocol`).
    func handleControl(_ request: ControlRequest) -> ControlResponse {
        switch request.command {
        case .failure(let error):
            return .failure(error.description)
        case .success(.pause):
            setPaused(true)
            return ControlResponse(paused: true)
        case .success(.resume):
            setPaused(false)
            return ControlResponse(paused: false)
        case .success(.stop):
            stop(.control, detail: "ctl stop")
            return ControlResponse()
        case .success(.status):
            return ControlResponse(settings: settings.fields, stats: statusFields())
        case .success(.set):
            do {
                try apply((request.set ?? []).map { ($0.key, $0.value) })
                return ControlResponse(settings: settings.fields)
            } catch {
                return .failure("\(error)")
            }
        case .success(.invite):
            guard let invitations = config.invitations else {
                return .failure("this broadcaster hosts no room, so it makes no invitation links (`start --room` without --server does)")
            }
            if request.revoke == true {
                invitations.revoke()
                events.emit(InvitationChanged(link: nil))
                return ControlResponse()
            }
            let link = invitations.renew()
            events.emit(InvitationChanged(link: link))
            return ControlResponse(link: link)
        }
    }

    func statusFields() -> [String: JSONValue] {
        let c = counters.withLock { $0 }
        return [
            "frames_sent": .int(c.framesSent), "keyframes_sent": .int(c.keyframesSent), "bytes_sent": .int(c.bytesSent),
            "width": .int(c.outputSize.width), "height": .int(c.outputSize.height), "ssrc": .int(Int(ssrc)),
            "uptime_s": .double(Double(clock.nowNanos() &- startNanos) / 1e9), "destination": .string(config.destination.description),
        ]
    }
}
