/*  client_kgym - the C client library: submit jobs to a broker, read results.

    One DEALER socket connected to the broker's client endpoint. submit()
    encodes a job object (docs/task-format.md) as msgpack and sends SUBMIT
    with the job's backend and tag in the header; recv() hands back the
    broker's replies one at a time, in arrival order: ACCEPTED (job id
    assigned), RESULT (the result object of docs/results.md, with "job",
    "queue_s" and "worker" added), ERROR, or DONE (the end of a fetch or a
    drain request). While idle, recv() sends a HEARTBEAT every heartbeat
    interval, so a silent broker shows in silence_ms(). One thread owns an
    instance.

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
} client_kgym_config_t;

void client_kgym_config_default (client_kgym_config_t *cfg);

typedef enum {
    CLIENT_EVENT_NONE = 0,
    CLIENT_EVENT_ACCEPTED,      //  the broker stored the job: ref, job
    CLIENT_EVENT_RESULT,        //  a result: ref, job, queue_s, worker, result
    CLIENT_EVENT_ERROR,         //  code, reason; ref (and job) when about a job, else 0
    CLIENT_EVENT_DONE           //  a fetch or drain finished: ref, count, pending
} client_event_type_t;

//  One reply from the broker.
typedef struct {
    client_event_type_t type;   //  what came
    uint64_t ref;               //  the ref given to submit / fetch / drain (0: none)
    uint64_t job;               //  broker's job id (0: none)
    uint32_t code;              //  ERROR: proto_err_t
    char reason [PROTO_MAX_STR];//  ERROR: why
    double queue_s;             //  RESULT: seconds queued at the broker
    char worker [PROTO_MAX_STR];//  RESULT: worker name
    json_t *result;             //  RESULT: result object (owned by the event)
    uint32_t count;             //  DONE: results sent again / workers told
    uint32_t pending;           //  DONE: matching jobs not finished yet
} client_event_t;

//  Connect to the broker's client endpoint. NULL on failure (bad endpoint,
//  bad certificates) with a reason. Connecting does not wait: an
//  unreachable broker shows as no reply.
client_kgym_t *client_kgym_new_config (const client_kgym_config_t *cfg, char *err, size_t errlen);

//  The same with defaults (a random client id, no CURVE).
client_kgym_t *client_kgym_new (const char *endpoint);

//  Send DISCONNECT (the broker drops this client's waiting jobs) and close.
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

//  Wait up to timeout_ms for the next reply. 0 with *event filled (release
//  it with client_event_clear), or -1 when nothing came in time or the wait
//  was interrupted. A RESULT whose body does not decode comes as an ERROR
//  (code 400) carrying its ref and job.
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
