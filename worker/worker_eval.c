/*  worker_eval - the evaluator: one job in, one result out.

    Parses the job, picks the backend the task names, lets it compile and
    run, then writes the result object and the gated reward. Every path
    ends in a result: a job that cannot be parsed is `invalid`, a fault of
    ours `internal_error`; neither carries a reward.
*/
#include "common_util.h"
#include "worker_eval.h"
#include "worker_registry.h"
#include "common_reward.h"
#include "worker_feedback.h"
#include "worker_cache.h"
#include "common_log.h"
#include <sodium.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

//  One backend this evaluator may use, made on first use.
typedef struct {
    const worker_backend_t *backend;    //  from the registry
    void *state;                        //  its instance, NULL until made
    char error [512];                   //  why it could not be made ("" = not tried or fine)
} s_slot_t;

#define S_MAX_BACKENDS 16

struct worker_eval_t {
    worker_eval_config_t cfg;       //  copy; strings owned below
    char *backend;                  //  served target, NULL = any
    char *worker_name;              //  echoed in results
    char *cache_path;               //  cfg's, copied (NULL: the default)
    char *python;                   //  cfg's, copied (NULL: the default)
    worker_cache_t *cache;          //  compile cache (shared by backends), may be NULL
    s_slot_t slots [S_MAX_BACKENDS];//  every registered backend
    size_t nslots;                  //  entries used
    pthread_mutex_t lock;           //  guards lazy creation of the backends
};

struct worker_job_t {
    common_job_t *job;              //  parsed job, NULL when parsing failed
    uint64_t seed;                  //  seed in use
    worker_outcome_t outcome;       //  filled as the job goes
    bool final;                     //  outcome is final after prepare
    s_slot_t *slot;                 //  the backend holding prepared
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

//  Make a slot's backend (lock held). 0 or -1 with slot->error set.
static int
s_slot_make (worker_eval_t *self, s_slot_t *slot)
{
    if (slot->state)
        return 0;
    slot->error [0] = 0;
    slot->state = slot->backend->create (&self->cfg, self->cache, slot->error, sizeof slot->error);
    if (!slot->state && !slot->error [0])
        snprintf (slot->error, sizeof slot->error, "cannot start");
    return slot->state? 0: -1;
}

worker_eval_t *
worker_eval_new (const worker_eval_config_t *cfg, char *err, size_t errlen)
{
    if (sodium_init () < 0) {
        snprintf (err, errlen, "libsodium failed to initialise");
        return NULL;
    }
    const worker_backend_t *const *all = worker_registry_all ();
    if (cfg->backend && !worker_registry_serves (cfg->backend)) {
        char names [128];
        snprintf (err, errlen, "unknown backend '%s' (this build serves %s)", cfg->backend,
                  worker_registry_targets (names, sizeof names));
        return NULL;
    }
    worker_eval_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->backend = cfg->backend? strdup (cfg->backend): NULL;
    self->worker_name = strdup (cfg->worker_name? cfg->worker_name: "local");
    //  Backends are made on first use, long after the caller's strings may
    //  be gone: the configuration keeps copies of its own.
    self->cache_path = cfg->cache_path? strdup (cfg->cache_path): NULL;
    self->python = cfg->python? strdup (cfg->python): NULL;
    self->cfg.backend = self->backend;
    self->cfg.worker_name = self->worker_name;
    self->cfg.cache_path = self->cache_path;
    self->cfg.python = self->python;
    pthread_mutex_init (&self->lock, NULL);
    for (size_t i = 0; all [i] && self->nslots < S_MAX_BACKENDS; i++) {
        bool serves = !self->backend;
        for (size_t t = 0; !serves && t < COMMON_BACKEND_MAX_NAMES && all [i]->info.targets [t]; t++)
            serves = strcmp (all [i]->info.targets [t], self->backend) == 0;
        if (serves)
            self->slots [self->nslots++].backend = all [i];
    }
    char *path = worker_cache_default_path (cfg->cache_path);
    char cerr [256] = "";
    self->cache = path? worker_cache_new (path, WORKER_CACHE_DEFAULT_MAX, cerr, sizeof cerr): NULL;
    if (!self->cache)
        log_warn ("eval", "compile cache unavailable (%s): compiling every time", cerr);
    free (path);
    //  A worker serving one target makes its first backend now, so a broken
    //  one fails at start; the others (other languages) on first use.
    if (self->backend && self->nslots && s_slot_make (self, &self->slots [0])) {
        snprintf (err, errlen, "%s", self->slots [0].error);
        worker_eval_destroy (&self);
        return NULL;
    }
    return self;
}

void
worker_eval_destroy (worker_eval_t **self_p)
{
    worker_eval_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->nslots; i++)
        if (self->slots [i].state)
            self->slots [i].backend->destroy (&self->slots [i].state);
    worker_cache_destroy (&self->cache);
    pthread_mutex_destroy (&self->lock);
    free (self->backend);
    free (self->worker_name);
    free (self->cache_path);
    free (self->python);
    free (self);
    *self_p = NULL;
}

//  The first backend made (the one a worker serving a target started with).
static s_slot_t *
s_primary (worker_eval_t *self)
{
    for (size_t i = 0; i < self->nslots; i++)
        if (self->slots [i].state)
            return &self->slots [i];
    return NULL;
}

const char *
worker_eval_device (worker_eval_t *self)
{
    s_slot_t *slot = s_primary (self);
    return slot? slot->backend->device (slot->state): "none";
}

const char *
worker_eval_device_uuid (worker_eval_t *self)
{
    s_slot_t *slot = s_primary (self);
    return slot && slot->backend->device_uuid? slot->backend->device_uuid (slot->state): "";
}

const char *
worker_eval_caps (worker_eval_t *self)
{
    s_slot_t *slot = s_primary (self);
    return slot && slot->backend->caps? slot->backend->caps (slot->state): "{}";
}

bool
worker_eval_quarantined (worker_eval_t *self, char *reason, size_t len)
{
    pthread_mutex_lock (&self->lock);
    bool quarantined = false;
    for (size_t i = 0; i < self->nslots && !quarantined; i++) {
        s_slot_t *slot = &self->slots [i];
        quarantined = slot->state && slot->backend->quarantined
                   && slot->backend->quarantined (slot->state, reason, len);
    }
    pthread_mutex_unlock (&self->lock);
    return quarantined;
}

//  The made backend for a job's task, or NULL with out set.
static s_slot_t *
s_backend (worker_eval_t *self, const common_job_t *job, worker_outcome_t *out)
{
    const char *target = job->task->backend;
    const char *lang = job->task->reference.lang;
    if (self->backend && strcmp (self->backend, target) != 0) {
        worker_outcome_fail (out, STATUS_INVALID, "task backend '%s' sent to a '%s' worker",
                             target, self->backend);
        return NULL;
    }
    const worker_backend_t *backend = worker_registry_find (target, lang);
    s_slot_t *slot = NULL;
    for (size_t i = 0; backend && i < self->nslots; i++)
        if (self->slots [i].backend == backend)
            slot = &self->slots [i];
    if (!slot) {
        worker_outcome_fail (out, STATUS_INVALID, "no backend serves '%s' programs on '%s'",
                             lang? lang: "?", target);
        return NULL;
    }
    //  Every program of a job goes through the one backend.
    const common_program_t *programs [] = { job->candidate, job->task->baseline };
    for (size_t p = 0; p < 2; p++)
        if (programs [p] && programs [p]->lang
        &&  worker_registry_find (target, programs [p]->lang) != backend) {
            worker_outcome_fail (out, STATUS_INVALID, "the %s is '%s' but the task's reference is '%s'",
                                 p? "baseline": "candidate", programs [p]->lang, lang);
            return NULL;
        }
    pthread_mutex_lock (&self->lock);
    int rc = s_slot_make (self, slot);
    pthread_mutex_unlock (&self->lock);
    if (rc) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "backend %s unavailable: %s",
                             backend->info.name, slot->error);
        return NULL;
    }
    return slot;
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
    wjob->slot = s_backend (self, wjob->job, out);
    if (wjob->slot)
        wjob->prepared = wjob->slot->backend->prepare (wjob->slot->state, wjob->job, wjob->seed, out);
    if (!wjob->prepared)
        wjob->final = true;
    return wjob;
}

bool
worker_eval_decided (const worker_job_t *wjob)
{
    return wjob->final || !wjob->prepared;
}

static void
s_set_number_or_null (json_t *obj, const char *key, bool present, double value)
{
    json_object_set_new (obj, key, present && isfinite (value)? json_real (value): json_null ());
}

static json_t *
s_timing_json (const worker_timing_t *t)
{
    return json_pack ("{s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:i}",
                      "n", (json_int_t) t->n, "median_us", t->median_us, "mean_us", t->mean_us,
                      "std_us", t->std_us, "min_us", t->min_us, "max_us", t->max_us,
                      "cv", t->mean_us > 0? t->std_us / t->mean_us: 0.0,
                      "outliers", (json_int_t) t->outliers);
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
    bool rewarded = common_reward_for (params, status, out->speedup, &reward);
    s_set_number_or_null (result, "reward", rewarded, reward);
    s_set_number_or_null (result, "speedup", out->status == STATUS_OK && out->speedup > 0,
                          out->speedup);
    json_object_set_new (result, "message", json_string (out->message));
    json_object_set_new (result, "seed", json_integer ((json_int_t) (wjob->seed & INT64_MAX)));
    json_object_set_new (result, "task", wjob->job? json_string (wjob->job->task->name): json_null ());
    json_object_set_new (result, "backend", wjob->job? json_string (wjob->job->task->backend)
                                                     : json_null ());
    json_object_set_new (result, "device", json_string (out->device [0]? out->device
                                                      : worker_eval_device (self)));
    bool ordinal = wjob->slot && wjob->slot->backend->device_ordinal;
    json_object_set_new (result, "device_ordinal", ordinal? json_integer (self->cfg.device): json_null ());
    json_object_set_new (result, "worker", json_string (self->worker_name));
    if (out->candidate.n) {
        json_t *timings = json_object ();
        json_object_set_new (timings, "candidate", s_timing_json (&out->candidate));
        json_object_set_new (timings, "baseline", s_timing_json (&out->baseline));
        json_object_set_new (timings, "baseline_kind", json_string (out->baseline_kind));
        if (out->speedup_hi > 0)
            json_object_set_new (timings, "speedup_ci", json_pack ("[f, f]", out->speedup_lo,
                                                                     out->speedup_hi));
        json_object_set_new (timings, "runs", json_integer ((json_int_t) out->candidate.n));
        json_object_set_new (timings, "max_runs", wjob->job? json_integer ((json_int_t) wjob->job->eval.timed)
                                                  : json_null ());
        json_object_set_new (timings, "stopped", out->timing_stopped && *out->timing_stopped
                                                 ? json_string (out->timing_stopped): json_null ());
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
    json_object_set_new (result, "retried", json_boolean (out->retried));
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
    if (wjob->prepared && wjob->slot)
        wjob->slot->backend->job_destroy (&wjob->prepared);
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
        wjob->slot->backend->execute (wjob->slot->state, &wjob->prepared, &wjob->outcome);
        wjob->prepared = NULL;
    }
    json_t *result = s_result (self, wjob);
    s_job_destroy (&wjob);
    return result;
}

void
worker_eval_discard (worker_eval_t *self, worker_job_t **job_p)
{
    (void) self;
    s_job_destroy (job_p);
}

json_t *
worker_eval_run (worker_eval_t *self, json_t *job)
{
    worker_job_t *wjob = worker_eval_prepare (self, job);
    return worker_eval_execute (self, &wjob);
}
