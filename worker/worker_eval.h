/*  worker_eval - the evaluator: one job in, one result out.

    The library that both kgym-worker and the serverless `kgym eval` use.
    It parses and validates the job, compiles candidate, reference and
    baseline (cached), runs them in sandboxed runners, checks correctness
    on fresh seeded inputs for every size and trial, times candidate against
    baseline, and computes the gated reward. It never fails to produce a
    result: infrastructure faults are `internal_error`, bad jobs `invalid`.

    Result object keys (docs/results.md): status, reward, speedup, message,
    seed, backend, device, worker, timings{candidate,baseline}, max_abs_err,
    max_rel_err, mismatches[], compile_log, phases{compile_s,run_s,total_s},
    cache{candidate,reference,baseline}, sandbox{...}, tag.

    Work is split in two phases so a worker can compile one job while
    another runs: prepare (parse + compile) and execute (run + check + time).
    The backends do both through their tables (worker_backend.h), found in
    the registry (worker_registry.h) by the task's target and language; this
    file names none of them.
*/
#ifndef WORKER_EVAL_H
#define WORKER_EVAL_H

#include <stdint.h>
#include <stdbool.h>
#include <jansson.h>

typedef struct worker_eval_config_t {
    const char *backend;        //  target served ("cpu", "cuda"); NULL = any
    int device;                 //  CUDA device ordinal
    const char *cache_path;     //  compile cache file; NULL = worker_cache_default_path
    const char *worker_name;    //  echoed as "worker" in results
    uint64_t max_tensor_bytes;  //  per-size cap on tensors + workspace
    uint64_t sandbox_mem_bytes; //  memory cap for a runner beyond its tensors
    uint64_t max_job_bytes;     //  memory one job may need, all its parts (0: the backend's default
                                //  from the machine); over it the job is invalid
    bool fresh_runner;          //  CUDA: a fresh runner per job (strictest)
    const char *python;         //  the python backend's interpreter (NULL: $KGYM_PYTHON, else /usr/bin/python3)
    //  Called (from a job's thread) when the GPU fails its health check after a
    //  kernel fault: the worker must stop taking jobs. May be NULL.
    void (*on_quarantine) (void *arg, const char *reason);
    void *on_quarantine_arg;    //  passed to on_quarantine
} worker_eval_config_t;

void worker_eval_config_default (worker_eval_config_t *cfg);

typedef struct worker_eval_t worker_eval_t;
typedef struct worker_job_t worker_job_t;

//  Create an evaluator. NULL with a reason (e.g. backend unavailable).
worker_eval_t *worker_eval_new (const worker_eval_config_t *cfg, char *err, size_t errlen);
void worker_eval_destroy (worker_eval_t **self_p);

//  Phase 1: parse and compile. Never NULL (except out of memory): a job that
//  fails here carries its final result and execute returns it at once.
worker_job_t *worker_eval_prepare (worker_eval_t *self, json_t *job);

//  True when prepare already decided the job (it did not parse, was
//  invalid or did not compile): execute then returns its result at once,
//  without the backend's device.
bool worker_eval_decided (const worker_job_t *job);

//  Phase 2: run, check, time, reward. Returns the result (new reference)
//  and destroys *job_p.
json_t *worker_eval_execute (worker_eval_t *self, worker_job_t **job_p);

//  Free a prepared job without running it (NULL is fine).
void worker_eval_discard (worker_eval_t *self, worker_job_t **job_p);

//  Both phases.
json_t *worker_eval_run (worker_eval_t *self, json_t *job);

//  The served device in words ("cpu: <model name>", the GPU's name); borrowed.
const char *worker_eval_device (worker_eval_t *self);

//  The GPU's UUID for metric labels ("GPU-..."; "" on the CPU backend).
const char *worker_eval_device_uuid (worker_eval_t *self);

//  What the sandbox enforces for the served backend's runners (caps JSON text).
const char *worker_eval_caps (worker_eval_t *self);

//  True once a backend's device failed its health check (reason says why).
bool worker_eval_quarantined (worker_eval_t *self, char *reason, size_t len);

#endif
