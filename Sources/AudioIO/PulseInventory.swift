internal import CPulse
import FoundationEssentials
import Glibc
import Logging

// What PulseAudio has: applications playing, sources and sinks. Listed once for `sources` and
// for `start` to check the names it was given against.

/// An application playing sound: one PulseAudio sink input.
public struct AudioApplication: Sendable, Equatable {
    public var index: UInt32
    public var name: String
    public var binary: String
    public var pid: String
    public var mediaName: String
    public var sink: UInt32
}

/// A PulseAudio source (microphone) or sink (output).
public struct AudioDevice: Sendable, Equatable {
    public var index: UInt32
    public var name: String
    public var description: String
    /// For a source: the sink it monitors, if it is a monitor. For a sink: its monitor source.
    public var monitor: String?
    public var isDefault: Bool
}

/// What `screenshare sources` lists and what `start` checks names against.
public struct AudioInventory: Sendable, Equatable {
    public var server: String
    public var applications: [AudioApplication] = []
    public var sources: [AudioDevice] = []
    public var sinks: [AudioDevice] = []
}

extension PulseConnection {
    /// Lists applications, sources and sinks (lock held, connected).
    func fetchInventory(timeoutSeconds: Double) throws -> AudioInventory {
        guard let ctx = context else { throw AudioError("not connected") }
        let box = InventoryBox(server: serverDescription)
        let ud = Unmanaged.passUnretained(box).toOpaque()
        var ops: [OpaquePointer?] = []
        ops.append(pa_context_get_server_info(ctx, { _, info, ud in
            let b = Unmanaged<InventoryBox>.fromOpaque(ud!).takeUnretainedValue()
            if let info {
                b.defaultSource = info.pointee.default_source_name.map { String(cString: $0) } ?? ""
                b.defaultSink = info.pointee.default_sink_name.map { String(cString: $0) } ?? ""
            }
            b.done += 1
        }, ud))
        ops.append(pa_context_get_sink_input_info_list(ctx, { _, info, eol, ud in
            let b = Unmanaged<InventoryBox>.fromOpaque(ud!).takeUnretainedValue()
            if let info { b.value.applications.append(AudioApplication(info.pointee)) }
            if eol != 0 { b.done += 1 }
        }, ud))
        ops.append(pa_context_get_source_info_list(ctx, { _, info, eol, ud in
            let b = Unmanaged<InventoryBox>.fromOpaque(ud!).takeUnretainedValue()
            if let i = info?.pointee {
                b.value.sources.append(AudioDevice(index: i.index, name: str(i.name), description: str(i.description),
                                                   monitor: i.monitor_of_sink == cpulse_invalid_index() ? nil : str(i.monitor_of_sink_name),
                                                   isDefault: false))
            }
            if eol != 0 { b.done += 1 }
        }, ud))
        ops.append(pa_context_get_sink_info_list(ctx, { _, info, eol, ud in
            let b = Unmanaged<InventoryBox>.fromOpaque(ud!).takeUnretainedValue()
            if let i = info?.pointee {
                b.value.sinks.append(AudioDevice(index: i.index, name: str(i.name), description: str(i.description),
                                                 monitor: str(i.monitor_source_name), isDefault: false))
            }
            if eol != 0 { b.done += 1 }
        }, ud))
        defer { for op in ops { if let op { pa_operation_unref(op) } } }
        guard !ops.contains(where: { $0 == nil }) else { throw AudioError("PulseAudio query failed: \(lastError)") }
        guard wait(seconds: timeoutSeconds, until: { box.done == 4 || pa_context_get_state(ctx) != PA_CONTEXT_READY }), box.done == 4 else {
            throw AudioError("PulseAudio did not answer a query within \(timeoutSeconds) s")
        }
        var inv = box.value
        for i in inv.sources.indices { inv.sources[i].isDefault = inv.sources[i].name == box.defaultSource }
        for i in inv.sinks.indices { inv.sinks[i].isDefault = inv.sinks[i].name == box.defaultSink }
        return inv
    }
}

extension PulseCapture {
    /// Connects, lists applications (sink inputs), sources and sinks, and disconnects: the
    /// same query `start` checks `--mic` and `--audio-output` names against.
    /// - Throws: `AudioError` when the server cannot be reached or does not answer.
    public static func inventory(server: String? = nil, logger: Logger) throws -> AudioInventory {
        let pulse = try PulseConnection(applicationName: "screenshare", server: server)
        defer { pulse.close() }
        pulse.lock()
        defer { pulse.unlock() }
        try pulse.connect(timeoutSeconds: 5)
        return try pulse.fetchInventory(timeoutSeconds: 5)
    }
}

private final class InventoryBox {
    var value: AudioInventory
    var done = 0
    var defaultSource = ""
    var defaultSink = ""
    init(server: String) { value = AudioInventory(server: server) }
}

private func str(_ p: UnsafePointer<CChar>?) -> String { p.map { String(cString: $0) } ?? "" }

extension AudioApplication {
    init(_ i: pa_sink_input_info) {
        func prop(_ key: UnsafePointer<CChar>) -> String { str(pa_proplist_gets(i.proplist, key)) }
        index = i.index
        name = prop(cpulse_prop_application_name())
        binary = prop(cpulse_prop_application_process_binary())
        pid = prop(cpulse_prop_application_process_id())
        mediaName = prop(cpulse_prop_media_name())
        sink = i.sink
    }
}
