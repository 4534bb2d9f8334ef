/*  client_kgym - the C client library: submit jobs to a broker, read results.

    A thin layer over proto_msg on a DEALER: jobs are encoded with proto_mpk
    on the way out and results decoded with it on the way in; ACCEPTED,
    ERROR and DONE carry only header fields. Spec: docs/protocol.md.

    What makes it ride out reconnects:
      - pending: ref -> the job as sent (body, backend, tag), kept until its
        result comes, so it can be sent again;
      - a socket monitor: a CONNECTED after a DISCONNECTED (or on a socket
        made anew after a silence) means replies may have been lost on the
        old connection, so every pending job is sent again with retry=1;
      - delivered: the set of job ids whose RESULT was handed out, so a
        result sent twice (once per connection) comes out once.

    The monitor also watches the security handshake: a failure (a key the
    broker refuses, CURVE on one side only, a wrong broker key) becomes one
    REFUSED event, said again only after a handshake has succeeded. ERROR
    503 (no connected worker serves the job's backend) is no error: the
    job stays pending and it comes out as a NOTICE.

    Requests (FETCH, DRAIN, CANCEL, QUERY) are remembered by ref until
    their DONE, ANSWER or ERROR, so an ERROR about a request is never taken
    for one about a job, and a second ANSWER (to a query sent again) is
    dropped. ask() keeps the events it is not waiting for in a queue that
    recv() empties first, so a blocking query loses no result.
*/
#include "client_kgym.h"
#include "proto_mpk.h"
#include "proto_curve.h"
#include "common_log.h"
#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <netdb.h>
#include <sys/socket.h>

#define CLIENT_BACKOFF_MAX_MS 32000     //  longest wait between new sockets while silent
#define CLIENT_MAX_REQUESTS 65536       //  requests unanswered at once (a bound, not a goal)
#define CLIENT_NO_DETAIL_LIMIT 2        //  handshakes failed without detail before REFUSED

//  A job sent and not answered yet.
typedef struct {
    uint64_t ref;               //  caller's ref (key in pending)
    uint64_t job;               //  broker's id once ACCEPTED (0 before)
    char backend [PROTO_MAX_STR];//  header backend
    char tag [PROTO_MAX_STR];   //  header tag
    char group [PROTO_MAX_STR]; //  header group ("": none)
    char trajectory [PROTO_MAX_STR];//  header trajectory ("": none)
    uint32_t group_size;        //  header group_size (0: not said)
    client_cache_policy_t cache;//  header cache policy (use: not sent)
    zframe_t *body;             //  the job as sent (owned)
    bool accepted;              //  ACCEPTED handed out
    bool refused;               //  refused (429/500): sent again only by retry()
} s_pending_t;

//  A set of job ids: open addressing, linear probing, 0 = empty slot.
typedef struct {
    uint64_t *slots;            //  the table
    size_t size;                //  slots (a power of two)
    size_t used;                //  ids in it
} s_idset_t;

struct _client_kgym_t {
    client_kgym_config_t cfg;   //  settings (strings owned below)
    char *endpoint;             //  broker endpoint
    char *client_id;            //  stable id sent in every header
    char *curve_secret;         //  own certificate, or NULL
    char *broker_key;           //  broker's certificate, or NULL
    zsock_t *sock;              //  DEALER to the broker
    zsock_t *monitor;           //  PAIR receiving the socket's connect events
    zpoller_t *poller;          //  on sock and monitor
    proto_msg_t *msg;           //  reused for every send and receive
    zhashx_t *pending;          //  ref -> s_pending_t (owned)
    zhashx_t *requests;         //  ref -> uint64_t (owned): requests not answered yet
    zlist_t *deferred;          //  client_event_t (owned): events ask() kept for recv()
    uint64_t next_ask_ref;      //  ask(): the next ref to try
    s_idset_t delivered;        //  job ids whose RESULT was handed out
    int64_t last_sent_ms;       //  monotonic time of the last send
    int64_t last_heard_ms;      //  monotonic time of the last message from the broker
    int64_t next_socket_ms;     //  silent broker: when to make a new socket
    uint32_t backoff_ms;        //  next wait before a new socket
    bool heard;                 //  the broker has answered at least once
    bool connected_once;        //  this socket has been connected before
    bool resync_on_connect;     //  send pending jobs again at the next CONNECTED
    bool refused;               //  a handshake failure was handed out (until one succeeds)
    char refusal [PROTO_MAX_STR];//  its reason, while refused
    unsigned no_detail;         //  handshakes failed without detail since the last success
    uint64_t reconnects;        //  resyncs done
    uint64_t duplicates;        //  replies dropped as seen before
};

static void s_send_error (client_kgym_t *self, int error, char *err, size_t errlen);

//  --------------------------------------------------------------------------
//  The delivered set

static size_t
s_id_slot (uint64_t id, size_t size)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (size_t) id & (size - 1);
}

static bool
s_idset_has (s_idset_t *set, uint64_t id)
{
    if (!set->size)
        return false;
    for (size_t i = s_id_slot (id, set->size); set->slots [i]; i = (i + 1) & (set->size - 1))
        if (set->slots [i] == id)
            return true;
    return false;
}

//  Add id (not 0); 0, or -1 out of memory.
static int
s_idset_add (s_idset_t *set, uint64_t id)
{
    if ((set->used + 1) * 2 > set->size) {
        size_t size = set->size? set->size * 2: 4096;
        uint64_t *slots = (uint64_t *) calloc (size, sizeof (uint64_t));
        if (!slots)
            return -1;
        for (size_t i = 0; i < set->size; i++)
            if (set->slots [i]) {
                size_t j = s_id_slot (set->slots [i], size);
                while (slots [j])
                    j = (j + 1) & (size - 1);
                slots [j] = set->slots [i];
            }
        free (set->slots);
        set->slots = slots;
        set->size = size;
    }
    size_t i = s_id_slot (id, set->size);
    while (set->slots [i] && set->slots [i] != id)
        i = (i + 1) & (set->size - 1);
    if (!set->slots [i]) {
        set->slots [i] = id;
        set->used++;
    }
    return 0;
}

//  --------------------------------------------------------------------------
//  Pending jobs

static size_t
s_ref_hash (const void *key)
{
    uint64_t x = *(const uint64_t *) key;
    return (size_t) (x ^ (x >> 29) ^ (x >> 47));
}

static int
s_ref_compare (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y? -1: x > y? 1: 0;
}

static void
s_pending_free (void **item)
{
    s_pending_t *entry = (s_pending_t *) *item;
    if (entry) {
        zframe_destroy (&entry->body);
        free (entry);
        *item = NULL;
    }
}

static s_pending_t *
s_pending (client_kgym_t *self, uint64_t ref)
{
    return (s_pending_t *) zhashx_lookup (self->pending, &ref);
}

//  Send one job (its body lent); retry: a resend of a job sent before.
static int
s_send_job (client_kgym_t *self, s_pending_t *entry, bool retry)
{
    proto_msg_reset (self->msg, PROTO_SUBMIT);
    self->msg->ref = entry->ref;
    self->msg->retry = retry? 1: 0;
    memcpy (self->msg->backend, entry->backend, sizeof (self->msg->backend));
    memcpy (self->msg->tag, entry->tag, sizeof (self->msg->tag));
    memcpy (self->msg->group, entry->group, sizeof (self->msg->group));
    memcpy (self->msg->trajectory, entry->trajectory, sizeof (self->msg->trajectory));
    self->msg->group_size = entry->group_size;
    if (entry->cache != CLIENT_CACHE_USE)
        proto_msg_set_str (self->msg->cache, client_cache_policy_name (entry->cache));
    proto_msg_set_str (self->msg->client, self->client_id);
    self->msg->body = entry->body;
    int rc = proto_msg_send (self->msg, self->sock);
    self->msg->body = NULL;
    self->last_sent_ms = zclock_mono ();
    return rc;
}

//  --------------------------------------------------------------------------
//  Requests in flight and events kept for recv()

static void
s_request_free (void **item)
{
    free (*item);
    *item = NULL;
}

//  Remember request ref until its reply; 0, or -1 with a reason.
static int
s_request_add (client_kgym_t *self, uint64_t ref, char *err, size_t errlen)
{
    if (zhashx_lookup (self->requests, &ref))
        return 0;
    if (zhashx_size (self->requests) >= CLIENT_MAX_REQUESTS) {
        snprintf (err, errlen, "%d requests unanswered: the broker is not answering",
                  CLIENT_MAX_REQUESTS);
        return -1;
    }
    uint64_t *key = (uint64_t *) malloc (sizeof (uint64_t));
    if (!key) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    *key = ref;
    zhashx_insert (self->requests, key, key);
    return 0;
}

//  True when ref was a request in flight (it is not any more).
static bool
s_request_take (client_kgym_t *self, uint64_t ref)
{
    if (!zhashx_lookup (self->requests, &ref))
        return false;
    zhashx_delete (self->requests, &ref);
    return true;
}

//  Send self->msg, the request ref waits for its reply; forgotten again
//  when it cannot go. 0 or -1 with a reason.
static int
s_send_request (client_kgym_t *self, uint64_t ref, char *err, size_t errlen)
{
    if (proto_msg_send (self->msg, self->sock)) {
        s_send_error (self, errno, err, errlen);
        s_request_take (self, ref);
        return -1;
    }
    self->last_sent_ms = zclock_mono ();
    return 0;
}

static void
s_deferred_purge (client_kgym_t *self)
{
    client_event_t *event;
    while ((event = (client_event_t *) zlist_pop (self->deferred))) {
        client_event_clear (event);
        free (event);
    }
}

//  The connection was made again: whatever was in flight on the old one
//  may be lost, so every job without a result goes again (the broker knows
//  a resend by (client, ref) and does not run it twice).
static void
s_resync (client_kgym_t *self)
{
    self->reconnects++;
    size_t sent = 0;
    for (s_pending_t *entry = (s_pending_t *) zhashx_first (self->pending); entry;
         entry = (s_pending_t *) zhashx_next (self->pending))
        if (!entry->refused && s_send_job (self, entry, true) == 0)
            sent++;
    log_info ("client", "connected to the broker again: %zu unanswered job(s) sent again", sent);
}

//  --------------------------------------------------------------------------
//  The socket

static void
s_socket_close (client_kgym_t *self)
{
    if (self->poller)
        zpoller_destroy (&self->poller);
    if (self->sock)
        zmq_socket_monitor (zsock_resolve (self->sock), NULL, 0);
    zsock_destroy (&self->monitor);
    zsock_destroy (&self->sock);
}

//  A new DEALER (and its monitor) connected to the broker. 0 or -1 with a reason.
static int
s_socket_open (client_kgym_t *self, char *err, size_t errlen)
{
    s_socket_close (self);
    self->sock = zsock_new (ZMQ_DEALER);
    self->monitor = zsock_new (ZMQ_PAIR);
    if (!self->sock || !self->monitor) {
        snprintf (err, errlen, "cannot create a socket");
        return -1;
    }
    proto_sock_configure (self->sock, false);
    //  Never block: a broker away for hours would fill the queue with
    //  heartbeats and stall the caller; a send that cannot queue fails.
    zsock_set_sndtimeo (self->sock, 0);
    if (self->curve_secret
    &&  proto_curve_client (self->sock, self->curve_secret, self->broker_key, err, errlen))
        return -1;
    //  Never a name used before in this process (a destroyed client's
    //  monitor stays bound until ZeroMQ's reaper closes it; the next client
    //  may be allocated at its address).
    static atomic_uint s_monitors;
    char endpoint [96];
    snprintf (endpoint, sizeof (endpoint), "inproc://kgym-client-monitor-%u",
              atomic_fetch_add (&s_monitors, 1));
    int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
               | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
               | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor (zsock_resolve (self->sock), endpoint, events) == -1
    ||  zsock_connect (self->monitor, "%s", endpoint) == -1) {
        snprintf (err, errlen, "cannot monitor the socket: %s", zmq_strerror (zmq_errno ()));
        return -1;
    }
    if (zsock_connect (self->sock, "%s", self->endpoint) == -1) {
        snprintf (err, errlen, "cannot connect to %s: %s", self->endpoint, zmq_strerror (zmq_errno ()));
        return -1;
    }
    self->poller = zpoller_new (self->sock, self->monitor, NULL);
    if (!self->poller) {
        snprintf (err, errlen, "cannot create a poller");
        return -1;
    }
    self->connected_once = false;
    return 0;
}

//  Why a handshake failed, in words, into event (REFUSED); false when it is
//  not yet worth saying (a failure without detail can be a dropped
//  connection: said when it repeats).
static bool
s_refusal (client_kgym_t *self, uint16_t id, uint32_t value, client_event_t *event)
{
    bool curve = self->curve_secret != NULL;
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && ++self->no_detail < CLIENT_NO_DETAIL_LIMIT)
        return false;
    if (self->refused)
        return false;               //  said once until a handshake succeeds
    self->refused = true;
    event->type = CLIENT_EVENT_REFUSED;
    event->code = value;
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        snprintf (event->reason, sizeof (event->reason),
                  "the broker refused our key (ZAP status %u): is our public certificate in "
                  "its trainer keys directory?", value);
    else
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        snprintf (event->reason, sizeof (event->reason), "%s",
                  curve? "the broker does not use CURVE, and this client does"
                       : "the broker requires CURVE (a secret certificate and the broker's key)");
    else
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        snprintf (event->reason, sizeof (event->reason),
                  "the %s handshake with the broker failed (ZMTP protocol error 0x%x)",
                  curve? "CURVE": "ZMTP", value);
    else
        snprintf (event->reason, sizeof (event->reason), "%s",
                  curve? "the CURVE handshake with the broker failed: is the broker key its "
                         "public certificate, and does the broker use CURVE?"
                       : "the handshake with the broker failed: it may require CURVE");
    snprintf (self->refusal, sizeof (self->refusal), "%s", event->reason);
    log_info ("client", "%s: %s", self->endpoint, event->reason);
    return true;
}

//  An event from the monitor: connects (a resync after a reconnect) and
//  handshakes. True when event was filled (REFUSED) to hand out.
static bool
s_handle_monitor (client_kgym_t *self, client_event_t *event)
{
    zmsg_t *msg = zmsg_recv (self->monitor);
    zframe_t *frame = msg? zmsg_first (msg): NULL;
    bool filled = false;
    if (frame && zframe_size (frame) >= 6) {
        uint16_t id;
        uint32_t value;
        memcpy (&id, zframe_data (frame), sizeof (id));
        memcpy (&value, zframe_data (frame) + 2, sizeof (value));
        if (id == ZMQ_EVENT_CONNECTED) {
            if (self->connected_once || self->resync_on_connect)
                s_resync (self);
            self->connected_once = true;
            self->resync_on_connect = false;
        }
        else
        if (id == ZMQ_EVENT_DISCONNECTED)
            log_info ("client", "lost the connection to the broker at %s", self->endpoint);
        else
        if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            self->refused = false;
            self->no_detail = 0;
        }
        else
            filled = s_refusal (self, id, value, event);
    }
    zmsg_destroy (&msg);
    return filled;
}

//  Why a send failed, into err: a refused handshake when that is why (the
//  monitor may not have been read yet: its events are read now, and a
//  REFUSED kept for recv), else the socket's error.
static void
s_send_error (client_kgym_t *self, int error, char *err, size_t errlen)
{
    while (self->monitor && (zsock_events (self->monitor) & ZMQ_POLLIN)) {
        client_event_t *event = (client_event_t *) calloc (1, sizeof (client_event_t));
        if (!event)
            break;
        if (!s_handle_monitor (self, event) || zlist_append (self->deferred, event))
            free (event);
    }
    if (self->refused)
        snprintf (err, errlen, "cannot send: %s", self->refusal);
    else
        snprintf (err, errlen, "cannot send: %s", zmq_strerror (error));
}

//  --------------------------------------------------------------------------
//  Life cycle

void
client_kgym_config_default (client_kgym_config_t *cfg)
{
    memset (cfg, 0, sizeof (*cfg));
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
}

int
client_kgym_check_endpoint (const char *endpoint, bool resolve, char *err, size_t errlen)
{
    if (!endpoint || !*endpoint) {
        snprintf (err, errlen, "no broker endpoint (tcp://HOST:PORT)");
        return -1;
    }
    const char *scheme_end = strstr (endpoint, "://");
    if (!scheme_end) {
        snprintf (err, errlen, "'%s' names no transport: write tcp://%s", endpoint, endpoint);
        return -1;
    }
    size_t scheme = (size_t) (scheme_end - endpoint);
    const char *address = scheme_end + 3;
    bool tcp = scheme == 3 && strncmp (endpoint, "tcp", 3) == 0;
    if (!tcp && !(scheme == 3 && strncmp (endpoint, "ipc", 3) == 0)
    &&  !(scheme == 6 && strncmp (endpoint, "inproc", 6) == 0)) {
        snprintf (err, errlen, "'%s': unknown transport '%.*s' (tcp://HOST:PORT or ipc://PATH)",
                  endpoint, (int) scheme, endpoint);
        return -1;
    }
    if (!*address) {
        snprintf (err, errlen, "'%s' names no address", endpoint);
        return -1;
    }
    if (!tcp)
        return 0;
    //  [SOURCE;]HOST:PORT, HOST an IPv6 address in brackets or a name.
    const char *semicolon = strrchr (address, ';');
    if (semicolon)
        address = semicolon + 1;
    char host [256];
    const char *port;
    if (address [0] == '[') {
        const char *close = strchr (address, ']');
        if (!close || close [1] != ':') {
            snprintf (err, errlen, "'%s': write an IPv6 host as tcp://[ADDRESS]:PORT", endpoint);
            return -1;
        }
        snprintf (host, sizeof (host), "%.*s", (int) (close - address - 1), address + 1);
        port = close + 2;
    }
    else {
        const char *colon = strrchr (address, ':');
        if (!colon) {
            snprintf (err, errlen, "'%s' names no port: write tcp://%s:PORT", endpoint, address);
            return -1;
        }
        snprintf (host, sizeof (host), "%.*s", (int) (colon - address), address);
        port = colon + 1;
    }
    char *end;
    long number = strtol (port, &end, 10);
    if (!isdigit ((unsigned char) port [0]) || *end || number < 1 || number > 65535) {
        snprintf (err, errlen, "'%s': the port '%s' is not a number 1..65535", endpoint, port);
        return -1;
    }
    if (!host [0] || streq (host, "*")) {
        snprintf (err, errlen, "'%s' names no host to connect to: write tcp://HOST:%s "
                  "('*' is for binding)", endpoint, port);
        return -1;
    }
    if (resolve) {
        struct addrinfo hints, *found = NULL;
        memset (&hints, 0, sizeof (hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo (host, NULL, &hints, &found);
        if (rc) {
            snprintf (err, errlen, "cannot resolve the host '%s' (DNS: %s)", host,
                      rc == EAI_SYSTEM? strerror (errno): gai_strerror (rc));
            return -1;
        }
        freeaddrinfo (found);
    }
    return 0;
}

client_kgym_t *
client_kgym_new_config (const client_kgym_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg || client_kgym_check_endpoint (cfg->endpoint, false, err, errlen))
        return NULL;
    if (!cfg->curve_secret != !cfg->broker_key) {
        snprintf (err, errlen, "CURVE needs both the client's secret certificate and the broker's key");
        return NULL;
    }
    if (cfg->client_id && (!*cfg->client_id || strlen (cfg->client_id) >= PROTO_MAX_STR)) {
        snprintf (err, errlen, "client id empty or longer than %d bytes", PROTO_MAX_STR - 1);
        return NULL;
    }
    client_kgym_t *self = (client_kgym_t *) calloc (1, sizeof (client_kgym_t));
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    if (!self->cfg.heartbeat_ms)
        self->cfg.heartbeat_ms = 1000;
    if (!self->cfg.liveness)
        self->cfg.liveness = 3;
    self->endpoint = strdup (cfg->endpoint);
    if (cfg->client_id)
        self->client_id = strdup (cfg->client_id);
    else {
        zuuid_t *uuid = zuuid_new ();
        self->client_id = uuid? strdup (zuuid_str_canonical (uuid)): NULL;
        zuuid_destroy (&uuid);
    }
    if (cfg->curve_secret) {
        self->curve_secret = strdup (cfg->curve_secret);
        self->broker_key = strdup (cfg->broker_key);
    }
    self->cfg.endpoint = self->cfg.client_id = self->cfg.curve_secret = self->cfg.broker_key = NULL;
    self->msg = proto_msg_new (PROTO_HEARTBEAT);
    self->pending = zhashx_new ();
    self->requests = zhashx_new ();
    self->deferred = zlist_new ();
    self->next_ask_ref = CLIENT_ASK_REF_BASE;
    if (!self->endpoint || !self->client_id || !self->msg || !self->pending
    ||  !self->requests || !self->deferred
    ||  (cfg->curve_secret && (!self->curve_secret || !self->broker_key))) {
        snprintf (err, errlen, "out of memory");
        client_kgym_destroy (&self);
        return NULL;
    }
    zhashx_set_key_hasher (self->pending, s_ref_hash);
    zhashx_set_key_comparator (self->pending, s_ref_compare);
    zhashx_set_key_duplicator (self->pending, NULL);
    zhashx_set_key_destructor (self->pending, NULL);
    zhashx_set_destructor (self->pending, s_pending_free);
    zhashx_set_key_hasher (self->requests, s_ref_hash);
    zhashx_set_key_comparator (self->requests, s_ref_compare);
    zhashx_set_key_duplicator (self->requests, NULL);
    zhashx_set_key_destructor (self->requests, NULL);
    zhashx_set_destructor (self->requests, s_request_free);
    if (s_socket_open (self, err, errlen)) {
        client_kgym_destroy (&self);
        return NULL;
    }
    self->last_sent_ms = self->last_heard_ms = zclock_mono ();
    self->backoff_ms = self->cfg.heartbeat_ms * self->cfg.liveness;
    self->next_socket_ms = self->last_heard_ms + self->backoff_ms;
    return self;
}

client_kgym_t *
client_kgym_new (const char *endpoint)
{
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.endpoint = endpoint;
    char err [256];
    client_kgym_t *self = client_kgym_new_config (&cfg, err, sizeof (err));
    if (!self)
        log_debug ("client", "%s", err);
    return self;
}

void
client_kgym_destroy (client_kgym_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    client_kgym_t *self = *self_p;
    if (self->sock && self->msg && self->poller && !self->cfg.keep_jobs) {
        proto_msg_reset (self->msg, PROTO_DISCONNECT);
        proto_msg_send (self->msg, self->sock);
    }
    s_socket_close (self);
    proto_msg_destroy (&self->msg);
    zhashx_destroy (&self->pending);
    zhashx_destroy (&self->requests);
    if (self->deferred) {
        s_deferred_purge (self);
        zlist_destroy (&self->deferred);
    }
    free (self->delivered.slots);
    free (self->endpoint);
    free (self->client_id);
    free (self->curve_secret);
    free (self->broker_key);
    free (self);
    *self_p = NULL;
}

const char *
client_kgym_id (client_kgym_t *self)
{
    return self->client_id;
}

//  --------------------------------------------------------------------------
//  Requests

static const char *s_cache_policies [] = { "use", "refresh", "bypass" };

const char *
client_cache_policy_name (client_cache_policy_t policy)
{
    return (unsigned) policy < 3? s_cache_policies [policy]: "use";
}

int
client_cache_policy_parse (const char *name, client_cache_policy_t *policy)
{
    for (unsigned i = 0; name && i < 3; i++)
        if (streq (name, s_cache_policies [i])) {
            *policy = (client_cache_policy_t) i;
            return 0;
        }
    return -1;
}

int
client_kgym_submit_encoded (client_kgym_t *self, uint64_t ref, const char *backend,
                            const char *tag, const void *body, size_t size,
                            char *err, size_t errlen)
{
    return client_kgym_submit_encoded_opts (self, ref, backend, tag, body, size, NULL, err, errlen);
}

int
client_kgym_submit_encoded_opts (client_kgym_t *self, uint64_t ref, const char *backend,
                                 const char *tag, const void *body, size_t size,
                                 const client_submit_opts_t *opts, char *err, size_t errlen)
{
    client_submit_opts_t none = { NULL, 0, NULL, CLIENT_CACHE_USE };
    if (!opts)
        opts = &none;
    if (!backend || !*backend || strlen (backend) >= PROTO_MAX_STR) {
        snprintf (err, errlen, "backend missing or longer than %d bytes", PROTO_MAX_STR - 1);
        return -1;
    }
    if (!body || size == 0 || size > PROTO_MAX_BODY) {
        snprintf (err, errlen, "job of %zu bytes (encoded) over the limit of %u", size, PROTO_MAX_BODY);
        return -1;
    }
    //  Header strings are refused rather than cut: a cut group id would
    //  merge two groups at the broker.
    if ((opts->group && strlen (opts->group) >= PROTO_MAX_STR)
    ||  (opts->trajectory && strlen (opts->trajectory) >= PROTO_MAX_STR)) {
        snprintf (err, errlen, "%s longer than %d bytes",
                  opts->group && strlen (opts->group) >= PROTO_MAX_STR? "group": "trajectory",
                  PROTO_MAX_STR - 1);
        return -1;
    }
    if ((unsigned) opts->cache > CLIENT_CACHE_BYPASS) {
        snprintf (err, errlen, "unknown cache policy %d", (int) opts->cache);
        return -1;
    }
    if (s_pending (self, ref)) {
        snprintf (err, errlen, "ref %llu is still in flight", (unsigned long long) ref);
        return -1;
    }
    s_pending_t *entry = (s_pending_t *) calloc (1, sizeof (s_pending_t));
    zframe_t *frame = entry? zframe_new (body, size): NULL;
    if (!frame) {
        free (entry);
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    entry->ref = ref;
    entry->body = frame;
    proto_msg_set_str (entry->backend, backend);
    //  The header's tag is for the broker's logs and FETCH: the job's own
    //  tag (in the body, up to 256 bytes) is the one echoed, so a cut here
    //  loses nothing.
    proto_msg_set_str (entry->tag, tag);
    proto_msg_set_str (entry->group, opts->group);
    proto_msg_set_str (entry->trajectory, opts->trajectory);
    entry->group_size = opts->group_size;
    entry->cache = opts->cache;
    zhashx_insert (self->pending, &entry->ref, entry);
    if (s_send_job (self, entry, false)) {
        s_send_error (self, errno, err, errlen);
        zhashx_delete (self->pending, &ref);
        return -1;
    }
    return 0;
}

int
client_kgym_submit (client_kgym_t *self, uint64_t ref, json_t *job, char *err, size_t errlen)
{
    return client_kgym_submit_opts (self, ref, job, NULL, err, errlen);
}

int
client_kgym_submit_opts (client_kgym_t *self, uint64_t ref, json_t *job,
                         const client_submit_opts_t *opts, char *err, size_t errlen)
{
    if (!json_is_object (job)) {
        snprintf (err, errlen, "job is not an object");
        return -1;
    }
    const char *backend = json_string_value (json_object_get (json_object_get (job, "task"), "backend"));
    if (!backend) {
        snprintf (err, errlen, "job.task.backend missing or not a string");
        return -1;
    }
    json_t *tag = json_object_get (job, "tag");
    if (tag && !json_is_string (tag) && !json_is_null (tag)) {
        snprintf (err, errlen, "job.tag is not a string");
        return -1;
    }
    char *data;
    size_t size;
    if (proto_mpk_encode (job, &data, &size)) {
        snprintf (err, errlen, "cannot encode the job");
        return -1;
    }
    int rc = client_kgym_submit_encoded_opts (self, ref, backend, json_string_value (tag), data,
                                              size, opts, err, errlen);
    free (data);
    return rc;
}

int
client_kgym_retry (client_kgym_t *self, uint64_t ref, char *err, size_t errlen)
{
    s_pending_t *entry = s_pending (self, ref);
    if (!entry || !entry->refused) {
        snprintf (err, errlen, "ref %llu is not a refused job", (unsigned long long) ref);
        return -1;
    }
    entry->refused = false;
    if (s_send_job (self, entry, true)) {
        entry->refused = true;
        s_send_error (self, errno, err, errlen);
        return -1;
    }
    return 0;
}

void
client_kgym_forget (client_kgym_t *self, uint64_t ref)
{
    zhashx_delete (self->pending, &ref);
}

int
client_kgym_fetch (client_kgym_t *self, uint64_t ref, uint64_t job, const char *tag,
                   char *err, size_t errlen)
{
    if (tag && strlen (tag) >= PROTO_MAX_STR) {
        snprintf (err, errlen, "tag longer than %d bytes", PROTO_MAX_STR - 1);
        return -1;
    }
    if (s_request_add (self, ref, err, errlen))
        return -1;
    proto_msg_reset (self->msg, PROTO_FETCH);
    self->msg->ref = ref;
    self->msg->job = job;
    proto_msg_set_str (self->msg->tag, tag);
    proto_msg_set_str (self->msg->client, self->client_id);
    return s_send_request (self, ref, err, errlen);
}

int
client_kgym_drain (client_kgym_t *self, uint64_t ref, const char *worker, char *err, size_t errlen)
{
    if (!worker || !*worker || strlen (worker) >= PROTO_MAX_STR) {
        snprintf (err, errlen, "worker name missing or longer than %d bytes", PROTO_MAX_STR - 1);
        return -1;
    }
    if (s_request_add (self, ref, err, errlen))
        return -1;
    proto_msg_reset (self->msg, PROTO_DRAIN);
    self->msg->ref = ref;
    proto_msg_set_str (self->msg->name, worker);
    return s_send_request (self, ref, err, errlen);
}

int
client_kgym_cancel (client_kgym_t *self, uint64_t ref, uint64_t job, char *err, size_t errlen)
{
    if (!ref || !job) {
        snprintf (err, errlen, "%s", !ref? "ref 0 is not a request's (use refs >= 1)"
                                         : "job id missing (0)");
        return -1;
    }
    if (s_pending (self, ref)) {
        snprintf (err, errlen, "ref %llu names a job in flight", (unsigned long long) ref);
        return -1;
    }
    if (s_request_add (self, ref, err, errlen))
        return -1;
    proto_msg_reset (self->msg, PROTO_CANCEL);
    self->msg->ref = ref;
    self->msg->job = job;
    proto_msg_set_str (self->msg->client, self->client_id);
    if (s_send_request (self, ref, err, errlen))
        return -1;
    //  Given up: not sent again on a reconnect. A result already on its way
    //  is still handed out (results need no pending entry).
    for (s_pending_t *entry = (s_pending_t *) zhashx_first (self->pending); entry;
         entry = (s_pending_t *) zhashx_next (self->pending))
        if (entry->job == job) {
            uint64_t key = entry->ref;
            zhashx_delete (self->pending, &key);
            break;
        }
    return 0;
}

//  Send QUERY ref with the encoded query (lent). 0, or -1 with a reason.
static int
s_send_query (client_kgym_t *self, uint64_t ref, const char *data, size_t size,
              char *err, size_t errlen)
{
    zframe_t *body = zframe_new (data, size);
    if (!body) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    proto_msg_reset (self->msg, PROTO_QUERY);
    self->msg->ref = ref;
    proto_msg_set_str (self->msg->client, self->client_id);
    proto_msg_set_body (self->msg, &body);
    int rc = proto_msg_send (self->msg, self->sock);
    proto_msg_reset (self->msg, PROTO_HEARTBEAT);      //  drops the body
    self->last_sent_ms = zclock_mono ();
    if (rc) {
        s_send_error (self, errno, err, errlen);
        return -1;
    }
    return 0;
}

//  The query as msgpack (data to free). 0, or -1 with a reason.
static int
s_encode_query (json_t *query, char **data, size_t *size, char *err, size_t errlen)
{
    if (!json_is_object (query)) {
        snprintf (err, errlen, "a query is a JSON object with \"what\"");
        return -1;
    }
    if (proto_mpk_encode (query, data, size)) {
        snprintf (err, errlen, "cannot encode the query");
        return -1;
    }
    if (*size > PROTO_MAX_BODY) {
        snprintf (err, errlen, "query of %zu bytes (encoded) over the limit of %u", *size,
                  PROTO_MAX_BODY);
        free (*data);
        *data = NULL;
        return -1;
    }
    return 0;
}

int
client_kgym_query (client_kgym_t *self, uint64_t ref, json_t *query, char *err, size_t errlen)
{
    if (!ref) {
        snprintf (err, errlen, "ref 0 is not a request's (use refs >= 1)");
        return -1;
    }
    if (s_pending (self, ref)) {
        snprintf (err, errlen, "ref %llu names a job in flight", (unsigned long long) ref);
        return -1;
    }
    char *data;
    size_t size;
    if (s_encode_query (query, &data, &size, err, errlen))
        return -1;
    int rc = s_request_add (self, ref, err, errlen);
    if (rc == 0) {
        rc = s_send_query (self, ref, data, size, err, errlen);
        if (rc)
            s_request_take (self, ref);
    }
    free (data);
    return rc;
}

//  --------------------------------------------------------------------------
//  Replies

//  Turn a RESULT into an event; its body decodes into the result object.
static void
s_result_event (client_kgym_t *self, client_event_t *event)
{
    proto_msg_t *msg = self->msg;
    event->ref = msg->ref;
    event->job = msg->job;
    event->queue_s = msg->queue_s;
    memcpy (event->worker, msg->name, sizeof (event->worker));
    char why [200];
    json_t *result = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), NULL,
                                       why, sizeof (why));
    if (!json_is_object (result)) {
        event->type = CLIENT_EVENT_ERROR;
        event->code = PROTO_ERR_MALFORMED;
        event->local = true;
        snprintf (event->reason, sizeof (event->reason), "malformed result body: %s",
                  result? "not a map": why);
        json_decref (result);
        return;
    }
    json_object_set_new (result, "job", json_integer ((json_int_t) msg->job));
    json_object_set_new (result, "queue_s", json_real (msg->queue_s));
    if (msg->name [0])
        json_object_set_new (result, "worker", json_string (msg->name));
    event->type = CLIENT_EVENT_RESULT;
    event->result = result;
}

//  A body that must be a map (an ANSWER's or a SUMMARY's), decoded; NULL
//  with the reason in why.
static json_t *
s_decode_map (zframe_t *body, char *why, size_t whylen)
{
    json_t *map = proto_mpk_decode (zframe_data (body), zframe_size (body), NULL, why, whylen);
    if (map && !json_is_object (map)) {
        snprintf (why, whylen, "not a map");
        json_decref (map);
        map = NULL;
    }
    return map;
}

//  The message just read as an event; false when it is not one to hand out
//  (a heartbeat, a duplicate).
static bool
s_handle_reply (client_kgym_t *self, client_event_t *event)
{
    proto_msg_t *msg = self->msg;
    switch (msg->cmd) {
        case PROTO_ACCEPTED: {
            s_pending_t *entry = s_pending (self, msg->ref);
            if (!entry || (entry->accepted && entry->job == msg->job)) {
                self->duplicates++;
                return false;
            }
            bool first = !entry->accepted;
            entry->accepted = true;
            entry->refused = false;
            entry->job = msg->job;      //  a broker that lost it took it as new
            if (!first)
                return false;
            event->type = CLIENT_EVENT_ACCEPTED;
            event->ref = msg->ref;
            event->job = msg->job;
            return true;
        }
        case PROTO_RESULT: {
            if (s_idset_has (&self->delivered, msg->job)) {
                self->duplicates++;
                return false;
            }
            s_idset_add (&self->delivered, msg->job);
            s_pending_t *entry = s_pending (self, msg->ref);
            if (entry && (!entry->job || entry->job == msg->job))
                zhashx_delete (self->pending, &msg->ref);
            s_result_event (self, event);
            return true;
        }
        case PROTO_ERROR: {
            if (msg->code == CLIENT_NOTICE_NO_WORKER) {
                //  Informational: the job stays queued, its entry stays here.
                s_pending_t *entry = msg->ref? s_pending (self, msg->ref): NULL;
                event->type = CLIENT_EVENT_NOTICE;
                event->ref = msg->ref;
                event->job = msg->job;
                event->code = msg->code;
                memcpy (event->reason, msg->reason, sizeof (event->reason));
                if (entry)
                    memcpy (event->backend, entry->backend, sizeof (event->backend));
                return true;
            }
            //  About a request (its ref is one), else about a job.
            if (msg->ref && !s_request_take (self, msg->ref)) {
                s_pending_t *entry = s_pending (self, msg->ref);
                if (entry && entry->refused) {
                    self->duplicates++;
                    return false;
                }
                if (entry && (msg->code == PROTO_ERR_OVERLOADED || msg->code == PROTO_ERR_INTERNAL))
                    entry->refused = true;      //  kept for retry()
                else
                if (entry)
                    zhashx_delete (self->pending, &msg->ref);
            }
            event->type = CLIENT_EVENT_ERROR;
            event->ref = msg->ref;
            event->job = msg->job;
            event->code = msg->code;
            memcpy (event->reason, msg->reason, sizeof (event->reason));
            return true;
        }
        case PROTO_ANSWER: {
            if (!s_request_take (self, msg->ref)) {
                self->duplicates++;         //  a query sent twice, answered twice
                return false;
            }
            char why [200];
            event->ref = msg->ref;
            event->answer = s_decode_map (msg->body, why, sizeof (why));
            if (event->answer)
                event->type = CLIENT_EVENT_ANSWER;
            else {
                event->type = CLIENT_EVENT_ERROR;
                event->code = PROTO_ERR_MALFORMED;
                event->local = true;
                snprintf (event->reason, sizeof (event->reason), "answer body: %s", why);
            }
            return true;
        }
        case PROTO_SUMMARY: {
            char why [200];
            memcpy (event->group, msg->group, sizeof (event->group));
            event->summary = s_decode_map (msg->body, why, sizeof (why));
            if (event->summary)
                event->type = CLIENT_EVENT_SUMMARY;
            else {
                event->type = CLIENT_EVENT_ERROR;
                event->code = PROTO_ERR_MALFORMED;
                event->local = true;
                snprintf (event->reason, sizeof (event->reason), "summary of group %.64s: %s",
                          msg->group, why);
            }
            return true;
        }
        case PROTO_DONE:
            s_request_take (self, msg->ref);
            event->type = CLIENT_EVENT_DONE;
            event->ref = msg->ref;
            event->count = msg->count;
            event->pending = msg->pending;
            return true;
        default:
            //  HEARTBEAT, or something a broker should not send: a sign of life only.
            return false;
    }
}

//  Wait for the next reply from the socket (not the kept events).
static int
s_recv (client_kgym_t *self, int timeout_ms, client_event_t *event)
{
    memset (event, 0, sizeof (*event));
    int64_t deadline = zclock_mono () + (timeout_ms > 0? timeout_ms: 0);
    int64_t heartbeat_ms = self->cfg.heartbeat_ms;
    while (true) {
        int64_t now = zclock_mono ();
        if (now - self->last_heard_ms > heartbeat_ms * self->cfg.liveness
        &&  now >= self->next_socket_ms) {
            //  Silent for too long: the connection may be dead without
            //  either side seeing it. A new socket, and a resend on connect.
            char err [256];
            log_info ("client", "the broker at %s is silent: connecting anew", self->endpoint);
            if (s_socket_open (self, err, sizeof (err)))
                log_warn ("client", "%s", err);
            self->resync_on_connect = true;
            self->next_socket_ms = now + self->backoff_ms;
            self->backoff_ms = self->backoff_ms * 2 > CLIENT_BACKOFF_MAX_MS? CLIENT_BACKOFF_MAX_MS
                                                                           : self->backoff_ms * 2;
        }
        if (self->sock && now - self->last_sent_ms >= heartbeat_ms) {
            proto_msg_reset (self->msg, PROTO_HEARTBEAT);
            proto_msg_set_str (self->msg->client, self->client_id);
            proto_msg_send (self->msg, self->sock);
            self->last_sent_ms = now;
        }
        bool ready = self->sock && (zsock_events (self->sock) & ZMQ_POLLIN);
        if (!ready) {
            int64_t wait = deadline - now;
            if (wait <= 0) {
                errno = EAGAIN;
                return -1;
            }
            //  Wake for the next heartbeat (and the silence check) too.
            int64_t heartbeat = self->last_sent_ms + heartbeat_ms - now;
            if (heartbeat < wait)
                wait = heartbeat > 0? heartbeat: 0;
            if (!self->poller) {
                zclock_sleep ((int) wait);      //  no socket (out of memory): try again later
                continue;
            }
            void *which = zpoller_wait (self->poller, (int) wait);
            if (!which) {
                if (zpoller_terminated (self->poller)) {
                    errno = EINTR;
                    return -1;
                }
                continue;
            }
            if (which == self->monitor) {
                if (s_handle_monitor (self, event))
                    return 0;
                continue;
            }
        }
        int rc = proto_msg_recv (self->msg, self->sock);
        if (rc == -1) {
            errno = EINTR;
            return -1;
        }
        self->last_heard_ms = zclock_mono ();
        self->heard = true;
        self->backoff_ms = heartbeat_ms * self->cfg.liveness;
        self->next_socket_ms = self->last_heard_ms + self->backoff_ms;
        if (rc == -2) {
            log_warn ("client", "malformed message from the broker: %s", self->msg->reason);
            continue;
        }
        if (s_handle_reply (self, event))
            return 0;
    }
}

int
client_kgym_recv (client_kgym_t *self, int timeout_ms, client_event_t *event)
{
    client_event_t *kept = (client_event_t *) zlist_pop (self->deferred);
    if (kept) {
        *event = *kept;
        free (kept);
        return 0;
    }
    return s_recv (self, timeout_ms, event);
}

json_t *
client_kgym_ask (client_kgym_t *self, json_t *query, int timeout_ms, char *err, size_t errlen)
{
    char *data;
    size_t size;
    if (s_encode_query (query, &data, &size, err, errlen))
        return NULL;
    uint64_t ref = self->next_ask_ref++;
    while (s_pending (self, ref) || zhashx_lookup (self->requests, &ref))
        ref = self->next_ask_ref++;
    if (s_request_add (self, ref, err, errlen)
    ||  s_send_query (self, ref, data, size, err, errlen)) {
        s_request_take (self, ref);
        free (data);
        return NULL;
    }
    json_t *answer = NULL;
    bool done = false;
    uint64_t reconnects = self->reconnects;
    int64_t deadline = zclock_mono () + (timeout_ms > 0? timeout_ms: 0);
    while (!done) {
        if (self->reconnects != reconnects) {
            //  Made again: the query or its answer may have gone with the
            //  old connection. A second answer is dropped as a duplicate.
            reconnects = self->reconnects;
            char why [256];
            if (s_send_query (self, ref, data, size, why, sizeof (why)))
                log_debug ("client", "query sent again: %s", why);
        }
        int64_t left = deadline - zclock_mono ();
        if (left <= 0) {
            snprintf (err, errlen, "no answer from the broker at %s within %d ms", self->endpoint,
                      timeout_ms);
            break;
        }
        //  Wake at least every heartbeat, to see a reconnect.
        int wait = (int) (left < self->cfg.heartbeat_ms? left: self->cfg.heartbeat_ms);
        client_event_t *event = (client_event_t *) calloc (1, sizeof (client_event_t));
        if (!event) {
            snprintf (err, errlen, "out of memory");
            break;
        }
        if (s_recv (self, wait, event)) {
            free (event);
            if (errno == EINTR) {
                snprintf (err, errlen, "interrupted");
                break;
            }
            continue;
        }
        if (event->type == CLIENT_EVENT_ANSWER && event->ref == ref) {
            answer = event->answer;
            event->answer = NULL;
            done = true;
        }
        else
        if (event->type == CLIENT_EVENT_REFUSED) {
            snprintf (err, errlen, "%s: %s", self->endpoint, event->reason);
            done = true;
        }
        else
        if (event->type == CLIENT_EVENT_ERROR
        &&  (event->ref == ref || (event->ref == 0 && event->code == PROTO_ERR_UNKNOWN_COMMAND))) {
            //  An older broker answers QUERY with ERROR 401 and no ref.
            snprintf (err, errlen, "broker error %u: %s%s", event->code, event->reason,
                      event->ref? "": " (a broker that predates QUERY?)");
            done = true;
        }
        else {
            if (zlist_append (self->deferred, event) == 0)
                continue;                           //  for recv(), in order
            log_warn ("client", "out of memory: an event was dropped while waiting for an answer");
        }
        client_event_clear (event);
        free (event);
    }
    s_request_take (self, ref);
    free (data);
    return answer;
}

size_t
client_kgym_pending (client_kgym_t *self)
{
    return zhashx_size (self->pending);
}

uint64_t
client_kgym_reconnects (client_kgym_t *self)
{
    return self->reconnects;
}

uint64_t
client_kgym_duplicates (client_kgym_t *self)
{
    return self->duplicates;
}

int64_t
client_kgym_silence_ms (client_kgym_t *self)
{
    return zclock_mono () - self->last_heard_ms;
}

bool
client_kgym_heard (client_kgym_t *self)
{
    return self->heard;
}

void
client_event_clear (client_event_t *event)
{
    if (event) {
        json_decref (event->result);
        json_decref (event->answer);
        json_decref (event->summary);
        memset (event, 0, sizeof (*event));
    }
}

json_t *
client_result_line (json_t *result, const char *candidate)
{
    if (!json_is_object (result))
        return NULL;
    json_t *line = json_object ();
    if (!line)
        return NULL;
    json_t *name = candidate? json_string (candidate): json_null ();
    if (!name)      //  a path that is not UTF-8 cannot be a JSON string
        name = json_string ("(path not UTF-8)");
    json_object_set_new (line, "candidate", name);
    const char *key;
    json_t *value;
    json_object_foreach (result, key, value)
        if (strcmp (key, "candidate") != 0)
            json_object_set (line, key, value);
    return line;
}
