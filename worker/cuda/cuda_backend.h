/*  cuda_backend - the CUDA backend, supervisor side (in the worker process).

    No CUDA driver call ever happens here: CUDA does not survive fork, and
    a fault in a context poisons its process. Instead:
      - prepare: parse-level checks, per-size layouts (the memory cap), and
        NVRTC compiles of candidate, reference and baseline through
        cuda_nvrtc (cached in worker_cache, each compile in its own
        confined, time-limited subprocess);
      - execute: the plan and the three images go to a long-lived
        kgym-cuda-runner for this GPU (cuda_runner/cuda_exec: candidate first, inputs
        generated on the GPU, checks and timing there), which answers with
        the outcome. A hang is killed after the job's timeout, a runner
        that reports a CUDA error exits; either way the next job gets a
        fresh runner. cfg->fresh_runner: a new runner for every job.
    The runner lives in its own cgroup (memory.max, pids.max) where the
    host allows one; the caps in force go into every outcome.

    prepare and execute may run on different threads at once (compile of
    job N+1 overlapping the GPU work of job N): prepare touches only
    immutable state and the (locked) cache; execute serialises on a mutex.
*/
#ifndef CUDA_BACKEND_H
#define CUDA_BACKEND_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>
#include "common_task.h"
#include "worker_cache.h"
#include "worker_eval.h"
#include "worker_outcome.h"
#include "worker_backend.h"

//  The table the registry lists (worker_backend.h); the functions below are
//  the same backend typed, for its tests and benchmarks.
extern const worker_backend_t cuda_backend;

typedef struct cuda_backend_t cuda_backend_t;
typedef struct cuda_backend_job_t cuda_backend_job_t;

//  Start the runner for cfg->device and learn the device from it (name,
//  arch, limits); compile and load the internal kernels. NULL with a
//  reason, e.g. "no CUDA device: cuInit: CUDA_ERROR_NO_DEVICE (100)".
//  cache may be NULL (no caching); it is borrowed.
cuda_backend_t *cuda_backend_new (const worker_eval_config_t *cfg, worker_cache_t *cache,
                                char *err, size_t errlen);
void cuda_backend_destroy (cuda_backend_t **self_p);

//  Compile candidate, reference and baseline. NULL when out now holds a
//  final status (compile_error with the log, invalid, internal_error). The
//  job is borrowed and must outlive the returned object.
cuda_backend_job_t *cuda_backend_prepare (cuda_backend_t *self, const common_job_t *job,
                                        uint64_t seed, worker_outcome_t *out);

//  Run, check, time, profile; fills out (status, timings, speedup,
//  mismatches, sandbox caps, phases; out->extra gets "profile",
//  docs/profile.md); destroys *job_p.
void cuda_backend_execute (cuda_backend_t *self, cuda_backend_job_t **job_p, worker_outcome_t *out);

//  Free a prepared job without running it.
void cuda_backend_job_destroy (cuda_backend_job_t **job_p);

//  "NVIDIA H200 (sm_90, 0000:1B:00.0)"; borrowed.
const char *cuda_backend_device (cuda_backend_t *self);

//  The GPU's UUID, "GPU-..." as nvidia-smi writes it ("" when unknown).
const char *cuda_backend_uuid (cuda_backend_t *self);

//  "sm_90"; borrowed.
const char *cuda_backend_arch (cuda_backend_t *self);

//  Counters for tests and benchmarks.
typedef struct {
    uint64_t jobs;              //  jobs executed
    uint64_t runner_starts;     //  runners started (1 + restarts)
    double last_start_s;        //  spawn to ready of the latest runner
    double cuinit_s;            //  cuInit + device query inside it
    int runner_pid;             //  current runner, 0 when none
} cuda_backend_stats_t;

void cuda_backend_stats (cuda_backend_t *self, cuda_backend_stats_t *stats);

//  Ask a runner whether a kernel can read and write device code through a
//  function's address (the runner is replaced afterwards). Returns its
//  report {"call", "code_read", "code_write", ...} (new reference) or NULL.
json_t *cuda_backend_selftest (cuda_backend_t *self);

//  True once the GPU failed its health check (a known-good job graded on a
//  fresh runner after any kernel fault); reason says why. Every later job is
//  then internal_error, and cfg->on_quarantine was called once.
bool cuda_backend_quarantined (cuda_backend_t *self, char *reason, size_t len);

//  Without creating a backend: spawn a runner for device, read its HELLO,
//  end it. 0 with the arch (e.g. "sm_90") and the HELLO object (new
//  reference, may pass NULL); 1 when there is no usable GPU (err says
//  why); -1 when the runner could not start at all.
int cuda_backend_probe (int device, char *arch, size_t archlen, json_t **hello,
                       char *err, size_t errlen);

#endif
