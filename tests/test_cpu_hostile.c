/*  test_cpu_hostile - the reward depends on nothing the candidate can reach.

    Hostile candidates of each class issue #12 found, graded through the real
    path (compiler, sandboxed runners, evaluator) on the CPU backend:
      1. timing it can steer: a thread left running after its call, a
         protocol reply of its own, answers replayed from a few input sets;
      2. a penalty turned into internal_error by dying after a reply or by
         a vfork child that keeps the runner from being stopped;
      4. memory it sizes: a workspace over the per-job cap, memory touched
         beyond what it declared;
      5. integers compared through double;
      8. load charged to the candidate: a correct kernel beside CPU hogs.
    Each asserts the verdict the rule behind the class demands.
*/
#include "testutil.h"
#include "worker_eval.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_cache_dir [] = "/tmp/kgym-test-hostile-XXXXXX";
static worker_eval_t *s_eval;

static const char *s_scale_task =
    "{\"name\": \"scale_f32\", \"backend\": \"cpu\","
    " \"args\": ["
    "  {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"f32\", \"shape\": [\"N\"], \"init\": {\"dist\": \"uniform\", \"low\": -1, \"high\": 1}},"
    "  {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"f32\", \"shape\": [\"N\"]},"
    "  {\"name\": \"a\", \"kind\": \"scalar\", \"dtype\": \"f32\", \"value\": 2.5},"
    "  {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
    " \"sizes\": [{\"N\": 20000}, {\"N\": 17}],"
    " \"tolerance\": {\"atol\": 1e-6, \"rtol\": 1e-6},"
    " \"reference\": {\"source\": \"void scale_ref(const float *x, float *y, float a, int n) { for (int i = 0; i < n; i++) y[i] = a * x[i]; }\","
    "                \"launches\": [{\"kernel\": \"scale_ref\"}]}}";

static void
s_setup (void)
{
    ck_assert_ptr_nonnull (mkdtemp (s_cache_dir));
    char path [256];
    snprintf (path, sizeof path, "%s/modules.sqlite", s_cache_dir);
    s_eval = testutil_eval_new ("cpu", path, 2ull << 30);
}

static void
s_teardown (void)
{
    worker_eval_destroy (&s_eval);
    char command [512];
    snprintf (command, sizeof command, "rm -rf %s", s_cache_dir);
    ck_assert_int_eq (system (command), 0);
    strcpy (s_cache_dir, "/tmp/kgym-test-hostile-XXXXXX");
}

//  Grade source (function "scale" of the scale task) with a workspace expression (or NULL).
static json_t *
s_grade_task (const char *task_json, const char *kernel, const char *source, const char *workspace,
              double timeout, int timed)
{
    json_error_t error;
    json_t *task = json_loads (task_json, 0, &error);
    ck_assert_msg (task != NULL, "task json: %s", error.text);
    json_t *candidate = json_pack ("{s:s, s:[{s:s}]}", "source", source, "launches", "kernel", kernel);
    if (workspace)
        json_object_set_new (candidate, "workspace", json_string (workspace));
    json_t *job = json_pack ("{s:o, s:o, s:{s:f, s:i, s:i, s:i}}", "task", task, "candidate", candidate,
                             "eval", "timeout", timeout, "seed", 7, "timed", timed, "warmup", 2);
    json_t *result = worker_eval_run (s_eval, job);
    json_decref (job);
    ck_assert_ptr_nonnull (result);
    return result;
}

static json_t *
s_grade (const char *source, const char *workspace, double timeout)
{
    return s_grade_task (s_scale_task, "scale", source, workspace, timeout, 7);
}

static void
s_expect (json_t *result, const char *status, const char *part)
{
    testutil_expect_status (result, status, part);
}

//  What a candidate needs to answer the supervisor's protocol itself: the
//  size of a reply (runner_reply_t) and a scan of its fds for the socket.
#define FAKE_REPLY \
    "#include <string.h>\n#include <sys/socket.h>\n#include <sys/stat.h>\n#include <unistd.h>\n" \
    "static void fake_reply (void) {\n" \
    "    static char reply [1296];\n" \
    "    memset (reply, 0, sizeof reply);\n" \
    "    for (int fd = 0; fd < 64; fd++) {\n" \
    "        struct stat st;\n" \
    "        if (fstat (fd, &st) == 0 && S_ISSOCK (st.st_mode))\n" \
    "            send (fd, reply, sizeof reply, MSG_NOSIGNAL);\n" \
    "    }\n" \
    "}\n"

//  Class 1 (b): a thread started on the first call keeps spinning after it:
//  it could slow whatever runs next. The call fails, whatever it computed.
START_TEST (test_thread_left_running)
{
    json_t *r = s_grade (
        "#include <pthread.h>\n"
        "static void *spin (void *arg) { volatile unsigned long n = 0; for (;;) n++; return arg; }\n"
        "static int started;\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    if (!started) { started = 1; pthread_t t; pthread_create (&t, 0, spin, 0); }\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i];\n"
        "}\n", NULL, 10.0);
    s_expect (r, "runtime_error", "thread");
    ck_assert (json_is_null (json_object_get (r, "speedup")));
    json_decref (r);
}
END_TEST

//  A job's programs share one CPU: a kernel that could move itself to every
//  CPU (and its threads with it) would have cores the reference has not,
//  and another job's. Refused; a kernel that got it writes zeros.
START_TEST (test_cannot_leave_its_cpu)
{
    json_t *r = s_grade (
        "#define _GNU_SOURCE\n#include <sched.h>\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    cpu_set_t all;\n"
        "    CPU_ZERO (&all);\n"
        "    for (int c = 0; c < CPU_SETSIZE; c++) CPU_SET (c, &all);\n"
        "    int moved = sched_setaffinity (0, sizeof all, &all) == 0;\n"
        "    for (int i = 0; i < n; i++) y [i] = moved? 0: a * x [i];\n"
        "}\n", NULL, 10.0);
    s_expect (r, "ok", NULL);
    json_decref (r);
}
END_TEST

//  Class 1 (a): the candidate sends the runner's reply itself before its
//  slow work: the supervisor may stop the clock on that reply, but then
//  checks the outputs as they are (stopped mid-work: incorrect), or, if it
//  woke late, the work was done and the time measured covers it. It can
//  never be a slow kernel paid as a fast one.
START_TEST (test_own_reply_before_work)
{
    json_t *r = s_grade (FAKE_REPLY
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    fake_reply ();\n"
        "    for (volatile int k = 0; k < 2000000; k++) ;\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i];\n"
        "}\n", NULL, 10.0);
    const char *status = json_string_value (json_object_get (r, "status"));
    double speedup = json_real_value (json_object_get (r, "speedup"));
    ck_assert_msg (status && strcmp (status, "internal_error") != 0
                   && (strcmp (status, "ok") != 0 || speedup < 0.5),
                   "a slow candidate answering for its runner got %s, speedup %g", status, speedup);
    json_decref (r);
}
END_TEST

//  Class 1 (c): answers replayed by fingerprint. With inputs of its own for
//  every timed run there is nothing to replay: the candidate, 200 times
//  slower than the reference when it computes, is timed computing.
START_TEST (test_replay_by_fingerprint)
{
    json_t *r = s_grade (
        "#include <stdlib.h>\n#include <string.h>\n"
        "static float keys [16][4]; static float *outs [16]; static int kept;\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    for (int s = 0; s < kept && n >= 4; s++)\n"
        "        if (memcmp (keys [s], x, sizeof keys [s]) == 0) { memcpy (y, outs [s], n * 4); return; }\n"
        "    for (int r = 0; r < 200; r++)\n"
        "        for (int i = 0; i < n; i++) ((volatile float *) y) [i] = a * x [i];\n"
        "    if (n >= 4 && kept < 16 && (outs [kept] = malloc (n * 4))) {\n"
        "        memcpy (keys [kept], x, 16); memcpy (outs [kept], y, n * 4); kept++;\n"
        "    }\n"
        "}\n", NULL, 20.0);
    s_expect (r, "ok", NULL);
    double speedup = json_real_value (json_object_get (r, "speedup"));
    ck_assert_msg (speedup > 0 && speedup < 0.3, "a replaying kernel was timed replaying: speedup %g",
                   speedup);
    json_decref (r);
}
END_TEST

//  Class 1 (d): inputs known ahead. The job's seed is given (7, as a task's
//  fixed seed would be) and kgym's generator is public: the candidate
//  pastes it (common_philox.h) and predicts each call's inputs from the
//  seed, for every size and trial number. Where it can predict, it could
//  have computed the answer at load, untimed (here it simply computes
//  fast); where it cannot, it computes 200 times over. Its correctness
//  trials must be predicted (until one is, it writes garbage: the attack
//  is real); the timed runs must not be, so it is timed slow.
START_TEST (test_known_seed_no_precompute)
{
    char *path = testutil_source_path ("common/common_philox.h");
    char *philox = testutil_read_file (path);
    ck_assert_ptr_nonnull (philox);
    char *source = NULL;
    ck_assert_int_gt (asprintf (&source, "%s\n"
        "#include <string.h>\n"
        "static int predicted;\n"
        "static int known (const float *x) {\n"
        "    for (uint32_t s = 0; s < 2; s++)\n"
        "        for (uint32_t trial = 0; trial < 300; trial++) {   /* the trials, and the numbers after */\n"
        "            uint32_t w [4]; float v [4];\n"
        "            kgym_random_words (7, kgym_stream (s, trial, 0), 0, w);\n"
        "            kgym_init4f (0, -1.0f, 1.0f, w, v);\n"
        "            if (memcmp (v, x, sizeof v) == 0) return 1;\n"
        "        }\n"
        "    return 0;\n"
        "}\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    if (n >= 4 && known (x)) { predicted = 1; for (int i = 0; i < n; i++) y [i] = a * x [i]; return; }\n"
        "    if (!predicted) { for (int i = 0; i < n; i++) y [i] = 12345.0f; return; }\n"
        "    for (int r = 0; r < 200; r++)\n"
        "        for (int i = 0; i < n; i++) ((volatile float *) y) [i] = a * x [i];\n"
        "}\n", philox), 0);
    json_t *r = s_grade (source, NULL, 20.0);
    s_expect (r, "ok", NULL);
    double speedup = json_real_value (json_object_get (r, "speedup"));
    ck_assert_msg (speedup > 0 && speedup < 0.3, "a kernel that knew its timed inputs ahead was timed "
                   "as if it had: speedup %g", speedup);
    json_decref (r);
    free (source);
    free (philox);
    free (path);
}
END_TEST

//  Class 2: right on its first call, then it replies for its runner and
//  exits: the later calls, where it would be wrong, never happen. That is
//  the candidate's runtime_error, not an infrastructure fault.
START_TEST (test_exit_after_reply)
{
    json_t *r = s_grade (FAKE_REPLY
        "static int calls;\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i];\n"
        "    if (++calls == 1) { fake_reply (); _exit (0); }\n"
        "}\n", NULL, 10.0);
    s_expect (r, "runtime_error", NULL);
    json_decref (r);
}
END_TEST

//  Class 2: a vfork child (sharing the runner's memory, a thread of it)
//  replies for the runner and spins: the runner, waiting for its vfork
//  child, can not be stopped. The candidate's runtime_error again.
START_TEST (test_vfork_child_blocks_the_stop)
{
    json_t *r = s_grade ("#define _GNU_SOURCE\n" FAKE_REPLY
        "#include <sched.h>\n#include <signal.h>\n"
        "static char stack [1 << 16];\n"
        "static int child (void *arg) { fake_reply (); for (volatile int s = 1; s; ) ; return 0; }\n"
        "static int calls;\n"
        "void scale (const float *x, float *y, float a, int n) {\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i];\n"
        "    if (++calls == 1)\n"
        "        clone (child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | CLONE_THREAD | CLONE_SIGHAND, 0);\n"
        "}\n", NULL, 10.0);
    const char *status = json_string_value (json_object_get (r, "status"));
    ck_assert_msg (status && (strcmp (status, "runtime_error") == 0 || strcmp (status, "timeout") == 0),
                   "vfork child: got %s: %s", status, json_string_value (json_object_get (r, "message")));
    json_decref (r);
}
END_TEST

//  Class 4: a workspace larger than the worker allows per job is refused
//  before anything is allocated, and the worker's own memory stays put.
static long
s_peak_kib (void)
{
    FILE *file = fopen ("/proc/self/status", "r");
    char line [256];
    long kib = 0;
    while (file && fgets (line, sizeof line, file))
        if (strncmp (line, "VmHWM:", 6) == 0)
            kib = atol (line + 6);
    if (file)
        fclose (file);
    return kib;
}

START_TEST (test_workspace_over_the_cap)
{
    long before = s_peak_kib ();
    json_t *r = s_grade ("void scale (const float *x, float *y, float a, int n, char *ws) {"
                         " for (int i = 0; i < n; i++) y [i] = a * x [i]; }", "8589934592", 10.0);
    s_expect (r, "invalid", "--max-job-memory");
    json_decref (r);
    ck_assert_msg (s_peak_kib () - before < 64 * 1024, "the supervisor grew by %ld KiB",
                   s_peak_kib () - before);
}
END_TEST

//  Class 4: memory touched beyond the declared workspace is not granted.
START_TEST (test_memory_beyond_what_was_declared)
{
    json_t *r = s_grade (
        "#include <stdlib.h>\n"
        "void scale (const float *x, float *y, float a, int n, char *ws) {\n"
        "    for (long k = 0; k < (1l << 30); k += 4096) ws [k % (64l << 20)] = 1;\n"
        "    char *big = malloc (1l << 30);\n"
        "    if (!big) __builtin_trap ();\n"
        "    for (long k = 0; k < (1l << 30); k += 4096) big [k] = 1;\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i] + big [i % 4096] * 0;\n"
        "}\n", "67108864", 10.0);
    s_expect (r, "runtime_error", NULL);
    json_decref (r);
}
END_TEST

//  Class 5: int64 outputs near 2^54 that differ by one are equal as doubles.
START_TEST (test_int64_off_by_one)
{
    const char *task =
        "{\"name\": \"shift_i64\", \"backend\": \"cpu\","
        " \"args\": ["
        "  {\"name\": \"x\", \"kind\": \"input\", \"dtype\": \"i64\", \"shape\": [\"N\"], \"init\": {\"dist\": \"randint\", \"low\": 0, \"high\": 1000}},"
        "  {\"name\": \"y\", \"kind\": \"output\", \"dtype\": \"i64\", \"shape\": [\"N\"]},"
        "  {\"name\": \"N\", \"kind\": \"scalar\", \"dtype\": \"i32\", \"value\": \"N\"}],"
        " \"sizes\": [{\"N\": 1000}], \"tolerance\": {\"atol\": 0, \"rtol\": 0},"
        " \"reference\": {\"source\": \"#include <stdint.h>\\nvoid ref(const int64_t *x, int64_t *y, int n) { for (int i = 0; i < n; i++) y[i] = x[i] + (1ll << 54); }\","
        "                \"launches\": [{\"kernel\": \"ref\"}]}}";
    json_t *r = s_grade_task (task, "shift",
        "#include <stdint.h>\n"
        "void shift (const int64_t *x, int64_t *y, int n) { for (int i = 0; i < n; i++) y [i] = x [i] + (1ll << 54) + (i & 1); }\n",
        NULL, 10.0, 3);
    s_expect (r, "incorrect", "wrong in 500 of 1000");
    json_decref (r);
    r = s_grade_task (task, "shift",
        "#include <stdint.h>\n"
        "void shift (const int64_t *x, int64_t *y, int n) { for (int i = 0; i < n; i++) y [i] = x [i] + (1ll << 54); }\n",
        NULL, 10.0, 3);
    s_expect (r, "ok", NULL);
    json_decref (r);
}
END_TEST

//  Class 8: the budget is the candidate's own CPU time. Beside hogs that
//  take most of the machine, a correct kernel using a fraction of its
//  budget is ok, though the job's wall time (runner starts, the reference,
//  inputs, checks, all slowed by the hogs) is far above the budget.
START_TEST (test_load_is_not_charged)
{
    long cpus = sysconf (_SC_NPROCESSORS_ONLN);
    int nhogs = (int) (cpus > 0? 3 * cpus: 6);
    pid_t hogs [64];
    for (int i = 0; i < nhogs && i < 64; i++) {
        hogs [i] = fork ();
        if (hogs [i] == 0)
            for (volatile unsigned long n = 0; ; n++)
                ;
    }
    json_t *r = s_grade ("void scale (const float *x, float *y, float a, int n) {"
                         " for (int i = 0; i < n; i++) y [i] = a * x [i]; }", NULL, 0.25);
    for (int i = 0; i < nhogs && i < 64; i++) {
        kill (hogs [i], SIGKILL);
        waitpid (hogs [i], NULL, 0);
    }
    s_expect (r, "ok", NULL);
    double total = json_real_value (json_object_get (json_object_get (r, "phases"), "total_s"));
    fprintf (stderr, "beside %d hogs: ok in %.2f s of wall time for a 0.25 s budget\n", nhogs, total);
    json_decref (r);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("cpu_hostile");
    TCase *tc = tcase_create ("classes");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_thread_left_running);
    tcase_add_test (tc, test_cannot_leave_its_cpu);
    tcase_add_test (tc, test_own_reply_before_work);
    tcase_add_test (tc, test_replay_by_fingerprint);
    tcase_add_test (tc, test_known_seed_no_precompute);
    tcase_add_test (tc, test_exit_after_reply);
    tcase_add_test (tc, test_vfork_child_blocks_the_stop);
    tcase_add_test (tc, test_workspace_over_the_cap);
    tcase_add_test (tc, test_memory_beyond_what_was_declared);
    tcase_add_test (tc, test_int64_off_by_one);
    tcase_add_test (tc, test_load_is_not_charged);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
