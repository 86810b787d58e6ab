#define _GNU_SOURCE
#include "zero_fill.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t zf_threshold;
static _Atomic uint64_t zf_skipped;
static _Atomic uint64_t zf_skipped_unread;
static _Thread_local int zf_disabled;
static _Thread_local int zf_unread_fill;
static pthread_once_t zf_once = PTHREAD_ONCE_INIT;
static const char *zf_result = "not tried";

void zero_fill_set_disabled_on_this_thread(int disabled) { zf_disabled = disabled; }
uint64_t zero_fill_skipped_bytes(void) { return atomic_load(&zf_skipped); }
void zero_fill_set_unread_fill_on_this_thread(int on) { zf_unread_fill = on; }
uint64_t zero_fill_skipped_unread_bytes(void) { return atomic_load(&zf_skipped_unread); }

// The mapping that holds all of [start, end), from /proc/self/maps read with a stack buffer (no
// allocation): its protection, and whether it is private anonymous memory ("rw-p", inode 0,
// no path), where a page never touched reads as zeros. Returns 0 when found, -1 otherwise.
static int zf_mapping(uintptr_t start, uintptr_t end, int *prot, int *anonymous) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096], line[512];
    size_t used = 0;
    int found = -1;
    ssize_t n;
    while (found < 0 && (n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n && found < 0; i++) {
            if (buf[i] != '\n') { if (used < sizeof line - 1) line[used++] = buf[i]; continue; }
            line[used] = 0;
            used = 0;
            unsigned long lo, hi, ino;
            char perms[8];
            int path = -1;
            if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &lo, &hi, perms, &ino, &path) < 4) continue;
            if (start < lo || end > hi) continue;
            *prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
            *anonymous = strcmp(perms, "rw-p") == 0 && ino == 0 && (path < 0 || line[path] == 0);
            found = 0;
        }
    }
    close(fd);
    return found;
}

static void *zf_memset(void *p, int c, size_t n) {
    // Zeros over a large buffer; or, while an encoder is made, the fill of its post-processing
    // frame (128), which it never reads (zero_fill.h).
    int unread = (unsigned char)c == 128 && zf_unread_fill;
    if (zf_disabled || !((c == 0 && n >= zf_threshold) || unread)) return memset(p, c, n);
    long pagesize = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p, end = start + n;
    uintptr_t first = (start + pagesize - 1) / pagesize * pagesize, last = end / pagesize * pagesize;
    int fd = -1, prot, anonymous = 0;
    if (first >= last || zf_mapping(start, end, &prot, &anonymous) != 0 || !anonymous ||
        (fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC)) < 0) {
        return memset(p, c, n);
    }
    memset(p, c, first - start);
    memset((void *)last, c, end - last);
    uint64_t entries[512];
    uintptr_t page = first;
    while (page < last) {
        size_t count = (last - page) / pagesize;
        if (count > 512) count = 512;
        ssize_t got = pread(fd, entries, count * sizeof entries[0], (off_t)(page / pagesize * sizeof entries[0]));
        if (got != (ssize_t)(count * sizeof entries[0])) {  // cannot tell: write the rest
            memset((void *)page, c, last - page);
            break;
        }
        for (size_t i = 0; i < count; i++, page += pagesize) {
            // Bit 63: present; bit 62: swapped. Neither: never touched (or given back): zeros.
            if (entries[i] >> 62) memset((void *)page, c, pagesize);
            else atomic_fetch_add(unread ? &zf_skipped_unread : &zf_skipped, (uint64_t)pagesize);
        }
    }
    close(fd);
    return p;
}

struct zf_search { uintptr_t slots[4]; int count; };

static int zf_visit(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
#if !defined(__x86_64__)
    (void)info; (void)data;
    return 1;
#else
    struct zf_search *search = data;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libvpx.so")) return 0;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[i].p_vaddr);
    }
    if (!dyn) return 1;
    uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    size_t jmprelsz = 0, relasz = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = dyn->d_un.d_ptr; break;
        case DT_STRTAB: strtab = dyn->d_un.d_ptr; break;
        case DT_JMPREL: jmprel = dyn->d_un.d_ptr; break;
        case DT_PLTRELSZ: jmprelsz = dyn->d_un.d_val; break;
        case DT_RELA: rela = dyn->d_un.d_ptr; break;
        case DT_RELASZ: relasz = dyn->d_un.d_val; break;
        }
    }
    // ld.so relocates these addresses in place on x86-64; an unrelocated one is an offset.
    if (symtab && symtab < base) symtab += base;
    if (strtab && strtab < base) strtab += base;
    if (jmprel && jmprel < base) jmprel += base;
    if (rela && rela < base) rela += base;
    if (!symtab || !strtab) return 1;
    uintptr_t tables[2] = {jmprel, rela};
    size_t sizes[2] = {jmprelsz, relasz};
    for (int t = 0; t < 2; t++) {
        if (!tables[t]) continue;
        const ElfW(Rela) *r = (const ElfW(Rela) *)tables[t];
        for (size_t i = 0; i < sizes[t] / sizeof *r; i++) {
            unsigned long type = ELF64_R_TYPE(r[i].r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            const ElfW(Sym) *sym = (const ElfW(Sym) *)symtab + ELF64_R_SYM(r[i].r_info);
            if (strcmp((const char *)strtab + sym->st_name, "memset") == 0 && search->count < 4) {
                search->slots[search->count++] = base + r[i].r_offset;
            }
        }
    }
    return 1;
#endif
}

static void zf_install(void) {
    struct zf_search search = {{0}, 0};
    dl_iterate_phdr(zf_visit, &search);
    if (search.count == 0) { zf_result = "libvpx is not loaded, calls memset through no GOT entry, or this is not x86-64"; return; }
    long pagesize = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < search.count; i++) {
        uintptr_t slot = search.slots[i];
        void *page = (void *)(slot / pagesize * pagesize);
        int prot, anonymous;
        if (zf_mapping(slot, slot + sizeof(void *), &prot, &anonymous) != 0) { zf_result = "the GOT entry is in no mapping"; return; }
        if (!(prot & PROT_WRITE) && mprotect(page, pagesize, prot | PROT_WRITE) != 0) { zf_result = "mprotect refused"; return; }
        __atomic_store_n((void **)slot, (void *)zf_memset, __ATOMIC_RELEASE);
        if (!(prot & PROT_WRITE)) mprotect(page, pagesize, prot);
    }
    zf_result = NULL;
}

static size_t zf_requested;
static void zf_install_with_threshold(void) {
    zf_threshold = zf_requested;
    zf_install();
}

const char *zero_fill_install_for_libvpx(size_t threshold) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);  // the first caller's threshold is the one kept
    if (zf_requested == 0) zf_requested = threshold;
    pthread_mutex_unlock(&lock);
    pthread_once(&zf_once, zf_install_with_threshold);
    return zf_result;
}
