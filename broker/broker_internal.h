/*  broker_internal - the broker's private state, shared by the files of
    broker_server (not an interface: nothing outside broker_*.c includes it).

    One class, broker_server, in several files, one concern each:
        broker_server.c     the socket loop, the command tables, batches, life cycle
        broker_jobs.c       jobs and queues: lists, finishing, failing, dispatch, restart
        broker_workers.c    workers and leases: READY, RESULT, liveness, requeue
        broker_clients.c    clients: routing ids, SUBMIT, FETCH, CANCEL, DRAIN, delivery
        broker_queries.c    the QUERY answers, STATS and the gauges
        broker_coalesce.c   what the broker reads of bodies: cache keys, coalescing,
                            verdicts, GRPO group ends
    Every one works on the same broker_server_t, owned by the actor thread.
    Functions shared between the files are declared here, by the file that
    defines them; what stays inside one file is static (s_...).

    A job lives in exactly one list at a time: its backend's queue while it
    waits, the list of the worker that holds its lease while it runs, the
    followers of an identical job in flight, or the finished list while its
    result is kept.
*/
#ifndef BROKER_INTERNAL_H
#define BROKER_INTERNAL_H

#include "broker_server.h"
#include "broker_store.h"
#include "broker_auth.h"
#include "broker_cache.h"
#include "broker_tasks.h"
#include "broker_groups.h"
#include "broker_trajectories.h"
#include "broker_verdict.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <time.h>
#include <math.h>
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <inttypes.h>

#define BROKER_BATCH 256            //  messages read from one socket before looking at the others
#define BROKER_NAME "kgym-broker"   //  the "worker" of a result the broker makes itself
#define BROKER_CACHE_WORKER "cache" //  the "worker" of a result answered from the cache
#define BROKER_RATE_SECONDS 60      //  completions per second, for the last minute
#define BROKER_CANCELLED "cancelled"    //  the stored status of a job cancelled before it ran

typedef struct _broker_job_t broker_job_t;
typedef struct _broker_worker_t broker_worker_t;
typedef struct _broker_backend_t broker_backend_t;
typedef struct _broker_client_t broker_client_t;

//  An intrusive doubly linked list of jobs.
typedef struct {
    broker_job_t *head;         //  first, or NULL
    broker_job_t *tail;         //  last, or NULL
    size_t size;                //  jobs in the list
} broker_joblist_t;

typedef enum {
    JOB_QUEUED,                 //  in its backend's queue
    JOB_RUNNING,                //  leased: in its worker's list
    JOB_DONE,                   //  result kept (or cancelled): in the finished list
    JOB_FOLLOWING               //  an identical job runs: in that one's followers
} broker_job_state_t;

//  Result cache policies (SUBMIT's cache), named in broker_policy_names.
enum { BROKER_POLICY_USE, BROKER_POLICY_REFRESH, BROKER_POLICY_BYPASS, BROKER_POLICIES };

//  What the broker knows of a job's reward settings (broker_verdict).
enum {
    BROKER_REWARDS_UNREAD,      //  the body was not read (over the broker's bound for describing)
    BROKER_REWARDS_KNOWN,       //  read: job->rewards holds them
    BROKER_REWARDS_NONE         //  the body is not a map, or its settings are not valid
};

//  One accepted job, from SUBMIT until its result is retired.
struct _broker_job_t {
    uint64_t id;                //  broker's job id (key in the job table)
    uint64_t ref;               //  client's reference (key in the client's refs)
    uint32_t attempt;           //  dispatches so far; the lease is (id, attempt, worker)
    uint32_t lost;              //  leases lost with their worker (poison counter)
    broker_job_state_t state;   //  which list it is in
    bool fresh;                 //  stored in the open transaction, not committed yet
    broker_client_t *client;    //  who submitted it
    zframe_t *body;             //  the job as submitted (owned, sent untouched; NULL once done)
    zframe_t *result;           //  memory mode: the result once done (with a store: on disk)
    char *tag;                  //  header tag, or NULL
    char *graded_by;            //  once done: the worker's name
    broker_backend_t *backend;  //  queue it belongs to
    broker_worker_t *worker;    //  lease holder while running
    int64_t accepted_us;        //  wall clock, when it was accepted
    int64_t dispatched_us;      //  wall clock, first dispatch (0 = never)
    int64_t leased_us;          //  wall clock, latest dispatch (0 = never)
    char status [16];           //  once done: the result's status from the RESULT header, or ""
    int64_t finished_us;        //  wall clock, when the result came
    double queue_s;             //  once done: accepted to first dispatch
    broker_job_t *prev, *next;  //  links in the list of its state
    char *task;                 //  the task's name from the body, or NULL
    char *group;                //  header group, or NULL
    char *trajectory;           //  header trajectory, or NULL
    char *body_tag;             //  the body's tag (what results echo), or NULL
    uint8_t key [BROKER_CACHE_KEY_BYTES];   //  result cache key, when keyed
    bool keyed;                 //  the body decoded as a job and was keyed
    bool leads;                 //  in the leaders table under its key
    uint8_t policy;             //  BROKER_POLICY_*
    bool cancelled;             //  its client gave it up: no RESULT goes out
    bool cached;                //  answered from the cache or by the job it followed
    broker_job_t *leader;       //  JOB_FOLLOWING: the job whose result it takes
    broker_joblist_t followers; //  jobs following this one
    double reward, speedup;     //  once done: from the result (NAN: null)
    common_reward_t rewards;    //  its reward settings, when rewards_read is BROKER_REWARDS_KNOWN
    uint8_t rewards_read;       //  BROKER_REWARDS_*
    int64_t unserved_until_us;  //  monotonic: queued while no worker serves its backend, it
                                //  fails then unless one registers (0: not waiting for one)
    uint32_t unserved_grace_s;  //  the wait it was given, for its message
};

typedef enum {
    WORKER_READY,               //  takes jobs
    WORKER_DRAINING,            //  finishes its leases, takes no new ones
    WORKER_QUARANTINED          //  says its device is unfit: takes nothing
} broker_worker_state_t;

//  What an operator sees of a worker: kgym_workers{state}, QUERY stats and workers.
enum { BROKER_KIND_IDLE, BROKER_KIND_BUSY, BROKER_KIND_DRAINING, BROKER_KIND_QUARANTINED,
       BROKER_KINDS };

//  One registered worker.
struct _broker_worker_t {
    zframe_t *identity;         //  routing id (owned; key in the worker table)
    char name [PROTO_MAX_STR];  //  from READY
    char device [PROTO_MAX_STR];//  from READY
    char host [PROTO_MAX_STR];  //  from READY ("" when not said)
    char model [PROTO_MAX_STR]; //  device without its PCI bus id: the result cache's device
    uint64_t done;              //  results it returned
    uint64_t faults;            //  of which runtime_error or timeout, plus quarantines
    uint64_t bad_results;       //  of which failed the broker's check (made internal_error)
    int64_t since_us;           //  READY (monotonic)
    int64_t heard_us;           //  last message (monotonic)
    uint32_t capacity;          //  concurrent jobs it takes
    double busy;                //  its latest HEARTBEAT's busy ratio, 0 to 1 (-1: none said yet)
    uint32_t pid;               //  its process id, for logs
    broker_worker_state_t state;//  from READY / HEARTBEAT, or DRAIN
    broker_backend_t *backend;  //  what it serves
    size_t slot;                //  index in backend->workers
    broker_joblist_t jobs;      //  jobs it holds a lease on
    int64_t expires_us;         //  dropped when silent past this (monotonic)
};

//  Everything about one backend name ("cpu", "cuda").
struct _broker_backend_t {
    char name [PROTO_MAX_STR];  //  the name
    broker_joblist_t queue;     //  jobs waiting, oldest first
    broker_worker_t **workers;  //  workers serving it
    size_t nworkers;            //  entries used
    size_t maxworkers;          //  entries allocated
    size_t cursor;              //  where the next scan starts (spreads ties)
    char last_device [PROTO_MAX_STR];   //  device of the last worker that served it
    bool unserved;              //  no worker registered while jobs of it wait (logged once)
    bool recheck;               //  its last worker left (or a job was queued again): at the
                                //  batch end, waiting jobs without a wait get one
    int64_t unserved_next_us;   //  monotonic: the earliest of its jobs' unserved_until_us (0: none)
};

//  A submitter: named by the id it sends (stable across reconnects), or by
//  its connection when it sends none.
struct _broker_client_t {
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
    uint64_t bad_results;       //  RESULTs that failed the check (broker_verdict): made internal_error
    uint64_t unserved;          //  jobs failed: no worker of their backend joined within the grace
    uint64_t statuses [BROKER_VERDICT_STATUSES + 1];    //  completed, by status (last: unknown)
} broker_stats_t;

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
} broker_deferred_t;

//  An undeclared group whose summary waits (broker_group_end's settle).
typedef struct {
    zframe_t *identity;         //  its client's routing id then (owned)
    char *owner;                //  the group's owner (broker_owner)
    char *group;                //  the group's name as the client says it
    char *task;                 //  the task of the job that ended it (for its statistics), or NULL
    int64_t due_us;             //  monotonic: when its summary goes out, if still complete
} broker_settling_t;

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
    zhashx_t *jobs;             //  job id -> broker_job_t (owns nothing: jobs freed by hand)
    zhashx_t *worker_table;     //  identity frame -> broker_worker_t
    zhashx_t *backends;         //  name -> broker_backend_t (owns them)
    zhashx_t *clients_by_key;   //  key -> named broker_client_t
    zhashx_t *clients_by_id;    //  identity frame -> broker_client_t it is bound to
    broker_client_t *orphans;   //  owner of stored jobs of anonymous clients after a restart
    broker_joblist_t finished;  //  done jobs, oldest first (retention)
    broker_deferred_t *deferred;//  ACCEPTEDs waiting for the commit
    size_t ndeferred;           //  entries used
    size_t maxdeferred;         //  entries allocated
    uint64_t next_job;          //  next job id
    size_t queued;              //  jobs in all queues
    size_t following;           //  jobs following an identical one (count against max_queue too)
    size_t inflight;            //  jobs leased to workers
    bool dispatch_due;          //  something may be dispatchable at the batch end
    int64_t next_heartbeat_us;  //  when to send heartbeats and check expiry
    proto_msg_t *in;            //  message being handled
    proto_msg_t *out;           //  message being sent (fields lent, see broker_send)
    broker_stats_t stats;       //  counters
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
    zhashx_t *settling;         //  undeclared groups last ended by a job answered at SUBMIT:
                                //  owner + group -> broker_settling_t (owns them)
    int64_t started_us;         //  monotonic, at start
    int64_t next_tasks_flush_us;//  monotonic: when task statistics are written next
    uint32_t rate [BROKER_RATE_SECONDS];        //  completions in each second
    int64_t rate_second [BROKER_RATE_SECONDS];  //  which second each bucket holds
} broker_server_t;

//  A STATS counter and its Prometheus twin.
static inline void
broker_bump (uint64_t *counter, common_metric_t *metric)
{
    (*counter)++;
    common_metric_inc (metric);
}

//  Monotonic clock: deadlines and ages within one run.
static inline int64_t
broker_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  Wall clock: what is stored and compared across restarts.
static inline int64_t
broker_wall_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  --------------------------------------------------------------------------
//  broker_server.c: sending

//  Send self->out to a peer: the identity and body are lent, not taken.
int broker_send (broker_server_t *self, zsock_t *sock, zframe_t *identity, zframe_t *body);

//  ERROR to a peer (nothing when identity is NULL); counts what a client could not take.
void broker_send_error (broker_server_t *self, zsock_t *sock, zframe_t *identity, uint32_t code,
                        const char *reason, uint64_t ref, uint64_t job);

//  --------------------------------------------------------------------------
//  broker_jobs.c: jobs and queues

//  Count one completion in its second, for rate_10s and rate_1m.
void broker_rate_count (broker_server_t *self);

//  Completions per second over the last seconds.
double broker_rate (broker_server_t *self, int seconds);

void broker_joblist_push_back (broker_joblist_t *list, broker_job_t *job);
void broker_joblist_push_front (broker_joblist_t *list, broker_job_t *job);
void broker_joblist_remove (broker_joblist_t *list, broker_job_t *job);

//  Hash table callbacks: 64-bit ids, routing id frames.
size_t broker_u64_hash (const void *key);
int broker_u64_compare (const void *a, const void *b);
size_t broker_frame_hash (const void *key);
int broker_frame_compare (const void *a, const void *b);

//  A table that owns neither keys nor items (default string keys when no hasher).
zhashx_t *broker_table_new (zhashx_hash_fn *hasher, zhashx_comparator_fn *comparator);

//  The backend of that name, created on first use; NULL when out of memory.
broker_backend_t *broker_backend_require (broker_server_t *self, const char *name);

//  The backends table's item destructor.
void broker_backend_free (void **item);

//  Free a job that is in no list any more.
void broker_job_destroy (broker_server_t *self, broker_job_t **job_p);

//  The job is finished with this result (taken) and its verdict: keep it,
//  tell the client (unless send is false), then its followers. device: the
//  grader's, so the result may be cached; NULL for results the broker made.
void broker_job_finish (broker_server_t *self, broker_job_t *job, zframe_t **result_p,
                        const char *graded_by, const broker_verdict_t *verdict,
                        const char *device, bool send);

//  The client gave the job up (CANCEL).
void broker_job_cancel (broker_server_t *self, broker_job_t *job);

//  Take a job that is not leased out of the list that holds it; its
//  followers, if any, are queued on their own.
void broker_job_unlink (broker_server_t *self, broker_job_t *job);

//  Finish a job that is in no list with a result the broker makes
//  (internal_error, reward null: broker_verdict_make) saying message; a
//  job that lost max_attempts workers, one whose result failed the check,
//  one no worker came for. log: say it (per job) at warning level.
void broker_job_fail (broker_server_t *self, broker_job_t *job, const char *message, bool log);

//  Lease waiting jobs to free workers, every backend.
void broker_dispatch_all (broker_server_t *self);

//  A job waits in a backend no registered worker serves: it gets grace_s
//  seconds from now for one to register (kept when it has a wait already),
//  and its client the ERROR 503 notice when notify.
void broker_job_unserved (broker_server_t *self, broker_job_t *job, uint32_t grace_s,
                          bool notify);

//  At the batch end, after its ACCEPTEDs: in each backend marked recheck
//  that no registered worker serves (its last worker left), the waiting
//  jobs without a wait (and those that follow them) start one, their
//  clients told (503).
void broker_unserved_check (broker_server_t *self);

//  A worker of the backend registered: the jobs' waits are over.
void broker_backend_served (broker_server_t *self, broker_backend_t *backend,
                            const char *worker);

//  Fail, as internal_error, the waiting jobs of backends no worker serves
//  whose grace has run out.
void broker_unserved_expire (broker_server_t *self, int64_t now);

//  The cache policies' names, as SUBMIT says them and the store keeps them.
extern const char *const broker_policy_names [BROKER_POLICIES];

//  Everything the store holds, back in memory (at start). 0 or -1 with a reason.
int broker_jobs_load (broker_server_t *self, char *err, size_t errlen);

//  --------------------------------------------------------------------------
//  broker_workers.c: workers and leases

//  The worker's BROKER_KIND_*.
int broker_worker_kind (const broker_worker_t *worker);

//  The registered worker of this routing id, or NULL.
broker_worker_t *broker_worker_lookup (broker_server_t *self, zframe_t *identity);

//  Forget a worker; its jobs go back to the front of their queue (lost:
//  counted against them, but unsent).
void broker_worker_drop (broker_server_t *self, broker_worker_t *worker, const char *why,
                         bool lost, broker_job_t *unsent);

//  A state name to a broker_worker_state_t; -1 when unknown ("" is ready).
int broker_worker_state_parse (const char *name);

void broker_worker_set_state (broker_server_t *self, broker_worker_t *worker,
                              broker_worker_state_t state);

//  READY: register (or re-register) the sender.
void broker_worker_ready (broker_server_t *self, proto_msg_t *msg, int64_t now);

//  RESULT from a registered worker.
void broker_worker_result (broker_server_t *self, broker_worker_t *worker, proto_msg_t *msg);

//  Every heartbeat interval: HEARTBEAT to each worker, drop the silent ones.
void broker_heartbeat (broker_server_t *self, int64_t now);

//  --------------------------------------------------------------------------
//  broker_clients.c: clients, their requests and delivery

broker_client_t *broker_client_new (const char *key);

//  Forget the client's routing id (it went away, or another client took it).
void broker_client_unbind (broker_server_t *self, broker_client_t *client);

//  Free a client nothing refers to any more.
void broker_client_release (broker_server_t *self, broker_client_t *client);

//  From now on, results for client go to this routing id.
void broker_client_bind (broker_server_t *self, broker_client_t *client, zframe_t *identity);

//  The client key of a message (a new string), or NULL when it names none.
char *broker_client_key (const proto_msg_t *msg);

//  The named client of this key (created when create), or NULL.
broker_client_t *broker_client_named (broker_server_t *self, const char *key, bool create);

//  Send a job's result (body lent) to its client, or to "to". 0 or -1.
int broker_send_result (broker_server_t *self, broker_job_t *job, zframe_t *body, zframe_t *to);

//  Send a finished job's kept result again. 0 or -1.
int broker_resend_result (broker_server_t *self, broker_job_t *job, zframe_t *to);

void broker_client_submit (broker_server_t *self, proto_msg_t *msg);
void broker_client_fetch (broker_server_t *self, proto_msg_t *msg);
void broker_client_drain (broker_server_t *self, proto_msg_t *msg);
void broker_client_cancel (broker_server_t *self, proto_msg_t *msg);
void broker_client_disconnect (broker_server_t *self, zframe_t *identity);

//  --------------------------------------------------------------------------
//  broker_queries.c: answers

//  QUERY: ANSWER with a map, or ERROR 400 / 404 / 409 / 413 with the reason.
void broker_client_query (broker_server_t *self, proto_msg_t *msg);

//  The gauges of docs/metrics.md, from the lists themselves.
void broker_update_gauges (broker_server_t *self);

//  The pipe's STATS answer (docs/protocol.md section 11), a new string.
char *broker_stats_json (broker_server_t *self);

//  --------------------------------------------------------------------------
//  broker_coalesce.c: what the broker reads of bodies

//  The leaders table's callbacks: cache keys.
size_t broker_key_hash (const void *key);
int broker_key_compare (const void *a, const void *b);

//  The name a client's groups live under.
void broker_owner (const broker_client_t *client, char *owner, size_t size);

//  The task's name, the body's tag and, unless the job bypasses the cache, its key.
void broker_job_describe (broker_server_t *self, broker_job_t *job, zframe_t *body);

//  A kept result for the job from a device that serves its backend now (or
//  that served it last when none does), or NULL; counts a hit or a miss.
zframe_t *broker_cached_result (broker_server_t *self, broker_job_t *job);

//  A "use" job in flight is the one identical "use" jobs follow.
void broker_lead (broker_server_t *self, broker_job_t *job);
void broker_unlead (broker_server_t *self, broker_job_t *job);

//  The job's reward settings, reading its body now when describing it did
//  not (a body over the broker's own decoding bound); NULL when the job
//  cannot be graded (only invalid or internal_error fit it).
const common_reward_t *broker_job_rewards (broker_job_t *job);

//  A job of a group ended: when that ends the group, its SUMMARY waits for
//  the batch end. settle: the job was answered at SUBMIT (from the cache):
//  an undeclared group's summary then waits a heartbeat interval for more
//  jobs of it (its others may be on their way), and goes out then only if
//  none of its jobs is unfinished.
void broker_group_end (broker_server_t *self, broker_job_t *job, bool counted, bool settle);

//  Send the SUMMARYs of groups that ended in this batch, and of settled
//  groups whose heartbeat has passed.
void broker_send_summaries (broker_server_t *self, int64_t now);

//  The settling table's item destructor.
void broker_settling_free (void **item);

//  When the next held summary is due (monotonic), 0 when none is held.
int64_t broker_settling_next (broker_server_t *self);

#endif
