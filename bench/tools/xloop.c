/*
 * xloop: cheap screen-content generator for Scripts/bench.
 *
 * Loads one tall BGRX image (width W, height H_total) into a single MIT-SHM segment and
 * copies a W x H window of it onto the root window (or a fullscreen override-redirect
 * window) with XShmPutImage at a fixed rate. What window of the image is shown at tick n:
 *
 *   frames mode (default): the image is N frames of height H stacked; tick n shows frame n mod N.
 *   scroll mode (-S STEP):  tick n shows rows [(n*STEP) mod P, +H), P = H_total - H. Build the
 *                           image so that its last H rows repeat its first H rows and the scroll
 *                           loops seamlessly.
 *
 * Nothing is allocated or converted per frame: the X server copies straight out of the
 * shared segment, so drawing 1080p at 30 fps costs the generator almost nothing.
 *
 *   xloop -d :N -W 1920 -H 1080 -r FPS [-S STEP] [-n N] [-R X,Y,W,H] [-b HZ [-B X,Y]] [-w] [-l LOGFILE] FILE.bgrx
 *
 * -n N uses only the first N frames of the file (e.g. -n 1: one still picture).
 * -R X,Y,W,H: after the first picture, only this rectangle of each next one is put on screen
 *    (a video playing in a window of a still slide: the X server, and XDamage, see only it
 *    change). The frames must be equal outside it.
 * -w draws into a fullscreen override-redirect window instead of the root window.
 * -l appends "tick index offset unix_ns" lines.
 * -b HZ draws a latency barcode HZ times per second (see below), at X,Y (default 1376,1024).
 * The picture is put on screen only when it changes (a still picture is drawn once), so with
 * -b the barcode is the only thing that changes between picture changes.
 *
 * Latency barcode (-b): BC_COLS x BC_ROWS cells of BC_CELL x BC_CELL pixels, black (0) or
 * white (1), read left to right, top row first: 4 marker bits 1101, the CLOCK_REALTIME time in
 * milliseconds at which it was drawn (48 bits, most significant first), a CRC-8 (polynomial
 * 0x07, init 0) of those 6 bytes, 4 marker bits 0101. bench/tools/latency.py reads it back.
 * Cells are aligned on 16-pixel macroblocks when X and Y are multiples of 16. The picture is
 * drawn around the barcode's rectangle, then the barcode in one request, so a grab never sees
 * a half-drawn barcode (only, for a moment, the new picture with the previous barcode).
 *
 * Prints "ready" on stdout once the first picture is on screen; exits on SIGINT/SIGTERM.
 */
#define _GNU_SOURCE
#include <X11/Xlib.h>
#include <X11/Xutil.h>
#include <X11/extensions/XShm.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested = 0, stop_signal = 0, stop_sender = 0;
static void on_signal(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    stop_requested = 1;
    stop_signal = sig;
    stop_sender = info ? info->si_pid : 0;
}

enum { BC_CELL = 16, BC_COLS = 32, BC_ROWS = 2, BC_W = BC_CELL * BC_COLS, BC_H = BC_CELL * BC_ROWS };

static uint8_t crc8(const uint8_t *p, int n) {
    uint8_t c = 0;
    for (int i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++) c = (uint8_t)(c & 0x80 ? (c << 1) ^ 0x07 : c << 1);
    }
    return c;
}

/* Writes the barcode of `ms` into `px` (BGRX, BC_W x BC_H). */
static void draw_barcode(uint32_t *px, uint64_t ms) {
    uint8_t bytes[6];
    for (int i = 0; i < 6; i++) bytes[i] = (uint8_t)(ms >> (40 - 8 * i));
    uint8_t crc = crc8(bytes, 6);
    int bits[BC_COLS * BC_ROWS], k = 0;
    const int start[4] = {1, 1, 0, 1}, end[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) bits[k++] = start[i];
    for (int i = 47; i >= 0; i--) bits[k++] = (int)((ms >> i) & 1);
    for (int i = 7; i >= 0; i--) bits[k++] = (crc >> i) & 1;
    for (int i = 0; i < 4; i++) bits[k++] = end[i];
    for (int y = 0; y < BC_H; y++)
        for (int x = 0; x < BC_W; x++)
            px[y * BC_W + x] = bits[(y / BC_CELL) * BC_COLS + x / BC_CELL] ? 0xffffffu : 0;
}

static void die(const char *msg) { fprintf(stderr, "xloop: %s\n", msg); exit(1); }

static uint64_t now_ns(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void usage(void) {
    fprintf(stderr, "usage: xloop -d DISPLAY -W WIDTH -H HEIGHT -r FPS [-S STEP] [-n N] [-R X,Y,W,H] [-b HZ [-B X,Y]] [-w] [-l LOG] FILE.bgrx\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *display_name = NULL, *log_path = NULL;
    int width = 1920, height = 1080, step = 0, use_window = 0, max_frames = 0, bc_x = 1376, bc_y = 1024;
    int rect_x = 0, rect_y = 0, rect_w = 0, rect_h = 0; /* -R: only this changes after the first picture */
    double fps = 30, bc_hz = 0;
    int opt;
    while ((opt = getopt(argc, argv, "d:W:H:r:S:n:R:b:B:wl:")) != -1) {
        switch (opt) {
        case 'd': display_name = optarg; break;
        case 'W': width = atoi(optarg); break;
        case 'H': height = atoi(optarg); break;
        case 'r': fps = atof(optarg); break;
        case 'S': step = atoi(optarg); break;
        case 'n': max_frames = atoi(optarg); break;
        case 'b': bc_hz = atof(optarg); break;
        case 'B': if (sscanf(optarg, "%d,%d", &bc_x, &bc_y) != 2) usage(); break;
        case 'R': if (sscanf(optarg, "%d,%d,%d,%d", &rect_x, &rect_y, &rect_w, &rect_h) != 4) usage(); break;
        case 'w': use_window = 1; break;
        case 'l': log_path = optarg; break;
        default: usage();
        }
    }
    if (optind != argc - 1 || width <= 0 || height <= 0 || fps <= 0 || step < 0 || max_frames < 0 || bc_hz < 0) usage();
    if (bc_hz > 0 && (bc_x < 0 || bc_y < 0 || bc_x + BC_W > width || bc_y + BC_H > height)) die("barcode outside the screen");
    if (rect_w > 0 && (rect_x < 0 || rect_y < 0 || rect_h <= 0 || rect_x + rect_w > width || rect_y + rect_h > height))
        die("-R rectangle outside the screen");
    if (rect_w > 0 && bc_hz > 0 && rect_x < bc_x + BC_W && bc_x < rect_x + rect_w && rect_y < bc_y + BC_H && bc_y < rect_y + rect_h)
        die("-R rectangle over the barcode");
    const char *path = argv[optind];

    int fd = open(path, O_RDONLY);
    if (fd < 0) die("cannot open input file");
    struct stat st;
    if (fstat(fd, &st) != 0) die("cannot stat input file");
    size_t row_bytes = (size_t)width * 4;
    if (st.st_size <= 0 || st.st_size % row_bytes != 0) die("file size is not a multiple of WIDTH*4");
    int total_rows = (int)(st.st_size / row_bytes);
    if (total_rows < height || total_rows > 65535) die("image height must be in HEIGHT..65535");
    int frames = total_rows / height;
    if (max_frames > 0 && max_frames < frames) frames = max_frames;
    int period = total_rows - height; /* scroll period in rows */
    if (step > 0 && period <= 0) die("scroll mode needs an image taller than HEIGHT");

    Display *dpy = XOpenDisplay(display_name);
    if (!dpy) die("cannot open display");
    if (!XShmQueryExtension(dpy)) die("display has no MIT-SHM");
    int screen = DefaultScreen(dpy);
    Visual *visual = DefaultVisual(dpy, screen);
    int depth = DefaultDepth(dpy, screen);
    if (depth != 24 && depth != 32) die("need a 24/32-bit TrueColor screen");
    if (visual->red_mask != 0xff0000 || visual->green_mask != 0xff00 || visual->blue_mask != 0xff)
        die("unexpected visual masks (need BGRX byte order)");

    XShmSegmentInfo shm;
    memset(&shm, 0, sizeof shm);
    XImage *img = XShmCreateImage(dpy, visual, (unsigned)depth, ZPixmap, NULL, &shm,
                                  (unsigned)width, (unsigned)total_rows);
    if (!img) die("XShmCreateImage failed");
    if ((size_t)img->bytes_per_line != row_bytes || img->bits_per_pixel != 32) die("unexpected XImage layout");
    size_t size = row_bytes * (size_t)total_rows;
    shm.shmid = shmget(IPC_PRIVATE, size, IPC_CREAT | 0600);
    if (shm.shmid < 0) die("shmget failed (kernel.shmmax too small?)");
    shm.shmaddr = img->data = shmat(shm.shmid, NULL, 0);
    if (shm.shmaddr == (char *)-1) { shmctl(shm.shmid, IPC_RMID, NULL); die("shmat failed"); }
    shm.readOnly = True;
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, shm.shmaddr + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { shmctl(shm.shmid, IPC_RMID, NULL); die("short read"); }
        done += (size_t)n;
    }
    close(fd);
    if (!XShmAttach(dpy, &shm)) { shmctl(shm.shmid, IPC_RMID, NULL); die("XShmAttach failed"); }
    XSync(dpy, False);
    shmctl(shm.shmid, IPC_RMID, NULL); /* freed once both sides detach, even if we crash */

    Window root = RootWindow(dpy, screen), target = root;
    if (use_window) {
        XSetWindowAttributes attrs;
        attrs.override_redirect = True;
        attrs.background_pixel = BlackPixel(dpy, screen);
        target = XCreateWindow(dpy, root, 0, 0, (unsigned)width, (unsigned)height, 0, depth, InputOutput,
                               visual, CWOverrideRedirect | CWBackPixel, &attrs);
        XMapRaised(dpy, target);
        XSync(dpy, False);
    }
    GC gc = XCreateGC(dpy, target, 0, NULL);
    FILE *log = log_path ? fopen(log_path, "a") : NULL;
    XImage *bc = NULL;
    if (bc_hz > 0) {
        char *px = calloc(BC_W * BC_H, 4);
        if (!px) die("out of memory");
        bc = XCreateImage(dpy, visual, (unsigned)depth, ZPixmap, 0, px, BC_W, BC_H, 32, BC_W * 4);
        if (!bc || bc->bits_per_pixel != 32) die("XCreateImage failed");
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* With a barcode, ticks are at the barcode's rate and the picture advances at its own. */
    double tick_hz = bc_hz > 0 ? bc_hz : fps;
    uint64_t period_ns = (uint64_t)(1e9 / tick_hz);
    uint64_t next = now_ns(CLOCK_MONOTONIC);
    int shown = -1; /* offset on screen */
    for (uint64_t tick = 0; !stop_requested; tick++) {
        uint64_t n = bc_hz > 0 ? (uint64_t)((double)tick * fps / bc_hz) : tick;
        int offset = step > 0 ? (int)((n * (uint64_t)step) % (uint64_t)period)
                              : (int)(n % (uint64_t)frames) * height;
        if (offset != shown) {
            if (rect_w > 0 && shown >= 0) { /* only the rectangle changes */
                XShmPutImage(dpy, target, gc, img, rect_x, offset + rect_y, rect_x, rect_y, (unsigned)rect_w, (unsigned)rect_h, False);
            } else if (bc) { /* around the barcode: above, left, right, below */
                int bx = bc_x, by = bc_y, bw = BC_W, bh = BC_H;
                int r[4][4] = {{0, 0, width, by}, {0, by, bx, bh}, {bx + bw, by, width - bx - bw, bh},
                               {0, by + bh, width, height - by - bh}};
                for (int i = 0; i < 4; i++)
                    if (r[i][2] > 0 && r[i][3] > 0)
                        XShmPutImage(dpy, target, gc, img, r[i][0], offset + r[i][1], r[i][0], r[i][1],
                                     (unsigned)r[i][2], (unsigned)r[i][3], False);
            } else {
                XShmPutImage(dpy, target, gc, img, 0, offset, 0, 0, (unsigned)width, (unsigned)height, False);
            }
            XSync(dpy, False); /* the picture is on screen when we note the time */
            shown = offset;
        }
        uint64_t t = now_ns(CLOCK_REALTIME);
        if (bc) {
            draw_barcode((uint32_t *)(void *)bc->data, t / 1000000u);
            XPutImage(dpy, target, gc, bc, 0, 0, bc_x, bc_y, BC_W, BC_H);
            XSync(dpy, False);
        }
        if (log) fprintf(log, "%llu %d %d %llu\n", (unsigned long long)tick, offset / height, offset,
                         (unsigned long long)t);
        if (tick == 0) { printf("ready\n"); fflush(stdout); }
        next += period_ns;
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (next < now) next = now; /* late: do not try to catch up with a burst */
        struct timespec ts = { (time_t)(next / 1000000000ull), (long)(next % 1000000000ull) };
        while (!stop_requested && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
    }
    if (log) fclose(log);
    if (bc) XDestroyImage(bc); /* frees its pixels too */
    fprintf(stderr, "xloop: stopped by signal %d from pid %d\n", (int)stop_signal, (int)stop_sender);
    XShmDetach(dpy, &shm);
    XSync(dpy, False);
    shmdt(shm.shmaddr);
    XCloseDisplay(dpy);
    return 0;
}
