/*  test_broker_auth - CURVE on the broker's two sockets, with keys by role.

    A broker with a secret certificate, a trainer key directory and a
    worker key directory; clients and workers with keys made by
    proto_curve_keygen (what `kgym keygen` writes). An allowed trainer and
    an allowed worker get a job through; a peer without CURVE, with a key
    nobody allowed, or with a key of the other role gets nothing at all.  */
#include "testutil.h"
#include "broker_server.h"
#include "client_kgym.h"
#include "proto_msg.h"
#include "proto_curve.h"
#include "common_log.h"
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>

#define WAIT_MS 5000            //  longest a step that should happen may take
#define NOTHING_MS 500          //  how long a refused peer is watched for any reply

static char s_dir [64];

//  dir/name: a path in the scratch directory (static buffer per call: copy it).
static char *
s_path (const char *name)
{
    return zsys_sprintf ("%s/%s", s_dir, name);
}

static void
s_keygen (const char *name)
{
    char *path = s_path (name);
    char err [256];
    ck_assert_msg (proto_curve_keygen (path, name, err, sizeof (err)) == 0, "keygen: %s", err);
    zstr_free (&path);
}

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    snprintf (s_dir, sizeof (s_dir), "/tmp/kgym-test-auth-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    char *trainers = s_path ("trainers"), *workers = s_path ("workers");
    ck_assert_int_eq (mkdir (trainers, 0700), 0);
    ck_assert_int_eq (mkdir (workers, 0700), 0);
    zstr_free (&trainers);
    zstr_free (&workers);
    s_keygen ("broker");
    s_keygen ("trainers/alice");    //  public part in the trainer directory
    s_keygen ("workers/gpu0");
    s_keygen ("mallory");           //  nobody allowed this one
}

static void
s_teardown (void)
{
    char command [128];
    snprintf (command, sizeof (command), "rm -rf '%s'", s_dir);
    if (system (command) != 0)
        fprintf (stderr, "cannot remove %s\n", s_dir);
}

typedef struct {
    zactor_t *actor;
    char *clients;
    char *workers;
} s_broker_t;

static void
s_broker_start (s_broker_t *broker)
{
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.clients_endpoint = "tcp://127.0.0.1:*";
    cfg.workers_endpoint = "tcp://127.0.0.1:*";
    char *secret = s_path ("broker_secret"), *trainers = s_path ("trainers"), *workers = s_path ("workers");
    cfg.curve_secret = secret;
    cfg.trainer_keys = trainers;
    cfg.worker_keys = workers;
    broker->actor = zactor_new (broker_server_actor, &cfg);
    zstr_free (&secret);
    zstr_free (&trainers);
    zstr_free (&workers);
    zstr_send (broker->actor, "ENDPOINTS");
    ck_assert_int_eq (zstr_recvx (broker->actor, &broker->clients, &broker->workers, NULL), 2);
    ck_assert_msg (broker->clients [0], "broker did not start: %s", broker->workers);
}

static void
s_broker_stop (s_broker_t *broker)
{
    zactor_destroy (&broker->actor);
    zstr_free (&broker->clients);
    zstr_free (&broker->workers);
}

static long long
s_stat (s_broker_t *broker, const char *key, const char *sub)
{
    zstr_send (broker->actor, "STATS");
    char *text = zstr_recv (broker->actor);
    json_t *stats = json_loads (text, 0, NULL);
    json_t *value = json_object_get (stats, key);
    if (sub)
        value = json_object_get (value, sub);
    ck_assert_msg (json_is_integer (value), "STATS has no %s.%s: %s", key, sub? sub: "", text);
    long long result = json_integer_value (value);
    json_decref (stats);
    zstr_free (&text);
    return result;
}

//  A DEALER to endpoint as CURVE client with key name (NULL: no CURVE).
static zsock_t *
s_dealer (const char *endpoint, const char *key)
{
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    proto_sock_configure (sock, false);
    if (key) {
        char *secret = zsys_sprintf ("%s/%s_secret", s_dir, key);
        char *broker = s_path ("broker");
        char err [256];
        ck_assert_msg (proto_curve_client (sock, secret, broker, err, sizeof (err)) == 0, "%s", err);
        zstr_free (&secret);
        zstr_free (&broker);
    }
    ck_assert_int_eq (zsock_connect (sock, "%s", endpoint), 0);
    return sock;
}

//  The next message on sock within ms, or NULL.
static proto_msg_t *
s_next (zsock_t *sock, int ms)
{
    zpoller_t *poller = zpoller_new (sock, NULL);
    proto_msg_t *msg = NULL;
    if (zpoller_wait (poller, ms)) {
        msg = proto_msg_new (0);
        if (proto_msg_recv (msg, sock) != 0)
            proto_msg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    return msg;
}

static void
s_send_ready (zsock_t *sock, const char *name)
{
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->device, "test");
    proto_msg_set_str (msg->name, name);
    msg->capacity = 1;
    ck_assert_int_eq (proto_msg_send (msg, sock), 0);
    proto_msg_destroy (&msg);
}

static void
s_send_heartbeat (zsock_t *sock)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    ck_assert_int_eq (proto_msg_send (msg, sock), 0);
    proto_msg_destroy (&msg);
}

START_TEST (test_allowed_trainer_and_worker_get_a_job_through)
{
    if (!zsys_has_curve ())
        return;
    s_broker_t broker;
    s_broker_start (&broker);
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.endpoint = broker.clients;
    char *secret = s_path ("trainers/alice_secret"), *key = s_path ("broker");
    cfg.curve_secret = secret;
    cfg.broker_key = key;
    char err [256];
    client_kgym_t *client = client_kgym_new_config (&cfg, err, sizeof (err));
    ck_assert_msg (client != NULL, "%s", err);
    zstr_free (&secret);
    zstr_free (&key);
    unsigned char body [] = { 0x80 };
    ck_assert_int_eq (client_kgym_submit_encoded (client, 1, "cpu", "t", body, 1, err, sizeof (err)), 0);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);

    zsock_t *worker = s_dealer (broker.workers, "workers/gpu0");
    s_send_ready (worker, "gpu0");
    proto_msg_t *job = s_next (worker, WAIT_MS);
    ck_assert_msg (job && job->cmd == PROTO_JOB, "the allowed worker got no JOB");
    proto_msg_t *result = proto_msg_new (PROTO_RESULT);
    result->job = job->job;
    result->attempt = job->attempt;
    //  {"status": "ok", "reward": 1}: the default reward of an untimed ok.
    zframe_t *frame = zframe_new ("\x82\xa6status\xa2ok\xa6reward\x01", 19);
    proto_msg_set_body (result, &frame);
    ck_assert_int_eq (proto_msg_send (result, worker), 0);
    proto_msg_destroy (&result);
    proto_msg_destroy (&job);
    //  The job was submitted before any worker could register: the 503
    //  notice that says so may come first.
    ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    if (event.code == PROTO_ERR_NO_WORKER) {
        client_event_clear (&event);
        ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    }
    ck_assert_int_eq (event.type, CLIENT_EVENT_RESULT);
    ck_assert_str_eq (json_string_value (json_object_get (event.result, "status")), "ok");
    client_event_clear (&event);
    ck_assert_int_ge (s_stat (&broker, "auth", "allowed"), 2);
    zsock_destroy (&worker);
    client_kgym_destroy (&client);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_peers_without_an_allowed_key_of_their_role_get_nothing)
{
    if (!zsys_has_curve ())
        return;
    s_broker_t broker;
    s_broker_start (&broker);
    //  On the client socket: no CURVE, an unknown key, a worker's key.
    const char *client_keys [] = { NULL, "mallory", "workers/gpu0" };
    for (int i = 0; i < 3; i++) {
        zsock_t *sock = s_dealer (broker.clients, client_keys [i]);
        s_send_heartbeat (sock);
        proto_msg_t *reply = s_next (sock, NOTHING_MS);
        ck_assert_msg (reply == NULL, "a client with key %s got %s", client_keys [i]? client_keys [i]: "(none)",
                       reply? proto_cmd_name (reply->cmd): "");
        zsock_destroy (&sock);
    }
    //  On the worker socket: no CURVE, an unknown key, a trainer's key.
    const char *worker_keys [] = { NULL, "mallory", "trainers/alice" };
    for (int i = 0; i < 3; i++) {
        zsock_t *sock = s_dealer (broker.workers, worker_keys [i]);
        s_send_ready (sock, "impostor");
        s_send_heartbeat (sock);
        proto_msg_t *reply = s_next (sock, NOTHING_MS);
        ck_assert_msg (reply == NULL, "a worker with key %s got %s", worker_keys [i]? worker_keys [i]: "(none)",
                       reply? proto_cmd_name (reply->cmd): "");
        zsock_destroy (&sock);
    }
    ck_assert_int_eq (s_stat (&broker, "workers", NULL), 0);
    ck_assert_int_ge (s_stat (&broker, "auth", "denied"), 4);
    ck_assert_int_eq (s_stat (&broker, "submitted", NULL), 0);
    s_broker_stop (&broker);
}
END_TEST

START_TEST (test_broker_with_bad_keys_does_not_start)
{
    if (!zsys_has_curve ())
        return;
    broker_config_t cfg;
    broker_config_default (&cfg);
    cfg.clients_endpoint = "tcp://127.0.0.1:*";
    cfg.workers_endpoint = "tcp://127.0.0.1:*";
    //  A public certificate with no secret one beside it.
    char *pub = s_path ("public_only"), *trainers = s_path ("trainers"), *missing = s_path ("missing");
    zcert_t *cert = zcert_new ();
    ck_assert_int_eq (zcert_save_public (cert, pub), 0);
    zcert_destroy (&cert);
    //  A public certificate is not a secret one; a key directory must exist.
    const char *secrets [] = { pub, NULL };
    cfg.curve_secret = secrets [0];
    cfg.trainer_keys = trainers;
    cfg.worker_keys = trainers;
    for (int i = 0; i < 2; i++) {
        if (i == 1) {
            char *secret = s_path ("broker_secret");
            cfg.curve_secret = secret;
            cfg.worker_keys = missing;
            zactor_t *actor = zactor_new (broker_server_actor, &cfg);
            zstr_free (&secret);
            zstr_send (actor, "ENDPOINTS");
            char *clients = NULL, *reason = NULL;
            ck_assert_int_eq (zstr_recvx (actor, &clients, &reason, NULL), 2);
            ck_assert_str_eq (clients, "");
            ck_assert_msg (strstr (reason, "does not exist"), "reason: %s", reason);
            zstr_free (&clients);
            zstr_free (&reason);
            zactor_destroy (&actor);
            continue;
        }
        zactor_t *actor = zactor_new (broker_server_actor, &cfg);
        zstr_send (actor, "ENDPOINTS");
        char *clients = NULL, *reason = NULL;
        ck_assert_int_eq (zstr_recvx (actor, &clients, &reason, NULL), 2);
        ck_assert_str_eq (clients, "");
        ck_assert_msg (strstr (reason, "no secret key"), "reason: %s", reason);
        zstr_free (&clients);
        zstr_free (&reason);
        zactor_destroy (&actor);
    }
    zstr_free (&pub);
    zstr_free (&trainers);
    zstr_free (&missing);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_auth");
    TCase *tc = tcase_create ("curve");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_allowed_trainer_and_worker_get_a_job_through);
    tcase_add_test (tc, test_peers_without_an_allowed_key_of_their_role_get_nothing);
    tcase_add_test (tc, test_broker_with_bad_keys_does_not_start);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
