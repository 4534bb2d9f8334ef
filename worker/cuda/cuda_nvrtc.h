/*  cuda_nvrtc - CUDA C candidates into cubins with NVRTC, cached.

    Options come from an allow-list and are normalised (spelling, defaults)
    before they enter the cache key; anything else makes the job `invalid`.
    The compile itself never runs in the caller: cuda_nvrtc_compile
    starts kgym-nvrtc in the sandbox (kind nvrtc, see cuda_compiler.h: its
    own uid and namespaces, no network, exec or file writes, a root holding
    only the toolkit's headers, CPU and memory rlimits), which compiles
    with cuda_nvrtc_flags and sends the cubin back; after the timeout its
    whole pid namespace is killed, so a pathological
    template cannot wedge a worker.

    Cubins are for the device's own arch (--gpu-architecture=sm_XX, never
    PTX JIT) with the toolkit's include dir and its cccl/ subdir on the
    path, so cuda_fp16.h, cuda_bf16.h, mma.h, cooperative_groups.h and
    cuda/pipeline resolve. Results (compile errors too) are cached in
    worker_cache under a BLAKE2b hash of: format version, lang, arch, NVRTC
    version, include dir and CUDA_VERSION, normalised options, source.

    "lang": "ptx" programs are not compiled here: the PTX text is the
    image, and the runner loads it with cuModuleLoadDataEx (a load failure
    there is the candidate's compile_error).
*/
#ifndef CUDA_NVRTC_H
#define CUDA_NVRTC_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "worker_cache.h"

#define WORKER_NVRTC_FORMAT   1             //  bump when the cached blob or key changes
#define WORKER_NVRTC_MAX_LOG  (64u << 10)   //  bytes of compiler log kept

typedef enum {
    NVRTC_OK = 0,               //  compiled (image filled)
    NVRTC_COMPILE_ERROR = 1,    //  the source does not compile (log says why)
    NVRTC_TIMEOUT = 2,          //  killed after the timeout
    NVRTC_INVALID = 3,          //  an option is not allowed, or the arch is malformed (err)
    NVRTC_INTERNAL = -1         //  infrastructure failure (err)
} cuda_nvrtc_status_t;

//  The outcome of one compile.
typedef struct {
    uint8_t *image;             //  cubin, or PTX text with its NUL (malloc'd); NULL unless ok
    size_t size;                //  bytes of image
    bool is_ptx;                //  image is PTX for the driver to load
    char *log;                  //  compiler messages (malloc'd, never NULL after a compile)
    bool cache_hit;             //  served from the cache
    char key [65];              //  cache key, hex
    double seconds;             //  wall time of this call
} cuda_nvrtc_result_t;

void cuda_nvrtc_result_free (cuda_nvrtc_result_t *result);

//  Normalise options into *out (malloc'd array of malloc'd strings, in the
//  order given; free with cuda_nvrtc_options_free). 0, or -1 with the
//  offending option named in err.
int cuda_nvrtc_options (char *const *options, size_t noptions, char ***out, size_t *nout,
                          char *err, size_t errlen);
void cuda_nvrtc_options_free (char **options, size_t noptions);

//  0 when "sm_90" style (sm_ + 2-3 digits, optional a/f suffix).
int cuda_nvrtc_check_arch (const char *arch);

//  "13.0" (nvrtcVersion through dlopen, "unavailable" without NVRTC);
//  process-wide, cached. No CUDA driver call.
const char *cuda_nvrtc_version (void);

//  The toolkit include dir: $KGYM_CUDA_INCLUDE or the configured one.
const char *cuda_nvrtc_include_dir (void);

//  Cache key (binary and hex) and its material text (malloc'd) for a
//  program with already normalised options.
int cuda_nvrtc_key (const char *lang, const char *source, char *const *norm, size_t nnorm,
                      const char *arch, uint8_t key [32], char hex [65], char **material);

//  The NVRTC flags for a compile: fixed ones (arch, include dirs, default
//  --std) then the normalised options. Fills opts (strings in storage);
//  returns the count, 0 when storage is too small.
size_t cuda_nvrtc_flags (const char *arch, char *const *norm, size_t nnorm,
                           const char **opts, size_t max, char *storage, size_t storage_len);

//  Compile with cache (may be NULL) and a subprocess bounded by timeout_s.
//  lang is "cuda" (NULL too) or "ptx". Returns a cuda_nvrtc_status_t;
//  result is filled for OK and COMPILE_ERROR (log), err for the others.
int cuda_nvrtc_compile (worker_cache_t *cache, const char *lang, const char *name,
                          const char *source, char *const *options, size_t noptions,
                          const char *arch, double timeout_s, cuda_nvrtc_result_t *result,
                          char *err, size_t errlen);

#endif
