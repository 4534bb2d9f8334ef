/*  cpu_backend - the CPU backend: C kernels graded in sandboxed runners.

    prepare compiles the candidate, reference and baseline (cpu_cc,
    cached); execute starts one kgym-runner per program, and for every size
    and trial generates fresh inputs from the seed, runs the reference in its
    own process, runs the candidate in another on NaN-poisoned outputs, and
    compares here, in the supervisor, whose memory no kernel can reach.
    Timing interleaves candidate and baseline over rotating input sets and
    re-checks every timed output.
*/
#ifndef CPU_BACKEND_H
#define CPU_BACKEND_H

#include "common_task.h"
#include "worker_cache.h"
#include "worker_eval.h"
#include "worker_outcome.h"

typedef struct cpu_backend_t cpu_backend_t;
typedef struct cpu_backend_job_t cpu_backend_job_t;

cpu_backend_t *cpu_backend_new (const worker_eval_config_t *cfg, worker_cache_t *cache,
                              char *err, size_t errlen);
void cpu_backend_destroy (cpu_backend_t **self_p);

//  Compile. NULL when out holds a final status (compile_error, invalid,
//  internal_error). The job is borrowed and must outlive the returned object.
cpu_backend_job_t *cpu_backend_prepare (cpu_backend_t *self, const common_job_t *job,
                                      uint64_t seed, worker_outcome_t *out);

//  Run, check, time; fills out; destroys *job_p.
void cpu_backend_execute (cpu_backend_t *self, cpu_backend_job_t **job_p, worker_outcome_t *out);

//  "cpu: <model name>"; borrowed.
const char *cpu_backend_device (cpu_backend_t *self);

#endif
