/*  test_client - client_kgym and `kgym submit` against an in-process broker
    and fake workers (actors that answer each JOB with a result built from
    the job they got, so the test can see the job went through intact).  */
#include "testutil.h"
#include "client_kgym.h"
#include "client_submit.h"
#include "client_admin.h"
#include "broker_server.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/stat.h>

#define WAIT_MS 5000

//  --------------------------------------------------------------------------
//  A fake worker: READY, then each JOB answered with {"status", "reward",
//  "echo": <the job's candidate>, "tag": <job tag>}. A candidate whose
//  "source" is "fail" gets status "incorrect".

static int s_worker_delay_ms = 0;      //  how long the fake worker "works" on a job

static void
s_fake_worker (zsock_t *pipe, void *args)
{
    const char *endpoint = (const char *) args;
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    proto_sock_configure (sock, false);
    zsock_connect (sock, "%s", endpoint);
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->device, "fake");
    proto_msg_set_str (msg->name, "fake-worker");
    msg->capacity = 4;
    proto_msg_send (msg, sock);
    zsock_signal (pipe, 0);

    zpoller_t *poller = zpoller_new (pipe, sock, NULL);
    while (true) {
        void *which = zpoller_wait (poller, 1000);
        if (which == pipe || zpoller_terminated (poller))
            break;
        if (which != sock)
            continue;
        if (proto_msg_recv (msg, sock) != 0)
            continue;
        if (msg->cmd == PROTO_HEARTBEAT) {
            proto_msg_reset (msg, PROTO_HEARTBEAT);
            proto_msg_send (msg, sock);
            continue;
        }
        if (msg->cmd != PROTO_JOB)
            continue;
        if (s_worker_delay_ms) {
            //  Simulated work; a $TERM still ends it at once.
            zpoller_t *work = zpoller_new (pipe, NULL);
            bool stop = zpoller_wait (work, s_worker_delay_ms) == pipe;
            zpoller_destroy (&work);
            if (stop)
                break;
        }
        json_t *job = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), NULL, NULL, 0);
        json_t *candidate = json_object_get (job, "candidate");
        const char *source = json_string_value (json_object_get (candidate, "source"));
        bool fail = source && streq (source, "fail");
        json_t *result = json_pack ("{s:s, s:f, s:O, s:O, s:O}",
                                    "status", fail? "incorrect": "ok", "reward", fail? -0.5: 1.25,
                                    "echo", candidate? candidate: json_null (),
                                    "eval", json_object_get (job, "eval")? json_object_get (job, "eval"): json_null (),
                                    "tag", json_object_get (job, "tag")? json_object_get (job, "tag"): json_null ());
        char *data;
        size_t size;
        proto_mpk_encode (result, &data, &size);
        zframe_t *body = zframe_new (data, size);
        free (data);
        json_decref (result);
        json_decref (job);
        uint64_t id = msg->job;
        uint32_t attempt = msg->attempt;
        proto_msg_reset (msg, PROTO_RESULT);
        msg->job = id;
        msg->attempt = attempt;
        proto_msg_set_body (msg, &body);
        proto_msg_send (msg, sock);
    }
    zpoller_destroy (&poller);
    proto_msg_destroy (&msg);
    zsock_destroy (&sock);
}

//  Broker + one fake worker.
typedef struct {
    testutil_broker_t broker;
    zactor_t *worker;
    char *clients;              //  the broker's client endpoint (borrowed)
    char *workers;              //  its worker endpoint (borrowed)
} s_setup_t;

//  Broker with this config (endpoints default to loopback, any port) + maybe a worker.
static void
s_setup_start_cfg (s_setup_t *setup, broker_config_t *cfg, bool with_worker)
{
    common_log_set_level (LOG_LEVEL_WARN);
    testutil_broker_start (&setup->broker, cfg);
    setup->clients = setup->broker.clients;
    setup->workers = setup->broker.workers;
    setup->worker = with_worker? zactor_new (s_fake_worker, setup->workers): NULL;
}

static void
s_setup_start (s_setup_t *setup, uint32_t max_queue, bool with_worker)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.max_queue = max_queue;
    s_setup_start_cfg (setup, &cfg, with_worker);
}

static void
s_setup_stop (s_setup_t *setup)
{
    zactor_destroy (&setup->worker);
    testutil_broker_stop (&setup->broker);
    setup->clients = setup->workers = NULL;
}

static json_t *
s_job (const char *source, const char *tag)
{
    json_t *job = json_pack ("{s:{s:s, s:s}, s:{s:s}, s:{s:f}}",
                             "task", "name", "vadd", "backend", "cpu",
                             "candidate", "source", source,
                             "eval", "timeout", 2.5);
    if (tag)
        json_object_set_new (job, "tag", json_string (tag));
    return job;
}

//  Next event within WAIT_MS (fails the test otherwise).
static void
s_next_event (client_kgym_t *client, client_event_t *event)
{
    ck_assert_msg (client_kgym_recv (client, WAIT_MS, event) == 0, "no event within %d ms", WAIT_MS);
}

START_TEST (test_client_round_trip)
{
    s_setup_t setup;
    s_setup_start (&setup, 1000, true);
    client_kgym_t *client = client_kgym_new (setup.clients);
    ck_assert_ptr_nonnull (client);
    char err [256];
    json_t *job = s_job ("void f(void) {}", "t-1");
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);

    client_event_t event;
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_uint_gt (event.job, 0);
    uint64_t id = event.job;
    client_event_clear (&event);

    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_uint_eq (event.job, id);
    ck_assert_str_eq (event.worker, "fake-worker");
    json_t *result = event.result;
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
    ck_assert_double_eq (json_real_value (json_object_get (result, "reward")), 1.25);
    ck_assert_int_eq (json_integer_value (json_object_get (result, "job")), (json_int_t) id);
    ck_assert (json_is_real (json_object_get (result, "queue_s")));
    ck_assert_str_eq (json_string_value (json_object_get (result, "worker")), "fake-worker");
    ck_assert_str_eq (json_string_value (json_object_get (result, "tag")), "t-1");
    //  The job went through the wire intact.
    ck_assert (json_equal (json_object_get (result, "echo"), json_object_get (job, "candidate")));
    ck_assert (json_equal (json_object_get (result, "eval"), json_object_get (job, "eval")));

    //  A result line: "candidate" first, then the result's keys in order.
    json_t *line = client_result_line (result, "cand.json");
    const char *first = json_object_iter_key (json_object_iter (line));
    ck_assert_str_eq (first, "candidate");
    ck_assert_str_eq (json_string_value (json_object_get (line, "candidate")), "cand.json");
    ck_assert_uint_eq (json_object_size (line), json_object_size (result) + 1);
    char *text = json_dumps (line, JSON_COMPACT);
    ck_assert_msg (strncmp (text, "{\"candidate\":\"cand.json\",\"status\":\"ok\",", 39) == 0,
                   "line: %s", text);
    free (text);
    json_decref (line);
    json_t *number = json_integer (1);
    ck_assert_ptr_null (client_result_line (number, "x"));
    json_decref (number);
    client_event_clear (&event);
    ck_assert_ptr_null (event.result);

    //  Nothing more: recv times out.
    ck_assert_int_eq (client_kgym_recv (client, 50, &event), -1);

    //  A job without task.backend is refused before sending.
    json_object_del (json_object_get (job, "task"), "backend");
    ck_assert_int_eq (client_kgym_submit (client, 2, job, err, sizeof (err)), -1);
    ck_assert_msg (strstr (err, "backend"), "reason: %s", err);
    json_decref (job);
    client_kgym_destroy (&client);
    client_kgym_destroy (&client);
    s_setup_stop (&setup);
}
END_TEST

START_TEST (test_client_error_event)
{
    //  No worker, a queue of one: the second job is refused with its ref.
    s_setup_t setup;
    s_setup_start (&setup, 1, false);
    client_kgym_t *client = client_kgym_new (setup.clients);
    char err [256];
    json_t *job = s_job ("x", NULL);
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);
    ck_assert_int_eq (client_kgym_submit (client, 2, job, err, sizeof (err)), 0);
    client_event_t event;
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ERROR);
    ck_assert_uint_eq (event.code, PROTO_ERR_OVERLOADED);
    ck_assert_uint_eq (event.ref, 2);
    ck_assert (client_kgym_heard (client));
    json_decref (job);
    client_kgym_destroy (&client);
    s_setup_stop (&setup);
}
END_TEST

//  --------------------------------------------------------------------------
//  kgym submit

//  A scratch directory with files; removed at the end.
static char s_dir [64];

static void
s_write (const char *name, const char *text)
{
    char path [256];
    snprintf (path, sizeof (path), "%s/%s", s_dir, name);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fputs (text, file);
    fclose (file);
}

static char *
s_path (const char *name)
{
    return zsys_sprintf ("%s/%s", s_dir, name);
}

//  Run client_submit_main with stdout captured; returns the exit status.
static int
s_run_submit (char **argv, char **output)
{
    int argc = 0;
    while (argv [argc])
        argc++;
    char *out_path = s_path ("stdout.txt");
    fflush (stdout);
    int saved = dup (STDOUT_FILENO);
    int fd = open (out_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ck_assert_int_ge (fd, 0);
    dup2 (fd, STDOUT_FILENO);
    close (fd);
    int rc = client_submit_main (argc, argv);
    fflush (stdout);
    dup2 (saved, STDOUT_FILENO);
    close (saved);
    FILE *file = fopen (out_path, "r");
    char *text = calloc (1, 1 << 16);
    size_t size = fread (text, 1, (1 << 16) - 1, file);
    text [size] = 0;
    fclose (file);
    zstr_free (&out_path);
    *output = text;
    return rc;
}

static void
s_dir_setup (void)
{
    testutil_dir_make (s_dir, sizeof (s_dir), "client");
    s_write ("task.json", "{\"name\": \"vadd\", \"backend\": \"cpu\"}");
    s_write ("good.json", "{\"source\": \"good\"}");
    s_write ("bad.json", "{\"source\": \"fail\"}");
}

static void
s_dir_teardown (void)
{
    testutil_dir_remove (s_dir);
}

//  Parse output lines into an object keyed by candidate.
static json_t *
s_lines_by_candidate (char *output, int expect)
{
    json_t *by = json_object ();
    int count = 0;
    for (char *line = strtok (output, "\n"); line; line = strtok (NULL, "\n")) {
        json_error_t error;
        json_t *json = json_loads (line, 0, &error);
        ck_assert_msg (json_is_object (json), "not a JSON line: %s", line);
        const char *first = json_object_iter_key (json_object_iter (json));
        ck_assert_str_eq (first, "candidate");
        json_object_set_new (by, json_string_value (json_object_get (json, "candidate")), json);
        count++;
    }
    ck_assert_int_eq (count, expect);
    return by;
}

START_TEST (test_submit_candidates)
{
    s_setup_t setup;
    s_setup_start (&setup, 1000, true);
    char *task = s_path ("task.json");
    char *good = s_path ("good.json");
    char *bad = s_path ("bad.json");
    char *argv [] = { "submit", "--broker", setup.clients, "--timeout", "3", "--seed", "7",
                      "--tag", "cli", "--window", "1", task, good, bad, good, NULL };
    char *output;
    ck_assert_int_eq (s_run_submit (argv, &output), 0);
    json_t *by = s_lines_by_candidate (output, 3);
    json_t *line = json_object_get (by, good);
    ck_assert_ptr_nonnull (line);
    ck_assert_str_eq (json_string_value (json_object_get (line, "status")), "ok");
    ck_assert_str_eq (json_string_value (json_object_get (line, "tag")), "cli");
    json_t *eval = json_object_get (line, "eval");
    ck_assert_double_eq (json_real_value (json_object_get (eval, "timeout")), 3.0);
    ck_assert_int_eq (json_integer_value (json_object_get (eval, "seed")), 7);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (by, bad), "status")),
                      "incorrect");
    json_decref (by);
    free (output);
    zstr_free (&task);
    zstr_free (&good);
    zstr_free (&bad);
    s_setup_stop (&setup);
}
END_TEST

START_TEST (test_submit_batch)
{
    s_setup_t setup;
    s_setup_start (&setup, 1000, true);
    char *task = s_path ("task.json");
    char *good = s_path ("good.json");
    char *batch_text = zsys_sprintf (
        "{\"task\": \"%s\", \"candidate\": \"%s\", \"eval\": {\"seed\": 3}, \"tag\": \"line-tag\"}\n"
        "\n"
        "{\"task\": {\"name\": \"inline\", \"backend\": \"cpu\"}, \"candidate\": {\"source\": \"fail\"},"
        " \"reward\": {\"clip\": 4}}\n", task, good);
    s_write ("batch.jsonl", batch_text);
    char *batch = s_path ("batch.jsonl");
    char *argv [] = { "submit", "--broker", setup.clients, "--timeout", "5", "--batch", batch, NULL };
    char *output;
    ck_assert_int_eq (s_run_submit (argv, &output), 0);
    json_t *by = s_lines_by_candidate (output, 2);
    json_t *first = json_object_get (by, good);
    ck_assert_ptr_nonnull (first);
    ck_assert_str_eq (json_string_value (json_object_get (first, "tag")), "line-tag");
    json_t *eval = json_object_get (first, "eval");
    ck_assert_int_eq (json_integer_value (json_object_get (eval, "seed")), 3);
    ck_assert_double_eq (json_real_value (json_object_get (eval, "timeout")), 5.0);
    //  The inline candidate is named by its line (blank lines are not counted).
    json_t *second = json_object_get (by, "line 2");
    ck_assert_msg (second != NULL, "no result for 'line 2'");
    ck_assert_str_eq (json_string_value (json_object_get (second, "status")), "incorrect");
    json_decref (by);
    free (output);
    zstr_free (&batch_text);
    zstr_free (&batch);
    zstr_free (&task);
    zstr_free (&good);
    s_setup_stop (&setup);
}
END_TEST

START_TEST (test_submit_failures)
{
    //  A broker that never answers: a ROUTER nobody reads.
    zsock_t *mute = zsock_new (ZMQ_ROUTER);
    int port = zsock_bind (mute, "tcp://127.0.0.1:*");
    ck_assert_int_gt (port, 0);
    char endpoint [64];
    snprintf (endpoint, sizeof (endpoint), "tcp://127.0.0.1:%d", port);
    char *task = s_path ("task.json");
    char *good = s_path ("good.json");
    char *missing = s_path ("missing.json");
    char *output;
    char *argv1 [] = { "submit", "--broker", endpoint, "--connect-timeout", "0.3", task, good, NULL };
    ck_assert_int_eq (s_run_submit (argv1, &output), 1);
    ck_assert_str_eq (output, "");
    free (output);
    //  An unreadable candidate: found before anything is sent, a usage error.
    char *argv2 [] = { "submit", "--broker", endpoint, task, missing, NULL };
    ck_assert_int_eq (s_run_submit (argv2, &output), 2);
    free (output);
    //  Usage errors.
    char *argv3 [] = { "submit", "--broker", endpoint, task, NULL };
    ck_assert_int_eq (s_run_submit (argv3, &output), 2);
    free (output);
    char *argv4 [] = { "submit", task, good, NULL };
    ck_assert_int_eq (s_run_submit (argv4, &output), 2);
    free (output);
    char *argv5 [] = { "submit", "--broker", endpoint, "--window", "0", task, good, NULL };
    ck_assert_int_eq (s_run_submit (argv5, &output), 2);
    free (output);
    zstr_free (&task);
    zstr_free (&good);
    zstr_free (&missing);
    zsock_destroy (&mute);
}
END_TEST

//  --------------------------------------------------------------------------
//  Reconnects, duplicates, fetch, busy brokers, admin commands

START_TEST (test_client_rides_out_a_broker_restart)
{
    //  A broker with a store; jobs accepted, then it goes away before any
    //  worker came. A new broker on the same store and port: the client
    //  reconnects by itself, resends, and gets each result once.
    char *db = s_path ("jobs.sqlite");
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.db_path = db;
    s_setup_t setup;
    s_setup_start_cfg (&setup, &cfg, false);
    client_kgym_config_t ccfg;
    client_kgym_config_default (&ccfg);
    ccfg.endpoint = setup.clients;
    ccfg.heartbeat_ms = 200;
    char err [256];
    client_kgym_t *client = client_kgym_new_config (&ccfg, err, sizeof (err));
    ck_assert_msg (client != NULL, "%s", err);
    uint64_t ids [4] = { 0 };
    for (uint64_t ref = 1; ref <= 3; ref++) {
        json_t *job = s_job ("good", "restart");
        ck_assert_int_eq (client_kgym_submit (client, ref, job, err, sizeof (err)), 0);
        json_decref (job);
    }
    for (int i = 0; i < 3; i++) {
        client_event_t event;
        s_next_event (client, &event);
        ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
        ids [event.ref] = event.job;
    }
    //  Same ports for the new broker.
    char clients [64], workers [64];
    snprintf (clients, sizeof (clients), "%s", setup.clients);
    snprintf (workers, sizeof (workers), "%s", setup.workers);
    s_setup_stop (&setup);
    cfg.clients_endpoint = clients;
    cfg.workers_endpoint = workers;
    s_setup_start_cfg (&setup, &cfg, true);
    int results = 0;
    while (results < 3) {
        client_event_t event;
        ck_assert_msg (client_kgym_recv (client, WAIT_MS, &event) == 0,
                       "%d of 3 results within %d ms after the restart", results, WAIT_MS);
        //  ACCEPTED was handed out already: the resend's answer is not again.
        ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
        ck_assert_uint_eq (event.job, ids [event.ref]);
        results++;
        client_event_clear (&event);
    }
    ck_assert_uint_eq (client_kgym_pending (client), 0);
    ck_assert_uint_ge (client_kgym_reconnects (client), 1);
    //  Nothing more comes.
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, 300, &event), -1);

    //  Another process with the same client id fetches those results by tag.
    ccfg.client_id = client_kgym_id (client);
    ccfg.endpoint = setup.clients;
    client_kgym_t *later = client_kgym_new_config (&ccfg, err, sizeof (err));
    ck_assert_int_eq (client_kgym_fetch (later, 50, 0, "restart", err, sizeof (err)), 0);
    int fetched = 0;
    while (true) {
        s_next_event (later, &event);
        if (event.type == CLIENT_EVENT_DONE) {
            ck_assert_uint_eq (event.ref, 50);
            ck_assert_uint_eq (event.count, 3);
            ck_assert_uint_eq (event.pending, 0);
            break;
        }
        ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
        ck_assert_uint_eq (event.job, ids [event.ref]);
        fetched++;
        client_event_clear (&event);
    }
    ck_assert_int_eq (fetched, 3);
    client_kgym_destroy (&later);
    client_kgym_destroy (&client);
    s_setup_stop (&setup);
    zstr_free (&db);
}
END_TEST

//  A fake broker: a ROUTER the test drives by hand.
static void
s_router_send (zsock_t *router, zframe_t *to, proto_cmd_t cmd, uint64_t ref, uint64_t job,
               const char *body)
{
    proto_msg_t *msg = proto_msg_new (cmd);
    zframe_t *identity = zframe_dup (to);
    proto_msg_set_routing_id (msg, &identity);
    msg->ref = ref;
    msg->job = job;
    proto_msg_set_str (msg->name, "w");
    if (body) {
        zframe_t *frame = zframe_new (body, strlen (body));
        proto_msg_set_body (msg, &frame);
    }
    ck_assert_int_eq (proto_msg_send (msg, router), 0);
    proto_msg_destroy (&msg);
}

START_TEST (test_client_hands_out_each_reply_once)
{
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    int port = zsock_bind (router, "tcp://127.0.0.1:*");
    ck_assert_int_gt (port, 0);
    char endpoint [64];
    snprintf (endpoint, sizeof (endpoint), "tcp://127.0.0.1:%d", port);
    client_kgym_t *client = client_kgym_new (endpoint);
    char err [256];
    unsigned char body [] = { 0x80 };
    ck_assert_int_eq (client_kgym_submit_encoded (client, 1, "cpu", NULL, body, 1, err, sizeof (err)), 0);
    //  A ref in flight cannot be used again.
    ck_assert_int_eq (client_kgym_submit_encoded (client, 1, "cpu", NULL, body, 1, err, sizeof (err)), -1);
    proto_msg_t *in = proto_msg_new (0);
    ck_assert_int_eq (proto_msg_recv (in, router), 0);
    ck_assert_int_eq (in->cmd, PROTO_SUBMIT);
    ck_assert_str_eq (in->client, client_kgym_id (client));
    ck_assert_uint_eq (in->retry, 0);
    zframe_t *to = zframe_dup (in->routing_id);
    //  Everything twice, as after a resend: ACCEPTED, RESULT; and a RESULT
    //  for a job id already seen under another ref.
    const char *result = "\x81\xa6status\xa2ok";
    s_router_send (router, to, PROTO_ACCEPTED, 1, 41, NULL);
    s_router_send (router, to, PROTO_ACCEPTED, 1, 41, NULL);
    s_router_send (router, to, PROTO_RESULT, 1, 41, result);
    s_router_send (router, to, PROTO_RESULT, 1, 41, result);
    s_router_send (router, to, PROTO_RESULT, 7, 41, result);
    //  A RESULT of this client's job submitted elsewhere (a fetch): handed out.
    s_router_send (router, to, PROTO_RESULT, 9, 43, result);
    client_event_t event;
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    ck_assert_uint_eq (event.job, 41);
    client_event_clear (&event);
    s_next_event (client, &event);
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    ck_assert_uint_eq (event.job, 43);
    client_event_clear (&event);
    ck_assert_int_eq (client_kgym_recv (client, 200, &event), -1);
    ck_assert_uint_eq (client_kgym_duplicates (client), 3);
    ck_assert_uint_eq (client_kgym_pending (client), 0);
    zframe_destroy (&to);
    proto_msg_destroy (&in);
    client_kgym_destroy (&client);
    zsock_destroy (&router);
}
END_TEST

START_TEST (test_submit_waits_out_a_busy_broker)
{
    //  The broker takes one unfinished job per client; kgym submit sends
    //  five at once, is told 429 for the others, and sends them again later.
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.max_client_jobs = 1;
    s_worker_delay_ms = 50;
    s_setup_t setup;
    s_setup_start_cfg (&setup, &cfg, true);
    char *task = s_path ("task.json");
    char *good = s_path ("good.json");
    char *argv [] = { "submit", "--broker", setup.clients, "--window", "5", task, good, good, good,
                      good, good, NULL };
    char *output;
    ck_assert_int_eq (s_run_submit (argv, &output), 0);
    int lines = 0;
    for (char *c = output; *c; c++)
        lines += *c == '\n';
    ck_assert_int_eq (lines, 5);
    free (output);
    zstr_send (setup.broker.actor, "STATS");
    char *stats = zstr_recv (setup.broker.actor);
    json_t *json = json_loads (stats, 0, NULL);
    ck_assert_msg (json_integer_value (json_object_get (json, "rejected")) >= 1, "stats: %s", stats);
    ck_assert_int_eq (json_integer_value (json_object_get (json, "submitted")), 5);
    json_decref (json);
    zstr_free (&stats);
    zstr_free (&task);
    zstr_free (&good);
    s_setup_stop (&setup);
}
END_TEST

START_TEST (test_admin_drain_fetch_and_keygen)
{
    s_setup_t setup;
    s_setup_start (&setup, 1000, true);
    //  Wait until the fake worker is registered.
    for (int i = 0; i < 500; i++) {
        zstr_send (setup.broker.actor, "STATS");
        char *stats = zstr_recv (setup.broker.actor);
        bool up = strstr (stats, "\"workers\":1") != NULL;
        zstr_free (&stats);
        if (up)
            break;
        zpoller_t *poller = zpoller_new (setup.broker.actor, NULL);
        zpoller_wait (poller, 10);      //  nothing comes on the pipe: a bounded wait
        zpoller_destroy (&poller);
    }
    char *output;
    char *drain [] = { "drain", "--broker", setup.clients, "--timeout", "5", "fake-worker", NULL };
    int rc = client_admin_main (6, drain);
    ck_assert_int_eq (rc, 0);
    char *unknown [] = { "drain", "--broker", setup.clients, "--timeout", "5", "no-such-worker", NULL };
    ck_assert_int_eq (client_admin_main (6, unknown), 1);
    char *usage [] = { "drain", "fake-worker", NULL };
    ck_assert_int_eq (client_admin_main (2, usage), 2);
    //  Keys for CURVE: a public and a secret file.
    char *key = s_path ("trainer");
    char *keygen [] = { "keygen", "--name", "test", key, NULL };
    ck_assert_int_eq (client_admin_main (4, keygen), 0);
    zcert_t *cert = zcert_load (key);
    ck_assert_ptr_nonnull (cert);
    zcert_destroy (&cert);
    char *secret = zsys_sprintf ("%s_secret", key);
    struct stat st;
    ck_assert_int_eq (stat (secret, &st), 0);
    ck_assert_int_eq (st.st_mode & 077, 0);
    zstr_free (&secret);
    zstr_free (&key);
    //  fetch of a client with no jobs: no lines, exit 0.
    (void) output;
    char *fetch [] = { "fetch", "--broker", setup.clients, "--client-id", "nobody", "--timeout", "5", NULL };
    ck_assert_int_eq (client_admin_main (7, fetch), 0);
    s_setup_stop (&setup);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("client");
    TCase *tc = tcase_create ("loopback");
    tcase_set_timeout (tc, 60);
    tcase_add_checked_fixture (tc, s_dir_setup, s_dir_teardown);
    tcase_add_test (tc, test_client_round_trip);
    tcase_add_test (tc, test_client_error_event);
    tcase_add_test (tc, test_submit_candidates);
    tcase_add_test (tc, test_submit_batch);
    tcase_add_test (tc, test_submit_failures);
    tcase_add_test (tc, test_client_rides_out_a_broker_restart);
    tcase_add_test (tc, test_client_hands_out_each_reply_once);
    tcase_add_test (tc, test_submit_waits_out_a_busy_broker);
    tcase_add_test (tc, test_admin_drain_fetch_and_keygen);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
