/*  test_worker_server - a real worker (CPU backend) against a broker played
    by the test: a ROUTER on loopback that reads READY and HEARTBEAT, sends
    JOBs and reads RESULTs, answering heartbeats so the worker stays.

    What it proves: compiles go through a pool of the configured size and
    fill it (never more at once, and all of it used when jobs queue); the
    worker takes enough jobs to keep that pool busy (READY's capacity); a
    job that prepare decides (a compile error) is answered at once instead
    of waiting for the run slot a long job holds; and every HEARTBEAT
    carries the busy ratio, above zero once a job has run. Every wait is a
    poll with a deadline.
*/
#include "testutil.h"
#include "worker_server.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "common_log.h"

#define WAIT_MS 60000               //  longest any step that must happen may take

static char s_dir [128];            //  scratch: the compile cache

//  The broker, played here.
typedef struct {
    zsock_t *router;                //  bound on loopback
    char endpoint [64];             //  its address
    zpoller_t *poller;              //  on router
    proto_msg_t *msg;               //  last message read
    zframe_t *worker;               //  the worker's routing id, once READY came
    uint32_t capacity;              //  READY's
    zactor_t *actor;                //  the worker
    size_t heartbeats;              //  HEARTBEATs read
    double busy_last;               //  the latest one's busy (-1 = none said)
    bool busy_bad;                  //  one said none, or a value outside 0..1
} s_broker_t;

static void
s_setup (void)
{
    testutil_dir_make (s_dir, sizeof s_dir, "worker-server");
    common_log_set_level (LOG_LEVEL_WARN);
}

static void
s_teardown (void)
{
    testutil_dir_remove (s_dir);
}

//  Receive one message (worker heartbeats answered and counted); its
//  command, or 0 when nothing came before the deadline.
static proto_cmd_t
s_recv (s_broker_t *self, int64_t deadline)
{
    while (true) {
        int64_t left = deadline - zclock_mono ();
        if (left <= 0 || !zpoller_wait (self->poller, (int) left))
            return 0;
        if (proto_msg_recv (self->msg, self->router) != 0)
            continue;
        proto_msg_t *msg = self->msg;
        if (msg->cmd == PROTO_HEARTBEAT) {
            self->heartbeats++;
            self->busy_last = msg->busy;
            if (!(msg->busy >= 0 && msg->busy <= 1))
                self->busy_bad = true;
            proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
            zframe_t *to = zframe_dup (msg->routing_id);
            proto_msg_set_routing_id (beat, &to);
            proto_msg_send (beat, self->router);
            proto_msg_destroy (&beat);
        }
        return msg->cmd;
    }
}

//  Start a worker with slots and compilers (prefetch automatic) and wait for its READY.
static void
s_start (s_broker_t *self, uint32_t slots, uint32_t compilers)
{
    memset (self, 0, sizeof *self);
    self->busy_last = -1;
    self->router = zsock_new (ZMQ_ROUTER);
    proto_sock_configure (self->router, true);
    int port = zsock_bind (self->router, "tcp://127.0.0.1:*");
    ck_assert_int_gt (port, 0);
    snprintf (self->endpoint, sizeof self->endpoint, "tcp://127.0.0.1:%d", port);
    self->poller = zpoller_new (self->router, NULL);
    self->msg = proto_msg_new (0);
    char cache [256];
    snprintf (cache, sizeof cache, "%s/modules.sqlite", s_dir);
    worker_config_t cfg;
    worker_config_default (&cfg);
    cfg.broker_endpoint = self->endpoint;
    cfg.backend = "cpu";
    cfg.name = "under-test";
    cfg.cache_path = cache;
    cfg.heartbeat_ms = 100;
    cfg.liveness = 50;              //  the test answers heartbeats; this only spares a slow machine
    cfg.slots = slots;
    cfg.compilers = compilers;
    char err [256];
    worker_server_t *server = worker_server_new (&cfg, err, sizeof err);
    ck_assert_msg (server != NULL, "%s", err);
    self->actor = zactor_new (worker_server_actor, server);
    ck_assert_ptr_nonnull (self->actor);
    int64_t deadline = zclock_mono () + WAIT_MS;
    while (!self->worker) {
        proto_cmd_t cmd = s_recv (self, deadline);
        ck_assert_msg (cmd != 0, "no READY from the worker");
        if (cmd == PROTO_READY) {
            self->worker = zframe_dup (self->msg->routing_id);
            self->capacity = self->msg->capacity;
        }
    }
}

static void
s_stop (s_broker_t *self)
{
    zactor_destroy (&self->actor);
    zframe_destroy (&self->worker);
    proto_msg_destroy (&self->msg);
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->router);
}

//  The worker's STATUS, parsed.
static json_t *
s_status (s_broker_t *self)
{
    zstr_send (self->actor, "STATUS");
    char *text = zstr_recv (self->actor);
    ck_assert_ptr_nonnull (text);
    json_t *status = json_loads (text, 0, NULL);
    ck_assert_msg (status != NULL, "STATUS is not JSON: %s", text);
    zstr_free (&text);
    return status;
}

static json_int_t
s_status_int (s_broker_t *self, const char *key)
{
    json_t *status = s_status (self);
    json_t *value = json_object_get (status, key);
    ck_assert_msg (json_is_integer (value), "STATUS lacks '%s'", key);
    json_int_t n = json_integer_value (value);
    json_decref (status);
    return n;
}

//  A check-only job; its candidate spins ms per call (0: none), tagged
//  with n so that no two sources are alike (each one compiles); broken:
//  one that does not compile.
static json_t *
s_job (int n, long ms, bool broken, uint32_t trials)
{
    char *source = zsys_sprintf (
        "#include <time.h>\n"
        "/* candidate %d */\n"
        "void scale (const float *x, float *y, float a, int n)\n"
        "{\n"
        "    struct timespec t0, t;\n"
        "    clock_gettime (CLOCK_MONOTONIC, &t0);\n"
        "    do clock_gettime (CLOCK_MONOTONIC, &t);\n"
        "    while ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L < %ldL);\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i]%s\n"
        "}\n", n, ms, broken? "": ";");
    json_t *job = json_pack ("{s:o, s:{s:s, s:[{s:s}]}, s:{s:b, s:i, s:f}}", "task", testutil_scale_task (),
                             "candidate", "source", source, "launches", "kernel", "scale",
                             "eval", "check_only", 1, "trials", (int) trials, "timeout", 30.0);
    zstr_free (&source);
    return job;
}

static void
s_send_job (s_broker_t *self, uint64_t id, json_t *job)
{
    char *data;
    size_t size;
    ck_assert_int_eq (proto_mpk_encode (job, &data, &size), 0);
    json_decref (job);
    proto_msg_t *msg = proto_msg_new (PROTO_JOB);
    zframe_t *to = zframe_dup (self->worker);
    proto_msg_set_routing_id (msg, &to);
    msg->job = id;
    msg->attempt = 1;
    zframe_t *body = zframe_new (data, size);
    free (data);
    proto_msg_set_body (msg, &body);
    ck_assert_int_eq (proto_msg_send (msg, self->router), 0);
    proto_msg_destroy (&msg);
}

//  The next RESULT: its job id, the status into status.
static uint64_t
s_next_result (s_broker_t *self, char *status, size_t len)
{
    int64_t deadline = zclock_mono () + WAIT_MS;
    while (true) {
        proto_cmd_t cmd = s_recv (self, deadline);
        ck_assert_msg (cmd != 0, "no RESULT within %d ms", WAIT_MS);
        if (cmd == PROTO_RESULT) {
            snprintf (status, len, "%s", self->msg->status);
            return self->msg->job;
        }
    }
}

START_TEST (test_compiles_go_through_a_pool_of_its_size_and_fill_it)
{
    s_broker_t broker;
    s_start (&broker, 1, 2);
    //  Enough jobs to keep both compilers busy while one waits for the slot.
    ck_assert_uint_eq (broker.capacity, 1 + (2 + 1));
    ck_assert_int_eq (s_status_int (&broker, "prefetch"), 3);
    ck_assert_int_eq (s_status_int (&broker, "compilers"), 2);
    for (int i = 0; i < 6; i++)
        s_send_job (&broker, (uint64_t) (i + 1), s_job (i, 0, false, 1));
    for (int i = 0; i < 6; i++) {
        char status [32];
        s_next_result (&broker, status, sizeof status);
        ck_assert_str_eq (status, "ok");
    }
    //  Six jobs queued at once: both compilers were used, never a third.
    ck_assert_int_eq (s_status_int (&broker, "compiling_max"), 2);
    ck_assert_int_eq (s_status_int (&broker, "done"), 6);
    ck_assert_int_eq (s_status_int (&broker, "jobs"), 0);
    s_stop (&broker);
}
END_TEST

START_TEST (test_a_job_decided_at_compile_is_answered_without_a_run_slot)
{
    s_broker_t broker;
    s_start (&broker, 1, 2);
    //  The first job holds the only run slot for seconds (3 trials of the
    //  candidate spinning 1 s each); the second does not compile.
    s_send_job (&broker, 1, s_job (100, 1000, false, 3));
    s_send_job (&broker, 2, s_job (101, 0, true, 1));
    char status [32];
    uint64_t first = s_next_result (&broker, status, sizeof status);
    ck_assert_msg (first == 2, "job %llu answered first (%s): the compile error waited for the run slot",
                   (unsigned long long) first, status);
    ck_assert_str_eq (status, "compile_error");
    //  The long job is still held (compiling or running).
    ck_assert_int_eq (s_status_int (&broker, "jobs"), 1);
    uint64_t second = s_next_result (&broker, status, sizeof status);
    ck_assert_uint_eq (second, 1);
    ck_assert_str_eq (status, "ok");
    ck_assert_int_eq (s_status_int (&broker, "running"), 0);
    s_stop (&broker);
}
END_TEST

START_TEST (test_every_heartbeat_carries_the_busy_ratio)
{
    s_broker_t broker;
    s_start (&broker, 1, 1);
    //  Idle: heartbeats say a ratio (zero: nothing ran yet).
    int64_t deadline = zclock_mono () + WAIT_MS;
    while (broker.heartbeats < 2)
        ck_assert_msg (s_recv (&broker, deadline) != 0, "no heartbeat");
    ck_assert_msg (broker.busy_last == 0, "idle worker says busy %g", broker.busy_last);
    //  A job that holds the run slot half a second.
    s_send_job (&broker, 7, s_job (200, 250, false, 2));
    char status [32];
    ck_assert_uint_eq (s_next_result (&broker, status, sizeof status), 7);
    ck_assert_str_eq (status, "ok");
    size_t seen = broker.heartbeats;
    while (broker.heartbeats < seen + 2)
        ck_assert_msg (s_recv (&broker, deadline) != 0, "no heartbeat after the job");
    ck_assert_msg (broker.busy_last > 0 && broker.busy_last <= 1,
                   "after a run the heartbeat says busy %g", broker.busy_last);
    ck_assert_msg (!broker.busy_bad, "a heartbeat without a busy ratio between 0 and 1");
    json_t *st = s_status (&broker);
    double busy = json_real_value (json_object_get (st, "busy"));
    ck_assert_msg (busy > 0 && busy <= 1, "STATUS busy %g", busy);
    json_decref (st);
    s_stop (&broker);
}
END_TEST

START_TEST (test_pools_beyond_the_limit_are_refused)
{
    worker_config_t cfg;
    worker_config_default (&cfg);
    cfg.broker_endpoint = "tcp://127.0.0.1:9";
    cfg.backend = "cpu";
    cfg.compilers = WORKER_POOL_MAX + 1;
    char err [256] = "";
    worker_server_t *server = worker_server_new (&cfg, err, sizeof err);
    ck_assert_ptr_null (server);
    ck_assert_msg (strstr (err, "compilers") && strstr (err, "exceed"), "error: %s", err);
    cfg.compilers = 0;
    cfg.prefetch = WORKER_POOL_MAX + 1;
    server = worker_server_new (&cfg, err, sizeof err);
    ck_assert_ptr_null (server);
    ck_assert_msg (strstr (err, "prefetch"), "error: %s", err);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("worker_server");
    TCase *tc = tcase_create ("pools");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_compiles_go_through_a_pool_of_its_size_and_fill_it);
    tcase_add_test (tc, test_a_job_decided_at_compile_is_answered_without_a_run_slot);
    tcase_add_test (tc, test_every_heartbeat_carries_the_busy_ratio);
    tcase_add_test (tc, test_pools_beyond_the_limit_are_refused);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
