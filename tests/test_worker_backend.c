/*  test_worker_backend - the backend seam, proven with a backend kgym does
    not ship.

    The echo backend (tests/echo) is registered only by the registry line
    `#ifdef KGYM_TEST_BACKENDS ... &echo_backend` (this test links the
    registry built with it); nothing else names it. Through that one line:
    the registry lists it, the task format accepts its target and language
    and rejects others in the catalog's words, the evaluator grades its jobs
    with the grading core (tolerance, mismatches, timing statistics,
    speedup, blame), and a broker, a worker serving target "echo" and the
    client library grade its jobs end to end over real sockets.
*/
#include "testutil.h"
#include "echo_backend.h"
#include "worker_backend.h"
#include "worker_eval.h"
#include "worker_registry.h"
#include "worker_server.h"
#include "client_kgym.h"
#include "common_backend.h"
#include "common_log.h"
#include "proto_msg.h"
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 20000

static char s_dir [256];
static worker_eval_t *s_eval;

//  An echo task: y = [1, 2, 3, 4] repeated over N elements, each of the
//  reference's timed runs 40 us. extra (may be NULL) is merged in.
static json_t *
s_task (const char *extra)
{
    json_error_t error;
    json_t *task = json_loads (
        "{\"name\": \"echo_y\", \"backend\": \"echo\","
        " \"args\": [{\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
        "            {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
        "            {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
        " \"sizes\": [{\"N\": 8}, {\"N\": 3}],"
        " \"tolerance\": {\"atol\": 1e-3, \"rtol\": 0},"
        " \"reference\": {\"lang\": \"echo\", \"launches\": [{\"kernel\": \"echo\"}],"
        "                \"source\": \"{\\\"outputs\\\": {\\\"y\\\": [1, 2, 3, 4]}, \\\"time_us\\\": 40}\"}}",
        0, &error);
    ck_assert_msg (task != NULL, "task: %s", error.text);
    if (extra) {
        json_t *more = json_loads (extra, 0, &error);
        ck_assert_msg (more != NULL, "extra: %s", error.text);
        json_object_update (task, more);
        json_decref (more);
    }
    return task;
}

//  An echo program with source.
static json_t *
s_program (const char *source)
{
    return json_pack ("{s:s, s:s, s:[{s:s}]}", "lang", "echo", "source", source, "launches",
                      "kernel", "echo");
}

//  A job: task, a candidate of source, eval settings.
static json_t *
s_job (json_t *task, const char *source, double timeout)
{
    return json_pack ("{s:o, s:o, s:{s:i, s:i, s:f}}", "task", task, "candidate", s_program (source),
                      "eval", "seed", 7, "timed", 10, "timeout", timeout);
}

//  Grade one job with the evaluator.
static json_t *
s_grade (json_t *job)
{
    json_t *result = worker_eval_run (s_eval, job);
    json_decref (job);
    ck_assert_ptr_nonnull (result);
    return result;
}

static double
s_number (json_t *object, const char *path)
{
    //  "a.b.c": nested keys.
    char copy [128];
    snprintf (copy, sizeof copy, "%s", path);
    json_t *at = object;
    for (char *key = strtok (copy, "."); key && at; key = strtok (NULL, "."))
        at = json_object_get (at, key);
    ck_assert_msg (json_is_number (at), "%s is not a number", path);
    return json_number_value (at);
}

static const char *
s_text (json_t *result, const char *key)
{
    const char *text = json_string_value (json_object_get (result, key));
    return text? text: "";
}

static void
s_setup (void)
{
    testutil_dir_make (s_dir, sizeof s_dir, "backend");
    char path [300];
    snprintf (path, sizeof path, "%s/modules.sqlite", s_dir);
    s_eval = testutil_eval_new ("echo", path, 0);
}

static void
s_teardown (void)
{
    worker_eval_destroy (&s_eval);
    testutil_dir_remove (s_dir);
}

//  --------------------------------------------------------------------------
//  The registry and the task format

//  Slots' CPUs: every CPU this process may use, each once, for as many
//  slots as there are CPUs (every other one first); none for no slot.
START_TEST (test_slot_cpus_spread)
{
    cpu_set_t mine, seen;
    ck_assert_int_eq (sched_getaffinity (0, sizeof mine, &mine), 0);
    CPU_ZERO (&seen);
    int count = CPU_COUNT (&mine);
    for (int slot = 0; slot < count; slot++) {
        int cpu = worker_backend_slot_cpu (slot);
        ck_assert_int_ge (cpu, 0);
        ck_assert_msg (CPU_ISSET (cpu, &mine), "slot %d: CPU %d is not this process's", slot, cpu);
        ck_assert_msg (!CPU_ISSET (cpu, &seen), "slot %d: CPU %d twice", slot, cpu);
        CPU_SET (cpu, &seen);
    }
    ck_assert_int_eq (worker_backend_slot_cpu (count), worker_backend_slot_cpu (0));
    ck_assert_int_eq (worker_backend_slot_cpu (-1), -1);
}
END_TEST

START_TEST (test_registry_lists_the_echo_backend)
{
    const worker_backend_t *const *all = worker_registry_all ();
    bool listed = false;
    for (size_t i = 0; all [i]; i++)
        listed |= all [i] == &echo_backend;
    ck_assert_msg (listed, "the registry does not list the echo backend");
    ck_assert_ptr_eq (worker_registry_named ("echo"), &echo_backend);
    ck_assert_ptr_eq (worker_registry_find ("echo", "echo"), &echo_backend);
    ck_assert_ptr_eq (worker_registry_find ("echo", NULL), &echo_backend);
    ck_assert_ptr_null (worker_registry_find ("echo", "c"));
    ck_assert (worker_registry_serves ("echo"));
    //  The shipped backends are still there, beside it.
    ck_assert_ptr_nonnull (worker_registry_named ("cpu"));
    char targets [128];
    worker_registry_targets (targets, sizeof targets);
    ck_assert_msg (strstr (targets, "cpu") && strstr (targets, "echo"), "targets: %s", targets);
    //  The task format's catalog is the registry's.
    ck_assert_ptr_eq (common_backend_find ("echo", "echo"), &echo_backend.info);
    ck_assert_str_eq (common_backend_default_lang ("echo"), "echo");
}
END_TEST

START_TEST (test_task_format_accepts_echo_and_rejects_other_languages)
{
    worker_registry_all ();
    char err [512] = "";
    json_t *json = s_task (NULL);
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "an echo task: %s", err);
    ck_assert_str_eq (task->backend, "echo");
    ck_assert_str_eq (task->reference.lang, "echo");
    common_task_destroy (&task);
    //  A C reference on the echo target: the catalog's words.
    json_object_set_new (json_object_get (json, "reference"), "lang", json_string ("c"));
    ck_assert_ptr_null (common_task_from_json (json, err, sizeof err));
    ck_assert_msg (strstr (err, "'c' is not a language of backend echo (echo)"), "err: %s", err);
    json_decref (json);
    //  An echo program on the cpu target, likewise.
    json_t *program = s_program ("{}");
    common_program_t *parsed = common_program_from_json (program, "cpu", err, sizeof err);
    ck_assert_ptr_null (parsed);
    ck_assert_msg (strstr (err, "'echo' is not a language of backend cpu"), "err: %s", err);
    json_decref (program);
    //  An unknown target lists echo among those that exist.
    json = s_task ("{\"backend\": \"nope\"}");
    ck_assert_ptr_null (common_task_from_json (json, err, sizeof err));
    ck_assert_msg (strstr (err, "'nope' is not a backend (") && strstr (err, "echo"), "err: %s", err);
    json_decref (json);
}
END_TEST

//  --------------------------------------------------------------------------
//  The evaluator grades echo jobs through the grading core

START_TEST (test_echo_ok_with_speedup_and_reward)
{
    json_t *result = s_grade (s_job (s_task (NULL), "{\"outputs\": {\"y\": [1, 2, 3, 4]}, \"time_us\": 10}",
                                     10));
    testutil_expect_status (result, "ok", NULL);
    ck_assert_str_eq (s_text (result, "backend"), "echo");
    ck_assert_str_eq (s_text (result, "device"), "echo: no device (a test backend)");
    ck_assert_str_eq (s_text (result, "worker"), "test");
    ck_assert_double_eq_tol (s_number (result, "speedup"), 4.0, 1e-12);
    //  The default reward: min(speedup, clip 2).
    ck_assert_double_eq_tol (s_number (result, "reward"), 2.0, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.median_us"), 10, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.baseline.median_us"), 40, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.n"), 10, 1e-12);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (result, "timings"),
                                                           "baseline_kind")), "reference");
    ck_assert_int_eq (json_array_size (json_object_get (result, "mismatches")), 0);
    ck_assert_int_eq ((int) s_number (result, "seed"), 7);
    ck_assert (strlen (s_text (result, "feedback")) > 0);
    json_decref (result);
}
END_TEST

START_TEST (test_echo_baseline_times_against_the_baseline)
{
    json_t *task = s_task ("{\"baseline\": {\"lang\": \"echo\", \"launches\": [{\"kernel\": \"echo\"}],"
                           " \"source\": \"{\\\"outputs\\\": {\\\"y\\\": 0}, \\\"time_us\\\": 15}\"}}");
    json_t *result = s_grade (s_job (task, "{\"outputs\": {\"y\": [1, 2, 3, 4]}, \"time_us\": 10}", 10));
    testutil_expect_status (result, "ok", NULL);
    ck_assert_double_eq_tol (s_number (result, "speedup"), 1.5, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "reward"), 1.5, 1e-12);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (result, "timings"),
                                                           "baseline_kind")), "baseline");
    json_decref (result);
}
END_TEST

START_TEST (test_echo_incorrect_with_mismatches)
{
    json_t *result = s_grade (s_job (s_task (NULL), "{\"outputs\": {\"y\": [1, 2, 3, 5]}}", 10));
    testutil_expect_status (result, "incorrect", NULL);
    ck_assert_msg (strstr (s_text (result, "message"), "output 'y' wrong in 2 of 8 elements (size 0"),
                   "message: %s", s_text (result, "message"));
    ck_assert_double_eq_tol (s_number (result, "reward"), -0.5, 1e-12);
    ck_assert (json_is_null (json_object_get (result, "speedup")));
    ck_assert_int_eq ((int) s_number (result, "bad_elements"), 2);
    json_t *mismatches = json_object_get (result, "mismatches");
    ck_assert_int_eq (json_array_size (mismatches), 2);
    uint64_t indices [2] = { 3, 7 };
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_array_get (mismatches, i);
        ck_assert_str_eq (s_text (m, "arg"), "y");
        ck_assert_int_eq ((int) s_number (m, "size"), 0);
        ck_assert_int_eq ((uint64_t) s_number (m, "index"), indices [i]);
        ck_assert_double_eq_tol (s_number (m, "expected"), 4, 1e-12);
        ck_assert_double_eq_tol (s_number (m, "got"), 5, 1e-12);
    }
    ck_assert_double_eq_tol (s_number (result, "max_abs_err"), 1, 1e-12);
    ck_assert (json_is_null (json_object_get (result, "timings")));
    json_decref (result);
}
END_TEST

START_TEST (test_echo_tolerance_decides)
{
    //  Within atol 1e-3: ok, and the error is reported.
    const char *close = "{\"outputs\": {\"y\": [1, 2, 3, 4.0005]}, \"time_us\": 40}";
    json_t *result = s_grade (s_job (s_task (NULL), close, 10));
    testutil_expect_status (result, "ok", NULL);
    ck_assert_double_eq_tol (s_number (result, "max_abs_err"), 0.0005, 1e-6);
    ck_assert_double_eq_tol (s_number (result, "speedup"), 1.0, 1e-12);
    json_decref (result);
    //  Bit for bit asked: the same candidate is wrong.
    result = s_grade (s_job (s_task ("{\"tolerance\": {\"exact\": true}}"), close, 10));
    testutil_expect_status (result, "incorrect", NULL);
    json_decref (result);
    //  Beyond the tolerance.
    result = s_grade (s_job (s_task (NULL), "{\"outputs\": {\"y\": [1, 2, 3, 4.01]}}", 10));
    testutil_expect_status (result, "incorrect", NULL);
    json_decref (result);
}
END_TEST

START_TEST (test_echo_timing_statistics)
{
    //  Six timed runs; one far off: counted as an outlier, the median holds.
    json_t *job = json_pack ("{s:o, s:o, s:{s:i, s:i}}", "task", s_task (NULL),
                             "candidate", s_program ("{\"outputs\": {\"y\": [1, 2, 3, 4]},"
                                                     " \"time_us\": [10, 11, 12, 10, 11, 100]}"),
                             "eval", "seed", 1, "timed", 6);
    json_t *result = s_grade (job);
    testutil_expect_status (result, "ok", NULL);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.n"), 6, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.median_us"), 11, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.min_us"), 10, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.max_us"), 100, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.mean_us"), 154.0 / 6, 1e-9);
    ck_assert_double_eq_tol (s_number (result, "timings.candidate.outliers"), 1, 1e-12);
    ck_assert_double_eq_tol (s_number (result, "speedup"), 40.0 / 11, 1e-12);
    json_t *ci = json_object_get (json_object_get (result, "timings"), "speedup_ci");
    ck_assert_int_eq (json_array_size (ci), 2);
    ck_assert (json_number_value (json_array_get (ci, 0)) <= 40.0 / 11);
    ck_assert (json_number_value (json_array_get (ci, 1)) >= 40.0 / 11);
    json_decref (result);
    //  check_only: correctness, no timing.
    job = json_pack ("{s:o, s:o, s:{s:b}}", "task", s_task (NULL),
                     "candidate", s_program ("{\"outputs\": {\"y\": [1, 2, 3, 4]}}"), "eval", "check_only", 1);
    result = s_grade (job);
    testutil_expect_status (result, "ok", NULL);
    ck_assert (json_is_null (json_object_get (result, "timings")));
    ck_assert (json_is_null (json_object_get (result, "speedup")));
    json_decref (result);
}
END_TEST

START_TEST (test_echo_compile_verdicts)
{
    //  A candidate that does not parse: compile_error, the log says where.
    json_t *result = s_grade (s_job (s_task (NULL), "{\"outputs\": ", 10));
    testutil_expect_status (result, "compile_error", NULL);
    ck_assert_msg (strncmp (s_text (result, "message"), "compile error: echo:1:", 22) == 0,
                   "message: %s", s_text (result, "message"));
    ck_assert_msg (strstr (s_text (result, "compile_log"), "error:"), "log: %s",
                   s_text (result, "compile_log"));
    ck_assert_double_eq_tol (s_number (result, "reward"), -1.0, 1e-12);
    json_decref (result);
    //  Parses, but names no output of the task.
    result = s_grade (s_job (s_task (NULL), "{\"outputs\": {\"z\": 1}}", 10));
    testutil_expect_status (result, "compile_error", NULL);
    ck_assert_msg (strstr (s_text (result, "message"), "'z' is not an output of task echo_y"),
                   "message: %s", s_text (result, "message"));
    json_decref (result);
    //  The task's own reference does not parse: the job is invalid, not the candidate's fault.
    json_t *task = s_task (NULL);
    json_object_set_new (json_object_get (task, "reference"), "source", json_string ("[1"));
    result = s_grade (s_job (task, "{\"outputs\": {\"y\": 1}}", 10));
    testutil_expect_status (result, "invalid", NULL);
    ck_assert_msg (strstr (s_text (result, "message"), "the task's reference does not compile: echo:"),
                   "message: %s", s_text (result, "message"));
    ck_assert (json_is_null (json_object_get (result, "reward")));
    json_decref (result);
}
END_TEST

START_TEST (test_echo_blame_follows_whose_run_failed)
{
    struct {
        const char *candidate;      //  the candidate's source
        const char *reference;      //  the reference's, NULL: the task's
        const char *status;         //  expected
    } cases [] = {
        { "{\"outputs\": {\"y\": 1}, \"fail\": \"crash\"}", NULL, "runtime_error" },
        { "{\"outputs\": {\"y\": 1}, \"fail\": \"refused\"}", NULL, "runtime_error" },
        { "{\"outputs\": {\"y\": 1}, \"fail\": \"misbehaved\"}", NULL, "runtime_error" },
        { "{\"outputs\": {\"y\": 1}, \"fail\": \"timeout\"}", NULL, "timeout" },
        { "{\"outputs\": {\"y\": 1}, \"fail\": \"ours\"}", NULL, "internal_error" },
        //  Ten timed runs of 2 s each: past the job's 10 s.
        { "{\"outputs\": {\"y\": [1, 2, 3, 4]}, \"time_us\": 2e6}", NULL, "timeout" },
        { "{\"outputs\": {\"y\": 1}}", "{\"outputs\": {\"y\": 1}, \"fail\": \"crash\"}", "invalid" },
        { "{\"outputs\": {\"y\": 1}}", "{\"outputs\": {\"y\": 1}, \"fail\": \"timeout\"}", "invalid" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        json_t *task = s_task (NULL);
        if (cases [i].reference)
            json_object_set_new (json_object_get (task, "reference"), "source",
                                 json_string (cases [i].reference));
        json_t *result = s_grade (s_job (task, cases [i].candidate, 10));
        const char *status = s_text (result, "status");
        ck_assert_msg (strcmp (status, cases [i].status) == 0, "case %zu (%s): expected %s, got %s: %s",
                       i, cases [i].candidate, cases [i].status, status, s_text (result, "message"));
        json_decref (result);
    }
}
END_TEST

START_TEST (test_echo_job_with_a_foreign_language_is_invalid)
{
    //  A C candidate for an echo task: refused by the task format, in its words.
    json_t *job = json_pack ("{s:o, s:{s:s, s:s, s:[{s:s}]}}", "task", s_task (NULL),
                             "candidate", "lang", "c", "source", "void k(void) {}", "launches",
                             "kernel", "k");
    json_t *result = s_grade (job);
    testutil_expect_status (result, "invalid", NULL);
    ck_assert_msg (strstr (s_text (result, "message"), "'c' is not a language of backend echo (echo)"),
                   "message: %s", s_text (result, "message"));
    json_decref (result);
}
END_TEST

START_TEST (test_echo_job_memory_cap_is_the_evaluators)
{
    //  The evaluator's max_job_bytes reaches a backend it never names
    //  (worker_backend_job_bytes): size 0 holds 2 x 8 f32 outputs, 64 bytes.
    char path [300];
    snprintf (path, sizeof path, "%s/capped.sqlite", s_dir);
    worker_eval_t *capped = testutil_eval_new ("echo", path, 48);
    json_t *job = s_job (s_task (NULL), "{\"outputs\": {\"y\": [1, 2, 3, 4]}}", 10);
    json_t *result = worker_eval_run (capped, job);
    json_decref (job);
    testutil_expect_status (result, "invalid", NULL);
    ck_assert_msg (strstr (s_text (result, "message"), "size 0 needs 5.96e-08 GiB of outputs; a job may "
                           "hold 4.47e-08 GiB here"), "message: %s", s_text (result, "message"));
    json_decref (result);
    //  The same job fits the default.
    result = s_grade (s_job (s_task (NULL), "{\"outputs\": {\"y\": [1, 2, 3, 4]}}", 10));
    testutil_expect_status (result, "ok", NULL);
    json_decref (result);
    worker_eval_destroy (&capped);
}
END_TEST

START_TEST (test_echo_compile_op)
{
    //  kgym compile's path: the backend's compile op, reported by worker_compile_set.
    char err [256];
    json_t *json = s_program ("{\"outputs\": {\"y\": 1}}");
    common_program_t *program = common_program_from_json (json, "echo", err, sizeof err);
    json_decref (json);
    ck_assert_msg (program != NULL, "%s", err);
    worker_compile_t result;
    ck_assert_int_eq (echo_backend.compile (NULL, program, NULL, 1.0, &result), 0);
    ck_assert_int_eq (result.status, STATUS_OK);
    worker_compile_clear (&result);
    common_program_destroy (&program);
    json = s_program ("{\"outputs\": {\"y\": \"one\"}}");
    program = common_program_from_json (json, "echo", err, sizeof err);
    json_decref (json);
    ck_assert_int_eq (echo_backend.compile (NULL, program, NULL, 1.0, &result), 0);
    ck_assert_int_eq (result.status, STATUS_COMPILE_ERROR);
    ck_assert_msg (result.log && strstr (result.log, "output 'y' must be a number"), "log: %s", result.log);
    worker_compile_clear (&result);
    common_program_destroy (&program);
}
END_TEST

//  --------------------------------------------------------------------------
//  End to end: broker, a worker serving "echo", the client library

//  The next RESULT (ACCEPTED and the 503 notice of a job that overtook the
//  worker's READY skipped); fails on silence or an error.
static void
s_next_result (client_kgym_t *client, client_event_t *event)
{
    while (true) {
        ck_assert_msg (client_kgym_recv (client, WAIT_MS, event) == 0, "no reply within %d ms", WAIT_MS);
        if (event->type == CLIENT_EVENT_RESULT)
            return;
        ck_assert_msg (event->type == CLIENT_EVENT_ACCEPTED || event->type == CLIENT_EVENT_NOTICE
                       || event->code == PROTO_ERR_NO_WORKER, "unexpected event %d: %s",
                       (int) event->type, event->reason);
        client_event_clear (event);
    }
}

START_TEST (test_echo_graded_through_broker_worker_and_client)
{
    common_log_set_level (LOG_LEVEL_WARN);
    broker_config_t bcfg;
    broker_config_default (&bcfg);
    bcfg.heartbeat_ms = 200;
    testutil_broker_t broker;
    testutil_broker_start (&broker, &bcfg);
    char cache [300];
    snprintf (cache, sizeof cache, "%s/worker.sqlite", s_dir);
    worker_config_t wcfg;
    worker_config_default (&wcfg);
    wcfg.broker_endpoint = broker.workers;
    wcfg.backend = "echo";
    wcfg.name = "echo-worker";
    wcfg.cache_path = cache;
    wcfg.heartbeat_ms = 200;
    char err [256] = "";
    worker_server_t *server = worker_server_new (&wcfg, err, sizeof err);
    ck_assert_msg (server != NULL, "worker: %s", err);
    ck_assert_str_eq (worker_server_device (server), "echo: no device (a test backend)");
    zactor_t *worker = zactor_new (worker_server_actor, server);
    ck_assert_ptr_nonnull (worker);
    client_kgym_t *client = client_kgym_new (broker.clients);
    ck_assert_ptr_nonnull (client);

    const char *sources [] = {
        "{\"outputs\": {\"y\": [1, 2, 3, 4]}, \"time_us\": 20}",
        "{\"outputs\": {\"y\": [1, 2, 3, 5]}, \"time_us\": 20}",
    };
    for (size_t i = 0; i < 2; i++) {
        json_t *job = s_job (s_task (NULL), sources [i], 10);
        ck_assert_msg (client_kgym_submit (client, i + 1, job, err, sizeof err) == 0, "submit: %s", err);
        json_decref (job);
    }
    bool seen [2] = { false, false };
    for (size_t n = 0; n < 2; n++) {
        client_event_t event;
        s_next_result (client, &event);
        ck_assert (event.ref == 1 || event.ref == 2);
        ck_assert_msg (!seen [event.ref - 1], "two results for ref %" PRIu64, event.ref);
        seen [event.ref - 1] = true;
        ck_assert_str_eq (event.worker, "echo-worker");
        ck_assert_str_eq (s_text (event.result, "backend"), "echo");
        if (event.ref == 1) {
            testutil_expect_status (event.result, "ok", NULL);
            ck_assert_double_eq_tol (s_number (event.result, "speedup"), 2.0, 1e-12);
            ck_assert_double_eq_tol (s_number (event.result, "reward"), 2.0, 1e-12);
        }
        else {
            testutil_expect_status (event.result, "incorrect", NULL);
            ck_assert_int_eq (json_array_size (json_object_get (event.result, "mismatches")), 2);
            ck_assert_double_eq_tol (s_number (event.result, "reward"), -0.5, 1e-12);
        }
        client_event_clear (&event);
    }
    client_kgym_destroy (&client);
    zactor_destroy (&worker);
    testutil_broker_stop (&broker);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_backend");
    TCase *seam = tcase_create ("seam");
    tcase_add_checked_fixture (seam, s_setup, s_teardown);
    tcase_set_timeout (seam, 120);
    tcase_add_test (seam, test_registry_lists_the_echo_backend);
    tcase_add_test (seam, test_slot_cpus_spread);
    tcase_add_test (seam, test_task_format_accepts_echo_and_rejects_other_languages);
    tcase_add_test (seam, test_echo_ok_with_speedup_and_reward);
    tcase_add_test (seam, test_echo_baseline_times_against_the_baseline);
    tcase_add_test (seam, test_echo_incorrect_with_mismatches);
    tcase_add_test (seam, test_echo_tolerance_decides);
    tcase_add_test (seam, test_echo_timing_statistics);
    tcase_add_test (seam, test_echo_compile_verdicts);
    tcase_add_test (seam, test_echo_blame_follows_whose_run_failed);
    tcase_add_test (seam, test_echo_job_with_a_foreign_language_is_invalid);
    tcase_add_test (seam, test_echo_job_memory_cap_is_the_evaluators);
    tcase_add_test (seam, test_echo_compile_op);
    tcase_add_test (seam, test_echo_graded_through_broker_worker_and_client);
    suite_add_tcase (suite, seam);
    return testutil_run_suite (suite);
}
