import Control
import Events
import FoundationEssentials
import Glibc
import Synchronization
import MediaCore
import Basics

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
        _ = try change(changes)
    }

    /// `apply`, returning the settings before and, when the source changes, the ticket the
    /// capture thread answers (`sourceSwitches`).
    func change(_ changes: [(String, String)]) throws -> (old: LiveSettings, sourceTicket: Int?) {
        let (old, new, ticket) = try live.withLock { s -> (LiveSettings, LiveSettings, Int?) in
            let old = s
            s = try s.applying(changes)
            return (old, s, s.source != old.source ? sourceSwitches.ask() : nil)
        }
        congestion?.withLock { $0.setBounds(bitrate: new.bitrate, minBitrate: new.minBitrate) }
        liveGeneration.add(1, ordering: .sequentiallyConsistent)
        mailbox.wake()
        events.emit(SettingsChanged(settings: new, changed: new.changedKeys(from: old)))
        return (old, ticket)
    }

    /// `set`: applies the changes and, when they change the source, waits (up to 5 s) for the
    /// capture thread to open it. A source it cannot open undoes the whole set (the other
    /// settings too: all or nothing) and the answer says why.
    func set(_ changes: [(String, String)]) -> ControlResponse {
        let old: LiveSettings, ticket: Int?
        do { (old, ticket) = try change(changes) } catch { return .failure("\(error)") }
        guard let ticket, case .x11 = config.source else { return ControlResponse(settings: settings.fields) }
        let verdict = sourceSwitches.wait(for: ticket, untilMonotonicNanos: SystemClock().nowNanos() + 5_000_000_000)
        guard let verdict else {
            return .failure("the capture did not take the new source within 5 s; see `ctl status` for the source in use")
        }
        guard let why = verdict else { return ControlResponse(settings: settings.fields) }
        let (undone, now) = live.withLock { s -> (LiveSettings, LiveSettings) in
            var back = old
            back.paused = s.paused
            back.source = s.source  // the capture thread put back the source in use
            let was = s
            s = back
            return (was, back)
        }
        congestion?.withLock { $0.setBounds(bitrate: now.bitrate, minBitrate: now.minBitrate) }
        liveGeneration.add(1, ordering: .sequentiallyConsistent)
        mailbox.wake()
        let reverted = now.changedKeys(from: undone)
        if !reverted.isEmpty { events.emit(SettingsChanged(settings: now, changed: reverted)) }
        return .failure("\(why); nothing changed")
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
            return set((request.set ?? []).map { ($0.key, $0.value) })
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
