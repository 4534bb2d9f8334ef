/*  test_client_import - `kgym import kernelbench` on the KernelBench-format
    files of tests/data/kernelbench, run as the built kgym: one task file
    per problem, named from its path, with the documented extra sizes; each
    broken file failed with its reason; JSON lines read per row; --check
    grades references with the python backend (skipped without it).
*/
#include "testutil.h"
#include "client_import.h"
#include "common_task.h"
#include "worker_registry.h"
#include <czmq.h>
#include <string.h>

static char s_dir [64];

static void
s_setup (void)
{
    testutil_dir_make (s_dir, sizeof s_dir, "import");
}

static void
s_teardown (void)
{
    testutil_dir_remove (s_dir);
}

//  The stdout line of a problem whose "source" ends with suffix (to release).
static json_t *
s_line_for (const char *out, const char *suffix)
{
    return testutil_json_line (out, "source", suffix);
}

static int
s_import (char **out, char **err, const char *path)
{
    char *data = testutil_source_path (path);
    char *tasks = zsys_sprintf ("%s/tasks", s_dir);
    int rc = testutil_kgym (s_dir, out, err, "import", "kernelbench", "--out", tasks, data, NULL);
    free (data);
    zstr_free (&tasks);
    return rc;
}

//  A written task, parsed by kgym's own task parser (no backend catalog in
//  this process: a python reference makes it a module task).
static common_task_t *
s_task (const char *name, json_t **json_out)
{
    char *path = zsys_sprintf ("%s/tasks/%s.json", s_dir, name);
    json_error_t error;
    json_t *json = json_load_file (path, 0, &error);
    ck_assert_msg (json != NULL, "cannot load %s: %s", path, error.text);
    char err [512];
    common_task_t *task = common_task_from_json (json, err, sizeof err);
    ck_assert_msg (task != NULL, "%s does not parse: %s", path, err);
    ck_assert (task->is_module);
    zstr_free (&path);
    if (json_out)
        *json_out = json;
    else
        json_decref (json);
    return task;
}

//  The value of name in size i.
static int64_t
s_size (const common_task_t *task, size_t i, const char *name)
{
    for (size_t k = 0; k < task->sizes [i].nvars; k++)
        if (streq (task->sizes [i].names [k], name))
            return task->sizes [i].values [k];
    ck_abort_msg ("size %zu has no %s", i, name);
    return -1;
}

START_TEST (test_import_folder_writes_one_task_per_problem)
{
    char *out, *err;
    int rc = s_import (&out, &err, "tests/data/kernelbench");
    ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg (strstr (err, "8 imported") && strstr (err, "5 failed")
                   && strstr (err, "no_model 1") && strstr (err, "syntax_error 1")
                   && strstr (err, "no_get_inputs 1") && strstr (err, "no_code 1")
                   && strstr (err, "bad_line 1"), "summary: %s", err);

    //  Named from the path, the level from its folder.
    json_t *line = s_line_for (out, "level1/19_ReLU.py");
    ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "imported");
    ck_assert_str_eq (json_string_value (json_object_get (line, "task")), "L1_19_ReLU");
    ck_assert_int_eq (json_integer_value (json_object_get (line, "sizes")), 3);
    json_decref (line);

    //  Extra sizes: each input constant takes its tail value in a size of its own.
    json_t *json;
    common_task_t *task = s_task ("L1_19_ReLU", &json);
    ck_assert_str_eq (task->backend, "cuda");
    ck_assert_str_eq (task->module.entry, "Model");
    ck_assert_str_eq (task->module.kernel, "any");
    ck_assert_uint_eq (task->nsizes, 3);
    ck_assert_int_eq (s_size (task, 0, "batch_size"), 16);
    ck_assert_int_eq (s_size (task, 0, "dim"), 1024);
    ck_assert_int_eq (s_size (task, 1, "batch_size"), 7);
    ck_assert_int_eq (s_size (task, 1, "dim"), 1024);
    ck_assert_int_eq (s_size (task, 2, "batch_size"), 16);
    ck_assert_int_eq (s_size (task, 2, "dim"), 511);
    ck_assert_uint_eq (task->timing_size, 0);
    //  The reference is the file, byte for byte.
    char *original = testutil_source_path ("tests/data/kernelbench/level1/19_ReLU.py");
    char *text = testutil_read_file (original);
    ck_assert_str_eq (task->reference.source, text);
    ck_assert_int_eq (json_integer_value (json_object_get (json_object_get (json, "x-source"), "level")), 1);
    free (text);
    free (original);
    json_decref (json);
    common_task_destroy (&task);

    //  Hex and underscores read as Python reads them: N = 0x40 -> 31.
    task = s_task ("L1_1_Square_matrix_multiplication_", NULL);
    ck_assert_uint_eq (task->nsizes, 2);
    ck_assert_int_eq (s_size (task, 0, "N"), 64);
    ck_assert_int_eq (s_size (task, 1, "N"), 31);
    common_task_destroy (&task);
    task = s_task ("L1_23_Softmax", NULL);
    ck_assert_int_eq (s_size (task, 0, "dim"), 4096);
    //  softmax(x, dim=1) is a keyword, not the constant: dim varies too.
    ck_assert_uint_eq (task->nsizes, 3);
    ck_assert_int_eq (s_size (task, 2, "dim"), 2047);
    common_task_destroy (&task);

    //  Constants that build the model (get_init_inputs) keep their value.
    task = s_task ("L2_12_Gemm_Multiply_LeakyReLU", NULL);
    ck_assert_uint_eq (task->nsizes, 2);
    ck_assert_uint_eq (task->sizes [0].nvars, 1);
    ck_assert_int_eq (s_size (task, 0, "batch_size"), 32);
    ck_assert_int_eq (s_size (task, 1, "batch_size"), 15);
    common_task_destroy (&task);

    //  Each broken file says why.
    struct { const char *file; const char *problem; const char *reason; } broken [] = {
        { "broken/no_model.py", "no_model", "no top-level 'class Model'" },
        { "broken/no_get_inputs.py", "no_get_inputs", "no top-level 'def get_inputs()'" },
        { "broken/syntax_error.py", "syntax_error", "line 7: '(' was never closed" },
        { "rows.jsonl:3", "no_code", "\"code\"" },
        { "rows.jsonl:4", "bad_line", "not a JSON object" },
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken [0]; i++) {
        line = s_line_for (out, broken [i].file);
        ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "failed");
        ck_assert_str_eq (json_string_value (json_object_get (line, "problem")), broken [i].problem);
        const char *reason = json_string_value (json_object_get (line, "reason"));
        ck_assert_msg (strstr (reason, broken [i].reason), "%s: reason '%s'", broken [i].file, reason);
        json_decref (line);
    }
    //  Statically sound modules import; only --check runs them.
    line = s_line_for (out, "broken/import_error.py");
    ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "imported");
    json_decref (line);
    free (out);
    free (err);
}
END_TEST

START_TEST (test_import_json_lines_keep_what_they_say)
{
    char *out, *err;
    int rc = s_import (&out, &err, "tests/data/kernelbench/rows.jsonl");
    ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
    json_t *line = s_line_for (out, "rows.jsonl:2");
    //  name, level ("level1") and problem_id make the name.
    ck_assert_str_eq (json_string_value (json_object_get (line, "task")), "L1_21_Sigmoid");
    json_decref (line);
    json_t *json;
    common_task_t *task = s_task ("L1_21_Sigmoid", &json);
    ck_assert (strstr (task->reference.source, "torch.sigmoid"));
    json_t *meta = json_object_get (json, "x-source");
    ck_assert_str_eq (json_string_value (json_object_get (meta, "dataset")), "tests");
    ck_assert_str_eq (json_string_value (json_object_get (meta, "name")), "Sigmoid");
    ck_assert_int_eq (json_integer_value (json_object_get (meta, "line")), 2);
    ck_assert_int_eq (json_integer_value (json_object_get (meta, "problem_id")), 21);
    json_decref (json);
    common_task_destroy (&task);
    free (out);
    free (err);
}
END_TEST

//  The same problem twice keeps both: the second is NAME_2.
START_TEST (test_import_names_stay_unique)
{
    char *path = testutil_source_path ("tests/data/kernelbench/level1/19_ReLU.py");
    char *tasks = zsys_sprintf ("%s/tasks", s_dir);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--out", tasks,
                            "--backend", "cpu", "--dtype", "f64", path, path, NULL);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
    ck_assert (strstr (out, "\"task\":\"L1_19_ReLU\""));
    ck_assert (strstr (out, "\"task\":\"L1_19_ReLU_2\""));
    common_task_t *task = s_task ("L1_19_ReLU_2", NULL);
    ck_assert_str_eq (task->backend, "cpu");
    ck_assert_str_eq (task->module.kernel, "torch");
    ck_assert_int_eq (task->module.dtype, DTYPE_F64);
    common_task_destroy (&task);
    free (out);
    free (err);
    free (path);
    zstr_free (&tasks);
}
END_TEST

START_TEST (test_import_says_what_is_wrong)
{
    char *out, *err;
    //  No format, a bad option value, a missing path, a folder without problems.
    int rc = testutil_kgym (s_dir, &out, &err, "import", "x.py", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert (strstr (err, "kgym import kernelbench PATH"));
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--backend", "tpu", "x.py", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert (strstr (err, "--backend 'tpu' is not a target"));
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--kernel", "asm", "x.py", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert (strstr (err, "--kernel wants triton, cuda, any or torch"));
    free (out);
    free (err);
    char *missing = zsys_sprintf ("%s/nothing-here", s_dir);
    rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", missing, NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert (strstr (err, "cannot read") && strstr (err, "nothing-here"));
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", s_dir, NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert (strstr (err, "no .py or .jsonl files under"));
    free (out);
    free (err);
    zstr_free (&missing);
}
END_TEST

//  --check needs the python backend: without it the command says so and
//  writes nothing; with it a sound reference imports. (What --check
//  rejects is in test_pytorch_e2e, which skips without the backend.)
START_TEST (test_import_check_needs_the_python_backend)
{
    char *relu = testutil_source_path ("tests/data/kernelbench/level1/19_ReLU.py");
    char *tasks = zsys_sprintf ("%s/tasks", s_dir);
    char *out, *err;
    bool python = worker_registry_named ("python") != NULL;
    int rc = testutil_kgym (s_dir, &out, &err, "import", "kernelbench", "--check", "--backend", "cpu",
                            "--out", tasks, relu, NULL);
    if (!python) {
        ck_assert_int_eq (rc, 1);
        ck_assert (strstr (err, "--check grades each reference with the python backend"));
        ck_assert_uint_eq (strlen (out), 0);
    }
    else {
        ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
        json_t *line = s_line_for (out, "19_ReLU.py");
        ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "imported");
        json_decref (line);
    }
    free (out);
    free (err);
    free (relu);
    zstr_free (&tasks);
}
END_TEST

//  kgym's name rule, directly.
START_TEST (test_import_name_rule)
{
    char name [TASK_MAX_NAME];
    ck_assert_str_eq (client_import_name ("KernelBench/level1/19_ReLU.py", name, sizeof name), "L1_19_ReLU");
    ck_assert_str_eq (client_import_name ("data/Level_3/x/5_MLP.py", name, sizeof name), "L3_5_MLP");
    ck_assert_str_eq (client_import_name ("ops/my op+fused.py", name, sizeof name), "my_op_fused");
    ck_assert_str_eq (client_import_name ("levelx/a.py", name, sizeof name), "a");
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client_import");
    TCase *tc = tcase_create ("import");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_import_folder_writes_one_task_per_problem);
    tcase_add_test (tc, test_import_json_lines_keep_what_they_say);
    tcase_add_test (tc, test_import_names_stay_unique);
    tcase_add_test (tc, test_import_says_what_is_wrong);
    tcase_add_test (tc, test_import_check_needs_the_python_backend);
    tcase_add_test (tc, test_import_name_rule);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
