/*  broker_server - the broker: routes jobs from clients to capable workers.

    One thread, two ROUTER sockets, no blocking call. A job lives in exactly
    one list at a time: its backend's queue while it waits, or the list of
    the worker that holds its lease while it runs. That makes every step O(1)
    except picking a worker (a scan of that backend's few workers):
        SUBMIT   -> job table + backend queue, ACCEPTED back, dispatch
        dispatch -> queue head to the least-loaded worker, JOB (attempt+1)
        RESULT   -> lease check (job, attempt, worker), RESULT to the client,
                    free the slot, dispatch
        expiry   -> the worker's jobs back to the front of their queue
    Bodies and routing ids are moved between messages, never copied; a JOB
    resend shares the body's bytes (zmq_msg_copy). Spec: docs/protocol.md.
*/
#include "broker_server.h"
#include "proto_msg.h"
#include "common_log.h"
#include <time.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <inttypes.h>

#define BROKER_BATCH 256        //  messages read from one socket before looking at the others

typedef struct _s_job_t s_job_t;
typedef struct _s_worker_t s_worker_t;
typedef struct _s_backend_t s_backend_t;

//  An intrusive doubly linked list of jobs.
typedef struct {
    s_job_t *head;              //  first, or NULL
    s_job_t *tail;              //  last, or NULL
    size_t size;                //  jobs in the list
} s_joblist_t;

//  One accepted job, from SUBMIT until its RESULT is forwarded.
struct _s_job_t {
    uint64_t id;                //  broker's job id (key in the job table)
    uint64_t ref;               //  client's reference
    uint32_t attempt;           //  dispatches so far; the lease is (id, attempt)
    zframe_t *client;           //  routing id of the submitting client (owned)
    zframe_t *body;             //  the job as submitted (owned, never decoded)
    s_backend_t *backend;       //  queue it belongs to
    s_worker_t *worker;         //  lease holder, or NULL while queued
    int64_t accepted_us;        //  when ACCEPTED was sent
    int64_t dispatched_us;      //  first dispatch, 0 = never
    s_job_t *prev, *next;       //  links in the queue or the worker's list
};

//  One registered worker.
struct _s_worker_t {
    zframe_t *identity;         //  routing id (owned; key in the worker table)
    char name [PROTO_MAX_STR];  //  from READY
    char device [PROTO_MAX_STR];//  from READY
    uint32_t capacity;          //  concurrent jobs it takes
    uint32_t pid;               //  its process id, for logs
    s_backend_t *backend;       //  what it serves
    size_t slot;                //  index in backend->workers
    s_joblist_t jobs;           //  jobs it holds a lease on
    int64_t expires_us;         //  dropped when silent past this
};

//  Everything about one backend name ("cpu", "cuda").
struct _s_backend_t {
    char name [PROTO_MAX_STR];  //  the name
    s_joblist_t queue;          //  jobs waiting, oldest first
    s_worker_t **workers;       //  workers serving it
    size_t nworkers;            //  entries used
    size_t maxworkers;          //  entries allocated
    size_t cursor;              //  where the next scan starts (spreads ties)
};

//  Counters reported by STATS.
typedef struct {
    uint64_t submitted;         //  SUBMITs accepted
    uint64_t rejected;          //  SUBMITs refused (queue full)
    uint64_t dispatched;        //  JOBs sent
    uint64_t completed;         //  RESULTs forwarded to clients
    uint64_t requeued;          //  jobs taken back from a lost worker
    uint64_t dropped_results;   //  RESULTs not matching a current lease
    uint64_t undeliverable;     //  RESULTs whose client had gone
    uint64_t cancelled;         //  queued jobs dropped on a client's DISCONNECT
    uint64_t malformed;         //  messages that did not decode
    uint64_t workers_lost;      //  workers dropped (expiry, DISCONNECT, send failure)
} s_stats_t;

//  The broker instance, owned by the actor thread.
typedef struct {
    zsock_t *pipe;              //  actor pipe
    zsock_t *clients;           //  ROUTER for clients
    zsock_t *workers;           //  ROUTER for workers
    zpoller_t *poller;          //  pipe + both sockets
    broker_config_t cfg;        //  settings (endpoint strings borrowed until start)
    char *clients_endpoint;     //  bound, with the real port
    char *workers_endpoint;     //  bound, with the real port
    zhashx_t *jobs;             //  job id -> s_job_t (owns nothing: jobs freed by hand)
    zhashx_t *worker_table;     //  identity frame -> s_worker_t
    zhashx_t *backends;         //  name -> s_backend_t (owns them)
    uint64_t next_job;          //  next job id
    size_t queued;              //  jobs in all queues
    size_t inflight;            //  jobs leased to workers
    int64_t next_heartbeat_us;  //  when to send heartbeats and check expiry
    proto_msg_t *in;            //  message being handled
    proto_msg_t *out;           //  message being sent (fields lent, see s_send)
    s_stats_t stats;            //  counters
    bool terminated;            //  $TERM received
} s_broker_t;

static int64_t
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  --------------------------------------------------------------------------
//  Job lists

static void
s_list_push_back (s_joblist_t *list, s_job_t *job)
{
    job->prev = list->tail;
    job->next = NULL;
    if (list->tail)
        list->tail->next = job;
    else
        list->head = job;
    list->tail = job;
    list->size++;
}

static void
s_list_push_front (s_joblist_t *list, s_job_t *job)
{
    job->prev = NULL;
    job->next = list->head;
    if (list->head)
        list->head->prev = job;
    else
        list->tail = job;
    list->head = job;
    list->size++;
}

static void
s_list_remove (s_joblist_t *list, s_job_t *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        list->head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    else
        list->tail = job->prev;
    job->prev = job->next = NULL;
    list->size--;
}

//  --------------------------------------------------------------------------
//  Hash table callbacks

static size_t
s_job_hash (const void *key)
{
    return (size_t) *(const uint64_t *) key;
}

static int
s_job_compare (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y? -1: x > y? 1: 0;
}

//  FNV-1a over the routing id bytes.
static size_t
s_frame_hash (const void *key)
{
    zframe_t *frame = (zframe_t *) key;
    const uint8_t *data = zframe_data (frame);
    size_t size = zframe_size (frame);
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data [i]) * 1099511628211ull;
    return (size_t) hash;
}

static int
s_frame_compare (const void *a, const void *b)
{
    zframe_t *x = (zframe_t *) a, *y = (zframe_t *) b;
    size_t sx = zframe_size (x), sy = zframe_size (y);
    if (sx != sy)
        return sx < sy? -1: 1;
    return memcmp (zframe_data (x), zframe_data (y), sx);
}

static void
s_backend_free (void **item)
{
    s_backend_t *backend = (s_backend_t *) *item;
    if (backend) {
        free (backend->workers);
        free (backend);
        *item = NULL;
    }
}

//  --------------------------------------------------------------------------
//  Sending

//  Send self->out to a peer: the identity and body are lent, not taken.
static int
s_send (s_broker_t *self, zsock_t *sock, zframe_t *identity, zframe_t *body)
{
    self->out->routing_id = identity;
    self->out->body = body;
    int rc = proto_msg_send (self->out, sock);
    int saved = errno;
    self->out->routing_id = NULL;
    self->out->body = NULL;
    errno = saved;
    return rc;
}

static void
s_send_error (s_broker_t *self, zsock_t *sock, zframe_t *identity, uint32_t code,
              const char *reason, uint64_t ref, uint64_t job)
{
    if (!identity)
        return;
    proto_msg_reset (self->out, PROTO_ERROR);
    self->out->code = code;
    proto_msg_set_str (self->out->reason, reason);
    self->out->ref = ref;
    self->out->job = job;
    if (s_send (self, sock, identity, NULL))
        log_debug ("broker", "ERROR %u not delivered: %s", code, zmq_strerror (errno));
}

//  --------------------------------------------------------------------------
//  Jobs, backends and workers

static void
s_job_destroy (s_broker_t *self, s_job_t **job_p)
{
    s_job_t *job = *job_p;
    if (job) {
        zhashx_delete (self->jobs, &job->id);
        zframe_destroy (&job->client);
        zframe_destroy (&job->body);
        free (job);
        *job_p = NULL;
    }
}

//  The backend of that name, created on first use.
static s_backend_t *
s_backend_require (s_broker_t *self, const char *name)
{
    s_backend_t *backend = (s_backend_t *) zhashx_lookup (self->backends, name);
    if (!backend) {
        backend = (s_backend_t *) calloc (1, sizeof (s_backend_t));
        if (!backend)
            return NULL;
        proto_msg_set_str (backend->name, name);
        zhashx_insert (self->backends, name, backend);
    }
    return backend;
}

//  The worker with the most free slots, or NULL when all are full.
static s_worker_t *
s_backend_pick (s_backend_t *backend)
{
    s_worker_t *best = NULL;
    uint32_t best_free = 0;
    size_t n = backend->nworkers;
    for (size_t i = 0; i < n; i++) {
        s_worker_t *worker = backend->workers [(backend->cursor + i) % n];
        uint32_t free_slots = worker->capacity - (uint32_t) worker->jobs.size;
        if (free_slots > best_free) {
            best = worker;
            best_free = free_slots;
        }
    }
    if (best)
        backend->cursor = (best->slot + 1) % n;
    return best;
}

static void s_worker_drop (s_broker_t *self, s_worker_t *worker, const char *why);

//  Lease waiting jobs of backend to its workers while any has a free slot.
static void
s_dispatch (s_broker_t *self, s_backend_t *backend)
{
    while (backend->queue.head) {
        s_worker_t *worker = s_backend_pick (backend);
        if (!worker)
            return;
        s_job_t *job = backend->queue.head;
        s_list_remove (&backend->queue, job);
        self->queued--;
        job->attempt++;
        job->worker = worker;
        if (!job->dispatched_us)
            job->dispatched_us = s_now_us ();
        s_list_push_back (&worker->jobs, job);
        self->inflight++;

        proto_msg_reset (self->out, PROTO_JOB);
        self->out->job = job->id;
        self->out->attempt = job->attempt;
        if (s_send (self, self->workers, worker->identity, job->body) == 0) {
            self->stats.dispatched++;
            log_debug ("broker", "job %" PRIu64 " attempt %u -> %s", job->id, job->attempt,
                       worker->name);
        }
        else
            //  Gone (EHOSTUNREACH) or not reading (EAGAIN): either way it
            //  cannot hold leases. Its jobs, this one too, go back in front
            //  and the loop offers them to the others.
            s_worker_drop (self, worker, errno == EHOSTUNREACH? "unreachable": "not reading");
    }
}

static s_worker_t *
s_worker_lookup (s_broker_t *self, zframe_t *identity)
{
    return identity? (s_worker_t *) zhashx_lookup (self->worker_table, identity): NULL;
}

//  Forget a worker; every job it held goes back to the front of its queue in
//  the order it was dispatched, to be leased again with the next attempt.
//  Does not dispatch (the caller does), so a drop never frees another worker
//  under the caller's feet.
static void
s_worker_drop (s_broker_t *self, s_worker_t *worker, const char *why)
{
    s_backend_t *backend = worker->backend;
    size_t held = worker->jobs.size;
    while (worker->jobs.tail) {
        s_job_t *job = worker->jobs.tail;
        s_list_remove (&worker->jobs, job);
        job->worker = NULL;
        s_list_push_front (&backend->queue, job);
        self->inflight--;
        self->queued++;
        self->stats.requeued++;
    }
    //  Swap-remove from the backend's array.
    size_t last = backend->nworkers - 1;
    backend->workers [worker->slot] = backend->workers [last];
    backend->workers [worker->slot]->slot = worker->slot;
    backend->nworkers = last;
    if (backend->cursor >= backend->nworkers)
        backend->cursor = 0;

    zhashx_delete (self->worker_table, worker->identity);
    self->stats.workers_lost++;
    log_info ("broker", "worker %s (%s, %s) dropped: %s; %zu job(s) requeued",
              worker->name, backend->name, worker->device, why, held);
    zframe_destroy (&worker->identity);
    free (worker);
}

//  READY: register (or re-register) the sender.
static void
s_worker_ready (s_broker_t *self, proto_msg_t *msg, int64_t now)
{
    if (msg->capacity == 0 || msg->backend [0] == 0) {
        s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_MALFORMED,
                      msg->capacity == 0? "READY with capacity 0": "READY with empty backend",
                      0, 0);
        self->stats.malformed++;
        return;
    }
    s_worker_t *worker = s_worker_lookup (self, msg->routing_id);
    if (worker) {
        //  A second READY means the worker started over: its leases are void.
        s_backend_t *old_backend = worker->backend;
        s_worker_drop (self, worker, "announced itself again");
        s_dispatch (self, old_backend);
    }

    s_backend_t *backend = s_backend_require (self, msg->backend);
    worker = (s_worker_t *) calloc (1, sizeof (s_worker_t));
    if (!backend || !worker) {
        free (worker);
        s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", 0, 0);
        return;
    }
    if (backend->nworkers == backend->maxworkers) {
        size_t grown = backend->maxworkers? 2 * backend->maxworkers: 4;
        s_worker_t **workers = (s_worker_t **) realloc (backend->workers, grown * sizeof (*workers));
        if (!workers) {
            free (worker);
            s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", 0, 0);
            return;
        }
        backend->workers = workers;
        backend->maxworkers = grown;
    }
    worker->identity = msg->routing_id;
    msg->routing_id = NULL;
    memcpy (worker->name, msg->name, sizeof (worker->name));
    memcpy (worker->device, msg->device, sizeof (worker->device));
    worker->capacity = msg->capacity;
    worker->pid = msg->pid;
    worker->backend = backend;
    worker->slot = backend->nworkers;
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    backend->workers [backend->nworkers++] = worker;
    zhashx_insert (self->worker_table, worker->identity, worker);
    log_info ("broker", "worker %s ready: backend %s, device %s, capacity %u, pid %u",
              worker->name, backend->name, worker->device, worker->capacity, worker->pid);
    s_dispatch (self, backend);
}

//  RESULT from a worker: forward it if it matches the current lease.
static void
s_worker_result (s_broker_t *self, s_worker_t *worker, proto_msg_t *msg, int64_t now)
{
    s_job_t *job = (s_job_t *) zhashx_lookup (self->jobs, &msg->job);
    if (!job || job->worker != worker || job->attempt != msg->attempt) {
        //  A lease that was taken back (or never was): the job lives on elsewhere.
        self->stats.dropped_results++;
        log_info ("broker", "stale RESULT job %" PRIu64 " attempt %u from %s dropped",
                  msg->job, msg->attempt, worker->name);
        return;
    }
    s_list_remove (&worker->jobs, job);
    self->inflight--;

    proto_msg_reset (self->out, PROTO_RESULT);
    self->out->job = job->id;
    self->out->ref = job->ref;
    self->out->attempt = job->attempt;
    self->out->queue_s = (double) (job->dispatched_us - job->accepted_us) / 1e6;
    memcpy (self->out->name, worker->name, sizeof (self->out->name));
    if (s_send (self, self->clients, job->client, msg->body) == 0)
        self->stats.completed++;
    else {
        self->stats.undeliverable++;
        log_warn ("broker", "result of job %" PRIu64 " (ref %" PRIu64 ") dropped: client %s",
                  job->id, job->ref, errno == EHOSTUNREACH? "has gone": "is not reading");
    }
    s_job_destroy (self, &job);
    s_dispatch (self, worker->backend);
}

static void
s_handle_worker (s_broker_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    int rc = proto_msg_recv (msg, self->workers);
    if (rc == -1)
        return;
    if (rc == -2) {
        self->stats.malformed++;
        log_info ("broker", "malformed message from a worker: %s", msg->reason);
        s_send_error (self, self->workers, msg->routing_id, msg->code, msg->reason, 0, 0);
        return;
    }
    if (msg->cmd == PROTO_READY) {
        s_worker_ready (self, msg, now);
        return;
    }
    s_worker_t *worker = s_worker_lookup (self, msg->routing_id);
    if (!worker) {
        if (msg->cmd == PROTO_RESULT) {
            self->stats.dropped_results++;
            log_info ("broker", "RESULT job %" PRIu64 " from an unknown worker dropped", msg->job);
        }
        if (msg->cmd != PROTO_DISCONNECT)
            s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_PEER,
                          "unknown worker: send READY", 0, 0);
        return;
    }
    //  Any message is a sign of life.
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    switch (msg->cmd) {
        case PROTO_HEARTBEAT:
            break;
        case PROTO_RESULT:
            s_worker_result (self, worker, msg, now);
            break;
        case PROTO_DISCONNECT: {
            s_backend_t *backend = worker->backend;
            s_worker_drop (self, worker, msg->reason [0]? msg->reason: "disconnected");
            s_dispatch (self, backend);
            break;
        }
        case PROTO_ERROR:
            log_warn ("broker", "worker %s reports error %u: %s", worker->name, msg->code, msg->reason);
            break;
        default: {
            char why [64];
            snprintf (why, sizeof (why), "%s is not a worker command", proto_cmd_name (msg->cmd));
            self->stats.malformed++;
            s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why, 0, 0);
        }
    }
}

//  --------------------------------------------------------------------------
//  Clients

static void
s_client_submit (s_broker_t *self, proto_msg_t *msg, int64_t now)
{
    if (msg->backend [0] == 0) {
        self->stats.malformed++;
        s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_MALFORMED,
                      "SUBMIT with empty backend", msg->ref, 0);
        return;
    }
    if (self->queued >= self->cfg.max_queue) {
        self->stats.rejected++;
        s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_OVERLOADED,
                      "queue full", msg->ref, 0);
        return;
    }
    s_backend_t *backend = s_backend_require (self, msg->backend);
    s_job_t *job = (s_job_t *) calloc (1, sizeof (s_job_t));
    if (!backend || !job) {
        free (job);
        s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory",
                      msg->ref, 0);
        return;
    }
    job->id = self->next_job++;
    job->ref = msg->ref;
    job->client = msg->routing_id;
    msg->routing_id = NULL;
    job->body = proto_msg_get_body (msg);
    job->backend = backend;
    job->accepted_us = now;
    zhashx_insert (self->jobs, &job->id, job);

    proto_msg_reset (self->out, PROTO_ACCEPTED);
    self->out->ref = job->ref;
    self->out->job = job->id;
    if (s_send (self, self->clients, job->client, NULL)) {
        //  The client is gone already: nobody would take the result.
        self->stats.undeliverable++;
        s_job_destroy (self, &job);
        return;
    }
    self->stats.submitted++;
    s_list_push_back (&backend->queue, job);
    self->queued++;
    log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ", backend %s, tag '%s') accepted",
               job->id, job->ref, backend->name, msg->tag);
    s_dispatch (self, backend);
}

//  DISCONNECT from a client: its waiting jobs are dropped (running ones
//  finish; their results find nobody and are counted undeliverable).
static void
s_client_disconnect (s_broker_t *self, zframe_t *client)
{
    size_t dropped = 0;
    for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
         backend = (s_backend_t *) zhashx_next (self->backends)) {
        s_job_t *job = backend->queue.head;
        while (job) {
            s_job_t *next = job->next;
            if (zframe_eq (job->client, client)) {
                s_list_remove (&backend->queue, job);
                self->queued--;
                s_job_destroy (self, &job);
                dropped++;
            }
            job = next;
        }
    }
    self->stats.cancelled += dropped;
    log_info ("broker", "client disconnected; %zu queued job(s) dropped", dropped);
}

static void
s_handle_client (s_broker_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    int rc = proto_msg_recv (msg, self->clients);
    if (rc == -1)
        return;
    if (rc == -2) {
        self->stats.malformed++;
        log_info ("broker", "malformed message from a client: %s", msg->reason);
        s_send_error (self, self->clients, msg->routing_id, msg->code, msg->reason, 0, 0);
        return;
    }
    switch (msg->cmd) {
        case PROTO_SUBMIT:
            s_client_submit (self, msg, now);
            break;
        case PROTO_HEARTBEAT:
            proto_msg_reset (self->out, PROTO_HEARTBEAT);
            s_send (self, self->clients, msg->routing_id, NULL);
            break;
        case PROTO_DISCONNECT:
            s_client_disconnect (self, msg->routing_id);
            break;
        case PROTO_ERROR:
            log_warn ("broker", "a client reports error %u: %s", msg->code, msg->reason);
            break;
        default: {
            char why [64];
            snprintf (why, sizeof (why), "%s is not a client command", proto_cmd_name (msg->cmd));
            self->stats.malformed++;
            s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why,
                          msg->cmd == PROTO_RESULT? msg->ref: 0, 0);
        }
    }
}

//  --------------------------------------------------------------------------
//  Heartbeats and expiry

//  Every heartbeat interval: a HEARTBEAT to each worker, then drop the ones
//  silent too long (or found unreachable) and re-offer their jobs.
static void
s_heartbeat (s_broker_t *self, int64_t now)
{
    proto_msg_reset (self->out, PROTO_HEARTBEAT);
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table))
        if (s_send (self, self->workers, worker->identity, NULL) && errno == EHOSTUNREACH)
            worker->expires_us = 0;

    bool dropped = false;
    bool again = true;
    while (again) {
        //  Restart the walk after each drop: it changes the table.
        again = false;
        for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
             worker = (s_worker_t *) zhashx_next (self->worker_table))
            if (now >= worker->expires_us) {
                s_worker_drop (self, worker, worker->expires_us? "silent too long": "unreachable");
                dropped = again = true;
                break;
            }
    }
    if (dropped)
        for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
             backend = (s_backend_t *) zhashx_next (self->backends))
            s_dispatch (self, backend);
}

//  --------------------------------------------------------------------------
//  Pipe

static char *
s_stats_json (s_broker_t *self)
{
    s_stats_t *st = &self->stats;
    return zsys_sprintf (
        "{\"submitted\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"dispatched\":%" PRIu64
        ",\"completed\":%" PRIu64 ",\"requeued\":%" PRIu64 ",\"dropped_results\":%" PRIu64
        ",\"undeliverable\":%" PRIu64 ",\"cancelled\":%" PRIu64 ",\"malformed\":%" PRIu64
        ",\"workers_lost\":%" PRIu64 ",\"workers\":%zu,\"queued\":%zu,\"inflight\":%zu}",
        st->submitted, st->rejected, st->dispatched, st->completed, st->requeued,
        st->dropped_results, st->undeliverable, st->cancelled, st->malformed,
        st->workers_lost, zhashx_size (self->worker_table), self->queued, self->inflight);
}

static void
s_handle_pipe (s_broker_t *self)
{
    char *command = zstr_recv (self->pipe);
    if (!command) {
        self->terminated = true;        //  interrupted
        return;
    }
    if (streq (command, "$TERM"))
        self->terminated = true;
    else
    if (streq (command, "ENDPOINTS")) {
        zstr_sendm (self->pipe, self->clients_endpoint);
        zstr_send (self->pipe, self->workers_endpoint);
    }
    else
    if (streq (command, "STATS")) {
        char *json = s_stats_json (self);
        zstr_send (self->pipe, json? json: "{}");
        zstr_free (&json);
    }
    else
        log_warn ("broker", "unknown pipe command '%s'", command);
    zstr_free (&command);
}

//  --------------------------------------------------------------------------
//  Life cycle

static void
s_broker_destroy (s_broker_t **self_p)
{
    s_broker_t *self = *self_p;
    if (!self)
        return;
    if (self->jobs) {
        //  Jobs are reached through the table; collect ids first.
        s_job_t *job;
        while ((job = (s_job_t *) zhashx_first (self->jobs)))
            s_job_destroy (self, &job);
    }
    if (self->worker_table) {
        s_worker_t *worker;
        while ((worker = (s_worker_t *) zhashx_first (self->worker_table))) {
            zhashx_delete (self->worker_table, worker->identity);
            zframe_destroy (&worker->identity);
            free (worker);
        }
    }
    zhashx_destroy (&self->jobs);
    zhashx_destroy (&self->worker_table);
    zhashx_destroy (&self->backends);
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->clients);
    zsock_destroy (&self->workers);
    proto_msg_destroy (&self->in);
    proto_msg_destroy (&self->out);
    zstr_free (&self->clients_endpoint);
    zstr_free (&self->workers_endpoint);
    free (self);
    *self_p = NULL;
}

//  Bind a ROUTER; NULL with a reason.
static zsock_t *
s_bind (const char *endpoint, const char *what, char **bound, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new (ZMQ_ROUTER);
    if (!sock) {
        snprintf (err, errlen, "cannot create the %s socket", what);
        return NULL;
    }
    proto_sock_configure (sock, true);
    if (!endpoint || zsock_bind (sock, "%s", endpoint) == -1) {
        snprintf (err, errlen, "cannot bind %s endpoint %s: %s", what, endpoint? endpoint: "(none)",
                  zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
        return NULL;
    }
    const char *last = zsock_endpoint (sock);
    *bound = strdup (last? last: endpoint);
    return sock;
}

static s_broker_t *
s_broker_new (zsock_t *pipe, const broker_config_t *cfg, char *err, size_t errlen)
{
    s_broker_t *self = (s_broker_t *) calloc (1, sizeof (s_broker_t));
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->pipe = pipe;
    broker_config_default (&self->cfg);
    if (cfg)
        self->cfg = *cfg;
    if (self->cfg.heartbeat_ms == 0)
        self->cfg.heartbeat_ms = 1000;
    if (self->cfg.liveness == 0)
        self->cfg.liveness = 3;
    self->next_job = 1;
    self->in = proto_msg_new (0);
    self->out = proto_msg_new (0);
    self->jobs = zhashx_new ();
    self->worker_table = zhashx_new ();
    self->backends = zhashx_new ();
    if (!self->in || !self->out || !self->jobs || !self->worker_table || !self->backends) {
        snprintf (err, errlen, "out of memory");
        s_broker_destroy (&self);
        return NULL;
    }
    zhashx_set_key_hasher (self->jobs, s_job_hash);
    zhashx_set_key_comparator (self->jobs, s_job_compare);
    zhashx_set_key_duplicator (self->jobs, NULL);
    zhashx_set_key_destructor (self->jobs, NULL);
    zhashx_set_destructor (self->jobs, NULL);
    zhashx_set_key_hasher (self->worker_table, s_frame_hash);
    zhashx_set_key_comparator (self->worker_table, s_frame_compare);
    zhashx_set_key_duplicator (self->worker_table, NULL);
    zhashx_set_key_destructor (self->worker_table, NULL);
    zhashx_set_destructor (self->worker_table, NULL);
    zhashx_set_destructor (self->backends, s_backend_free);

    self->clients = s_bind (self->cfg.clients_endpoint, "clients", &self->clients_endpoint, err, errlen);
    if (!self->clients) {
        s_broker_destroy (&self);
        return NULL;
    }
    self->workers = s_bind (self->cfg.workers_endpoint, "workers", &self->workers_endpoint, err, errlen);
    if (!self->workers) {
        s_broker_destroy (&self);
        return NULL;
    }
    //  The config's strings belong to the caller, who may free them once started.
    self->cfg.clients_endpoint = self->clients_endpoint;
    self->cfg.workers_endpoint = self->workers_endpoint;
    self->poller = zpoller_new (pipe, self->clients, self->workers, NULL);
    if (!self->poller) {
        snprintf (err, errlen, "cannot create the poller");
        s_broker_destroy (&self);
        return NULL;
    }
    return self;
}

//  A start that failed still answers the pipe: ENDPOINTS gets "" and the reason.
static void
s_failed_actor (zsock_t *pipe, const char *reason)
{
    zsock_signal (pipe, 0);
    while (true) {
        char *command = zstr_recv (pipe);
        if (!command)
            return;
        bool term = streq (command, "$TERM");
        if (streq (command, "ENDPOINTS")) {
            zstr_sendm (pipe, "");
            zstr_send (pipe, reason);
        }
        else
        if (streq (command, "STATS"))
            zstr_send (pipe, "{}");
        zstr_free (&command);
        if (term)
            return;
    }
}

//  Read up to BROKER_BATCH messages from a socket; true if it may hold more.
static bool
s_drain (s_broker_t *self, zsock_t *sock, void (*handler) (s_broker_t *, int64_t))
{
    int64_t now = s_now_us ();
    for (int i = 0; i < BROKER_BATCH; i++) {
        if (!(zsock_events (sock) & ZMQ_POLLIN))
            return false;
        handler (self, now);
        if ((i & 15) == 15)
            now = s_now_us ();
    }
    return true;
}

void
broker_config_default (broker_config_t *cfg)
{
    memset (cfg, 0, sizeof (*cfg));
    cfg->clients_endpoint = "tcp://*:5555";
    cfg->workers_endpoint = "tcp://*:5556";
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
    cfg->max_queue = 100000;
}

void
broker_server_actor (zsock_t *pipe, void *args)
{
    char err [512] = "";
    s_broker_t *self = s_broker_new (pipe, (const broker_config_t *) args, err, sizeof (err));
    if (!self) {
        //  Reported through ENDPOINTS: the caller decides how to say it.
        log_debug ("broker", "%s", err);
        s_failed_actor (pipe, err);
        return;
    }
    log_debug ("broker", "clients on %s, workers on %s", self->clients_endpoint, self->workers_endpoint);
    zsock_signal (pipe, 0);

    int64_t interval_us = (int64_t) self->cfg.heartbeat_ms * 1000;
    self->next_heartbeat_us = s_now_us () + interval_us;
    while (!self->terminated) {
        int64_t now = s_now_us ();
        int timeout_ms = 0;
        if (self->next_heartbeat_us > now)
            timeout_ms = (int) ((self->next_heartbeat_us - now + 999) / 1000);
        zsock_t *which = (zsock_t *) zpoller_wait (self->poller, timeout_ms);
        if (!which && zpoller_terminated (self->poller))
            break;
        if (which == pipe)
            s_handle_pipe (self);
        //  Serve both sockets until neither has more, whoever woke us, but
        //  never past the heartbeat time: a busy broker still heartbeats.
        bool more = true;
        while (more && !self->terminated && s_now_us () < self->next_heartbeat_us) {
            more = s_drain (self, self->workers, s_handle_worker);
            more = s_drain (self, self->clients, s_handle_client) || more;
            if (zsock_events (pipe) & ZMQ_POLLIN)
                s_handle_pipe (self);
        }
        now = s_now_us ();
        if (now >= self->next_heartbeat_us) {
            s_heartbeat (self, now);
            self->next_heartbeat_us = now + interval_us;
        }
    }
    s_broker_destroy (&self);
}
