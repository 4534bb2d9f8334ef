/*  client_kgym - the C client library: submit jobs to a broker, read results.

    One DEALER socket connected to the broker's client endpoint. submit()
    encodes a job object (docs/task-format.md) as msgpack and sends SUBMIT
    with the job's backend and tag in the header; recv() hands back the
    broker's replies one at a time, in arrival order: ACCEPTED (job id
    assigned), RESULT (the result object of docs/results.md, with "job",
    "queue_s" and "worker" added) or ERROR. While idle, recv() sends a
    HEARTBEAT every second, so a silent broker shows in silence_ms().
    One thread owns an instance.
*/
#ifndef CLIENT_KGYM_H
#define CLIENT_KGYM_H

#include <stdint.h>
#include <stddef.h>
#include <jansson.h>
#include "proto_msg.h"

typedef struct _client_kgym_t client_kgym_t;

typedef enum {
    CLIENT_EVENT_NONE = 0,
    CLIENT_EVENT_ACCEPTED,      //  the broker queued the job: ref, job
    CLIENT_EVENT_RESULT,        //  a result: ref, job, queue_s, worker, result
    CLIENT_EVENT_ERROR          //  code, reason; ref (and job) when about a job, else 0
} client_event_type_t;

//  One reply from the broker.
typedef struct {
    client_event_type_t type;   //  what came
    uint64_t ref;               //  the ref given to submit (0: none)
    uint64_t job;               //  broker's job id (0: none)
    uint32_t code;              //  ERROR: proto_err_t
    char reason [PROTO_MAX_STR];//  ERROR: why
    double queue_s;             //  RESULT: seconds queued at the broker
    char worker [PROTO_MAX_STR];//  RESULT: worker name
    json_t *result;             //  RESULT: result object (owned by the event)
} client_event_t;

//  Connect to the broker's client endpoint. NULL on failure (bad endpoint).
//  Connecting does not wait: an unreachable broker shows as no reply.
client_kgym_t *client_kgym_new (const char *endpoint);

//  Send DISCONNECT (the broker drops this client's waiting jobs) and close.
void client_kgym_destroy (client_kgym_t **self_p);

//  Submit a job object (borrowed). Backend from job.task.backend, tag from
//  job.tag. Refs are the caller's; use refs >= 1 (an ERROR with ref 0 is
//  about no job). 0, or -1 with a reason.
int client_kgym_submit (client_kgym_t *self, uint64_t ref, json_t *job, char *err, size_t errlen);

//  Submit a job already encoded as msgpack (size bytes, copied); the header
//  tag is cut to PROTO_MAX_STR - 1 bytes. 0 or -1 with a reason.
int client_kgym_submit_encoded (client_kgym_t *self, uint64_t ref, const char *backend,
                                const char *tag, const void *body, size_t size,
                                char *err, size_t errlen);

//  Wait up to timeout_ms for the next reply. 0 with *event filled (release
//  it with client_event_clear), or -1 when nothing came in time or the wait
//  was interrupted. A RESULT whose body does not decode comes as an ERROR
//  (code 400) carrying its ref and job.
int client_kgym_recv (client_kgym_t *self, int timeout_ms, client_event_t *event);

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
