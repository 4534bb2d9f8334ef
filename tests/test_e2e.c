/*  test_e2e - the spine through real processes and sockets.

    Starts kgym-broker and two kgym-worker processes (CPU backend) on
    loopback, submits every bundled CPU example through the client library
    and checks each verdict against the example's expected.json; hostile
    candidates included, after which the workers must still grade. Then
    floods the broker with malformed frames and checks each gets an ERROR
    while valid jobs still pass through. Last, a worker started with
    --max-job-memory and --python shows both reach its backends.
*/
#include "testutil.h"
#include "client_kgym.h"
#include "proto_msg.h"
#include "kgym_config.h"
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pid_t s_pids [3];
static char s_client_ep [64], s_worker_ep [64];
static char s_cache_dir [] = "/tmp/kgym-test-e2e-XXXXXX";


//  Start kgym-broker and nworkers CPU kgym-workers, each with the options
//  in extra (NULL-terminated, may be NULL).
static void
s_start (int nworkers, const char *const *extra)
{
    ck_assert_ptr_nonnull (mkdtemp (s_cache_dir));
    snprintf (s_client_ep, sizeof s_client_ep, "tcp://127.0.0.1:%d", testutil_free_port ());
    snprintf (s_worker_ep, sizeof s_worker_ep, "tcp://127.0.0.1:%d", testutil_free_port ());
    char broker [512], worker [512], cache [256];
    snprintf (broker, sizeof broker, "%s/broker/kgym-broker", KGYM_BUILD_DIR);
    snprintf (worker, sizeof worker, "%s/worker/kgym-worker", KGYM_BUILD_DIR);
    snprintf (cache, sizeof cache, "%s/modules.sqlite", s_cache_dir);
    char *bargv[] = { broker, "--clients", s_client_ep, "--workers", s_worker_ep,
                      "--heartbeat", "300", NULL };
    s_pids [0] = testutil_spawn (bargv);
    for (int i = 1; i <= nworkers; i++) {
        char name [32];
        snprintf (name, sizeof name, "e2e-worker%d", i);
        char *wargv [24] = { worker, "--broker", s_worker_ep, "--backend", "cpu", "--cache", cache,
                             "--name", name, "--heartbeat", "300", NULL };
        for (size_t k = 0, at = 11; extra && extra [k] && at < 23; k++)
            wargv [at++] = (char *) extra [k];
        s_pids [i] = testutil_spawn (wargv);
    }
}

static void
s_setup (void)
{
    s_start (2, NULL);
}

static void
s_teardown (void)
{
    for (int i = 2; i >= 0; i--)
        if (s_pids [i] > 0) {
            kill (s_pids [i], SIGTERM);
            int status;
            waitpid (s_pids [i], &status, 0);
            s_pids [i] = 0;
        }
    char command [300];
    snprintf (command, sizeof command, "rm -rf %s", s_cache_dir);
    ck_assert_int_eq (system (command), 0);
    strcpy (s_cache_dir, "/tmp/kgym-test-e2e-XXXXXX");
}

//  One job of the run with what it should come back as.
typedef struct {
    char name [256];
    char expected [32];
    json_t *result;
} s_case_t;

//  Submit every CPU example; returns the number of cases.
static size_t
s_submit_examples (client_kgym_t *client, s_case_t *cases, size_t max)
{
    char *root = testutil_source_path ("examples/cpu");
    DIR *dir = opendir (root);
    ck_assert_ptr_nonnull (dir);
    size_t n = 0;
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (entry->d_name [0] == '.')
            continue;
        char path [1024];
        snprintf (path, sizeof path, "%s/%s/task.json", root, entry->d_name);
        json_t *task = json_load_file (path, 0, NULL);
        if (!task)
            continue;
        snprintf (path, sizeof path, "%s/%s/expected.json", root, entry->d_name);
        json_t *expected = json_load_file (path, 0, NULL);
        ck_assert_msg (expected != NULL, "%s missing", path);
        const char *key;
        json_t *value;
        json_object_foreach (expected, key, value) {
            if (!json_is_string (value) || n == max)
                continue;
            snprintf (path, sizeof path, "%s/%s/candidates/%s.json", root, entry->d_name, key);
            json_t *candidate = json_load_file (path, 0, NULL);
            ck_assert_msg (candidate != NULL, "%s missing", path);
            json_t *job = json_pack ("{s:O, s:o, s:{s:f}}", "task", task, "candidate", candidate,
                                     "eval", "timeout", 6.0);
            char err [256];
            ck_assert_int_eq (client_kgym_submit (client, n + 1, job, err, sizeof err), 0);
            json_decref (job);
            snprintf (cases [n].name, sizeof cases [n].name, "%s/%s", entry->d_name, key);
            snprintf (cases [n].expected, sizeof cases [n].expected, "%s", json_string_value (value));
            cases [n].result = NULL;
            n++;
        }
        json_decref (expected);
        json_decref (task);
    }
    closedir (dir);
    free (root);
    return n;
}

//  Wait for results of refs 1..n (and count ACCEPTED, skip the 503 notice);
//  fails on a 120 s silence.
static void
s_collect (client_kgym_t *client, s_case_t *cases, size_t n, size_t *accepted)
{
    size_t got = 0;
    while (got < n) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, 120000, &event) == 0,
                       "no reply for 120 s with %zu of %zu results in", got, n);
        if (event.type == CLIENT_EVENT_ACCEPTED)
            (*accepted)++;
        else
        if (event.code == PROTO_ERR_NO_WORKER) {
            //  A job that overtook its workers' READY: told so (503), it waits.
        }
        else
        if (event.type == CLIENT_EVENT_RESULT) {
            ck_assert (event.ref >= 1 && event.ref <= n);
            ck_assert_msg (cases [event.ref - 1].result == NULL, "two results for %s",
                           cases [event.ref - 1].name);
            cases [event.ref - 1].result = json_incref (event.result);
            got++;
        }
        else
            ck_abort_msg ("unexpected ERROR %u: %s", event.code, event.reason);
        client_event_clear (&event);
    }
}

//  Submit gelu_f32 with its naive (correct) candidate as ref.
static void
s_submit_gelu (client_kgym_t *client, uint64_t ref)
{
    json_t *task = testutil_load_json ("examples/cpu/gelu_f32/task.json");
    json_t *candidate = testutil_load_json ("examples/cpu/gelu_f32/candidates/naive.json");
    json_t *job = json_pack ("{s:o, s:o}", "task", task, "candidate", candidate);
    char err [256];
    ck_assert_msg (client_kgym_submit (client, ref, job, err, sizeof err) == 0, "submit: %s", err);
    json_decref (job);
}

START_TEST (test_examples_graded_as_expected_through_broker_and_two_workers)
{
    client_kgym_t *client = client_kgym_new (s_client_ep);
    ck_assert_ptr_nonnull (client);
    s_case_t cases [256];
    size_t n = s_submit_examples (client, cases, 250);
    ck_assert_msg (n >= 24, "expected the bundled CPU examples, found %zu", n);
    size_t accepted = 0;
    s_collect (client, cases, n, &accepted);
    int workers_seen [2] = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        const char *status = json_string_value (json_object_get (cases [i].result, "status"));
        ck_assert_msg (status && strcmp (status, cases [i].expected) == 0, "%s: expected %s, got %s (%s)",
                       cases [i].name, cases [i].expected, status,
                       json_string_value (json_object_get (cases [i].result, "message")));
        const char *worker = json_string_value (json_object_get (cases [i].result, "worker"));
        if (worker && strstr (worker, "e2e-worker1"))
            workers_seen [0]++;
        if (worker && strstr (worker, "e2e-worker2"))
            workers_seen [1]++;
        json_decref (cases [i].result);
    }
    ck_assert_msg (workers_seen [0] > 0 && workers_seen [1] > 0,
                   "both workers should have graded jobs (%d, %d)", workers_seen [0], workers_seen [1]);
    //  After every hostile candidate, the workers still grade.
    s_case_t after [1];
    s_submit_gelu (client, 1);
    strcpy (after [0].name, "gelu_f32/naive after the hostile ones");
    after [0].result = NULL;
    s_collect (client, after, 1, &accepted);
    ck_assert_str_eq (json_string_value (json_object_get (after [0].result, "status")), "ok");
    json_decref (after [0].result);
    client_kgym_destroy (&client);
}
END_TEST

//  Raw frames to the broker's client socket; returns the ERROR code seen (0: none).
static uint32_t
s_send_raw (zsock_t *dealer, zmsg_t *msg)
{
    ck_assert_int_eq (zmsg_send (&msg, dealer), 0);
    proto_msg_t *reply = proto_msg_new (PROTO_HEARTBEAT);
    uint32_t code = 0;
    zpoller_t *poller = zpoller_new (dealer, NULL);
    while (zpoller_wait (poller, 5000)) {
        if (proto_msg_recv (reply, dealer) != 0)
            continue;
        if (reply->cmd == PROTO_ERROR) {
            code = reply->code;
            break;
        }
    }
    zpoller_destroy (&poller);
    proto_msg_destroy (&reply);
    return code;
}

START_TEST (test_malformed_frames_get_errors_and_change_nothing)
{
    zsock_t *dealer = zsock_new_dealer (s_client_ep);
    ck_assert_ptr_nonnull (dealer);
    //  Random bytes as a single frame.
    zmsg_t *msg = zmsg_new ();
    unsigned char junk [300];
    for (size_t i = 0; i < sizeof junk; i++)
        junk [i] = (unsigned char) (i * 131 + 7);
    zmsg_addmem (msg, junk, sizeof junk);
    ck_assert_int_eq (s_send_raw (dealer, msg), PROTO_ERR_MALFORMED);
    //  A good signature with a truncated msgpack header.
    msg = zmsg_new ();
    unsigned char sig [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, PROTO_SUBMIT };
    zmsg_addmem (msg, sig, sizeof sig);
    unsigned char truncated [] = { 0x82, 0xa3, 'r', 'e' };
    zmsg_addmem (msg, truncated, sizeof truncated);
    ck_assert_int_eq (s_send_raw (dealer, msg), PROTO_ERR_MALFORMED);
    //  A header whose ref is a string.
    msg = zmsg_new ();
    zmsg_addmem (msg, sig, sizeof sig);
    unsigned char wrong_type [] = { 0x82, 0xa3, 'r', 'e', 'f', 0xa1, 'x',
                                    0xa7, 'b', 'a', 'c', 'k', 'e', 'n', 'd', 0xa3, 'c', 'p', 'u' };
    zmsg_addmem (msg, wrong_type, sizeof wrong_type);
    zmsg_addstr (msg, "body");
    ck_assert_int_eq (s_send_raw (dealer, msg), PROTO_ERR_MALFORMED);
    //  An unknown command.
    msg = zmsg_new ();
    unsigned char unknown [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, 99 };
    zmsg_addmem (msg, unknown, sizeof unknown);
    unsigned char empty_map [] = { 0x80 };
    zmsg_addmem (msg, empty_map, sizeof empty_map);
    uint32_t code = s_send_raw (dealer, msg);
    ck_assert_msg (code == PROTO_ERR_UNKNOWN_COMMAND || code == PROTO_ERR_MALFORMED,
                   "unknown command got %u", code);
    zsock_destroy (&dealer);

    //  A job body that is not a job: graded invalid, not lost.
    client_kgym_t *client = client_kgym_new (s_client_ep);
    char err [256];
    unsigned char not_a_job [] = { 0x93, 1, 2, 3 };
    ck_assert_int_eq (client_kgym_submit_encoded (client, 7, "cpu", NULL, not_a_job, sizeof not_a_job,
                                                  err, sizeof err), 0);
    //  And a valid job afterwards still passes.
    s_submit_gelu (client, 8);
    int results = 0;
    while (results < 2) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, 60000, &event) == 0, "no result within 60 s");
        if (event.type == CLIENT_EVENT_RESULT) {
            const char *status = json_string_value (json_object_get (event.result, "status"));
            if (event.ref == 7)
                ck_assert_str_eq (status, "invalid");
            else
                ck_assert_str_eq (status, "ok");
            results++;
        }
        client_event_clear (&event);
    }
    client_kgym_destroy (&client);
}
END_TEST

//  kgym-worker --max-job-memory and --python reach the backends.
static const char *const s_option_args [] = {
    "--max-job-memory", "64K", "--python", "/nonexistent/kgym/python3", NULL
};

static void
s_setup_options (void)
{
    s_start (1, s_option_args);
}

START_TEST (test_worker_options_reach_the_backends)
{
    client_kgym_t *client = client_kgym_new (s_client_ep);
    ck_assert_ptr_nonnull (client);
    //  gelu_f32's first size holds 2 MiB of tensors: over the worker's 64 KiB a job.
    s_submit_gelu (client, 1);
    //  A PyTorch-reference task: the python backend starts with the interpreter it was given.
    json_t *job = json_pack ("{s:{s:s, s:s, s:{s:s, s:s}}, s:{s:s, s:s}}",
                     "task", "name", "relu", "backend", "cpu", "reference", "lang", "python",
                     "source", "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                               "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(8)]\n"
                               "def get_init_inputs():\n    return []\n",
                     "candidate", "lang", "python", "source", "import torch\nclass ModelNew(torch.nn.Module):\n"
                               "    def forward(self, x):\n        return torch.relu(x)\n");
    char err [256];
    ck_assert_msg (client_kgym_submit (client, 2, job, err, sizeof err) == 0, "submit: %s", err);
    json_decref (job);
    s_case_t cases [2] = { { .name = "gelu over --max-job-memory" }, { .name = "python with --python" } };
    size_t accepted = 0;
    s_collect (client, cases, 2, &accepted);
    const char *status = json_string_value (json_object_get (cases [0].result, "status"));
    const char *message = json_string_value (json_object_get (cases [0].result, "message"));
    ck_assert_msg (status && strcmp (status, "invalid") == 0 && message
                   && strstr (message, "this worker allows 6.1e-05 GiB per job (--max-job-memory)"),
                   "%s: %s", status, message);
    status = json_string_value (json_object_get (cases [1].result, "status"));
    message = json_string_value (json_object_get (cases [1].result, "message"));
    ck_assert_msg (status && strcmp (status, "internal_error") == 0 && message
                   && strstr (message, "'/nonexistent/kgym/python3' is not one (--python PATH)"),
                   "%s: %s", status, message);
    for (size_t i = 0; i < 2; i++)
        json_decref (cases [i].result);
    client_kgym_destroy (&client);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("e2e");
    TCase *tc = tcase_create ("processes");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 300);
    tcase_add_test (tc, test_examples_graded_as_expected_through_broker_and_two_workers);
    tcase_add_test (tc, test_malformed_frames_get_errors_and_change_nothing);
    suite_add_tcase (suite, tc);
    TCase *options = tcase_create ("worker options");
    tcase_add_checked_fixture (options, s_setup_options, s_teardown);
    tcase_set_timeout (options, 300);
    tcase_add_test (options, test_worker_options_reach_the_backends);
    suite_add_tcase (suite, options);
    return testutil_run_suite (suite);
}
