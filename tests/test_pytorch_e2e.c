/*  test_pytorch_e2e - from a dataset folder to a reward, on the CPU, with
    the built binaries: `kgym import kernelbench` a folder of
    KernelBench-format files, `kgym prompt` one task, extract a model's
    answer (tests/data/kernelbench/answers), and grade it through a real
    kgym-broker and CPU kgym-worker with `kgym submit --completion`; and
    `kgym import --check` dropping the references that do not import or
    are not deterministic.

    Grading PyTorch tasks needs the python backend. Without it the path up
    to the candidate is still tested, the grading cases do not run, and
    the program exits 77 (SKIP) when everything that ran passed.
*/
#include "testutil.h"
#include "client_extract.h"
#include "worker_registry.h"
#include "kgym_config.h"
#include <czmq.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

static char s_dir [64];
static pid_t s_pids [2];
static char s_clients [64], s_workers [64];

static void
s_setup (void)
{
    testutil_dir_make (s_dir, sizeof s_dir, "pytorch");
}

static void
s_teardown (void)
{
    for (int i = 1; i >= 0; i--)
        if (s_pids [i] > 0) {
            kill (s_pids [i], SIGTERM);
            waitpid (s_pids [i], NULL, 0);
            s_pids [i] = 0;
        }
    testutil_dir_remove (s_dir);
}

//  A broker and one CPU worker (which makes every backend serving cpu).
static void
s_cluster_setup (void)
{
    s_setup ();
    snprintf (s_clients, sizeof s_clients, "tcp://127.0.0.1:%d", testutil_free_port ());
    snprintf (s_workers, sizeof s_workers, "tcp://127.0.0.1:%d", testutil_free_port ());
    char broker [512], worker [512];
    snprintf (broker, sizeof broker, "%s/broker/kgym-broker", KGYM_BUILD_DIR);
    snprintf (worker, sizeof worker, "%s/worker/kgym-worker", KGYM_BUILD_DIR);
    char *cache = zsys_sprintf ("%s/cache.sqlite", s_dir);
    char *bargv [] = { broker, "--clients", s_clients, "--workers", s_workers, NULL };
    s_pids [0] = testutil_spawn (bargv);
    char *wargv [] = { worker, "--broker", s_workers, "--backend", "cpu", "--cache", cache, NULL };
    s_pids [1] = testutil_spawn (wargv);
    zstr_free (&cache);
}

//  Import the test folder for the CPU into dir/pool.
static void
s_import (void)
{
    char *data = testutil_source_path ("tests/data/kernelbench");
    char *pool = zsys_sprintf ("%s/pool", s_dir);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--backend", "cpu",
                            "--out", pool, data, NULL);
    ck_assert_msg (rc == 0, "import: exit %d: %s", rc, err);
    ck_assert_msg (strstr (err, "8 imported"), "import summary: %s", err);
    free (out);
    free (err);
    free (data);
    zstr_free (&pool);
}

START_TEST (test_dataset_to_candidate)
{
    s_import ();
    char *task_path = zsys_sprintf ("%s/pool/L1_19_ReLU.json", s_dir);
    //  The prompt asks for the answer the extractor reads.
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "prompt", "--format", "json", task_path, NULL);
    ck_assert_msg (rc == 0, "prompt: exit %d: %s", rc, err);
    json_t *prompt = json_loads (out, 0, NULL);
    ck_assert_ptr_nonnull (prompt);
    ck_assert_str_eq (json_string_value (json_object_get (prompt, "answer")), "python");
    ck_assert_str_eq (json_string_value (json_object_get (prompt, "lang")), "c");
    const char *user = json_string_value (json_object_get (prompt, "user"));
    ck_assert (strstr (user, "one ```python block") && strstr (user, "class ModelNew(nn.Module)"));
    ck_assert (strstr (user, "It runs on the CPU."));
    json_decref (prompt);
    free (out);
    free (err);

    //  The model's answer: a draft, then the module; the module is the candidate.
    json_error_t error;
    json_t *task = json_load_file (task_path, 0, &error);
    ck_assert_ptr_nonnull (task);
    const char *entry = client_extract_entry (task);
    ck_assert_str_eq (entry, "ModelNew");
    char *answer_path = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_right.md");
    char *answer = testutil_read_file (answer_path);
    char problem [512];
    json_t *candidate = client_extract_python (answer, entry, problem, sizeof problem);
    ck_assert_msg (candidate != NULL, "no candidate: %s", problem);
    const char *source = json_string_value (json_object_get (candidate, "source"));
    ck_assert (strstr (source, "torch.clamp(x, min=0.0)"));
    ck_assert (!strstr (source, "draft"));
    json_decref (candidate);
    free (answer);
    free (answer_path);
    json_decref (task);
    zstr_free (&task_path);
}
END_TEST

START_TEST (test_grade_answers_through_a_broker)
{
    s_import ();
    char *task_path = zsys_sprintf ("%s/pool/L1_19_ReLU.json", s_dir);
    char *right = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_right.md");
    char *wrong = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_wrong.md");
    char *prose = testutil_source_path ("tests/data/kernelbench/answers/L1_19_ReLU_prose.md");
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_clients, "--timeout", "60",
                            "--connect-timeout", "30", task_path, "--completion", right,
                            "--completion", wrong, "--completion", prose, NULL);
    ck_assert_msg (rc == 0, "submit: exit %d: %s", rc, err);
    json_t *line = testutil_json_line (out, "candidate", "_right.md");
    ck_assert_msg (streq (json_string_value (json_object_get (line, "status")), "ok"),
                   "right answer: %s", json_dumps (line, 0));
    ck_assert (json_number_value (json_object_get (line, "reward")) > 0);
    bool ahead = json_is_true (json_object_get (line, "runners_ahead"));
    json_decref (line);
    line = testutil_json_line (out, "candidate", "_wrong.md");
    ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "incorrect");
    ck_assert (json_number_value (json_object_get (line, "reward")) < 0);
    //  The worker's one slot took one job after the other: the second's
    //  runners were started ahead, and lived on after the first job's
    //  thread ended.
    ahead |= json_is_true (json_object_get (line, "runners_ahead"));
    ck_assert_msg (ahead, "no job had its runners started ahead: %s", out);
    json_decref (line);
    line = testutil_json_line (out, "candidate", "_prose.md");
    ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "invalid");
    ck_assert_str_eq (json_string_value (json_object_get (line, "error")), "extract");
    json_decref (line);
    free (out);
    free (err);
    free (right);
    free (wrong);
    free (prose);
    zstr_free (&task_path);
}
END_TEST

START_TEST (test_check_drops_broken_references)
{
    char *broken = testutil_source_path ("tests/data/kernelbench/broken");
    char *relu = testutil_source_path ("tests/data/kernelbench/level1/19_ReLU.py");
    char *pool = zsys_sprintf ("%s/pool", s_dir);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--check", "--backend", "cpu",
                            "--out", pool, broken, relu, NULL);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
    struct { const char *file; const char *status; const char *problem; } want [] = {
        { "level1/19_ReLU.py", "imported", NULL },
        { "broken/import_error.py", "failed", "import_error" },
        { "broken/nondeterministic.py", "failed", "not_deterministic" },
        { "broken/no_model.py", "failed", "no_model" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want [0]; i++) {
        json_t *line = testutil_json_line (out, "source", want [i].file);
        ck_assert_str_eq (json_string_value (json_object_get (line, "status")), want [i].status);
        if (want [i].problem)
            ck_assert_str_eq (json_string_value (json_object_get (line, "problem")), want [i].problem);
        json_decref (line);
    }
    free (out);
    free (err);
    free (broken);
    free (relu);
    zstr_free (&pool);
}
END_TEST

int
main (void)
{
    bool python = worker_registry_named ("python") != NULL;
    Suite *suite = suite_create ("pytorch_e2e");
    TCase *path = tcase_create ("path");
    tcase_add_checked_fixture (path, s_setup, s_teardown);
    tcase_add_test (path, test_dataset_to_candidate);
    suite_add_tcase (suite, path);
    if (python) {
        TCase *grading = tcase_create ("grading");
        tcase_set_timeout (grading, 300);
        tcase_add_checked_fixture (grading, s_cluster_setup, s_teardown);
        tcase_add_test (grading, test_grade_answers_through_a_broker);
        suite_add_tcase (suite, grading);
        TCase *check = tcase_create ("check");
        tcase_set_timeout (check, 300);
        tcase_add_checked_fixture (check, s_setup, s_teardown);
        tcase_add_test (check, test_check_drops_broken_references);
        suite_add_tcase (suite, check);
    }
    int rc = testutil_run_suite (suite);
    if (rc == 0 && !python) {
        printf ("SKIP: this build has no python backend: imported, prompted and extracted, "
                "but did not grade\n");
        return 77;
    }
    return rc;
}
