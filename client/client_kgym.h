/*  client_kgym - the C client library: submit jobs to a broker, read results.

    One DEALER socket connected to the broker's client endpoint. submit()
    encodes a job object (docs/task-format.md) as msgpack and sends SUBMIT
    with the job's backend and tag in the header; recv() hands back the
    broker's replies one at a time, in arrival order: ACCEPTED (job id
    assigned), RESULT (the result object of docs/results.md, with "job",
    "queue_s" and "worker" added), ERROR, or DONE (the end of a fetch or a
    drain request). While idle, recv() sends a HEARTBEAT every heartbeat
    interval, so a silent broker shows in silence_ms(). NOTICE (ERROR 503:
    no worker serves the job's backend yet; it stays queued) and REFUSED
    (the broker refused the security handshake) are events of their own,
    apart from the fatal ERRORs. One thread owns an instance.

    What the broker knows (docs/protocol.md section 14): cancel() gives up
    a job (DONE with count 1 when it was cancelled now); query() sends a
    QUERY whose ANSWER comes as an event; ask() is the blocking form for a
    tool (other events that come meanwhile are kept and handed out by the
    next recv(), in order). A group's SUMMARY comes as an event when the
    group's last job ends. submit_opts() sends a job with its GRPO group,
    trajectory and result cache policy.

    Refs are the caller's, one space for jobs and requests: a ref names
    one thing at a time (a job in flight, or a fetch, drain, cancel or
    query not answered yet). ask() takes its refs from CLIENT_ASK_REF_BASE
    up; keep yours below it.

    Rides out broker restarts and reconnects. Every message carries the
    client's stable id, so the broker knows it on a new connection. The
    library keeps each job it submitted until its result comes; whenever
    its connection is made again (ZeroMQ reconnected it, or the broker was
    silent for liveness heartbeats and the library made a new socket) it
    sends every such job again, marked as a resend: the broker answers a
    job it knows (ACCEPTED again, and its kept result if it has finished)
    and takes one it never stored as new. Replies are de-duplicated here:
    each job id's RESULT is handed out once, each ref's ACCEPTED once. So a
    caller sees every accepted job's result exactly once, provided the
    broker still keeps it (docs/reliability.md).
*/
#ifndef CLIENT_KGYM_H
#define CLIENT_KGYM_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <jansson.h>
#include "proto_msg.h"

typedef struct _client_kgym_t client_kgym_t;

typedef struct {
    const char *endpoint;       //  the broker's client endpoint
    const char *client_id;      //  stable id (up to 255 bytes); NULL: a random one
    const char *curve_secret;   //  own secret certificate: CURVE to the broker (NULL: none)
    const char *broker_key;     //  the broker's public certificate (with curve_secret)
    uint32_t heartbeat_ms;      //  idle time before a HEARTBEAT (default 1000)
    uint32_t liveness;          //  silent heartbeats before a new socket (default 3)
    bool keep_jobs;             //  close without DISCONNECT: for a tool that borrows a
                                //  trainer's client_id (fetch), whose waiting jobs a
                                //  DISCONNECT would drop at the broker
} client_kgym_config_t;

void client_kgym_config_default (client_kgym_config_t *cfg);

typedef enum {
    CLIENT_EVENT_NONE = 0,
    CLIENT_EVENT_ACCEPTED,      //  the broker stored the job: ref, job
    CLIENT_EVENT_RESULT,        //  a result: ref, job, queue_s, worker, result
    CLIENT_EVENT_ERROR,         //  code, reason; ref (and job) when about a job, else 0
    CLIENT_EVENT_DONE,          //  a fetch, drain or cancel finished: ref, count, pending
    CLIENT_EVENT_ANSWER,        //  the answer to a query: ref, answer
    CLIENT_EVENT_SUMMARY,       //  a GRPO group ended: group, summary
    CLIENT_EVENT_NOTICE,        //  not an error, the job goes on: code (503), reason, ref,
                                //  job, backend
    CLIENT_EVENT_REFUSED        //  the connection's security handshake failed: code, reason
} client_event_type_t;

//  ERROR code the broker sends, after ACCEPTED, for a job no connected
//  worker serves (docs/protocol.md 6.1): informational, the job stays
//  queued; handed out as a NOTICE. If no worker of its backend joins in
//  the broker's grace period, the job ends with a broker-made RESULT
//  (status internal_error).
#define CLIENT_NOTICE_NO_WORKER 503

//  The result cache policy of a job (docs/protocol.md 14.1).
typedef enum {
    CLIENT_CACHE_USE = 0,       //  a kept result answers it; identical jobs in flight are joined
    CLIENT_CACHE_REFRESH,       //  graded again; its result replaces the kept one
    CLIENT_CACHE_BYPASS         //  graded again; its result is not kept
} client_cache_policy_t;

//  Per-job options of a SUBMIT beyond the job itself; all zero: none (as
//  client_kgym_submit sends it). Strings are copied.
typedef struct {
    const char *group;          //  GRPO group id, up to 255 bytes (NULL or "": none)
    uint32_t group_size;        //  jobs in the group (0: not said)
    const char *trajectory;     //  multi-turn trajectory id, up to 255 bytes (NULL or "": none)
    client_cache_policy_t cache;//  result cache policy (default use)
} client_submit_opts_t;

//  ask() numbers its queries from here up (callers' refs stay below).
#define CLIENT_ASK_REF_BASE (UINT64_C (1) << 62)

//  One reply from the broker.
typedef struct {
    client_event_type_t type;   //  what came
    uint64_t ref;               //  the ref given to submit / fetch / drain (0: none)
    uint64_t job;               //  broker's job id (0: none)
    uint32_t code;              //  ERROR: proto_err_t; NOTICE: 503; REFUSED: the handshake
                                //  failure's value (a ZAP status, a ZMTP protocol error)
    char reason [PROTO_MAX_STR];//  ERROR, NOTICE, REFUSED: why
    bool local;                 //  ERROR: made here, not sent by the broker (a reply whose
                                //  body did not decode: a malformed result is its job's end)
    double queue_s;             //  RESULT: seconds queued at the broker
    char worker [PROTO_MAX_STR];//  RESULT: worker name
    json_t *result;             //  RESULT: result object (owned by the event)
    uint32_t count;             //  DONE: results sent again / workers told
    uint32_t pending;           //  DONE: matching jobs not finished yet
    json_t *answer;             //  ANSWER: the answer map (owned by the event)
    char group [PROTO_MAX_STR]; //  SUMMARY: the group
    json_t *summary;            //  SUMMARY: the group's summary map (owned by the event)
    char backend [PROTO_MAX_STR];//  NOTICE: the job's backend, as it was submitted ("" unknown)
} client_event_t;

//  Whether endpoint is one a client can connect to: TRANSPORT://ADDRESS
//  with tcp (HOST:PORT, PORT 1..65535, HOST not '*'), ipc or inproc; with
//  resolve, a tcp host must also resolve (DNS). 0, or -1 with a reason that
//  says what is wrong and how to write it.
int client_kgym_check_endpoint (const char *endpoint, bool resolve, char *err, size_t errlen);

//  Connect to the broker's client endpoint. NULL on failure (bad endpoint,
//  bad certificates) with a reason. Connecting does not wait: an
//  unreachable broker shows as no reply, a broker that refuses the
//  handshake (CURVE: a key it does not know, security on one side only) as
//  a REFUSED event.
client_kgym_t *client_kgym_new_config (const client_kgym_config_t *cfg, char *err, size_t errlen);

//  The same with defaults (a random client id, no CURVE).
client_kgym_t *client_kgym_new (const char *endpoint);

//  Send DISCONNECT (the broker drops this client's waiting jobs; not with
//  keep_jobs) and close.
void client_kgym_destroy (client_kgym_t **self_p);

//  The client's id (borrowed).
const char *client_kgym_id (client_kgym_t *self);

//  Submit a job object (borrowed). Backend from job.task.backend, tag from
//  job.tag. Refs are the caller's: use refs >= 1 (an ERROR with ref 0 is
//  about no job), one per job while it is unanswered (a ref in flight is
//  refused). 0, or -1 with a reason.
int client_kgym_submit (client_kgym_t *self, uint64_t ref, json_t *job, char *err, size_t errlen);

//  Submit a job already encoded as msgpack (size bytes, copied); the header
//  tag is cut to PROTO_MAX_STR - 1 bytes. 0 or -1 with a reason.
int client_kgym_submit_encoded (client_kgym_t *self, uint64_t ref, const char *backend,
                                const char *tag, const void *body, size_t size,
                                char *err, size_t errlen);

//  The same with options (opts may be NULL: none). Group and trajectory
//  go in the SUBMIT header (and are sent again with the job on a resend);
//  a string longer than 255 bytes is refused, not cut. 0, or -1 with a reason.
int client_kgym_submit_opts (client_kgym_t *self, uint64_t ref, json_t *job,
                             const client_submit_opts_t *opts, char *err, size_t errlen);

//  submit_encoded with options (opts may be NULL). 0, or -1 with a reason.
int client_kgym_submit_encoded_opts (client_kgym_t *self, uint64_t ref, const char *backend,
                                     const char *tag, const void *body, size_t size,
                                     const client_submit_opts_t *opts, char *err, size_t errlen);

//  "use", "refresh", "bypass".
const char *client_cache_policy_name (client_cache_policy_t policy);

//  The policy named name; 0, or -1 when name is none of the three.
int client_cache_policy_parse (const char *name, client_cache_policy_t *policy);

//  Send again a job the broker refused (ERROR 429 overloaded, 500): the
//  library keeps it until its result comes or forget() drops it.
//  0, or -1 with a reason (no such refused job).
int client_kgym_retry (client_kgym_t *self, uint64_t ref, char *err, size_t errlen);

//  Give up a job: its result, if one comes, is still handed out, but it is
//  not sent again.
void client_kgym_forget (client_kgym_t *self, uint64_t ref);

//  Ask for the kept results of this client's jobs: one job id (job != 0),
//  or every job with this tag (tag != NULL), or all of them. They come as
//  RESULT events (each job id once, as always), then a DONE event with ref.
//  Results of jobs submitted by an earlier process come too when it used
//  the same client id. 0, or -1 with a reason.
int client_kgym_fetch (client_kgym_t *self, uint64_t ref, uint64_t job, const char *tag,
                       char *err, size_t errlen);

//  Ask the broker to drain the workers named worker: a DONE event (count:
//  workers told) or an ERROR 404. 0, or -1 with a reason.
int client_kgym_drain (client_kgym_t *self, uint64_t ref, const char *worker,
                       char *err, size_t errlen);

//  Give up job (the broker's id, from ACCEPTED): the broker drops it if
//  queued, or lets it finish on its worker unseen; no RESULT comes for it
//  (one already on its way may still come, and is handed out). The job is
//  no longer sent again on a reconnect. The broker answers a DONE event
//  with ref: count 1 when it was cancelled now, 0 when it was unknown, not
//  this client's, finished or cancelled already. 0, or -1 with a reason.
int client_kgym_cancel (client_kgym_t *self, uint64_t ref, uint64_t job, char *err, size_t errlen);

//  Ask the broker something (docs/protocol.md 14.3): query is a map with
//  "what" and its parameters (borrowed), sent as msgpack. The reply is an
//  ANSWER event with ref, or an ERROR event with ref (400 bad query, 404
//  unknown job). An older broker answers ERROR 401 without a ref. 0, or -1
//  with a reason.
int client_kgym_query (client_kgym_t *self, uint64_t ref, json_t *query, char *err, size_t errlen);

//  Send query and wait up to timeout_ms for its answer: a new reference to
//  the answer map, or NULL with the reason in err (the broker's ERROR code
//  and reason, no answer in time, interrupted). Sent again when the
//  connection is made again meanwhile. Other events that come while it
//  waits are kept for recv(), in their order; a REFUSED ends the wait (its
//  reason in err).
json_t *client_kgym_ask (client_kgym_t *self, json_t *query, int timeout_ms,
                         char *err, size_t errlen);

//  Wait up to timeout_ms for the next reply. 0 with *event filled (release
//  it with client_event_clear), or -1 when nothing came in time or the wait
//  was interrupted. A RESULT whose body does not decode or is not a map
//  comes as an ERROR 400 with local set, carrying its ref and job: that
//  job's end (no other result of it is handed out). An ANSWER that does
//  not decode is the same with its ref; a SUMMARY without a ref. ERROR 503
//  comes as a NOTICE (the job stays pending, its result comes later); a
//  failed security handshake as one REFUSED (again only after a handshake
//  succeeded; one without detail only when it repeats). An ANSWER to no
//  query in flight (a second answer to a query sent again) is dropped as a
//  duplicate.
int client_kgym_recv (client_kgym_t *self, int timeout_ms, client_event_t *event);

//  Jobs submitted whose result has not come yet.
size_t client_kgym_pending (client_kgym_t *self);

//  Times the connection was made again (and unanswered jobs sent again).
uint64_t client_kgym_reconnects (client_kgym_t *self);

//  Replies dropped as duplicates (a result or ACCEPTED seen before).
uint64_t client_kgym_duplicates (client_kgym_t *self);

//  Milliseconds since the broker last sent anything (since new when never).
int64_t client_kgym_silence_ms (client_kgym_t *self);

//  True once the broker has sent anything at all.
bool client_kgym_heard (client_kgym_t *self);

//  Release what an event owns and zero it.
void client_event_clear (client_event_t *event);

//  A new object: "candidate" first, then every key of result (borrowed) in
//  its order. The one format of a result line for `kgym submit` and `kgym
//  eval`. NULL when result is not an object.
json_t *client_result_line (json_t *result, const char *candidate);

#endif
