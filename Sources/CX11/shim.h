// CX11: Xlib, MIT-SHM (XShm), XDamage, XFixes (cursor image) and XRandR for ScreenCapture.
#pragma once
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/Xatom.h>
#include <X11/extensions/XShm.h>
#include <X11/extensions/Xdamage.h>
#include <X11/extensions/Xfixes.h>
#include <X11/extensions/Xrandr.h>
#include <X11/extensions/Xcomposite.h>
#include <sys/ipc.h>
#include <sys/shm.h>

// XDestroyImage is a macro calling through the image's function table.
static inline int cx11_destroy_image(XImage *image) { return XDestroyImage(image); }
// DefaultScreen / RootWindow / DisplayWidth are macros.
static inline int cx11_default_screen(Display *d) { return DefaultScreen(d); }
static inline Window cx11_root_window(Display *d, int screen) { return RootWindow(d, screen); }
static inline int cx11_display_width(Display *d, int screen) { return DisplayWidth(d, screen); }
static inline int cx11_display_height(Display *d, int screen) { return DisplayHeight(d, screen); }
static inline Visual *cx11_default_visual(Display *d, int screen) { return DefaultVisual(d, screen); }
static inline int cx11_default_depth(Display *d, int screen) { return DefaultDepth(d, screen); }
static inline GC cx11_default_gc(Display *d, int screen) { return DefaultGC(d, screen); }
static inline int cx11_connection_number(Display *d) { return ConnectionNumber(d); }
// shmat returns (void *)-1 on failure; compare in C so Swift need not build that pointer.
static inline int cx11_shmat_failed(void *p) { return p == (void *)-1; }

// X protocol errors (a window destroyed between two requests, say) must not end the process:
// Xlib's default handler exits. This one records the last error code; the capture thread
// reads and clears it after the requests it cares about (after XSync).
static int cx11_last_error_code = 0;
static int cx11_record_error(Display *d, XErrorEvent *e) { (void)d; cx11_last_error_code = e->error_code; return 0; }
static inline void cx11_install_error_handler(void) { XSetErrorHandler(cx11_record_error); }
static inline int cx11_take_error(void) { int c = cx11_last_error_code; cx11_last_error_code = 0; return c; }

/* The X server going away (killed, crashed, connection lost) is an "IO error", after which
 * Xlib by default calls exit(1). Instead, record it and return: every later call on that
 * display fails at once, and the capture reports the source as gone. */
static volatile int cx11_io_error_seen = 0;
static inline int cx11_io_error_handler(Display *d) { (void)d; cx11_io_error_seen = 1; return 0; }
static inline void cx11_io_exit_handler(Display *d, void *data) { (void)d; (void)data; cx11_io_error_seen = 1; }
static inline void cx11_install_io_handlers(Display *d) {
    XSetIOErrorHandler(cx11_io_error_handler);
    XSetIOErrorExitHandler(d, cx11_io_exit_handler, 0);
}
static inline int cx11_io_failed(void) { return cx11_io_error_seen; }
// XFixes cursor pixels are `unsigned long` (64-bit here) holding 32-bit premultiplied ARGB.
static inline unsigned int cx11_cursor_pixel(const XFixesCursorImage *c, int i) { return (unsigned int)c->pixels[i]; }
