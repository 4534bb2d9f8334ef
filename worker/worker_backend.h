/*  worker_backend - what a grading backend is to the rest of kgym.

    A backend compiles a job's programs (prepare) and runs, checks and times
    them in its sandboxed runners (execute), filling a worker_outcome_t that
    worker_eval turns into the result. Each backend lives in a folder of its
    own (worker/cpu, worker/cuda) and is one constant of this type, listed
    once in worker_registry.c; worker_eval, worker_server, kgym-worker,
    common_task and the CLI reach backends only through this table and the
    registry, never by name.

    `info` says which task `backend` values (targets: where the jobs run,
    the broker's routing key) and which program languages it serves; a
    worker serving one target makes every backend serving it (the CUDA
    backend and, later, a Python backend both serve "cuda") and picks one
    per job by the reference's language.

    Threads: prepare may run on several threads at once and at the same
    time as execute (a worker compiles one job while another runs); execute
    may run on several threads when the worker has several slots. A backend
    serialises inside what must be serialised (one GPU, one runner).
*/
#ifndef WORKER_BACKEND_H
#define WORKER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common_backend.h"
#include "common_task.h"
#include "worker_cache.h"
#include "worker_grade.h"
#include "worker_outcome.h"

typedef struct worker_eval_config_t worker_eval_config_t;

//  What compiling one program without running it gave (kgym compile).
typedef struct {
    worker_status_t status;     //  ok, compile_error, invalid or internal_error
    char *log;                  //  compiler messages, or why (malloc'd), may be NULL
    char key [65];              //  compile cache key (hex), "" when none
    bool cache_hit;             //  served from the compile cache
    double seconds;             //  wall time of the compile
    char target [32];           //  what it compiled for ("sm_90"), "" when there is one choice
} worker_compile_t;

//  Free the log and reset.
void worker_compile_clear (worker_compile_t *compile);

//  Fill compile (status, log, key, cache hit, seconds; not target) from
//  what the backend's compiler reported: the log is the compiler's when it
//  ran to its verdict, else the reason.
void worker_compile_set (worker_compile_t *compile, const worker_grade_build_t *build);

//  The memory one job may need, all its parts: cfg's max_job_bytes when
//  set, else half the machine's memory shared by `share` jobs at once.
uint64_t worker_backend_job_bytes (const worker_eval_config_t *cfg, uint32_t share);

//  The CPU a CPU backend's slot runs its job's programs on, all of them:
//  of the CPUs this process may use, the (2 slot)-th while there are, then
//  the ones between (a slot is two cores' worth; more slots still spread
//  over all); -1 when none can be named. One core for a job's
//  programs, which take turns: a core's speed can change by half with what
//  its sibling runs, apart from the other cores' (measured on a 2-vCPU VM:
//  the same matmul 340 ms, or 600 ms for seconds at a time, on one vCPU and
//  not the other), so a timed pair on one core meets the same host, and
//  their ratio (worker_grade_speedup_paired) leaves it out.
int worker_backend_slot_cpu (int slot);

typedef struct {
    common_backend_info_t info;         //  name, targets, languages (what the task format accepts)
    const char *summary;                //  one line for --help: what it grades and where
    bool device_ordinal;                //  its jobs run on a numbered device (--device N; the gpu label)

    //  Jobs a worker of this backend runs at once unless told (--slots).
    uint32_t (*default_slots) (const worker_eval_config_t *cfg);
    //  Compiles a worker of this backend runs at once unless told
    //  (--compilers): its compile pool, sized from the host (worker_host).
    //  NULL op: 1.
    uint32_t (*default_compilers) (const worker_eval_config_t *cfg);
    //  Start: find runners, learn the device. NULL with a reason in err.
    void *(*create) (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen);
    void (*destroy) (void **self_p);
    //  Phase 1: compile candidate, reference, baseline. NULL when out holds a
    //  final status (compile_error, invalid, internal_error). The job is
    //  borrowed and must outlive the returned object.
    void *(*prepare) (void *self, const common_job_t *job, uint64_t seed, worker_outcome_t *out);
    //  Phase 2: run, check, time (and profile); fills out; destroys *job_p.
    void (*execute) (void *self, void **job_p, worker_outcome_t *out);
    //  Free a prepared job without running it.
    void (*job_destroy) (void **job_p);
    //  The device in words ("cpu: AMD EPYC 7B13", "NVIDIA H200 (sm_90, 0000:1B:00.0)"), borrowed.
    const char *(*device) (void *self);
    //  The device's UUID for metric labels, borrowed; NULL op: "".
    const char *(*device_uuid) (void *self);
    //  What the sandbox enforces for this backend's runners here (caps JSON text), borrowed.
    const char *(*caps) (void *self);
    //  True once the device failed a health check (reason says why); NULL op: never.
    bool (*quarantined) (void *self, char *reason, size_t len);
    //  Without creating it: can this host run the backend on device? 0 yes
    //  (desc: the device in words), 1 no such device here (err says why),
    //  -1 the backend cannot start. NULL op: always yes.
    int (*probe) (int device, char *desc, size_t desclen, char *err, size_t errlen);
    //  Compile one program of a target without running it (target NULL: the
    //  device's own, else the backend's default). Fills result; returns 0.
    //  NULL op: nothing to compile (every program is ok).
    int (*compile) (worker_cache_t *cache, const common_program_t *program, const char *target,
                    double timeout_s, worker_compile_t *result);
} worker_backend_t;

#endif
