// GLib's GIO (libglib2.0-dev): GDBus for the xdg-desktop-portal, and GUnixFDList for the
// PipeWire descriptor it hands out. GVariant's builders take format strings and varargs, which
// Swift cannot call: the few shapes the portal needs are made here.
#include <gio/gio.h>
#include <gio/gunixfdlist.h>

/// An empty a{sv} builder (free with g_variant_builder_unref, or end it).
static inline GVariantBuilder *ss_vardict_builder(void) { return g_variant_builder_new(G_VARIANT_TYPE_VARDICT); }
/// Adds KEY → VALUE (a floating reference, taken) to an a{sv} builder.
static inline void ss_vardict_add(GVariantBuilder *b, const char *key, GVariant *value) { g_variant_builder_add(b, "{sv}", key, value); }
/// (s), (o), (oa{sv}), (osa{sv}), (a{sv}), (ss): method parameters.
static inline GVariant *ss_tuple1(GVariant *a) { return g_variant_new_tuple(&a, 1); }
static inline GVariant *ss_tuple2(GVariant *a, GVariant *b) { GVariant *v[2] = {a, b}; return g_variant_new_tuple(v, 2); }
static inline GVariant *ss_tuple3(GVariant *a, GVariant *b, GVariant *c) { GVariant *v[3] = {a, b, c}; return g_variant_new_tuple(v, 3); }
/// The GDBus error code of an error from a D-Bus call (or -1 when it is not one).
static inline int ss_dbus_error_code(const GError *e) { return e && e->domain == G_DBUS_ERROR ? e->code : -1; }
static inline const GVariantType *ss_type(const char *s) { return (const GVariantType *)s; }
