/*  broker_auth - the broker's ZAP handler: CURVE public keys, by role.

    A REP socket on inproc://zeromq.zap.01 answering RFC 27 requests:
        request: "1.0", request id, domain, address, routing id, mechanism,
                 credentials (CURVE: the client's 32-byte public key)
        reply:   "1.0", request id, status code, status text, user id, metadata
    Every request gets a reply, malformed ones a 500 (libzmq then refuses
    the peer): an unanswered request would stall that handshake.
*/
#include "broker_auth.h"
#include "common_log.h"
#include <string.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

typedef struct {
    zsock_t *pipe;              //  actor pipe
    zsock_t *handler;           //  REP on the ZAP endpoint
    zcertstore_t *trainers;     //  trainer keys
    zcertstore_t *workers;      //  worker keys
    uint64_t allowed;           //  handshakes let in
    uint64_t denied;            //  handshakes refused
} s_auth_t;

//  Frame i of msg as a C string into buf (truncated); "" when absent.
static const char *
s_frame_str (zmsg_t *msg, size_t i, char *buf, size_t size)
{
    zframe_t *frame = zmsg_first (msg);
    while (frame && i--)
        frame = zmsg_next (msg);
    size_t len = frame? zframe_size (frame): 0;
    if (len >= size)
        len = size - 1;
    if (len)
        memcpy (buf, zframe_data (frame), len);
    buf [len] = 0;
    return buf;
}

static void
s_reply (s_auth_t *self, const char *request_id, const char *code, const char *text,
         const char *user_id)
{
    zstr_sendx (self->handler, "1.0", request_id, code, text, user_id? user_id: "", "", NULL);
}

//  One ZAP request in, one reply out.
static void
s_authenticate (s_auth_t *self)
{
    zmsg_t *request = zmsg_recv (self->handler);
    if (!request)
        return;
    char version [8], request_id [64], domain [64], address [64], mechanism [16];
    s_frame_str (request, 0, version, sizeof (version));
    s_frame_str (request, 1, request_id, sizeof (request_id));
    s_frame_str (request, 2, domain, sizeof (domain));
    s_frame_str (request, 3, address, sizeof (address));
    s_frame_str (request, 5, mechanism, sizeof (mechanism));
    zframe_t *key = NULL;
    if (zmsg_size (request) == 7) {
        key = zmsg_last (request);
        if (zframe_size (key) != 32)
            key = NULL;
    }
    if (!streq (version, "1.0") || zmsg_size (request) < 6) {
        self->denied++;
        s_reply (self, request_id, "500", "malformed ZAP request", NULL);
        zmsg_destroy (&request);
        return;
    }
    zcertstore_t *store = streq (domain, BROKER_AUTH_CLIENTS)? self->trainers
                        : streq (domain, BROKER_AUTH_WORKERS)? self->workers: NULL;
    char z85 [41] = "";
    if (key)
        zmq_z85_encode (z85, zframe_data (key), 32);
    bool ok = store && streq (mechanism, "CURVE") && key && zcertstore_lookup (store, z85);
    if (ok) {
        self->allowed++;
        log_debug ("broker", "auth: %s key %s from %s allowed", domain, z85, address);
        s_reply (self, request_id, "200", "OK", z85);
    }
    else {
        self->denied++;
        log_info ("broker", "auth: %s %s key %s from %s refused (%s)", domain, mechanism,
                  z85 [0]? z85: "(none)", address,
                  !store? "unknown domain": !key? "not CURVE": "key not allowed for this role");
        s_reply (self, request_id, "400", "not allowed", NULL);
    }
    zmsg_destroy (&request);
}

void
broker_auth_actor (zsock_t *pipe, void *args)
{
    const broker_auth_config_t *cfg = (const broker_auth_config_t *) args;
    s_auth_t self;
    memset (&self, 0, sizeof (self));
    self.pipe = pipe;
    zsock_signal (pipe, 0);

    char reason [512] = "";
    if (!cfg || !cfg->trainer_keys || !cfg->worker_keys)
        snprintf (reason, sizeof (reason), "CURVE needs a trainer key directory and a worker key directory");
    else
    if (!zsys_file_exists (cfg->trainer_keys) || !zsys_file_exists (cfg->worker_keys))
        snprintf (reason, sizeof (reason), "key directory %s or %s does not exist",
                  cfg->trainer_keys, cfg->worker_keys);
    else {
        self.trainers = zcertstore_new (cfg->trainer_keys);
        self.workers = zcertstore_new (cfg->worker_keys);
        self.handler = zsock_new (ZMQ_REP);
        if (!self.trainers || !self.workers || !self.handler)
            snprintf (reason, sizeof (reason), "out of memory");
        else
        if (zsock_bind (self.handler, ZAP_ENDPOINT) == -1)
            snprintf (reason, sizeof (reason), "cannot bind %s (one CURVE broker per process): %s",
                      ZAP_ENDPOINT, zmq_strerror (zmq_errno ()));
    }
    zstr_send (pipe, reason);
    zpoller_t *poller = reason [0]? NULL: zpoller_new (pipe, self.handler, NULL);
    //  Serve until $TERM, signals or not: the broker relies on us while it runs.
    if (poller)
        zpoller_set_nonstop (poller, true);
    while (true) {
        //  A failed start still serves the pipe until $TERM.
        void *which = poller? zpoller_wait (poller, -1): pipe;
        if (poller && !which) {
            if (zmq_errno () == ETERM)
                break;          //  the context is going away
            continue;
        }
        if (which == pipe) {
            char *command = zstr_recv (pipe);
            if (!command || streq (command, "$TERM")) {
                zstr_free (&command);
                break;
            }
            if (streq (command, "STATS"))
                zstr_sendf (pipe, "{\"allowed\":%llu,\"denied\":%llu}",
                            (unsigned long long) self.allowed, (unsigned long long) self.denied);
            zstr_free (&command);
        }
        else
        if (which == self.handler)
            s_authenticate (&self);
    }
    zpoller_destroy (&poller);
    if (self.handler && !reason [0])
        zsock_unbind (self.handler, ZAP_ENDPOINT);
    zsock_destroy (&self.handler);
    zcertstore_destroy (&self.trainers);
    zcertstore_destroy (&self.workers);
}
