/*  test_broker_server - the broker actor on loopback, driven by a test client
    and test workers (plain DEALER sockets this thread steps through each
    scenario, so every order is deterministic and nothing sleeps).  */
#include "testutil.h"
#include "broker_server.h"
#include "proto_msg.h"
#include "common_log.h"
#include "proto_mpk.h"
#include <string.h>
#include <stdlib.h>

#define WAIT_MS 5000            //  longest any step may take

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

//  Next message of command cmd on sock within WAIT_MS. HEARTBEATs on the
//  way are answered (a test worker stays alive while it waits) and skipped.
static proto_msg_t *
s_expect (zsock_t *sock, proto_cmd_t cmd)
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
        if (msg->cmd == cmd)
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

static void
s_send_result (zsock_t *worker, uint64_t job, uint32_t attempt, const char *body)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->job = job;
    msg->attempt = attempt;
    zframe_t *frame = zframe_new (body, strlen (body));
    proto_msg_set_body (msg, &frame);
    ck_assert_int_eq (proto_msg_send (msg, worker), 0);
    proto_msg_destroy (&msg);
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
        body = s_body_text (msg);
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
        char *body = s_body_text (msg);
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
    char *body = s_body_text (msg);
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
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
