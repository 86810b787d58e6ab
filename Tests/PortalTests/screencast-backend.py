#!/usr/bin/python3
"""A ScreenCast backend of the xdg-desktop-portal for the tests: the real xdg-desktop-portal
finds it through XDG_DESKTOP_PORTAL_DIR and a .portal file with UseIn=screensharetest, and
sends it what a desktop's backend (GNOME's, KDE's) gets. It answers the dialog without one:
the stream is PipeWire node NODE, or the user "cancels" (--cancel). Each call is logged to
stdout as one JSON line with the options it got, for the test to read.

    screencast-backend.py --node N [--node-file F] [--cancel]

--node-file: at Start, the node is the number in F when F exists (a producer the test started
after this backend).
"""
import json
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

DBusGMainLoop(set_as_default=True)
IFACE = "org.freedesktop.impl.portal.ScreenCast"
NODE = int(sys.argv[sys.argv.index("--node") + 1]) if "--node" in sys.argv else 42
CANCEL = "--cancel" in sys.argv
NODE_FILE = sys.argv[sys.argv.index("--node-file") + 1] if "--node-file" in sys.argv else None


def log(call, options):
    def plain(v):
        if isinstance(v, (dbus.Struct, tuple, list, dbus.Array)):
            return [plain(x) for x in v]
        if isinstance(v, (dbus.Dictionary, dict)):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, dbus.Boolean):
            return bool(v)
        if isinstance(v, (int, dbus.UInt32, dbus.Int32)):
            return int(v)
        return str(v)
    print(json.dumps({"call": call, "options": plain(options)}), flush=True)


class Session(dbus.service.Object):
    @dbus.service.method("org.freedesktop.impl.portal.Session", in_signature="", out_signature="")
    def Close(self):
        log("Close", {})
        self.remove_from_connection()


class ScreenCast(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, "/org/freedesktop/portal/desktop")
        self.bus = bus

    @dbus.service.method(IFACE, in_signature="oosa{sv}", out_signature="ua{sv}")
    def CreateSession(self, handle, session_handle, app_id, options):
        log("CreateSession", options)
        Session(self.bus, session_handle)
        return (0, {"session_id": "s1"})

    @dbus.service.method(IFACE, in_signature="oosa{sv}", out_signature="ua{sv}")
    def SelectSources(self, handle, session_handle, app_id, options):
        log("SelectSources", options)
        return (0, {})

    @dbus.service.method(IFACE, in_signature="oossa{sv}", out_signature="ua{sv}")
    def Start(self, handle, session_handle, app_id, parent, options):
        log("Start", options)
        if CANCEL:
            return (1, {})
        node = NODE
        if NODE_FILE:
            try:
                with open(NODE_FILE) as f:
                    node = int(f.read().strip())
            except FileNotFoundError:
                pass
        stream = (dbus.UInt32(node), {"size": dbus.Struct((dbus.Int32(640), dbus.Int32(360)), signature="ii"),
                                      "source_type": dbus.UInt32(1)})
        return (0, {"streams": dbus.Array([stream], signature="(ua{sv})"), "persist_mode": dbus.UInt32(2),
                    "restore_data": dbus.Struct(("screenshare-test", dbus.UInt32(1), dbus.String("grant", variant_level=1)),
                                                signature="suv")})

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="ss", out_signature="v")
    def Get(self, iface, prop):
        return self.GetAll(iface)[prop]

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="s", out_signature="a{sv}")
    def GetAll(self, iface):
        return {"AvailableSourceTypes": dbus.UInt32(3), "AvailableCursorModes": dbus.UInt32(7), "version": dbus.UInt32(4)}


bus = dbus.SessionBus()
name = dbus.service.BusName("org.freedesktop.impl.portal.desktop.screensharetest", bus)
ScreenCast(bus)
print(json.dumps({"call": "ready"}), flush=True)
GLib.MainLoop().run()
