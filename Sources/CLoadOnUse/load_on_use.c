#include "load_on_use.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

void load_on_use_run(load_on_use_library *library) {
    void *handle = dlopen(library->soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        snprintf(library->error, sizeof library->error, "%s", dlerror());
        return;
    }
    // dlsym on the handle searches the library and what it loaded (libssl: libcrypto).
    for (size_t i = 0; i < library->count; i++) {
        library->functions[i] = dlsym(handle, library->names[i]);
        if (!library->functions[i]) {
            snprintf(library->error, sizeof library->error, "%s has no function %s", library->soname, library->names[i]);
            return;
        }
    }
    library->loaded = 1;
}

const char *load_on_use_result(const load_on_use_library *library) {
    return library->loaded ? NULL : library->error;
}

void load_on_use_or_exit(const load_on_use_library *library) {
    if (library->loaded) return;
    fprintf(stderr, "screenshare: cannot load %s: %s\n", library->what, library->error);
    abort();
}
