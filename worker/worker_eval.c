/*  worker_eval - the evaluator: one job in, one result out.

    Parses the job, picks the backend the task names, lets it compile and
    run, then writes the result object and the gated reward. Every path
    ends in a result: a job that cannot be parsed is `invalid`, a fault of
    ours `internal_error`; neither carries a reward.
*/
#include "common_util.h"
#include "worker_eval.h"
#include "cpu_backend.h"
#include "worker_reward.h"
#include "worker_feedback.h"
#include "worker_cache.h"
#include "common_log.h"
#include "kgym_config.h"
#if KGYM_HAVE_CUDA
#include "cuda_backend.h"
#endif
#include <sodium.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker_eval_t {
    worker_eval_config_t cfg;       //  copy; strings owned below
    char *backend;                  //  served backend, NULL = any
    char *worker_name;              //  echoed in results
    worker_cache_t *cache;          //  compile cache (shared by backends), may be NULL
    cpu_backend_t *cpu;              //  CPU backend, made on first use
#if KGYM_HAVE_CUDA
    cuda_backend_t *cuda;            //  CUDA backend, made on first use
#endif
    pthread_mutex_t lock;           //  guards lazy creation of the backends
};

struct worker_job_t {
    common_job_t *job;              //  parsed job, NULL when parsing failed
    uint64_t seed;                  //  seed in use
    worker_outcome_t outcome;       //  filled as the job goes
    bool final;                     //  outcome is final after prepare
    bool is_cuda;                   //  which backend holds prepared
    void *prepared;                 //  backend's prepared job
    char *tag;                      //  caller's tag
    double started;                 //  when prepare began
};

void
worker_eval_config_default (worker_eval_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->backend = NULL;
    cfg->device = 0;
    cfg->max_tensor_bytes = TASK_DEFAULT_MAX_TENSOR_BYTES;
    cfg->sandbox_mem_bytes = 2ull << 30;
    cfg->fresh_runner = false;
}


worker_eval_t *
worker_eval_new (const worker_eval_config_t *cfg, char *err, size_t errlen)
{
    if (sodium_init () < 0) {
        snprintf (err, errlen, "libsodium failed to initialise");
        return NULL;
    }
    if (cfg->backend && strcmp (cfg->backend, "cpu") && strcmp (cfg->backend, "cuda")) {
        snprintf (err, errlen, "unknown backend '%s' (cpu or cuda)", cfg->backend);
        return NULL;
    }
#if !KGYM_HAVE_CUDA
    if (cfg->backend && strcmp (cfg->backend, "cuda") == 0) {
        snprintf (err, errlen, "this build has no CUDA backend (the CUDA toolkit was not found at build time)");
        return NULL;
    }
#endif
    worker_eval_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->backend = cfg->backend? strdup (cfg->backend): NULL;
    self->worker_name = strdup (cfg->worker_name? cfg->worker_name: "local");
    pthread_mutex_init (&self->lock, NULL);
    char *path = worker_cache_default_path (cfg->cache_path);
    char cerr [256] = "";
    self->cache = path? worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, cerr, sizeof cerr): NULL;
    if (!self->cache)
        log_warn ("eval", "compile cache unavailable (%s): compiling every time", cerr);
    free (path);
    //  A worker serving one backend makes it now, so a broken one fails at start.
    if (self->backend) {
        bool ok = true;
        if (strcmp (self->backend, "cpu") == 0)
            ok = (self->cpu = cpu_backend_new (&self->cfg, self->cache, err, errlen)) != NULL;
#if KGYM_HAVE_CUDA
        else
            ok = (self->cuda = cuda_backend_new (&self->cfg, self->cache, err, errlen)) != NULL;
#endif
        if (!ok) {
            worker_eval_destroy (&self);
            return NULL;
        }
    }
    return self;
}

void
worker_eval_destroy (worker_eval_t **self_p)
{
    worker_eval_t *self = *self_p;
    if (!self)
        return;
    cpu_backend_destroy (&self->cpu);
#if KGYM_HAVE_CUDA
    cuda_backend_destroy (&self->cuda);
#endif
    worker_cache_destroy (&self->cache);
    pthread_mutex_destroy (&self->lock);
    free (self->backend);
    free (self->worker_name);
    free (self);
    *self_p = NULL;
}

const char *
worker_eval_device (worker_eval_t *self)
{
#if KGYM_HAVE_CUDA
    if (self->cuda)
        return cuda_backend_device (self->cuda);
#endif
    if (self->cpu)
        return cpu_backend_device (self->cpu);
    return "none";
}

const char *
worker_eval_device_uuid (worker_eval_t *self)
{
#if KGYM_HAVE_CUDA
    if (self->cuda)
        return cuda_backend_uuid (self->cuda);
#endif
    return "";
}

//  The backend object for a task, made on first use. NULL with out set.
static int
s_backend (worker_eval_t *self, const char *backend, worker_outcome_t *out)
{
    if (self->backend && strcmp (self->backend, backend) != 0) {
        worker_outcome_fail (out, STATUS_INVALID, "task backend '%s' sent to a '%s' worker",
                             backend, self->backend);
        return -1;
    }
    char err [512] = "";
    int rc = 0;
    pthread_mutex_lock (&self->lock);
    if (strcmp (backend, "cpu") == 0) {
        if (!self->cpu && !(self->cpu = cpu_backend_new (&self->cfg, self->cache, err, sizeof err)))
            rc = -1;
    }
    else {
#if KGYM_HAVE_CUDA
        if (!self->cuda && !(self->cuda = cuda_backend_new (&self->cfg, self->cache, err, sizeof err)))
            rc = -1;
#else
        snprintf (err, sizeof err, "this build has no CUDA backend");
        rc = -1;
#endif
    }
    pthread_mutex_unlock (&self->lock);
    if (rc)
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "backend %s unavailable: %s", backend, err);
    return rc;
}

worker_job_t *
worker_eval_prepare (worker_eval_t *self, json_t *json)
{
    worker_job_t *wjob = calloc (1, sizeof *wjob);
    if (!wjob)
        return NULL;
    wjob->started = common_now_s ();
    worker_outcome_init (&wjob->outcome);
    worker_outcome_t *out = &wjob->outcome;
    char err [512] = "";
    if (json_is_object (json)) {
        json_t *tag = json_object_get (json, "tag");
        if (json_is_string (tag))
            wjob->tag = strndup (json_string_value (tag), TASK_MAX_TAG);
    }
    wjob->job = common_job_from_json (json, err, sizeof err);
    if (!wjob->job) {
        worker_outcome_fail (out, STATUS_INVALID, "%s", err);
        wjob->final = true;
        return wjob;
    }
    if (wjob->job->eval.seed_given)
        wjob->seed = wjob->job->eval.seed;
    else {
        //  A fresh seed per job: nothing a candidate learns from one job helps it in the next.
        randombytes_buf (&wjob->seed, sizeof wjob->seed);
        wjob->seed &= INT64_MAX;
    }
    out->seed = wjob->seed;
    const char *backend = wjob->job->task->backend;
    if (s_backend (self, backend, out)) {
        wjob->final = true;
        return wjob;
    }
    if (strcmp (backend, "cpu") == 0)
        wjob->prepared = cpu_backend_prepare (self->cpu, wjob->job, wjob->seed, out);
#if KGYM_HAVE_CUDA
    else {
        wjob->is_cuda = true;
        wjob->prepared = cuda_backend_prepare (self->cuda, wjob->job, wjob->seed, out);
    }
#endif
    if (!wjob->prepared)
        wjob->final = true;
    return wjob;
}

static void
s_set_number_or_null (json_t *obj, const char *key, bool present, double value)
{
    json_object_set_new (obj, key, present && isfinite (value)? json_real (value): json_null ());
}

static json_t *
s_timing_json (const worker_timing_t *t)
{
    return json_pack ("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}",
                      "n", (json_int_t) t->n, "median_us", t->median_us, "mean_us", t->mean_us,
                      "std_us", t->std_us, "min_us", t->min_us, "max_us", t->max_us,
                      "cv", t->mean_us > 0? t->std_us / t->mean_us: 0.0);
}

static json_t *
s_result (worker_eval_t *self, worker_job_t *wjob)
{
    worker_outcome_t *out = &wjob->outcome;
    json_t *result = json_object ();
    if (!result)
        return NULL;
    const char *status = worker_status_name (out->status);
    json_object_set_new (result, "status", json_string (status));
    double reward = 0;
    common_reward_t defaults;
    common_reward_from_json (NULL, &defaults, NULL, 0);
    const common_reward_t *params = wjob->job? &wjob->job->reward: &defaults;
    bool rewarded = worker_reward (params, out->status, out->speedup, &reward);
    s_set_number_or_null (result, "reward", rewarded, reward);
    s_set_number_or_null (result, "speedup", out->status == STATUS_OK && out->speedup > 0,
                          out->speedup);
    json_object_set_new (result, "message", json_string (out->message));
    json_object_set_new (result, "seed", json_integer ((json_int_t) (wjob->seed & INT64_MAX)));
    json_object_set_new (result, "task", wjob->job? json_string (wjob->job->task->name): json_null ());
    json_object_set_new (result, "backend", wjob->job? json_string (wjob->job->task->backend)
                                                     : json_null ());
    json_object_set_new (result, "device", json_string (worker_eval_device (self)));
    bool on_gpu = wjob->job && strcmp (wjob->job->task->backend, "cuda") == 0;
    json_object_set_new (result, "device_ordinal", on_gpu? json_integer (self->cfg.device): json_null ());
    json_object_set_new (result, "worker", json_string (self->worker_name));
    if (out->candidate.n) {
        json_t *timings = json_object ();
        json_object_set_new (timings, "candidate", s_timing_json (&out->candidate));
        json_object_set_new (timings, "baseline", s_timing_json (&out->baseline));
        json_object_set_new (timings, "baseline_kind", json_string (out->baseline_kind));
        json_object_set_new (result, "timings", timings);
    }
    else
        json_object_set_new (result, "timings", json_null ());
    json_object_set_new (result, "max_abs_err", json_real (out->max_abs));
    json_object_set_new (result, "max_rel_err", json_real (out->max_rel));
    json_object_set_new (result, "bad_elements", json_integer ((json_int_t) out->bad_elements));
    json_t *mismatches = json_array ();
    for (size_t i = 0; i < out->nmismatches; i++) {
        const worker_mismatch_t *m = &out->mismatches [i];
        json_t *entry = json_pack ("{s:s, s:i, s:i, s:I}", "arg", m->arg,
                                   "size", (json_int_t) m->size_index, "trial", (json_int_t) m->trial,
                                   "index", (json_int_t) m->index);
        //  NaN and infinities are not JSON numbers: say them as strings.
        json_object_set_new (entry, "expected", isfinite (m->expected)? json_real (m->expected)
                             : json_string (isnan (m->expected)? "nan": m->expected > 0? "inf": "-inf"));
        json_object_set_new (entry, "got", isfinite (m->got)? json_real (m->got)
                             : json_string (isnan (m->got)? "nan": m->got > 0? "inf": "-inf"));
        json_array_append_new (mismatches, entry);
    }
    json_object_set_new (result, "mismatches", mismatches);
    json_object_set_new (result, "compile_log", json_string (out->compile_log? out->compile_log: ""));
    json_object_set_new (result, "cache", json_pack ("{s:b, s:b, s:b, s:s}",
                         "candidate", out->cache_hit [0], "reference", out->cache_hit [1],
                         "baseline", out->cache_hit [2], "key", out->cache_key));
    json_object_set_new (result, "phases", json_pack ("{s:f, s:f, s:f}",
                         "compile_s", out->compile_s, "run_s", out->run_s,
                         "total_s", common_now_s () - wjob->started));
    json_t *sandbox = json_loads (out->sandbox, 0, NULL);
    json_object_set_new (result, "sandbox", sandbox? sandbox: json_object ());
    json_object_set_new (result, "tag", wjob->tag? json_string (wjob->tag): json_null ());
    if (out->extra)
        json_object_update (result, out->extra);
    //  Same keys on every outcome: null when no profile was taken.
    if (!json_object_get (result, "profile"))
        json_object_set_new (result, "profile", json_null ());
    //  Last, so it can read every other field.
    size_t bytes = wjob->job? wjob->job->eval.feedback_bytes: WORKER_FEEDBACK_DEFAULT;
    char *feedback = bytes? worker_feedback (result, wjob->job, bytes): NULL;
    json_object_set_new (result, "feedback", json_string (feedback? feedback: ""));
    free (feedback);
    return result;
}

static void
s_job_destroy (worker_job_t **wjob_p)
{
    worker_job_t *wjob = *wjob_p;
    if (!wjob)
        return;
    common_job_destroy (&wjob->job);
    worker_outcome_clear (&wjob->outcome);
    free (wjob->tag);
    free (wjob);
    *wjob_p = NULL;
}

json_t *
worker_eval_execute (worker_eval_t *self, worker_job_t **job_p)
{
    worker_job_t *wjob = *job_p;
    *job_p = NULL;
    if (!wjob)
        return NULL;
    if (!wjob->final && wjob->prepared) {
        if (!wjob->is_cuda) {
            cpu_backend_job_t *cjob = wjob->prepared;
            cpu_backend_execute (self->cpu, &cjob, &wjob->outcome);
        }
#if KGYM_HAVE_CUDA
        else {
            cuda_backend_job_t *gjob = wjob->prepared;
            cuda_backend_execute (self->cuda, &gjob, &wjob->outcome);
        }
#endif
        wjob->prepared = NULL;
    }
    json_t *result = s_result (self, wjob);
    s_job_destroy (&wjob);
    return result;
}

json_t *
worker_eval_run (worker_eval_t *self, json_t *job)
{
    worker_job_t *wjob = worker_eval_prepare (self, job);
    return worker_eval_execute (self, &wjob);
}
