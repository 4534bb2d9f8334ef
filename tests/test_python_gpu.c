/*  test_python_gpu - PyTorch-reference tasks on a GPU, through the real path.

    bench/pygpu's ReLU task (4096x8192 f32) and candidates graded on `cuda`
    by the evaluator, in sandboxed interpreters ($KGYM_PYTHON, with torch,
    CUDA and Triton): a Triton kernel and a load_inline extension are ok;
    torch's own ReLU is a wrapper (invalid); work left on a side stream
    with synchronisation patched out, a slow kernel behind patched CUDA
    events, one with torch's profiler turned off, and one that does its
    work on the inputs as soon as they exist, never look faster than they
    are; a load_inline build is kept
    under its key and found up to date by the next job; the next job's
    runners were started ahead of it; and a KernelBench folder imported for
    the GPU, prompted, answered and graded through a broker and a worker.
    Skips (77) when the interpreter has no torch with a CUDA device.
*/
#include "testutil.h"
#include "worker_eval.h"
#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static worker_eval_t *s_eval;
static char s_dir [64];

static void
s_setup (void)
{
    testutil_dir_make (s_dir, sizeof s_dir, "pygpu");
    char cache [128];
    snprintf (cache, sizeof cache, "%s/cache.sqlite", s_dir);
    s_eval = testutil_eval_new ("cuda", cache, 0);
}

static void
s_teardown (void)
{
    worker_eval_destroy (&s_eval);
    testutil_dir_remove (s_dir);
}

//  Grade bench/pygpu/NAME.py, TAIL appended (a distinct source when not
//  empty), against bench/pygpu/relu.py on the GPU; TIMED runs at most (0:
//  the default).
static json_t *
s_grade_timed (const char *name, const char *tail, int timed)
{
    char *task_path = testutil_source_path ("bench/pygpu/relu.py");
    char relative [128];
    snprintf (relative, sizeof relative, "bench/pygpu/%s.py", name);
    char *cand_path = testutil_source_path (relative);
    char *task_source = testutil_read_file (task_path);
    char *cand_source = testutil_read_file (cand_path);
    ck_assert (task_source && cand_source);
    if (*tail) {
        char *whole = zsys_sprintf ("%s%s", cand_source, tail);
        free (cand_source);
        cand_source = whole;
    }
    json_t *job = json_pack ("{s:{s:s, s:s, s:{s:s, s:s}}, s:{s:s, s:s}, s:{s:f, s:i}}",
                             "task", "name", "relu", "backend", "cuda",
                             "reference", "lang", "python", "source", task_source,
                             "candidate", "lang", "python", "source", cand_source,
                             "eval", "timeout", 30.0, "seed", 7);
    if (timed > 0)
        json_object_set_new (json_object_get (job, "eval"), "timed", json_integer (timed));
    json_t *result = worker_eval_run (s_eval, job);
    ck_assert_ptr_nonnull (result);
    //  Each job's figures, for docs/benchmarks.md.
    char *phases = json_dumps (json_object_get (result, "phases"), JSON_COMPACT);
    printf ("%s: %s, speedup %.3f, runners_ahead %d, phases %s\n", name,
            json_string_value (json_object_get (result, "status")),
            json_number_value (json_object_get (result, "speedup")),
            json_is_true (json_object_get (result, "runners_ahead")), phases? phases: "-");
    free (phases);
    fflush (stdout);            //  a failing case's child never flushes
    json_decref (job);
    free (task_source);
    free (cand_source);
    free (task_path);
    free (cand_path);
    return result;
}

static json_t *
s_grade_with (const char *name, const char *tail)
{
    return s_grade_timed (name, tail, 0);
}

static json_t *
s_grade (const char *name)
{
    return s_grade_with (name, "");
}

static double
s_speedup (json_t *result)
{
    return json_number_value (json_object_get (result, "speedup"));
}

static json_t *
s_profile (json_t *result, const char *key)
{
    return json_object_get (json_object_get (result, "profile"), key);
}

//  slow_relu graded as written (BASE appended) and with TAIL appended (a
//  timing attack), TIMED runs at most (0: the default): both ok, the
//  attack no faster than as written times MARGIN (noise). Says both and
//  how the attack's time was read, for docs/benchmarks.md.
static void
s_not_faster (const char *label, const char *base, const char *tail, int timed, double margin)
{
    json_t *honest = s_grade_timed ("slow_relu", base, timed);
    testutil_expect_status (honest, "ok", NULL);
    char *whole = zsys_sprintf ("%s%s", base, tail);
    json_t *attack = s_grade_timed ("slow_relu", whole, timed);
    zstr_free (&whole);
    testutil_expect_status (attack, "ok", NULL);
    json_t *runs = json_object_get (json_object_get (json_object_get (attack, "timings"), "candidate"), "n");
    printf ("%s: %.4f against %.4f as written (runs %lld, overhead %.0f +- %.0f us, fallbacks %lld, "
            "wall factor %.3g: %s)\n", label, s_speedup (attack), s_speedup (honest),
            (long long) json_integer_value (runs),
            json_number_value (s_profile (attack, "call_overhead_us")),
            json_number_value (s_profile (attack, "call_overhead_dev_us")),
            (long long) json_integer_value (s_profile (attack, "timing_fallbacks")),
            json_number_value (s_profile (attack, "wall_factor")),
            json_string_value (s_profile (attack, "timing_fallback_why")));
    fflush (stdout);            //  the figures, even when the check below fails (its child never flushes)
    ck_assert_msg (s_speedup (attack) <= s_speedup (honest) * margin,
                   "%s: %g against %g", label, s_speedup (attack), s_speedup (honest));
    json_decref (honest);
    json_decref (attack);
}

START_TEST (test_triton_kernel_is_ok)
{
    json_t *r = s_grade ("triton_relu");
    testutil_expect_status (r, "ok", NULL);
    ck_assert (s_speedup (r) > 0);
    ck_assert (json_number_value (s_profile (r, "library_share")) < 0.5);
    ck_assert_msg (strstr (json_string_value (json_object_get (r, "device")), "python"),
                   "device names the interpreter");
    json_decref (r);
}
END_TEST

START_TEST (test_wrapper_is_invalid)
{
    json_t *r = s_grade ("wrapper");
    testutil_expect_status (r, "invalid", "wrapper");
    json_decref (r);
}
END_TEST

//  Side stream, synchronisation patched out, 20 extra passes: wrong, a
//  wrapper, a runtime error (the harness's events are read before its work
//  is done), or slower; never faster.
START_TEST (test_side_stream_never_faster)
{
    json_t *r = s_grade ("nosync");
    const char *status = json_string_value (json_object_get (r, "status"));
    ck_assert_msg (strcmp (status, "invalid") == 0 || strcmp (status, "incorrect") == 0
                   || strcmp (status, "runtime_error") == 0
                   || (strcmp (status, "ok") == 0 && s_speedup (r) < 1.0),
                   "side stream: %s, speedup %g", status, s_speedup (r));
    json_decref (r);
}
END_TEST

//  torch.cuda.Event patched to say 0 ms around a slow kernel: the
//  supervisor's clocks say slow.
START_TEST (test_patched_events_change_nothing)
{
    json_t *r = s_grade ("events");
    testutil_expect_status (r, "ok", NULL);
    ck_assert_msg (s_speedup (r) < 1.0, "patched events: speedup %g", s_speedup (r));
    json_decref (r);
}
END_TEST

//  The same slow kernel graded as written and with torch's profiler turned
//  off from inside on two calls of three: timed calls never run the
//  profiler (its own cost would be in the wall clock's window, and a
//  candidate could skip it), so this changes nothing but its kernel table.
START_TEST (test_profiler_off_not_faster)
{
    s_not_faster ("profiler off", "",
        "\nimport torch.profiler as _kp\n"
        "_kp_real, _kp_n = _kp.profile, [0]\n"
        "class _NoProfile:\n"
        "    def __init__(self, *a, **k): pass\n"
        "    def __enter__(self): return self\n"
        "    def __exit__(self, *a): return False\n"
        "    def events(self): return []\n"
        "def _kp_some(*a, **k):\n"
        "    _kp_n[0] += 1\n"
        "    return _kp_real(*a, **k) if _kp_n[0] % 3 == 0 else _NoProfile()\n"
        "_kp.profile = _kp_some\n", 0, 1.1);
}
END_TEST

//  A short kernel (~0.1 ms) whose timed calls report 1 us: torch.cuda.Event
//  patched from inside, and kgym's own harness (its profiler's records)
//  too. Per call the lie may hide in the wall clock's noise; over all the
//  timed runs (30 of them: what it may keep is one standard error of their
//  median) it cannot. No faster than as written (give or take noise).
START_TEST (test_forged_records_not_faster)
{
    s_not_faster ("forged times", "\nPASSES = 100\n",
        "import sys as _ks\n"
        "_kr = _ks.modules['__main__'].Runner\n"
        "_kr_stop = _kr.profile_stop\n"
        "def _kr_forged(self, prof):\n"
        "    rec = _kr_stop(self, prof)\n"
        "    rec['span_us'] = 1.0\n"
        "    for k in rec.get('kernels', []): k['us'] = 1.0\n"
        "    return rec\n"
        "_kr.profile_stop = _kr_forged\n"
        "_ke = torch.cuda.Event\n"
        "class _KEvent(_ke):\n"
        "    def elapsed_time(self, other): return 0.001\n"
        "torch.cuda.Event = _KEvent\n", 30, 1.3);
}
END_TEST

//  The slow kernel's work done on the inputs as soon as they exist: the
//  task's get_inputs wrapped to launch it there, and the harness's wait
//  for the GPU at the end of making them patched out, so the work runs on
//  after the inputs' reply, while the supervisor poisons the outputs'
//  memory and the reference flushes the L2; forward launches a kernel of
//  its own on one element (for the wrapper check) and hands back what was
//  made. The timed call makes its inputs in its own request, so the clock
//  runs from when they exist: no faster than as written.
START_TEST (test_work_before_call_not_faster)
{
    s_not_faster ("work ahead of the call", "",
        "\nimport sys as _ks\n"
        "_kt = _ks.modules['kgym_task']\n"
        "_kmade, _kdone, _kskip = _kt.get_inputs, {}, [False]\n"
        "_ksync = torch.cuda.synchronize\n"
        "def _ksync_some(*a, **k):\n"
        "    if _kskip[0]:\n"
        "        _kskip[0] = False\n"
        "        return None\n"
        "    return _ksync(*a, **k)\n"
        "torch.cuda.synchronize = _ksync_some\n"
        "def _kget_inputs():\n"
        "    ins = _kmade()\n"
        "    x = ins[0]\n"
        "    if x.is_cuda:\n"
        "        y = torch.empty_like(x)\n"
        "        slow_relu[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), PASSES, BLOCK=256)\n"
        "        _kdone[id(x)] = y\n"
        "        _kskip[0] = True\n"
        "    return ins\n"
        "_kt.get_inputs = _kget_inputs\n"
        "_kforward = ModelNew.forward\n"
        "_kscratch = []\n"
        "def _kahead(self, x):\n"
        "    y = _kdone.pop(id(x), None)\n"
        "    _kdone.clear()\n"
        "    if y is None:\n"
        "        return _kforward(self, x)\n"
        "    if not _kscratch:\n"
        "        _kscratch.append(torch.empty(256, device=x.device))\n"
        "    slow_relu[(1,)](x, _kscratch[0], 1, 1, BLOCK=256)\n"
        "    return y\n"
        "ModelNew.forward = _kahead\n", 0, 1.3);
}
END_TEST

//  A load_inline candidate: ok; the second job with the same source starts
//  from the kept build (cache.candidate) and with runners started ahead.
START_TEST (test_inline_build_kept)
{
    json_t *r = s_grade ("inline_relu");
    testutil_expect_status (r, "ok", NULL);
    json_decref (r);
    r = s_grade ("inline_relu");
    testutil_expect_status (r, "ok", NULL);
    char *cache = json_dumps (json_object_get (r, "cache"), JSON_COMPACT);
    printf ("inline_relu again: cache %s, compile_s %.3f\n", cache? cache: "-",
            json_number_value (json_object_get (json_object_get (r, "phases"), "compile_s")));
    fflush (stdout);
    free (cache);
    ck_assert (json_is_true (json_object_get (json_object_get (r, "cache"), "candidate")));
    ck_assert (json_is_true (json_object_get (r, "runners_ahead")));
    json_decref (r);
    //  A new source once the worker knows its GPU: built ahead by the builder
    //  (no GPU, SCHED_IDLE) in prepare, so the job's own import is short.
    r = s_grade_with ("inline_relu", "# a distinct source\n");
    testutil_expect_status (r, "ok", NULL);
    printf ("inline_relu distinct: built_ahead %d, compile_s %.3f\n",
            json_is_true (json_object_get (r, "built_ahead")),
            json_number_value (json_object_get (json_object_get (r, "phases"), "compile_s")));
    fflush (stdout);
    ck_assert (json_is_true (json_object_get (r, "built_ahead")));
    json_decref (r);
}
END_TEST

//  From a dataset folder to a reward on the GPU: `kgym import kernelbench`
//  for cuda, `kgym prompt`, the answers extracted and graded by
//  `kgym submit --completion` through a kgym-broker and a CUDA kgym-worker
//  (the same path test_pytorch_e2e takes on the CPU in CI).
START_TEST (test_dataset_to_reward)
{
    char clients [64], workers [64];
    snprintf (clients, sizeof clients, "tcp://127.0.0.1:%d", testutil_free_port ());
    snprintf (workers, sizeof workers, "tcp://127.0.0.1:%d", testutil_free_port ());
    char *broker = testutil_build_path ("broker/kgym-broker");
    char *worker = testutil_build_path ("worker/kgym-worker");
    char *cache = zsys_sprintf ("%s/worker.sqlite", s_dir);
    char *bargv [] = { broker, "--clients", clients, "--workers", workers, NULL };
    pid_t pids [2];
    pids [0] = testutil_spawn (bargv);
    char *python = getenv ("KGYM_PYTHON");
    char *wargv [] = { worker, "--broker", workers, "--backend", "cuda", "--cache", cache,
                       "--python", python && *python? python: "/usr/bin/python3", NULL };
    pids [1] = testutil_spawn (wargv);

    char *data = testutil_source_path ("tests/data/kernelbench");
    char *pool = zsys_sprintf ("%s/pool", s_dir);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--backend", "cuda",
                            "--out", pool, data, NULL);
    ck_assert_msg (rc == 0 && strstr (err, "8 imported"), "import: exit %d: %s", rc, err);
    free (out);
    free (err);
    char *task_path = zsys_sprintf ("%s/L1_19_ReLU.json", pool);
    rc = testutil_kgym (s_dir, &out, &err, "prompt", "--format", "json", task_path, NULL);
    ck_assert_msg (rc == 0, "prompt: exit %d: %s", rc, err);
    json_t *prompt = json_loads (out, 0, NULL);
    ck_assert_ptr_nonnull (prompt);
    ck_assert_str_eq (json_string_value (json_object_get (prompt, "answer")), "python");
    ck_assert_str_eq (json_string_value (json_object_get (prompt, "lang")), "triton");
    const char *user = json_string_value (json_object_get (prompt, "user"));
    ck_assert_msg (strstr (user, "@triton.jit") && !strstr (user, "the CPU"), "prompt: %s", user);
    printf ("prompt for the GPU: target %s\n", json_string_value (json_object_get (prompt, "gpu")));
    json_decref (prompt);
    free (out);
    free (err);

    char *right = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_triton.md");
    char *wrong = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_wrong.md");
    char *prose = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_prose.md");
    rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", clients, "--timeout", "300",
                        "--connect-timeout", "60", task_path, "--completion", right,
                        "--completion", wrong, "--completion", prose, NULL);
    ck_assert_msg (rc == 0, "submit: exit %d: %s", rc, err);
    printf ("%s", out);
    json_t *line = testutil_json_line (out, "candidate", "_triton.md");
    testutil_expect_status (line, "ok", NULL);
    ck_assert (json_number_value (json_object_get (line, "reward")) > 0);
    ck_assert (strstr (json_string_value (json_object_get (line, "device")), "python"));
    json_decref (line);
    line = testutil_json_line (out, "candidate", "_wrong.md");
    testutil_expect_status (line, "incorrect", NULL);
    json_decref (line);
    line = testutil_json_line (out, "candidate", "_prose.md");
    testutil_expect_status (line, "invalid", NULL);
    ck_assert_str_eq (json_string_value (json_object_get (line, "error")), "extract");
    json_decref (line);
    free (out);
    free (err);
    for (int i = 1; i >= 0; i--) {
        kill (pids [i], SIGTERM);
        waitpid (pids [i], NULL, 0);
    }
    free (right);
    free (wrong);
    free (prose);
    zstr_free (&task_path);
    zstr_free (&pool);
    free (data);
    zstr_free (&cache);
    free (broker);
    free (worker);
}
END_TEST

int
main (void)
{
    const char *python = getenv ("KGYM_PYTHON");
    char command [512];
    snprintf (command, sizeof command, "%s -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() "
              "else 1)' >/dev/null 2>&1", python && *python? python: "/usr/bin/python3");
    if (system (command) != 0) {
        printf ("SKIP: no torch with a CUDA device in the interpreter ($KGYM_PYTHON)\n");
        return 77;
    }
    Suite *suite = suite_create ("python_gpu");
    TCase *tc = tcase_create ("gpu");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 600);
    tcase_add_test (tc, test_triton_kernel_is_ok);
    tcase_add_test (tc, test_wrapper_is_invalid);
    tcase_add_test (tc, test_side_stream_never_faster);
    tcase_add_test (tc, test_patched_events_change_nothing);
    tcase_add_test (tc, test_profiler_off_not_faster);
    tcase_add_test (tc, test_forged_records_not_faster);
    tcase_add_test (tc, test_work_before_call_not_faster);
    suite_add_tcase (suite, tc);
    //  Cases of their own, to run alone (CK_RUN_CASE=inline, =dataset).
    TCase *inline_tc = tcase_create ("inline");
    tcase_add_checked_fixture (inline_tc, s_setup, s_teardown);
    tcase_set_timeout (inline_tc, 600);
    tcase_add_test (inline_tc, test_inline_build_kept);
    suite_add_tcase (suite, inline_tc);
    TCase *dataset = tcase_create ("dataset");
    tcase_add_checked_fixture (dataset, s_setup, s_teardown);
    tcase_set_timeout (dataset, 600);
    tcase_add_test (dataset, test_dataset_to_reward);
    suite_add_tcase (suite, dataset);
    return testutil_run_suite (suite);
}
