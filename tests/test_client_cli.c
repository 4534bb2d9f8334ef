/*  test_client_cli - the `kgym` binary says what is wrong (issue #16):
    each test runs the built kgym as a subprocess, alone or against an
    in-process broker (with CURVE for the refusals); and client_options,
    the shared options and number parsers. What needs a fake broker (503
    notices, malformed results) is in test_client_query.
*/
#include "testutil.h"
#include "client_kgym.h"
#include "client_options.h"
#include "broker_server.h"
#include "proto_curve.h"
#include "common_log.h"
#include "kgym_config.h"
#include "worker_registry.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAIT_MS 10000               //  longest wait for one event

static char s_dir [64];             //  scratch directory of the test
static testutil_broker_t s_broker;  //  the "broker" cases' broker (no workers: jobs wait)

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    testutil_dir_make (s_dir, sizeof s_dir, "cli");
    unsetenv ("KGYM_BROKER");
}

static void
s_teardown (void)
{
    testutil_dir_remove (s_dir);
}

static void
s_broker_setup (void)
{
    s_setup ();
    broker_config_t cfg;
    broker_config_default (&cfg);
    testutil_broker_start (&s_broker, &cfg);
}

static void
s_broker_teardown (void)
{
    testutil_broker_stop (&s_broker);
    s_teardown ();
}

//  dir/name (to free).
static char *
s_path (const char *name)
{
    return zsys_sprintf ("%s/%s", s_dir, name);
}

//  Write text to dir/name; its path (to free).
static char *
s_file (const char *name, const char *text)
{
    char *path = s_path (name);
    FILE *file = fopen (path, "w");
    ck_assert_msg (file != NULL, "cannot write %s", path);
    fputs (text, file);
    fclose (file);
    return path;
}

//  Lines in text.
static int
s_lines (const char *text)
{
    int lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    return lines;
}

//  Jobs the broker has taken, by its STATS.
static long long
s_submitted (void)
{
    zstr_send (s_broker.actor, "STATS");
    char *stats = zstr_recv (s_broker.actor);
    json_t *json = json_loads (stats, 0, NULL);
    long long value = json_integer_value (json_object_get (json, "submitted"));
    json_decref (json);
    zstr_free (&stats);
    return value;
}

//  The task and two candidates the submit tests send (no worker grades them).
static void
s_job_files (char **task, char **first, char **second)
{
    *task = s_file ("task.json", "{\"name\": \"t\", \"backend\": \"cpu\"}");
    *first = s_file ("first.json", "{\"source\": \"int f(void) { return 1; }\"}");
    *second = s_file ("second.json", "{\"source\": \"int f(void) { return 2; }\"}");
}

//  --------------------------------------------------------------------------
//  Options and numbers

START_TEST (test_options_parse_numbers_whole_and_in_range)
{
    long long number;
    double real;
    ck_assert_int_eq (client_options_int ("t", "--n", "42", 0, 100, &number), 0);
    ck_assert_int_eq (number, 42);
    const char *bad_ints [] = { "abc", "12x", "2.5", "", " 5", "101", "-1", "99999999999999999999" };
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints [0]; i++)
        ck_assert_msg (client_options_int ("t", "--n", bad_ints [i], 0, 100, &number) == -1,
                       "'%s' was taken as an integer 0..100", bad_ints [i]);
    ck_assert_int_eq (client_options_real ("t", "--s", "2.5", 0, true, 10, "seconds", &real), 0);
    ck_assert_double_eq (real, 2.5);
    const char *bad_reals [] = { "0", "nan", "inf", "1s", "", "10.5", "-3" };
    for (size_t i = 0; i < sizeof bad_reals / sizeof bad_reals [0]; i++)
        ck_assert_msg (client_options_real ("t", "--s", bad_reals [i], 0, true, 10, "seconds",
                                            &real) == -1,
                       "'%s' was taken as seconds in (0, 10]", bad_reals [i]);
    ck_assert_int_eq (client_options_real ("t", "--b", "0", 0, false, 1, "a number", &real), 0);

    //  The shared options, $KGYM_BROKER, the endpoint's form.
    client_options_t opts;
    client_options_init (&opts, "t", 10);
    ck_assert_int_eq (client_options_take (&opts, CLIENT_OPT_TIMEOUT, "2"), 1);
    ck_assert (opts.timeout_given);
    ck_assert_int_eq (client_options_take (&opts, CLIENT_OPT_TIMEOUT, "0"), -1);
    ck_assert_int_eq (client_options_take (&opts, 'x', "y"), 0);
    ck_assert_int_eq (client_options_check (&opts, true), 2);
    setenv ("KGYM_BROKER", "tcp://broker.example:5555", 1);
    ck_assert_int_eq (client_options_check (&opts, true), 0);
    ck_assert_str_eq (opts.broker, "tcp://broker.example:5555");
    client_options_init (&opts, "t", 10);
    ck_assert_int_eq (client_options_take (&opts, CLIENT_OPT_BROKER, "tcp://given:1"), 1);
    ck_assert_int_eq (client_options_check (&opts, true), 0);
    ck_assert_str_eq (opts.broker, "tcp://given:1");
    ck_assert_int_eq (client_options_take (&opts, CLIENT_OPT_CURVE_SECRET, "s"), 1);
    ck_assert_int_eq (client_options_check (&opts, true), 2);
    unsetenv ("KGYM_BROKER");

    char err [256];
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://127.0.0.1:5555", true, err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://[::1]:5555", false, err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_check_endpoint ("ipc:///tmp/kgym", false, err, sizeof err), 0);
    ck_assert_int_eq (client_kgym_check_endpoint ("127.0.0.1:15555", false, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "write tcp://127.0.0.1:15555"), "reason: %s", err);
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://127.0.0.1", false, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "port"), "reason: %s", err);
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://h:99999", false, err, sizeof err), -1);
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://*:5555", false, err, sizeof err), -1);
    ck_assert_int_eq (client_kgym_check_endpoint ("http://h:80", false, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "transport"), "reason: %s", err);
    ck_assert_int_eq (client_kgym_check_endpoint ("tcp://no-such-host.invalid:5555", true, err,
                                                  sizeof err), -1);
    ck_assert_msg (strstr (err, "DNS"), "reason: %s", err);
    //  The library refuses a malformed endpoint with the same reason.
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.endpoint = "localhost:5555";
    ck_assert_ptr_null (client_kgym_new_config (&cfg, err, sizeof err));
    ck_assert_msg (strstr (err, "tcp://localhost:5555"), "reason: %s", err);
}
END_TEST

START_TEST (test_bad_numbers_are_usage_errors)
{
    //  Each: exit 2, stdout empty, one line on stderr naming the option.
    const char *cases [][8] = {
        { "eval", "--seed", "abc", "t.json", "c.json" },
        { "eval", "--seed", "12x", "t.json", "c.json" },
        { "eval", "--trials", "2.5", "t.json", "c.json" },
        { "eval", "--timeout", "-1", "t.json", "c.json" },
        { "eval", "--compile-timeout", "601", "t.json", "c.json" },
        { "submit", "--broker", "tcp://127.0.0.1:9", "--seed", "abc", "t.json", "c.json" },
        { "submit", "--broker", "tcp://127.0.0.1:9", "--deadline", "0", "t.json", "c.json" },
        { "submit", "--broker", "tcp://127.0.0.1:9", "--window", "1e3", "t.json", "c.json" },
        { "jobs", "--broker", "tcp://127.0.0.1:9", "--tag", "x", "--limit", "0" },
        { "tasks", "--broker", "tcp://127.0.0.1:9", "--min-attempts", "-1" },
        { "tasks", "--broker", "tcp://127.0.0.1:9", "--band", "0.2,x" },
        { "stats", "--broker", "tcp://127.0.0.1:9", "--watch=soon" },
        { "fetch", "--broker", "tcp://127.0.0.1:9", "--client-id", "c", "--job", "7a" },
        { "demo", "--workers", "two" },
        { "compile", "--timeout", "forever", "t.json", "c.json" },
    };
    const char *options [] = { "--seed", "--seed", "--trials", "--timeout", "--compile-timeout",
                               "--seed", "--deadline",
                               "--window", "--limit", "--min-attempts", "--band", "--watch", "--job",
                               "--workers", "--timeout" };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        const char *const *c = cases [i];
        char *out, *err;
        int rc = testutil_kgym (s_dir, &out, &err, c [0], c [1], c [2], c [3], c [4], c [5], c [6],
                                c [7], NULL);
        ck_assert_msg (rc == 2, "kgym %s %s %s: exit %d, expected 2 (%s)", c [0], c [1], c [2], rc, err);
        ck_assert_msg (strstr (err, options [i]) && s_lines (err) == 1,
                       "kgym %s %s %s: stderr should be one line naming %s: '%s'", c [0], c [1],
                       c [2], options [i], err);
        ck_assert_str_eq (out, "");
        free (out);
        free (err);
    }
}
END_TEST

START_TEST (test_every_subcommand_prints_its_own_help)
{
    const char *commands [][2] = {
        { "eval", NULL }, { "submit", NULL }, { "compile", NULL }, { "demo", NULL },
        { "cache", NULL }, { "workers", NULL }, { "stats", NULL }, { "job", NULL },
        { "jobs", NULL }, { "results", NULL }, { "tasks", NULL }, { "drain", NULL },
        { "fetch", NULL }, { "keygen", NULL }, { "cache", "--broker=tcp://127.0.0.1:9" },
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands [0]; i++) {
        const char *command = commands [i][0];
        char *out, *err;
        int rc = commands [i][1]?
                 testutil_kgym (s_dir, &out, &err, command, commands [i][1], "--help", NULL):
                 testutil_kgym (s_dir, &out, &err, command, "--help", NULL);
        char want [64];
        snprintf (want, sizeof want, "usage: kgym %s ", command);
        ck_assert_msg (rc == 0, "kgym %s --help: exit %d (%s)", command, rc, err);
        ck_assert_msg (strncmp (out, want, strlen (want)) == 0,
                       "kgym %s --help should start with '%s': '%s'", command, want, out);
        if (commands [i][1])
            ck_assert_msg (strstr (out, "stats --broker"), "kgym cache --broker --help: '%s'", out);
        free (out);
        free (err);
    }
}
END_TEST

//  --------------------------------------------------------------------------
//  Endpoints and security

START_TEST (test_endpoint_errors_say_what_is_wrong)
{
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "stats", "--broker", "127.0.0.1:15555", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "no transport") && strstr (err, "tcp://127.0.0.1:15555"),
                   "a missing tcp:// is named with the fix: '%s'", err);
    free (out);
    free (err);
    rc = testutil_kgym (s_dir, &out, &err, "workers", "--broker", "tcp://no-such-host.invalid:5555",
                        NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (err, "DNS") && strstr (err, "no-such-host.invalid"),
                   "an unresolvable host says DNS: '%s'", err);
    free (out);
    free (err);
    //  $KGYM_BROKER stands in for --broker, and is checked the same way.
    setenv ("KGYM_BROKER", "localhost:1", 1);
    rc = testutil_kgym (s_dir, &out, &err, "stats", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "$KGYM_BROKER") && strstr (err, "tcp://localhost:1"),
                   "the endpoint from the environment says so: '%s'", err);
    free (out);
    free (err);
    unsetenv ("KGYM_BROKER");
    rc = testutil_kgym (s_dir, &out, &err, "stats", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "KGYM_BROKER"), "no broker at all: '%s'", err);
    free (out);
    free (err);
}
END_TEST

START_TEST (test_kgym_broker_from_the_environment)
{
    setenv ("KGYM_BROKER", s_broker.clients, 1);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "stats", "--json", NULL);
    ck_assert_msg (rc == 0, "kgym stats with $KGYM_BROKER: exit %d (%s)", rc, err);
    json_t *stats = json_loads (out, 0, NULL);
    ck_assert_msg (json_is_object (json_object_get (stats, "counts")), "stats: '%s'", out);
    json_decref (stats);
    free (out);
    free (err);
    //  --broker wins over the environment.
    setenv ("KGYM_BROKER", "tcp://no-such-host.invalid:1", 1);
    rc = testutil_kgym (s_dir, &out, &err, "stats", "--json", "--broker", s_broker.clients, NULL);
    ck_assert_msg (rc == 0, "--broker over $KGYM_BROKER: exit %d (%s)", rc, err);
    free (out);
    free (err);
    unsetenv ("KGYM_BROKER");
}
END_TEST

START_TEST (test_curve_refusal_is_named)
{
    if (!zsys_has_curve ())
        return;
    char *trainers = s_path ("trainers");
    ck_assert_int_eq (mkdir (trainers, 0700), 0);
    const char *names [] = { "broker", "trainers/alice", "mallory" };
    char err [256];
    for (int i = 0; i < 3; i++) {
        char *path = s_path (names [i]);
        ck_assert_msg (proto_curve_keygen (path, "t", err, sizeof err) == 0, "keygen: %s", err);
        zstr_free (&path);
    }
    char *secret = s_path ("broker_secret"), *key = s_path ("broker");
    char *alice = s_path ("trainers/alice_secret"), *mallory = s_path ("mallory_secret");
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.curve_secret = secret;
    cfg.trainer_keys = trainers;
    cfg.worker_keys = trainers;
    testutil_broker_t broker;
    testutil_broker_start (&broker, &cfg);

    //  A key the broker does not know: said, at once, not "no reply".
    char *out, *text;
    int rc = testutil_kgym (s_dir, &out, &text, "stats", "--broker", broker.clients,
                            "--curve-secret", mallory, "--broker-key", key, "--timeout", "30", NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "refused our key"), "an unknown key: '%s'", text);
    free (out);
    free (text);
    //  No CURVE towards a CURVE broker.
    rc = testutil_kgym (s_dir, &out, &text, "workers", "--broker", broker.clients, "--timeout", "30",
                        NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "require") && strstr (text, "CURVE"),
                   "CURVE off here, on there: '%s'", text);
    free (out);
    free (text);
    //  submit too stops with the reason.
    char *task, *first, *second;
    s_job_files (&task, &first, &second);
    rc = testutil_kgym (s_dir, &out, &text, "submit", "--broker", broker.clients, "--curve-secret",
                        mallory, "--broker-key", key, "--connect-timeout", "30", task, first, NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "refused our key"), "kgym submit with an unknown key: '%s'", text);
    free (out);
    free (text);
    //  The allowed key gets its answer.
    rc = testutil_kgym (s_dir, &out, &text, "stats", "--json", "--broker", broker.clients,
                        "--curve-secret", alice, "--broker-key", key, NULL);
    ck_assert_msg (rc == 0, "the allowed key: exit %d (%s)", rc, text);
    free (out);
    free (text);
    testutil_broker_stop (&broker);
    zstr_free (&task);
    zstr_free (&first);
    zstr_free (&second);
    zstr_free (&secret);
    zstr_free (&key);
    zstr_free (&alice);
    zstr_free (&mallory);
    zstr_free (&trainers);
}
END_TEST

//  --------------------------------------------------------------------------
//  What the broker knows

START_TEST (test_job_table_and_unknown_names)
{
    //  A job that waits (no worker): its id from ACCEPTED.
    client_kgym_t *client = client_kgym_new (s_broker.clients);
    ck_assert_ptr_nonnull (client);
    json_t *job = json_pack ("{s:{s:s, s:s}, s:{}, s:s}", "task", "name", "t", "backend", "cpu",
                             "candidate", "tag", "tab");
    char err [256];
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof err), 0);
    json_decref (job);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    char id [32];
    snprintf (id, sizeof id, "%llu", (unsigned long long) event.job);

    char *out, *text;
    int rc = testutil_kgym (s_dir, &out, &text, "job", "--broker", s_broker.clients, "--table", id,
                            NULL);
    ck_assert_msg (rc == 0, "kgym job --table: exit %d (%s)", rc, text);
    ck_assert_msg (strncmp (out, "JOB ", 4) == 0 && s_lines (out) == 2,
                   "a header and one row: '%s'", out);
    ck_assert_msg (strstr (out, "STATE") && strstr (out, "queued") && strstr (out, " tab "),
                   "the row has the job's state and tag: '%s'", out);
    ck_assert_msg (!strchr (out, '{'), "columns, not JSON: '%s'", out);
    free (out);
    free (text);
    rc = testutil_kgym (s_dir, &out, &text, "jobs", "--broker", s_broker.clients, "--tag", "tab",
                        "--table", NULL);
    ck_assert_int_eq (rc, 0);
    ck_assert_msg (strncmp (out, "JOB ", 4) == 0 && s_lines (out) == 2, "jobs --table: '%s'", out);
    free (out);
    free (text);

    //  Names the broker does not know: exit 1 with the reason.
    rc = testutil_kgym (s_dir, &out, &text, "results", "--broker", s_broker.clients, "--task",
                        "nosuch", NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "nosuch"), "results of an unknown task: '%s'", text);
    ck_assert_str_eq (out, "");
    free (out);
    free (text);
    rc = testutil_kgym (s_dir, &out, &text, "jobs", "--broker", s_broker.clients, "--group", "nog",
                        NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "group 'nog'"), "jobs of an unknown group: '%s'", text);
    free (out);
    free (text);
    rc = testutil_kgym (s_dir, &out, &text, "job", "--broker", s_broker.clients, "999999", NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (strstr (text, "404"), "an unknown job: '%s'", text);
    free (out);
    free (text);
    //  A band that matches nothing is an answer, not an error.
    rc = testutil_kgym (s_dir, &out, &text, "tasks", "--broker", s_broker.clients, "--band", "0.1,0.2",
                        NULL);
    ck_assert_msg (rc == 0, "an empty band: exit %d (%s)", rc, text);
    free (out);
    free (text);
    client_kgym_destroy (&client);
}
END_TEST

//  --------------------------------------------------------------------------
//  kgym submit

START_TEST (test_batch_is_checked_before_anything_is_sent)
{
    char *task, *first, *second;
    s_job_files (&task, &first, &second);
    char *lines = zsys_sprintf ("{\"task\": \"%s\", \"candidate\": \"%s\"}\n"
                                "{\"task\": \"%s\", \"candidate\": \"%s\"}\n"
                                "\n"
                                "{\"task\": \"%s\", \"candidate\": \"%s\", \"group_size\": -2}\n",
                                task, first, task, second, task, first);
    char *batch = s_file ("batch.jsonl", lines);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_broker.clients, "--batch",
                            batch, NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "batch.jsonl:3:") && strstr (err, "group_size"),
                   "the bad line is named (blank lines are not counted): '%s'", err);
    ck_assert_str_eq (out, "");
    ck_assert_msg (s_submitted () == 0, "a job was sent before the batch was checked");
    free (out);
    free (err);
    //  The same from stdin.
    rc = testutil_kgym_in (s_dir, batch, &out, &err, "submit", "--broker", s_broker.clients,
                           "--batch", "-", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "-:3:"), "stdin's bad line is named: '%s'", err);
    free (out);
    free (err);
    //  A candidate file that is not there, at the end of the command line.
    rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_broker.clients, task, first,
                        "missing.json", NULL);
    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "missing.json"), "the missing file is named: '%s'", err);
    ck_assert_msg (s_submitted () == 0, "a job was sent before the candidates were read");
    free (out);
    free (err);
    //  A good batch from stdin, read twice (checked, then sent): both jobs go.
    char *good = zsys_sprintf ("{\"task\": \"%s\", \"candidate\": \"%s\"}\n"
                               "{\"task\": \"%s\", \"candidate\": \"%s\"}\n", task, first, task,
                               second);
    zstr_free (&batch);
    batch = s_file ("good.jsonl", good);
    rc = testutil_kgym_in (s_dir, batch, &out, &err, "submit", "--broker", s_broker.clients,
                           "--batch", "-", "--deadline", "0.5", NULL);
    ck_assert_int_eq (s_submitted (), 2);
    free (out);
    free (err);
    zstr_free (&good);
    zstr_free (&lines);
    zstr_free (&batch);
    zstr_free (&task);
    zstr_free (&first);
    zstr_free (&second);
}
END_TEST

START_TEST (test_submit_deadline_names_unfinished_jobs)
{
    //  No worker: nothing finishes.
    char *task, *first, *second;
    s_job_files (&task, &first, &second);
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "submit", "--broker", s_broker.clients, "--deadline",
                            "0.5", task, first, second, NULL);
    ck_assert_int_eq (rc, 1);
    ck_assert_str_eq (out, "");
    ck_assert_msg (strstr (err, "no result for ") && strstr (err, "first.json")
                   && strstr (err, "second.json"), "each unfinished job is named: '%s'", err);
    ck_assert_msg (strstr (err, "deadline of 0.5 s passed: 2 of 2 job(s) unfinished"),
                   "the count: '%s'", err);
    free (out);
    free (err);
    zstr_free (&task);
    zstr_free (&first);
    zstr_free (&second);
}
END_TEST

START_TEST (test_demo_exit_status_follows_the_expected_statuses)
{
    //  One example whose candidate is refused before it runs (deterministic):
    //  first expected as it comes, then expected otherwise.
    char *root = s_path ("examples");
    char *dir = s_path ("examples/cpu/matmul");
    char *cands = s_path ("examples/cpu/matmul/candidates");
    ck_assert_int_eq (mkdir (root, 0700), 0);
    zstr_free (&root);
    root = s_path ("examples/cpu");
    ck_assert_int_eq (mkdir (root, 0700), 0);
    ck_assert_int_eq (mkdir (dir, 0700), 0);
    ck_assert_int_eq (mkdir (cands, 0700), 0);
    json_t *task = testutil_load_json ("examples/cpu/matmul_f32/task.json");
    json_t *candidate = testutil_load_json ("examples/cpu/matmul_f32/candidates/bad_option.json");
    char *path = s_path ("examples/cpu/matmul/task.json");
    ck_assert_int_eq (json_dump_file (task, path, 0), 0);
    zstr_free (&path);
    path = s_path ("examples/cpu/matmul/candidates/bad_option.json");
    ck_assert_int_eq (json_dump_file (candidate, path, 0), 0);
    zstr_free (&path);
    json_decref (task);
    json_decref (candidate);
    char *examples = s_path ("examples");
    const char *expected [] = { "{\"bad_option\": \"invalid\"}", "{\"bad_option\": \"ok\"}" };
    for (int i = 0; i < 2; i++) {
        char *file = s_file ("examples/cpu/matmul/expected.json", expected [i]);
        char *out, *err;
        int rc = testutil_kgym (s_dir, &out, &err, "demo", "--backend", "cpu", "--workers", "1",
                                "--examples", examples, NULL);
        if (i == 0)
            ck_assert_msg (rc == 0, "demo with every status as expected: exit %d (%s%s)", rc, out, err);
        else {
            ck_assert_msg (rc == 1, "demo with a missed status: exit %d (%s)", rc, out);
            ck_assert_msg (strstr (err, "1 candidate(s) missed"), "demo says why: '%s'", err);
        }
        free (out);
        free (err);
        zstr_free (&file);
    }
    zstr_free (&examples);
    zstr_free (&root);
    zstr_free (&dir);
    zstr_free (&cands);
}
END_TEST

START_TEST (test_demo_grades_the_pool_for_its_target)
{
    //  A pool of one task (the bundled ReLU's CPU form) with a right and a
    //  wrong expectation; a candidate listed for the GPU only is not graded.
    const char *dirs [] = { "examples", "examples/pytorch", "examples/pytorch/relu",
                            "examples/pytorch/relu/candidates" };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs [0]; i++) {
        char *dir = s_path (dirs [i]);
        ck_assert_int_eq (mkdir (dir, 0700), 0);
        zstr_free (&dir);
    }
    const char *copies [][2] = {
        { "examples/pytorch/l1_relu/task.cpu.json", "examples/pytorch/relu/task.cpu.json" },
        { "examples/pytorch/l1_relu/candidates/torch_naive.json",
          "examples/pytorch/relu/candidates/torch_naive.json" },
        { "examples/pytorch/l1_gelu/candidates/syntax_error.json",
          "examples/pytorch/relu/candidates/syntax_error.json" },
        { "examples/pytorch/l1_relu/candidates/triton_naive.json",
          "examples/pytorch/relu/candidates/triton_naive.json" },
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies [0]; i++) {
        json_t *json = testutil_load_json (copies [i][0]);
        char *path = s_path (copies [i][1]);
        ck_assert_int_eq (json_dump_file (json, path, 0), 0);
        zstr_free (&path);
        json_decref (json);
    }
    char *file = s_file ("examples/pytorch/relu/expected.json",
        "{\"cpu\": {\"eval\": {\"timeout\": 60}, \"torch_naive\": \"ok\", \"syntax_error\": \"ok\"},"
        " \"cuda\": {\"triton_naive\": \"ok\"}}");
    char *examples = s_path ("examples");
    char *out, *err;
    int rc = testutil_kgym (s_dir, &out, &err, "demo", "--backend", "cpu", "--examples", examples,
                            NULL);
    if (worker_registry_find ("cpu", "python")) {
        ck_assert_msg (rc == 1, "one missed status: exit %d (%s%s)", rc, out, err);
        ck_assert_msg (strstr (out, "pytorch/relu") && strstr (out, "torch_naive")
                       && strstr (out, "compile_error"), "both graded: '%s'", out);
        ck_assert_msg (!strstr (out, "triton_naive"), "the GPU's candidate is not graded: '%s'", out);
        ck_assert_msg (strstr (out, "2 candidates graded; 1 of 2"), "the count: '%s'", out);
        ck_assert_msg (strstr (err, "1 candidate(s) missed"), "demo says why: '%s'", err);
    }
    else {
        ck_assert_msg (rc == 0, "nothing to grade: exit %d (%s%s)", rc, out, err);
        ck_assert_msg (strstr (out, "grades no Python on cpu: the PyTorch pool is left out"),
                       "the demo says the pool is left out: '%s'", out);
        ck_assert_msg (strstr (out, "0 candidates graded"), "nothing graded: '%s'", out);
    }
    free (out);
    free (err);
    zstr_free (&file);
    zstr_free (&examples);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client_cli");
    TCase *alone = tcase_create ("alone");
    tcase_set_timeout (alone, 120);
    tcase_add_checked_fixture (alone, s_setup, s_teardown);
    tcase_add_test (alone, test_options_parse_numbers_whole_and_in_range);
    tcase_add_test (alone, test_bad_numbers_are_usage_errors);
    tcase_add_test (alone, test_every_subcommand_prints_its_own_help);
    tcase_add_test (alone, test_endpoint_errors_say_what_is_wrong);
    tcase_add_test (alone, test_curve_refusal_is_named);
    tcase_add_test (alone, test_demo_exit_status_follows_the_expected_statuses);
    tcase_add_test (alone, test_demo_grades_the_pool_for_its_target);
    suite_add_tcase (suite, alone);
    TCase *broker = tcase_create ("broker");
    tcase_set_timeout (broker, 120);
    tcase_add_checked_fixture (broker, s_broker_setup, s_broker_teardown);
    tcase_add_test (broker, test_kgym_broker_from_the_environment);
    tcase_add_test (broker, test_job_table_and_unknown_names);
    tcase_add_test (broker, test_batch_is_checked_before_anything_is_sent);
    tcase_add_test (broker, test_submit_deadline_names_unfinished_jobs);
    suite_add_tcase (suite, broker);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
