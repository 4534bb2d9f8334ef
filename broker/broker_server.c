/*  broker_server - the broker: routes jobs from clients to capable workers.

    One thread, two ROUTER sockets, no blocking call. A job lives in exactly
    one list at a time: its backend's queue while it waits, the list of the
    worker that holds its lease while it runs, or the finished list while
    its result is kept. That makes every step O(1) except picking a worker
    (a scan of that backend's few workers) and FETCH by tag (a scan of the
    kept results):
        SUBMIT   -> job table + store row + backend queue; ACCEPTED deferred
        batch end-> commit the store, send the deferred ACCEPTEDs, dispatch
        dispatch -> queue head to the least-loaded ready worker, JOB (attempt+1)
        RESULT   -> lease check (job, attempt, worker), store, RESULT to the
                    client, job to the finished list
        expiry   -> the worker's jobs back to the front of their queue, or
                    failed when they have lost max_attempts workers
    A batch is what one wakeup reads (up to 256 messages per socket): its
    store writes are one transaction, and no JOB leaves before the
    transaction that stored it commits and its ACCEPTED is out, so a client
    always sees ACCEPTED first and every acknowledged job is on disk.
    Bodies and routing ids are moved between messages, never copied; a JOB
    resend shares the body's bytes (zmq_msg_copy). Spec: docs/protocol.md.
*/
#include "broker_server.h"
#include "broker_store.h"
#include "broker_auth.h"
#include "broker_cache.h"
#include "broker_tasks.h"
#include "broker_groups.h"
#include "broker_trajectories.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "proto_curve.h"
#include "common_log.h"
#include "common_notify.h"
#include "common_util.h"
#include <time.h>
#include <math.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <inttypes.h>

#define BROKER_BATCH 256        //  messages read from one socket before looking at the others
#define BROKER_NAME "kgym-broker"   //  the "worker" of a result the broker makes itself

typedef struct _s_job_t s_job_t;
typedef struct _s_worker_t s_worker_t;
typedef struct _s_backend_t s_backend_t;
typedef struct _s_client_t s_client_t;

//  An intrusive doubly linked list of jobs.
typedef struct {
    s_job_t *head;              //  first, or NULL
    s_job_t *tail;              //  last, or NULL
    size_t size;                //  jobs in the list
} s_joblist_t;

typedef enum {
    JOB_QUEUED,                 //  in its backend's queue
    JOB_RUNNING,                //  leased: in its worker's list
    JOB_DONE,                   //  result kept (or cancelled): in the finished list
    JOB_FOLLOWING               //  an identical job runs: in that one's followers
} s_job_state_t;

static const char *s_job_states [] = { "queued", "running", "done", "following" };

//  Result cache policies (SUBMIT's cache).
enum { S_CACHE_USE, S_CACHE_REFRESH, S_CACHE_BYPASS };

//  One accepted job, from SUBMIT until its result is retired.
struct _s_job_t {
    uint64_t id;                //  broker's job id (key in the job table)
    uint64_t ref;               //  client's reference (key in the client's refs)
    uint32_t attempt;           //  dispatches so far; the lease is (id, attempt, worker)
    uint32_t lost;              //  leases lost with their worker (poison counter)
    s_job_state_t state;        //  which list it is in
    bool fresh;                 //  stored in the open transaction, not committed yet
    s_client_t *client;         //  who submitted it
    zframe_t *body;             //  the job as submitted (owned, sent untouched; NULL once done)
    zframe_t *result;           //  memory mode: the result once done (with a store: on disk)
    char *tag;                  //  header tag, or NULL
    char *graded_by;            //  once done: the worker's name
    s_backend_t *backend;       //  queue it belongs to
    s_worker_t *worker;         //  lease holder while running
    int64_t accepted_us;        //  wall clock, when it was accepted
    int64_t dispatched_us;      //  wall clock, first dispatch (0 = never)
    int64_t leased_us;          //  wall clock, latest dispatch (0 = never)
    char status [16];           //  once done: the result's status from the RESULT header, or ""
    int64_t finished_us;        //  wall clock, when the result came
    double queue_s;             //  once done: accepted to first dispatch
    s_job_t *prev, *next;       //  links in the list of its state
    char *task;                 //  the task's name from the body, or NULL
    char *group;                //  header group, or NULL
    char *trajectory;           //  header trajectory, or NULL
    char *body_tag;             //  the body's tag (what results echo), or NULL
    uint8_t key [BROKER_CACHE_KEY_BYTES];   //  result cache key, when keyed
    bool keyed;                 //  the body decoded as a job and was keyed
    bool leads;                 //  in the leaders table under its key
    uint8_t policy;             //  S_CACHE_*
    bool cancelled;             //  its client gave it up: no RESULT goes out
    bool cached;                //  answered from the cache or by the job it followed
    s_job_t *leader;            //  JOB_FOLLOWING: the job whose result it takes
    s_joblist_t followers;      //  jobs following this one
    double reward, speedup;     //  once done: from the result (NAN: null)
};

typedef enum {
    WORKER_READY,               //  takes jobs
    WORKER_DRAINING,            //  finishes its leases, takes no new ones
    WORKER_QUARANTINED          //  says its device is unfit: takes nothing
} s_worker_state_t;

static const char *s_state_names [] = { "ready", "draining", "quarantined" };

//  What an operator sees of a worker: kgym_workers{state}, QUERY stats and workers.
enum { S_IDLE, S_BUSY, S_DRAINING, S_QUARANTINED, S_KINDS };
static const char *s_kind_names [] = { "idle", "busy", "draining", "quarantined" };

//  One registered worker.
struct _s_worker_t {
    zframe_t *identity;         //  routing id (owned; key in the worker table)
    char name [PROTO_MAX_STR];  //  from READY
    char device [PROTO_MAX_STR];//  from READY
    char host [PROTO_MAX_STR];  //  from READY ("" when not said)
    char model [PROTO_MAX_STR]; //  device without its PCI bus id: the result cache's device
    uint64_t done;              //  results it returned
    uint64_t faults;            //  of which runtime_error or timeout, plus quarantines
    int64_t since_us;           //  READY (monotonic)
    int64_t heard_us;           //  last message (monotonic)
    uint32_t capacity;          //  concurrent jobs it takes
    uint32_t pid;               //  its process id, for logs
    s_worker_state_t state;     //  from READY / HEARTBEAT, or DRAIN
    s_backend_t *backend;       //  what it serves
    size_t slot;                //  index in backend->workers
    s_joblist_t jobs;           //  jobs it holds a lease on
    int64_t expires_us;         //  dropped when silent past this (monotonic)
};

static int
s_worker_kind (const s_worker_t *worker)
{
    return worker->state == WORKER_DRAINING? S_DRAINING:
           worker->state == WORKER_QUARANTINED? S_QUARANTINED:
           worker->jobs.size? S_BUSY: S_IDLE;
}

//  Everything about one backend name ("cpu", "cuda").
struct _s_backend_t {
    char name [PROTO_MAX_STR];  //  the name
    s_joblist_t queue;          //  jobs waiting, oldest first
    s_worker_t **workers;       //  workers serving it
    size_t nworkers;            //  entries used
    size_t maxworkers;          //  entries allocated
    size_t cursor;              //  where the next scan starts (spreads ties)
    char last_device [PROTO_MAX_STR];   //  device of the last worker that served it
};

//  A submitter: named by the id it sends (stable across reconnects), or by
//  its connection when it sends none.
struct _s_client_t {
    char *key;                  //  [CURVE key "/"] client id; NULL: anonymous
    zframe_t *identity;         //  its current routing id (owned), NULL: unreachable now
    zhashx_t *refs;             //  named: ref -> newest job with that ref
    size_t jobs;                //  jobs that point here, any state
    size_t unfinished;          //  of which queued or running
};

//  Counters reported by STATS.
typedef struct {
    uint64_t submitted;         //  SUBMITs accepted as new jobs
    uint64_t resubmitted;       //  SUBMITs of a (client, ref) known already: answered again
    uint64_t rejected;          //  SUBMITs refused (queue or client limit, store error)
    uint64_t dispatched;        //  JOBs sent
    uint64_t completed;         //  jobs finished (results stored / forwarded)
    uint64_t failed;            //  of which failed by the broker (lost too many workers)
    uint64_t requeued;          //  leases taken back from a lost worker
    uint64_t dropped_results;   //  RESULTs not matching a current lease
    uint64_t undeliverable;     //  messages a client could not take (results stay kept)
    uint64_t resent;            //  kept results sent again (FETCH, resubmit)
    uint64_t cancelled;         //  queued jobs dropped on a client's DISCONNECT
    uint64_t malformed;         //  messages that did not decode
    uint64_t unauthorized;      //  messages without an approved key (CURVE on)
    uint64_t workers_lost;      //  workers dropped (expiry, send failure, DISCONNECT with leases)
    uint64_t workers_left;      //  workers that left with no lease (drained)
    uint64_t store_errors;      //  failed writes or commits of the store
    uint64_t cache_hits;        //  SUBMITs answered from the result cache
    uint64_t coalesced;         //  SUBMITs that followed an identical job
    uint64_t statuses [8];      //  completed, by s_result_statuses index (7: unknown)
} s_stats_t;

#define S_RATE_SECONDS 60       //  completions per second, for the last minute

//  A reply held until the batch's transaction commits: an ACCEPTED, or an
//  ERROR that must not overtake the ACCEPTEDs before it.
typedef struct {
    uint64_t job;               //  ACCEPTED: job id (looked up again: it may be gone)
    bool resend;                //  ACCEPTED: also send its kept result (resubmit of a finished job)
    bool new_job;               //  ACCEPTED: of a new job (not a resubmit)
    zframe_t *identity;         //  ERROR: to whom (owned); NULL for an ACCEPTED
    uint64_t ref;               //  ERROR: about which ref
    uint32_t code;              //  ERROR: code
    char *reason;               //  ERROR: reason (owned)
} s_deferred_t;

//  The broker instance, owned by the actor thread.
typedef struct {
    zsock_t *pipe;              //  actor pipe
    zsock_t *clients;           //  ROUTER for clients
    zsock_t *workers;           //  ROUTER for workers
    zpoller_t *poller;          //  pipe + both sockets
    zactor_t *auth;             //  ZAP handler when CURVE is on
    broker_store_t *store;      //  durable store, or NULL (memory only)
    broker_config_t cfg;        //  settings (strings borrowed until start)
    char *clients_endpoint;     //  bound, with the real port
    char *workers_endpoint;     //  bound, with the real port
    zhashx_t *jobs;             //  job id -> s_job_t (owns nothing: jobs freed by hand)
    zhashx_t *worker_table;     //  identity frame -> s_worker_t
    zhashx_t *backends;         //  name -> s_backend_t (owns them)
    zhashx_t *clients_by_key;   //  key -> named s_client_t
    zhashx_t *clients_by_id;    //  identity frame -> s_client_t it is bound to
    s_client_t *orphans;        //  owner of stored jobs of anonymous clients after a restart
    s_joblist_t finished;       //  done jobs, oldest first (retention)
    s_deferred_t *deferred;     //  ACCEPTEDs waiting for the commit
    size_t ndeferred;           //  entries used
    size_t maxdeferred;         //  entries allocated
    uint64_t next_job;          //  next job id
    size_t queued;              //  jobs in all queues
    size_t following;           //  jobs following an identical one (count against max_queue too)
    size_t inflight;            //  jobs leased to workers
    bool dispatch_due;          //  something may be dispatchable at the batch end
    int64_t next_heartbeat_us;  //  when to send heartbeats and check expiry
    proto_msg_t *in;            //  message being handled
    proto_msg_t *out;           //  message being sent (fields lent, see s_send)
    s_stats_t stats;            //  counters
    common_metrics_broker_t m;  //  Prometheus figures (all NULL without metrics: no-ops)
    bool metrics;               //  cfg.metrics was given: refresh the gauges each turn
    int64_t next_status_us;     //  sd_notify: next STATUS line (monotonic)
    int64_t next_watchdog_us;   //  sd_notify: next WATCHDOG=1 (monotonic), 0 = no watchdog
    int64_t watchdog_us;        //  sd_notify: half of $WATCHDOG_USEC
    bool terminated;            //  $TERM received
    broker_cache_t *cache;      //  result cache (section 14.1)
    zhashx_t *leaders;          //  cache key -> the "use" job in flight with it
    broker_tasks_t *tasks;      //  per-task statistics (14.5)
    broker_groups_t *groups;    //  GRPO groups (14.4)
    broker_trajectories_t *trajectories;    //  multi-turn tools' state (14.6)
    zlist_t *summaries;         //  SUMMARYs to send at the batch end (zmsg_t: identity, group, body)
    int64_t started_us;         //  monotonic, at start
    int64_t next_tasks_flush_us;//  monotonic: when task statistics are written next
    uint32_t rate [S_RATE_SECONDS];         //  completions in each second
    int64_t rate_second [S_RATE_SECONDS];   //  which second each bucket holds
} s_broker_t;

//  The result statuses of docs/results.md: the values kgym_jobs_completed_total
//  takes (anything else counts as "unknown", so a peer cannot grow the family).
static const char *s_result_statuses [] = {
    "ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid", "internal_error"
};

static const char *
s_status_label (const char *status)
{
    for (size_t i = 0; i < sizeof s_result_statuses / sizeof s_result_statuses [0]; i++)
        if (streq (status, s_result_statuses [i]))
            return s_result_statuses [i];
    return "unknown";
}

//  A STATS counter and its Prometheus twin.
static void
s_bump (uint64_t *counter, common_metric_t *metric)
{
    (*counter)++;
    common_metric_inc (metric);
}

static int64_t
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  Wall clock: what is stored and compared across restarts.
static int64_t
s_wall_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
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
s_u64_hash (const void *key)
{
    uint64_t x = *(const uint64_t *) key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t) x;
}

static int
s_u64_compare (const void *a, const void *b)
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

//  A table that owns neither keys nor items.
static zhashx_t *
s_table_new (zhashx_hash_fn *hasher, zhashx_comparator_fn *comparator)
{
    zhashx_t *table = zhashx_new ();
    if (table) {
        if (hasher)
            zhashx_set_key_hasher (table, hasher);
        if (comparator)
            zhashx_set_key_comparator (table, comparator);
        zhashx_set_key_duplicator (table, NULL);
        zhashx_set_key_destructor (table, NULL);
        zhashx_set_destructor (table, NULL);
    }
    return table;
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
    if (s_send (self, sock, identity, NULL)) {
        if (sock == self->clients)
            s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        log_debug ("broker", "ERROR %u not delivered: %s", code, zmq_strerror (errno));
    }
}

//  --------------------------------------------------------------------------
//  Clients

static s_client_t *
s_client_new (const char *key)
{
    s_client_t *client = (s_client_t *) calloc (1, sizeof (s_client_t));
    if (!client)
        return NULL;
    if (key) {
        client->key = strdup (key);
        client->refs = s_table_new (s_u64_hash, s_u64_compare);
        if (!client->key || !client->refs) {
            free (client->key);
            zhashx_destroy (&client->refs);
            free (client);
            return NULL;
        }
    }
    return client;
}

//  Forget the client's routing id (it went away, or another client took it).
static void
s_client_unbind (s_broker_t *self, s_client_t *client)
{
    if (client->identity) {
        if (zhashx_lookup (self->clients_by_id, client->identity) == client)
            zhashx_delete (self->clients_by_id, client->identity);
        zframe_destroy (&client->identity);
    }
}

//  Free a client nothing refers to any more.
static void
s_client_release (s_broker_t *self, s_client_t *client)
{
    if (!client || client->jobs > 0 || client == self->orphans)
        return;
    s_client_unbind (self, client);
    if (client->key)
        zhashx_delete (self->clients_by_key, client->key);
    zhashx_destroy (&client->refs);
    free (client->key);
    free (client);
}

//  From now on, results for client go to this routing id.
static void
s_client_bind (s_broker_t *self, s_client_t *client, zframe_t *identity)
{
    if (!identity || (client->identity && zframe_eq (client->identity, identity)))
        return;
    s_client_unbind (self, client);
    s_client_t *other = (s_client_t *) zhashx_lookup (self->clients_by_id, identity);
    if (other) {
        //  The same connection spoke for another client before: it is this one now.
        s_client_unbind (self, other);
        s_client_release (self, other);
    }
    client->identity = zframe_dup (identity);
    if (client->identity)
        zhashx_insert (self->clients_by_id, client->identity, client);
}

//  The client key of a message: its client id, in the namespace of its key.
static char *
s_client_key (const proto_msg_t *msg)
{
    if (!msg->client [0])
        return NULL;
    if (msg->user_id [0])
        return zsys_sprintf ("%s/%s", msg->user_id, msg->client);
    return strdup (msg->client);
}

//  The named client of this key (created when create), or NULL.
static s_client_t *
s_client_named (s_broker_t *self, const char *key, bool create)
{
    s_client_t *client = (s_client_t *) zhashx_lookup (self->clients_by_key, key);
    if (!client && create) {
        client = s_client_new (key);
        if (client)
            zhashx_insert (self->clients_by_key, client->key, client);
    }
    return client;
}

//  --------------------------------------------------------------------------
//  Jobs and backends

//  Free a job that is in no list any more.
static void
s_job_destroy (s_broker_t *self, s_job_t **job_p)
{
    s_job_t *job = *job_p;
    if (!job)
        return;
    //  Followers are in no other list: they go with it (only at shutdown).
    while (job->followers.head) {
        s_job_t *follower = job->followers.head;
        s_list_remove (&job->followers, follower);
        follower->leader = NULL;
        s_job_destroy (self, &follower);
    }
    if (job->leads) {
        zhashx_delete (self->leaders, job->key);
        job->leads = false;
    }
    zhashx_delete (self->jobs, &job->id);
    s_client_t *client = job->client;
    if (client) {
        if (client->refs && zhashx_lookup (client->refs, &job->ref) == job)
            zhashx_delete (client->refs, &job->ref);
        if (job->state != JOB_DONE)
            client->unfinished--;
        client->jobs--;
        s_client_release (self, client);
    }
    zframe_destroy (&job->body);
    zframe_destroy (&job->result);
    free (job->tag);
    free (job->graded_by);
    free (job->task);
    free (job->group);
    free (job->trajectory);
    free (job->body_tag);
    free (job);
    *job_p = NULL;
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

//  The ready worker with the most free slots, or NULL when none has one.
static s_worker_t *
s_backend_pick (s_backend_t *backend)
{
    s_worker_t *best = NULL;
    uint32_t best_free = 0;
    size_t n = backend->nworkers;
    for (size_t i = 0; i < n; i++) {
        s_worker_t *worker = backend->workers [(backend->cursor + i) % n];
        if (worker->state != WORKER_READY || worker->jobs.size >= worker->capacity)
            continue;
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

//  --------------------------------------------------------------------------
//  What the broker knows of a job (docs/protocol.md section 14)

#define BROKER_CACHE_NAME "cache"   //  "worker" of a result answered from the cache

static size_t
s_key_hash (const void *key)
{
    size_t hash;
    memcpy (&hash, key, sizeof hash);
    return hash;
}

static int
s_key_compare (const void *a, const void *b)
{
    return memcmp (a, b, BROKER_CACHE_KEY_BYTES);
}

//  The name a client's groups live under.
static void
s_owner (const s_client_t *client, char *owner, size_t size)
{
    if (client->key)
        snprintf (owner, size, "%s", client->key);
    else
        snprintf (owner, size, "anonymous:%p", (const void *) client);
}

//  The task's name and, unless the job bypasses the cache, its key. A body
//  that does not decode is the worker's to call invalid: no key, no name.
static void
s_job_describe (s_broker_t *self, s_job_t *job, zframe_t *body)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    //  A real job is a few hundred values; a body built to cost the broker's
    //  one thread time and memory is simply not keyed (its worker judges it).
    limits.max_total = 1 << 16;
    char err [256];
    json_t *doc = proto_mpk_decode (zframe_data (body), zframe_size (body), &limits, err, sizeof err);
    if (!doc)
        return;
    const char *name = json_string_value (json_object_get (json_object_get (doc, "task"), "name"));
    if (name && *name)
        job->task = strndup (name, PROTO_MAX_STR - 1);
    const char *tag = json_string_value (json_object_get (doc, "tag"));
    if (tag)
        job->body_tag = strdup (tag);
    if (job->policy != S_CACHE_BYPASS && broker_cache_enabled (self->cache)
    &&  broker_cache_key (doc, job->backend->name, job->key, err, sizeof err) == 0)
        job->keyed = true;
    json_decref (doc);
}

//  The device model of a worker's device text: "NVIDIA H200 (sm_90,
//  0000:00:06.0)" is "NVIDIA H200 (sm_90)", so every board of a model
//  shares cached results; other texts stay as they are.
static void
s_device_model (const char *device, char model [PROTO_MAX_STR])
{
    proto_msg_set_str (model, device);
    size_t len = strlen (model);
    char *open = strrchr (model, '(');
    char *comma = strrchr (model, ',');
    if (len > 0 && model [len - 1] == ')' && open && comma && comma > open)
        strcpy (comma, ")");
}

//  A kept result for the job, from a device that serves its backend now
//  (or that served it last when none does); counts a hit or a miss.
static zframe_t *
s_cache_lookup (s_broker_t *self, s_job_t *job)
{
    s_backend_t *backend = job->backend;
    const char *device = NULL;
    for (size_t i = 0; i < backend->nworkers && !device; i++)
        if (broker_cache_has (self->cache, job->key, backend->workers [i]->model))
            device = backend->workers [i]->model;
    if (!device && backend->nworkers == 0 && backend->last_device [0])
        device = backend->last_device;
    return broker_cache_get (self->cache, job->key, device? device: "");
}

//  A "use" job in flight is the one identical "use" jobs follow.
static void
s_lead (s_broker_t *self, s_job_t *job)
{
    if (job->keyed && job->policy == S_CACHE_USE && !zhashx_lookup (self->leaders, job->key)) {
        zhashx_insert (self->leaders, job->key, job);
        job->leads = true;
    }
}

static void
s_unlead (s_broker_t *self, s_job_t *job)
{
    if (job->leads) {
        zhashx_delete (self->leaders, job->key);
        job->leads = false;
    }
}

//  What the broker reads of a result: read once per evaluation, handed to
//  every job that takes that result.
typedef struct {
    char status [16];           //  a docs/results.md status, "unknown", or "" when unreadable
    double reward, speedup;     //  NAN: null
} s_verdict_t;

static void
s_verdict_of (json_t *doc, s_verdict_t *verdict)
{
    verdict->status [0] = 0;
    verdict->reward = verdict->speedup = NAN;
    const char *value = json_string_value (json_object_get (doc, "status"));
    if (value)
        snprintf (verdict->status, sizeof verdict->status, "%s", s_status_label (value));
    json_t *number = json_object_get (doc, "reward");
    if (json_is_number (number))
        verdict->reward = json_number_value (number);
    number = json_object_get (doc, "speedup");
    if (json_is_number (number))
        verdict->speedup = json_number_value (number);
}

//  The verdict of a result body; status: the RESULT header's, which wins
//  when said ("" or NULL: the body's).
static void
s_verdict_read (zframe_t *result, const char *status, s_verdict_t *verdict)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    char err [128];
    json_t *doc = proto_mpk_decode (zframe_data (result), zframe_size (result), &limits, err,
                                    sizeof err);
    s_verdict_of (doc, verdict);
    json_decref (doc);
    if (status && *status)
        snprintf (verdict->status, sizeof verdict->status, "%s", s_status_label (status));
}

//  A job of a group ended: when that ends the group, its SUMMARY waits for
//  the batch end (after the ACCEPTEDs and results it sums up).
static void
s_group_end (s_broker_t *self, s_job_t *job, bool counted)
{
    if (!job->group || !self->groups)
        return;
    char owner [PROTO_MAX_STR + 64];
    s_owner (job->client, owner, sizeof owner);
    json_t *summary = broker_groups_finish (self->groups, owner, job->group, job->id, job->status,
                                            job->reward, counted);
    if (!summary)
        return;
    char *data = NULL;
    size_t size = 0;
    if (job->client->identity && proto_mpk_encode (summary, &data, &size) == 0) {
        zmsg_t *entry = zmsg_new ();
        if (entry) {
            zframe_t *identity = zframe_dup (job->client->identity);
            zmsg_append (entry, &identity);
            zmsg_addstr (entry, job->group);
            zmsg_addmem (entry, data, size);
            zlist_append (self->summaries, entry);
        }
    }
    free (data);
    json_decref (summary);
}

//  Send the SUMMARYs of groups that ended in this batch.
static void
s_send_summaries (s_broker_t *self)
{
    zmsg_t *entry;
    while ((entry = (zmsg_t *) zlist_pop (self->summaries))) {
        zframe_t *identity = zmsg_pop (entry);
        char *group = zmsg_popstr (entry);
        zframe_t *body = zmsg_pop (entry);
        proto_msg_reset (self->out, PROTO_SUMMARY);
        proto_msg_set_str (self->out->group, group);
        if (identity && body && s_send (self, self->clients, identity, body))
            log_debug ("broker", "SUMMARY of group '%s' not delivered", group);
        zframe_destroy (&identity);
        zframe_destroy (&body);
        zstr_free (&group);
        zmsg_destroy (&entry);
    }
}

//  Count one completion in its second, for rate_10s and rate_1m.
static void
s_rate_count (s_broker_t *self)
{
    int64_t second = s_now_us () / 1000000;
    size_t i = (size_t) (second % S_RATE_SECONDS);
    if (self->rate_second [i] != second) {
        self->rate_second [i] = second;
        self->rate [i] = 0;
    }
    self->rate [i]++;
}

static double
s_rate (s_broker_t *self, int seconds)
{
    int64_t now = s_now_us () / 1000000;
    uint64_t sum = 0;
    for (size_t i = 0; i < S_RATE_SECONDS; i++)
        if (self->rate_second [i] > now - seconds && self->rate_second [i] <= now)
            sum += self->rate [i];
    return (double) sum / seconds;
}

static size_t
s_status_index (const char *status)
{
    for (size_t i = 0; i < 7; i++)
        if (streq (status, s_result_statuses [i]))
            return i;
    return 7;
}

//  Send a job's result (body lent) to its client, if it can be reached.
//  The result stays kept either way. 0 or -1.
static int
s_send_result (s_broker_t *self, s_job_t *job, zframe_t *body, zframe_t *to)
{
    s_client_t *client = job->client;
    zframe_t *identity = to? to: client? client->identity: NULL;
    if (!identity) {
        s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        return -1;
    }
    proto_msg_reset (self->out, PROTO_RESULT);
    self->out->job = job->id;
    self->out->ref = job->ref;
    self->out->attempt = job->attempt;
    self->out->queue_s = job->queue_s;
    proto_msg_set_str (self->out->name, job->graded_by? job->graded_by: BROKER_NAME);
    proto_msg_set_str (self->out->status, job->status);
    if (s_send (self, self->clients, identity, body) == 0)
        return 0;
    s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
    log_info ("broker", "result of job %" PRIu64 " (ref %" PRIu64 ") kept: client %s", job->id,
              job->ref, errno == EHOSTUNREACH? "has gone": "is not reading");
    if (errno == EHOSTUNREACH && client && identity == client->identity)
        s_client_unbind (self, client);
    return -1;
}

//  Send a finished job's kept result again (to the given routing id). 0 or -1.
static int
s_resend_result (s_broker_t *self, s_job_t *job, zframe_t *to)
{
    zframe_t *loaded = NULL;
    zframe_t *body = job->result;
    if (!body && self->store)
        body = loaded = broker_store_result (self->store, job->id);
    if (!body) {
        log_warn ("broker", "result of job %" PRIu64 " is not in the store", job->id);
        return -1;
    }
    int rc = s_send_result (self, job, body, to);
    zframe_destroy (&loaded);
    if (rc == 0)
        self->stats.resent++;
    return rc;
}

//  The job is finished with this result (taken) and its verdict: keep it,
//  tell the client (unless send is false: a resend after the batch commits
//  does, or it was cancelled), then its followers. device: the grader's,
//  when a worker graded it, so the result may be cached; NULL for results
//  the broker made.
static void
s_job_finish (s_broker_t *self, s_job_t *job, zframe_t **result_p, const char *graded_by,
              const s_verdict_t *verdict, const char *device, bool send)
{
    zframe_t *result = *result_p;
    *result_p = NULL;
    job->state = JOB_DONE;
    job->worker = NULL;
    job->client->unfinished--;
    job->finished_us = s_wall_us ();
    snprintf (job->status, sizeof job->status, "%s", verdict->status);
    job->reward = verdict->reward;
    job->speedup = verdict->speedup;
    common_metric_inc (self->m.jobs_completed, job->status [0]? job->status: "unknown");
    self->stats.statuses [s_status_index (job->status)]++;
    s_rate_count (self);
    if (job->leased_us)
        common_metric_observe (self->m.job_duration,
                               (double) (job->finished_us - job->leased_us) / 1e6, "lease");
    common_metric_observe (self->m.job_duration,
                           (double) (job->finished_us - job->accepted_us) / 1e6, "total");
    job->queue_s = job->dispatched_us? (double) (job->dispatched_us - job->accepted_us) / 1e6: 0;
    free (job->graded_by);
    job->graded_by = strdup (graded_by);
    zframe_destroy (&job->body);
    if (self->store
    &&  broker_store_finish (self->store, job->id, job->attempt, job->lost, zframe_data (result),
                             zframe_size (result), graded_by, job->queue_s, job->finished_us))
        self->stats.store_errors++;
    if (device && job->keyed && job->policy != S_CACHE_BYPASS
    &&  broker_cache_status_cacheable (job->status))
        broker_cache_put (self->cache, job->key, device, zframe_data (result), zframe_size (result));
    if (job->task && self->tasks)
        broker_tasks_record (self->tasks, job->task, job->status, job->reward, job->speedup);
    s_group_end (self, job, true);
    if (send && !job->cancelled)
        s_send_result (self, job, result, NULL);
    s_list_push_back (&self->finished, job);
    self->stats.completed++;

    //  Jobs that followed this one take its result, marked as not their own.
    s_unlead (self, job);
    while (job->followers.head) {
        s_job_t *follower = job->followers.head;
        s_list_remove (&job->followers, follower);
        follower->leader = NULL;
        follower->cached = true;
        self->following--;
        json_t *tag = follower->body_tag? json_string (follower->body_tag): json_null ();
        zframe_t *copy = broker_cache_mark (zframe_data (result), zframe_size (result), true, tag,
                                            NULL);
        json_decref (tag);
        if (!copy)
            copy = zframe_dup (result);
        if (copy)
            s_job_finish (self, follower, &copy, graded_by, verdict, NULL, true);
        zframe_destroy (&copy);
    }
    if (self->store)
        zframe_destroy (&result);
    else
        job->result = result;
}

//  The client gave the job up. A queued job with no followers, or a
//  following one, ends now without a result; a running one (or one that
//  others follow) runs on for them, the cache and the statistics, and its
//  result goes to no one.
static void
s_job_cancel (s_broker_t *self, s_job_t *job)
{
    job->cancelled = true;
    self->stats.cancelled++;
    common_metric_inc (self->m.jobs_cancelled);
    if (job->state == JOB_RUNNING || (job->state == JOB_QUEUED && job->followers.size))
        return;
    if (job->state == JOB_QUEUED) {
        s_list_remove (&job->backend->queue, job);
        self->queued--;
        s_unlead (self, job);
    }
    else
    if (job->state == JOB_FOLLOWING && job->leader) {
        s_list_remove (&job->leader->followers, job);
        job->leader = NULL;
        self->following--;
    }
    if (self->store && broker_store_delete (self->store, job->id))
        self->stats.store_errors++;
    job->state = JOB_DONE;
    job->client->unfinished--;
    job->finished_us = s_wall_us ();
    zframe_destroy (&job->body);
    s_group_end (self, job, false);
    s_list_push_back (&self->finished, job);
}

//  Take a job that is not leased out of the list that holds it; its
//  followers, if any, are queued on their own.
static void
s_job_unlink (s_broker_t *self, s_job_t *job)
{
    if (job->state == JOB_QUEUED) {
        s_list_remove (&job->backend->queue, job);
        self->queued--;
    }
    else
    if (job->state == JOB_FOLLOWING && job->leader) {
        s_list_remove (&job->leader->followers, job);
        job->leader = NULL;
        self->following--;
    }
    else
    if (job->state == JOB_DONE)
        s_list_remove (&self->finished, job);
    s_unlead (self, job);
    while (job->followers.head) {
        s_job_t *follower = job->followers.head;
        s_list_remove (&job->followers, follower);
        follower->leader = NULL;
        follower->state = JOB_QUEUED;
        s_list_push_back (&follower->backend->queue, follower);
        self->queued++;
        self->following--;
        s_lead (self, follower);
    }
}

//  A job that lost max_attempts workers: it is failed, not retried again.
static void
s_job_fail (s_broker_t *self, s_job_t *job)
{
    char message [128];
    snprintf (message, sizeof (message), "worker lost %u times while running this job", job->lost);
    json_t *json = json_pack ("{s:s, s:n, s:n, s:s}", "status", "internal_error", "reward",
                              "speedup", "message", message);
    char *data = NULL;
    size_t size = 0;
    zframe_t *result = NULL;
    if (json && proto_mpk_encode (json, &data, &size) == 0)
        result = zframe_new (data, size);
    free (data);
    json_decref (json);
    if (!result)
        result = zframe_new ("\x80", 1);        //  out of memory: an empty map still answers
    self->stats.failed++;
    log_warn ("broker", "job %" PRIu64 " (ref %" PRIu64 ") failed: %s", job->id, job->ref, message);
    s_verdict_t verdict = { "internal_error", NAN, NAN };
    s_job_finish (self, job, &result, BROKER_NAME, &verdict, NULL, true);
    zframe_destroy (&result);
}

static void s_worker_drop (s_broker_t *self, s_worker_t *worker, const char *why, bool lost,
                           s_job_t *unsent);

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
        job->state = JOB_RUNNING;
        job->worker = worker;
        job->leased_us = s_wall_us ();
        if (!job->dispatched_us) {
            job->dispatched_us = job->leased_us;
            common_metric_observe (self->m.queue_wait,
                                   (double) (job->dispatched_us - job->accepted_us) / 1e6,
                                   backend->name);
        }
        s_list_push_back (&worker->jobs, job);
        self->inflight++;

        proto_msg_reset (self->out, PROTO_JOB);
        self->out->job = job->id;
        self->out->attempt = job->attempt;
        if (s_send (self, self->workers, worker->identity, job->body) == 0) {
            self->stats.dispatched++;
            common_metric_inc (self->m.jobs_dispatched, backend->name);
            log_debug ("broker", "job %" PRIu64 " attempt %u -> %s", job->id, job->attempt,
                       worker->name);
        }
        else
            //  Gone (EHOSTUNREACH) or not reading (EAGAIN): either way it
            //  cannot hold leases. Its jobs, this one too, go back in front
            //  and the loop offers them to the others; this one never
            //  reached it, so it is not counted against the job.
            s_worker_drop (self, worker, errno == EHOSTUNREACH? "unreachable": "not reading",
                           true, job);
    }
}

static void
s_dispatch_all (s_broker_t *self)
{
    self->dispatch_due = false;
    for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
         backend = (s_backend_t *) zhashx_next (self->backends))
        if (backend->queue.head && backend->nworkers)
            s_dispatch (self, backend);
}

//  --------------------------------------------------------------------------
//  Workers

static s_worker_t *
s_worker_lookup (s_broker_t *self, zframe_t *identity)
{
    return identity? (s_worker_t *) zhashx_lookup (self->worker_table, identity): NULL;
}

//  Forget a worker; every job it held goes back to the front of its queue in
//  the order it was dispatched, to be leased again with the next attempt.
//  lost: it vanished (expiry, failed send), which counts against each job it
//  held (but unsent, whose JOB never left); a job that has lost
//  max_attempts workers is failed instead. Does not dispatch (the batch end
//  does), so a drop never frees another worker under the caller's feet.
static void
s_worker_drop (s_broker_t *self, s_worker_t *worker, const char *why, bool lost, s_job_t *unsent)
{
    s_backend_t *backend = worker->backend;
    size_t held = worker->jobs.size;
    size_t failed = 0;
    while (worker->jobs.tail) {
        s_job_t *job = worker->jobs.tail;
        s_list_remove (&worker->jobs, job);
        job->worker = NULL;
        self->inflight--;
        bool counted = lost && job != unsent;
        if (counted)
            job->lost++;
        if (counted && job->lost >= self->cfg.max_attempts) {
            s_job_fail (self, job);
            failed++;
            continue;
        }
        job->state = JOB_QUEUED;
        s_list_push_front (&backend->queue, job);
        self->queued++;
        s_bump (&self->stats.requeued, self->m.jobs_requeued);
        if (self->store && broker_store_requeue (self->store, job->id, job->attempt, job->lost))
            self->stats.store_errors++;
    }
    //  Swap-remove from the backend's array.
    size_t last = backend->nworkers - 1;
    backend->workers [worker->slot] = backend->workers [last];
    backend->workers [worker->slot]->slot = worker->slot;
    backend->nworkers = last;
    if (backend->cursor >= backend->nworkers)
        backend->cursor = 0;

    zhashx_delete (self->worker_table, worker->identity);
    if (held || lost)
        s_bump (&self->stats.workers_lost, self->m.workers_lost);
    else
        self->stats.workers_left++;
    if (held || lost)
        log_info ("broker", "worker %s (%s, %s) dropped: %s; %zu job(s) requeued, %zu failed",
                  worker->name, backend->name, worker->device, why, held - failed, failed);
    else
        log_info ("broker", "worker %s (%s, %s) left: %s", worker->name, backend->name,
                  worker->device, why);
    zframe_destroy (&worker->identity);
    free (worker);
    self->dispatch_due = true;
}

//  A state name to a state; -1 when unknown ("" is ready).
static int
s_worker_state_parse (const char *name)
{
    if (!name [0])
        return WORKER_READY;
    for (int i = 0; i < 3; i++)
        if (streq (name, s_state_names [i]))
            return i;
    return -1;
}

static void
s_worker_set_state (s_broker_t *self, s_worker_t *worker, s_worker_state_t state)
{
    if (worker->state == state)
        return;
    log_info ("broker", "worker %s is %s (was %s), holding %zu job(s)", worker->name,
              s_state_names [state], s_state_names [worker->state], worker->jobs.size);
    worker->state = state;
    if (state == WORKER_QUARANTINED)
        worker->faults++;
    if (state == WORKER_READY)
        self->dispatch_due = true;
}

//  READY: register (or re-register) the sender.
static void
s_worker_ready (s_broker_t *self, proto_msg_t *msg, int64_t now)
{
    int state = s_worker_state_parse (msg->state);
    if (msg->capacity == 0 || msg->backend [0] == 0 || state < 0) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
        s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_MALFORMED,
                      msg->capacity == 0? "READY with capacity 0":
                      state < 0? "READY with an unknown state": "READY with empty backend",
                      0, 0);
        return;
    }
    s_worker_t *worker = s_worker_lookup (self, msg->routing_id);
    if (worker)
        //  It started over (or changed its mind about its device): what it
        //  held goes back, which is no fault of the jobs.
        s_worker_drop (self, worker, "announced itself again", false, NULL);
    s_backend_t *backend = s_backend_require (self, msg->backend);
    worker = (s_worker_t *) calloc (1, sizeof (s_worker_t));
    if (backend && worker && backend->nworkers == backend->maxworkers) {
        size_t grown = backend->maxworkers? backend->maxworkers * 2: 8;
        s_worker_t **workers = (s_worker_t **) realloc (backend->workers, grown * sizeof (s_worker_t *));
        if (workers) {
            backend->workers = workers;
            backend->maxworkers = grown;
        }
    }
    if (!backend || !worker || backend->nworkers == backend->maxworkers) {
        free (worker);
        s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", 0, 0);
        return;
    }
    worker->identity = msg->routing_id;
    msg->routing_id = NULL;
    memcpy (worker->name, msg->name, sizeof (worker->name));
    memcpy (worker->device, msg->device, sizeof (worker->device));
    memcpy (worker->host, msg->host, sizeof (worker->host));
    s_device_model (msg->device, worker->model);
    memcpy (backend->last_device, worker->model, sizeof (backend->last_device));
    worker->since_us = worker->heard_us = now;
    worker->capacity = msg->capacity;
    worker->pid = msg->pid;
    worker->state = (s_worker_state_t) state;
    worker->backend = backend;
    worker->slot = backend->nworkers;
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    backend->workers [backend->nworkers++] = worker;
    zhashx_insert (self->worker_table, worker->identity, worker);
    log_info ("broker", "worker %s %s: backend %s, device %s, capacity %u, pid %u",
              worker->name, s_state_names [state], backend->name, worker->device,
              worker->capacity, worker->pid);
    self->dispatch_due = true;
}

//  RESULT from a worker: keep and forward it if it matches the current lease.
static void
s_worker_result (s_broker_t *self, s_worker_t *worker, proto_msg_t *msg)
{
    s_job_t *job = (s_job_t *) zhashx_lookup (self->jobs, &msg->job);
    if (!job || job->state != JOB_RUNNING || job->worker != worker || job->attempt != msg->attempt) {
        //  A lease that was taken back (or never was): the job lives on elsewhere.
        s_bump (&self->stats.dropped_results, self->m.results_dropped);
        log_info ("broker", "stale RESULT job %" PRIu64 " attempt %u from %s dropped",
                  msg->job, msg->attempt, worker->name);
        return;
    }
    s_list_remove (&worker->jobs, job);
    self->inflight--;
    zframe_t *body = proto_msg_get_body (msg);
    s_verdict_t verdict;
    s_verdict_read (body, msg->status, &verdict);
    s_job_finish (self, job, &body, worker->name, &verdict, worker->model, true);
    worker->done++;
    if (streq (job->status, "runtime_error") || streq (job->status, "timeout"))
        worker->faults++;
    self->dispatch_due = true;
}

static void
s_handle_worker (s_broker_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    int rc = proto_msg_recv (msg, self->workers);
    if (rc == -1)
        return;
    if (self->auth && !msg->user_id [0]) {
        //  CURVE is on and this connection was never approved: nothing at all.
        self->stats.unauthorized++;
        return;
    }
    if (rc == -2) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
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
            s_bump (&self->stats.dropped_results, self->m.results_dropped);
            log_info ("broker", "RESULT job %" PRIu64 " from an unknown worker dropped", msg->job);
        }
        if (msg->cmd != PROTO_DISCONNECT)
            s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_PEER,
                          "unknown worker: send READY", 0, 0);
        return;
    }
    //  Any message is a sign of life.
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    worker->heard_us = now;
    switch (msg->cmd) {
        case PROTO_HEARTBEAT:
            if (msg->state [0]) {
                int state = s_worker_state_parse (msg->state);
                if (state < 0) {
                    s_bump (&self->stats.malformed, self->m.messages_malformed);
                    s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_MALFORMED,
                                  "HEARTBEAT with an unknown state", 0, 0);
                }
                else
                    s_worker_set_state (self, worker, (s_worker_state_t) state);
            }
            break;
        case PROTO_RESULT:
            s_worker_result (self, worker, msg);
            break;
        case PROTO_DISCONNECT:
            //  Leaving on purpose: whatever it still held is no fault of the jobs.
            s_worker_drop (self, worker, msg->reason [0]? msg->reason: "disconnected", false, NULL);
            break;
        case PROTO_ERROR:
            log_warn ("broker", "worker %s reports error %u: %s", worker->name, msg->code, msg->reason);
            break;
        default: {
            char why [64];
            snprintf (why, sizeof (why), "%s is not a worker command", proto_cmd_name (msg->cmd));
            s_bump (&self->stats.malformed, self->m.messages_malformed);
            s_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why, 0, 0);
        }
    }
}

//  --------------------------------------------------------------------------
//  Clients' requests

//  Room for one more deferred reply; NULL when out of memory.
static s_deferred_t *
s_defer_slot (s_broker_t *self)
{
    if (self->ndeferred == self->maxdeferred) {
        size_t grown = self->maxdeferred? self->maxdeferred * 2: 1024;
        s_deferred_t *deferred = (s_deferred_t *) realloc (self->deferred, grown * sizeof (s_deferred_t));
        if (!deferred)
            return NULL;
        self->deferred = deferred;
        self->maxdeferred = grown;
    }
    s_deferred_t *slot = &self->deferred [self->ndeferred++];
    memset (slot, 0, sizeof (*slot));
    return slot;
}

//  Hold an ACCEPTED (and maybe a result) until the batch commits.
static void
s_defer (s_broker_t *self, s_job_t *job, bool resend, bool new_job)
{
    s_deferred_t *slot = s_defer_slot (self);
    if (!slot) {
        //  Cannot hold it: the client resubmits, and gets it then.
        log_error ("broker", "out of memory: ACCEPTED of job %" PRIu64 " not sent", job->id);
        return;
    }
    slot->job = job->id;
    slot->resend = resend;
    slot->new_job = new_job;
}

//  An ERROR about a SUBMIT: after the ACCEPTEDs that wait, so a client sees
//  its replies in the order it submitted.
static void
s_submit_error (s_broker_t *self, zframe_t *identity, uint32_t code, const char *reason,
                uint64_t ref)
{
    s_deferred_t *slot = self->ndeferred? s_defer_slot (self): NULL;
    if (slot) {
        slot->identity = zframe_dup (identity);
        slot->code = code;
        slot->ref = ref;
        slot->reason = strdup (reason);
    }
    else
        s_send_error (self, self->clients, identity, code, reason, ref, 0);
}

static void
s_client_submit (s_broker_t *self, proto_msg_t *msg)
{
    if (msg->backend [0] == 0) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
        common_metric_inc (self->m.jobs_rejected, "malformed");
        s_submit_error (self, msg->routing_id, PROTO_ERR_MALFORMED, "SUBMIT with empty backend",
                        msg->ref);
        return;
    }
    int policy = !msg->cache [0] || streq (msg->cache, "use")? S_CACHE_USE:
                 streq (msg->cache, "refresh")? S_CACHE_REFRESH:
                 streq (msg->cache, "bypass")? S_CACHE_BYPASS: -1;
    if (policy < 0) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
        common_metric_inc (self->m.jobs_rejected, "malformed");
        s_submit_error (self, msg->routing_id, PROTO_ERR_MALFORMED,
                        "SUBMIT with a cache policy other than use, refresh or bypass", msg->ref);
        return;
    }
    s_client_t *client = NULL;
    char *key = s_client_key (msg);
    if (key) {
        client = s_client_named (self, key, true);
        free (key);
    }
    else {
        client = (s_client_t *) zhashx_lookup (self->clients_by_id, msg->routing_id);
        if (client && client->key)
            client = NULL;      //  that connection spoke as a named client before: a new one now
        if (!client)
            client = s_client_new (NULL);
    }
    if (!client) {
        s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", msg->ref);
        return;
    }
    s_client_bind (self, client, msg->routing_id);
    if (client->refs) {
        //  The same (client, ref) again: a resend after a reconnect. The job
        //  it names is answered, not run twice; a finished one (when the
        //  resend says so) with its kept result.
        s_job_t *known = (s_job_t *) zhashx_lookup (client->refs, &msg->ref);
        if (known && !known->cancelled && (known->state != JOB_DONE || msg->retry)) {
            self->stats.resubmitted++;
            s_defer (self, known, known->state == JOB_DONE, false);
            return;
        }
    }
    const char *refused = NULL;
    if (self->queued + self->following >= self->cfg.max_queue)
        refused = "queue full";
    else
    if (self->cfg.max_client_jobs && client->unfinished >= self->cfg.max_client_jobs)
        refused = "client limit: too many unfinished jobs";
    s_backend_t *backend = refused? NULL: s_backend_require (self, msg->backend);
    s_job_t *job = refused? NULL: (s_job_t *) calloc (1, sizeof (s_job_t));
    if (!refused && (!backend || !job)) {
        free (job);
        job = NULL;
        s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", msg->ref);
        s_client_release (self, client);
        return;
    }
    if (refused) {
        self->stats.rejected++;
        common_metric_inc (self->m.jobs_rejected,
                           self->queued + self->following >= self->cfg.max_queue?
                           "overloaded": "client_limit");
        s_submit_error (self, msg->routing_id, PROTO_ERR_OVERLOADED, refused, msg->ref);
        s_client_release (self, client);
        return;
    }
    job->id = self->next_job++;
    job->ref = msg->ref;
    job->client = client;
    job->body = proto_msg_get_body (msg);
    job->tag = msg->tag [0]? strdup (msg->tag): NULL;
    job->backend = backend;
    job->accepted_us = s_wall_us ();
    job->state = JOB_QUEUED;
    job->policy = (uint8_t) policy;
    job->group = msg->group [0]? strdup (msg->group): NULL;
    job->trajectory = msg->trajectory [0]? strdup (msg->trajectory): NULL;
    job->reward = job->speedup = NAN;
    s_job_describe (self, job, job->body);
    //  Answered by the cache, or by an identical job in flight, or queued.
    zframe_t *hit = NULL;
    s_job_t *leader = NULL;
    if (job->keyed && job->policy == S_CACHE_USE) {
        hit = s_cache_lookup (self, job);
        if (!hit)
            leader = (s_job_t *) zhashx_lookup (self->leaders, job->key);
    }
    if (self->store) {
        broker_store_row_t row = {
            .id = job->id, .client = client->key? client->key: "", .ref = job->ref,
            .tag = msg->tag, .backend = backend->name, .body = zframe_data (job->body),
            .body_size = zframe_size (job->body), .accepted_us = job->accepted_us
        };
        if (broker_store_insert (self->store, &row)) {
            self->stats.store_errors++;
            self->stats.rejected++;
            common_metric_inc (self->m.jobs_rejected, "store_error");
            s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "cannot store the job",
                            msg->ref);
            zframe_destroy (&job->body);
            zframe_destroy (&hit);
            free (job->tag);
            free (job->task);
            free (job->group);
            free (job->trajectory);
            free (job->body_tag);
            free (job);
            s_client_release (self, client);
            return;
        }
        job->fresh = true;
    }
    zhashx_insert (self->jobs, &job->id, job);
    client->jobs++;
    client->unfinished++;
    if (client->refs) {
        zhashx_delete (client->refs, &job->ref);
        zhashx_insert (client->refs, &job->ref, job);
    }
    if (job->group && self->groups) {
        char owner [PROTO_MAX_STR + 64];
        s_owner (client, owner, sizeof owner);
        broker_groups_add (self->groups, owner, job->group, msg->group_size);
    }
    if (hit) {
        //  Finished now; the result follows its ACCEPTED after the commit.
        self->stats.cache_hits++;
        common_metric_inc (self->m.cache_hits);
        job->cached = true;
        json_t *tag = job->body_tag? json_string (job->body_tag): json_null ();
        json_t *map = NULL;
        zframe_t *marked = broker_cache_mark (zframe_data (hit), zframe_size (hit), false, tag, &map);
        json_decref (tag);
        s_verdict_t verdict;
        if (marked) {
            s_verdict_of (map, &verdict);
            zframe_destroy (&hit);
        }
        else {
            s_verdict_read (hit, NULL, &verdict);
            marked = hit;
        }
        json_decref (map);
        s_job_finish (self, job, &marked, BROKER_CACHE_NAME, &verdict, NULL, false);
        s_defer (self, job, true, true);
    }
    else
    if (leader) {
        job->state = JOB_FOLLOWING;
        job->leader = leader;
        s_list_push_back (&leader->followers, job);
        self->following++;
        self->stats.coalesced++;
        broker_cache_count_coalesced (self->cache);
        s_defer (self, job, false, true);
    }
    else {
        s_list_push_back (&backend->queue, job);
        self->queued++;
        s_lead (self, job);
        self->dispatch_due = true;
        s_defer (self, job, false, true);
    }
    log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ", backend %s, tag '%s') accepted%s",
               job->id, job->ref, backend->name, msg->tag,
               hit? " from the cache": leader? ", following an identical job": "");
}

//  FETCH: the kept results of a client's jobs (one job, a tag, or all), then DONE.
static void
s_client_fetch (s_broker_t *self, proto_msg_t *msg)
{
    uint32_t count = 0, pending = 0;
    char *key = s_client_key (msg);
    s_client_t *client = key? s_client_named (self, key, false): NULL;
    free (key);
    if (client) {
        s_client_bind (self, client, msg->routing_id);
        if (msg->job) {
            s_job_t *job = (s_job_t *) zhashx_lookup (self->jobs, &msg->job);
            if (job && job->client == client && !job->cancelled) {
                if (job->state != JOB_DONE)
                    pending++;
                else
                if (s_resend_result (self, job, msg->routing_id) == 0)
                    count++;
            }
        }
        else {
            for (s_job_t *job = self->finished.head; job; job = job->next)
                if (job->client == client && !job->cancelled
                &&  (!msg->tag [0] || (job->tag && streq (job->tag, msg->tag)))) {
                    if (s_resend_result (self, job, msg->routing_id))
                        break;      //  the client's queue is full: it fetches the rest later
                    count++;
                }
            for (s_job_t *job = (s_job_t *) zhashx_first (client->refs); job;
                 job = (s_job_t *) zhashx_next (client->refs))
                if (job->state != JOB_DONE
                &&  (!msg->tag [0] || (job->tag && streq (job->tag, msg->tag))))
                    pending++;
        }
    }
    proto_msg_reset (self->out, PROTO_DONE);
    self->out->ref = msg->ref;
    self->out->count = count;
    self->out->pending = pending;
    if (s_send (self, self->clients, msg->routing_id, NULL))
        s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
}

//  DRAIN from a client: the named workers finish what they hold and leave.
static void
s_client_drain (s_broker_t *self, proto_msg_t *msg)
{
    if (!msg->name [0]) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
        s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_MALFORMED,
                      "DRAIN without 'name'", msg->ref, 0);
        return;
    }
    uint32_t count = 0;
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table)) {
        if (!streq (worker->name, msg->name))
            continue;
        s_worker_set_state (self, worker, WORKER_DRAINING);
        proto_msg_reset (self->out, PROTO_DRAIN);
        proto_msg_set_str (self->out->reason, "drain asked by a client");
        if (s_send (self, self->workers, worker->identity, NULL) == 0)
            count++;
    }
    if (count == 0) {
        char why [PROTO_MAX_STR];
        snprintf (why, sizeof (why), "no worker named '%s'", msg->name);
        s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_NOT_FOUND, why, msg->ref, 0);
        return;
    }
    proto_msg_reset (self->out, PROTO_DONE);
    self->out->ref = msg->ref;
    self->out->count = count;
    if (s_send (self, self->clients, msg->routing_id, NULL))
        s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
}

//  CANCEL: the client gives up one of its jobs; DONE says whether it did.
static void
s_client_cancel (s_broker_t *self, proto_msg_t *msg)
{
    s_client_t *owner = NULL;
    char *key = s_client_key (msg);
    if (key) {
        owner = s_client_named (self, key, false);
        free (key);
        if (owner)
            s_client_bind (self, owner, msg->routing_id);
    }
    else
        owner = (s_client_t *) zhashx_lookup (self->clients_by_id, msg->routing_id);
    s_job_t *job = (s_job_t *) zhashx_lookup (self->jobs, &msg->job);
    uint32_t count = 0;
    if (job && owner && job->client == owner && !job->cancelled && job->state != JOB_DONE) {
        s_job_cancel (self, job);
        count = 1;
        log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ") cancelled", job->id, job->ref);
    }
    proto_msg_reset (self->out, PROTO_DONE);
    self->out->ref = msg->ref;
    self->out->count = count;
    if (s_send (self, self->clients, msg->routing_id, NULL))
        s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
}

//  --------------------------------------------------------------------------
//  QUERY (section 14.3): answers are built from what is in memory, plus
//  kept results from the store when a job's result is asked for.

#define S_LIMIT_DEFAULT 100
#define S_LIMIT_MAX 10000

//  A header string as JSON: peers' header strings need not be UTF-8, and
//  jansson takes nothing else (one bad name must not sink a whole answer).
static json_t *
s_str_or_null (const char *value)
{
    if (!value)
        return json_null ();
    char text [PROTO_MAX_STR];
    common_utf8_copy (text, sizeof text, value);
    return json_string (text);
}

static json_t *
s_real_or_null (double value)
{
    return isfinite (value)? json_real (value): json_null ();
}

//  A job's kept result as a map, or null.
static json_t *
s_job_result_json (s_broker_t *self, s_job_t *job)
{
    if (job->state != JOB_DONE || job->cancelled)
        return json_null ();
    zframe_t *loaded = NULL;
    zframe_t *body = job->result;
    if (!body && self->store)
        body = loaded = broker_store_result (self->store, job->id);
    json_t *result = NULL;
    if (body) {
        proto_mpk_limits_t limits;
        proto_mpk_limits_default (&limits);
        char err [128];
        result = proto_mpk_decode (zframe_data (body), zframe_size (body), &limits, err, sizeof err);
    }
    zframe_destroy (&loaded);
    return result? result: json_null ();
}

static json_t *
s_job_json (s_broker_t *self, s_job_t *job, bool with_result)
{
    bool done = job->state == JOB_DONE;
    const char *state = job->cancelled && done? "cancelled": s_job_states [job->state];
    const char *worker = job->worker? job->worker->name: job->graded_by;
    json_t *map = json_pack ("{s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:b, s:f, s:o, s:o}",
        "job", (json_int_t) job->id, "ref", (json_int_t) job->ref, "state", state,
        "backend", s_str_or_null (job->backend? job->backend->name: NULL),
        "task", s_str_or_null (job->task), "tag", s_str_or_null (job->tag),
        "group", s_str_or_null (job->group), "trajectory", s_str_or_null (job->trajectory),
        "attempt", (json_int_t) job->attempt, "worker", s_str_or_null (worker),
        "status", s_str_or_null (done && job->status [0]? job->status: NULL),
        "cached", job->cached, "accepted", (double) job->accepted_us / 1e6,
        "finished", done && job->finished_us? json_real ((double) job->finished_us / 1e6): json_null (),
        "queue_s", done && !job->cancelled? json_real (job->queue_s): json_null ());
    if (map && with_result)
        json_object_set_new (map, "result", s_job_result_json (self, job));
    return map;
}

static int
s_job_newest_first (const void *a, const void *b)
{
    const s_job_t *x = *(s_job_t * const *) a, *y = *(s_job_t * const *) b;
    return x->id > y->id? -1: x->id < y->id? 1: 0;
}

//  The query's "limit": default, or 1..S_LIMIT_MAX; -1 when bad.
static long
s_query_limit (json_t *query)
{
    json_t *value = json_object_get (query, "limit");
    if (!value)
        return S_LIMIT_DEFAULT;
    if (!json_is_integer (value) || json_integer_value (value) < 1
    ||  json_integer_value (value) > S_LIMIT_MAX)
        return -1;
    return (long) json_integer_value (value);
}

//  jobs by tag, group or trajectory, newest first.
static json_t *
s_answer_jobs (s_broker_t *self, json_t *query, char *why, size_t whylen)
{
    const char *fields [] = { "tag", "group", "trajectory" };
    const char *field = NULL, *value = NULL;
    int which = 0;
    for (int i = 0; i < 3; i++)
        if (json_object_get (query, fields [i])) {
            if (field) {
                snprintf (why, whylen, "jobs: one of tag, group or trajectory, not several");
                return NULL;
            }
            field = fields [i];
            which = i;
            value = json_string_value (json_object_get (query, field));
        }
    long limit = s_query_limit (query);
    json_t *results = json_object_get (query, "results");
    if (!field || !value || limit < 0 || (results && !json_is_boolean (results))) {
        snprintf (why, whylen, "jobs: wants one of tag, group or trajectory (a string), "
                  "[limit 1..%d], [results true|false]", S_LIMIT_MAX);
        return NULL;
    }
    size_t n = 0, cap = 64;
    s_job_t **found = (s_job_t **) malloc (cap * sizeof (s_job_t *));
    for (s_job_t *job = (s_job_t *) zhashx_first (self->jobs); job && found;
         job = (s_job_t *) zhashx_next (self->jobs)) {
        const char *have = which == 0? job->tag: which == 1? job->group: job->trajectory;
        if (!have || !streq (have, value))
            continue;
        if (n == cap) {
            s_job_t **grown = (s_job_t **) realloc (found, (cap *= 2) * sizeof (s_job_t *));
            if (!grown) {
                free (found);
                found = NULL;
                break;
            }
            found = grown;
        }
        found [n++] = job;
    }
    if (!found) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    qsort (found, n, sizeof (s_job_t *), s_job_newest_first);
    json_t *list = json_array ();
    for (size_t i = 0; i < n && i < (size_t) limit; i++)
        json_array_append_new (list, s_job_json (self, found [i], json_is_true (results)));
    free (found);
    return json_pack ("{s:o, s:b}", "jobs", list, "truncated", n > (size_t) limit);
}

//  finished results of one task, newest first.
static json_t *
s_answer_results (s_broker_t *self, json_t *query, char *why, size_t whylen)
{
    const char *task = json_string_value (json_object_get (query, "task"));
    long limit = s_query_limit (query);
    if (!task || limit < 0) {
        snprintf (why, whylen, "results: wants task (a string) and [limit 1..%d]", S_LIMIT_MAX);
        return NULL;
    }
    json_t *list = json_array ();
    bool truncated = false;
    for (s_job_t *job = self->finished.tail; job; job = job->prev) {
        if (job->cancelled || !job->task || !streq (job->task, task))
            continue;
        if (json_array_size (list) == (size_t) limit) {
            truncated = true;
            break;
        }
        json_array_append_new (list, json_pack ("{s:I, s:s, s:o, s:o, s:o, s:f, s:b}",
            "job", (json_int_t) job->id, "status", job->status,
            "reward", s_real_or_null (job->reward), "speedup", s_real_or_null (job->speedup),
            "worker", s_str_or_null (job->graded_by), "finished", (double) job->finished_us / 1e6,
            "cached", job->cached));
    }
    return json_pack ("{s:o, s:b}", "results", list, "truncated", truncated);
}

static json_t *
s_answer_workers (s_broker_t *self)
{
    int64_t now = s_now_us ();
    json_t *list = json_array ();
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table)) {
        json_t *jobs = json_array ();
        for (s_job_t *job = worker->jobs.head; job; job = job->next)
            json_array_append_new (jobs, json_integer ((json_int_t) job->id));
        const char *state = s_kind_names [s_worker_kind (worker)];
        json_array_append_new (list, json_pack ("{s:o, s:o, s:o, s:o, s:s, s:I, s:o, s:I, s:I, s:I, s:f, s:f}",
            "name", s_str_or_null (worker->name), "host", s_str_or_null (worker->host),
            "backend", s_str_or_null (worker->backend->name),
            "device", s_str_or_null (worker->device), "state", state, "capacity", (json_int_t) worker->capacity,
            "jobs", jobs, "done", (json_int_t) worker->done, "faults", (json_int_t) worker->faults,
            "pid", (json_int_t) worker->pid, "since_s", (double) (now - worker->since_us) / 1e6,
            "heard_s", (double) (now - worker->heard_us) / 1e6));
    }
    return json_pack ("{s:o}", "workers", list);
}

static json_t *
s_answer_stats (s_broker_t *self)
{
    s_stats_t *st = &self->stats;
    json_t *queued = json_object ();
    size_t kinds [S_KINDS] = { 0 };
    for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
         backend = (s_backend_t *) zhashx_next (self->backends)) {
        char name [PROTO_MAX_STR];
        common_utf8_copy (name, sizeof name, backend->name);
        json_object_set_new (queued, name, json_integer ((json_int_t) backend->queue.size));
    }
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table))
        kinds [s_worker_kind (worker)]++;
    json_t *statuses = json_object ();
    uint64_t graded = 0;
    for (size_t i = 0; i < 8; i++) {
        if (st->statuses [i])
            json_object_set_new (statuses, i < 7? s_result_statuses [i]: "unknown",
                                 json_integer ((json_int_t) st->statuses [i]));
        if (i < 5)
            graded += st->statuses [i];     //  ok .. timeout: the kernel's own verdicts
    }
    json_t *cache = broker_cache_stats_json (self->cache);
    json_t *answer = json_pack ("{s:f, s:o, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
                      "s:o, s:f, s:f, s:o, s:o}",
        "uptime_s", (double) (s_now_us () - self->started_us) / 1e6,
        "queued", queued, "in_flight", (json_int_t) self->inflight,
        "workers", "idle", (json_int_t) kinds [S_IDLE], "busy", (json_int_t) kinds [S_BUSY],
                   "draining", (json_int_t) kinds [S_DRAINING],
                   "quarantined", (json_int_t) kinds [S_QUARANTINED],
        "counts", "submitted", (json_int_t) st->submitted, "completed", (json_int_t) st->completed,
                  "cancelled", (json_int_t) st->cancelled, "rejected", (json_int_t) st->rejected,
                  "requeued", (json_int_t) st->requeued, "failed", (json_int_t) st->failed,
                  "cache_hits", (json_int_t) st->cache_hits, "coalesced", (json_int_t) st->coalesced,
        "statuses", statuses, "rate_1m", s_rate (self, 60), "rate_10s", s_rate (self, 10),
        "pass_rate", graded? json_real ((double) st->statuses [0] / (double) graded): json_null (),
        "cache", cache? cache: json_null ());
    if (answer)
        json_object_set_new (answer, "following", json_integer ((json_int_t) self->following));
    return answer;
}

static json_t *
s_answer_tasks (s_broker_t *self, json_t *query, char *why, size_t whylen)
{
    json_t *lo = json_object_get (query, "lo"), *hi = json_object_get (query, "hi");
    json_t *min = json_object_get (query, "min_attempts");
    if ((lo && !json_is_number (lo)) || (hi && !json_is_number (hi)) || (!lo != !hi)
    ||  (min && (!json_is_integer (min) || json_integer_value (min) < 0))) {
        snprintf (why, whylen, "tasks: lo and hi (numbers) together or neither, "
                  "[min_attempts >= 0]");
        return NULL;
    }
    json_t *list = broker_tasks_list (self->tasks, lo != NULL,
                                      lo? json_number_value (lo): 0, hi? json_number_value (hi): 1,
                                      min? (size_t) json_integer_value (min): 1);
    if (!list) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    json_t *answer = json_pack ("{s:o}", "tasks", list);
    if (answer && lo)
        json_object_set_new (answer, "band", json_pack ("[f, f]", json_number_value (lo),
                                                        json_number_value (hi)));
    return answer;
}

//  A multi-turn tool's state: get, put (optionally only over the version
//  it read) or close. *code says which ERROR when NULL comes back.
static json_t *
s_answer_trajectory (s_broker_t *self, json_t *query, uint32_t *code, char *why, size_t whylen)
{
    const char *id = json_string_value (json_object_get (query, "id"));
    const char *op = json_string_value (json_object_get (query, "op"));
    json_t *state = json_object_get (query, "state");
    json_t *if_version = json_object_get (query, "if_version");
    if (!id || !*id || strlen (id) >= PROTO_MAX_STR || !op
    ||  (!streq (op, "get") && !streq (op, "put") && !streq (op, "close"))
    ||  (streq (op, "put") && !state)
    ||  (if_version && (!json_is_integer (if_version) || json_integer_value (if_version) < 0))) {
        snprintf (why, whylen, "trajectory: wants id (1 to %d bytes), op get, put or close, "
                  "state (put), [if_version >= 0 (put)]", PROTO_MAX_STR - 1);
        return NULL;
    }
    uint64_t version = 0;
    json_t *value = NULL;
    if (streq (op, "get")) {
        value = json_incref (broker_trajectories_get (self->trajectories, id, &version));
    }
    else
    if (streq (op, "close"))
        value = broker_trajectories_close (self->trajectories, id);
    else {
        char *data = NULL;
        size_t size = 0;
        if (proto_mpk_encode (state, &data, &size)) {
            snprintf (why, whylen, "out of memory");
            return NULL;
        }
        free (data);
        uint64_t wanted = !if_version? 0:
                          json_integer_value (if_version) == 0? UINT64_MAX:
                          (uint64_t) json_integer_value (if_version);
        int rc = broker_trajectories_put (self->trajectories, id, state, size, wanted, &version);
        if (rc == -2) {
            *code = PROTO_ERR_CONFLICT;
            snprintf (why, whylen, "trajectory '%.64s' is at version %" PRIu64 ", not %" PRIu64,
                      id, version, (uint64_t) json_integer_value (if_version));
            return NULL;
        }
        if (rc) {
            *code = PROTO_ERR_TOO_LARGE;
            snprintf (why, whylen, "trajectory state of %zu bytes: over %u, or out of memory",
                      size, BROKER_TRAJECTORY_MAX_STATE);
            return NULL;
        }
        value = json_incref (state);
    }
    return json_pack ("{s:s, s:o, s:I}", "id", id, "state", value? value: json_null (),
                      "version", (json_int_t) version);
}

//  QUERY: ANSWER with a map, or ERROR 400 / 404 with the reason.
static void
s_client_query (s_broker_t *self, proto_msg_t *msg)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_bytes = 2 * BROKER_TRAJECTORY_MAX_STATE;     //  a few keys, or one state
    char why [256] = "";
    uint32_t code = PROTO_ERR_MALFORMED;
    json_t *answer = NULL;
    json_t *query = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), &limits,
                                      why, sizeof why);
    const char *what = json_string_value (json_object_get (query, "what"));
    if (!query || !json_is_object (query))
        snprintf (why, sizeof why, "QUERY body is not a map");
    else
    if (!what)
        snprintf (why, sizeof why, "QUERY without 'what'");
    else
    if (streq (what, "stats"))
        answer = s_answer_stats (self);
    else
    if (streq (what, "workers"))
        answer = s_answer_workers (self);
    else
    if (streq (what, "cache"))
        answer = broker_cache_stats_json (self->cache);
    else
    if (streq (what, "job")) {
        json_t *id = json_object_get (query, "job");
        s_job_t *job = NULL;
        if (json_is_integer (id) && json_integer_value (id) >= 0) {
            uint64_t key = (uint64_t) json_integer_value (id);
            job = (s_job_t *) zhashx_lookup (self->jobs, &key);
            if (!job) {
                code = PROTO_ERR_NOT_FOUND;
                snprintf (why, sizeof why, "no job %" PRIu64 " (unknown, or its result was retired)", key);
            }
        }
        else
            snprintf (why, sizeof why, "job: wants job (an integer id)");
        if (job)
            answer = json_pack ("{s:o}", "job", s_job_json (self, job, true));
    }
    else
    if (streq (what, "jobs"))
        answer = s_answer_jobs (self, query, why, sizeof why);
    else
    if (streq (what, "results"))
        answer = s_answer_results (self, query, why, sizeof why);
    else
    if (streq (what, "tasks"))
        answer = s_answer_tasks (self, query, why, sizeof why);
    else
    if (streq (what, "trajectory"))
        answer = s_answer_trajectory (self, query, &code, why, sizeof why);
    else
        snprintf (why, sizeof why, "unknown query '%.64s': stats, workers, job, jobs, results, "
                  "cache, tasks or trajectory", what);
    json_decref (query);

    char *data = NULL;
    size_t size = 0;
    if (answer && proto_mpk_encode (answer, &data, &size) == 0 && size <= PROTO_MAX_BODY) {
        zframe_t *body = zframe_new (data, size);
        proto_msg_reset (self->out, PROTO_ANSWER);
        self->out->ref = msg->ref;
        if (s_send (self, self->clients, msg->routing_id, body))
            s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        zframe_destroy (&body);
    }
    else {
        if (answer) {
            code = PROTO_ERR_TOO_LARGE;
            snprintf (why, sizeof why, "the answer is over %u bytes: ask for fewer (limit)",
                      PROTO_MAX_BODY);
        }
        else
        if (code == PROTO_ERR_MALFORMED)
            s_bump (&self->stats.malformed, self->m.messages_malformed);
        s_send_error (self, self->clients, msg->routing_id, code, why, msg->ref, 0);
    }
    free (data);
    json_decref (answer);
}

//  DISCONNECT from a client: its waiting jobs are dropped (running ones
//  finish and their results are kept for a while).
static void
s_client_disconnect (s_broker_t *self, zframe_t *identity)
{
    s_client_t *client = (s_client_t *) zhashx_lookup (self->clients_by_id, identity);
    if (!client)
        return;
    size_t dropped = 0;
    for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
         backend = (s_backend_t *) zhashx_next (self->backends)) {
        s_job_t *job = backend->queue.head;
        while (job) {
            s_job_t *next = job->next;
            if (job->client == client && job->followers.size) {
                job->cancelled = true;          //  runs on for the jobs that follow it
                dropped++;
            }
            else
            if (job->client == client) {
                s_unlead (self, job);
                s_list_remove (&backend->queue, job);
                self->queued--;
                if (self->store && broker_store_delete (self->store, job->id))
                    self->stats.store_errors++;
                client->jobs++;             //  hold it over the job's release
                s_job_destroy (self, &job);
                client->jobs--;
                dropped++;
            }
            job = next;
        }
    }
    self->stats.cancelled += dropped;
    common_metric_add (self->m.jobs_cancelled, (double) dropped);
    s_client_unbind (self, client);
    s_client_release (self, client);
    log_info ("broker", "client disconnected; %zu queued job(s) dropped", dropped);
}

static void
s_handle_client (s_broker_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    int rc = proto_msg_recv (msg, self->clients);
    if (rc == -1)
        return;
    if (self->auth && !msg->user_id [0]) {
        self->stats.unauthorized++;
        return;
    }
    if (rc == -2) {
        s_bump (&self->stats.malformed, self->m.messages_malformed);
        if (msg->cmd == PROTO_SUBMIT)
            common_metric_inc (self->m.jobs_rejected, "malformed");
        log_info ("broker", "malformed message from a client: %s", msg->reason);
        s_send_error (self, self->clients, msg->routing_id, msg->code, msg->reason, 0, 0);
        return;
    }
    switch (msg->cmd) {
        case PROTO_SUBMIT:
            s_client_submit (self, msg);
            break;
        case PROTO_HEARTBEAT: {
            char *key = s_client_key (msg);
            s_client_t *client = key? s_client_named (self, key, false): NULL;
            free (key);
            if (client)
                s_client_bind (self, client, msg->routing_id);
            proto_msg_reset (self->out, PROTO_HEARTBEAT);
            s_send (self, self->clients, msg->routing_id, NULL);
            break;
        }
        case PROTO_FETCH:
            s_client_fetch (self, msg);
            break;
        case PROTO_DRAIN:
            s_client_drain (self, msg);
            break;
        case PROTO_CANCEL:
            s_client_cancel (self, msg);
            break;
        case PROTO_QUERY:
            s_client_query (self, msg);
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
            s_bump (&self->stats.malformed, self->m.messages_malformed);
            s_send_error (self, self->clients, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why,
                          msg->cmd == PROTO_RESULT? msg->ref: 0, 0);
        }
    }
}

//  --------------------------------------------------------------------------
//  Batches, retention, heartbeats

//  Drop kept results past the count or the age limit, oldest first.
static void
s_retire (s_broker_t *self)
{
    if (!self->finished.head)
        return;
    int64_t oldest = s_wall_us () - (int64_t) self->cfg.keep_s * 1000000;
    while (self->finished.head
    &&    (self->finished.size > self->cfg.keep_results || self->finished.head->finished_us < oldest)) {
        s_job_t *job = self->finished.head;
        s_list_remove (&self->finished, job);
        if (self->store && broker_store_delete (self->store, job->id))
            self->stats.store_errors++;
        s_job_destroy (self, &job);
    }
}

//  End of a batch: commit what it stored, then send what waited for that,
//  then lease what can be leased.
static void
s_end_batch (s_broker_t *self)
{
    s_retire (self);
    bool committed = true;
    if (self->store && broker_store_pending (self->store) && broker_store_commit (self->store)) {
        self->stats.store_errors++;
        committed = false;
    }
    for (size_t i = 0; i < self->ndeferred; i++) {
        s_deferred_t *entry = &self->deferred [i];
        if (entry->identity) {
            s_send_error (self, self->clients, entry->identity, entry->code, entry->reason,
                          entry->ref, 0);
            zframe_destroy (&entry->identity);
            free (entry->reason);
            continue;
        }
        s_job_t *job = (s_job_t *) zhashx_lookup (self->jobs, &entry->job);
        if (!job)
            continue;           //  cancelled in the meantime
        if (job->fresh && !committed) {
            //  Not on disk: it was never accepted. The client may resubmit.
            s_send_error (self, self->clients, job->client->identity, PROTO_ERR_INTERNAL,
                          "cannot store the job", job->ref, 0);
            self->stats.rejected++;
            common_metric_inc (self->m.jobs_rejected, "store_error");
            s_job_unlink (self, job);
            s_job_destroy (self, &job);
            continue;
        }
        if (entry->new_job) {
            self->stats.submitted++;
            common_metric_inc (self->m.jobs_submitted, job->backend->name);
        }
        job->fresh = false;
        zframe_t *identity = job->client->identity;
        if (!identity)
            continue;
        proto_msg_reset (self->out, PROTO_ACCEPTED);
        self->out->ref = job->ref;
        self->out->job = job->id;
        if (s_send (self, self->clients, identity, NULL)) {
            s_bump (&self->stats.undeliverable, self->m.results_undeliverable);
            if (errno == EHOSTUNREACH)
                s_client_unbind (self, job->client);
            continue;
        }
        if (entry->resend && job->state == JOB_DONE && !job->cancelled)
            s_resend_result (self, job, NULL);
    }
    self->ndeferred = 0;
    s_send_summaries (self);
    //  Task statistics reach the disk at most once a second.
    int64_t now = s_now_us ();
    if (self->tasks && now >= self->next_tasks_flush_us) {
        broker_tasks_flush (self->tasks);
        self->next_tasks_flush_us = now + 1000000;
    }
    if (self->dispatch_due)
        s_dispatch_all (self);
    //  Dispatch does not write the store, but a failed send may requeue
    //  (attempt counts): commit those too.
    if (self->store && broker_store_pending (self->store) && broker_store_commit (self->store))
        self->stats.store_errors++;
}

//  Every heartbeat interval: a HEARTBEAT to each worker, then drop the ones
//  silent too long (or found unreachable); their jobs are re-offered at the
//  batch end.
static void
s_heartbeat (s_broker_t *self, int64_t now)
{
    proto_msg_reset (self->out, PROTO_HEARTBEAT);
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table))
        if (s_send (self, self->workers, worker->identity, NULL) && errno == EHOSTUNREACH)
            worker->expires_us = 0;

    bool again = true;
    while (again) {
        //  Restart the walk after each drop: it changes the table.
        again = false;
        for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
             worker = (s_worker_t *) zhashx_next (self->worker_table))
            if (now >= worker->expires_us) {
                s_worker_drop (self, worker, worker->expires_us? "silent too long": "unreachable",
                               true, NULL);
                again = true;
                break;
            }
    }
}

//  --------------------------------------------------------------------------
//  Pipe

//  The gauges of docs/metrics.md, from the lists themselves (a few
//  backends and workers: cheap enough for every turn).
static void
s_update_gauges (s_broker_t *self)
{
    for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
         backend = (s_backend_t *) zhashx_next (self->backends)) {
        size_t kinds [S_KINDS] = { 0 }, leased = 0;
        for (size_t i = 0; i < backend->nworkers; i++) {
            leased += backend->workers [i]->jobs.size;
            kinds [s_worker_kind (backend->workers [i])]++;
        }
        common_metric_set (self->m.queue_depth, (double) backend->queue.size, backend->name);
        common_metric_set (self->m.jobs_in_flight, (double) leased, backend->name);
        for (int kind = 0; kind < S_KINDS; kind++)
            common_metric_set (self->m.workers, (double) kinds [kind], backend->name,
                               s_kind_names [kind]);
    }
}

//  Once per loop turn: gauges, the stall beat, sd_notify STATUS (at most
//  once a second) and WATCHDOG (at half of $WATCHDOG_USEC).
static void
s_turn (s_broker_t *self)
{
    if (self->metrics)
        s_update_gauges (self);
    if (self->cfg.registry)
        common_metrics_beat (self->cfg.registry);
    if (!self->cfg.notify)
        return;
    int64_t now = s_now_us ();
    if (now >= self->next_status_us) {
        common_notify_status ("%zu queued, %zu in flight, %zu workers", self->queued,
                              self->inflight, zhashx_size (self->worker_table));
        self->next_status_us = now + 1000000;
    }
    if (self->watchdog_us && now >= self->next_watchdog_us) {
        common_notify_watchdog ();
        self->next_watchdog_us = now + self->watchdog_us;
    }
}

static char *
s_stats_json (s_broker_t *self)
{
    s_stats_t *st = &self->stats;
    size_t draining = 0, quarantined = 0;
    for (s_worker_t *worker = (s_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (s_worker_t *) zhashx_next (self->worker_table)) {
        draining += worker->state == WORKER_DRAINING;
        quarantined += worker->state == WORKER_QUARANTINED;
    }
    return zsys_sprintf (
        "{\"submitted\":%" PRIu64 ",\"resubmitted\":%" PRIu64 ",\"rejected\":%" PRIu64
        ",\"dispatched\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"failed\":%" PRIu64
        ",\"requeued\":%" PRIu64 ",\"dropped_results\":%" PRIu64 ",\"undeliverable\":%" PRIu64
        ",\"resent\":%" PRIu64 ",\"cancelled\":%" PRIu64 ",\"malformed\":%" PRIu64
        ",\"unauthorized\":%" PRIu64 ",\"workers_lost\":%" PRIu64 ",\"workers_left\":%" PRIu64
        ",\"store_errors\":%" PRIu64 ",\"workers\":%zu,\"draining\":%zu,\"quarantined\":%zu"
        ",\"queued\":%zu,\"inflight\":%zu,\"results\":%zu,\"clients\":%zu}",
        st->submitted, st->resubmitted, st->rejected, st->dispatched, st->completed, st->failed,
        st->requeued, st->dropped_results, st->undeliverable, st->resent, st->cancelled,
        st->malformed, st->unauthorized, st->workers_lost, st->workers_left, st->store_errors,
        zhashx_size (self->worker_table), draining, quarantined, self->queued, self->inflight,
        self->finished.size, zhashx_size (self->clients_by_key));
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
        if (json && self->auth) {
            //  The handshakes the ZAP handler let in and refused.
            zstr_send (self->auth, "STATS");
            char *auth = zstr_recv (self->auth);
            if (auth && auth [0] == '{') {
                json [strlen (json) - 1] = 0;
                char *both = zsys_sprintf ("%s,\"auth\":%s}", json, auth);
                zstr_free (&json);
                json = both;
            }
            zstr_free (&auth);
        }
        zstr_send (self->pipe, json? json: "{}");
        zstr_free (&json);
    }
    else
        log_warn ("broker", "unknown pipe command '%s'", command);
    zstr_free (&command);
}

//  --------------------------------------------------------------------------
//  Restart from the store

static int
s_load_row (const broker_store_row_t *row, void *arg)
{
    s_broker_t *self = (s_broker_t *) arg;
    s_client_t *client = row->client [0]? s_client_named (self, row->client, true): self->orphans;
    s_backend_t *backend = row->done? NULL: s_backend_require (self, row->backend);
    s_job_t *job = (s_job_t *) calloc (1, sizeof (s_job_t));
    if (!client || (!row->done && !backend) || !job) {
        free (job);
        return -1;
    }
    job->id = row->id;
    job->ref = row->ref;
    job->attempt = row->attempts;
    job->lost = row->lost;
    job->client = client;
    job->tag = row->tag [0]? strdup (row->tag): NULL;
    job->accepted_us = row->accepted_us;
    job->backend = backend;
    client->jobs++;
    zhashx_insert (self->jobs, &job->id, job);
    if (client->refs) {
        zhashx_delete (client->refs, &job->ref);
        zhashx_insert (client->refs, &job->ref, job);
    }
    if (row->done) {
        job->state = JOB_DONE;
        job->reward = job->speedup = NAN;
        job->finished_us = row->finished_us;
        job->queue_s = row->queue_s;
        job->graded_by = strdup (row->worker);
        s_list_push_back (&self->finished, job);
    }
    else {
        job->state = JOB_QUEUED;
        job->body = zframe_new (row->body, row->body_size);
        //  Its header policy was not stored: its result is kept (refresh),
        //  and identical jobs no longer wait for it.
        job->policy = S_CACHE_REFRESH;
        job->reward = job->speedup = NAN;
        if (job->body)
            s_job_describe (self, job, job->body);
        client->unfinished++;
        s_list_push_back (&backend->queue, job);
        self->queued++;
    }
    if (job->id >= self->next_job)
        self->next_job = job->id + 1;
    return 0;
}

static int
s_finished_order (const void *a, const void *b)
{
    const s_job_t *x = *(s_job_t * const *) a, *y = *(s_job_t * const *) b;
    if (x->finished_us != y->finished_us)
        return x->finished_us < y->finished_us? -1: 1;
    return x->id < y->id? -1: x->id > y->id? 1: 0;
}

//  Everything the store holds back in memory; finished results in the
//  order they finished, so retention retires the oldest first.
static int
s_load (s_broker_t *self, char *err, size_t errlen)
{
    int64_t keep_after = s_wall_us () - (int64_t) self->cfg.keep_s * 1000000;
    if (broker_store_load (self->store, keep_after, self->cfg.keep_results, s_load_row, self)) {
        snprintf (err, errlen, "cannot load the jobs from %s", self->cfg.db_path);
        return -1;
    }
    size_t n = self->finished.size;
    if (n > 1) {
        s_job_t **order = (s_job_t **) malloc (n * sizeof (s_job_t *));
        if (order) {
            size_t i = 0;
            for (s_job_t *job = self->finished.head; job; job = job->next)
                order [i++] = job;
            qsort (order, n, sizeof (s_job_t *), s_finished_order);
            memset (&self->finished, 0, sizeof (self->finished));
            for (i = 0; i < n; i++)
                s_list_push_back (&self->finished, order [i]);
            free (order);
        }
    }
    log_info ("broker", "store %s: %zu unfinished job(s) queued again, %zu result(s) kept",
              self->cfg.db_path, self->queued, self->finished.size);
    return 0;
}

//  --------------------------------------------------------------------------
//  Life cycle

static void
s_broker_destroy (s_broker_t **self_p)
{
    s_broker_t *self = *self_p;
    if (!self)
        return;
    //  Sockets first: nothing more comes in while the rest goes.
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->clients);
    zsock_destroy (&self->workers);
    zactor_destroy (&self->auth);
    broker_tasks_destroy (&self->tasks);        //  flushes through the store's connection
    broker_store_destroy (&self->store);
    //  Every job is in one list: a queue, a worker's leases, or the
    //  finished list (a walk of the job table would rescan it per delete).
    if (self->worker_table) {
        s_worker_t *worker;
        while ((worker = (s_worker_t *) zhashx_first (self->worker_table))) {
            while (worker->jobs.head) {
                s_job_t *job = worker->jobs.head;
                s_list_remove (&worker->jobs, job);
                s_job_destroy (self, &job);
            }
            zhashx_delete (self->worker_table, worker->identity);
            zframe_destroy (&worker->identity);
            free (worker);
        }
    }
    if (self->backends)
        for (s_backend_t *backend = (s_backend_t *) zhashx_first (self->backends); backend;
             backend = (s_backend_t *) zhashx_next (self->backends))
            while (backend->queue.head) {
                s_job_t *job = backend->queue.head;
                s_list_remove (&backend->queue, job);
                s_job_destroy (self, &job);
            }
    while (self->finished.head) {
        s_job_t *job = self->finished.head;
        s_list_remove (&self->finished, job);
        s_job_destroy (self, &job);
    }
    if (self->clients_by_key) {
        //  Clients with no job were freed with their last job; none is left.
        s_client_t *client;
        while ((client = (s_client_t *) zhashx_first (self->clients_by_key))) {
            client->jobs = 0;
            s_client_release (self, client);
        }
    }
    if (self->orphans) {
        zframe_destroy (&self->orphans->identity);
        free (self->orphans);
    }
    zhashx_destroy (&self->jobs);
    zhashx_destroy (&self->leaders);
    if (self->summaries) {
        zmsg_t *entry;
        while ((entry = (zmsg_t *) zlist_pop (self->summaries)))
            zmsg_destroy (&entry);
        zlist_destroy (&self->summaries);
    }
    broker_cache_destroy (&self->cache);
    broker_groups_destroy (&self->groups);
    broker_trajectories_destroy (&self->trajectories);
    zhashx_destroy (&self->worker_table);
    zhashx_destroy (&self->backends);
    zhashx_destroy (&self->clients_by_key);
    zhashx_destroy (&self->clients_by_id);
    free (self->deferred);
    proto_msg_destroy (&self->in);
    proto_msg_destroy (&self->out);
    zstr_free (&self->clients_endpoint);
    zstr_free (&self->workers_endpoint);
    free (self);
    *self_p = NULL;
}

//  Bind a ROUTER (a CURVE server in the given ZAP domain when a secret is
//  given); NULL with a reason.
static zsock_t *
s_bind (const char *endpoint, const char *what, const char *curve_secret, const char *domain,
        char **bound, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new (ZMQ_ROUTER);
    if (!sock) {
        snprintf (err, errlen, "cannot create the %s socket", what);
        return NULL;
    }
    proto_sock_configure (sock, true);
    if (curve_secret && proto_curve_server (sock, curve_secret, domain, err, errlen)) {
        zsock_destroy (&sock);
        return NULL;
    }
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
    if (self->cfg.metrics) {
        self->m = *self->cfg.metrics;
        self->metrics = true;
    }
    self->cfg.metrics = NULL;           //  the caller's struct: copied
    if (self->cfg.notify)
        self->watchdog_us = (int64_t) common_notify_watchdog_usec () / 2;
    if (self->cfg.heartbeat_ms == 0)
        self->cfg.heartbeat_ms = 1000;
    if (self->cfg.liveness == 0)
        self->cfg.liveness = 3;
    if (self->cfg.max_attempts == 0)
        self->cfg.max_attempts = 3;
    //  Ids grow across restarts even without a store: a client that kept
    //  the ids of a broker that died never sees one again for another job.
    self->next_job = (uint64_t) s_wall_us ();
    self->in = proto_msg_new (0);
    self->out = proto_msg_new (0);
    self->jobs = s_table_new (s_u64_hash, s_u64_compare);
    self->worker_table = s_table_new (s_frame_hash, s_frame_compare);
    self->backends = zhashx_new ();
    self->clients_by_key = s_table_new (NULL, NULL);
    self->clients_by_id = s_table_new (s_frame_hash, s_frame_compare);
    self->orphans = s_client_new (NULL);
    self->leaders = s_table_new (s_key_hash, s_key_compare);
    self->summaries = zlist_new ();
    self->cache = broker_cache_new (self->cfg.cache_entries, (size_t) self->cfg.cache_bytes);
    self->groups = broker_groups_new (100000);
    self->trajectories = broker_trajectories_new (100000, 256u << 20);
    self->started_us = s_now_us ();
    if (!self->in || !self->out || !self->jobs || !self->worker_table || !self->backends
    ||  !self->clients_by_key || !self->clients_by_id || !self->orphans || !self->leaders
    ||  !self->summaries || !self->cache || !self->groups || !self->trajectories) {
        snprintf (err, errlen, "out of memory");
        s_broker_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->backends, s_backend_free);

    if (self->cfg.db_path) {
        self->store = broker_store_new (self->cfg.db_path, self->cfg.db_full_sync, err, errlen);
        if (!self->store || s_load (self, err, errlen)) {
            s_broker_destroy (&self);
            return NULL;
        }
        self->cfg.db_path = NULL;       //  the caller's string
    }
    //  Task statistics live in the job database when there is one.
    size_t window = self->cfg.task_window? self->cfg.task_window: 100;
    self->tasks = self->store? broker_tasks_new_shared (window, broker_store_db (self->store), err, errlen):
                               broker_tasks_new (window, NULL, err, errlen);
    if (!self->tasks) {
        s_broker_destroy (&self);
        return NULL;
    }
    if (self->cfg.curve_secret) {
        //  The ZAP handler runs before anything binds, and for the broker's
        //  whole life: ZeroMQ lets CURVE peers in when none answers.
        broker_auth_config_t acfg = { self->cfg.trainer_keys, self->cfg.worker_keys };
        self->auth = zactor_new (broker_auth_actor, &acfg);
        char *reason = self->auth? zstr_recv (self->auth): NULL;
        if (!reason || reason [0]) {
            snprintf (err, errlen, "%s", reason? reason: "cannot start the ZAP handler");
            zstr_free (&reason);
            s_broker_destroy (&self);
            return NULL;
        }
        zstr_free (&reason);
    }
    const char *secret = self->cfg.curve_secret;
    self->clients = s_bind (self->cfg.clients_endpoint, "clients", secret, BROKER_AUTH_CLIENTS,
                            &self->clients_endpoint, err, errlen);
    if (!self->clients) {
        s_broker_destroy (&self);
        return NULL;
    }
    self->workers = s_bind (self->cfg.workers_endpoint, "workers", secret, BROKER_AUTH_WORKERS,
                            &self->workers_endpoint, err, errlen);
    if (!self->workers) {
        s_broker_destroy (&self);
        return NULL;
    }
    //  The config's strings belong to the caller, who may free them once started.
    self->cfg.clients_endpoint = self->clients_endpoint;
    self->cfg.workers_endpoint = self->workers_endpoint;
    self->cfg.curve_secret = self->cfg.trainer_keys = self->cfg.worker_keys = NULL;
    self->poller = zpoller_new (pipe, self->clients, self->workers, NULL);
    if (!self->poller) {
        snprintf (err, errlen, "cannot create the poller");
        s_broker_destroy (&self);
        return NULL;
    }
    self->dispatch_due = true;
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
    cfg->max_attempts = 3;
    cfg->keep_results = 100000;
    cfg->keep_s = 3600;
    cfg->cache_entries = 10000;
    cfg->cache_bytes = 256u << 20;
    cfg->task_window = 100;
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
    log_debug ("broker", "clients on %s, workers on %s%s", self->clients_endpoint,
               self->workers_endpoint, self->auth? " (CURVE)": "");
    zsock_signal (pipe, 0);

    int64_t interval_us = (int64_t) self->cfg.heartbeat_ms * 1000;
    self->next_heartbeat_us = s_now_us () + interval_us;
    s_end_batch (self);         //  jobs loaded from the store wait for workers
    s_turn (self);
    while (!self->terminated) {
        int64_t now = s_now_us ();
        int timeout_ms = 0;
        if (self->next_heartbeat_us > now)
            timeout_ms = (int) ((self->next_heartbeat_us - now + 999) / 1000);
        if (self->watchdog_us && timeout_ms > self->watchdog_us / 1000)
            timeout_ms = (int) (self->watchdog_us / 1000);
        zsock_t *which = (zsock_t *) zpoller_wait (self->poller, timeout_ms);
        if (!which && zpoller_terminated (self->poller))
            break;
        if (which == pipe)
            s_handle_pipe (self);
        //  Serve both sockets until neither has more, whoever woke us, but
        //  never past the heartbeat time: a busy broker still heartbeats.
        //  Each turn is a batch: one commit, then ACCEPTEDs, then dispatch.
        bool more = true;
        while (more && !self->terminated && s_now_us () < self->next_heartbeat_us) {
            more = s_drain (self, self->workers, s_handle_worker);
            more = s_drain (self, self->clients, s_handle_client) || more;
            s_end_batch (self);
            if (zsock_events (pipe) & ZMQ_POLLIN)
                s_handle_pipe (self);
        }
        now = s_now_us ();
        if (now >= self->next_heartbeat_us) {
            s_heartbeat (self, now);
            s_end_batch (self);
            self->next_heartbeat_us = now + interval_us;
        }
        s_turn (self);
    }
    s_end_batch (self);
    s_broker_destroy (&self);
}
