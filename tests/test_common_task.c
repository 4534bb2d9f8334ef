/*  test_common_task - task, program, job parsing and layout: the example
    task parses with defaults filled; every kind of bad input is rejected
    with a reason naming its path; layouts compute sizes, geometry and args
    and refuse negative dims, overflow, huge tensors and empty blocks.  */
#include "testutil.h"
#include "common_backend.h"

//  The task format's view of two backends like the worker's (common tests
//  do not link the worker's registry).
static const common_backend_info_t s_cpu = { "cpu", { "cpu" }, { "c" }, false };
static const common_backend_info_t s_cuda = { "cuda", { "cuda" }, { "cuda", "ptx" }, false };
static const common_backend_info_t s_python = { "python", { "cpu", "cuda" }, { "python" }, true };
static const common_backend_info_t *const s_catalog [] = { &s_cpu, &s_cuda, &s_python, NULL };

static void
s_install_catalog (void)
{
    common_backend_install (s_catalog);
}
#include "common_task.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *s_task_text =
    "{\"name\": \"rmsnorm_f32\", \"backend\": \"cpu\", \"args\": ["
    " {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"M\",\"N\"],"
    "  \"init\": {\"dist\": \"normal\", \"mean\": 0, \"std\": 1}},"
    " {\"name\": \"w\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"],"
    "  \"init\": {\"dist\": \"uniform\", \"low\": 0.5, \"high\": 1.5}},"
    " {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"M\",\"N\"]},"
    " {\"name\": \"M\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"M\"},"
    " {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"},"
    " {\"name\": \"eps\", \"kind\": \"scalar\", \"dtype\": \"f32\", \"value\": 1e-6}],"
    " \"sizes\": [{\"M\": 512, \"N\": 1024}, {\"M\": 3, \"N\": 1000}, {\"M\": 1, \"N\": 1}],"
    " \"timing_size\": 0,"
    " \"tolerance\": {\"atol\": 1e-4, \"rtol\": 1e-4},"
    " \"reference\": {\"source\": \"...\", \"launches\": [{\"kernel\": \"rmsnorm_ref\"}]}}";

static const char *s_candidate_text =
    "{\"source\": \"...\", \"options\": [\"-O3\"], \"workspace\": \"M*4\","
    " \"launches\": [{\"kernel\": \"rmsnorm\", \"grid\": [\"cdiv(M,4)\",1,1], \"block\": [128,1,1],"
    " \"shared\": \"0\", \"args\": [\"x\",\"w\",\"y\",\"M\",\"N\",\"eps\"]}]}";

static json_t *
s_json (const char *text)
{
    json_error_t error;
    json_t *json = json_loads (text, JSON_DECODE_ANY, &error);
    ck_assert_msg (json != NULL, "bad test JSON '%s': %s", text, error.text);
    return json;
}

//  {"task": ..., "candidate": ...}
static json_t *
s_job_json (void)
{
    json_t *job = json_object ();
    json_object_set_new (job, "task", s_json (s_task_text));
    json_object_set_new (job, "candidate", s_json (s_candidate_text));
    return job;
}

//  The value at a dotted path ("task.args.2"); numbers index arrays.
static json_t *
s_at (json_t *root, const char *path)
{
    char buf [256];
    snprintf (buf, sizeof buf, "%s", path);
    json_t *node = root;
    for (char *save = NULL, *tok = strtok_r (buf, ".", &save); tok; tok = strtok_r (NULL, ".", &save)) {
        if (json_is_array (node))
            node = json_array_get (node, (size_t) atoi (tok));
        else
            node = json_object_get (node, tok);
        ck_assert_msg (node != NULL, "test path '%s' not found at '%s'", path, tok);
    }
    return node;
}

//  Set (value text) or delete (NULL) key of the object at path.
static void
s_set (json_t *root, const char *path, const char *key, const char *value)
{
    json_t *node = *path ? s_at (root, path) : root;
    if (value)
        json_object_set_new (node, key, s_json (value));
    else
        json_object_del (node, key);
}

//  The job must be rejected with a reason containing want.
static void
s_job_fails (json_t *job, const char *want)
{
    char err [512] = "";
    common_job_t *parsed = common_job_from_json (job, err, sizeof err);
    ck_assert_msg (parsed == NULL, "job parsed, expected failure '%s'", want);
    ck_assert_msg (strstr (err, want) != NULL, "expected '%s' in '%s'", want, err);
}

//  Apply one change to the example job; it must fail naming want.
static void
s_change_fails (const char *path, const char *key, const char *value, const char *want)
{
    json_t *job = s_job_json ();
    s_set (job, path, key, value);
    s_job_fails (job, want);
    json_decref (job);
}

//  Apply one change to the example job; it must still parse.
static void
s_change_passes (const char *path, const char *key, const char *value)
{
    json_t *job = s_job_json ();
    s_set (job, path, key, value);
    char err [512] = "";
    common_job_t *parsed = common_job_from_json (job, err, sizeof err);
    ck_assert_msg (parsed != NULL, "%s.%s = %s: %s", path, key, value ? value : "(deleted)", err);
    common_job_destroy (&parsed);
    json_decref (job);
}

START_TEST (test_example_task)
{
    json_t *json = s_json (s_task_text);
    char err [256] = "";
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "example task: %s", err);
    ck_assert_str_eq (task->name, "rmsnorm_f32");
    ck_assert_str_eq (task->backend, "cpu");
    ck_assert_uint_eq (task->nargs, 6);
    ck_assert_uint_eq (task->nsizes, 3);
    ck_assert_uint_eq (task->sizes [0].nvars, 2);
    ck_assert_str_eq (task->sizes [0].names [0], "M");
    ck_assert_int_eq (task->sizes [0].values [1], 1024);
    ck_assert_str_eq (task->sizes [1].names [1], "N");
    ck_assert_int_eq (task->sizes [1].values [1], 1000);
    ck_assert (task->atol == 1e-4 && task->rtol == 1e-4);
    ck_assert_uint_eq (task->timing_size, 0);
    ck_assert_ptr_null (task->baseline);
    ck_assert_ptr_null (task->bytes_expr);

    const common_arg_t *x = &task->args [0], *w = &task->args [1], *y = &task->args [2];
    ck_assert_int_eq (x->kind, ARG_INPUT);
    ck_assert_int_eq (x->dtype, DTYPE_F32);
    ck_assert_uint_eq (x->ndims, 2);
    ck_assert_str_eq (x->shape [1], "N");
    ck_assert_int_eq (x->init.dist, INIT_NORMAL);
    ck_assert (x->init.p0 == 0 && x->init.p1 == 1);
    ck_assert_int_eq (w->init.dist, INIT_UNIFORM);
    ck_assert (w->init.p0 == 0.5 && w->init.p1 == 1.5);
    ck_assert_int_eq (y->kind, ARG_OUTPUT);
    ck_assert_int_eq (task->args [3].kind, ARG_SCALAR);
    ck_assert (task->args [3].value_is_expr);
    ck_assert_str_eq (task->args [3].value_expr, "M");
    ck_assert (!task->args [5].value_is_expr);
    ck_assert (task->args [5].value == 1e-6);

    //  Defaults of the reference.
    const common_program_t *ref = &task->reference;
    ck_assert_str_eq (ref->lang, "c");
    ck_assert_ptr_null (ref->workspace);
    ck_assert_uint_eq (ref->noptions, 0);
    ck_assert_uint_eq (ref->nlaunches, 1);
    ck_assert_str_eq (ref->launches [0].kernel, "rmsnorm_ref");
    for (int d = 0; d < 3; d++) {
        ck_assert_str_eq (ref->launches [0].grid [d], "1");
        ck_assert_str_eq (ref->launches [0].block [d], "1");
    }
    ck_assert_str_eq (ref->launches [0].shared, "0");
    ck_assert (!ref->launches [0].args_given);

    ck_assert_str_eq (common_arg_kind_name (ARG_INOUT), "inout");
    common_task_destroy (&task);
    common_task_destroy (&task);
    ck_assert_ptr_null (task);
    json_decref (json);
}
END_TEST

START_TEST (test_example_job)
{
    json_t *json = s_job_json ();
    char err [256] = "";
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "example job: %s", err);
    const common_program_t *cand = job->candidate;
    ck_assert_str_eq (cand->source, "...");
    ck_assert_str_eq (cand->lang, "c");
    ck_assert_uint_eq (cand->noptions, 1);
    ck_assert_str_eq (cand->options [0], "-O3");
    ck_assert_str_eq (cand->workspace, "M*4");
    ck_assert_ptr_null (cand->name);
    const common_launch_t *l = &cand->launches [0];
    ck_assert_str_eq (l->grid [0], "cdiv(M,4)");
    ck_assert_str_eq (l->grid [1], "1");
    ck_assert_str_eq (l->block [0], "128");
    ck_assert (l->args_given);
    ck_assert_uint_eq (l->nargs, 6);
    ck_assert_str_eq (l->args [5], "eps");

    //  eval and reward defaults.
    ck_assert (!job->eval.seed_given);
    ck_assert_uint_eq (job->eval.trials, 3);
    ck_assert_uint_eq (job->eval.warmup, 2);
    ck_assert_uint_eq (job->eval.timed, 10);
    ck_assert (job->eval.timeout_s == 10 && job->eval.compile_timeout_s == 30);
    ck_assert (job->eval.profile && !job->eval.check_sizes_only);
    ck_assert (job->reward.compile_error == -1.0 && job->reward.incorrect == -0.5);
    ck_assert (job->reward.runtime_error == -0.5 && job->reward.timeout == -0.5);
    ck_assert (job->reward.clip == 2.0 && !job->reward.log_shape);
    ck_assert_ptr_null (job->tag);
    common_job_destroy (&job);
    common_job_destroy (&job);
    json_decref (json);
}
END_TEST

START_TEST (test_eval_reward_values)
{
    json_t *json = s_job_json ();
    s_set (json, "", "eval", "{\"seed\": 9223372036854775807, \"trials\": 100, \"warmup\": 0,"
           " \"timed\": 10000, \"timeout\": 0.5, \"compile_timeout\": 600, \"profile\": false,"
           " \"check_only\": true}");
    s_set (json, "", "reward", "{\"compile_error\": -2, \"incorrect\": 0, \"runtime_error\": -0.25,"
           " \"timeout\": -0.1, \"clip\": 4, \"shape\": \"log\", \"x-note\": 1}");
    s_set (json, "", "tag", "\"run-7\"");
    char err [256] = "";
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "%s", err);
    ck_assert (job->eval.seed_given);
    ck_assert_uint_eq (job->eval.seed, 9223372036854775807ull);
    ck_assert_uint_eq (job->eval.trials, 100);
    ck_assert_uint_eq (job->eval.warmup, 0);
    ck_assert_uint_eq (job->eval.timed, 10000);
    ck_assert (job->eval.timeout_s == 0.5 && job->eval.compile_timeout_s == 600);
    ck_assert (!job->eval.profile && job->eval.check_sizes_only);
    ck_assert (job->reward.compile_error == -2 && job->reward.incorrect == 0);
    ck_assert (job->reward.clip == 4 && job->reward.log_shape);
    ck_assert_str_eq (job->tag, "run-7");
    common_job_destroy (&job);
    json_decref (json);

    //  Standalone: NULL gives defaults.
    common_eval_t eval;
    common_reward_t reward;
    ck_assert_int_eq (common_eval_from_json (NULL, &eval, err, sizeof err), 0);
    ck_assert_uint_eq (eval.trials, 3);
    ck_assert_int_eq (common_reward_from_json (NULL, &reward, err, sizeof err), 0);
    ck_assert (reward.clip == 2.0);
    json = s_json ("{\"seed\": 0}");
    ck_assert_int_eq (common_eval_from_json (json, &eval, err, sizeof err), 0);
    ck_assert (eval.seed_given && eval.seed == 0);
    json_decref (json);
    json = s_json ("{\"timed\": 0}");
    ck_assert_int_eq (common_eval_from_json (json, &eval, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "eval.timed"), "got '%s'", err);
    json_decref (json);
}
END_TEST

START_TEST (test_annotations_and_null)
{
    s_change_passes ("task.args.2", "comment", "\"output\"");
    s_change_passes ("task.args.2", "x-layout", "{\"any\": [1]}");
    s_change_passes ("task", "description", "\"RMS norm\"");
    s_change_passes ("candidate.launches.0", "x-hint", "3");
    s_change_passes ("candidate", "comment", "\"v2\"");
    s_change_passes ("", "x-client", "\"trainer\"");
    s_change_passes ("task.sizes.1", "comment", "\"odd size\"");
    s_change_passes ("task", "baseline", "null");
    s_change_passes ("task", "tolerance", "{\"atol\": 0, \"rtol\": 0}");
    s_change_passes ("", "eval", "null");
    s_change_passes ("candidate", "name", "\"v2-fast\"");
    s_change_passes ("task", "bytes", "\"M*N*8+N*4\"");
    s_change_passes ("task", "bytes", "4096");
    s_change_passes ("task.args.0", "shape", "[]");
    s_change_passes ("task.args.0", "shape", "[\"M\", 2.0]");        //  whole reals are integers
    s_change_passes ("task.args.0", "init", "{\"dist\": \"zeros\"}");
    s_change_passes ("task.args.0", "init", "{\"dist\": \"randint\", \"low\": -5, \"high\": 5}");
    s_change_passes ("task.args.0", "init", "{\"dist\": \"arange\", \"step\": 0.5}");
    s_change_passes ("task.args.2", "kind", "\"inout\"");
    s_change_passes ("task.args.5", "value", "\"cdiv(M,2)\"");        //  float scalar, integer expression
    s_change_passes ("candidate.launches.0", "args", "[\"x\", \"workspace\"]");
    s_change_passes ("candidate.launches.0", "args", "[]");
}
END_TEST

START_TEST (test_rejects_task)
{
    s_change_fails ("task.args.2", "shpe", "[1]", "task.args[2]: unknown key 'shpe'");
    s_change_fails ("task", "nmae", "\"x\"", "task: unknown key 'nmae'");
    s_change_fails ("task", "description", "7", "task: 'description' must be a string");
    s_change_fails ("task", "name", NULL, "task: missing 'name'");
    s_change_fails ("task", "name", "\"a/b\"", "task.name: 'a/b' may only hold");
    s_change_fails ("task", "name", "\"\"", "task.name: must be 1 to 128 bytes");
    s_change_fails ("task", "backend", "\"tpu\"", "task.backend: 'tpu' is not a backend");
    s_change_fails ("task", "backend", NULL, "task: missing 'backend'");
    s_change_fails ("task", "args", "[]", "task.args: must be an array of 1 to 64");
    s_change_fails ("task", "args", NULL, "task: missing 'args'");
    s_change_fails ("task", "timing_size", "3", "task.timing_size: must be an integer from 0 to 2");
    s_change_fails ("task", "timing_size", "-1", "task.timing_size");
    s_change_fails ("task.tolerance", "atol", "-1e-3", "task.tolerance.atol: must be a finite number >= 0");
    s_change_fails ("task.tolerance", "rtol", "\"1e-3\"", "task.tolerance.rtol");
    s_change_fails ("task.tolerance", "eps", "1", "task.tolerance: unknown key 'eps'");
    s_change_fails ("task", "reference", NULL, "task: missing 'reference'");
    s_change_fails ("task.reference.launches.0", "grdi", "[1]", "task.reference.launches[0]: unknown key 'grdi'");
    s_change_fails ("task.reference", "lang", "\"cuda\"", "task.reference.lang: 'cuda' is not a language of backend cpu");
    s_change_fails ("task", "baseline", "{\"source\": \"b\", \"launches\": [{\"kernel\": \"k\", \"args\": [\"q\"]}]}",
                    "task.baseline.launches[0].args[0]: 'q' is not an arg");
    s_change_fails ("task", "bytes", "\"M*N*K\"", "task.bytes: unknown name 'K'");
    s_change_fails ("task", "bytes", "[\"M\"]", "task.bytes: arrays are not supported");
    s_change_fails ("task", "bytes", "1.5", "task.bytes: 1.5 is not an integer");
}
END_TEST

START_TEST (test_rejects_sizes)
{
    s_change_fails ("task", "sizes", "[]", "task.sizes: must be an array of 1 to 32");
    s_change_fails ("task", "sizes", NULL, "task: missing 'sizes'");
    s_change_fails ("task", "sizes", "[{\"M\": 1, \"N\": 1}, 5]", "task.sizes[1]: must be an object");
    s_change_fails ("task.sizes.1", "N", NULL, "task.sizes[1]: missing 'N'");
    s_change_fails ("task.sizes.2", "K", "4", "task.sizes[2]: 'K' is not in sizes[0]");
    s_change_fails ("task.sizes.0", "M", "-1", "task.sizes[0].M: must be an integer from 0 to 1099511627776");
    s_change_fails ("task.sizes.0", "M", "1099511627777", "task.sizes[0].M");
    s_change_fails ("task.sizes.0", "M", "2.5", "task.sizes[0].M");
    s_change_fails ("task.sizes.0", "M", "\"512\"", "task.sizes[0].M");
    s_change_fails ("task.sizes.0", "bad-name", "1", "task.sizes[0]: 'bad-name' is not an identifier");
    //  33 sizes are too many.
    char text [2048] = "[";
    for (int i = 0; i < 33; i++)
        strcat (text, i ? ",{\"M\":1,\"N\":1}" : "{\"M\":1,\"N\":1}");
    strcat (text, "]");
    s_change_fails ("task", "sizes", text, "task.sizes: must be an array of 1 to 32");
}
END_TEST

START_TEST (test_rejects_args)
{
    s_change_fails ("task.args.1", "name", "\"x\"", "task.args[1].name: 'x' is also the name of args[0]");
    s_change_fails ("task.args.1", "name", "\"workspace\"", "task.args[1].name: 'workspace' is reserved");
    s_change_fails ("task.args.1", "name", "\"2w\"", "task.args[1].name: '2w' is not an identifier");
    s_change_fails ("task.args.1", "name", NULL, "task.args[1]: missing 'name'");
    s_change_fails ("task.args.0", "kind", "\"in\"", "task.args[0].kind: 'in' is not a kind");
    s_change_fails ("task.args.0", "dtype", "\"float\"", "task.args[0].dtype: 'float' is not a dtype");
    s_change_fails ("task.args.0", "dtype", NULL, "task.args[0]: missing 'dtype'");
    s_change_fails ("task.args.3", "shape", "[1]", "task.args[3]: a scalar takes no 'shape'");
    s_change_fails ("task.args.2", "shape", NULL, "task.args[2]: missing 'shape'");
    s_change_fails ("task.args.2", "init", "{\"dist\": \"zeros\"}", "task.args[2]: only input and inout args take 'init'");
    s_change_fails ("task.args.0", "value", "1", "task.args[0]: only scalars take 'value'");
    s_change_fails ("task.args.3", "value", NULL, "task.args[3]: missing 'value'");
    s_change_fails ("task.args.3", "value", "1.5", "task.args[3].value: 1.5 is not an integer");
    s_change_fails ("task.args.3", "value", "1e10", "task.args[3].value: 10000000000 is out of range for i32");
    s_change_fails ("task.args.3", "value", "true", "task.args[3].value");
    s_change_fails ("task.args.3", "value", "\"M+K\"", "task.args[3].value: unknown name 'K'");
    s_change_fails ("task.args.5", "value", "1e39", "task.args[5].value: 1e+39 is out of range for f32");
    s_change_fails ("task.args.0", "shape", "[\"M\", \"K\"]", "task.args[0].shape[1]: unknown name 'K'");
    s_change_fails ("task.args.0", "shape", "[\"M\", \"(N\"]", "task.args[0].shape[1]: unexpected end");
    s_change_fails ("task.args.0", "shape", "[1,1,1,1,1,1,1,1,1]", "task.args[0].shape: must be an array of at most 8");
    s_change_fails ("task.args.0", "shape", "\"M\"", "task.args[0].shape: must be an array");
    s_change_fails ("task.args.0", "shape", "[\"M\", 1.5]", "task.args[0].shape[1]: 1.5 is not an integer");
    s_change_fails ("task.args.0", "shape", "[\"M\", null]", "task.args[0].shape[1]: must be an integer or an expression");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"normal\", \"low\": 0}",
                    "task.args[0].init: unknown key 'low' for dist 'normal'");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"gauss\"}", "task.args[0].init.dist: 'gauss' is not a distribution");
    s_change_fails ("task.args.0", "init", "{\"mean\": 1}", "task.args[0].init: missing 'dist'");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"normal\", \"std\": -1}", "task.args[0].init: std must be >= 0");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"randint\", \"low\": 5, \"high\": 5}",
                    "task.args[0].init: high (5) must be > low (5)");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"randint\", \"low\": 0.5}",
                    "task.args[0].init: randint low and high must be integers");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"uniform\", \"low\": 2, \"high\": 1}",
                    "task.args[0].init: high (1) must be >= low (2)");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"uniform\", \"low\": \"0\"}",
                    "task.args[0].init.low: must be a finite number");
    s_change_fails ("task.args.0", "init", "{\"dist\": \"zeros\", \"mean\": 0}",
                    "task.args[0].init: unknown key 'mean' for dist 'zeros'");
    s_change_fails ("task", "args", "[5]", "task.args[0]: must be an object");
}
END_TEST

START_TEST (test_rejects_candidate)
{
    s_change_fails ("candidate.launches.0", "grid", "[\"cdiv(M,4)\", 1.5]",
                    "candidate.launches[0].grid[1]: 1.5 is not an integer");
    s_change_fails ("candidate.launches.0", "grid", "[\"K\"]", "candidate.launches[0].grid[0]: unknown name 'K'");
    s_change_fails ("candidate.launches.0", "grid", "[]", "candidate.launches[0].grid: must be an array of 1 to 3");
    s_change_fails ("candidate.launches.0", "grid", "[1,1,1,1]", "candidate.launches[0].grid: must be an array of 1 to 3");
    s_change_fails ("candidate.launches.0", "block", "128", "candidate.launches[0].block: must be an array");
    s_change_fails ("candidate.launches.0", "shared", "\"M*\"", "candidate.launches[0].shared: unexpected end");
    s_change_fails ("candidate.launches.0", "shared", "true", "candidate.launches[0].shared: must be an integer or an expression");
    s_change_fails ("candidate.launches.0", "args", "[\"x\", \"z\"]", "candidate.launches[0].args[1]: 'z' is not an arg");
    s_change_fails ("candidate.launches.0", "args", "[\"x\", 3]", "candidate.launches[0].args[1]: must be a string");
    s_change_fails ("candidate.launches.0", "kernel", "\"1abc\"", "candidate.launches[0].kernel: '1abc' is not an identifier");
    s_change_fails ("candidate.launches.0", "kernel", NULL, "candidate.launches[0]: missing 'kernel'");
    s_change_fails ("candidate.launches.0", "gird", "[1]", "candidate.launches[0]: unknown key 'gird'");
    s_change_fails ("candidate", "launches", "[]", "candidate.launches: must be an array of 1 to 64");
    s_change_fails ("candidate", "launches", NULL, "candidate: missing 'launches'");
    s_change_fails ("candidate", "source", NULL, "candidate: missing 'source'");
    s_change_fails ("candidate", "source", "\"\"", "candidate.source: must be 1 to 1048576 bytes");
    s_change_fails ("candidate", "lang", "\"cuda\"", "candidate.lang: 'cuda' is not a language of backend cpu");
    s_change_fails ("candidate", "workspace", "-1.5", "candidate.workspace: -1.5 is not an integer");
    s_change_fails ("candidate", "workspace", "\"M*K\"", "candidate.workspace: unknown name 'K'");
    s_change_fails ("candidate", "options", "\"-O3\"", "candidate.options: must be an array");
    s_change_fails ("candidate", "options", "[\"-O3\", 3]", "candidate.options[1]: must be a string");
    s_change_fails ("candidate", "sauce", "\"\"", "candidate: unknown key 'sauce'");
    s_change_fails ("", "candidate", NULL, "job: missing 'candidate'");
    s_change_fails ("", "candidate", "[]", "candidate: must be an object");
    s_change_fails ("", "task", NULL, "job: missing 'task'");
    s_change_fails ("", "extra", "1", "job: unknown key 'extra'");

    char text [1024];
    strcpy (text, "[");
    for (int i = 0; i < 33; i++)
        strcat (text, i ? ",\"-O2\"" : "\"-O2\"");
    strcat (text, "]");
    s_change_fails ("candidate", "options", text, "candidate.options: must be an array of at most 32");
    memset (text, 'a', 300);
    text [0] = '"';
    strcpy (text + 299, "\"");
    char wrapped [1100];
    snprintf (wrapped, sizeof wrapped, "[%s]", text);
    s_change_fails ("candidate", "options", wrapped, "candidate.options[0]: must be 1 to 256 bytes");
    s_change_fails ("", "tag", wrapped, "tag: must be a string");
    s_change_fails ("", "tag", text, "tag: must be 0 to 256 bytes");

    //  "workspace" as a launch arg needs a workspace.
    json_t *job = s_job_json ();
    s_set (job, "candidate", "workspace", NULL);
    s_set (job, "candidate.launches.0", "args", "[\"x\", \"workspace\"]");
    s_job_fails (job, "candidate.launches[0].args[1]: 'workspace' passed but the program has no workspace");
    json_decref (job);
}
END_TEST

START_TEST (test_rejects_eval_reward)
{
    s_change_fails ("", "eval", "{\"trials\": 0}", "eval.trials: must be an integer from 1 to 100");
    s_change_fails ("", "eval", "{\"trials\": 101}", "eval.trials");
    s_change_fails ("", "eval", "{\"warmup\": 1001}", "eval.warmup: must be an integer from 0 to 1000");
    s_change_fails ("", "eval", "{\"timed\": 10001}", "eval.timed");
    s_change_fails ("", "eval", "{\"seed\": -1}", "eval.seed: must be an integer from 0 to 9223372036854775807");
    s_change_fails ("", "eval", "{\"seed\": \"42\"}", "eval.seed");
    s_change_fails ("", "eval", "{\"timeout\": 0}", "eval.timeout: must be a number of seconds in (0, 3600]");
    s_change_fails ("", "eval", "{\"timeout\": 3601}", "eval.timeout");
    s_change_fails ("", "eval", "{\"compile_timeout\": 601}", "eval.compile_timeout: must be a number of seconds in (0, 600]");
    s_change_fails ("", "eval", "{\"profile\": \"yes\"}", "eval.profile: must be true or false");
    s_change_fails ("", "eval", "{\"check_only\": 1}", "eval.check_only: must be true or false");
    s_change_fails ("", "eval", "{\"trails\": 3}", "eval: unknown key 'trails'");
    s_change_fails ("", "eval", "[]", "eval: must be an object");
    s_change_fails ("", "reward", "{\"incorrect\": 0.1}", "reward.incorrect: 0.1 is > 0: a failure must never outscore");
    s_change_fails ("", "reward", "{\"compile_error\": 1}", "reward.compile_error: 1 is > 0");
    s_change_fails ("", "reward", "{\"timeout\": 0.5}", "reward.timeout");
    s_change_fails ("", "reward", "{\"runtime_error\": 2}", "reward.runtime_error");
    s_change_fails ("", "reward", "{\"clip\": 0}", "reward.clip: must be a number > 0");
    s_change_fails ("", "reward", "{\"clip\": -1}", "reward.clip");
    s_change_fails ("", "reward", "{\"shape\": \"exp\"}", "reward.shape: 'exp' is not a shape");
    s_change_fails ("", "reward", "{\"bonus\": 1}", "reward: unknown key 'bonus'");
}
END_TEST

//  Parse the example job (optionally changed) and lay out one size.
static common_job_t *
s_job_with (const char *path, const char *key, const char *value)
{
    json_t *json = s_job_json ();
    if (key)
        s_set (json, path, key, value);
    char err [256] = "";
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "%s", err);
    json_decref (json);
    return job;
}

START_TEST (test_layout)
{
    common_job_t *job = s_job_with ("", NULL, NULL);
    common_layout_t layout;
    char err [256] = "";
    ck_assert_msg (common_task_layout (job->task, job->candidate, 0, 0, &layout, err, sizeof err) == 0,
                   "%s", err);
    ck_assert_uint_eq (layout.size_index, 0);
    ck_assert_uint_eq (layout.count [0], 512 * 1024);
    ck_assert_uint_eq (layout.bytes [0], 512 * 1024 * 4);
    ck_assert_int_eq (layout.dims [0][0], 512);
    ck_assert_int_eq (layout.dims [0][1], 1024);
    ck_assert_uint_eq (layout.bytes [1], 1024 * 4);
    ck_assert_uint_eq (layout.count [3], 1);
    ck_assert_uint_eq (layout.bytes [3], 0);
    ck_assert_int_eq (layout.scalar_int [3], 512);
    ck_assert (layout.scalar [3] == 512);
    ck_assert_int_eq (layout.scalar_int [4], 1024);
    ck_assert (layout.scalar [5] == 1e-6);
    ck_assert_uint_eq (layout.workspace_bytes, 2048);
    ck_assert_uint_eq (layout.total_bytes, 2 * 512 * 1024 * 4 + 4096 + 2048);
    ck_assert_uint_eq (layout.nlaunches, 1);
    ck_assert_str_eq (layout.launches [0].kernel, "rmsnorm");
    ck_assert_int_eq (layout.launches [0].grid [0], 128);
    ck_assert_int_eq (layout.launches [0].grid [2], 1);
    ck_assert_int_eq (layout.launches [0].block [0], 128);
    ck_assert_int_eq (layout.launches [0].shared, 0);
    ck_assert_uint_eq (layout.launches [0].nargs, 6);
    for (int a = 0; a < 6; a++)
        ck_assert_int_eq (layout.launches [0].args [a], a);

    //  Size 1: cdiv(3,4) = 1.
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 1, 0, &layout, err, sizeof err), 0);
    ck_assert_int_eq (layout.launches [0].grid [0], 1);
    ck_assert_uint_eq (layout.bytes [0], 3 * 1000 * 4);

    //  The reference: no args given, so all task args in order, no workspace.
    ck_assert_int_eq (common_task_layout (job->task, &job->task->reference, 2, 0, &layout, err, sizeof err), 0);
    ck_assert_uint_eq (layout.launches [0].nargs, 6);
    ck_assert_int_eq (layout.launches [0].args [5], 5);
    ck_assert_uint_eq (layout.workspace_bytes, 0);
    ck_assert_int_eq (layout.launches [0].grid [0], 1);

    //  No such size.
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 3, 0, &layout, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "size 3 does not exist"), "got '%s'", err);
    //  A tight cap.
    ck_assert_int_eq (common_task_layout (job->task, &job->task->reference, 0, 1000, &layout, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "size 0 needs 4.0 MiB of tensors and workspace, over the 1000 B limit"),
                   "got '%s'", err);
    common_job_destroy (&job);

    //  Without args, a program with a workspace gets it last.
    job = s_job_with ("candidate.launches.0", "args", NULL);
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 0, 0, &layout, err, sizeof err), 0);
    ck_assert_uint_eq (layout.launches [0].nargs, 7);
    ck_assert_int_eq (layout.launches [0].args [6], -1);
    common_job_destroy (&job);

    //  Explicit workspace and repeated args map by name.
    job = s_job_with ("candidate.launches.0", "args", "[\"workspace\", \"eps\", \"x\", \"x\"]");
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 0, 0, &layout, err, sizeof err), 0);
    ck_assert_uint_eq (layout.launches [0].nargs, 4);
    ck_assert_int_eq (layout.launches [0].args [0], -1);
    ck_assert_int_eq (layout.launches [0].args [1], 5);
    ck_assert_int_eq (layout.launches [0].args [3], 0);
    common_job_destroy (&job);

    //  Zero-element tensors are allowed.
    job = s_job_with ("task.args.1", "shape", "[\"N\", 0]");
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 0, 0, &layout, err, sizeof err), 0);
    ck_assert_uint_eq (layout.count [1], 0);
    ck_assert_uint_eq (layout.bytes [1], 0);
    common_job_destroy (&job);

    //  ndims 0 is one element.
    job = s_job_with ("task.args.1", "shape", "[]");
    ck_assert_int_eq (common_task_layout (job->task, job->candidate, 0, 0, &layout, err, sizeof err), 0);
    ck_assert_uint_eq (layout.count [1], 1);
    ck_assert_uint_eq (layout.bytes [1], 4);
    common_job_destroy (&job);
}
END_TEST

//  Lay out size 0 of the changed example job; it must fail naming want.
static void
s_layout_fails (const char *path, const char *key, const char *value, const char *want)
{
    common_job_t *job = s_job_with (path, key, value);
    common_layout_t layout;
    char err [256] = "";
    int rc = common_task_layout (job->task, job->candidate, 0, TASK_DEFAULT_MAX_TENSOR_BYTES,
                                 &layout, err, sizeof err);
    ck_assert_msg (rc == -1, "layout passed, expected '%s'", want);
    ck_assert_msg (strstr (err, want) != NULL, "expected '%s' in '%s'", want, err);
    common_job_destroy (&job);
}

START_TEST (test_layout_rejects)
{
    s_layout_fails ("task.args.0", "shape", "[\"M-600\", \"N\"]",
                    "task.args[0].shape[0]: dim is -88 at size 0, must be >= 0");
    s_layout_fails ("candidate.launches.0", "block", "[0]",
                    "program.launches[0].block[0]: 0 at size 0, must be 1 to 2147483647");
    s_layout_fails ("candidate.launches.0", "grid", "[1, \"M-M\"]", "program.launches[0].grid[1]: 0 at size 0");
    s_layout_fails ("candidate.launches.0", "grid", "[2147483648]", "program.launches[0].grid[0]");
    s_layout_fails ("candidate.launches.0", "shared", "-1", "program.launches[0].shared: -1 bytes at size 0");
    s_layout_fails ("candidate.launches.0", "shared", "\"M*N*N*N\"", "program.launches[0].shared");
    s_layout_fails ("candidate.launches.0", "grid", "[\"N/(M-M)\"]", "division by zero");
    s_layout_fails ("candidate", "workspace", "\"-M\"", "program.workspace: -512 bytes at size 0");
    s_layout_fails ("candidate", "workspace", "\"M*N*1000000\"", "program.workspace: 524288000000 bytes at size 0");
    s_layout_fails ("task.args.3", "dtype", "\"i8\"", "task.args[3].value: 512 at size 0 is out of range for i8");
    //  Petabytes: within 64 bits but over the cap.
    s_layout_fails ("task.args.0", "shape", "[1099511627776, 1024]",
                    "size 0 needs 4.0 PiB of tensors and workspace, over the 64 GiB limit");
    //  Overflow of the element count, of the bytes, of an expression.
    s_layout_fails ("task.args.0", "shape", "[1099511627776, 1099511627776]", "task.args[0]: element count overflows");
    s_layout_fails ("task.args.0", "shape", "[4611686018427387904]", "task.args[0]: byte count overflows");
    s_layout_fails ("task.args.0", "shape", "[\"M*N*M*N*M*N*M\"]", "task.args[0].shape[0]: overflow in 'M*N*M*N*M*N*M'");
    //  Tensors that fit alone but whose sum overflows.
    s_layout_fails ("task.args.0", "shape", "[1152921504606846976]", "size 0 needs");
}
END_TEST

//  Absurd sizes from a hostile job end in a reason, at parse time when the
//  text alone shows it, else at layout: never in a crash or an allocation.
START_TEST (test_absurd_sizes_rejected)
{
    //  10^9 launches, options or sizes cannot be asked for: arrays are bounded.
    char text [4096] = "[";
    for (int i = 0; i < 65; i++)
        strcat (text, i ? ",{\"kernel\":\"k\"}" : "{\"kernel\":\"k\"}");
    strcat (text, "]");
    s_change_fails ("candidate", "launches", text, "candidate.launches: must be an array of 1 to 64");
    s_change_fails ("", "eval", "{\"timed\": 1000000000}", "eval.timed: must be an integer from 1 to 10000");
    s_change_fails ("", "eval", "{\"trials\": 1000000000}", "eval.trials");
    s_change_fails ("", "eval", "{\"warmup\": 1e300}", "eval.warmup");
    //  Literals past int64 and reals where integers belong, at parse time.
    s_change_fails ("task.args.0", "shape", "[\"99999999999999999999\"]",
                    "task.args[0].shape[0]: integer too large at");
    s_change_fails ("task.args.0", "shape", "[1e300]", "task.args[0].shape[0]: 1e+300 is not an integer");
    s_change_fails ("candidate.launches.0", "grid", "[9007199254740994.0]", "is not an integer");
    s_change_fails ("task.sizes.0", "M", "1e15", "task.sizes[0].M: must be an integer from 0 to 1099511627776");
    s_change_fails ("task.args.3", "value", "-9223372036854775808", "out of range for i32");
    //  Negative and overflowing geometry, at layout.
    s_layout_fails ("candidate.launches.0", "grid", "[-1]", "program.launches[0].grid[0]: -1 at size 0");
    s_layout_fails ("candidate.launches.0", "block", "[1, 1, \"-M*N\"]", "program.launches[0].block[2]: -524288 at size 0");
    s_layout_fails ("candidate.launches.0", "shared", "2147483648", "program.launches[0].shared: 2147483648 bytes");
    s_layout_fails ("candidate", "workspace", "\"M*N*M*N*M*N*M*N\"", "program.workspace: overflow in 'M*N*M*N*M*N*M*N'");
    s_layout_fails ("candidate", "workspace", "9223372036854775807", "program.workspace: 9223372036854775807 bytes");
    s_layout_fails ("task.args.0", "shape", "[\"-9223372036854775807-1\"]", "dim is -9223372036854775808");
    s_layout_fails ("task.args.0", "shape", "[\"(0-9223372036854775807-1)/-1\"]", "overflow in");
    s_layout_fails ("task.args.0", "shape", "[\"M%(N-N)\"]", "modulo by zero in 'M%(N-N)'");
    s_layout_fails ("task.args.0", "shape", "[\"cdiv(M, N-N)\"]", "cdiv divisor must be > 0");
    //  A petabyte per dim is fine alone; eight of them overflow the count.
    s_layout_fails ("task.args.0", "shape", "[1099511627776,1,1,1,1,1,1,1099511627776]",
                    "task.args[0]: element count overflows 64 bits at size 0");
    //  An exabyte of f64 and an integer scalar past its dtype.
    s_layout_fails ("task.args.0", "shape", "[\"M*N*M*N*4096\"]", "of tensors and workspace, over the 64 GiB limit");
    s_layout_fails ("task.args.3", "value", "\"M*N*M*N\"", "task.args[3].value: 274877906944 at size 0 is out of range for i32");
}
END_TEST

START_TEST (test_program_standalone)
{
    char err [256] = "";
    json_t *json = s_json ("{\"source\": \"__global__ void k() {}\", \"launches\": [{\"kernel\": \"k\"}]}");
    common_program_t *program = common_program_from_json (json, "cuda", err, sizeof err);
    ck_assert_msg (program != NULL, "%s", err);
    ck_assert_str_eq (program->lang, "cuda");
    common_program_destroy (&program);
    ck_assert_ptr_null (program);
    program = common_program_from_json (json, "tpu", err, sizeof err);
    ck_assert_ptr_null (program);
    ck_assert_msg (strstr (err, "unknown backend 'tpu'"), "got '%s'", err);
    program = common_program_from_json (json, NULL, err, sizeof err);
    ck_assert_ptr_null (program);
    json_object_set_new (json, "lang", json_string ("ptx"));
    program = common_program_from_json (json, "cuda", err, sizeof err);
    ck_assert_msg (program != NULL, "%s", err);
    ck_assert_str_eq (program->lang, "ptx");
    common_program_destroy (&program);
    json_object_set_new (json, "lang", json_string ("c"));
    program = common_program_from_json (json, "cuda", err, sizeof err);
    ck_assert_ptr_null (program);
    ck_assert_msg (strstr (err, "program.lang: 'c' is not a language of backend cuda"), "got '%s'", err);
    //  A NUL inside the source is refused, not silently cut.
    json_object_set_new (json, "source", json_stringn ("ab\0cd", 5));
    json_object_del (json, "lang");
    program = common_program_from_json (json, "cuda", err, sizeof err);
    ck_assert_ptr_null (program);
    ck_assert_msg (strstr (err, "program.source: contains a NUL byte"), "got '%s'", err);
    json_decref (json);

    //  common_program_check against a task.
    json = s_json (s_task_text);
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_ptr_nonnull (task);
    json_decref (json);
    json = s_json ("{\"source\": \"s\", \"launches\": [{\"kernel\": \"k\", \"grid\": [\"cdiv(M, 8)\"]},"
                   " {\"kernel\": \"k2\", \"args\": [\"y\", \"nope\"]}]}");
    program = common_program_from_json (json, task->backend, err, sizeof err);
    ck_assert_ptr_nonnull (program);
    ck_assert_int_eq (common_program_check (task, program, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "program.launches[1].args[1]: 'nope' is not an arg"), "got '%s'", err);
    common_program_destroy (&program);
    json_decref (json);
    json = s_json ("{\"source\": \"s\", \"launches\": [{\"kernel\": \"k\", \"block\": [\"Q\"]}]}");
    program = common_program_from_json (json, task->backend, err, sizeof err);
    ck_assert_ptr_nonnull (program);
    ck_assert_int_eq (common_program_check (task, program, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "program.launches[0].block[0]: unknown name 'Q'"), "got '%s'", err);
    common_program_destroy (&program);
    json_decref (json);

    common_expr_var_t vars [TASK_MAX_SIZE_VARS];
    ck_assert_uint_eq (common_task_size_vars (task, 1, vars, TASK_MAX_SIZE_VARS), 2);
    ck_assert_str_eq (vars [0].name, "M");
    ck_assert_int_eq (vars [0].value, 3);
    ck_assert_uint_eq (common_task_size_vars (task, 1, vars, 1), 1);
    ck_assert_uint_eq (common_task_size_vars (task, 9, vars, TASK_MAX_SIZE_VARS), 0);
    common_task_destroy (&task);
}
END_TEST

START_TEST (test_baseline_and_cuda_task)
{
    json_t *json = s_json (s_task_text);
    json_object_set_new (json, "backend", json_string ("cuda"));
    json_object_set_new (json, "baseline", s_json (
        "{\"source\": \"b\", \"lang\": \"ptx\", \"workspace\": 256, \"options\": [\"-arch=sm_90\"],"
        " \"launches\": [{\"kernel\": \"b1\", \"grid\": [\"M\"], \"block\": [256]},"
        "              {\"kernel\": \"b2\", \"args\": [\"workspace\", \"y\"]}]}"));
    char err [256] = "";
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "%s", err);
    ck_assert_str_eq (task->reference.lang, "cuda");
    ck_assert_ptr_nonnull (task->baseline);
    ck_assert_str_eq (task->baseline->lang, "ptx");
    ck_assert_str_eq (task->baseline->workspace, "256");
    ck_assert_uint_eq (task->baseline->nlaunches, 2);
    common_layout_t layout;
    ck_assert_int_eq (common_task_layout (task, task->baseline, 0, 0, &layout, err, sizeof err), 0);
    ck_assert_int_eq (layout.launches [0].grid [0], 512);
    ck_assert_int_eq (layout.launches [0].block [0], 256);
    ck_assert_int_eq (layout.launches [0].block [1], 1);
    ck_assert_uint_eq (layout.launches [0].nargs, 7);
    ck_assert_int_eq (layout.launches [1].args [0], -1);
    ck_assert_int_eq (layout.launches [1].args [1], 2);
    ck_assert_uint_eq (layout.workspace_bytes, 256);
    common_task_destroy (&task);
    json_decref (json);
}
END_TEST

START_TEST (test_json_load_file)
{
    char path [] = "/tmp/kgym_test_task_XXXXXX";
    int fd = mkstemp (path);
    ck_assert_int_ge (fd, 0);
    const char *text = "{\n  \"a\": 1,\n  \"b\": [1, 2,]\n}\n";
    ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    char err [256] = "";
    json_t *json = common_json_load_file (path, 1 << 20, err, sizeof err);
    ck_assert_ptr_null (json);
    //  The error names the file, line and column.
    char want [128];
    snprintf (want, sizeof want, "%s:3:", path);
    ck_assert_msg (strstr (err, want), "expected '%s' in '%s'", want, err);

    json = common_json_load_file (path, 10, err, sizeof err);
    ck_assert_ptr_null (json);
    ck_assert_msg (strstr (err, "over the 10-byte limit"), "got '%s'", err);

    FILE *file = fopen (path, "w");
    fputs ("{\"a\": 1, \"a\": 2}", file);
    fclose (file);
    json = common_json_load_file (path, 1 << 20, err, sizeof err);
    ck_assert_ptr_null (json);          //  duplicate keys are ambiguous: refused

    file = fopen (path, "w");
    fputs ("{\"a\": [1, 2]}", file);
    fclose (file);
    json = common_json_load_file (path, 1 << 20, err, sizeof err);
    ck_assert_msg (json != NULL, "%s", err);
    ck_assert_int_eq (json_array_size (json_object_get (json, "a")), 2);
    json_decref (json);
    unlink (path);

    json = common_json_load_file (path, 1 << 20, err, sizeof err);
    ck_assert_ptr_null (json);
    ck_assert_msg (strstr (err, "No such file"), "got '%s'", err);
    json = common_json_load_file ("/tmp", 1 << 20, err, sizeof err);
    ck_assert_ptr_null (json);
    ck_assert_msg (strstr (err, "not a regular file"), "got '%s'", err);
}
END_TEST

//  Without a catalog (a client that only sends jobs) any well-formed backend
//  and language pass; a missing lang stays unset for the worker to fill.
START_TEST (test_no_catalog_is_lenient)
{
    common_backend_install (NULL);
    char err [512] = "";
    json_t *json = json_loads ("{\"name\": \"t\", \"backend\": \"tpu\","
        " \"args\": [{\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [4]}],"
        " \"sizes\": [{}], \"reference\": {\"source\": \"x\", \"lang\": \"jax\","
        " \"launches\": [{\"kernel\": \"k\"}]}}", 0, NULL);
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "%s", err);
    ck_assert_str_eq (task->backend, "tpu");
    ck_assert_str_eq (task->reference.lang, "jax");
    common_task_destroy (&task);
    json_object_del (json_object_get (json, "reference"), "lang");
    task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "%s", err);
    ck_assert_ptr_null (task->reference.lang);
    common_task_destroy (&task);
    json_decref (json);
    s_install_catalog ();
}
END_TEST

//  The targets and languages of the catalog, as the messages list them.
START_TEST (test_catalog_lists)
{
    char buf [128];
    ck_assert_str_eq (common_backend_list (NULL, false, buf, sizeof buf), "cpu, cuda");
    ck_assert_str_eq (common_backend_list ("cuda", true, buf, sizeof buf), "cuda, ptx, python");
    ck_assert_str_eq (common_backend_list (NULL, true, buf, sizeof buf), "c, cuda, ptx, python");
    ck_assert_str_eq (common_backend_list ("cpu", true, buf, sizeof buf), "c, python");
    ck_assert (common_backend_modules ("cuda", "python"));
    ck_assert (!common_backend_modules ("cuda", "cuda"));
    ck_assert_str_eq (common_backend_default_lang ("cpu"), "c");
    ck_assert_ptr_null (common_backend_default_lang ("tpu"));
    ck_assert_ptr_null (common_backend_find ("cpu", "cuda"));
    ck_assert_str_eq (common_backend_find ("cuda", "ptx")->name, "cuda");
}
END_TEST

//  A module task (docs/pytorch-tasks.md): no args or launches; sizes are the
//  module's constants; the "python" object; KernelBench's tolerance.
START_TEST (test_module_task)
{
    char err [512] = "";
    json_t *json = json_loads ("{\"task\": {\"name\": \"19_ReLU\", \"backend\": \"cuda\","
        " \"reference\": {\"lang\": \"python\", \"source\": \"class Model: pass\"},"
        " \"sizes\": [{}, {}], \"python\": {\"dtype\": \"f16\", \"kernel\": \"triton\"}},"
        " \"candidate\": {\"lang\": \"python\", \"source\": \"class ModelNew: pass\"}}", 0, NULL);
    common_job_t *job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "%s", err);
    const common_task_t *task = job->task;
    ck_assert (task->is_module);
    ck_assert_uint_eq (task->nargs, 0);
    ck_assert_uint_eq (task->nsizes, 2);
    ck_assert (task->atol == 1e-2 && task->rtol == 1e-2);
    ck_assert_int_eq (task->module.dtype, DTYPE_F16);
    ck_assert_str_eq (task->module.entry, "Model");
    ck_assert_str_eq (task->module.candidate_entry, "ModelNew");
    ck_assert_str_eq (task->module.kernel, "triton");
    ck_assert_str_eq (task->module.baseline, "eager");
    ck_assert (task->module.library_share_max == 0.5);
    ck_assert_uint_eq (job->candidate->nlaunches, 0);
    common_job_destroy (&job);

    //  No sizes: the module as written; a function entry names its candidate.
    json_t *t = json_object_get (json, "task");
    json_object_del (t, "sizes");
    json_object_set_new (t, "python", json_pack ("{s:s}", "entry", "rmsnorm"));
    job = common_job_from_json (json, err, sizeof err);
    ck_assert_msg (job != NULL, "%s", err);
    ck_assert_uint_eq (job->task->nsizes, 1);
    ck_assert_str_eq (job->task->module.candidate_entry, "rmsnorm");
    common_job_destroy (&job);

    struct { const char *where, *key, *value, *expect; } bad [] = {
        { "task", "args", "[]", "has no 'args'" },
        { "task.reference", "launches", "[{\"kernel\": \"k\"}]", "is a module" },
        { "task.python", "kernel", "\"jax\"", "not one of triton" },
        { "task.python", "dtype", "\"i32\"", "not a floating dtype" },
        { "task.python", "library_share_max", "2", "[0, 1]" },
        { "task.python", "entry", "\"a b\"", "identifier" },
        { "candidate", "lang", "\"cuda\"", "so must this be" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        json_t *copy = json_deep_copy (json);
        json_t *where = copy;
        if (strcmp (bad [i].where, "task") == 0)
            where = json_object_get (copy, "task");
        else if (strcmp (bad [i].where, "task.reference") == 0)
            where = json_object_get (json_object_get (copy, "task"), "reference");
        else if (strcmp (bad [i].where, "task.python") == 0)
            where = json_object_get (json_object_get (copy, "task"), "python");
        else
            where = json_object_get (copy, "candidate");
        json_object_set_new (where, bad [i].key, json_loads (bad [i].value, JSON_DECODE_ANY, NULL));
        if (strcmp (bad [i].key, "lang") == 0)
            json_object_set_new (where, "launches", json_loads ("[{\"kernel\": \"k\"}]", 0, NULL));
        common_job_t *j = common_job_from_json (copy, err, sizeof err);
        ck_assert_msg (j == NULL, "case %zu parsed", i);
        ck_assert_msg (strstr (err, bad [i].expect), "case %zu: '%s' lacks '%s'", i, err, bad [i].expect);
        json_decref (copy);
    }
    json_decref (json);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_task");
    TCase *tc = tcase_create ("core");
    tcase_add_checked_fixture (tc, s_install_catalog, NULL);
    tcase_add_test (tc, test_no_catalog_is_lenient);
    tcase_add_test (tc, test_catalog_lists);
    tcase_add_test (tc, test_module_task);
    tcase_add_test (tc, test_example_task);
    tcase_add_test (tc, test_example_job);
    tcase_add_test (tc, test_eval_reward_values);
    tcase_add_test (tc, test_annotations_and_null);
    tcase_add_test (tc, test_rejects_task);
    tcase_add_test (tc, test_rejects_sizes);
    tcase_add_test (tc, test_rejects_args);
    tcase_add_test (tc, test_rejects_candidate);
    tcase_add_test (tc, test_rejects_eval_reward);
    tcase_add_test (tc, test_layout);
    tcase_add_test (tc, test_layout_rejects);
    tcase_add_test (tc, test_absurd_sizes_rejected);
    tcase_add_test (tc, test_program_standalone);
    tcase_add_test (tc, test_baseline_and_cuda_task);
    tcase_add_test (tc, test_json_load_file);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
