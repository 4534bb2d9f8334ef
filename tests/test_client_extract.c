/*  test_client_extract - a model's answer to a PyTorch task -> its
    candidate: every case of tests/data/extract_cases.json (the table
    python/tests/test_extract.py holds the Python client to as well), the
    entry a task asks for, and `kgym submit --completion` through a real
    broker: a gradable answer is sent as the candidate, one without an
    answer gets its invalid line at once and is not sent.
*/
#include "testutil.h"
#include "client_extract.h"
#include "common_log.h"
#include <czmq.h>
#include <string.h>

START_TEST (test_extract_cases_of_the_shared_table)
{
    json_t *cases = testutil_load_json ("tests/data/extract_cases.json");
    ck_assert_uint_ge (json_array_size (cases), 20);
    size_t i;
    json_t *c;
    json_array_foreach (cases, i, c) {
        const char *name = json_string_value (json_object_get (c, "name"));
        const char *completion = json_string_value (json_object_get (c, "completion"));
        const char *entry = json_string_value (json_object_get (c, "entry"));
        const char *source = json_string_value (json_object_get (c, "source"));
        const char *problem = json_string_value (json_object_get (c, "problem"));
        char why [512] = "";
        json_t *candidate = client_extract_python (completion, entry, why, sizeof why);
        if (source) {
            ck_assert_msg (candidate != NULL, "%s: no candidate (%s)", name, why);
            ck_assert_str_eq (json_string_value (json_object_get (candidate, "lang")), "python");
            ck_assert_msg (streq (json_string_value (json_object_get (candidate, "source")), source),
                           "%s: picked\n%s\nwanted\n%s", name,
                           json_string_value (json_object_get (candidate, "source")), source);
        }
        else {
            ck_assert_msg (candidate == NULL, "%s: a candidate where none was wanted", name);
            ck_assert_msg (strstr (why, problem), "%s: problem '%s', wanted '%s'", name, why, problem);
        }
        json_decref (candidate);
    }
    json_decref (cases);
}
END_TEST

START_TEST (test_extract_entry_of_a_task)
{
    json_t *task = json_pack ("{s:s, s:{s:s, s:s}}", "name", "t", "reference", "lang", "python",
                              "source", "x");
    ck_assert_str_eq (client_extract_entry (task), "ModelNew");
    json_object_set_new (task, "python", json_pack ("{s:s}", "entry", "rmsnorm"));
    ck_assert_str_eq (client_extract_entry (task), "rmsnorm");
    json_object_set_new (task, "python", json_pack ("{s:s, s:s}", "entry", "Model",
                                                    "candidate_entry", "Fast"));
    ck_assert_str_eq (client_extract_entry (task), "Fast");
    json_t *kernel = json_pack ("{s:s, s:{s:s}}", "name", "k", "reference", "source", "void f() {}");
    ck_assert_ptr_null (client_extract_entry (kernel));
    char feedback [1024];
    client_extract_feedback ("no fenced ```python block with the module", feedback, sizeof feedback);
    ck_assert (strstr (feedback, "kgym could not grade this completion: no fenced ```python block"));
    ck_assert (strstr (feedback, "Expected: the whole module in one ```python block defining"));
    json_decref (task);
    json_decref (kernel);
}
END_TEST

//  A broker with no worker: sent jobs wait; what was sent is in its STATS.
static char s_dir [64];
static testutil_broker_t s_broker;

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    testutil_dir_make (s_dir, sizeof s_dir, "extract");
    unsetenv ("KGYM_BROKER");
    broker_config_t cfg;
    broker_config_default (&cfg);
    testutil_broker_start (&s_broker, &cfg);
}

static void
s_teardown (void)
{
    testutil_broker_stop (&s_broker);
    testutil_dir_remove (s_dir);
}

static char *
s_file (const char *name, const char *text)
{
    char *path = zsys_sprintf ("%s/%s", s_dir, name);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fputs (text, file);
    fclose (file);
    return path;
}

START_TEST (test_submit_completion_sends_the_answer_or_says_why_not)
{
    char *task = s_file ("task.json", "{\"name\": \"L1_19_ReLU\", \"backend\": \"cpu\", "
                         "\"reference\": {\"lang\": \"python\", \"source\": \"import torch\\n\"}}");
    char *none = s_file ("none.md", "I would write a kernel, but here is only prose.\n");
    char *cut = s_file ("cut.md", "```python\nclass ModelNew:\n    pass\n");
    char *good = s_file ("good.md", "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n"
                         "    def forward(self, x):\n        return x.clamp(min=0)\n```\n");
    //  The two without an answer get their lines at once; the good one is sent
    //  and waits for a worker that never comes (--deadline ends the run).
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_broker.clients,
                            "--deadline", "2", task, "--completion", none, "--completion", cut,
                            "--completion", good, NULL);
    ck_assert_msg (rc == 1, "exit %d (the deadline should end it): %s", rc, err);
    ck_assert_msg (strstr (err, good) && strstr (err, "within the deadline"), "stderr: %s", err);
    int lines = 0;
    for (char *line = strtok (out, "\n"); line; line = strtok (NULL, "\n")) {
        json_t *json = json_loads (line, 0, NULL);
        ck_assert_ptr_nonnull (json);
        const char *candidate = json_string_value (json_object_get (json, "candidate"));
        ck_assert (streq (candidate, none) || streq (candidate, cut));
        ck_assert_str_eq (json_string_value (json_object_get (json, "status")), "invalid");
        ck_assert_str_eq (json_string_value (json_object_get (json, "error")), "extract");
        ck_assert (json_is_null (json_object_get (json, "reward")));
        const char *feedback = json_string_value (json_object_get (json, "feedback"));
        ck_assert (strstr (feedback, streq (candidate, cut)? "never closed": "no fenced ```python block"));
        json_decref (json);
        lines++;
    }
    ck_assert_int_eq (lines, 2);
    //  Only the good one reached the broker, with the block as its candidate.
    zstr_send (s_broker.actor, "STATS");
    char *stats = zstr_recv (s_broker.actor);
    json_t *json = json_loads (stats, 0, NULL);
    ck_assert_int_eq (json_integer_value (json_object_get (json, "submitted")), 1);
    json_decref (json);
    zstr_free (&stats);
    free (out);
    free (err);

    //  A C/CUDA task takes no --completion: said, nothing sent.
    char *kernel = s_file ("kernel.json", "{\"name\": \"k\", \"backend\": \"cpu\"}");
    rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_broker.clients, kernel,
                        "--completion", good, NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert (strstr (err, "--completion reads the Python answers of PyTorch tasks"));
    ck_assert (strstr (err, "nothing was sent"));
    free (out);
    free (err);
    zstr_free (&task);
    zstr_free (&none);
    zstr_free (&cut);
    zstr_free (&good);
    zstr_free (&kernel);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client_extract");
    TCase *tc = tcase_create ("extract");
    tcase_add_test (tc, test_extract_cases_of_the_shared_table);
    tcase_add_test (tc, test_extract_entry_of_a_task);
    suite_add_tcase (suite, tc);
    TCase *submit = tcase_create ("submit");
    tcase_add_checked_fixture (submit, s_setup, s_teardown);
    tcase_add_test (submit, test_submit_completion_sends_the_answer_or_says_why_not);
    suite_add_tcase (suite, submit);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
