internal import CGio
#if canImport(Glibc)
import Glibc
#endif

/// A private D-Bus connection to the session bus (GDBus, as OBS, libwebrtc and the portal
/// itself use), with a main context of its own: the portal's calls answer through a `Response`
/// signal on a request object, which this waits for by running that context — no global GLib
/// main loop, no thread of GLib's dispatching into ours.
///
/// Not `Sendable`: it belongs to the thread that made it (GLib's thread-default context).
final class PortalBus {
    private let context: OpaquePointer
    let connection: OpaquePointer
    /// Our unique name on the bus (":1.42").
    let uniqueName: String

    /// Connects to the bus at `address` (nil: the session bus, `DBUS_SESSION_BUS_ADDRESS`).
    init(address: String?) throws(PortalError) {
        let ctx = g_main_context_new()!
        g_main_context_push_thread_default(ctx)
        defer { g_main_context_pop_thread_default(ctx) }
        var error: UnsafeMutablePointer<GError>?
        // The session bus as a desktop session gives it, and nothing else: GLib's own lookup
        // would otherwise "autolaunch" a bus through dbus-launch on an X11 display.
        guard let busAddress = address ?? Self.sessionBusAddress() else {
            g_main_context_unref(ctx)
            throw PortalError(.noPortal, "no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set): the desktop's portal is reached through it")
        }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue
            | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let c = g_dbus_connection_new_for_address_sync(busAddress, flags, nil, nil, &error) else {
            let why = Self.take(error)
            g_main_context_unref(ctx)
            throw PortalError(.noPortal, "cannot reach the D-Bus session bus (\(why))")
        }
        context = ctx
        connection = c
        g_dbus_connection_set_exit_on_close(c, 0)
        uniqueName = g_dbus_connection_get_unique_name(c).map { String(cString: $0) } ?? ""
    }

    /// `DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus` when that socket exists (systemd's).
    static func sessionBusAddress() -> String? {
        if let a = getenv("DBUS_SESSION_BUS_ADDRESS").map({ String(cString: $0) }), !a.isEmpty { return a }
        guard let run = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), run.hasPrefix("/") else { return nil }
        var info = stat()
        guard stat(run + "/bus", &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return "unix:path=" + run + "/bus"
    }

    deinit {
        g_dbus_connection_close_sync(connection, nil, nil)
        g_object_unref(UnsafeMutableRawPointer(connection))
        g_main_context_unref(context)
    }

    /// The message of a GError (freed), or "unknown error".
    static func take(_ error: UnsafeMutablePointer<GError>?) -> String {
        guard let error else { return "unknown error" }
        defer { g_error_free(error) }
        return error.pointee.message.map { String(cString: $0) } ?? "unknown error"
    }

    /// A D-Bus error from a call: its GDBus code (-1 when not one) and message.
    struct CallError: Error {
        var code: Int32
        var message: String
        init(_ error: UnsafeMutablePointer<GError>?) {
            code = ss_dbus_error_code(error)
            message = PortalBus.take(error)
        }
        var isNoService: Bool { code == G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue || code == G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue }
        var isNoMethod: Bool {
            code == G_DBUS_ERROR_UNKNOWN_METHOD.rawValue || code == G_DBUS_ERROR_UNKNOWN_INTERFACE.rawValue
                || code == G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue || code == G_DBUS_ERROR_INVALID_ARGS.rawValue
        }
    }

    /// Calls `method` and returns its reply (a tuple; unref it), or throws the D-Bus error.
    /// `parameters` is a floating GVariant (taken).
    func call(_ destination: String, _ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer?,
              timeoutMillis: Int32 = 10_000) throws(CallError) -> OpaquePointer {
        var error: UnsafeMutablePointer<GError>?
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        guard let reply = g_dbus_connection_call_sync(connection, destination, path, interface, method, parameters, nil,
                                                      G_DBUS_CALL_FLAGS_NONE, timeoutMillis, nil, &error) else {
            throw CallError(error)
        }
        return reply
    }

    /// Calls `method` and returns its reply and the file descriptors that came with it (each
    /// ours to close; the reply's `h` values index them).
    func callTakingFDs(_ destination: String, _ path: String, _ interface: String, _ method: String, _ parameters: OpaquePointer?,
                       timeoutMillis: Int32 = 10_000) throws(CallError) -> (reply: OpaquePointer, fds: [Int32]) {
        var error: UnsafeMutablePointer<GError>?
        var list: UnsafeMutablePointer<GUnixFDList>?
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        guard let reply = g_dbus_connection_call_with_unix_fd_list_sync(connection, destination, path, interface, method, parameters, nil,
                                                                        G_DBUS_CALL_FLAGS_NONE, timeoutMillis, nil, &list, nil, &error) else {
            throw CallError(error)
        }
        var fds: [Int32] = []
        if let list {
            var n: Int32 = 0
            if let stolen = g_unix_fd_list_steal_fds(list, &n) {
                fds = (0..<Int(n)).map { stolen[$0] }
                g_free(stolen)
            }
            g_object_unref(UnsafeMutableRawPointer(list))
        }
        return (reply, fds)
    }

    /// Where the portal answers a request made with `token`: its request object's path.
    func requestPath(token: String) -> String {
        let sender = String(uniqueName.drop { $0 == ":" }.map { $0 == "." ? "_" : $0 })
        return "/org/freedesktop/portal/desktop/request/\(sender)/\(token)"
    }

    /// What a portal request answered: 0 success, 1 cancelled by the user, 2 ended otherwise;
    /// and its results (an a{sv}; unref it).
    struct Response {
        var code: UInt32
        var results: OpaquePointer
    }

    /// Subscribes to the `Response` of the request at `path`, runs `start` (the method call that
    /// makes the request), and waits for the answer up to `timeoutMillis`.
    /// - Returns: nil when no answer came in time.
    func request(path: String, timeoutMillis: UInt32, _ start: () throws(CallError) -> Void) throws(CallError) -> Response? {
        final class Box {
            var response: Response?
            var timedOut = false
        }
        let box = Box()
        let boxPointer = Unmanaged.passUnretained(box).toOpaque()
        g_main_context_push_thread_default(context)
        defer { g_main_context_pop_thread_default(context) }
        // Subscribed before the call: the answer may come before the call returns.
        let subscription = g_dbus_connection_signal_subscribe(
            connection, "org.freedesktop.portal.Desktop", "org.freedesktop.portal.Request", "Response", path, nil,
            G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, data in
                guard let parameters, let data else { return }
                let box = Unmanaged<Box>.fromOpaque(data).takeUnretainedValue()
                guard box.response == nil, g_variant_n_children(parameters) == 2 else { return }
                let code = g_variant_get_child_value(parameters, 0)
                let results = g_variant_get_child_value(parameters, 1)
                box.response = Response(code: g_variant_get_uint32(code), results: results!)
                g_variant_unref(code)
            }, boxPointer, nil)
        defer { g_dbus_connection_signal_unsubscribe(connection, subscription) }
        try start()
        let timer = g_timeout_source_new(timeoutMillis)!
        g_source_set_callback(timer, { data in
            Unmanaged<Box>.fromOpaque(data!).takeUnretainedValue().timedOut = true
            return 0  // G_SOURCE_REMOVE
        }, boxPointer, nil)
        g_source_attach(timer, context)
        defer {
            g_source_destroy(timer)
            g_source_unref(timer)
        }
        while box.response == nil && !box.timedOut {
            g_main_context_iteration(context, 1)
        }
        return box.response
    }
}

/// Reading GVariants the portal sends.
enum Variant {
    /// The value of `key` in an a{sv} (unref it), if there.
    static func lookup(_ dict: OpaquePointer, _ key: String) -> OpaquePointer? { g_variant_lookup_value(dict, key, nil) }

    static func string(_ v: OpaquePointer) -> String? {
        guard g_variant_is_of_type(v, ss_type("s")) != 0 || g_variant_is_of_type(v, ss_type("o")) != 0 else { return nil }
        return g_variant_get_string(v, nil).map { String(cString: $0) }
    }

    static func uint32(_ v: OpaquePointer) -> UInt32? {
        g_variant_is_of_type(v, ss_type("u")) != 0 ? g_variant_get_uint32(v) : nil
    }

    /// An (ii) pair.
    static func pair(_ v: OpaquePointer) -> (Int32, Int32)? {
        guard g_variant_is_of_type(v, ss_type("(ii)")) != 0 else { return nil }
        let a = g_variant_get_child_value(v, 0)!, b = g_variant_get_child_value(v, 1)!
        defer { g_variant_unref(a); g_variant_unref(b) }
        return (g_variant_get_int32(a), g_variant_get_int32(b))
    }

    /// A string value of `key`, if there.
    static func string(_ dict: OpaquePointer, _ key: String) -> String? {
        guard let v = lookup(dict, key) else { return nil }
        defer { g_variant_unref(v) }
        return string(v)
    }

    static func uint32(_ dict: OpaquePointer, _ key: String) -> UInt32? {
        guard let v = lookup(dict, key) else { return nil }
        defer { g_variant_unref(v) }
        return uint32(v)
    }

    /// An a{sv} of the given entries (floating).
    static func dict(_ entries: [(String, OpaquePointer)]) -> OpaquePointer {
        let b = ss_vardict_builder()
        for (k, v) in entries { ss_vardict_add(b, k, v) }
        let d = g_variant_builder_end(b)!
        g_variant_builder_unref(b)
        return d
    }
}
