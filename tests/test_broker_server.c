/*  test_broker_server - the broker actor on loopback, driven by a test client
    and test workers (plain DEALER sockets this thread steps through each
    scenario, so every order is deterministic and nothing sleeps).  */
#include "testutil.h"
#include "broker_server.h"
#include "broker_verdict.h"
#include "proto_msg.h"
#include "common_log.h"
#include "proto_mpk.h"
#include "kgym_config.h"
#include <signal.h>
#include <sys/wait.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>

#define WAIT_MS 5000            //  longest any step may take

//  ERROR 503 (no worker serves the job's backend: a notice, the job goes
//  on) comes whenever a SUBMIT overtakes its worker's READY; s_expect skips
//  it unless a test about it says otherwise.
static bool s_notices_expected = false;

//  A running broker and its endpoints.
typedef struct {
    zactor_t *actor;
    char *clients;              //  client endpoint
    char *workers;              //  worker endpoint
} s_broker_t;

//  Start a broker with this config (endpoints are set to loopback here).
static void
s_broker_start_cfg (s_broker_t *broker, broker_config_t *cfg)
{
    common_log_set_level (LOG_LEVEL_WARN);
    cfg->clients_endpoint = "tcp://127.0.0.1:*";
    cfg->workers_endpoint = "tcp://127.0.0.1:*";
    broker->actor = zactor_new (broker_server_actor, cfg);
    ck_assert_ptr_nonnull (broker->actor);
    zstr_send (broker->actor, "ENDPOINTS");
    ck_assert_int_eq (zstr_recvx (broker->actor, &broker->clients, &broker->workers, NULL), 2);
    ck_assert_msg (strstr (broker->clients, "tcp://127.0.0.1:") != NULL, "endpoint %s", broker->clients);
    ck_assert_str_ne (broker->clients, broker->workers);
}

static void
s_broker_start (s_broker_t *broker, uint32_t heartbeat_ms, uint32_t liveness, uint32_t max_queue)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.heartbeat_ms = heartbeat_ms;
    cfg.liveness = liveness;
    cfg.max_queue = max_queue;
    s_broker_start_cfg (broker, &cfg);
}

static void
s_broker_stop (s_broker_t *broker)
{
    zactor_destroy (&broker->actor);
    zstr_free (&broker->clients);
    zstr_free (&broker->workers);
}

//  One counter from STATS.
static long long
s_stat (s_broker_t *broker, const char *key)
{
    zstr_send (broker->actor, "STATS");
    char *text = zstr_recv (broker->actor);
    ck_assert_ptr_nonnull (text);
    json_t *stats = json_loads (text, 0, NULL);
    ck_assert_msg (json_is_object (stats), "STATS is not a JSON object: %s", text);
    json_t *value = json_object_get (stats, key);
    ck_assert_msg (json_is_integer (value), "STATS has no '%s': %s", key, text);
    long long result = json_integer_value (value);
    json_decref (stats);
    zstr_free (&text);
    return result;
}

static zsock_t *
s_dealer (const char *endpoint)
{
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    ck_assert_ptr_nonnull (sock);
    proto_sock_configure (sock, false);
    ck_assert_int_eq (zsock_connect (sock, "%s", endpoint), 0);
    return sock;
}

//  Next message of command cmd or other on sock within WAIT_MS. HEARTBEATs
//  on the way are answered (a test worker stays alive while it waits) and
//  skipped.
static proto_msg_t *
s_expect_either (zsock_t *sock, proto_cmd_t cmd, proto_cmd_t other)
{
    zpoller_t *poller = zpoller_new (sock, NULL);
    int64_t deadline = zclock_mono () + WAIT_MS;
    proto_msg_t *msg = proto_msg_new (0);
    while (true) {
        int64_t left = deadline - zclock_mono ();
        ck_assert_msg (left > 0, "no %s within %d ms", proto_cmd_name (cmd), WAIT_MS);
        if (!zpoller_wait (poller, (int) left))
            continue;
        int rc = proto_msg_recv (msg, sock);
        ck_assert_msg (rc == 0, "malformed message from the broker: %s", msg->reason);
        if (msg->cmd == PROTO_ERROR && msg->code == PROTO_ERR_NO_WORKER && !s_notices_expected)
            continue;
        if (msg->cmd == cmd || msg->cmd == other)
            break;
        if (msg->cmd == PROTO_HEARTBEAT) {
            proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
            proto_msg_send (beat, sock);
            proto_msg_destroy (&beat);
            continue;
        }
        ck_assert_msg (false, "expected %s, got %s (code %u: %s)", proto_cmd_name (cmd),
                       proto_cmd_name (msg->cmd), msg->code, msg->reason);
    }
    zpoller_destroy (&poller);
    return msg;
}

//  Next message of command cmd on sock within WAIT_MS.
static proto_msg_t *
s_expect (zsock_t *sock, proto_cmd_t cmd)
{
    return s_expect_either (sock, cmd, cmd);
}

static void
s_send_ready (zsock_t *worker, const char *backend, uint32_t capacity, const char *name)
{
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    proto_msg_set_str (msg->backend, backend);
    proto_msg_set_str (msg->device, "test device");
    proto_msg_set_str (msg->name, name);
    msg->capacity = capacity;
    msg->pid = (uint32_t) getpid ();
    ck_assert_int_eq (proto_msg_send (msg, worker), 0);
    proto_msg_destroy (&msg);
}

static void
s_send_submit (zsock_t *client, uint64_t ref, const char *backend, const char *body)
{
    proto_msg_t *msg = proto_msg_new (PROTO_SUBMIT);
    msg->ref = ref;
    proto_msg_set_str (msg->backend, backend);
    zframe_t *frame = zframe_new (body, strlen (body));
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
}

//  A RESULT with a raw body and header status (NULL: none).
static void
s_send_raw_result (zsock_t *worker, uint64_t job, uint32_t attempt, const void *body, size_t size,
                   const char *status)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->job = job;
    msg->attempt = attempt;
    if (status)
        proto_msg_set_str (msg->status, status);
    zframe_t *frame = zframe_new (body, size);
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, worker), 0);
    proto_msg_destroy (&msg);
}

//  A JSON value (taken) as a msgpack frame.
static zframe_t *
s_mpk_frame (json_t *json)
{
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (json, &data, &size), 0);
    json_decref (json);
    zframe_t *frame = zframe_new (data, size);
    free (data);
    return frame;
}

//  A RESULT saying text. These tests' job bodies are plain text, not jobs:
//  what an honest worker answers them is invalid, without a reward, and
//  that is what the broker lets through (docs/protocol.md section 5).
static void
s_send_result (zsock_t *worker, uint64_t job, uint32_t attempt, const char *text)
{
    zframe_t *frame = s_mpk_frame (json_pack ("{s:s, s:n, s:n, s:s}", "status", "invalid",
                                              "reward", "speedup", "message", text));
    s_send_raw_result (worker, job, attempt, zframe_data (frame), zframe_size (frame), "invalid");
    zframe_destroy (&frame);
}

static void
s_send_cmd (zsock_t *sock, proto_cmd_t cmd)
{
    proto_msg_t *msg = proto_msg_new (cmd);
    ck_assert_int_eq (proto_msg_send (msg, sock), 0);
    proto_msg_destroy (&msg);
}

//  The body of a message as a string.
static char *
s_body_text (proto_msg_t *msg)
{
    ck_assert_ptr_nonnull (msg->body);
    return zframe_strdup (msg->body);
}

//  The message of a RESULT that s_send_result sent (a new string).
static char *
s_result_text (proto_msg_t *msg)
{
    ck_assert_ptr_nonnull (msg->body);
    json_t *result = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), NULL,
                                       NULL, 0);
    const char *text = json_string_value (json_object_get (result, "message"));
    ck_assert_msg (text != NULL, "the RESULT has no message");
    char *copy = strdup (text);
    json_decref (result);
    return copy;
}

//  Submit and collect ACCEPTED; returns the job id.
static uint64_t
s_submit_accepted (zsock_t *client, uint64_t ref, const char *backend, const char *body)
{
    s_send_submit (client, ref, backend, body);
    proto_msg_t *msg = s_expect (client, PROTO_ACCEPTED);
    ck_assert_uint_eq (msg->ref, ref);
    uint64_t job = msg->job;
    proto_msg_destroy (&msg);
    return job;
}

START_TEST (test_accepts_and_routes_by_backend)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *cpu = s_dealer (broker.workers);
    zsock_t *cuda = s_dealer (broker.workers);
    s_send_ready (cpu, "cpu", 8, "cpu-worker");
    s_send_ready (cuda, "cuda", 8, "cuda-worker");

    //  Job ids are assigned in order, one ACCEPTED per SUBMIT with the ref.
    const char *backends [] = { "cpu", "cuda", "cpu", "cuda", "cpu" };
    uint64_t last = 0;
    for (int i = 0; i < 5; i++) {
        char body [32];
        snprintf (body, sizeof (body), "job-%s-%d", backends [i], i);
        uint64_t job = s_submit_accepted (client, 100 + i, backends [i], body);
        ck_assert_msg (job > last, "job ids must increase: %llu after %llu",
                       (unsigned long long) job, (unsigned long long) last);
        last = job;
    }
    //  Each worker sees only its backend's jobs, bodies untouched.
    for (int i = 0; i < 5; i++) {
        zsock_t *worker = streq (backends [i], "cpu")? cpu: cuda;
        proto_msg_t *job = s_expect (worker, PROTO_JOB);
        char *body = s_body_text (job);
        char want [32];
        snprintf (want, sizeof (want), "job-%s-%d", backends [i], i);
        ck_assert_str_eq (body, want);
        ck_assert_uint_eq (job->attempt, 1);
        char result [64];
        snprintf (result, sizeof (result), "result-of-%s", body);
        s_send_result (worker, job->job, job->attempt, result);
        zstr_free (&body);
        proto_msg_destroy (&job);

        proto_msg_t *msg = s_expect (client, PROTO_RESULT);
        ck_assert_uint_eq (msg->ref, 100 + i);
        ck_assert_str_eq (msg->name, streq (backends [i], "cpu")? "cpu-worker": "cuda-worker");
        ck_assert (msg->queue_s >= 0 && msg->queue_s < 5);
        body = s_result_text (msg);
        snprintf (want, sizeof (want), "result-of-job-%s-%d", backends [i], i);
        ck_assert_str_eq (body, want);
        zstr_free (&body);
        proto_msg_destroy (&msg);
    }
    ck_assert_int_eq (s_stat (&broker, "submitted"), 5);
    ck_assert_int_eq (s_stat (&broker, "completed"), 5);
    ck_assert_int_eq (s_stat (&broker, "inflight"), 0);
    zsock_destroy (&client);
    zsock_destroy (&cpu);
    zsock_destroy (&cuda);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_results_stream_in_completion_order)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 4, "w");
    for (int i = 1; i <= 4; i++)
        s_submit_accepted (client, i, "cpu", "job");
    uint64_t jobs [5];
    uint32_t attempts [5];
    for (int i = 1; i <= 4; i++) {
        proto_msg_t *job = s_expect (worker, PROTO_JOB);
        jobs [i] = job->job;
        attempts [i] = job->attempt;
        proto_msg_destroy (&job);
    }
    //  Answer in reverse: each result reaches the client before the next is sent.
    for (int i = 4; i >= 1; i--) {
        char body [16];
        snprintf (body, sizeof (body), "r%d", i);
        s_send_result (worker, jobs [i], attempts [i], body);
        proto_msg_t *msg = s_expect (client, PROTO_RESULT);
        ck_assert_msg (msg->ref == (uint64_t) i, "expected the result of ref %d, got ref %llu",
                       i, (unsigned long long) msg->ref);
        ck_assert_uint_eq (msg->job, jobs [i]);
        proto_msg_destroy (&msg);
    }
    zsock_destroy (&client);
    zsock_destroy (&worker);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_capacity_bounds_dispatch)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    //  Jobs for a backend nobody serves yet wait in the queue.
    for (int i = 1; i <= 3; i++)
        s_submit_accepted (client, i, "cpu", "job");
    ck_assert_int_eq (s_stat (&broker, "queued"), 3);
    s_send_ready (worker, "cpu", 2, "w");
    proto_msg_t *first = s_expect (worker, PROTO_JOB);
    proto_msg_t *second = s_expect (worker, PROTO_JOB);
    //  Capacity 2: the third waits until a slot frees.
    ck_assert_int_eq (s_stat (&broker, "queued"), 1);
    ck_assert_int_eq (s_stat (&broker, "inflight"), 2);
    s_send_result (worker, first->job, first->attempt, "r");
    proto_msg_t *result = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (result->ref, 1);
    ck_assert (result->queue_s > 0);
    proto_msg_t *third = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (third->job, first->job + 2);
    proto_msg_destroy (&first);
    proto_msg_destroy (&second);
    proto_msg_destroy (&third);
    proto_msg_destroy (&result);
    zsock_destroy (&client);
    zsock_destroy (&worker);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_queue_full_is_429)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 2);
    zsock_t *client = s_dealer (broker.clients);
    s_submit_accepted (client, 1, "cpu", "a");
    s_submit_accepted (client, 2, "cpu", "b");
    s_send_submit (client, 3, "cpu", "c");
    proto_msg_t *msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_OVERLOADED);
    ck_assert_uint_eq (msg->ref, 3);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "rejected"), 1);
    ck_assert_int_eq (s_stat (&broker, "queued"), 2);
    //  A worker drains the queue and there is room again.
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 2, "w");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    proto_msg_destroy (&job);
    job = s_expect (worker, PROTO_JOB);
    proto_msg_destroy (&job);
    s_submit_accepted (client, 4, "cpu", "d");
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

//  Raw frames: signature + a header given as bytes (+ optional body).
static void
s_send_raw (zsock_t *sock, const char *frame0, size_t size0, const char *header, size_t hsize,
            const char *body)
{
    zmsg_t *raw = zmsg_new ();
    zmsg_addmem (raw, frame0, size0);
    if (header)
        zmsg_addmem (raw, header, hsize);
    if (body)
        zmsg_addstr (raw, body);
    ck_assert_int_eq (zmsg_send (&raw, sock), 0);
}

START_TEST (test_malformed_input_gets_400_and_broker_keeps_serving)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "w");

    //  From a client: bad signature, SUBMIT without backend, unknown command.
    s_send_raw (client, "JUNK\x01\x04", 6, "\x80", 1, "x");
    proto_msg_t *msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_msg (strstr (msg->reason, "signature"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    s_send_raw (client, "KGYM\x01\x04", 6, "\x81\xa3ref\x01", 6, "x");
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_msg (strstr (msg->reason, "backend"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    s_send_raw (client, "KGYM\x01\x63", 6, "\x80", 1, NULL);
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_COMMAND);
    proto_msg_destroy (&msg);
    //  A worker command from a client.
    s_send_ready (client, "cpu", 1, "impostor");
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_COMMAND);
    proto_msg_destroy (&msg);

    //  From a worker: a header that is not a map, a RESULT with a string job.
    s_send_raw (worker, "KGYM\x01\x02", 6, "\x91\xc0", 2, NULL);
    msg = s_expect (worker, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    proto_msg_destroy (&msg);
    s_send_raw (worker, "KGYM\x01\x07", 6, "\x82\xa3job\xa1" "1\xa7" "attempt\x01", 16, "r");
    msg = s_expect (worker, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_msg (strstr (msg->reason, "'job' has the wrong type"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "malformed"), 6);

    //  The registered worker still gets and completes a valid job.
    uint64_t id = s_submit_accepted (client, 9, "cpu", "valid");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (job->job, id);
    s_send_result (worker, job->job, job->attempt, "done");
    proto_msg_destroy (&job);
    msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->ref, 9);
    proto_msg_destroy (&msg);

    //  A worker that never said READY is told so.
    zsock_t *stranger = s_dealer (broker.workers);
    s_send_cmd (stranger, PROTO_HEARTBEAT);
    msg = s_expect (stranger, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_PEER);
    proto_msg_destroy (&msg);
    //  READY with capacity 0 is refused.
    s_send_ready (stranger, "cpu", 0, "zero");
    msg = s_expect (stranger, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "workers"), 1);

    zsock_destroy (&stranger);
    zsock_destroy (&client);
    zsock_destroy (&worker);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_silent_worker_jobs_requeued_stale_result_dropped)
{
    s_broker_t broker;
    s_broker_start (&broker, 100, 10, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *silent = s_dealer (broker.workers);
    zsock_t *alive = s_dealer (broker.workers);

    s_send_ready (silent, "cpu", 2, "silent");
    uint64_t id1 = s_submit_accepted (client, 1, "cpu", "one");
    uint64_t id2 = s_submit_accepted (client, 2, "cpu", "two");
    proto_msg_t *lost1 = s_expect (silent, PROTO_JOB);
    proto_msg_t *lost2 = s_expect (silent, PROTO_JOB);
    ck_assert_uint_eq (lost1->job, id1);
    ck_assert_uint_eq (lost2->job, id2);

    //  The silent worker answers nothing from now on; the other one stays
    //  alive by answering heartbeats inside s_expect.
    s_send_ready (alive, "cpu", 2, "alive");
    proto_msg_t *again1 = s_expect (alive, PROTO_JOB);
    proto_msg_t *again2 = s_expect (alive, PROTO_JOB);
    //  Requeued at the front in dispatch order, with the next attempt.
    ck_assert_uint_eq (again1->job, id1);
    ck_assert_uint_eq (again2->job, id2);
    ck_assert_uint_eq (again1->attempt, 2);
    ck_assert_uint_eq (again2->attempt, 2);
    ck_assert_int_eq (s_stat (&broker, "requeued"), 2);

    //  The lost worker wakes up with a late result: unknown peer now.
    s_send_result (silent, lost1->job, lost1->attempt, "late");
    proto_msg_t *msg = s_expect (silent, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_PEER);
    proto_msg_destroy (&msg);
    //  A registered worker replaying an old attempt is dropped too.
    s_send_result (alive, again2->job, 1, "wrong attempt");
    s_send_result (alive, again1->job, again1->attempt, "good-1");
    s_send_result (alive, again2->job, again2->attempt, "good-2");
    for (int i = 1; i <= 2; i++) {
        msg = s_expect (client, PROTO_RESULT);
        ck_assert_uint_eq (msg->ref, (uint64_t) i);
        ck_assert_str_eq (msg->name, "alive");
        char *body = s_result_text (msg);
        char want [16];
        snprintf (want, sizeof (want), "good-%d", i);
        ck_assert_str_eq (body, want);
        zstr_free (&body);
        proto_msg_destroy (&msg);
    }
    ck_assert_int_eq (s_stat (&broker, "dropped_results"), 2);
    ck_assert_int_eq (s_stat (&broker, "completed"), 2);
    ck_assert_int_eq (s_stat (&broker, "workers_lost"), 1);

    proto_msg_destroy (&lost1);
    proto_msg_destroy (&lost2);
    proto_msg_destroy (&again1);
    proto_msg_destroy (&again2);
    zsock_destroy (&client);
    zsock_destroy (&silent);
    zsock_destroy (&alive);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_worker_disconnect_requeues)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *leaving = s_dealer (broker.workers);
    zsock_t *staying = s_dealer (broker.workers);
    s_send_ready (leaving, "cpu", 1, "leaving");
    uint64_t id = s_submit_accepted (client, 1, "cpu", "job");
    proto_msg_t *job = s_expect (leaving, PROTO_JOB);
    proto_msg_destroy (&job);
    s_send_ready (staying, "cpu", 1, "staying");
    s_send_cmd (leaving, PROTO_DISCONNECT);
    job = s_expect (staying, PROTO_JOB);
    ck_assert_uint_eq (job->job, id);
    ck_assert_uint_eq (job->attempt, 2);
    s_send_result (staying, job->job, job->attempt, "r");
    proto_msg_destroy (&job);
    proto_msg_t *msg = s_expect (client, PROTO_RESULT);
    ck_assert_str_eq (msg->name, "staying");
    proto_msg_destroy (&msg);
    zsock_destroy (&client);
    zsock_destroy (&leaving);
    zsock_destroy (&staying);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_client_heartbeat_and_disconnect)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    //  A client's HEARTBEAT is answered.
    s_send_cmd (client, PROTO_HEARTBEAT);
    proto_msg_t *msg = s_expect (client, PROTO_HEARTBEAT);
    proto_msg_destroy (&msg);
    //  DISCONNECT drops its waiting jobs.
    s_submit_accepted (client, 1, "nobody-serves-this", "a");
    s_submit_accepted (client, 2, "nobody-serves-this", "b");
    s_send_cmd (client, PROTO_DISCONNECT);
    s_send_cmd (client, PROTO_HEARTBEAT);       //  ordered after the DISCONNECT
    msg = s_expect (client, PROTO_HEARTBEAT);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "cancelled"), 2);
    ck_assert_int_eq (s_stat (&broker, "queued"), 0);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_cannot_bind_reports_reason)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.clients_endpoint = "tcp://127.0.0.1:*";
    cfg.workers_endpoint = "nonsense://nowhere";
    zactor_t *actor = zactor_new (broker_server_actor, &cfg);
    ck_assert_ptr_nonnull (actor);
    zstr_send (actor, "ENDPOINTS");
    char *clients = NULL, *reason = NULL;
    ck_assert_int_eq (zstr_recvx (actor, &clients, &reason, NULL), 2);
    ck_assert_str_eq (clients, "");
    ck_assert_msg (strstr (reason, "cannot bind"), "reason: %s", reason);
    zstr_free (&clients);
    zstr_free (&reason);
    zactor_destroy (&actor);
}
END_TEST

//  --------------------------------------------------------------------------
//  Leases, durability, clients by id, drain, states

//  SUBMIT as a named client.
static void
s_send_submit_as (zsock_t *client, const char *client_id, uint64_t ref, const char *tag,
                  bool retry, const char *body)
{
    proto_msg_t *msg = proto_msg_new (PROTO_SUBMIT);
    msg->ref = ref;
    msg->retry = retry? 1: 0;
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->client, client_id);
    proto_msg_set_str (msg->tag, tag);
    zframe_t *frame = zframe_new (body, strlen (body));
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
}

static uint64_t
s_accepted_as (zsock_t *client, const char *client_id, uint64_t ref, const char *tag, bool retry,
               const char *body)
{
    s_send_submit_as (client, client_id, ref, tag, retry, body);
    proto_msg_t *msg = s_expect (client, PROTO_ACCEPTED);
    ck_assert_uint_eq (msg->ref, ref);
    uint64_t job = msg->job;
    proto_msg_destroy (&msg);
    return job;
}

//  Take one JOB at worker and answer it with body; returns the job id.
static uint64_t
s_serve_one (zsock_t *worker, const char *body)
{
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    uint64_t id = job->job;
    s_send_result (worker, job->job, job->attempt, body);
    proto_msg_destroy (&job);
    return id;
}

//  The RESULT's body decoded, for results the broker made itself.
static json_t *
s_result_json (proto_msg_t *msg)
{
    char err [128];
    json_t *json = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), NULL,
                                     err, sizeof (err));
    ck_assert_msg (json != NULL, "result body does not decode: %s", err);
    return json;
}

//  A round trip on a registered worker's connection: everything it sent
//  before has been handled when this returns.
static void
s_sync_worker (zsock_t *worker)
{
    s_send_cmd (worker, PROTO_ACCEPTED);
    proto_msg_t *msg = s_expect (worker, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_COMMAND);
    proto_msg_destroy (&msg);
}

START_TEST (test_job_that_loses_workers_fails_after_max_attempts)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.heartbeat_ms = 100;
    cfg.liveness = 2;
    cfg.max_attempts = 2;
    s_broker_t broker;
    s_broker_start_cfg (&broker, &cfg);
    zsock_t *client = s_dealer (broker.clients);
    uint64_t id = s_submit_accepted (client, 1, "cpu", "poison");
    //  Two workers in turn take it and vanish (as a crash would: no DISCONNECT).
    for (uint32_t attempt = 1; attempt <= 2; attempt++) {
        zsock_t *worker = s_dealer (broker.workers);
        s_send_ready (worker, "cpu", 1, "victim");
        proto_msg_t *job = s_expect (worker, PROTO_JOB);
        ck_assert_uint_eq (job->job, id);
        ck_assert_uint_eq (job->attempt, attempt);
        proto_msg_destroy (&job);
        zsock_destroy (&worker);
    }
    //  Not a third time: the client gets a final internal_error.
    proto_msg_t *msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->ref, 1);
    ck_assert_uint_eq (msg->job, id);
    json_t *result = s_result_json (msg);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "internal_error");
    ck_assert_str_eq (json_string_value (json_object_get (result, "message")),
                      "worker lost 2 times while running this job");
    json_decref (result);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "failed"), 1);
    ck_assert_int_eq (s_stat (&broker, "requeued"), 1);
    ck_assert_int_eq (s_stat (&broker, "queued"), 0);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_durable_jobs_survive_a_restart_and_resubmits_are_answered)
{
    char dir [] = "/tmp/kgym-test-broker-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char db [128];
    snprintf (db, sizeof (db), "%s/jobs.sqlite", dir);
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.db_path = db;
    s_broker_t broker;
    s_broker_start_cfg (&broker, &cfg);
    zsock_t *client = s_dealer (broker.clients);
    uint64_t id1 = s_accepted_as (client, "trainer-1", 1, "a", false, "one");
    uint64_t id2 = s_accepted_as (client, "trainer-1", 2, "a", false, "two");
    uint64_t id3 = s_accepted_as (client, "trainer-1", 3, "b", false, "three");
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "w");
    ck_assert_uint_eq (s_serve_one (worker, "r-one"), id1);
    proto_msg_t *msg = s_expect (client, PROTO_RESULT);
    proto_msg_destroy (&msg);
    //  The broker goes away with job 2 leased and job 3 queued.
    msg = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (msg->job, id2);
    proto_msg_destroy (&msg);
    zsock_destroy (&client);
    zsock_destroy (&worker);
    s_broker_stop (&broker);

    s_broker_start_cfg (&broker, &cfg);
    ck_assert_int_eq (s_stat (&broker, "queued"), 2);
    ck_assert_int_eq (s_stat (&broker, "results"), 1);
    //  The client comes back on a new connection, same id. A resend of a
    //  finished job: ACCEPTED with its id, then its kept result.
    client = s_dealer (broker.clients);
    ck_assert_uint_eq (s_accepted_as (client, "trainer-1", 1, "a", true, "one"), id1);
    msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->job, id1);
    char *body = s_result_text (msg);
    ck_assert_str_eq (body, "r-one");
    zstr_free (&body);
    ck_assert_str_eq (msg->name, "w");
    proto_msg_destroy (&msg);
    //  A resend of an unfinished one: the same job, not a second one.
    ck_assert_uint_eq (s_accepted_as (client, "trainer-1", 2, "a", true, "two"), id2);
    //  FETCH by tag: the finished one again, and one still pending.
    proto_msg_t *fetch = proto_msg_new (PROTO_FETCH);
    fetch->ref = 77;
    proto_msg_set_str (fetch->client, "trainer-1");
    proto_msg_set_str (fetch->tag, "a");
    ck_assert_int_eq (proto_msg_send (fetch, client), 0);
    msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->job, id1);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_DONE);
    ck_assert_uint_eq (msg->ref, 77);
    ck_assert_uint_eq (msg->count, 1);
    ck_assert_uint_eq (msg->pending, 1);
    proto_msg_destroy (&msg);
    //  Another client id sees none of it.
    proto_msg_set_str (fetch->client, "someone-else");
    fetch->job = id1;
    ck_assert_int_eq (proto_msg_send (fetch, client), 0);
    msg = s_expect (client, PROTO_DONE);
    ck_assert_uint_eq (msg->count, 0);
    proto_msg_destroy (&msg);
    proto_msg_destroy (&fetch);
    //  A worker finishes what was left; results reach the new connection.
    worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "w2");
    ck_assert_uint_eq (s_serve_one (worker, "r-two"), id2);
    ck_assert_uint_eq (s_serve_one (worker, "r-three"), id3);
    for (int i = 0; i < 2; i++) {
        msg = s_expect (client, PROTO_RESULT);
        ck_assert (msg->job == id2 || msg->job == id3);
        proto_msg_destroy (&msg);
    }
    //  A fresh SUBMIT (no retry) of a finished ref is a new job, with a higher id.
    uint64_t again = s_accepted_as (client, "trainer-1", 1, "a", false, "one again");
    ck_assert_uint_gt (again, id3);
    ck_assert_int_eq (s_stat (&broker, "resubmitted"), 2);
    zsock_destroy (&client);
    zsock_destroy (&worker);
    s_broker_stop (&broker);
    char command [128];
    snprintf (command, sizeof (command), "rm -rf '%s'", dir);
    ck_assert_int_eq (system (command), 0);
}
END_TEST

START_TEST (test_named_client_gets_results_on_its_new_connection)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 100);
    zsock_t *first = s_dealer (broker.clients);
    uint64_t id = s_accepted_as (first, "c", 5, "", false, "job");
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "w");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    //  The client's connection dies; it comes back and says who it is.
    zsock_destroy (&first);
    zsock_t *second = s_dealer (broker.clients);
    proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
    proto_msg_set_str (beat->client, "c");
    ck_assert_int_eq (proto_msg_send (beat, second), 0);
    proto_msg_destroy (&beat);
    proto_msg_t *msg = s_expect (second, PROTO_HEARTBEAT);
    proto_msg_destroy (&msg);
    s_send_result (worker, job->job, job->attempt, "done");
    proto_msg_destroy (&job);
    msg = s_expect (second, PROTO_RESULT);
    ck_assert_uint_eq (msg->job, id);
    ck_assert_uint_eq (msg->ref, 5);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "undeliverable"), 0);
    zsock_destroy (&second);
    zsock_destroy (&worker);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_client_over_its_limit_is_told_429)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.max_client_jobs = 2;
    s_broker_t broker;
    s_broker_start_cfg (&broker, &cfg);
    zsock_t *greedy = s_dealer (broker.clients);
    zsock_t *other = s_dealer (broker.clients);
    s_accepted_as (greedy, "greedy", 1, "", false, "a");
    s_accepted_as (greedy, "greedy", 2, "", false, "b");
    s_send_submit_as (greedy, "greedy", 3, "", false, "c");
    proto_msg_t *msg = s_expect (greedy, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_OVERLOADED);
    ck_assert_uint_eq (msg->ref, 3);
    ck_assert_msg (strstr (msg->reason, "client limit"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    //  Its resend of a job it has is no new job: still answered.
    s_accepted_as (greedy, "greedy", 2, "", true, "b");
    //  Another client is not held back by it.
    s_accepted_as (other, "other", 1, "", false, "x");
    ck_assert_int_eq (s_stat (&broker, "rejected"), 1);
    zsock_destroy (&greedy);
    zsock_destroy (&other);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_drained_and_quarantined_workers_get_no_new_jobs)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 100);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *leaving = s_dealer (broker.workers);
    zsock_t *sick = s_dealer (broker.workers);
    s_send_ready (leaving, "cpu", 4, "leaving");
    //  A worker that says at once its device is unfit is registered, idle.
    proto_msg_t *ready = proto_msg_new (PROTO_READY);
    proto_msg_set_str (ready->backend, "cpu");
    proto_msg_set_str (ready->device, "bad gpu");
    proto_msg_set_str (ready->name, "sick");
    proto_msg_set_str (ready->state, "quarantined");
    ready->capacity = 4;
    ck_assert_int_eq (proto_msg_send (ready, sick), 0);
    proto_msg_destroy (&ready);
    s_sync_worker (sick);
    uint64_t id = s_submit_accepted (client, 1, "cpu", "held");
    proto_msg_t *held = s_expect (leaving, PROTO_JOB);
    ck_assert_uint_eq (held->job, id);
    ck_assert_int_eq (s_stat (&broker, "quarantined"), 1);

    //  DRAIN by name: the worker is told, the client gets DONE.
    proto_msg_t *drain = proto_msg_new (PROTO_DRAIN);
    drain->ref = 9;
    proto_msg_set_str (drain->name, "leaving");
    ck_assert_int_eq (proto_msg_send (drain, client), 0);
    proto_msg_t *msg = s_expect (client, PROTO_DONE);
    ck_assert_uint_eq (msg->ref, 9);
    ck_assert_uint_eq (msg->count, 1);
    proto_msg_destroy (&msg);
    msg = s_expect (leaving, PROTO_DRAIN);
    proto_msg_destroy (&msg);
    //  New jobs wait: one worker drains, the other is quarantined.
    s_submit_accepted (client, 2, "cpu", "waits");
    ck_assert_int_eq (s_stat (&broker, "queued"), 1);
    ck_assert_int_eq (s_stat (&broker, "draining"), 1);
    //  The draining worker still finishes what it holds, then leaves.
    s_send_result (leaving, held->job, held->attempt, "finished while draining");
    proto_msg_destroy (&held);
    msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->ref, 1);
    proto_msg_destroy (&msg);
    proto_msg_t *bye = proto_msg_new (PROTO_DISCONNECT);
    proto_msg_set_str (bye->reason, "drained");
    ck_assert_int_eq (proto_msg_send (bye, leaving), 0);
    proto_msg_destroy (&bye);
    //  Back to ready: the quarantined worker gets the waiting job.
    proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
    proto_msg_set_str (beat->state, "ready");
    ck_assert_int_eq (proto_msg_send (beat, sick), 0);
    msg = s_expect (sick, PROTO_JOB);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_stat (&broker, "workers_left"), 1);
    ck_assert_int_eq (s_stat (&broker, "workers_lost"), 0);
    //  An unknown state, an unknown name.
    proto_msg_set_str (beat->state, "sleepy");
    ck_assert_int_eq (proto_msg_send (beat, sick), 0);
    msg = s_expect (sick, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    proto_msg_destroy (&msg);
    proto_msg_destroy (&beat);
    proto_msg_set_str (drain->name, "nobody");
    ck_assert_int_eq (proto_msg_send (drain, client), 0);
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_NOT_FOUND);
    ck_assert_uint_eq (msg->ref, 9);
    proto_msg_destroy (&msg);
    //  DRAIN is a client command: from a worker it is refused.
    ck_assert_int_eq (proto_msg_send (drain, sick), 0);
    msg = s_expect (sick, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_UNKNOWN_COMMAND);
    proto_msg_destroy (&msg);
    proto_msg_destroy (&drain);
    //  FETCH without a client id is malformed.
    s_send_raw (client, "KGYM\x01\x09", 6, "\x81\xa3ref\x01", 6, NULL);
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_msg (strstr (msg->reason, "FETCH without 'client'"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    zsock_destroy (&client);
    zsock_destroy (&leaving);
    zsock_destroy (&sick);
    s_broker_stop (&broker);
}
END_TEST

//  --------------------------------------------------------------------------
//  Section 14: result cache, coalescing, CANCEL, QUERY, SUMMARY, task statistics

//  A job body (msgpack) of task "name" with this candidate source and seed.
static zframe_t *
s_job_frame (const char *task, const char *source, int seed, const char *tag)
{
    json_t *job = json_pack ("{s:{s:s, s:s}, s:{s:s}, s:{s:i}}", "task", "name", task, "backend",
                             "cpu", "candidate", "source", source, "eval", "seed", seed);
    if (tag)
        json_object_set_new (job, "tag", json_string (tag));
    return s_mpk_frame (job);
}

//  SUBMIT with every option (as the named client client_id unless ""), to
//  backend cpu; returns the job id from ACCEPTED.
static uint64_t
s_submit_options (zsock_t *client, uint64_t ref, zframe_t *body, const char *client_id,
                  const char *tag, const char *group, uint32_t group_size, const char *trajectory,
                  const char *cache)
{
    proto_msg_t *msg = proto_msg_new (PROTO_SUBMIT);
    msg->ref = ref;
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->client, client_id);
    proto_msg_set_str (msg->tag, tag);
    proto_msg_set_str (msg->group, group);
    msg->group_size = group_size;
    proto_msg_set_str (msg->trajectory, trajectory);
    proto_msg_set_str (msg->cache, cache);
    proto_msg_set_body (msg, &body);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_ACCEPTED);
    ck_assert_uint_eq (msg->ref, ref);
    uint64_t job = msg->job;
    proto_msg_destroy (&msg);
    return job;
}

//  SUBMIT with the section 14 header fields; returns the job id from ACCEPTED.
static uint64_t
s_submit_job (zsock_t *client, uint64_t ref, zframe_t *body, const char *tag, const char *group,
              uint32_t group_size, const char *cache)
{
    return s_submit_options (client, ref, body, "", tag, group, group_size, "", cache);
}

//  A worker's RESULT whose body is result, msgpack-encoded (taken).
static void
s_send_doc (zsock_t *worker, proto_msg_t *job, const char *status, json_t *result)
{
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (result, &data, &size), 0);
    json_decref (result);
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->job = job->job;
    msg->attempt = job->attempt;
    proto_msg_set_str (msg->status, status);
    zframe_t *frame = zframe_new (data, size);
    free (data);
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, worker), 0);
    proto_msg_destroy (&msg);
}

//  A worker's RESULT with a msgpack result body; a reward or speedup of NAN
//  is null.
static void
s_send_graded (zsock_t *worker, proto_msg_t *job, const char *status, double reward, double speedup)
{
    s_send_doc (worker, job, status, json_pack ("{s:s, s:o, s:o, s:s}", "status", status,
                                                "reward", isnan (reward)? json_null (): json_real (reward),
                                                "speedup", isnan (speedup)? json_null (): json_real (speedup),
                                                "message", ""));
}

static json_t *
s_decode_body (proto_msg_t *msg)
{
    ck_assert_ptr_nonnull (msg->body);
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    char err [128];
    json_t *value = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), &limits,
                                      err, sizeof err);
    ck_assert_msg (value != NULL, "body does not decode: %s", err);
    return value;
}

//  The next RESULT on the client: its ref, and its body decoded.
static json_t *
s_next_result (zsock_t *client, uint64_t *ref, char worker [PROTO_MAX_STR])
{
    proto_msg_t *msg = s_expect (client, PROTO_RESULT);
    *ref = msg->ref;
    if (worker)
        memcpy (worker, msg->name, PROTO_MAX_STR);
    json_t *result = s_decode_body (msg);
    proto_msg_destroy (&msg);
    return result;
}

//  QUERY with this body (raw bytes); the next message: ANSWER (decoded,
//  returned) or, when want_code, ERROR with that code (NULL returned).
static json_t *
s_query_raw (zsock_t *client, uint64_t ref, const void *data, size_t size, uint32_t want_code)
{
    proto_msg_t *msg = proto_msg_new (PROTO_QUERY);
    msg->ref = ref;
    zframe_t *frame = zframe_new (data, size);
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, want_code? PROTO_ERROR: PROTO_ANSWER);
    ck_assert_uint_eq (msg->ref, ref);
    json_t *answer = NULL;
    if (want_code)
        ck_assert_uint_eq (msg->code, want_code);
    else
        answer = s_decode_body (msg);
    proto_msg_destroy (&msg);
    return answer;
}

static json_t *
s_query (zsock_t *client, json_t *query, uint32_t want_code)
{
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (query, &data, &size), 0);
    json_decref (query);
    json_t *answer = s_query_raw (client, 77, data, size, want_code);
    free (data);
    return answer;
}

static long long
s_path_int (json_t *root, const char *a, const char *b)
{
    json_t *value = json_object_get (root, a);
    if (b)
        value = json_object_get (value, b);
    ck_assert_msg (json_is_integer (value), "no integer at %s.%s", a, b? b: "");
    return json_integer_value (value);
}

static uint32_t
s_cancel (zsock_t *client, uint64_t job)
{
    proto_msg_t *msg = proto_msg_new (PROTO_CANCEL);
    msg->ref = 50;
    msg->job = job;
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_DONE);
    ck_assert_uint_eq (msg->ref, 50);
    uint32_t count = msg->count;
    proto_msg_destroy (&msg);
    return count;
}

START_TEST (test_result_cache_coalescing_and_policies)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 4, "w1");

    //  The first job runs; an identical one (other seed and tag) follows it;
    //  a bypass one runs on its own.
    s_submit_job (client, 1, s_job_frame ("relu", "a", 1, NULL), "", "", 0, "");
    proto_msg_t *first = s_expect (worker, PROTO_JOB);
    s_submit_job (client, 2, s_job_frame ("relu", "a", 2, "t2"), "t2", "", 0, "use");
    s_submit_job (client, 3, s_job_frame ("relu", "a", 3, NULL), "", "", 0, "bypass");
    proto_msg_t *third = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, first, "ok", 1.5, 1.5);
    uint64_t ref;
    char who [PROTO_MAX_STR];
    bool seen [3] = { false, false, false };
    for (int i = 0; i < 2; i++) {
        json_t *result = s_next_result (client, &ref, who);
        ck_assert (ref == 1 || ref == 2);
        seen [ref] = true;
        ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
        //  The follower's copy says so; the original does not.
        ck_assert (json_is_true (json_object_get (result, "cached")) == (ref == 2));
        ck_assert (json_is_true (json_object_get (result, "coalesced")) == (ref == 2));
        //  Each echoes its own tag, not the first job's.
        if (ref == 2)
            ck_assert_str_eq (json_string_value (json_object_get (result, "tag")), "t2");
        ck_assert_str_eq (who, "w1");
        json_decref (result);
    }
    ck_assert (seen [1] && seen [2]);
    s_send_graded (worker, third, "ok", 1.4, 1.4);
    json_t *result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 3);
    ck_assert_ptr_null (json_object_get (result, "cached"));
    json_decref (result);
    proto_msg_destroy (&first);
    proto_msg_destroy (&third);

    //  Later, the same job is answered from the cache and never dispatched.
    s_submit_job (client, 4, s_job_frame ("relu", "a", 9, NULL), "", "", 0, "");
    result = s_next_result (client, &ref, who);
    ck_assert_uint_eq (ref, 4);
    ck_assert (json_is_true (json_object_get (result, "cached")));
    ck_assert_ptr_null (json_object_get (result, "coalesced"));
    ck_assert (json_is_null (json_object_get (result, "tag")));
    ck_assert_str_eq (who, "cache");
    json_decref (result);
    ck_assert_int_eq (s_stat (&broker, "dispatched"), 2);

    //  refresh grades again (and replaces the entry); bypass neither reads nor keeps.
    s_submit_job (client, 5, s_job_frame ("relu", "a", 1, NULL), "", "", 0, "refresh");
    proto_msg_t *fifth = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, fifth, "incorrect", -0.5, NAN);
    proto_msg_destroy (&fifth);
    result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 5);
    json_decref (result);
    s_submit_job (client, 6, s_job_frame ("relu", "a", 1, NULL), "", "", 0, "");
    result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 6);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "incorrect");
    ck_assert (json_is_true (json_object_get (result, "cached")));
    json_decref (result);

    //  An internal_error is not remembered: the same job runs again.
    s_submit_job (client, 7, s_job_frame ("relu", "b", 1, NULL), "", "", 0, "");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "internal_error", NAN, NAN);
    proto_msg_destroy (&job);
    json_decref (s_next_result (client, &ref, NULL));
    s_submit_job (client, 8, s_job_frame ("relu", "b", 1, NULL), "", "", 0, "");
    job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "ok", 1.0, 1.0);
    proto_msg_destroy (&job);
    json_decref (s_next_result (client, &ref, NULL));

    //  A policy the broker does not know is refused.
    proto_msg_t *msg = proto_msg_new (PROTO_SUBMIT);
    msg->ref = 9;
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->cache, "sometimes");
    zframe_t *body = s_job_frame ("relu", "a", 1, NULL);
    proto_msg_set_body (msg, &body);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_uint_eq (msg->ref, 9);
    proto_msg_destroy (&msg);

    json_t *cache = s_query (client, json_pack ("{s:s}", "what", "cache"), 0);
    ck_assert_int_eq (s_path_int (cache, "hits", NULL), 2);
    ck_assert_int_eq (s_path_int (cache, "coalesced", NULL), 1);
    ck_assert_int_eq (s_path_int (cache, "entries", NULL), 2);
    json_decref (cache);
    json_t *stats = s_query (client, json_pack ("{s:s}", "what", "stats"), 0);
    ck_assert_int_eq (s_path_int (stats, "counts", "cache_hits"), 2);
    ck_assert_int_eq (s_path_int (stats, "counts", "coalesced"), 1);
    ck_assert_int_eq (s_path_int (stats, "counts", "completed"), 8);
    ck_assert_int_eq (s_path_int (stats, "statuses", "ok"), 5);
    ck_assert_int_eq (s_path_int (stats, "statuses", "incorrect"), 2);
    ck_assert_int_eq (s_path_int (stats, "statuses", "internal_error"), 1);
    ck_assert (json_number_value (json_object_get (stats, "rate_1m")) > 0);
    json_decref (stats);

    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_cancel_queries_groups_and_task_statistics)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *other = s_dealer (broker.clients);

    //  No worker yet: a queued job is cancelled once, and only by its owner.
    uint64_t gone = s_submit_job (client, 1, s_job_frame ("gelu", "x", 1, NULL), "", "", 0, "");
    uint64_t theirs = s_submit_job (other, 1, s_job_frame ("gelu", "y", 1, NULL), "", "", 0, "");
    ck_assert_uint_eq (s_cancel (other, gone), 0);
    ck_assert_uint_eq (s_cancel (client, gone), 1);
    ck_assert_uint_eq (s_cancel (client, gone), 0);
    ck_assert_uint_eq (s_cancel (client, 424242), 0);
    json_t *answer = s_query (client, json_pack ("{s:s, s:I}", "what", "job", "job", (json_int_t) gone), 0);
    json_t *job = json_object_get (answer, "job");
    ck_assert_str_eq (json_string_value (json_object_get (job, "state")), "cancelled");
    ck_assert_str_eq (json_string_value (json_object_get (job, "task")), "gelu");
    ck_assert (json_is_null (json_object_get (job, "result")));
    json_decref (answer);

    //  A worker comes: only the other client's job reaches it.
    zsock_t *worker = s_dealer (broker.workers);
    proto_msg_t *ready = proto_msg_new (PROTO_READY);
    proto_msg_set_str (ready->backend, "cpu");
    proto_msg_set_str (ready->device, "test device");
    proto_msg_set_str (ready->name, "w1");
    proto_msg_set_str (ready->host, "node-7");
    ready->capacity = 4;
    ck_assert_int_eq (proto_msg_send (ready, worker), 0);
    proto_msg_destroy (&ready);
    proto_msg_t *msg = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (msg->job, theirs);
    s_send_graded (worker, msg, "ok", 2.0, 2.0);
    proto_msg_destroy (&msg);
    uint64_t ref;
    json_decref (s_next_result (other, &ref, NULL));

    //  A group of two, declared: one SUMMARY after both results.
    uint64_t g1 = s_submit_job (client, 2, s_job_frame ("gelu", "p", 1, "tg"), "tg", "g1", 2, "");
    uint64_t g2 = s_submit_job (client, 3, s_job_frame ("gelu", "q", 1, "tg"), "tg", "g1", 2, "");
    for (int i = 0; i < 2; i++) {
        msg = s_expect (worker, PROTO_JOB);
        bool first = msg->job == g1;
        ck_assert (first || msg->job == g2);
        s_send_graded (worker, msg, first? "ok": "incorrect", first? 1.0: -0.5, first? 1.0: NAN);
        proto_msg_destroy (&msg);
    }
    json_decref (s_next_result (client, &ref, NULL));
    json_decref (s_next_result (client, &ref, NULL));
    msg = s_expect (client, PROTO_SUMMARY);
    ck_assert_str_eq (msg->group, "g1");
    json_t *summary = s_decode_body (msg);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_path_int (summary, "count", NULL), 2);
    ck_assert_double_eq_tol (json_number_value (json_object_get (summary, "pass_rate")), 0.5, 1e-9);
    ck_assert_double_eq_tol (json_number_value (json_object_get (summary, "reward_mean")), 0.25, 1e-9);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    ck_assert_int_eq (s_path_int (summary, "best_job", NULL), (long long) g1);
    json_decref (summary);

    //  A running job cancelled: it finishes on the worker, its result goes nowhere.
    uint64_t running = s_submit_job (client, 4, s_job_frame ("gelu", "r", 1, NULL), "", "", 0, "");
    msg = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (msg->job, running);
    ck_assert_uint_eq (s_cancel (client, running), 1);
    s_send_graded (worker, msg, "ok", 1.0, 1.0);
    proto_msg_destroy (&msg);
    const char *state = NULL;
    for (int tries = 0; tries < 500; tries++) {
        answer = s_query (client, json_pack ("{s:s, s:I}", "what", "job", "job", (json_int_t) running), 0);
        bool done = streq (json_string_value (json_object_get (json_object_get (answer, "job"), "state")),
                           "cancelled");
        json_decref (answer);
        if (done) {
            state = "cancelled";
            break;
        }
        zclock_sleep (5);
    }
    ck_assert_str_eq (state, "cancelled");
    //  Nothing but the ANSWER comes: no RESULT for the cancelled job.
    json_decref (s_query (client, json_pack ("{s:s}", "what", "stats"), 0));

    //  jobs by tag, newest first, with results on request.
    answer = s_query (client, json_pack ("{s:s, s:s, s:b}", "what", "jobs", "tag", "tg", "results", 1), 0);
    json_t *jobs = json_object_get (answer, "jobs");
    ck_assert_uint_eq (json_array_size (jobs), 2);
    ck_assert_int_eq (s_path_int (json_array_get (jobs, 0), "job", NULL), (long long) g2);
    ck_assert_str_eq (json_string_value (json_object_get (json_array_get (jobs, 0), "group")), "g1");
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (json_array_get (jobs, 1), "result"),
                                                         "status")), "ok");
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:s, s:i}", "what", "jobs", "group", "g1", "limit", 1), 0);
    ck_assert_uint_eq (json_array_size (json_object_get (answer, "jobs")), 1);
    ck_assert (json_is_true (json_object_get (answer, "truncated")));
    json_decref (answer);

    //  results of a task: the three graded gelu jobs not cancelled, newest first.
    answer = s_query (client, json_pack ("{s:s, s:s}", "what", "results", "task", "gelu"), 0);
    json_t *results = json_object_get (answer, "results");
    ck_assert_uint_eq (json_array_size (results), 3);
    ck_assert_int_eq (s_path_int (json_array_get (results, 2), "job", NULL), (long long) theirs);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_ne (s_path_int (json_array_get (results, i), "job", NULL), (long long) running);
    json_decref (answer);

    //  Task statistics: 4 results (the cancelled one's too), 3 ok; in the
    //  band [0.7, 0.8], not in [0, 0.5].
    answer = s_query (client, json_pack ("{s:s}", "what", "tasks"), 0);
    json_t *task = json_array_get (json_object_get (answer, "tasks"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (task, "task")), "gelu");
    ck_assert_int_eq (s_path_int (task, "attempts", NULL), 4);
    ck_assert_double_eq_tol (json_number_value (json_object_get (task, "pass_rate")), 0.75, 1e-9);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:f, s:f}", "what", "tasks", "lo", 0.7, "hi", 0.8), 0);
    ck_assert_uint_eq (json_array_size (json_object_get (answer, "tasks")), 1);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:f, s:f}", "what", "tasks", "lo", 0.0, "hi", 0.5), 0);
    ck_assert_uint_eq (json_array_size (json_object_get (answer, "tasks")), 0);
    json_decref (answer);

    //  workers: host, state, done.
    answer = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
    json_t *w = json_array_get (json_object_get (answer, "workers"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (w, "name")), "w1");
    ck_assert_str_eq (json_string_value (json_object_get (w, "host")), "node-7");
    ck_assert_str_eq (json_string_value (json_object_get (w, "state")), "idle");
    ck_assert_int_eq (s_path_int (w, "done", NULL), 4);
    //  No heartbeat has said its busy ratio yet.
    ck_assert (json_is_null (json_object_get (w, "busy")));
    json_decref (answer);

    //  A HEARTBEAT's busy ratio is kept; one out of 0..1 is refused and changes nothing.
    proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
    beat->busy = 0.75;
    ck_assert_int_eq (proto_msg_send (beat, worker), 0);
    double busy = -1;
    int64_t deadline = zclock_mono () + WAIT_MS;
    while (busy != 0.75 && zclock_mono () < deadline) {
        answer = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
        json_t *value = json_object_get (json_array_get (json_object_get (answer, "workers"), 0), "busy");
        busy = json_is_number (value)? json_number_value (value): -1;
        json_decref (answer);
    }
    ck_assert_double_eq (busy, 0.75);
    zmsg_t *raw = zmsg_new ();
    const uint8_t sig [] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, PROTO_HEARTBEAT };
    zmsg_addmem (raw, sig, sizeof sig);
    zmsg_addmem (raw, "\x81\xa4" "busy" "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 15);     //  1.5
    ck_assert_int_eq (zmsg_send (&raw, worker), 0);
    msg = s_expect (worker, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_MALFORMED);
    ck_assert_msg (strstr (msg->reason, "'busy' is not between 0 and 1"), "reason: %s", msg->reason);
    proto_msg_destroy (&msg);
    answer = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
    w = json_array_get (json_object_get (answer, "workers"), 0);
    ck_assert_double_eq (json_number_value (json_object_get (w, "busy")), 0.75);
    json_decref (answer);
    proto_msg_destroy (&beat);

    //  Header strings that are not UTF-8 (a tag, a group) still answer.
    uint64_t odd = s_submit_job (client, 9, s_job_frame ("gelu", "u", 1, NULL), "t\xff", "g\xfe", 0, "");
    answer = s_query (client, json_pack ("{s:s, s:I}", "what", "job", "job", (json_int_t) odd), 0);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (answer, "job"), "tag")), "t?");
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (answer, "job"), "group")), "g?");
    json_decref (answer);
    msg = s_expect (worker, PROTO_JOB);
    //  Its result carries the reference's operators (as PyTorch tasks' do).
    s_send_doc (worker, msg, "ok", json_pack ("{s:s, s:f, s:f, s:s, s:{s:{s:[{s:s, s:f}]}}}",
        "status", "ok", "reward", 1.0, "speedup", 1.0, "message", "", "profile", "reference",
        "operators", "name", "aten::gelu", "share", 0.9));
    proto_msg_destroy (&msg);
    json_decref (s_next_result (client, &ref, NULL));
    msg = s_expect (client, PROTO_SUMMARY);             //  its group ends with it
    proto_msg_destroy (&msg);
    //  Curriculum signals of gelu: two groups ended (g1's rewards differ, a
    //  group of one has no spread), and the latest operators.
    answer = s_query (client, json_pack ("{s:s}", "what", "tasks"), 0);
    task = json_array_get (json_object_get (answer, "tasks"), 0);
    ck_assert_int_eq (s_path_int (task, "groups", NULL), 2);
    ck_assert_int_eq (s_path_int (task, "zero_variance_groups", NULL), 1);
    ck_assert (json_is_true (json_object_get (task, "last_group_zero_variance")));
    json_t *op = json_array_get (json_object_get (task, "operators"), 0);
    ck_assert_str_eq (json_string_value (json_object_get (op, "name")), "aten::gelu");
    ck_assert_double_eq_tol (json_number_value (json_object_get (op, "share")), 0.9, 1e-9);
    json_decref (answer);

    //  Bad queries get a reason, and the broker serves on.
    s_query_raw (client, 77, "\xc0", 1, PROTO_ERR_MALFORMED);
    s_query_raw (client, 77, "\x81\xa4what", 6, PROTO_ERR_MALFORMED);
    json_decref (s_query (client, json_pack ("{s:s}", "what", "everything"), PROTO_ERR_MALFORMED));
    json_decref (s_query (client, json_pack ("{s:s, s:i}", "what", "job", "job", 12345), PROTO_ERR_NOT_FOUND));
    json_decref (s_query (client, json_pack ("{s:s, s:s}", "what", "job", "job", "1"), PROTO_ERR_MALFORMED));
    json_decref (s_query (client, json_pack ("{s:s, s:s, s:i}", "what", "jobs", "tag", "tg", "limit", 0),
                          PROTO_ERR_MALFORMED));
    json_decref (s_query (client, json_pack ("{s:s, s:s, s:s}", "what", "jobs", "tag", "tg", "group", "g1"),
                          PROTO_ERR_MALFORMED));
    json_decref (s_query (client, json_pack ("{s:s, s:f}", "what", "tasks", "lo", 0.5), PROTO_ERR_MALFORMED));
    //  A multi-turn tool's state: put only if new, put over the version read,
    //  a late writer refused, close.
    answer = s_query (client, json_pack ("{s:s, s:s, s:s, s:{s:i}, s:i}", "what", "trajectory", "id", "tr-1",
                                         "op", "put", "state", "turns", 1, "if_version", 0), 0);
    ck_assert_int_eq (s_path_int (answer, "version", NULL), 1);
    json_decref (answer);
    json_decref (s_query (client, json_pack ("{s:s, s:s, s:s, s:{s:i}, s:i}", "what", "trajectory", "id",
                                             "tr-1", "op", "put", "state", "turns", 9, "if_version", 0),
                          PROTO_ERR_CONFLICT));
    answer = s_query (client, json_pack ("{s:s, s:s, s:s, s:{s:i}, s:i}", "what", "trajectory", "id", "tr-1",
                                         "op", "put", "state", "turns", 2, "if_version", 1), 0);
    ck_assert_int_eq (s_path_int (answer, "version", NULL), 2);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:s, s:s}", "what", "trajectory", "id", "tr-1", "op", "get"), 0);
    ck_assert_int_eq (s_path_int (answer, "state", "turns"), 2);
    ck_assert_int_eq (s_path_int (answer, "version", NULL), 2);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:s, s:s}", "what", "trajectory", "id", "tr-1", "op", "close"), 0);
    ck_assert_int_eq (s_path_int (answer, "state", "turns"), 2);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:s, s:s}", "what", "trajectory", "id", "tr-1", "op", "get"), 0);
    ck_assert (json_is_null (json_object_get (answer, "state")));
    ck_assert_int_eq (s_path_int (answer, "version", NULL), 0);
    json_decref (answer);
    json_decref (s_query (client, json_pack ("{s:s, s:s, s:s}", "what", "trajectory", "id", "tr-1", "op", "drop"),
                          PROTO_ERR_MALFORMED));
    char *huge = malloc (1500 * 1024 + 1);
    memset (huge, 'k', 1500 * 1024);
    huge [1500 * 1024] = 0;
    json_decref (s_query (client, json_pack ("{s:s, s:s, s:s, s:s}", "what", "trajectory", "id", "tr-2",
                                             "op", "put", "state", huge), PROTO_ERR_TOO_LARGE));
    free (huge);

    answer = s_query (client, json_pack ("{s:s}", "what", "stats"), 0);
    ck_assert_int_eq (s_path_int (answer, "counts", "cancelled"), 2);
    json_decref (answer);

    zsock_destroy (&worker);
    zsock_destroy (&other);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_followers_count_against_the_queue_bound)
{
    //  Identical jobs follow the first instead of queueing, but still take
    //  room: a flood of one job cannot grow the broker without bound.
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 3);
    zsock_t *client = s_dealer (broker.clients);
    for (int i = 1; i <= 3; i++)
        s_submit_job (client, i, s_job_frame ("relu", "same", i, NULL), "", "", 0, "");
    json_t *stats = s_query (client, json_pack ("{s:s}", "what", "stats"), 0);
    ck_assert_int_eq (s_path_int (stats, "following", NULL), 2);
    ck_assert_int_eq (s_path_int (stats, "queued", "cpu"), 1);
    json_decref (stats);
    proto_msg_t *msg = proto_msg_new (PROTO_SUBMIT);
    msg->ref = 4;
    proto_msg_set_str (msg->backend, "cpu");
    zframe_t *body = s_job_frame ("relu", "same", 4, NULL);
    proto_msg_set_body (msg, &body);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, PROTO_ERR_OVERLOADED);
    proto_msg_destroy (&msg);
    //  One worker grades it once; all three are answered.
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 4, "w1");
    msg = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, msg, "ok", 1.0, 1.0);
    proto_msg_destroy (&msg);
    for (int i = 0; i < 3; i++) {
        uint64_t ref;
        json_decref (s_next_result (client, &ref, NULL));
    }
    ck_assert_int_eq (s_stat (&broker, "dispatched"), 1);
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_cached_results_are_per_device_model)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 100);
    zsock_t *client = s_dealer (broker.clients);
    const char *devices [] = { "NVIDIA H200 (sm_90, 0000:00:06.0)", "NVIDIA H200 (sm_90, 0000:00:07.0)",
                               "NVIDIA A100 (sm_80, 0000:00:06.0)" };
    zsock_t *workers [3];
    for (int i = 0; i < 3; i++) {
        workers [i] = s_dealer (broker.workers);
        proto_msg_t *ready = proto_msg_new (PROTO_READY);
        proto_msg_set_str (ready->backend, i < 2? "cpu": "other");
        proto_msg_set_str (ready->device, devices [i]);
        snprintf (ready->name, sizeof ready->name, "gpu%d", i);
        ready->capacity = 1;
        ck_assert_int_eq (proto_msg_send (ready, workers [i]), 0);
        proto_msg_destroy (&ready);
    }
    //  Graded on one board of a model...
    s_submit_job (client, 1, s_job_frame ("relu", "m", 1, NULL), "", "", 0, "");
    zpoller_t *poller = zpoller_new (workers [0], workers [1], NULL);
    zsock_t *which = (zsock_t *) zpoller_wait (poller, WAIT_MS);
    ck_assert_ptr_nonnull (which);
    zpoller_destroy (&poller);
    proto_msg_t *msg = s_expect (which, PROTO_JOB);
    s_send_graded (which, msg, "ok", 1.0, 1.0);
    proto_msg_destroy (&msg);
    uint64_t ref;
    json_decref (s_next_result (client, &ref, NULL));
    //  ... answered for the model whichever board is left.
    s_send_cmd (which, PROTO_DISCONNECT);
    json_decref (s_query (client, json_pack ("{s:s}", "what", "stats"), 0));    //  DISCONNECT is in
    s_submit_job (client, 2, s_job_frame ("relu", "m", 2, NULL), "", "", 0, "");
    json_t *result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 2);
    ck_assert (json_is_true (json_object_get (result, "cached")));
    json_decref (result);
    json_t *cache = s_query (client, json_pack ("{s:s}", "what", "cache"), 0);
    ck_assert_int_eq (s_path_int (cache, "entries", NULL), 1);
    json_decref (cache);
    for (int i = 0; i < 3; i++)
        zsock_destroy (&workers [i]);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

//  A job body with its own reward settings (clip), as msgpack.
static zframe_t *
s_job_frame_clip (const char *source, double clip)
{
    return s_mpk_frame (json_pack ("{s:{s:s, s:s}, s:{s:s}, s:{s:f}}", "task", "name", "relu",
                                   "backend", "cpu", "candidate", "source", source,
                                   "reward", "clip", clip));
}

//  The check of docs/protocol.md section 5, run here on what reached the
//  client: a broker-made result must pass it like any other.
static void
s_assert_passes_check (json_t *result, const common_reward_t *params)
{
    zframe_t *frame = s_mpk_frame (json_incref (result));
    broker_verdict_t verdict;
    char why [256] = "";
    int rc = broker_verdict_parse (zframe_data (frame), zframe_size (frame), NULL, &verdict, why,
                                   sizeof why);
    if (rc == 0)
        rc = broker_verdict_judge (&verdict, params, why, sizeof why);
    zframe_destroy (&frame);
    ck_assert_msg (rc == 0, "a result the broker sent fails its own check: %s", why);
}

START_TEST (test_results_are_checked_not_believed)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 4, "rogue");
    common_reward_t defaults;
    common_reward_from_json (NULL, &defaults, NULL, 0);

    //  Hostile bodies, each for its own job (default reward settings) from
    //  the one registered worker: body, header status, what the reason says.
    static const struct {
        const char *body;
        size_t size;
        const char *status;
        const char *why;
    } hostile [] = {
        { "plain text, not msgpack", 23, NULL, "does not decode" },
        { "\x93\x01\x02\x03", 4, NULL, "not a map" },
        { "\xdf\xff\xff\xff\xff", 5, NULL, "does not decode" },        //  a map of 4G entries
        { "\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91"
          "\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\xc0",
          40, NULL, "does not decode" },                              //  nested 39 deep
        //  {"status": "ok", "reward": 99.0}: the forged reward of issue #12
        { "\x82\xa6status\xa2ok\xa6reward\xcb\x40\x58\xc0\x00\x00\x00\x00\x00", 27, "ok",
          "reward 99 is not the 1" },
        { "\x82\xa6status\xa2ok\xa6reward\x01", 19, "incorrect", "header's status 'incorrect'" },
        { "\x82\xa6status\xa9" "excellent\xa6reward\x01", 26, NULL, "not a result status" },
        { "\x81\xa6reward\x01", 9, NULL, "no 'status'" },
        //  {"status": "incorrect", "reward": -0.5, "speedup": 3}
        { "\x83\xa6status\xa9incorrect\xa6reward\xcb\xbf\xe0\x00\x00\x00\x00\x00\x00"
          "\xa7speedup\x03", 43, NULL, "only ok has one" },
        { "\x82\xa6status\xaeinternal_error\xa6reward\x01", 31, NULL, "it carries none" },
        { "\x82\xa6status\xa2ok\xa6reward\xa3one", 22, NULL, "neither a number nor null" },
        { "\x81\xa6status\xa2ok", 11, NULL, "without a reward" },
        { "\x82\xa6status\xa2ok\xa6reward\x01\xc0", 20, NULL, "trailing" },
    };
    size_t nhostile = sizeof hostile / sizeof hostile [0];
    uint64_t ref;
    char who [PROTO_MAX_STR];
    for (size_t i = 0; i < nhostile; i++) {
        char source [16];
        snprintf (source, sizeof source, "h%zu", i);
        s_submit_job (client, 10 + i, s_job_frame ("relu", source, 1, NULL), "", "", 0, "bypass");
        proto_msg_t *job = s_expect (worker, PROTO_JOB);
        s_send_raw_result (worker, job->job, job->attempt, hostile [i].body, hostile [i].size,
                           hostile [i].status);
        proto_msg_destroy (&job);
        proto_msg_t *msg = s_expect (client, PROTO_RESULT);
        ck_assert_uint_eq (msg->ref, 10 + i);
        ck_assert_str_eq (msg->name, "kgym-broker");
        ck_assert_str_eq (msg->status, "internal_error");
        json_t *result = s_decode_body (msg);
        proto_msg_destroy (&msg);
        ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "internal_error");
        ck_assert (json_is_null (json_object_get (result, "reward")));
        const char *message = json_string_value (json_object_get (result, "message"));
        ck_assert_msg (message && strstr (message, "worker rogue") && strstr (message, hostile [i].why),
                       "body %zu: the message should name the worker and say '%s', got '%s'", i,
                       hostile [i].why, message);
        s_assert_passes_check (result, &defaults);
        json_decref (result);
    }
    //  A job whose body is not a job: only invalid or internal_error fit it.
    s_submit_accepted (client, 40, "cpu", "not a job");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    s_send_raw_result (worker, job->job, job->attempt, "\x82\xa6status\xa2ok\xa6reward\x01", 19,
                       "ok");
    proto_msg_destroy (&job);
    json_t *result = s_next_result (client, &ref, who);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "internal_error");
    ck_assert (strstr (json_string_value (json_object_get (result, "message")), "cannot be graded"));
    json_decref (result);

    //  The job's own settings decide: with clip 4 a speedup of 3 earns 3, so
    //  the default clip's 2 is wrong and 3 is right.
    s_submit_job (client, 41, s_job_frame_clip ("c1", 4.0), "", "", 0, "bypass");
    job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "ok", 2.0, 3.0);
    proto_msg_destroy (&job);
    result = s_next_result (client, &ref, who);
    ck_assert_uint_eq (ref, 41);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "internal_error");
    ck_assert (strstr (json_string_value (json_object_get (result, "message")), "reward 2 is not the 3"));
    json_decref (result);
    s_submit_job (client, 42, s_job_frame_clip ("c2", 4.0), "", "", 0, "bypass");
    job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "ok", 3.0 * (1 + 1e-9), 3.0);        //  within the tolerance
    proto_msg_destroy (&job);
    result = s_next_result (client, &ref, who);
    ck_assert_uint_eq (ref, 42);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
    ck_assert_str_eq (who, "rogue");
    json_decref (result);

    //  Its other jobs are unaffected: a good result is taken as it is.
    s_submit_job (client, 43, s_job_frame ("relu", "good", 1, NULL), "", "", 0, "");
    job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "incorrect", -0.5, NAN);
    proto_msg_destroy (&job);
    result = s_next_result (client, &ref, who);
    ck_assert_uint_eq (ref, 43);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "incorrect");
    ck_assert_str_eq (who, "rogue");
    json_decref (result);

    //  Counted against the worker (and the bad ones never reached the cache).
    long long bad = (long long) nhostile + 2;
    ck_assert_int_eq (s_stat (&broker, "bad_results"), bad);
    json_t *workers = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
    json_t *rogue = json_array_get (json_object_get (workers, "workers"), 0);
    ck_assert_int_eq (s_path_int (rogue, "bad_results", NULL), bad);
    ck_assert_int_eq (s_path_int (rogue, "done", NULL), bad + 2);
    json_decref (workers);
    json_t *cache = s_query (client, json_pack ("{s:s}", "what", "cache"), 0);
    ck_assert_int_eq (s_path_int (cache, "entries", NULL), 1);          //  job 43's incorrect
    json_decref (cache);
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_timeouts_are_never_cached)
{
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 1000);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 4, "busy");
    //  A timeout on a busy worker, then the same job: graded again, not
    //  answered from the cache.
    uint64_t ref;
    char who [PROTO_MAX_STR];
    for (int round = 1; round <= 2; round++) {
        s_submit_job (client, round, s_job_frame ("relu", "slow", round, NULL), "", "", 0, "use");
        proto_msg_t *job = s_expect (worker, PROTO_JOB);
        s_send_graded (worker, job, "timeout", -0.5, NAN);
        proto_msg_destroy (&job);
        json_t *result = s_next_result (client, &ref, who);
        ck_assert_uint_eq (ref, (uint64_t) round);
        ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "timeout");
        ck_assert_ptr_null (json_object_get (result, "cached"));
        ck_assert_str_eq (who, "busy");
        json_decref (result);
    }
    ck_assert_int_eq (s_stat (&broker, "dispatched"), 2);
    json_t *cache = s_query (client, json_pack ("{s:s}", "what", "cache"), 0);
    ck_assert_int_eq (s_path_int (cache, "entries", NULL), 0);
    ck_assert_int_eq (s_path_int (cache, "hits", NULL), 0);
    json_decref (cache);
    //  The kernel's own verdicts still are: an incorrect answers the next one.
    s_submit_job (client, 3, s_job_frame ("relu", "wrong", 1, NULL), "", "", 0, "use");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "incorrect", -0.5, NAN);
    proto_msg_destroy (&job);
    json_decref (s_next_result (client, &ref, NULL));
    s_submit_job (client, 4, s_job_frame ("relu", "wrong", 2, NULL), "", "", 0, "use");
    json_t *result = s_next_result (client, &ref, who);
    ck_assert_uint_eq (ref, 4);
    ck_assert (json_is_true (json_object_get (result, "cached")));
    ck_assert_str_eq (who, "cache");
    json_decref (result);
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_task_statistics_survive_a_restart)
{
    char dir [] = "/tmp/kgym-test-tasks-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char path [128];
    snprintf (path, sizeof path, "%s/jobs.db", dir);
    for (int round = 0; round < 2; round++) {
        broker_config_t cfg;
        broker_config_default (&cfg);
        cfg.db_path = path;
        s_broker_t broker;
        s_broker_start_cfg (&broker, &cfg);
        zsock_t *client = s_dealer (broker.clients);
        zsock_t *worker = s_dealer (broker.workers);
        s_send_ready (worker, "cpu", 1, "w1");
        s_submit_job (client, 1, s_job_frame ("softmax", round? "v2": "v1", 1, NULL), "", "", 0, "");
        proto_msg_t *msg = s_expect (worker, PROTO_JOB);
        s_send_graded (worker, msg, round? "ok": "compile_error", round? 1.0: -1.0,
                       round? 1.0: NAN);
        proto_msg_destroy (&msg);
        uint64_t ref;
        json_decref (s_next_result (client, &ref, NULL));
        json_t *answer = s_query (client, json_pack ("{s:s}", "what", "tasks"), 0);
        json_t *task = json_array_get (json_object_get (answer, "tasks"), 0);
        ck_assert_str_eq (json_string_value (json_object_get (task, "task")), "softmax");
        //  The second broker still knows the first one's result.
        ck_assert_int_eq (s_path_int (task, "attempts", NULL), round + 1);
        ck_assert_double_eq_tol (json_number_value (json_object_get (task, "compile_rate")),
                                 round? 0.5: 0.0, 1e-9);
        json_decref (answer);
        zsock_destroy (&worker);
        zsock_destroy (&client);
        s_broker_stop (&broker);
    }
    char command [160];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    ck_assert_int_eq (system (command), 0);
}
END_TEST

//  --------------------------------------------------------------------------
//  A real kgym-broker process, killed and started again on its database

#define S_TRAINER "restarted-trainer"   //  the named client of the restart test

//  kgym-broker on these endpoints with this database; returns once it
//  answers a HEARTBEAT.
static pid_t
s_broker_process (const char *clients, const char *workers, const char *db)
{
    char *prog = zsys_sprintf ("%s/broker/kgym-broker", KGYM_BUILD_DIR);
    char *argv [] = { prog, "--clients", (char *) clients, "--workers", (char *) workers,
                      "--heartbeat", "100", "--db", (char *) db, NULL };
    pid_t pid = testutil_spawn (argv);
    zstr_free (&prog);
    zsock_t *probe = s_dealer (clients);
    s_send_cmd (probe, PROTO_HEARTBEAT);
    proto_msg_t *reply = s_expect (probe, PROTO_HEARTBEAT);
    proto_msg_destroy (&reply);
    zsock_destroy (&probe);
    return pid;
}

//  The candidate source of a JOB's body (a new string).
static char *
s_job_source (proto_msg_t *job)
{
    json_t *body = s_decode_body (job);
    const char *source = json_string_value (json_object_get (json_object_get (body, "candidate"),
                                                             "source"));
    ck_assert_ptr_nonnull (source);
    char *copy = strdup (source);
    json_decref (body);
    return copy;
}

//  Every SUBMIT option (cache policy, group and its size, trajectory, tag,
//  client) is stored with the job and comes back with it when the broker
//  process is killed and started again on its database.
START_TEST (test_submit_options_survive_a_killed_broker)
{
    common_log_set_level (LOG_LEVEL_WARN);
    char dir [] = "/tmp/kgym-test-restart-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char db [128], clients [64], workers [64];
    snprintf (db, sizeof db, "%s/jobs.sqlite", dir);
    snprintf (clients, sizeof clients, "tcp://127.0.0.1:%d", testutil_free_port ());
    snprintf (workers, sizeof workers, "tcp://127.0.0.1:%d", testutil_free_port ());
    pid_t broker = s_broker_process (clients, workers, db);
    zsock_t *client = s_dealer (clients);

    //  Job 1 of group g (2 jobs) is graded before the kill.
    s_submit_options (client, 1, s_job_frame ("relu", "j1", 1, NULL), S_TRAINER, "t1", "g", 2,
                      "traj-1", "use");
    zsock_t *worker = s_dealer (workers);
    s_send_ready (worker, "cpu", 1, "before");
    proto_msg_t *msg = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, msg, "ok", 1.0, 1.0);
    proto_msg_destroy (&msg);
    uint64_t ref;
    json_decref (s_next_result (client, &ref, NULL));
    ck_assert_uint_eq (ref, 1);
    s_send_cmd (worker, PROTO_DISCONNECT);
    zsock_destroy (&worker);
    //  Until the broker has seen it leave (it came on the other socket).
    json_t *answer;
    size_t registered;
    int64_t deadline = zclock_mono () + WAIT_MS;
    do {
        ck_assert_msg (zclock_mono () < deadline, "the broker never saw the worker leave");
        answer = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
        registered = json_array_size (json_object_get (answer, "workers"));
        json_decref (answer);
    } while (registered > 0);
    //  Queued with no worker: job 2 of g, a bypass job, a use job; group h
    //  (2 jobs): one cancelled, one left to run.
    uint64_t j2 = s_submit_options (client, 2, s_job_frame ("relu", "j2", 1, NULL), S_TRAINER,
                                    "t2", "g", 2, "", "use");
    s_submit_options (client, 3, s_job_frame ("relu", "z", 1, NULL), S_TRAINER, "", "", 0, "",
                      "bypass");
    s_submit_options (client, 4, s_job_frame ("relu", "u", 1, NULL), S_TRAINER, "", "", 0,
                      "traj-1", "use");
    uint64_t h1 = s_submit_options (client, 5, s_job_frame ("relu", "h1", 1, NULL), S_TRAINER, "",
                                    "h", 2, "", "use");
    msg = proto_msg_new (PROTO_CANCEL);
    msg->ref = 6;
    msg->job = h1;
    proto_msg_set_str (msg->client, S_TRAINER);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_DONE);
    ck_assert_uint_eq (msg->count, 1);
    proto_msg_destroy (&msg);
    s_submit_options (client, 7, s_job_frame ("relu", "h2", 1, NULL), S_TRAINER, "", "h", 2, "",
                      "use");

    ck_assert_int_eq (kill (broker, SIGKILL), 0);
    int status;
    ck_assert_int_eq (waitpid (broker, &status, 0), broker);
    ck_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
    broker = s_broker_process (clients, workers, db);
    //  The client speaks again: its id binds it to its new connection.
    msg = proto_msg_new (PROTO_HEARTBEAT);
    proto_msg_set_str (msg->client, S_TRAINER);
    ck_assert_int_eq (proto_msg_send (msg, client), 0);
    proto_msg_destroy (&msg);
    msg = s_expect (client, PROTO_HEARTBEAT);
    proto_msg_destroy (&msg);

    //  trajectory, tag, group: as submitted.
    answer = s_query (client, json_pack ("{s:s, s:s}", "what", "jobs", "trajectory", "traj-1"), 0);
    ck_assert_int_eq (json_array_size (json_object_get (answer, "jobs")), 2);
    json_decref (answer);
    answer = s_query (client, json_pack ("{s:s, s:I}", "what", "job", "job", (json_int_t) j2), 0);
    json_t *job = json_object_get (answer, "job");
    ck_assert_str_eq (json_string_value (json_object_get (job, "tag")), "t2");
    ck_assert_str_eq (json_string_value (json_object_get (job, "group")), "g");
    ck_assert_str_eq (json_string_value (json_object_get (job, "state")), "queued");
    json_decref (answer);
    //  use: the restored job leads again, an identical one follows it.
    uint64_t u2 = s_submit_options (client, 8, s_job_frame ("relu", "u", 2, NULL), S_TRAINER, "",
                                    "", 0, "", "use");
    answer = s_query (client, json_pack ("{s:s, s:I}", "what", "job", "job", (json_int_t) u2), 0);
    ck_assert_str_eq (json_string_value (json_object_get (json_object_get (answer, "job"), "state")),
                      "following");
    json_decref (answer);

    //  A worker comes: j2 (incorrect), z, u and h2 run; u2 takes u's result.
    worker = s_dealer (workers);
    s_send_ready (worker, "cpu", 4, "after");
    for (int i = 0; i < 4; i++) {
        msg = s_expect (worker, PROTO_JOB);
        char *source = s_job_source (msg);
        if (streq (source, "j2"))
            s_send_graded (worker, msg, "incorrect", -0.5, NAN);
        else
            s_send_graded (worker, msg, "ok", 1.0, 1.0);
        zstr_free (&source);
        proto_msg_destroy (&msg);
    }
    //  Five results and, as groups end, two summaries counting the jobs
    //  that ended before the kill: graded (g) or cancelled (h).
    int results = 0, summaries = 0;
    while (results < 5 || summaries < 2) {
        msg = s_expect_either (client, PROTO_RESULT, PROTO_SUMMARY);
        json_t *body = s_decode_body (msg);
        if (msg->cmd == PROTO_RESULT) {
            results++;
            ck_assert (msg->ref == 2 || msg->ref == 3 || msg->ref == 4 || msg->ref == 7
                       || msg->ref == 8);
            ck_assert (json_is_true (json_object_get (body, "coalesced")) == (msg->ref == 8));
        }
        else {
            summaries++;
            bool g = streq (msg->group, "g");
            ck_assert (g || streq (msg->group, "h"));
            ck_assert_int_eq (s_path_int (body, "count", NULL), g? 2: 1);
            ck_assert_int_eq (s_path_int (body, "cancelled", NULL), g? 0: 1);
            ck_assert_int_eq (s_path_int (body, "declared_size", NULL), 2);
            ck_assert_double_eq_tol (json_number_value (json_object_get (body, "reward_mean")),
                                     g? 0.25: 1.0, 1e-9);
        }
        json_decref (body);
        proto_msg_destroy (&msg);
    }
    //  bypass: z's result was not kept, so the same job runs again; u's was.
    s_submit_options (client, 9, s_job_frame ("relu", "z", 2, NULL), S_TRAINER, "", "", 0, "",
                      "use");
    msg = s_expect (worker, PROTO_JOB);
    char *source = s_job_source (msg);
    ck_assert_str_eq (source, "z");
    zstr_free (&source);
    s_send_graded (worker, msg, "ok", 1.0, 1.0);
    proto_msg_destroy (&msg);
    json_t *result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 9);
    ck_assert_ptr_null (json_object_get (result, "cached"));
    json_decref (result);
    s_submit_options (client, 10, s_job_frame ("relu", "u", 3, NULL), S_TRAINER, "", "", 0, "",
                      "use");
    result = s_next_result (client, &ref, NULL);
    ck_assert_uint_eq (ref, 10);
    ck_assert (json_is_true (json_object_get (result, "cached")));
    json_decref (result);

    zsock_destroy (&worker);
    zsock_destroy (&client);
    ck_assert_int_eq (kill (broker, SIGKILL), 0);
    ck_assert_int_eq (waitpid (broker, &status, 0), broker);
    char command [160];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    ck_assert_int_eq (system (command), 0);
}
END_TEST

//  --------------------------------------------------------------------------
//  No silent waits (docs/protocol.md 7.3)

//  Until the broker has n workers registered (they come on the other socket).
static void
s_await_workers (zsock_t *client, size_t n)
{
    int64_t deadline = zclock_mono () + WAIT_MS;
    while (true) {
        json_t *answer = s_query (client, json_pack ("{s:s}", "what", "workers"), 0);
        size_t have = json_array_size (json_object_get (answer, "workers"));
        json_decref (answer);
        if (have == n)
            return;
        ck_assert_msg (zclock_mono () < deadline, "%zu workers registered, not %zu", have, n);
    }
}

//  The next message must be the 503 notice about (ref, job) and backend.
static void
s_expect_notice (zsock_t *client, uint64_t ref, uint64_t job, const char *backend, unsigned grace)
{
    proto_msg_t *msg = s_expect (client, PROTO_ERROR);
    ck_assert_uint_eq (msg->code, 503);
    ck_assert_uint_eq (msg->ref, ref);
    ck_assert_uint_eq (msg->job, job);
    char want [PROTO_MAX_STR];
    snprintf (want, sizeof want, "no connected worker serves backend '%s'; the job waits up to "
              "%u s for one", backend, grace);
    ck_assert_str_eq (msg->reason, want);
    proto_msg_destroy (&msg);
}

//  The next RESULT must be the broker's "no worker" failure of ref.
static void
s_expect_unserved (zsock_t *client, uint64_t ref, const char *backend, unsigned grace)
{
    proto_msg_t *msg = s_expect (client, PROTO_RESULT);
    ck_assert_uint_eq (msg->ref, ref);
    ck_assert_str_eq (msg->name, "kgym-broker");
    ck_assert_str_eq (msg->status, "internal_error");
    json_t *result = s_decode_body (msg);
    proto_msg_destroy (&msg);
    ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "internal_error");
    ck_assert (json_is_null (json_object_get (result, "reward")));
    ck_assert (json_is_null (json_object_get (result, "speedup")));
    char want [PROTO_MAX_STR];
    snprintf (want, sizeof want, "no worker serves backend '%s' (none joined within %u s)",
              backend, grace);
    ck_assert_str_eq (json_string_value (json_object_get (result, "message")), want);
    common_reward_t defaults;
    common_reward_from_json (NULL, &defaults, NULL, 0);
    s_assert_passes_check (result, &defaults);
    json_decref (result);
}

START_TEST (test_no_worker_is_said_and_answered)
{
    s_notices_expected = true;
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.no_worker_grace_s = 0;          //  fail at once
    s_broker_t broker;
    s_broker_start_cfg (&broker, &cfg);
    zsock_t *client = s_dealer (broker.clients);
    //  No worker at all: ACCEPTED, the notice, then the broker's answer.
    s_send_submit (client, 1, "cuda", "a job no worker will see");
    proto_msg_t *msg = s_expect (client, PROTO_ACCEPTED);
    uint64_t job = msg->job;
    proto_msg_destroy (&msg);
    s_expect_notice (client, 1, job, "cuda", 0);
    s_expect_unserved (client, 1, "cuda", 0);
    ck_assert_int_eq (s_stat (&broker, "unserved"), 1);
    ck_assert_int_eq (s_stat (&broker, "queued"), 0);

    //  The last worker of a backend leaves while jobs of it wait (the one
    //  it held among them): each is told, then answered.
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "only");
    s_await_workers (client, 1);
    uint64_t held = s_submit_job (client, 2, s_job_frame ("relu", "held", 1, NULL), "", "", 0, "");
    msg = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (msg->job, held);
    proto_msg_destroy (&msg);
    uint64_t waiting = s_submit_job (client, 3, s_job_frame ("relu", "waits", 1, NULL), "", "", 0,
                                     "");
    s_send_cmd (worker, PROTO_DISCONNECT);
    s_expect_notice (client, 2, held, "cpu", 0);
    s_expect_notice (client, 3, waiting, "cpu", 0);
    s_expect_unserved (client, 2, "cpu", 0);
    s_expect_unserved (client, 3, "cpu", 0);
    ck_assert_int_eq (s_stat (&broker, "unserved"), 3);
    ck_assert_int_eq (s_stat (&broker, "failed"), 3);
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_a_worker_that_joins_in_time_takes_the_job)
{
    s_notices_expected = true;
    s_broker_t broker;
    s_broker_start (&broker, 1000, 3, 100);     //  the default grace: 60 s
    zsock_t *client = s_dealer (broker.clients);
    uint64_t first = s_submit_job (client, 1, s_job_frame ("relu", "a", 1, NULL), "", "", 0, "");
    s_expect_notice (client, 1, first, "cpu", 60);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "late");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    ck_assert_uint_eq (job->job, first);
    //  Another waits behind it, for a worker that is there: no notice.
    s_submit_job (client, 2, s_job_frame ("relu", "b", 1, NULL), "", "", 0, "");
    //  The worker starts over (READY again: no moment without a worker the
    //  clients are told of); both jobs run, nothing else is said.
    s_send_ready (worker, "cpu", 1, "late");
    proto_msg_destroy (&job);
    for (uint64_t ref = 1; ref <= 2; ref++) {
        job = s_expect (worker, PROTO_JOB);
        s_send_graded (worker, job, "ok", 1.0, 1.0);
        proto_msg_destroy (&job);
        uint64_t got;
        json_t *result = s_next_result (client, &got, NULL);
        ck_assert_uint_eq (got, ref);
        ck_assert_str_eq (json_string_value (json_object_get (result, "status")), "ok");
        json_decref (result);
    }
    ck_assert_int_eq (s_stat (&broker, "unserved"), 0);
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

//  A group without a size whose jobs are answered from the cache: each one
//  is finished at its SUBMIT, so between two SUBMITs the group looked
//  complete and was summarised one job at a time (issue #16).
START_TEST (test_group_summaries_count_jobs_answered_from_the_cache)
{
    s_broker_t broker;
    s_broker_start (&broker, 1500, 3, 100);
    zsock_t *client = s_dealer (broker.clients);
    zsock_t *worker = s_dealer (broker.workers);
    s_send_ready (worker, "cpu", 1, "w");
    //  Graded once: in the cache from now on.
    s_submit_job (client, 1, s_job_frame ("relu", "known", 1, NULL), "", "", 0, "");
    proto_msg_t *job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "ok", 1.0, 1.0);
    proto_msg_destroy (&job);
    uint64_t ref;
    json_decref (s_next_result (client, &ref, NULL));

    //  Group g: a cache hit, then a job that is graded. No summary comes
    //  between them (s_expect fails on one); the one after counts both.
    s_submit_job (client, 2, s_job_frame ("relu", "known", 2, NULL), "", "g", 0, "");
    json_t *result = s_next_result (client, &ref, NULL);
    ck_assert (json_is_true (json_object_get (result, "cached")));
    json_decref (result);
    s_submit_job (client, 3, s_job_frame ("relu", "new", 1, NULL), "", "g", 0, "");
    job = s_expect (worker, PROTO_JOB);
    s_send_graded (worker, job, "incorrect", -0.5, NAN);
    proto_msg_destroy (&job);
    json_decref (s_next_result (client, &ref, NULL));
    ck_assert_uint_eq (ref, 3);
    proto_msg_t *msg = s_expect (client, PROTO_SUMMARY);
    ck_assert_str_eq (msg->group, "g");
    json_t *summary = s_decode_body (msg);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_path_int (summary, "count", NULL), 2);
    ck_assert_int_eq (s_path_int (summary, "rewards", NULL), 2);
    ck_assert (json_is_false (json_object_get (summary, "zero_variance")));
    json_decref (summary);

    //  Group h: two cache hits. One summary, of both, a heartbeat later.
    for (uint64_t i = 4; i <= 5; i++) {
        s_submit_job (client, i, s_job_frame ("relu", "known", (int) i, NULL), "", "h", 0, "");
        json_decref (s_next_result (client, &ref, NULL));
        ck_assert_uint_eq (ref, i);
    }
    msg = s_expect (client, PROTO_SUMMARY);
    ck_assert_str_eq (msg->group, "h");
    summary = s_decode_body (msg);
    proto_msg_destroy (&msg);
    ck_assert_int_eq (s_path_int (summary, "count", NULL), 2);
    ck_assert_int_eq (json_array_size (json_object_get (summary, "jobs")), 2);
    json_decref (summary);
    //  ... and only one: the next message is the answer to this query.
    json_decref (s_query (client, json_pack ("{s:s}", "what", "stats"), 0));
    zsock_destroy (&worker);
    zsock_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("broker_server");
    TCase *tc = tcase_create ("loopback");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_accepts_and_routes_by_backend);
    tcase_add_test (tc, test_results_stream_in_completion_order);
    tcase_add_test (tc, test_capacity_bounds_dispatch);
    tcase_add_test (tc, test_queue_full_is_429);
    tcase_add_test (tc, test_malformed_input_gets_400_and_broker_keeps_serving);
    tcase_add_test (tc, test_silent_worker_jobs_requeued_stale_result_dropped);
    tcase_add_test (tc, test_worker_disconnect_requeues);
    tcase_add_test (tc, test_client_heartbeat_and_disconnect);
    tcase_add_test (tc, test_cannot_bind_reports_reason);
    tcase_add_test (tc, test_job_that_loses_workers_fails_after_max_attempts);
    tcase_add_test (tc, test_durable_jobs_survive_a_restart_and_resubmits_are_answered);
    tcase_add_test (tc, test_named_client_gets_results_on_its_new_connection);
    tcase_add_test (tc, test_client_over_its_limit_is_told_429);
    tcase_add_test (tc, test_drained_and_quarantined_workers_get_no_new_jobs);
    tcase_add_test (tc, test_result_cache_coalescing_and_policies);
    tcase_add_test (tc, test_cancel_queries_groups_and_task_statistics);
    tcase_add_test (tc, test_task_statistics_survive_a_restart);
    tcase_add_test (tc, test_followers_count_against_the_queue_bound);
    tcase_add_test (tc, test_cached_results_are_per_device_model);
    tcase_add_test (tc, test_results_are_checked_not_believed);
    tcase_add_test (tc, test_timeouts_are_never_cached);
    tcase_add_test (tc, test_submit_options_survive_a_killed_broker);
    tcase_add_test (tc, test_no_worker_is_said_and_answered);
    tcase_add_test (tc, test_a_worker_that_joins_in_time_takes_the_job);
    tcase_add_test (tc, test_group_summaries_count_jobs_answered_from_the_cache);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
