/*  cpu_cc - C candidates into shared objects with the system compiler.

    Options come from an allow-list (anything else is the job's `invalid`);
    the compiler runs inside the sandbox (sandbox_exec, kind cc) with its
    own timeout, as its own uid, without network, in a root that holds only
    its toolchain and a private temporary directory.
    Results are cached in worker_cache under a hash of: format version,
    compiler identity (`cc --version` + `cc -dumpmachine`), the fixed flags,
    the normalised options, and the source.
*/
#ifndef CPU_CC_H
#define CPU_CC_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "worker_cache.h"
#include "sandbox.h"

//  The outcome of one compile.
typedef struct {
    uint8_t *so;                //  the shared object (malloc'd) when compiled
    size_t so_size;             //  its bytes
    char *log;                  //  compiler messages (malloc'd, may be empty)
    bool cache_hit;             //  served from the cache
    char key[2 * COMMON_HASH_BYTES + 1];  //  cache key, hex
    double seconds;             //  wall time of this call
} cpu_cc_result_t;

void cpu_cc_result_free (cpu_cc_result_t *result);

//  0 when every option is allowed, else -1 with the offending option named.
int cpu_cc_check_options (char *const *options, size_t noptions, char *err, size_t errlen);

//  "gcc (Debian 12.2.0-14) 12.2.0 / x86_64-linux-gnu": process-wide, cached.
const char *cpu_cc_identity (void);

//  Compile. Returns 0 compiled, 1 compile error (result->log says why),
//  2 timed out, -1 internal failure (err says why). cache may be NULL.
int cpu_cc_compile (worker_cache_t *cache, const sandbox_config_t *sandbox,
                       const char *source, char *const *options, size_t noptions,
                       double timeout_s, cpu_cc_result_t *result, char *err, size_t errlen);

#endif
