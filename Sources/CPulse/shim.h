// CPulse: libpulse (asynchronous API, threaded mainloop).
// Swift imports the functions directly; the helpers below stand in for macros and
// unions Swift cannot see.
#pragma once
#include <pulse/pulseaudio.h>
#include <pulse/simple.h>
#include <pulse/error.h>

// PA_INVALID_INDEX is a cast macro ((uint32_t) -1); Swift does not import it.
static inline uint32_t cpulse_invalid_index(void) { return PA_INVALID_INDEX; }

// The property-list keys are string macros; only the ones we read are exposed.
static inline const char *cpulse_prop_application_name(void) { return PA_PROP_APPLICATION_NAME; }
static inline const char *cpulse_prop_application_process_binary(void) { return PA_PROP_APPLICATION_PROCESS_BINARY; }
static inline const char *cpulse_prop_application_process_id(void) { return PA_PROP_APPLICATION_PROCESS_ID; }
static inline const char *cpulse_prop_media_name(void) { return PA_PROP_MEDIA_NAME; }
