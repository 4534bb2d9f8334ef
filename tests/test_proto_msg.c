/*  test_proto_msg - every command round trips over ROUTER/DEALER; malformed
    frames are reported as -2 with a reason and the routing id kept.  */
#include "testutil.h"
#include <math.h>
#include "proto_msg.h"
#include <msgpack.h>
#include <string.h>

//  A ROUTER bound on loopback and a DEALER connected to it.
typedef struct {
    zsock_t *router;
    zsock_t *dealer;
} s_pair_t;

static void
s_pair_open (s_pair_t *pair)
{
    pair->router = zsock_new (ZMQ_ROUTER);
    pair->dealer = zsock_new (ZMQ_DEALER);
    ck_assert_ptr_nonnull (pair->router);
    ck_assert_ptr_nonnull (pair->dealer);
    proto_sock_configure (pair->router, true);
    proto_sock_configure (pair->dealer, false);
    int port = zsock_bind (pair->router, "tcp://127.0.0.1:*");
    ck_assert_int_gt (port, 0);
    ck_assert_int_eq (zsock_connect (pair->dealer, "tcp://127.0.0.1:%d", port), 0);
}

static void
s_pair_close (s_pair_t *pair)
{
    zsock_destroy (&pair->dealer);
    zsock_destroy (&pair->router);
}

//  Wait (bounded) until sock has a message.
static void
s_wait_readable (zsock_t *sock)
{
    zpoller_t *poller = zpoller_new (sock, NULL);
    void *which = zpoller_wait (poller, 5000);
    zpoller_destroy (&poller);
    ck_assert_msg (which == sock, "no message within 5 s");
}

//  Send msg from the dealer, receive it at the router; returns what came.
static proto_msg_t *
s_via_router (s_pair_t *pair, proto_msg_t *msg)
{
    ck_assert_int_eq (proto_msg_send (msg, pair->dealer), 0);
    s_wait_readable (pair->router);
    proto_msg_t *got = proto_msg_new (0);
    int rc = proto_msg_recv (got, pair->router);
    ck_assert_msg (rc == 0, "recv of %s: expected 0, got %d (%s)", proto_cmd_name (msg->cmd), rc,
                   got->reason);
    ck_assert_ptr_nonnull (got->routing_id);
    return got;
}

//  Send msg from the router back to the dealer (routing id set); returns what came.
static proto_msg_t *
s_via_dealer (s_pair_t *pair, proto_msg_t *msg)
{
    ck_assert_int_eq (proto_msg_send (msg, pair->router), 0);
    s_wait_readable (pair->dealer);
    proto_msg_t *got = proto_msg_new (0);
    int rc = proto_msg_recv (got, pair->dealer);
    ck_assert_msg (rc == 0, "recv of %s: expected 0, got %d (%s)", proto_cmd_name (msg->cmd), rc,
                   got->reason);
    ck_assert_ptr_null (got->routing_id);
    return got;
}

static zframe_t *
s_body (const char *text)
{
    return zframe_new (text, strlen (text));
}

static void
s_assert_same (proto_msg_t *a, proto_msg_t *b)
{
    ck_assert_int_eq (a->cmd, b->cmd);
    ck_assert_uint_eq (a->ref, b->ref);
    ck_assert_uint_eq (a->job, b->job);
    ck_assert_uint_eq (a->attempt, b->attempt);
    ck_assert_uint_eq (a->capacity, b->capacity);
    ck_assert_uint_eq (a->code, b->code);
    ck_assert_uint_eq (a->pid, b->pid);
    ck_assert_double_eq (a->queue_s, b->queue_s);
    ck_assert_double_eq (a->busy, b->busy);
    ck_assert_str_eq (a->backend, b->backend);
    ck_assert_str_eq (a->device, b->device);
    ck_assert_str_eq (a->name, b->name);
    ck_assert_str_eq (a->tag, b->tag);
    ck_assert_str_eq (a->reason, b->reason);
    ck_assert_str_eq (a->client, b->client);
    ck_assert_str_eq (a->status, b->status);
    ck_assert_str_eq (a->group, b->group);
    ck_assert_uint_eq (a->group_size, b->group_size);
    ck_assert_str_eq (a->trajectory, b->trajectory);
    ck_assert_str_eq (a->cache, b->cache);
    ck_assert_str_eq (a->host, b->host);
    if (a->body || b->body)
        ck_assert (a->body && b->body && zframe_eq (a->body, b->body));
}

START_TEST (test_every_command_round_trips)
{
    s_pair_t pair;
    s_pair_open (&pair);
    //  Worker and client commands, dealer -> router.
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    proto_msg_set_str (msg->backend, "cuda");
    proto_msg_set_str (msg->device, "NVIDIA H200 (0)");
    proto_msg_set_str (msg->name, "gpu-node-3/0");
    msg->capacity = 4;
    msg->pid = 31337;
    proto_msg_set_str (msg->host, "gpu-node-3");
    proto_msg_t *got = s_via_router (&pair, msg);
    s_assert_same (msg, got);

    //  Keep the router's view of the dealer for the replies.
    zframe_t *peer = zframe_dup (got->routing_id);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_HEARTBEAT);
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    ck_assert_double_eq (got->busy, -1);           //  not said
    proto_msg_destroy (&got);

    //  A worker's HEARTBEAT with its state and busy ratio (both ends included).
    const double busy [] = { 0.0, 0.4375, 1.0 };
    for (size_t i = 0; i < 3; i++) {
        proto_msg_reset (msg, PROTO_HEARTBEAT);
        proto_msg_set_str (msg->state, "draining");
        msg->busy = busy [i];
        got = s_via_router (&pair, msg);
        s_assert_same (msg, got);
        proto_msg_destroy (&got);
    }

    proto_msg_reset (msg, PROTO_DISCONNECT);
    proto_msg_set_str (msg->reason, "shutting down");
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_SUBMIT);
    msg->ref = UINT64_MAX;
    proto_msg_set_str (msg->backend, "cpu");
    proto_msg_set_str (msg->tag, "run-7");
    zframe_t *body = s_body ("\x81\xa4task\xc0");
    proto_msg_set_body (msg, &body);
    ck_assert_ptr_null (body);
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);
    //  The body was kept: the same message can go again.
    ck_assert_ptr_nonnull (msg->body);
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    //  A SUBMIT with every optional field.
    proto_msg_set_str (msg->client, "c-1");
    msg->retry = 1;
    proto_msg_set_str (msg->group, "prompt-17");
    msg->group_size = 8;
    proto_msg_set_str (msg->trajectory, "traj-3");
    proto_msg_set_str (msg->cache, "refresh");
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_CANCEL);
    msg->ref = 3;
    msg->job = 77;
    proto_msg_set_str (msg->client, "c-1");
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_QUERY);
    msg->ref = 4;
    body = s_body ("\x81\xa4what\xa5stats");
    proto_msg_set_body (msg, &body);
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_RESULT);
    msg->job = 12345678901ull;
    msg->attempt = 2;
    body = s_body ("\x81\xa6status\xa2ok");
    proto_msg_set_body (msg, &body);
    got = s_via_router (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    //  Broker commands, router -> dealer.
    proto_msg_reset (msg, PROTO_ACCEPTED);
    msg->ref = 7;
    msg->job = 99;
    zframe_t *rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_JOB);
    msg->job = 99;
    msg->attempt = 1;
    body = s_body ("\x80");
    proto_msg_set_body (msg, &body);
    rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_RESULT);
    msg->job = 99;
    msg->ref = 7;
    msg->attempt = 1;
    msg->queue_s = 0.125;
    proto_msg_set_str (msg->name, "w1");
    body = s_body ("\x80");
    proto_msg_set_body (msg, &body);
    rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    ck_assert_str_eq (got->name, "w1");
    zframe_t *taken = proto_msg_get_body (got);
    ck_assert_ptr_nonnull (taken);
    ck_assert_ptr_null (got->body);
    zframe_destroy (&taken);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_ANSWER);
    msg->ref = 4;
    body = s_body ("\x81\xa5queue\x01");
    proto_msg_set_body (msg, &body);
    rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_SUMMARY);
    proto_msg_set_str (msg->group, "prompt-17");
    body = s_body ("\x81\xa5" "count\x08");
    proto_msg_set_body (msg, &body);
    rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    proto_msg_reset (msg, PROTO_ERROR);
    msg->code = PROTO_ERR_OVERLOADED;
    msg->ref = 7;
    msg->job = 0;
    proto_msg_set_str (msg->reason, "queue full");
    rid = zframe_dup (peer);
    proto_msg_set_routing_id (msg, &rid);
    got = s_via_dealer (&pair, msg);
    s_assert_same (msg, got);
    proto_msg_destroy (&got);

    zframe_destroy (&peer);
    proto_msg_destroy (&msg);
    proto_msg_destroy (&msg);       //  twice is harmless
    s_pair_close (&pair);
}
END_TEST

START_TEST (test_names_and_strings)
{
    ck_assert_str_eq (proto_cmd_name (PROTO_READY), "READY");
    ck_assert_str_eq (proto_cmd_name (PROTO_ERROR), "ERROR");
    ck_assert_str_eq (proto_cmd_name ((proto_cmd_t) 0), "UNKNOWN");
    ck_assert_str_eq (proto_cmd_name ((proto_cmd_t) 99), "UNKNOWN");
    char field [PROTO_MAX_STR];
    char long_text [1000];
    memset (long_text, 'y', sizeof (long_text) - 1);
    long_text [sizeof (long_text) - 1] = 0;
    proto_msg_set_str (field, long_text);
    ck_assert_uint_eq (strlen (field), PROTO_MAX_STR - 1);
    proto_msg_set_str (field, NULL);
    ck_assert_str_eq (field, "");
    //  A command with a body refuses to go without one.
    proto_msg_t *msg = proto_msg_new (PROTO_JOB);
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    ck_assert_int_eq (proto_msg_send (msg, sock), -1);
    zsock_destroy (&sock);
    proto_msg_destroy (&msg);
}
END_TEST

//  --------------------------------------------------------------------------
//  Malformed input, sent as raw frames from the dealer.

//  A msgpack map built with the packer.
typedef struct {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
} s_header_t;

static void
s_header_init (s_header_t *h, size_t entries)
{
    msgpack_sbuffer_init (&h->sbuf);
    msgpack_packer_init (&h->pk, &h->sbuf, msgpack_sbuffer_write);
    msgpack_pack_map (&h->pk, entries);
}

static void
s_header_str (s_header_t *h, const char *key, const char *value)
{
    msgpack_pack_str_with_body (&h->pk, key, strlen (key));
    msgpack_pack_str_with_body (&h->pk, value, strlen (value));
}

static void
s_header_uint (s_header_t *h, const char *key, uint64_t value)
{
    msgpack_pack_str_with_body (&h->pk, key, strlen (key));
    msgpack_pack_uint64 (&h->pk, value);
}

//  Send frame0 + header (+ extra frames) raw; expect -2 with reason containing expect.
static void
s_expect_malformed (s_pair_t *pair, const void *frame0, size_t frame0_size,
                    const void *header, size_t header_size, int extra_frames,
                    uint32_t code, const char *expect)
{
    zmsg_t *raw = zmsg_new ();
    zmsg_addmem (raw, frame0, frame0_size);
    if (header)
        zmsg_addmem (raw, header, header_size);
    for (int i = 0; i < extra_frames; i++)
        zmsg_addmem (raw, "\x80", 1);
    ck_assert_int_eq (zmsg_send (&raw, pair->dealer), 0);
    s_wait_readable (pair->router);
    proto_msg_t *got = proto_msg_new (0);
    int rc = proto_msg_recv (got, pair->router);
    ck_assert_msg (rc == -2, "expected -2 for '%s', got %d", expect, rc);
    ck_assert_msg (strstr (got->reason, expect) != NULL, "expected a reason with '%s', got '%s'",
                   expect, got->reason);
    ck_assert_uint_eq (got->code, code);
    ck_assert_ptr_nonnull (got->routing_id);
    ck_assert_ptr_null (got->body);
    proto_msg_destroy (&got);
    //  Every frame was consumed: nothing is left behind.
    ck_assert (!(zsock_events (pair->router) & ZMQ_POLLIN));
}

static const uint8_t s_heartbeat0 [] = { 'K', 'G', 'Y', 'M', 1, PROTO_HEARTBEAT };
static const uint8_t s_submit0 [] = { 'K', 'G', 'Y', 'M', 1, PROTO_SUBMIT };
static const uint8_t s_ready0 [] = { 'K', 'G', 'Y', 'M', 1, PROTO_READY };
static const uint8_t s_empty_map [] = { 0x80 };

START_TEST (test_malformed_frames)
{
    s_pair_t pair;
    s_pair_open (&pair);
    const uint8_t bad_sig [] = { 'K', 'G', 'Y', 'X', 1, PROTO_HEARTBEAT };
    const uint8_t short_sig [] = { 'K', 'G', 'Y', 'M', 1 };
    const uint8_t version2 [] = { 'K', 'G', 'Y', 'M', 2, PROTO_HEARTBEAT };
    const uint8_t unknown [] = { 'K', 'G', 'Y', 'M', 1, 42 };
    const uint8_t zero [] = { 'K', 'G', 'Y', 'M', 1, 0 };
    s_expect_malformed (&pair, bad_sig, 6, s_empty_map, 1, 0, 400, "signature");
    s_expect_malformed (&pair, short_sig, 5, s_empty_map, 1, 0, 400, "signature");
    s_expect_malformed (&pair, version2, 6, s_empty_map, 1, 0, 400, "version 2");
    s_expect_malformed (&pair, unknown, 6, s_empty_map, 1, 0, 401, "unknown command 42");
    s_expect_malformed (&pair, zero, 6, s_empty_map, 1, 0, 401, "unknown command 0");
    s_expect_malformed (&pair, s_heartbeat0, 6, NULL, 0, 0, 400, "missing header");
    //  Header not a map, truncated, trailing bytes.
    const uint8_t array [] = { 0x91, 0x01 };
    const uint8_t truncated [] = { 0x81, 0xa3, 'r', 'e' };
    const uint8_t trailing [] = { 0x80, 0x80 };
    s_expect_malformed (&pair, s_heartbeat0, 6, array, sizeof (array), 0, 400, "not a map");
    s_expect_malformed (&pair, s_heartbeat0, 6, truncated, sizeof (truncated), 0, 400, "truncated");
    s_expect_malformed (&pair, s_heartbeat0, 6, trailing, sizeof (trailing), 0, 400, "trailing");
    //  Frames: extra ones, a body where none belongs, no body where one must be.
    s_expect_malformed (&pair, s_heartbeat0, 6, s_empty_map, 1, 1, 400, "unexpected body");
    s_expect_malformed (&pair, s_heartbeat0, 6, s_empty_map, 1, 3, 400, "too many frames");

    s_header_t h;
    s_header_init (&h, 2);
    s_header_uint (&h, "ref", 1);
    s_header_str (&h, "backend", "cpu");
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 0, 400, "missing body");
    msgpack_sbuffer_destroy (&h.sbuf);

    //  Missing required field.
    s_header_init (&h, 1);
    s_header_uint (&h, "ref", 1);
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 1, 400, "without 'backend'");
    msgpack_sbuffer_destroy (&h.sbuf);

    //  Wrong types: a string for an int, an int for a string, a negative int, a u32 overflow.
    s_header_init (&h, 2);
    s_header_str (&h, "ref", "1");
    s_header_str (&h, "backend", "cpu");
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 1, 400, "'ref' has the wrong type");
    msgpack_sbuffer_destroy (&h.sbuf);

    s_header_init (&h, 2);
    s_header_uint (&h, "ref", 1);
    s_header_uint (&h, "backend", 3);
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 1, 400, "'backend' has the wrong type");
    msgpack_sbuffer_destroy (&h.sbuf);

    s_header_init (&h, 2);
    msgpack_pack_str_with_body (&h.pk, "ref", 3);
    msgpack_pack_int64 (&h.pk, -5);
    s_header_str (&h, "backend", "cpu");
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 1, 400, "'ref' has the wrong type");
    msgpack_sbuffer_destroy (&h.sbuf);

    s_header_init (&h, 4);
    s_header_str (&h, "backend", "cpu");
    s_header_str (&h, "device", "host");
    s_header_uint (&h, "capacity", 1ull << 32);
    s_header_str (&h, "name", "w");
    s_expect_malformed (&pair, s_ready0, 6, h.sbuf.data, h.sbuf.size, 0, 400, "'capacity' has the wrong type");
    msgpack_sbuffer_destroy (&h.sbuf);

    //  A real must be finite: NaN and infinities are malformed.
    const uint8_t result0 [] = { 'K', 'G', 'Y', 'M', 1, PROTO_RESULT };
    const double not_finite [] = { NAN, INFINITY, -INFINITY };
    for (size_t i = 0; i < 3; i++) {
        s_header_init (&h, 2);
        s_header_uint (&h, "job", 1);
        msgpack_pack_str_with_body (&h.pk, "queue_s", 7);
        msgpack_pack_double (&h.pk, not_finite [i]);
        s_expect_malformed (&pair, result0, 6, h.sbuf.data, h.sbuf.size, 1, 400,
                            "'queue_s' has the wrong type");
        msgpack_sbuffer_destroy (&h.sbuf);
    }

    //  busy is a share: 0 to 1, a finite number.
    const double not_share [] = { -0.01, 1.5, NAN, INFINITY };
    for (size_t i = 0; i < 4; i++) {
        s_header_init (&h, 1);
        msgpack_pack_str_with_body (&h.pk, "busy", 4);
        msgpack_pack_double (&h.pk, not_share [i]);
        s_expect_malformed (&pair, s_heartbeat0, 6, h.sbuf.data, h.sbuf.size, 0, 400,
                            "'busy' is not between 0 and 1");
        msgpack_sbuffer_destroy (&h.sbuf);
    }
    s_header_init (&h, 1);
    s_header_uint (&h, "busy", 2);
    s_expect_malformed (&pair, s_heartbeat0, 6, h.sbuf.data, h.sbuf.size, 0, 400,
                        "'busy' is not between 0 and 1");
    msgpack_sbuffer_destroy (&h.sbuf);
    s_header_init (&h, 1);
    s_header_str (&h, "busy", "high");
    s_expect_malformed (&pair, s_heartbeat0, 6, h.sbuf.data, h.sbuf.size, 0, 400,
                        "'busy' has the wrong type");
    msgpack_sbuffer_destroy (&h.sbuf);

    //  String too long, duplicate field, non-string key.
    char long_name [PROTO_MAX_STR + 1];
    memset (long_name, 'n', PROTO_MAX_STR);
    long_name [PROTO_MAX_STR] = 0;
    s_header_init (&h, 4);
    s_header_str (&h, "backend", "cpu");
    s_header_str (&h, "device", "host");
    s_header_uint (&h, "capacity", 1);
    s_header_str (&h, "name", long_name);
    s_expect_malformed (&pair, s_ready0, 6, h.sbuf.data, h.sbuf.size, 0, 400, "'name' longer than");
    msgpack_sbuffer_destroy (&h.sbuf);

    s_header_init (&h, 3);
    s_header_uint (&h, "ref", 1);
    s_header_uint (&h, "ref", 2);
    s_header_str (&h, "backend", "cpu");
    s_expect_malformed (&pair, s_submit0, 6, h.sbuf.data, h.sbuf.size, 1, 400, "duplicate");
    msgpack_sbuffer_destroy (&h.sbuf);

    const uint8_t int_key [] = { 0x81, 0x01, 0x02 };
    s_expect_malformed (&pair, s_heartbeat0, 6, int_key, sizeof (int_key), 0, 400, "not a string");

    //  A header claiming 2^32 entries.
    const uint8_t bomb [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x', 0xc0 };
    s_expect_malformed (&pair, s_heartbeat0, 6, bomb, sizeof (bomb), 0, 400, "map count exceeds");

    //  An oversized header frame.
    uint8_t *big = calloc (1, PROTO_MAX_HEADER + 10);
    big [0] = 0x81;
    big [1] = 0xa1;
    big [2] = 'x';
    big [3] = 0xc6;     //  bin32 of PROTO_MAX_HEADER bytes
    big [4] = 0;
    big [5] = 0;
    big [6] = (PROTO_MAX_HEADER >> 8) & 0xff;
    big [7] = PROTO_MAX_HEADER & 0xff;
    s_expect_malformed (&pair, s_heartbeat0, 6, big, PROTO_MAX_HEADER + 8, 0, 400, "too large");
    free (big);

    //  After all that the pair still works, and unknown keys are ignored.
    s_header_init (&h, 3);
    s_header_uint (&h, "ref", 5);
    s_header_str (&h, "backend", "cpu");
    msgpack_pack_str_with_body (&h.pk, "future", 6);
    msgpack_pack_array (&h.pk, 2);
    msgpack_pack_nil (&h.pk);
    msgpack_pack_map (&h.pk, 0);
    zmsg_t *raw = zmsg_new ();
    zmsg_addmem (raw, s_submit0, 6);
    zmsg_addmem (raw, h.sbuf.data, h.sbuf.size);
    zmsg_addmem (raw, "\x80", 1);
    msgpack_sbuffer_destroy (&h.sbuf);
    zmsg_send (&raw, pair.dealer);
    s_wait_readable (pair.router);
    proto_msg_t *got = proto_msg_new (0);
    ck_assert_int_eq (proto_msg_recv (got, pair.router), 0);
    ck_assert_int_eq (got->cmd, PROTO_SUBMIT);
    ck_assert_uint_eq (got->ref, 5);
    ck_assert_str_eq (got->backend, "cpu");
    proto_msg_destroy (&got);
    s_pair_close (&pair);
}
END_TEST

START_TEST (test_router_send_to_gone_peer_fails)
{
    //  ZMQ_ROUTER_MANDATORY: an unknown routing id is an error, not silence.
    s_pair_t pair;
    s_pair_open (&pair);
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    zframe_t *rid = zframe_new ("nobody", 6);
    proto_msg_set_routing_id (msg, &rid);
    ck_assert_int_eq (proto_msg_send (msg, pair.router), -1);
    ck_assert_int_eq (errno, EHOSTUNREACH);
    proto_msg_destroy (&msg);
    s_pair_close (&pair);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("proto_msg");
    TCase *tc = tcase_create ("core");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_every_command_round_trips);
    tcase_add_test (tc, test_names_and_strings);
    tcase_add_test (tc, test_malformed_frames);
    tcase_add_test (tc, test_router_send_to_gone_peer_fails);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
