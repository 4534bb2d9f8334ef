/*  test_worker_eval - the evaluator end to end on the CPU backend.

    Real compiler, real sandboxed runners, real SQLite cache (in a temporary
    directory): each test grades one inline candidate against a small
    scale task and checks the verdict, the reward and the evidence.
*/
#include "testutil.h"
#include "worker_eval.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_cache_dir [] = "/tmp/kgym-test-eval-XXXXXX";
static worker_eval_t *s_eval;

static const char *s_task_json =
    "{\"name\": \"scale_f32\", \"backend\": \"cpu\","
    " \"args\": ["
    "  {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"init\": {\"dist\": \"uniform\", \"low\": -1, \"high\": 1}},"
    "  {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
    "  {\"name\": \"a\", \"kind\": \"scalar\", \"dtype\": \"f32\", \"value\": 2.5},"
    "  {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
    " \"sizes\": [{\"N\": 20000}, {\"N\": 17}, {\"N\": 1}],"
    " \"tolerance\": {\"atol\": 1e-6, \"rtol\": 1e-6},"
    " \"reference\": {\"source\": \"void scale_ref(const float *x, float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] = a * x[i]; }\","
    "                \"launches\": [{\"kernel\": \"scale_ref\"}]}}";

static void
s_setup (void)
{
    ck_assert_ptr_nonnull (mkdtemp (s_cache_dir));
    char path [256];
    snprintf (path, sizeof path, "%s/modules.sqlite", s_cache_dir);
    s_eval = testutil_eval_new ("cpu", path, 0);
}

static void
s_teardown (void)
{
    worker_eval_destroy (&s_eval);
    char command [512];
    snprintf (command, sizeof command, "rm -rf %s", s_cache_dir);
    ck_assert_int_eq (system (command), 0);
    strcpy (s_cache_dir, "/tmp/kgym-test-eval-XXXXXX");
}

//  Grade source (a C function "scale" with the task's args) with extra job keys.
static json_t *
s_grade (const char *source, const char *options_json, double timeout)
{
    json_error_t error;
    json_t *task = json_loads (s_task_json, 0, &error);
    ck_assert_msg (task != NULL, "task json: %s", error.text);
    json_t *candidate = json_pack ("{s:s, s:[{s:s}]}", "source", source, "launches", "kernel", "scale");
    if (options_json)
        json_object_set_new (candidate, "options", json_loads (options_json, 0, NULL));
    json_t *job = json_pack ("{s:o, s:o, s:{s:f, s:i, s:i}, s:s}", "task", task, "candidate", candidate,
                             "eval", "timeout", timeout, "seed", 42, "timed", 5, "tag", "t1");
    json_t *result = worker_eval_run (s_eval, job);
    json_decref (job);
    ck_assert_ptr_nonnull (result);
    return result;
}

static void
s_expect (json_t *result, const char *status)
{
    testutil_expect_status (result, status, NULL);
}

START_TEST (test_correct_candidate_is_ok_and_timed)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i < n; i++) y[i] = a * x[i]; }", "[\"-O2\"]", 10);
    s_expect (result, "ok");
    ck_assert (json_real_value (json_object_get (result, "reward")) > 0);
    ck_assert (json_real_value (json_object_get (result, "speedup")) > 0);
    ck_assert_int_eq (json_integer_value (json_object_get (result, "seed")), 42);
    ck_assert_str_eq (json_string_value (json_object_get (result, "tag")), "t1");
    json_t *timings = json_object_get (result, "timings");
    ck_assert (json_is_object (timings));
    ck_assert_int_eq (json_integer_value (json_object_get (json_object_get (timings, "candidate"), "n")), 5);
    ck_assert_str_eq (json_string_value (json_object_get (timings, "baseline_kind")), "reference");
    json_decref (result);
}
END_TEST

START_TEST (test_profile_has_every_launch)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i < n; i++) y[i] = a * x[i]; }", NULL, 10);
    s_expect (result, "ok");
    json_t *profile = json_object_get (result, "profile");
    ck_assert (json_is_object (profile));
    ck_assert_int_eq (json_integer_value (json_object_get (profile, "declared_launches")), 1);
    ck_assert_int_eq (json_integer_value (json_object_get (profile, "observed_launches")), 1);
    json_t *kernel = json_array_get (json_object_get (profile, "kernels"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (kernel, "name")), "scale");
    ck_assert_int_eq (json_integer_value (json_object_get (kernel, "launches")), 1);
    ck_assert (json_real_value (json_object_get (kernel, "total_us")) > 0);
    json_t *reference = json_object_get (profile, "reference");
    ck_assert_str_eq (json_string_value (json_object_get (json_array_get (json_object_get (reference, "kernels"), 0), "name")),
                      "scale_ref");
    ck_assert (strlen (json_string_value (json_object_get (result, "feedback"))) > 0);
    json_decref (result);
}
END_TEST

START_TEST (test_wrong_values_are_incorrect_with_mismatches)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i < n; i++) y[i] = x[i]; (void) a; }", NULL, 10);
    s_expect (result, "incorrect");
    ck_assert_double_eq (json_real_value (json_object_get (result, "reward")), -0.5);
    ck_assert (json_is_null (json_object_get (result, "speedup")));
    json_t *mismatches = json_object_get (result, "mismatches");
    ck_assert (json_array_size (mismatches) > 0);
    ck_assert_str_eq (json_string_value (json_object_get (json_array_get (mismatches, 0), "arg")), "y");
    json_decref (result);
}
END_TEST

START_TEST (test_tail_bug_is_caught_on_odd_size)
{
    //  Right for multiples of 4, drops the remainder: N=17 and N=1 expose it.
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i + 4 <= n; i += 4) for (int k = 0; k < 4; k++) y[i+k] = a * x[i+k]; }",
                              NULL, 10);
    s_expect (result, "incorrect");
    json_t *first = json_array_get (json_object_get (result, "mismatches"), 0);
    ck_assert_int_eq (json_integer_value (json_object_get (first, "size")), 1);
    ck_assert_int_eq (json_integer_value (json_object_get (first, "index")), 16);
    ck_assert_str_eq (json_string_value (json_object_get (first, "got")), "nan");
    json_decref (result);
}
END_TEST

START_TEST (test_unwritten_output_fails)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n) { (void)x; (void)y; (void)a; (void)n; }",
                              NULL, 10);
    s_expect (result, "incorrect");
    json_decref (result);
}
END_TEST

START_TEST (test_modified_input_fails)
{
    json_t *result = s_grade ("void scale(float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i < n; i++) { y[i] = a * x[i]; x[i] = 0; } }", NULL, 10);
    s_expect (result, "incorrect");
    ck_assert_msg (strstr (json_string_value (json_object_get (result, "message")), "input 'x'"),
                   "message should name the input");
    json_decref (result);
}
END_TEST

START_TEST (test_replayed_answer_fails)
{
    //  Computes once, then replays its first answer: fresh inputs per trial expose it.
    json_t *result = s_grade ("#include <string.h>\n"
                              "static float saved[20000]; static int have = 0;\n"
                              "void scale(const float *x, float *y, float a, int n)"
                              "{ if (!have) { for (int i = 0; i < n; i++) saved[i] = a * x[i]; have = 1; }"
                              "  memcpy(y, saved, sizeof(float) * (n < 20000 ? n : 20000)); }", NULL, 10);
    s_expect (result, "incorrect");
    json_decref (result);
}
END_TEST

START_TEST (test_hang_is_timeout_and_evaluator_goes_on)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n) { for (;;) { __asm__ volatile(\"\"); } }",
                              NULL, 1.0);
    s_expect (result, "timeout");
    ck_assert_double_eq (json_real_value (json_object_get (result, "reward")), -0.5);
    json_decref (result);
    result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                      "{ for (int i = 0; i < n; i++) y[i] = a * x[i]; }", NULL, 10);
    s_expect (result, "ok");
    json_decref (result);
}
END_TEST

START_TEST (test_crash_is_runtime_error)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n) { *(volatile int *) 0 = 1; }",
                              NULL, 10);
    s_expect (result, "runtime_error");
    ck_assert_msg (strstr (json_string_value (json_object_get (result, "message")), "SIGSEGV"),
                   "message should say SIGSEGV: %s", json_string_value (json_object_get (result, "message")));
    json_decref (result);
}
END_TEST

START_TEST (test_compile_error_has_log_and_lowest_reward)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n) { y[0] = ; }", NULL, 10);
    s_expect (result, "compile_error");
    ck_assert_double_eq (json_real_value (json_object_get (result, "reward")), -1.0);
    ck_assert (strlen (json_string_value (json_object_get (result, "compile_log"))) > 0);
    json_decref (result);
}
END_TEST

START_TEST (test_disallowed_option_is_invalid_without_reward)
{
    json_t *result = s_grade ("void scale(const float *x, float *y, float a, int n)"
                              "{ for (int i = 0; i < n; i++) y[i] = a * x[i]; }", "[\"-fplugin=/tmp/evil.so\"]", 10);
    s_expect (result, "invalid");
    ck_assert (json_is_null (json_object_get (result, "reward")));
    json_decref (result);
}
END_TEST

START_TEST (test_missing_kernel_symbol_fails)
{
    json_t *result = s_grade ("void other(const float *x, float *y, float a, int n) { }", NULL, 10);
    const char *status = json_string_value (json_object_get (result, "status"));
    ck_assert_msg (strcmp (status, "runtime_error") == 0 || strcmp (status, "compile_error") == 0,
                   "a missing kernel is the candidate's fault, got %s", status);
    json_decref (result);
}
END_TEST

START_TEST (test_malformed_jobs_are_invalid)
{
    const char *jobs[] = {
        "42", "{}", "{\"task\": 1, \"candidate\": {}}",
        "{\"task\": {\"name\": \"t\"}, \"candidate\": {\"source\": \"x\", \"launches\": []}}",
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs [0]; i++) {
        json_t *job = json_loads (jobs [i], JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull (job);
        json_t *result = worker_eval_run (s_eval, job);
        s_expect (result, "invalid");
        ck_assert (json_is_null (json_object_get (result, "reward")));
        ck_assert (strlen (json_string_value (json_object_get (result, "message"))) > 0);
        json_decref (result);
        json_decref (job);
    }
}
END_TEST

START_TEST (test_second_compile_is_a_cache_hit)
{
    const char *source = "void scale(const float *x, float *y, float a, int n)"
                         "{ for (int i = 0; i < n; i++) y[i] = a * x[i] + 0.0f; }";
    json_t *first = s_grade (source, NULL, 10);
    json_t *second = s_grade (source, NULL, 10);
    s_expect (second, "ok");
    ck_assert (json_is_false (json_object_get (json_object_get (first, "cache"), "candidate")));
    ck_assert (json_is_true (json_object_get (json_object_get (second, "cache"), "candidate")));
    json_decref (first);
    json_decref (second);
}
END_TEST

//  --- adaptive timing (worker_grade_stop) on the CPU ---

//  A compute-bound kernel that stays in L1: y = f(x) with a long dependent
//  chain per element (~0.1 ms), done `reps` times over; reference and
//  candidate choose their reps (the answer is the same), far enough apart
//  that a run delayed by a loaded machine cannot move the verdict.
#define S_WORK_SOURCE(name, reps) \
    "static float s_f (float v) { for (int r = 0; r < 400; r++) v = v * 0.999f + 0.001f; return v; }\n" \
    "void " name " (const float *x, float *y, int n)\n" \
    "{\n" \
    "    for (int k = 0; k < " reps "; k++) {\n" \
    "        for (int i = 0; i < n; i++) y [i] = s_f (x [i]);\n" \
    "        __asm__ volatile (\"\" ::: \"memory\");\n" \
    "    }\n" \
    "}\n"

//  A steady kernel on a shared machine: most of its time asleep (3 ms). A
//  waking sleeper is scheduled at once even on a loaded host, where a
//  computing kernel's wall time takes whatever the other processes leave.
#define S_STEADY_SOURCE(name) \
    "#include <time.h>\n" \
    "void " name " (const float *x, float *y, int n)\n" \
    "{\n" \
    "    struct timespec t = { 0, 3000000 };\n" \
    "    nanosleep (&t, 0);\n" \
    "    for (int i = 0; i < n; i++) y [i] = x [i] * 0.5f;\n" \
    "}\n"

//  Grade a candidate against a reference (both given by their sources)
//  with eval timed: 1000.
static json_t *
s_grade_work (const char *reference_source, const char *candidate_source)
{
    json_t *task = json_pack ("{s:s, s:s, s:[{s:s,s:s,s:s,s:[s],s:{s:s,s:i,s:i}}, {s:s,s:s,s:s,s:[s]},"
                              " {s:s,s:s,s:s,s:s}], s:[{s:i}], s:{s:f,s:f}, s:{s:s, s:[{s:s}]}}",
        "name", "work_f32", "backend", "cpu",
        "args",
            "name", "x", "kind", "input", "dtype", "f32", "shape", "N", "init", "dist", "uniform",
            "low", 0, "high", 1,
            "name", "y", "kind", "output", "dtype", "f32", "shape", "N",
            "name", "N", "kind", "scalar", "dtype", "i32", "value", "N",
        "sizes", "N", 64,
        "tolerance", "atol", 1e-6, "rtol", 1e-6,
        "reference", "source", reference_source, "launches", "kernel", "work_ref");
    json_t *job = json_pack ("{s:o, s:{s:s, s:[{s:s}]}, s:{s:i, s:i, s:f, s:b}}", "task", task,
                             "candidate", "source", candidate_source, "launches", "kernel", "work",
                             "eval", "timed", 1000, "trials", 1, "timeout", 120.0, "profile", 0);
    json_t *result = worker_eval_run (s_eval, job);
    json_decref (job);
    ck_assert_ptr_nonnull (result);
    s_expect (result, "ok");
    return result;
}

static json_int_t
s_timing_int (json_t *result, const char *key)
{
    return json_integer_value (json_object_get (json_object_get (result, "timings"), key));
}

static const char *
s_timing_str (json_t *result, const char *key)
{
    const char *value = json_string_value (json_object_get (json_object_get (result, "timings"), key));
    return value? value: "(none)";
}

START_TEST (test_a_steady_kernel_stops_timing_well_before_1000_runs)
{
    json_t *result = s_grade_work (S_STEADY_SOURCE ("work_ref"), S_STEADY_SOURCE ("work"));
    json_int_t runs = s_timing_int (result, "runs");
    char *dump = json_dumps (json_object_get (result, "timings"), JSON_COMPACT);
    fprintf (stderr, "FIGURES adaptive timing: a steady kernel timed %lld of 1000 runs (%s) %s\n",
             (long long) runs, s_timing_str (result, "stopped"), dump);
    free (dump);
    ck_assert_int_eq (s_timing_int (result, "max_runs"), 1000);
    ck_assert_msg (runs >= 5 && runs < 500, "timed %lld of 1000 runs", (long long) runs);
    ck_assert_str_eq (s_timing_str (result, "stopped"), "precise");
    //  What it says is what it did: the summaries have as many samples.
    json_t *timings = json_object_get (result, "timings");
    ck_assert_int_eq (json_integer_value (json_object_get (json_object_get (timings, "candidate"), "n")), runs);
    json_t *ci = json_object_get (timings, "speedup_ci");
    double speedup = json_real_value (json_object_get (result, "speedup"));
    double lo = json_real_value (json_array_get (ci, 0)), hi = json_real_value (json_array_get (ci, 1));
    ck_assert_msg (lo <= speedup && speedup <= hi && hi <= speedup * 1.01 && lo >= speedup * 0.99,
                   "interval [%g, %g] around %g is not within 1%%", lo, hi, speedup);
    json_decref (result);
}
END_TEST

START_TEST (test_a_kernel_100x_slower_costs_a_few_runs_and_keeps_its_reward)
{
    //  3 ms against 300 ms: a run of the reference delayed 10 ms by the
    //  machine's load still leaves the interval's top below 0.05.
    //  Its first round (2 runs) lies more than 2x below that line: settled
    //  there (worker_grade_stop's margin; nearer, the minimum's 4 runs).
    json_t *result = s_grade_work (S_WORK_SOURCE ("work_ref", "30"), S_WORK_SOURCE ("work", "3000"));
    ck_assert_int_eq (s_timing_int (result, "runs"), 2);
    ck_assert_str_eq (s_timing_str (result, "stopped"), "settled");
    //  Linear shape: the reward is the speedup, about 0.01, still above every failure.
    double speedup = json_real_value (json_object_get (result, "speedup"));
    double reward = json_real_value (json_object_get (result, "reward"));
    ck_assert_msg (speedup > 0 && speedup < 0.05, "speedup %g", speedup);
    ck_assert_double_eq_tol (reward, speedup, 1e-12);
    json_decref (result);
}
END_TEST

START_TEST (test_a_kernel_far_above_the_clip_stops_at_once_with_the_clip)
{
    //  300 ms against 3 ms: a candidate's run delayed 10 ms leaves the first
    //  round's ratio above twice the clip, so one round ends it.
    json_t *result = s_grade_work (S_WORK_SOURCE ("work_ref", "3000"), S_WORK_SOURCE ("work", "30"));
    ck_assert_int_eq (s_timing_int (result, "runs"), 2);
    ck_assert_str_eq (s_timing_str (result, "stopped"), "clipped");
    ck_assert (json_real_value (json_object_get (result, "speedup")) > 2.0);
    ck_assert_double_eq (json_real_value (json_object_get (result, "reward")), 2.0);
    json_decref (result);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_eval");
    TCase *tc = tcase_create ("cpu");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_correct_candidate_is_ok_and_timed);
    tcase_add_test (tc, test_profile_has_every_launch);
    tcase_add_test (tc, test_wrong_values_are_incorrect_with_mismatches);
    tcase_add_test (tc, test_tail_bug_is_caught_on_odd_size);
    tcase_add_test (tc, test_unwritten_output_fails);
    tcase_add_test (tc, test_modified_input_fails);
    tcase_add_test (tc, test_replayed_answer_fails);
    tcase_add_test (tc, test_hang_is_timeout_and_evaluator_goes_on);
    tcase_add_test (tc, test_crash_is_runtime_error);
    tcase_add_test (tc, test_compile_error_has_log_and_lowest_reward);
    tcase_add_test (tc, test_disallowed_option_is_invalid_without_reward);
    tcase_add_test (tc, test_missing_kernel_symbol_fails);
    tcase_add_test (tc, test_malformed_jobs_are_invalid);
    tcase_add_test (tc, test_second_compile_is_a_cache_hit);
    tcase_add_test (tc, test_a_steady_kernel_stops_timing_well_before_1000_runs);
    tcase_add_test (tc, test_a_kernel_100x_slower_costs_a_few_runs_and_keeps_its_reward);
    tcase_add_test (tc, test_a_kernel_far_above_the_clip_stops_at_once_with_the_clip);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
