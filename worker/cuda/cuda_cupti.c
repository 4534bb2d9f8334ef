/*  cuda_cupti - CUPTI kernel activity records, loaded at run time (runner side).  */
#include "cuda_cupti.h"
#include "kgym_config.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KGYM_CUPTI_HEADERS
#define KGYM_CUPTI_HEADERS 1
#endif

#if KGYM_CUPTI_HEADERS
#include <cupti.h>

#define STR(x)  #x
#define XSTR(x) STR (x)
#define BUFFER_BYTES    (2u << 20)      //  one activity buffer
#define CUPTI_MAJOR     (CUPTI_API_VERSION / 10000)

//  The kernel record of the CUPTI we build against. Every version since
//  CUDA 11 keeps the fields read here (kind .. name) at the same offsets.
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 s_kernel_t;
#else
typedef CUpti_ActivityKernel9 s_kernel_t;
#endif

#define CUPTI_FUNCS(X) \
    X (cuptiGetVersion) X (cuptiGetResultString) X (cuptiActivityRegisterCallbacks) \
    X (cuptiActivityEnable) X (cuptiActivityDisable) X (cuptiActivityFlushAll) \
    X (cuptiActivityGetNextRecord) X (cuptiActivityGetNumDroppedRecords) X (cuptiGetTimestamp)

#define CUPTI_MEMBER(f) __typeof__ (f) *f;

//  The process's CUPTI: entry points and what the callbacks collected.
static struct {
    CUPTI_FUNCS (CUPTI_MEMBER)
    void *handle;               //  dlopen handle, NULL until loaded
    bool tried;                 //  load attempted (the reason sticks)
    char why [256];             //  why CUPTI cannot be used
    pthread_mutex_t lock;       //  guards the fields below (CUPTI's thread writes them)
    cuda_profile_record_t *records;     //  collected since begin
    size_t n;                   //  entries used
    bool truncated;             //  more arrived than CUDA_PROFILE_MAX_RECORDS
} s_cupti = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *
s_result (CUptiResult rc)
{
    const char *text = NULL;
    if (!s_cupti.cuptiGetResultString || s_cupti.cuptiGetResultString (rc, &text) != CUPTI_SUCCESS || !text)
        return "CUPTI_ERROR_UNKNOWN";
    return text;
}

static void CUPTIAPI
s_buffer_requested (uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc (8, BUFFER_BYTES);
    *size = *buffer? BUFFER_BYTES: 0;
    *max_records = 0;
}

static void CUPTIAPI
s_buffer_completed (CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void) ctx;
    (void) stream;
    (void) size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock (&s_cupti.lock);
    while (buffer && s_cupti.cuptiActivityGetNextRecord (buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        if (!s_cupti.records || s_cupti.n >= CUDA_PROFILE_MAX_RECORDS) {
            s_cupti.truncated = true;
            continue;
        }
        const s_kernel_t *k = (const s_kernel_t *) record;
        cuda_profile_record_t *r = &s_cupti.records [s_cupti.n++];
        memset (r, 0, sizeof *r);
        snprintf (r->symbol, sizeof r->symbol, "%s", k->name? k->name: "?");
        r->start_ns = k->start;
        r->end_ns = k->end;
        r->grid [0] = k->gridX;
        r->grid [1] = k->gridY;
        r->grid [2] = k->gridZ;
        r->block [0] = k->blockX;
        r->block [1] = k->blockY;
        r->block [2] = k->blockZ;
        r->registers = k->registersPerThread;
        r->static_shared = k->staticSharedMemory;
        r->dynamic_shared = k->dynamicSharedMemory;
    }
    pthread_mutex_unlock (&s_cupti.lock);
    free (buffer);
}

//  dlopen the first CUPTI that loads: $KGYM_CUPTI_LIB only when set.
static void *
s_open (char *why, size_t whylen)
{
    const char *env = getenv ("KGYM_CUPTI_LIB");
    char versioned [64], toolkit [512], extras [512];
    snprintf (versioned, sizeof versioned, "libcupti.so.%d", CUPTI_MAJOR);
    snprintf (toolkit, sizeof toolkit, "%s/../lib64/%s", KGYM_CUDA_INCLUDE, versioned);
    snprintf (extras, sizeof extras, "%s/../extras/CUPTI/lib64/%s", KGYM_CUDA_INCLUDE, versioned);
    const char *env_only [] = { env, NULL };
    const char *search [] = { versioned, "libcupti.so", toolkit, extras, NULL };
    const char *const *names = env && *env? env_only: search;
    why [0] = 0;
    for (size_t i = 0; names [i]; i++) {
        void *handle = dlopen (names [i], RTLD_NOW | RTLD_LOCAL);
        if (handle)
            return handle;
        if (!why [0]) {
            const char *e = dlerror ();
            snprintf (why, whylen, "%s", e? e: names [i]);
        }
    }
    return NULL;
}

int
cuda_cupti_load (char *err, size_t errlen)
{
    if (s_cupti.handle)
        return 0;
    if (s_cupti.tried) {
        snprintf (err, errlen, "%s", s_cupti.why);
        return -1;
    }
    s_cupti.tried = true;
    const char *off = getenv ("KGYM_CUPTI");
    if (off && strcmp (off, "0") == 0) {
        snprintf (s_cupti.why, sizeof s_cupti.why, "CUPTI disabled by KGYM_CUPTI=0");
        snprintf (err, errlen, "%s", s_cupti.why);
        return -1;
    }
    void *handle = s_open (s_cupti.why, sizeof s_cupti.why);
    if (!handle) {
        snprintf (err, errlen, "%s", s_cupti.why);
        return -1;
    }
    const char *missing = NULL;
#define CUPTI_LOAD(f) \
    s_cupti.f = (__typeof__ (f) *) dlsym (handle, XSTR (f)); \
    if (!s_cupti.f && !missing) missing = XSTR (f);
    CUPTI_FUNCS (CUPTI_LOAD)
#undef CUPTI_LOAD
    uint32_t version = 0;
    if (missing)
        snprintf (s_cupti.why, sizeof s_cupti.why, "libcupti lacks %s", missing);
    else if (s_cupti.cuptiGetVersion (&version) != CUPTI_SUCCESS
         ||  (CUPTI_API_VERSION >= 130000 && version / 10000 != CUPTI_MAJOR))
        snprintf (s_cupti.why, sizeof s_cupti.why, "libcupti API version %u, built for %d (record layouts "
                  "differ between major versions)", version, CUPTI_API_VERSION);
    else {
        CUptiResult rc = s_cupti.cuptiActivityRegisterCallbacks (s_buffer_requested, s_buffer_completed);
        if (rc != CUPTI_SUCCESS)
            snprintf (s_cupti.why, sizeof s_cupti.why, "cuptiActivityRegisterCallbacks: %s", s_result (rc));
    }
    if (s_cupti.why [0]) {
        snprintf (err, errlen, "%s", s_cupti.why);
        dlclose (handle);
        return -1;
    }
    s_cupti.handle = handle;
    return 0;
}

int
cuda_cupti_begin (uint64_t *begin_ns, char *err, size_t errlen)
{
    *begin_ns = 0;
    if (cuda_cupti_load (err, errlen))
        return -1;
    //  Records still to come from earlier windows stay: they are placed by time.
    pthread_mutex_lock (&s_cupti.lock);
    if (!s_cupti.records)
        s_cupti.records = calloc (CUDA_PROFILE_MAX_RECORDS, sizeof *s_cupti.records);
    bool ok = s_cupti.records != NULL;
    pthread_mutex_unlock (&s_cupti.lock);
    if (!ok) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    CUptiResult rc = s_cupti.cuptiGetTimestamp (begin_ns);
    if (rc != CUPTI_SUCCESS) {
        snprintf (err, errlen, "cuptiGetTimestamp: %s", s_result (rc));
        return -1;
    }
    rc = s_cupti.cuptiActivityEnable (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (rc != CUPTI_SUCCESS) {
        snprintf (err, errlen, "cuptiActivityEnable(CONCURRENT_KERNEL): %s", s_result (rc));
        return -1;
    }
    return 0;
}

//  What the callbacks collected, handed over (the lock is not held).
static int
s_take (cuda_profile_record_t **records, size_t *n, bool *truncated, char *err, size_t errlen)
{
    pthread_mutex_lock (&s_cupti.lock);
    cuda_profile_record_t *copy = malloc ((s_cupti.n? s_cupti.n: 1) * sizeof *copy);
    if (copy) {
        memcpy (copy, s_cupti.records, s_cupti.n * sizeof *copy);
        *n = s_cupti.n;
        *truncated = s_cupti.truncated;
        s_cupti.n = 0;
        s_cupti.truncated = false;
    }
    pthread_mutex_unlock (&s_cupti.lock);
    if (!copy) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    *records = copy;
    return 0;
}

int
cuda_cupti_collect (cuda_profile_record_t **records, size_t *n, bool *truncated, char *err,
                    size_t errlen)
{
    *records = NULL;
    *n = 0;
    *truncated = false;
    if (!s_cupti.handle || s_cupti.why [0]) {
        snprintf (err, errlen, "%s", s_cupti.why [0]? s_cupti.why: "CUPTI is not loaded");
        return -1;
    }
    CUptiResult rc = s_cupti.cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (rc != CUPTI_SUCCESS) {
        snprintf (err, errlen, "cuptiActivityFlushAll: %s", s_result (rc));
        return -1;
    }
    return s_take (records, n, truncated, err, errlen);
}

int
cuda_cupti_end (CUcontext ctx, uint64_t *end_ns, cuda_profile_record_t **records, size_t *n,
                bool *truncated, size_t *dropped, char *err, size_t errlen)
{
    *records = NULL;
    *n = 0;
    *truncated = false;
    *dropped = 0;
    *end_ns = 0;
    if (!s_cupti.handle || s_cupti.why [0]) {
        snprintf (err, errlen, "%s", s_cupti.why [0]? s_cupti.why: "CUPTI is not loaded");
        return -1;
    }
    s_cupti.cuptiGetTimestamp (end_ns);
    CUptiResult rc_off = s_cupti.cuptiActivityDisable (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    //  Forced: every buffer comes back now, through s_buffer_completed.
    CUptiResult rc = s_cupti.cuptiActivityFlushAll (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t lost = 0, lost_ctx = 0;
    s_cupti.cuptiActivityGetNumDroppedRecords (NULL, 0, &lost);
    if (ctx)
        s_cupti.cuptiActivityGetNumDroppedRecords (ctx, 0, &lost_ctx);
    *dropped = lost + lost_ctx;
    if (rc_off != CUPTI_SUCCESS || rc != CUPTI_SUCCESS) {
        snprintf (err, errlen, "%s: %s", rc_off != CUPTI_SUCCESS? "cuptiActivityDisable": "cuptiActivityFlushAll",
                  s_result (rc_off != CUPTI_SUCCESS? rc_off: rc));
        return -1;
    }
    return s_take (records, n, truncated, err, errlen);
}

#else   //  built without cupti.h: the runner grades, the profile says why it is missing

int
cuda_cupti_load (char *err, size_t errlen)
{
    snprintf (err, errlen, "kgym-cuda-runner was built without CUPTI's headers (cupti.h)");
    return -1;
}

int
cuda_cupti_begin (uint64_t *begin_ns, char *err, size_t errlen)
{
    *begin_ns = 0;
    return cuda_cupti_load (err, errlen);
}

int
cuda_cupti_collect (cuda_profile_record_t **records, size_t *n, bool *truncated, char *err,
                    size_t errlen)
{
    *records = NULL;
    *n = 0;
    *truncated = false;
    return cuda_cupti_load (err, errlen);
}

int
cuda_cupti_end (CUcontext ctx, uint64_t *end_ns, cuda_profile_record_t **records, size_t *n,
                bool *truncated, size_t *dropped, char *err, size_t errlen)
{
    (void) ctx;
    *end_ns = 0;
    *records = NULL;
    *n = 0;
    *truncated = false;
    *dropped = 0;
    return cuda_cupti_load (err, errlen);
}

#endif

//  __cxa_demangle's type.
typedef char *(*s_demangle_fn) (const char *mangled, char *buf, size_t *len, int *status);

const char *
cuda_cupti_demangle (const char *sym, char *buf, size_t len)
{
    static s_demangle_fn demangle;
    static bool tried;
    if (!sym || strncmp (sym, "_Z", 2) != 0 || len == 0)
        return sym;
    if (!tried) {
        tried = true;
        void *lib = dlopen ("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (lib)
            *(void **) &demangle = dlsym (lib, "__cxa_demangle");
    }
    if (!demangle)
        return sym;
    int status = -1;
    char *out = demangle (sym, NULL, NULL, &status);
    if (status != 0 || !out) {
        free (out);
        return sym;
    }
    snprintf (buf, len, "%s", out);
    free (out);
    return buf;
}
