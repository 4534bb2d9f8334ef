/*  echo_backend - a backend built only for the tests, proving the seam.

    Everything a real backend does with its device this one takes from its
    programs' sources, so a test can say exactly what a run produced and
    see how the rest of kgym judges it. An echo program (lang "echo", task
    backend "echo", launches as for any kernel task) is a JSON object:

        {"outputs": {"y": [1, 2, 3, 4]}, "time_us": 40, "fail": "crash"}

    outputs    every output and inout arg of the task: a number (every
               element) or an array of 1 to 4096 numbers (element i is
               values [i % n]); required
    time_us    each timed run's time: a number > 0, or an array of them
               cycled over the timed runs; default 1
    fail       optional: every run fails so: "crash", "timeout", "refused",
               "misbehaved", or "ours" (kgym's fault), for the blame rules

    prepare parses the three programs (a candidate that does not parse is
    a compile_error whose log says where, like a compiler's), execute fills
    each size's outputs from the reference and the candidate and times the
    candidate against the baseline (or the reference); the grading core
    (worker_grade) judges every step: tolerance and mismatch report,
    timing statistics, speedup, who is to blame. Inputs are not made:
    nothing runs that could change them. Nothing is confined either, so
    the sandbox caps are empty.
*/
#include "echo_backend.h"
#include "worker_eval.h"
#include "worker_grade.h"
#include "common_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ECHO_MAX_VALUES 4096        //  numbers in one output's or time_us's array

//  One parsed program (the JSON kept; values read from it when needed).
typedef struct {
    json_t *root;                   //  the parsed source, owned
    json_t *outputs;                //  root's "outputs", borrowed
    json_t *times;                  //  root's "time_us", borrowed; NULL: 1 us
    int fail;                       //  a worker_grade_fail_t, -1 when it does not fail
} s_program_t;

typedef struct {
    const common_job_t *job;        //  borrowed
    s_program_t prog [3];           //  by worker_grade_who_t: candidate, reference, baseline
} echo_job_t;

typedef struct {
    uint64_t max_tensor_bytes;      //  per-size cap on the task's tensors (the evaluator's)
    uint64_t max_job_bytes;         //  the outputs this backend holds for one size
} echo_backend_t;

//  Names of "fail", in worker_grade_fail_t order.
static const char *s_fail_names [] = { "crash", "timeout", "refused", "misbehaved", "ours" };

//  --- the source ---

//  A number, or an array of 1 to ECHO_MAX_VALUES numbers (positive ones
//  when positive). 0 or -1.
static int
s_values_check (json_t *value, bool positive)
{
    size_t n = json_is_array (value)? json_array_size (value): 1;
    if (json_is_array (value) && (n == 0 || n > ECHO_MAX_VALUES))
        return -1;
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_is_array (value)? json_array_get (value, i): value;
        if (!json_is_number (item))
            return -1;
        double v = json_number_value (item);
        if (!isfinite (v) || (positive && v <= 0))
            return -1;
    }
    return 0;
}

//  Element i of a checked value.
static double
s_value (json_t *value, size_t i)
{
    if (!json_is_array (value))
        return json_number_value (value);
    return json_number_value (json_array_get (value, i % json_array_size (value)));
}

//  Parse source into prog; with a task, check its outputs against the
//  task's. 0, or -1 with a compiler-like log line.
static int
s_parse (const common_task_t *task, const char *source, s_program_t *prog, char *log, size_t len)
{
    memset (prog, 0, sizeof *prog);
    prog->fail = -1;
    json_error_t jerr;
    prog->root = json_loads (source, JSON_REJECT_DUPLICATES, &jerr);
    if (!prog->root) {
        snprintf (log, len, "echo:%d:%d: error: %s", jerr.line, jerr.column, jerr.text);
        return -1;
    }
    const char *key;
    json_t *value;
    if (!json_is_object (prog->root)) {
        snprintf (log, len, "echo: error: the program is not a JSON object");
        return -1;
    }
    json_object_foreach (prog->root, key, value)
        if (strcmp (key, "outputs") && strcmp (key, "time_us") && strcmp (key, "fail")) {
            snprintf (log, len, "echo: error: unknown key '%.64s' (outputs, time_us, fail)", key);
            return -1;
        }
    prog->outputs = json_object_get (prog->root, "outputs");
    if (!json_is_object (prog->outputs)) {
        snprintf (log, len, "echo: error: 'outputs' must be an object of output names to values");
        return -1;
    }
    json_object_foreach (prog->outputs, key, value) {
        if (s_values_check (value, false)) {
            snprintf (log, len, "echo: error: output '%.64s' must be a number or an array of 1 to %d "
                      "numbers", key, ECHO_MAX_VALUES);
            return -1;
        }
        bool known = !task;
        for (size_t a = 0; task && a < task->nargs && !known; a++)
            known = strcmp (task->args [a].name, key) == 0
                 && (task->args [a].kind == ARG_OUTPUT || task->args [a].kind == ARG_INOUT);
        if (!known) {
            snprintf (log, len, "echo: error: '%.64s' is not an output of task %s", key, task->name);
            return -1;
        }
    }
    for (size_t a = 0; task && a < task->nargs; a++) {
        const common_arg_t *arg = &task->args [a];
        if ((arg->kind == ARG_OUTPUT || arg->kind == ARG_INOUT)
        &&  !json_object_get (prog->outputs, arg->name)) {
            snprintf (log, len, "echo: error: no value for output '%s'", arg->name);
            return -1;
        }
    }
    prog->times = json_object_get (prog->root, "time_us");
    if (prog->times && s_values_check (prog->times, true)) {
        snprintf (log, len, "echo: error: 'time_us' must be a number > 0 or an array of 1 to %d of them",
                  ECHO_MAX_VALUES);
        return -1;
    }
    json_t *fail = json_object_get (prog->root, "fail");
    for (int k = 0; fail && k < (int) (sizeof s_fail_names / sizeof s_fail_names [0]); k++)
        if (json_is_string (fail) && strcmp (json_string_value (fail), s_fail_names [k]) == 0)
            prog->fail = k;
    if (fail && prog->fail < 0) {
        snprintf (log, len, "echo: error: 'fail' must be crash, timeout, refused, misbehaved or ours");
        return -1;
    }
    return 0;
}

static void
s_job_free (echo_job_t *ejob)
{
    if (!ejob)
        return;
    for (int p = 0; p < 3; p++)
        json_decref (ejob->prog [p].root);
    free (ejob);
}

//  --- judging ---

//  Fill size s's outputs from the reference (expected) and the candidate
//  (got) and let the grading core judge them. 0, or -1 with out set.
static int
s_check_size (echo_backend_t *self, echo_job_t *ejob, size_t s, const worker_grade_tolerance_t *tol,
              worker_outcome_t *out)
{
    const common_task_t *task = ejob->job->task;
    common_layout_t *layout = malloc (sizeof *layout);
    worker_grade_tensor_t tensors [TASK_MAX_ARGS];
    size_t n = 0;
    int rc = -1;
    char err [256] = "";
    if (!layout) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return -1;
    }
    if (common_task_layout (task, &task->reference, s, self->max_tensor_bytes, layout, err, sizeof err)) {
        worker_outcome_fail (out, STATUS_INVALID, "size %zu: %s", s, err);
        goto done;
    }
    uint64_t need = 0;
    for (size_t a = 0; a < task->nargs; a++)
        if (task->args [a].kind == ARG_OUTPUT || task->args [a].kind == ARG_INOUT)
            need += 2 * layout->bytes [a];
    if (need > self->max_job_bytes) {
        worker_outcome_fail (out, STATUS_INVALID, "size %zu needs %.3g GiB of outputs; a job may hold "
                             "%.3g GiB here", s, (double) need / (1u << 30),
                             (double) self->max_job_bytes / (1u << 30));
        goto done;
    }
    for (size_t a = 0; a < task->nargs; a++) {
        const common_arg_t *arg = &task->args [a];
        if (arg->kind != ARG_OUTPUT && arg->kind != ARG_INOUT)
            continue;
        size_t bytes = layout->bytes [a]? layout->bytes [a]: 1;
        void *expected = malloc (bytes), *got = malloc (bytes);
        tensors [n++] = (worker_grade_tensor_t) {
            .name = arg->name, .kind = arg->kind, .dtype = arg->dtype, .count = layout->count [a],
            .before = NULL, .expected = expected, .got = got
        };
        if (!expected || !got) {
            worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory for output '%s'", arg->name);
            goto done;
        }
        json_t *want = json_object_get (ejob->prog [GRADE_REFERENCE].outputs, arg->name);
        json_t *have = json_object_get (ejob->prog [GRADE_CANDIDATE].outputs, arg->name);
        for (uint64_t i = 0; i < layout->count [a]; i++) {
            common_dtype_set (arg->dtype, expected, i, s_value (want, i));
            common_dtype_set (arg->dtype, got, i, s_value (have, i));
        }
    }
    //  An echo run is the same every trial: one check a size.
    if (worker_grade_reference (out, tensors, n, (uint32_t) s, 1) == 0
    &&  worker_grade_check (out, tensors, n, tol, (uint32_t) s, 0, "the echo run") == 0)
        rc = 0;
done:
    for (size_t k = 0; k < n; k++) {
        free ((void *) tensors [k].expected);
        free ((void *) tensors [k].got);
    }
    free (layout);
    return rc;
}

//  The timed runs' samples as the program says; candidate's within the
//  job's budget. 0, or -1 with out set.
static int
s_time (echo_job_t *ejob, worker_outcome_t *out)
{
    const common_eval_t *eval = &ejob->job->eval;
    const s_program_t *cand = &ejob->prog [GRADE_CANDIDATE];
    bool has_baseline = ejob->prog [GRADE_BASELINE].root != NULL;
    const s_program_t *base = &ejob->prog [has_baseline? GRADE_BASELINE: GRADE_REFERENCE];
    double *cand_us = malloc (eval->timed * sizeof (double));
    double *base_us = malloc (eval->timed * sizeof (double));
    int rc = -1;
    if (!cand_us || !base_us) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory for timing samples");
        goto done;
    }
    double total_us = 0;
    for (uint32_t i = 0; i < eval->timed; i++) {
        cand_us [i] = cand->times? s_value (cand->times, i): 1.0;
        base_us [i] = base->times? s_value (base->times, i): 1.0;
        total_us += cand_us [i];
    }
    if (total_us > eval->timeout_s * 1e6) {
        char why [128];
        snprintf (why, sizeof why, "its timed runs took %.3g s, over the job's %.3g s", total_us / 1e6,
                  eval->timeout_s);
        worker_grade_run_failed (out, GRADE_CANDIDATE, GRADE_FAIL_TIMEOUT, why);
        goto done;
    }
    out->speedup = worker_grade_speedup (cand_us, eval->timed, base_us, eval->timed,
                                         &out->speedup_lo, &out->speedup_hi);
    worker_grade_timing (&out->candidate, cand_us, eval->timed);
    worker_grade_timing (&out->baseline, base_us, eval->timed);
    out->baseline_kind = has_baseline? "baseline": "reference";
    rc = 0;
done:
    free (cand_us);
    free (base_us);
    return rc;
}

//  A program that says it fails: the grading core decides whose fault. 0
//  when it does not.
static int
s_failed (echo_job_t *ejob, worker_grade_who_t who, worker_outcome_t *out)
{
    int fail = ejob->prog [who].fail;
    if (!ejob->prog [who].root || fail < 0)
        return 0;
    char why [96];
    snprintf (why, sizeof why, "the echo program says '%s'", s_fail_names [fail]);
    worker_grade_run_failed (out, who, (worker_grade_fail_t) fail, why);
    return -1;
}

//  --- the backend table (worker_backend.h) ---

static uint32_t
s_default_slots (const worker_eval_config_t *cfg)
{
    (void) cfg;
    return 1;
}

static void *
s_create (const worker_eval_config_t *cfg, worker_cache_t *cache, char *err, size_t errlen)
{
    (void) cache;
    echo_backend_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->max_tensor_bytes = cfg->max_tensor_bytes;
    self->max_job_bytes = worker_backend_job_bytes (cfg, 1);
    return self;
}

static void
s_destroy (void **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

static void *
s_prepare (void *state, const common_job_t *job, uint64_t seed, worker_outcome_t *out)
{
    (void) state;
    out->seed = seed;
    echo_job_t *ejob = calloc (1, sizeof *ejob);
    if (!ejob) {
        worker_outcome_fail (out, STATUS_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    ejob->job = job;
    const common_program_t *programs [3] = { job->candidate, &job->task->reference, job->task->baseline };
    //  The task's programs first: a broken task is invalid whatever the candidate.
    const worker_grade_who_t order [3] = { GRADE_REFERENCE, GRADE_BASELINE, GRADE_CANDIDATE };
    for (int k = 0; k < 3; k++) {
        worker_grade_who_t who = order [k];
        if (!programs [who])
            continue;
        char log [512] = "";
        double start = common_now_s ();
        int rc = s_parse (job->task, programs [who]->source, &ejob->prog [who], log, sizeof log);
        worker_grade_build_t build = {
            .how = rc? GRADE_BUILD_ERROR: GRADE_BUILD_OK, .log = rc? log: NULL,
            .seconds = common_now_s () - start
        };
        if (worker_grade_compiled (out, who, &build)) {
            s_job_free (ejob);
            return NULL;
        }
    }
    return ejob;
}

static void
s_execute (void *state, void **job_p, worker_outcome_t *out)
{
    echo_backend_t *self = state;
    echo_job_t *ejob = *job_p;
    *job_p = NULL;
    double start = common_now_s ();
    const common_job_t *job = ejob->job;
    worker_grade_tolerance_t tol;
    worker_grade_tolerance (job->task, &tol);
    bool ok = !s_failed (ejob, GRADE_REFERENCE, out) && !s_failed (ejob, GRADE_CANDIDATE, out);
    for (size_t s = 0; ok && s < job->task->nsizes; s++)
        ok = s_check_size (self, ejob, s, &tol, out) == 0;
    if (ok && !job->eval.check_sizes_only && !s_failed (ejob, GRADE_BASELINE, out))
        s_time (ejob, out);
    out->run_s = common_now_s () - start;
    s_job_free (ejob);
}

static void
s_job_destroy (void **job_p)
{
    s_job_free (*job_p);
    *job_p = NULL;
}

static const char *
s_device (void *state)
{
    (void) state;
    return "echo: no device (a test backend)";
}

static const char *
s_caps (void *state)
{
    (void) state;
    return "{}";
}

//  kgym compile: without a task, only the program's own form is checked.
static int
s_compile (worker_cache_t *cache, const common_program_t *program, const char *target,
           double timeout_s, worker_compile_t *result)
{
    (void) cache; (void) target; (void) timeout_s;
    memset (result, 0, sizeof *result);
    s_program_t prog;
    char log [512] = "";
    double start = common_now_s ();
    int rc = s_parse (NULL, program->source, &prog, log, sizeof log);
    json_decref (prog.root);
    worker_grade_build_t build = {
        .how = rc? GRADE_BUILD_ERROR: GRADE_BUILD_OK, .log = rc? log: NULL,
        .seconds = common_now_s () - start
    };
    worker_compile_set (result, &build);
    return 0;
}

const worker_backend_t echo_backend = {
    .info = { .name = "echo", .targets = { "echo" }, .langs = { "echo" } },
    .summary = "tests only: programs that say what they output and how long they took",
    .device_ordinal = false,
    .default_slots = s_default_slots,
    .create = s_create,
    .destroy = s_destroy,
    .prepare = s_prepare,
    .execute = s_execute,
    .job_destroy = s_job_destroy,
    .device = s_device,
    .device_uuid = NULL,
    .caps = s_caps,
    .quarantined = NULL,
    .probe = NULL,
    .compile = s_compile,
};
