/*  cuda_plan - one CUDA job, fully evaluated, as the runner executes it.  */
#include "common_util.h"
#include "cuda_plan.h"
#include "worker_grade.h"
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char *s_prog_names [CUDA_PLAN_PROGS] = { "candidate", "reference", "baseline" };

//  Bytes the task must move at the timing size, for the roofline: the
//  task's "bytes" expression, else every input read once, every output
//  written once and every inout both. 0, or -1 (invalid) with a reason.
static int
s_roofline_bytes (const common_task_t *task, cuda_plan_t *plan, char *err, size_t errlen)
{
    const cuda_plan_size_t *size = &plan->sizes [plan->timing_size];
    if (task->bytes_expr) {
        common_expr_var_t vars [TASK_MAX_SIZE_VARS];
        size_t nvars = common_task_size_vars (task, size->index, vars, TASK_MAX_SIZE_VARS);
        int64_t value = 0;
        char why [256];
        if (common_expr_eval (task->bytes_expr, vars, nvars, &value, why, sizeof why)) {
            common_seterr (err, errlen, "task.bytes at the timing size: %s", why);
            return -1;
        }
        if (value < 0) {
            common_seterr (err, errlen, "task.bytes is %lld at the timing size; it must be >= 0", (long long) value);
            return -1;
        }
        plan->roofline_bytes = (uint64_t) value;
        plan->bytes_declared = true;
        return 0;
    }
    uint64_t total = 0;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        common_arg_kind_t kind = plan->args [a].kind;
        uint64_t b = kind == ARG_SCALAR? 0: kind == ARG_INOUT? 2 * size->bytes [a]: size->bytes [a];
        //  Layouts are capped far below 2^63; saturate rather than wrap anyway.
        total = total + b < total? UINT64_MAX: total + b;
    }
    plan->roofline_bytes = total;
    plan->bytes_declared = false;
    return 0;
}

void
cuda_plan_destroy (cuda_plan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cuda_plan_t *self = *self_p;
    for (uint32_t s = 0; self->sizes && s < self->nsizes; s++)
        for (int p = 0; p < CUDA_PLAN_PROGS; p++)
            free (self->sizes [s].call [p].launches);
    free (self->sizes);
    free (self);
    *self_p = NULL;
}

cuda_plan_t *
cuda_plan_from_job (const common_job_t *job, uint64_t seed, uint64_t max_bytes,
                    char *err, size_t errlen)
{
    const common_task_t *task = job->task;
    if (task->nargs > CUDA_PLAN_MAX_ARGS || task->nsizes == 0 || task->nsizes > CUDA_PLAN_MAX_SIZES) {
        common_seterr (err, errlen, "task has %zu args and %zu sizes (limits %d, 1..%d)",
               task->nargs, task->nsizes, CUDA_PLAN_MAX_ARGS, CUDA_PLAN_MAX_SIZES);
        return NULL;
    }
    cuda_plan_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->seed = seed;
    randombytes_buf (&self->time_seed, sizeof self->time_seed);
    self->atol = task->atol;
    self->rtol = task->rtol;
    self->exact = task->exact;
    self->timeout_s = job->eval.timeout_s;
    self->trials = job->eval.trials;
    self->warmup = job->eval.warmup;
    self->timed = job->eval.timed;
    worker_grade_stop_t rule;
    worker_grade_stop_init (&rule, job->eval.timed, job->reward.clip);
    self->stop_min = rule.min_runs;
    self->stop_precision = rule.precision;
    self->stop_clip = rule.clip;
    self->stop_floor = rule.floor;
    self->stop_margin = rule.margin;
    self->check_only = job->eval.check_sizes_only || job->eval.timed == 0;
    self->profile = job->eval.profile;
    self->has_baseline = task->baseline != NULL;
    self->candidate_ptx = job->candidate->lang && strcmp (job->candidate->lang, "ptx") == 0;
    self->nargs = (uint32_t) task->nargs;
    for (size_t a = 0; a < task->nargs; a++) {
        cuda_plan_arg_t *arg = &self->args [a];
        snprintf (arg->name, sizeof arg->name, "%s", task->args [a].name);
        arg->kind = task->args [a].kind;
        arg->dtype = task->args [a].dtype;
        arg->init = task->args [a].init;
    }
    self->sizes = calloc (task->nsizes, sizeof *self->sizes);
    if (!self->sizes) {
        common_seterr (err, errlen, "out of memory");
        cuda_plan_destroy (&self);
        return NULL;
    }
    self->nsizes = (uint32_t) task->nsizes;
    self->timing_size = (uint32_t) (task->timing_size < task->nsizes? task->timing_size: 0);
    const common_program_t *progs [CUDA_PLAN_PROGS] = { job->candidate, &task->reference, task->baseline };
    common_layout_t *layout = malloc (sizeof *layout);
    if (!layout) {
        common_seterr (err, errlen, "out of memory");
        cuda_plan_destroy (&self);
        return NULL;
    }
    for (size_t s = 0; s < task->nsizes; s++) {
        cuda_plan_size_t *size = &self->sizes [s];
        size->index = (uint32_t) s;
        for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
            if (!progs [p])
                continue;
            char why [400];
            if (common_task_layout (task, progs [p], s, max_bytes, layout, why, sizeof why)) {
                common_seterr (err, errlen, "%s: %s", s_prog_names [p], why);
                free (layout);
                cuda_plan_destroy (&self);
                return NULL;
            }
            if (p == PLAN_CANDIDATE) {
                for (size_t a = 0; a < task->nargs; a++) {
                    size->count [a] = layout->count [a];
                    size->bytes [a] = layout->bytes [a];
                    if (task->args [a].kind == ARG_SCALAR)
                        size->bits [a] = common_dtype_scalar_bits (task->args [a].dtype, layout->scalar [a],
                                                        layout->scalar_int [a]);
                }
            }
            cuda_plan_call_t *call = &size->call [p];
            call->workspace = layout->workspace_bytes;
            call->nlaunches = (uint32_t) layout->nlaunches;
            call->launches = calloc (layout->nlaunches? layout->nlaunches: 1, sizeof *call->launches);
            if (!call->launches) {
                common_seterr (err, errlen, "out of memory");
                free (layout);
                cuda_plan_destroy (&self);
                return NULL;
            }
            for (size_t l = 0; l < layout->nlaunches; l++) {
                const common_launch_layout_t *in = &layout->launches [l];
                cuda_plan_launch_t *out = &call->launches [l];
                snprintf (out->kernel, sizeof out->kernel, "%s", in->kernel);
                memcpy (out->grid, in->grid, sizeof out->grid);
                memcpy (out->block, in->block, sizeof out->block);
                out->shared = in->shared;
                out->nargs = (uint32_t) in->nargs;
                memcpy (out->args, in->args, in->nargs * sizeof (int32_t));
            }
        }
    }
    free (layout);
    if (s_roofline_bytes (task, self, err, errlen)) {
        cuda_plan_destroy (&self);
        return NULL;
    }
    return self;
}

//  --- JSON ---

static json_t *
s_u64 (uint64_t value)
{
    //  jansson integers are signed 64-bit: large values travel as hex text.
    char text [24];
    snprintf (text, sizeof text, "%" PRIx64, value);
    return json_string (text);
}

static int
s_get_u64 (json_t *json, uint64_t *out)
{
    if (json_is_integer (json) && json_integer_value (json) >= 0) {
        *out = (uint64_t) json_integer_value (json);
        return 0;
    }
    const char *text = json_string_value (json);
    if (!text || !*text || strlen (text) > 16)
        return -1;
    char *end;
    *out = strtoull (text, &end, 16);
    return *end? -1: 0;
}

static json_t *
s_dims (const int64_t dims [3])
{
    return json_pack ("[I,I,I]", (json_int_t) dims [0], (json_int_t) dims [1], (json_int_t) dims [2]);
}

json_t *
cuda_plan_to_json (const cuda_plan_t *plan)
{
    json_t *root = json_object ();
    json_t *args = json_array ();
    json_t *sizes = json_array ();
    json_t *keys = json_array ();
    if (!root || !args || !sizes || !keys)
        goto fail;
    json_object_set_new (root, "seed", s_u64 (plan->seed));
    json_object_set_new (root, "time_seed", s_u64 (plan->time_seed));
    json_object_set_new (root, "atol", json_real (plan->atol));
    json_object_set_new (root, "rtol", json_real (plan->rtol));
    json_object_set_new (root, "exact", json_boolean (plan->exact));
    json_object_set_new (root, "timeout_s", json_real (plan->timeout_s));
    json_object_set_new (root, "trials", json_integer (plan->trials));
    json_object_set_new (root, "warmup", json_integer (plan->warmup));
    json_object_set_new (root, "timed", json_integer (plan->timed));
    json_object_set_new (root, "stop", json_pack ("{s:i, s:f, s:f, s:f, s:f}", "min", (json_int_t) plan->stop_min,
                                                  "precision", plan->stop_precision, "clip", plan->stop_clip,
                                                  "floor", plan->stop_floor, "margin", plan->stop_margin));
    json_object_set_new (root, "check_only", json_boolean (plan->check_only));
    json_object_set_new (root, "timing_size", json_integer (plan->timing_size));
    json_object_set_new (root, "has_baseline", json_boolean (plan->has_baseline));
    json_object_set_new (root, "candidate_ptx", json_boolean (plan->candidate_ptx));
    json_object_set_new (root, "heap_bytes", s_u64 (plan->heap_bytes));
    json_object_set_new (root, "reload", json_boolean (plan->reload));
    json_object_set_new (root, "profile", json_boolean (plan->profile));
    json_object_set_new (root, "roofline_bytes", s_u64 (plan->roofline_bytes));
    json_object_set_new (root, "bytes_declared", json_boolean (plan->bytes_declared));
    for (int p = 0; p < CUDA_PLAN_PROGS; p++)
        json_array_append_new (keys, json_string (plan->keys [p]));
    json_object_set_new (root, "keys", keys);
    keys = NULL;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        const cuda_plan_arg_t *arg = &plan->args [a];
        json_array_append_new (args, json_pack ("{s:s, s:i, s:i, s:i, s:f, s:f}",
            "name", arg->name, "kind", (int) arg->kind, "dtype", (int) arg->dtype,
            "dist", (int) arg->init.dist, "p0", arg->init.p0, "p1", arg->init.p1));
    }
    json_object_set_new (root, "args", args);
    args = NULL;
    for (uint32_t s = 0; s < plan->nsizes; s++) {
        const cuda_plan_size_t *size = &plan->sizes [s];
        json_t *js = json_object ();
        json_t *count = json_array (), *bytes = json_array (), *bits = json_array ();
        json_t *calls = json_array ();
        for (uint32_t a = 0; a < plan->nargs; a++) {
            json_array_append_new (count, s_u64 (size->count [a]));
            json_array_append_new (bytes, s_u64 (size->bytes [a]));
            json_array_append_new (bits, s_u64 (size->bits [a]));
        }
        for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
            const cuda_plan_call_t *call = &size->call [p];
            json_t *launches = json_array ();
            for (uint32_t l = 0; l < call->nlaunches; l++) {
                const cuda_plan_launch_t *launch = &call->launches [l];
                json_t *largs = json_array ();
                for (uint32_t k = 0; k < launch->nargs; k++)
                    json_array_append_new (largs, json_integer (launch->args [k]));
                json_array_append_new (launches, json_pack ("{s:s, s:o, s:o, s:I, s:o}",
                    "kernel", launch->kernel, "grid", s_dims (launch->grid),
                    "block", s_dims (launch->block), "shared", (json_int_t) launch->shared,
                    "args", largs));
            }
            json_array_append_new (calls, json_pack ("{s:o, s:o}", "workspace",
                                                      s_u64 (call->workspace), "launches", launches));
        }
        json_object_set_new (js, "index", json_integer (size->index));
        json_object_set_new (js, "count", count);
        json_object_set_new (js, "bytes", bytes);
        json_object_set_new (js, "bits", bits);
        json_object_set_new (js, "calls", calls);
        json_array_append_new (sizes, js);
    }
    json_object_set_new (root, "sizes", sizes);
    return root;
fail:
    json_decref (root);
    json_decref (args);
    json_decref (sizes);
    json_decref (keys);
    return NULL;
}

//  An integer member in [lo, hi].
static int
s_int (json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get (obj, key);
    if (!json_is_integer (v))
        return -1;
    json_int_t x = json_integer_value (v);
    if (x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int
s_dims_from (json_t *json, int64_t dims [3])
{
    if (!json_is_array (json) || json_array_size (json) != 3)
        return -1;
    for (size_t d = 0; d < 3; d++) {
        json_t *v = json_array_get (json, d);
        if (!json_is_integer (v) || json_integer_value (v) < 1 || json_integer_value (v) > INT32_MAX)
            return -1;
        dims [d] = json_integer_value (v);
    }
    return 0;
}

cuda_plan_t *
cuda_plan_from_json (json_t *json, char *err, size_t errlen)
{
    cuda_plan_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    const char *what = "plan";
    int64_t v;
    json_t *args = json_object_get (json, "args");
    json_t *sizes = json_object_get (json, "sizes");
    json_t *keys = json_object_get (json, "keys");
    if (!json_is_object (json) || !json_is_array (args) || !json_is_array (sizes)
    ||  json_array_size (args) > CUDA_PLAN_MAX_ARGS
    ||  json_array_size (sizes) < 1 || json_array_size (sizes) > CUDA_PLAN_MAX_SIZES
    ||  !json_is_array (keys) || json_array_size (keys) != CUDA_PLAN_PROGS)
        goto fail;
    what = "seed";
    if (s_get_u64 (json_object_get (json, "seed"), &self->seed)
    ||  s_get_u64 (json_object_get (json, "time_seed"), &self->time_seed)
    ||  s_get_u64 (json_object_get (json, "heap_bytes"), &self->heap_bytes))
        goto fail;
    what = "roofline_bytes";
    if (s_get_u64 (json_object_get (json, "roofline_bytes"), &self->roofline_bytes))
        goto fail;
    what = "tolerance";
    json_t *atol = json_object_get (json, "atol"), *rtol = json_object_get (json, "rtol");
    if (!json_is_number (atol) || !json_is_number (rtol))
        goto fail;
    self->atol = json_number_value (atol);
    self->rtol = json_number_value (rtol);
    self->exact = json_is_true (json_object_get (json, "exact"));
    self->timeout_s = json_number_value (json_object_get (json, "timeout_s"));
    if (!(self->timeout_s >= 0 && self->timeout_s < 1e6))
        self->timeout_s = 0;
    what = "counts";
    if (s_int (json, "trials", 0, TASK_MAX_TRIALS, &v))
        goto fail;
    self->trials = (uint32_t) v;
    if (s_int (json, "warmup", 0, TASK_MAX_TIMED, &v))
        goto fail;
    self->warmup = (uint32_t) v;
    if (s_int (json, "timed", 0, TASK_MAX_TIMED, &v))
        goto fail;
    self->timed = (uint32_t) v;
    what = "stop";
    json_t *stop = json_object_get (json, "stop");
    self->stop_min = self->timed;       //  without a rule: every timed run
    if (stop) {
        const char *reals [] = { "precision", "clip", "floor", "margin" };
        double *into [] = { &self->stop_precision, &self->stop_clip, &self->stop_floor, &self->stop_margin };
        if (!json_is_object (stop) || s_int (stop, "min", 1, TASK_MAX_TIMED, &v))
            goto fail;
        self->stop_min = (uint32_t) v;
        for (int i = 0; i < 4; i++) {
            json_t *r = json_object_get (stop, reals [i]);
            if (!json_is_number (r) || !(json_number_value (r) >= 0 && json_number_value (r) <= 1e6))
                goto fail;
            *into [i] = json_number_value (r);
        }
    }
    what = "counts";
    if (s_int (json, "timing_size", 0, (int64_t) json_array_size (sizes) - 1, &v))
        goto fail;
    self->timing_size = (uint32_t) v;
    self->check_only = json_is_true (json_object_get (json, "check_only"));
    self->has_baseline = json_is_true (json_object_get (json, "has_baseline"));
    self->candidate_ptx = json_is_true (json_object_get (json, "candidate_ptx"));
    self->reload = json_is_true (json_object_get (json, "reload"));
    self->profile = json_is_true (json_object_get (json, "profile"));
    self->bytes_declared = json_is_true (json_object_get (json, "bytes_declared"));
    for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
        const char *key = json_string_value (json_array_get (keys, (size_t) p));
        snprintf (self->keys [p], sizeof self->keys [p], "%s", key? key: "");
    }
    what = "args";
    self->nargs = (uint32_t) json_array_size (args);
    for (uint32_t a = 0; a < self->nargs; a++) {
        json_t *ja = json_array_get (args, a);
        cuda_plan_arg_t *arg = &self->args [a];
        const char *name = json_string_value (json_object_get (ja, "name"));
        json_t *p0 = json_object_get (ja, "p0"), *p1 = json_object_get (ja, "p1");
        if (!name || !json_is_number (p0) || !json_is_number (p1))
            goto fail;
        snprintf (arg->name, sizeof arg->name, "%s", name);
        if (s_int (ja, "kind", ARG_INPUT, ARG_SCALAR, &v))
            goto fail;
        arg->kind = (common_arg_kind_t) v;
        if (s_int (ja, "dtype", DTYPE_F16, DTYPE_I64, &v))
            goto fail;
        arg->dtype = (common_dtype_t) v;
        if (s_int (ja, "dist", INIT_NORMAL, INIT_ARANGE, &v))
            goto fail;
        arg->init.dist = (common_init_dist_t) v;
        arg->init.p0 = json_number_value (p0);
        arg->init.p1 = json_number_value (p1);
    }
    what = "sizes";
    self->sizes = calloc (json_array_size (sizes), sizeof *self->sizes);
    if (!self->sizes)
        goto fail;
    self->nsizes = (uint32_t) json_array_size (sizes);
    for (uint32_t s = 0; s < self->nsizes; s++) {
        json_t *js = json_array_get (sizes, s);
        cuda_plan_size_t *size = &self->sizes [s];
        json_t *count = json_object_get (js, "count"), *bytes = json_object_get (js, "bytes");
        json_t *bits = json_object_get (js, "bits"), *calls = json_object_get (js, "calls");
        if (s_int (js, "index", 0, CUDA_PLAN_MAX_SIZES - 1, &v))
            goto fail;
        size->index = (uint32_t) v;
        if (json_array_size (count) != self->nargs || json_array_size (bytes) != self->nargs
        ||  json_array_size (bits) != self->nargs || json_array_size (calls) != CUDA_PLAN_PROGS)
            goto fail;
        for (uint32_t a = 0; a < self->nargs; a++) {
            if (s_get_u64 (json_array_get (count, a), &size->count [a])
            ||  s_get_u64 (json_array_get (bytes, a), &size->bytes [a])
            ||  s_get_u64 (json_array_get (bits, a), &size->bits [a]))
                goto fail;
            //  bytes must be count * element size: the runner sizes copies by both.
            if (self->args [a].kind != ARG_SCALAR
            &&  size->bytes [a] / common_dtype_size (self->args [a].dtype) != size->count [a])
                goto fail;
        }
        for (int p = 0; p < CUDA_PLAN_PROGS; p++) {
            json_t *jc = json_array_get (calls, (size_t) p);
            json_t *launches = json_object_get (jc, "launches");
            cuda_plan_call_t *call = &size->call [p];
            if (s_get_u64 (json_object_get (jc, "workspace"), &call->workspace)
            ||  !json_is_array (launches) || json_array_size (launches) > CUDA_PLAN_MAX_LAUNCHES)
                goto fail;
            call->nlaunches = (uint32_t) json_array_size (launches);
            call->launches = calloc (call->nlaunches? call->nlaunches: 1, sizeof *call->launches);
            if (!call->launches)
                goto fail;
            for (uint32_t l = 0; l < call->nlaunches; l++) {
                json_t *jl = json_array_get (launches, l);
                cuda_plan_launch_t *launch = &call->launches [l];
                const char *kernel = json_string_value (json_object_get (jl, "kernel"));
                json_t *largs = json_object_get (jl, "args");
                if (!kernel || strlen (kernel) >= CUDA_PLAN_NAME
                ||  s_dims_from (json_object_get (jl, "grid"), launch->grid)
                ||  s_dims_from (json_object_get (jl, "block"), launch->block)
                ||  s_int (jl, "shared", 0, INT32_MAX, &launch->shared)
                ||  !json_is_array (largs) || json_array_size (largs) > CUDA_PLAN_MAX_CALLARGS)
                    goto fail;
                snprintf (launch->kernel, sizeof launch->kernel, "%s", kernel);
                launch->nargs = (uint32_t) json_array_size (largs);
                for (uint32_t k = 0; k < launch->nargs; k++) {
                    json_t *jk = json_array_get (largs, k);
                    if (!json_is_integer (jk) || json_integer_value (jk) < -1
                    ||  json_integer_value (jk) >= (json_int_t) self->nargs)
                        goto fail;
                    launch->args [k] = (int32_t) json_integer_value (jk);
                }
            }
        }
    }
    return self;
fail:
    common_seterr (err, errlen, "malformed plan (%s)", what);
    cuda_plan_destroy (&self);
    return NULL;
}

uint64_t
cuda_plan_max_bytes (const cuda_plan_t *plan, uint32_t arg)
{
    uint64_t max = 0;
    for (uint32_t s = 0; s < plan->nsizes; s++)
        if (plan->sizes [s].bytes [arg] > max)
            max = plan->sizes [s].bytes [arg];
    return max;
}

uint64_t
cuda_plan_max_workspace (const cuda_plan_t *plan, cuda_plan_prog_t prog)
{
    uint64_t max = 0;
    for (uint32_t s = 0; s < plan->nsizes; s++)
        if (plan->sizes [s].call [prog].workspace > max)
            max = plan->sizes [s].call [prog].workspace;
    return max;
}

uint64_t
cuda_plan_device_bytes (const cuda_plan_t *plan)
{
    //  The candidate's copy of every tensor, the reference's, and the
    //  baseline's inouts and outputs.
    uint64_t total = 0;
    for (uint32_t a = 0; a < plan->nargs; a++) {
        if (plan->args [a].kind == ARG_SCALAR)
            continue;
        uint64_t b = cuda_plan_max_bytes (plan, a);
        total += 2 * b;
        if (plan->has_baseline && plan->args [a].kind != ARG_INPUT)
            total += b;
    }
    total += cuda_plan_max_workspace (plan, PLAN_CANDIDATE) + cuda_plan_max_workspace (plan, PLAN_REFERENCE)
           + cuda_plan_max_workspace (plan, PLAN_BASELINE);
    return total;
}
