internal import CGio
import Basics
#if canImport(Glibc)
import Glibc
#endif

/// Why the portal gave no screen to share: one line in words, and a kind the CLI maps to an
/// exit code (69: the source is unavailable).
public struct PortalError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// No xdg-desktop-portal on the session bus (or no session bus).
        case noPortal
        /// The portal has no ScreenCast interface, or too old a one.
        case noScreenCast
        /// The user cancelled the dialog (the Start request answered 1).
        case cancelled
        /// The portal refused or failed otherwise.
        case failed
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// What to ask the portal for.
public struct ScreenCastRequest: Sendable, Equatable {
    public enum Source: String, Sendable { case monitor, window }
    public var source: Source = .monitor
    /// Whether the pointer is drawn into the picture.
    public var drawCursor = true
    /// The token the portal gave last time for this source (nil: ask).
    public var restoreToken: String?
    public init(source: Source = .monitor, drawCursor: Bool = true, restoreToken: String? = nil) {
        self.source = source
        self.drawCursor = drawCursor
        self.restoreToken = restoreToken
    }
}

/// One PipeWire stream the portal granted.
public struct ScreenCastStream: Sendable, Equatable {
    /// The PipeWire node to connect to.
    public var node: UInt32
    /// Its size and position in the compositor's space, when the portal says.
    public var width: Int32?
    public var height: Int32?
    /// 1 monitor, 2 window, 4 virtual.
    public var sourceType: UInt32?
    public init(node: UInt32, width: Int32? = nil, height: Int32? = nil, sourceType: UInt32? = nil) {
        self.node = node
        self.width = width
        self.height = height
        self.sourceType = sourceType
    }
}

/// What the portal offers on this desktop, without asking the user anything.
public struct ScreenCastAvailability: Sendable, Equatable {
    public var version: UInt32
    /// Bit mask: 1 monitor, 2 window, 4 virtual.
    public var sourceTypes: UInt32
    /// Bit mask: 1 hidden, 2 embedded, 4 metadata.
    public var cursorModes: UInt32
    public init(version: UInt32, sourceTypes: UInt32, cursorModes: UInt32) {
        self.version = version
        self.sourceTypes = sourceTypes
        self.cursorModes = cursorModes
    }
}

/// A screen-cast session of the xdg-desktop-portal (`org.freedesktop.portal.ScreenCast`):
/// made with ``open(_:busAddress:)``, which asks the user (once: with `persist_mode` 2 the
/// portal hands back a restore token that skips the dialog next time) and returns the PipeWire
/// stream and the descriptor of the PipeWire remote to read it from. The D-Bus connection is
/// kept for the whole share: the portal ends the session when it drops.
///
/// Not `Sendable`: the thread that opens it owns it (its GLib context).
public final class ScreenCastSession {
    private let bus: PortalBus
    private let handle: String
    /// The PipeWire remote's descriptor (ours; closed with the session).
    public let pipewireFD: Int32
    public let streams: [ScreenCastStream]
    /// The token to pass next time instead of asking (nil: the portal gave none).
    public let restoreToken: String?
    /// The cursor mode asked for: 4 as metadata (preferred), 2 embedded in the picture, 1 hidden.
    public let cursorMode: UInt32

    static let destination = "org.freedesktop.portal.Desktop"
    static let path = "/org/freedesktop/portal/desktop"
    static let interface = "org.freedesktop.portal.ScreenCast"

    private init(bus: PortalBus, handle: String, fd: Int32, streams: [ScreenCastStream], restoreToken: String?, cursorMode: UInt32) {
        self.bus = bus
        self.handle = handle
        pipewireFD = fd
        self.streams = streams
        self.restoreToken = restoreToken
        self.cursorMode = cursorMode
    }

    deinit { close() }

    private var closed = false

    /// Ends the session (the portal stops the stream) and closes the PipeWire descriptor.
    public func close() {
        guard !closed else { return }
        closed = true
        _ = try? bus.call(Self.destination, handle, "org.freedesktop.portal.Session", "Close", nil, timeoutMillis: 2_000)
        Glibc.close(pipewireFD)
    }

    /// What the portal on the bus at `busAddress` (nil: the session bus) offers, asking nothing.
    /// - Throws: `PortalError` (`noPortal`, `noScreenCast`).
    public static func availability(busAddress: String? = nil) throws(PortalError) -> ScreenCastAvailability {
        let bus = try PortalBus(address: busAddress)
        return try availability(on: bus)
    }

    private static func availability(on bus: PortalBus) throws(PortalError) -> ScreenCastAvailability {
        func property(_ name: String) throws(PortalError) -> UInt32 {
            let params = ss_tuple2(g_variant_new_string(interface), g_variant_new_string(name))
            let reply: OpaquePointer
            do {
                reply = try bus.call(destination, path, "org.freedesktop.DBus.Properties", "Get", params)
            } catch {
                if error.isNoService { throw PortalError(.noPortal, "no xdg-desktop-portal on the session bus: install xdg-desktop-portal and your desktop's backend (xdg-desktop-portal-gnome, -kde or -wlr)") }
                if error.isNoMethod { throw PortalError(.noScreenCast, "the desktop's portal cannot share the screen (no ScreenCast interface): install your desktop's portal backend (xdg-desktop-portal-gnome, -kde or -wlr)") }
                throw PortalError(.failed, "the desktop's portal did not answer: \(error.message)")
            }
            defer { g_variant_unref(reply) }
            let boxed = g_variant_get_child_value(reply, 0)!
            defer { g_variant_unref(boxed) }
            let value = g_variant_get_variant(boxed)!
            defer { g_variant_unref(value) }
            guard let n = Variant.uint32(value) else { throw PortalError(.noScreenCast, "the desktop's portal answered ScreenCast's \(name) with no number") }
            return n
        }
        let offered = ScreenCastAvailability(version: try property("version"), sourceTypes: try property("AvailableSourceTypes"),
                                             cursorModes: try property("AvailableCursorModes"))
        // xdg-desktop-portal answers for ScreenCast even with no backend to do it: it offers nothing then.
        guard offered.sourceTypes != 0 else {
            throw PortalError(.noScreenCast, "the desktop's portal has no screen-cast backend: install your desktop's (xdg-desktop-portal-gnome, -kde or -wlr)")
        }
        return offered
    }

    /// Asks the portal for a screen (or window) to share and opens its PipeWire remote.
    /// - Parameter dialogTimeoutMillis: how long the user has to answer the dialog.
    /// - Throws: `PortalError`: no portal, no ScreenCast (or older than version 4, which
    ///   `persist_mode` needs), the user cancelled, or the portal failed.
    public static func open(_ request: ScreenCastRequest, busAddress: String? = nil,
                            dialogTimeoutMillis: UInt32 = 300_000) throws(PortalError) -> ScreenCastSession {
        let bus = try PortalBus(address: busAddress)
        let offered = try availability(on: bus)
        guard offered.version >= 4 else {
            throw PortalError(.noScreenCast, "the desktop's portal is too old to share the screen here (ScreenCast version \(offered.version), 4 or later needed)")
        }
        let wanted: UInt32 = request.source == .monitor ? 1 : 2
        guard offered.sourceTypes & wanted != 0 else {
            throw PortalError(.noScreenCast, "the desktop's portal cannot share a \(request.source.rawValue) (it offers source types \(offered.sourceTypes))")
        }
        let token = "screenshare\(UInt32.random(in: 1...UInt32.max))"
        var step = 0
        func ask(_ method: String, _ what: String, timeout: UInt32 = 30_000,
                 _ parameters: (String) -> OpaquePointer) throws(PortalError) -> OpaquePointer {
            step += 1
            let handleToken = "\(token)_\(step)"
            let response: PortalBus.Response?
            do {
                response = try bus.request(path: bus.requestPath(token: handleToken), timeoutMillis: timeout) { () throws(PortalBus.CallError) in
                    let reply = try bus.call(destination, path, interface, method, parameters(handleToken))
                    g_variant_unref(reply)
                }
            } catch {
                throw PortalError(.failed, "the desktop's portal refused to \(what): \(error.message)")
            }
            guard let response else { throw PortalError(.failed, "the desktop's portal did not answer in \(timeout / 1000) s when asked to \(what)") }
            switch response.code {
            case 0: return response.results
            case 1:
                g_variant_unref(response.results)
                throw PortalError(.cancelled, "the screen-sharing dialog was cancelled: nothing is shared")
            default:
                g_variant_unref(response.results)
                throw PortalError(.failed, "the desktop's portal could not \(what) (it ended the request)")
            }
        }
        // CreateSession → the session's handle.
        let created = try ask("CreateSession", "make a screen-cast session") { handleToken in
            ss_tuple1(Variant.dict([("handle_token", g_variant_new_string(handleToken)),
                                    ("session_handle_token", g_variant_new_string(token))]))
        }
        let handle = Variant.string(created, "session_handle")
        g_variant_unref(created)
        guard let handle else { throw PortalError(.failed, "the desktop's portal made a session without a handle") }
        // From here the session exists: closed on any failure.
        func fail(_ error: PortalError) -> PortalError {
            _ = try? bus.call(destination, handle, "org.freedesktop.portal.Session", "Close", nil, timeoutMillis: 2_000)
            return error
        }
        // SelectSources: one source, the pointer as asked (as metadata where it is offered,
        // drawn by the capturer, so a pointer moving over a still slide sends no picture; else
        // embedded in the picture by the compositor), kept until revoked.
        let cursorMode: UInt32 = !request.drawCursor ? 1 : offered.cursorModes & 4 != 0 ? 4 : offered.cursorModes & 2 != 0 ? 2 : 1
        do {
            let selected = try ask("SelectSources", "choose what to share") { handleToken in
                var options: [(String, OpaquePointer)] = [
                    ("handle_token", g_variant_new_string(handleToken)),
                    ("types", g_variant_new_uint32(wanted)),
                    ("multiple", g_variant_new_boolean(0)),
                    ("persist_mode", g_variant_new_uint32(2)),
                ]
                if offered.cursorModes & cursorMode != 0 { options.append(("cursor_mode", g_variant_new_uint32(cursorMode))) }
                if let restore = request.restoreToken { options.append(("restore_token", g_variant_new_string(restore))) }
                return ss_tuple2(g_variant_new_object_path(handle), Variant.dict(options))
            }
            g_variant_unref(selected)
        } catch { throw fail(error) }
        // Start: the dialog (unless the restore token stands for a choice), then the streams.
        let started: OpaquePointer
        do {
            started = try ask("Start", "start sharing", timeout: dialogTimeoutMillis) { handleToken in
                ss_tuple3(g_variant_new_object_path(handle), g_variant_new_string(""), Variant.dict([("handle_token", g_variant_new_string(handleToken))]))
            }
        } catch { throw fail(error) }
        defer { g_variant_unref(started) }
        var streams: [ScreenCastStream] = []
        if let list = Variant.lookup(started, "streams") {
            defer { g_variant_unref(list) }
            if g_variant_is_of_type(list, ss_type("a(ua{sv})")) != 0 {
                for i in 0..<g_variant_n_children(list) {
                    let entry = g_variant_get_child_value(list, i)!
                    let node = g_variant_get_child_value(entry, 0)!, props = g_variant_get_child_value(entry, 1)!
                    var stream = ScreenCastStream(node: g_variant_get_uint32(node))
                    if let size = Variant.lookup(props, "size") {
                        if let (w, h) = Variant.pair(size) { stream.width = w; stream.height = h }
                        g_variant_unref(size)
                    }
                    stream.sourceType = Variant.uint32(props, "source_type")
                    streams.append(stream)
                    g_variant_unref(node); g_variant_unref(props); g_variant_unref(entry)
                }
            }
        }
        guard !streams.isEmpty else { throw fail(PortalError(.failed, "the desktop's portal started sharing but named no stream")) }
        let restoreToken = Variant.string(started, "restore_token")
        // The PipeWire remote the stream is read from: a descriptor that sees only our nodes.
        let fd: Int32
        do {
            let (reply, fds) = try bus.callTakingFDs(destination, path, interface, "OpenPipeWireRemote",
                                                     ss_tuple2(g_variant_new_object_path(handle), Variant.dict([])))
            defer { g_variant_unref(reply) }
            let index = g_variant_get_child_value(reply, 0)!
            defer { g_variant_unref(index) }
            let i = Int(g_variant_get_handle(index))
            guard i >= 0, i < fds.count else {
                for f in fds { Glibc.close(f) }
                throw PortalError(.failed, "the desktop's portal opened no PipeWire remote")
            }
            fd = fds[i]
            for (j, f) in fds.enumerated() where j != i { Glibc.close(f) }
        } catch let error as PortalBus.CallError {
            throw fail(PortalError(.failed, "the desktop's portal could not open PipeWire: \(error.message)"))
        } catch let error as PortalError {
            throw fail(error)
        } catch {
            throw fail(PortalError(.failed, "\(error)"))
        }
        return ScreenCastSession(bus: bus, handle: handle, fd: fd, streams: streams, restoreToken: restoreToken, cursorMode: cursorMode)
    }
}
