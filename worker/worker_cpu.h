/*  worker_cpu - the CPU backend: C kernels graded in sandboxed runners.

    prepare compiles the candidate, reference and baseline (worker_cc,
    cached); execute starts one kgym-runner per program, and for every size
    and trial generates fresh inputs from the seed, runs the reference in its
    own process, runs the candidate in another on NaN-poisoned outputs, and
    compares here, in the supervisor, whose memory no kernel can reach.
    Timing interleaves candidate and baseline over rotating input sets and
    re-checks every timed output.
*/
#ifndef WORKER_CPU_H
#define WORKER_CPU_H

#include "common_task.h"
#include "worker_cache.h"
#include "worker_eval.h"
#include "worker_outcome.h"

typedef struct worker_cpu_t worker_cpu_t;
typedef struct worker_cpu_job_t worker_cpu_job_t;

worker_cpu_t *worker_cpu_new (const worker_eval_config_t *cfg, worker_cache_t *cache,
                              char *err, size_t errlen);
void worker_cpu_destroy (worker_cpu_t **self_p);

//  Compile. NULL when out holds a final status (compile_error, invalid,
//  internal_error). The job is borrowed and must outlive the returned object.
worker_cpu_job_t *worker_cpu_prepare (worker_cpu_t *self, const common_job_t *job,
                                      uint64_t seed, worker_outcome_t *out);

//  Run, check, time; fills out; destroys *job_p.
void worker_cpu_execute (worker_cpu_t *self, worker_cpu_job_t **job_p, worker_outcome_t *out);

//  "cpu: <model name>"; borrowed.
const char *worker_cpu_device (worker_cpu_t *self);

#endif
