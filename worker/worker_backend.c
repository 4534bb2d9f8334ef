/*  worker_backend - what every backend shares beside the grading core:
    the compile report of `kgym compile`, the memory a job may take and
    the CPU a slot's programs run on.  */
#include "worker_backend.h"
#include "worker_eval.h"
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
worker_compile_clear (worker_compile_t *compile)
{
    free (compile->log);
    memset (compile, 0, sizeof *compile);
}

void
worker_compile_set (worker_compile_t *compile, const worker_grade_build_t *build)
{
    static const worker_status_t statuses [] = {
        [GRADE_BUILD_OK] = STATUS_OK, [GRADE_BUILD_ERROR] = STATUS_COMPILE_ERROR,
        [GRADE_BUILD_TIMEOUT] = STATUS_COMPILE_ERROR, [GRADE_BUILD_REFUSED] = STATUS_INVALID,
        [GRADE_BUILD_OURS] = STATUS_INTERNAL_ERROR
    };
    compile->status = statuses [build->how];
    bool judged = build->how == GRADE_BUILD_OK || build->how == GRADE_BUILD_ERROR;
    const char *log = judged? build->log: build->detail;
    free (compile->log);
    compile->log = log? strdup (log): NULL;
    if (!judged && !compile->log && build->how == GRADE_BUILD_TIMEOUT)
        compile->log = strdup ("compile timed out");
    snprintf (compile->key, sizeof compile->key, "%s", build->key? build->key: "");
    compile->cache_hit = build->cache_hit;
    compile->seconds = build->seconds;
}

int
worker_backend_slot_cpu (int slot)
{
    cpu_set_t set;
    if (slot < 0 || sched_getaffinity (0, sizeof set, &set) != 0 || CPU_COUNT (&set) < 1)
        return -1;
    //  Every other CPU first (slots are two cores' worth), then the ones
    //  between: more slots than half the CPUs still spread over all.
    int count = CPU_COUNT (&set), half = (count + 1) / 2, k = slot % count;
    int want = k < half? 2 * k: 2 * (k - half) + 1, seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET (c, &set) && seen++ == want)
            return c;
    return -1;
}

uint64_t
worker_backend_job_bytes (const worker_eval_config_t *cfg, uint32_t share)
{
    if (cfg && cfg->max_job_bytes)
        return cfg->max_job_bytes;
    long pages = sysconf (_SC_PHYS_PAGES), page = sysconf (_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0? (uint64_t) pages * (uint64_t) page: 8ull << 30;
    return ram / 2 / (share? share: 1);
}
