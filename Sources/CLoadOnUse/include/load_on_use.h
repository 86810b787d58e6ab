// A library opened with dlopen the first time one of its functions is called, not linked
// (COpenSSL, CSRTP): its functions keep their names in the binary, each a small function of that
// name that calls the loaded library's, found by name once. A source file names its library's
// functions in an X-macro list, LIST(F, V, H):
//   F(return type, name, (parameters), (arguments))  a function that returns a value
//   V(name, (parameters), (arguments))               one that returns nothing
//   H(name)                                          one written by hand (a variadic one), with
//                                                    LOAD_ON_USE_CALL(name) and load_on_use_ensure()
// and makes them with LOAD_ON_USE_LIBRARY (one library per source file). The functions are
// hidden: never exported, so the loaded library, which calls its own functions through the
// global symbol scope, reaches its own and not these (one called from its initialisation would
// wait for the loading it is part of).
#pragma once
#include <pthread.h>
#include <stddef.h>

typedef struct load_on_use_library {
    const char *soname;
    /// What it is for, in the message when it cannot be loaded ("OpenSSL for DTLS").
    const char *what;
    const char *const *names;
    void **functions;
    size_t count;
    pthread_once_t once;
    int loaded;
    char error[512];
} load_on_use_library;

/// Opens the library and finds every function; run once (pthread_once).
void load_on_use_run(load_on_use_library *library);
/// After the loading: NULL when loaded, else the reason (the library's, valid for good).
const char *load_on_use_result(const load_on_use_library *library);
/// After the loading: ends the process with the reason when it could not be loaded.
void load_on_use_or_exit(const load_on_use_library *library);

#define LOAD_ON_USE_INDEX_F(ret, name, params, args) load_on_use_index_##name,
#define LOAD_ON_USE_INDEX_V(name, params, args) load_on_use_index_##name,
#define LOAD_ON_USE_INDEX_H(name) load_on_use_index_##name,
#define LOAD_ON_USE_NAME_F(ret, name, params, args) #name,
#define LOAD_ON_USE_NAME_V(name, params, args) #name,
#define LOAD_ON_USE_NAME_H(name) #name,
#define LOAD_ON_USE_CALL(name) ((__typeof__(name) *)load_on_use_functions[load_on_use_index_##name])
#define LOAD_ON_USE_FUNCTION_F(ret, name, params, args)                   \
    __attribute__((visibility("hidden"))) ret name params {               \
        load_on_use_ensure();                                             \
        return LOAD_ON_USE_CALL(name) args;                               \
    }
#define LOAD_ON_USE_FUNCTION_V(name, params, args)                        \
    __attribute__((visibility("hidden"))) void name params {              \
        load_on_use_ensure();                                             \
        LOAD_ON_USE_CALL(name) args;                                      \
    }
#define LOAD_ON_USE_FUNCTION_H(name)

/// The library of this source file: LIST as above, its soname, what it is for, and the name of
/// the function that loads it and says why not (`const char *load(void)`: NULL, or the reason),
/// for callers that report the reason themselves.
#define LOAD_ON_USE_LIBRARY(LIST, soname, what, load)                                                  \
    enum { LIST(LOAD_ON_USE_INDEX_F, LOAD_ON_USE_INDEX_V, LOAD_ON_USE_INDEX_H) load_on_use_count };    \
    static const char *const load_on_use_names[] = {                                                 \
        LIST(LOAD_ON_USE_NAME_F, LOAD_ON_USE_NAME_V, LOAD_ON_USE_NAME_H)};                             \
    static void *load_on_use_functions[load_on_use_count];                                            \
    static load_on_use_library load_on_use_this = {soname, what, load_on_use_names,                   \
                                                   load_on_use_functions, load_on_use_count,          \
                                                   PTHREAD_ONCE_INIT, 0, {0}};                        \
    static void load_on_use_run_this(void) { load_on_use_run(&load_on_use_this); }                     \
    const char *load(void) {                                                                          \
        pthread_once(&load_on_use_this.once, load_on_use_run_this);                                    \
        return load_on_use_result(&load_on_use_this);                                                 \
    }                                                                                                 \
    static void load_on_use_ensure(void) {                                                            \
        pthread_once(&load_on_use_this.once, load_on_use_run_this);                                    \
        load_on_use_or_exit(&load_on_use_this);                                                        \
    }                                                                                                 \
    LIST(LOAD_ON_USE_FUNCTION_F, LOAD_ON_USE_FUNCTION_V, LOAD_ON_USE_FUNCTION_H)
