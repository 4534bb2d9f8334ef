/*  test_python_gpu - PyTorch-reference tasks on a GPU, through the real path.

    bench/pygpu's ReLU task (4096x8192 f32) and candidates graded on `cuda`
    by the evaluator, in sandboxed interpreters ($KGYM_PYTHON, with torch,
    CUDA and Triton): a Triton kernel and a load_inline extension are ok;
    torch's own ReLU is a wrapper (invalid); work left on a side stream
    with synchronisation patched out, and a slow kernel behind patched CUDA
    events, never look faster than they are; a load_inline build is kept
    under its key and found up to date by the next job; the next job's
    runners were started ahead of it.
    Skips (77) when the interpreter has no torch with a CUDA device.
*/
#include "testutil.h"
#include "worker_eval.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

//  Grade bench/pygpu/NAME.py against bench/pygpu/relu.py on the GPU.
static json_t *
s_grade (const char *name)
{
    char *task_path = testutil_source_path ("bench/pygpu/relu.py");
    char relative [128];
    snprintf (relative, sizeof relative, "bench/pygpu/%s.py", name);
    char *cand_path = testutil_source_path (relative);
    char *task_source = testutil_read_file (task_path);
    char *cand_source = testutil_read_file (cand_path);
    ck_assert (task_source && cand_source);
    json_t *job = json_pack ("{s:{s:s, s:s, s:{s:s, s:s}}, s:{s:s, s:s}, s:{s:f, s:i}}",
                             "task", "name", "relu", "backend", "cuda",
                             "reference", "lang", "python", "source", task_source,
                             "candidate", "lang", "python", "source", cand_source,
                             "eval", "timeout", 30.0, "seed", 7);
    json_t *result = worker_eval_run (s_eval, job);
    ck_assert_ptr_nonnull (result);
    json_decref (job);
    free (task_source);
    free (cand_source);
    free (task_path);
    free (cand_path);
    return result;
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
//  wrapper, or slower, never faster.
START_TEST (test_side_stream_never_faster)
{
    json_t *r = s_grade ("nosync");
    const char *status = json_string_value (json_object_get (r, "status"));
    ck_assert_msg (strcmp (status, "invalid") == 0 || strcmp (status, "incorrect") == 0
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

//  A load_inline candidate: ok; the second job with the same source starts
//  from the kept build (cache.candidate) and with runners started ahead.
START_TEST (test_inline_build_kept)
{
    json_t *r = s_grade ("inline_relu");
    testutil_expect_status (r, "ok", NULL);
    json_decref (r);
    r = s_grade ("inline_relu");
    testutil_expect_status (r, "ok", NULL);
    ck_assert (json_is_true (json_object_get (json_object_get (r, "cache"), "candidate")));
    ck_assert (json_is_true (json_object_get (r, "runners_ahead")));
    json_decref (r);
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
    tcase_add_test (tc, test_inline_build_kept);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
