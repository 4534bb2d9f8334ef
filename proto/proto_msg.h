/*  proto_msg - the kgym wire protocol (version 1): one message class.

    Spec: docs/protocol.md. Each message is a ZeroMQ multipart message:
        [routing id]      only on a ROUTER socket (set/read by recv/send)
        frame 0: signature "KGYM" + version byte (1) + command byte  (6 bytes)
        frame 1: header, a msgpack map with the command's fields
        frame 2: body (optional), opaque msgpack (a job or a result)
    Unknown header keys are ignored (extensible); missing required keys and
    wrong types are malformed. Bodies are never decoded here: the broker
    routes them untouched (it reads a job body once, to key its result
    cache; docs/protocol.md section 14).

    Commands and their header fields (all integers unsigned):
        READY      W->B  backend(str) device(str) capacity(int) name(str) [pid(int)]
                         [state(str)] [host(str)]
        HEARTBEAT  any   [client(str)] (C->B) [state(str)] [busy(real 0..1)] (W->B)
        DISCONNECT any   [reason(str)]
        SUBMIT     C->B  ref(int) backend(str) [tag(str)] [client(str)] [retry(int)]
                         [group(str)] [group_size(int)] [trajectory(str)] [cache(str)]
                                                                          body: job
        ACCEPTED   B->C  ref(int) job(int)
        JOB        B->W  job(int) attempt(int)                            body: job
        RESULT     W->B  job(int) attempt(int) [status(str)]              body: result
        RESULT     B->C  job(int) ref(int) [queue_s(real)] [worker(str)] [status(str)]
                                                                          body: result
                   (one shape both ways: job required; attempt, ref sent always;
                   status: the result body's status, so the broker counts
                   verdicts without decoding bodies)
        ERROR      B->any code(int) reason(str) [ref(int)] [job(int)]
        FETCH      C->B  ref(int) client(str) [job(int)] [tag(str)]
        DONE       B->C  ref(int) count(int) [pending(int)]
        DRAIN      C->B  ref(int) name(str);  B->W  [reason(str)]
        CANCEL     C->B  ref(int) job(int) [client(str)]           (reply: DONE)
        QUERY      C->B  ref(int) [client(str)]                    body: query
        ANSWER     B->C  ref(int)                                  body: answer
        SUMMARY    B->C  group(str)                                body: summary
    The ZAP User-Id of the connection (CURVE: the peer's public key in Z85)
    is read into user_id on receive.
*/
#ifndef PROTO_MSG_H
#define PROTO_MSG_H

#include <czmq.h>
#include <stdint.h>
#include <stdbool.h>

#define PROTO_VERSION 1
#define PROTO_MAX_STR 256           //  bytes of a header string field (incl. NUL)
#define PROTO_MAX_HEADER 4096       //  bytes of a header frame
#define PROTO_MAX_BODY (16u << 20)  //  bytes of a body frame (also ZMQ_MAXMSGSIZE)

typedef enum {
    PROTO_READY = 1,
    PROTO_HEARTBEAT = 2,
    PROTO_DISCONNECT = 3,
    PROTO_SUBMIT = 4,
    PROTO_ACCEPTED = 5,
    PROTO_JOB = 6,
    PROTO_RESULT = 7,
    PROTO_ERROR = 8,
    PROTO_FETCH = 9,
    PROTO_DONE = 10,
    PROTO_DRAIN = 11,
    PROTO_CANCEL = 12,
    PROTO_QUERY = 13,
    PROTO_ANSWER = 14,
    PROTO_SUMMARY = 15
} proto_cmd_t;

#define PROTO_CMD_MAX PROTO_SUMMARY //  highest command number
#define PROTO_KEY_Z85 40            //  chars of a CURVE public key in Z85

//  Error codes carried by ERROR (and used as result "invalid" reasons).
typedef enum {
    PROTO_ERR_MALFORMED = 400,      //  could not decode the message
    PROTO_ERR_UNKNOWN_COMMAND = 401,
    PROTO_ERR_TOO_LARGE = 413,
    PROTO_ERR_NOT_FOUND = 404,      //  DRAIN: no worker of that name
    PROTO_ERR_CONFLICT = 409,       //  QUERY trajectory put: another writer came first
    PROTO_ERR_OVERLOADED = 429,     //  queue or client limit reached
    PROTO_ERR_UNKNOWN_PEER = 440,   //  worker not registered: send READY again
    PROTO_ERR_NO_WORKER = 503,      //  a notice, not a refusal: no worker serves the job's backend yet
    PROTO_ERR_INTERNAL = 500
} proto_err_t;

//  One message. Fields not used by cmd are zero / empty.
typedef struct {
    proto_cmd_t cmd;                //  command
    zframe_t *routing_id;           //  peer identity on ROUTER sockets (owned), or NULL
    uint64_t ref;                   //  client's reference for a job
    uint64_t job;                   //  broker's job id
    uint32_t attempt;               //  dispatch attempt (lease)
    uint32_t capacity;              //  READY: concurrent jobs the worker takes
    uint32_t code;                  //  ERROR: proto_err_t
    uint32_t pid;                   //  READY: worker process id
    uint32_t retry;                 //  SUBMIT: 1 = a resend of ref (may be accepted already)
    uint32_t count;                 //  DONE: results sent / workers told
    uint32_t pending;               //  DONE: matching jobs not finished yet
    uint32_t group_size;            //  SUBMIT: the group's declared size (0 = not said)
    double queue_s;                 //  RESULT to client: seconds queued
    double busy;                    //  HEARTBEAT from a worker: share of its run slots' wall time
                                    //  jobs held lately, 0 to 1 (-1 = not said)
    char backend[PROTO_MAX_STR];    //  READY, SUBMIT
    char device[PROTO_MAX_STR];     //  READY
    char name[PROTO_MAX_STR];       //  READY: worker name; RESULT to client: worker; DRAIN
    char tag[PROTO_MAX_STR];        //  SUBMIT, FETCH
    char reason[PROTO_MAX_STR];     //  ERROR, DISCONNECT, DRAIN
    char client[PROTO_MAX_STR];     //  SUBMIT, FETCH, HEARTBEAT: the client's stable id
    char state[PROTO_MAX_STR];      //  READY, HEARTBEAT from a worker: its state
    char status[PROTO_MAX_STR];     //  RESULT: the result's status ("" = not said)
    char group[PROTO_MAX_STR];      //  SUBMIT, SUMMARY: GRPO group id
    char trajectory[PROTO_MAX_STR]; //  SUBMIT: multi-turn trajectory id
    char cache[PROTO_MAX_STR];      //  SUBMIT: result cache policy: use (""), refresh, bypass
    char host[PROTO_MAX_STR];       //  READY: the worker's host name
    char user_id[PROTO_KEY_Z85 + 1];//  received: ZAP User-Id of the connection ("" = none)
    zframe_t *body;                 //  job or result (owned), or NULL
} proto_msg_t;

proto_msg_t *proto_msg_new (proto_cmd_t cmd);
void proto_msg_destroy (proto_msg_t **self_p);

//  Receive one message (resets self first). Returns 0 on success; -1 when
//  interrupted or nothing could be read; -2 when malformed: then
//  self->routing_id is still set (so the caller can reply), self->code is
//  the ERROR code to reply with (400, 401 unknown command, 413 too large),
//  self->reason says why, and self->cmd is the command byte when it was a
//  known one (else 0). Always consumes every frame of the message.
int proto_msg_recv (proto_msg_t *self, zsock_t *sock);

//  Judge a message's frames once every one is in: what recv does after
//  reading them, without a socket (tests and fuzz/ call it directly).
//  frame0 and header are the bytes of frames 0 and 1; a body frame, when
//  one came, must already be in self->body (set_body). Clears every header
//  field first and keeps the routing id. Returns 0, or -2 when malformed
//  with code, reason and cmd as recv sets them (the body is then destroyed).
int proto_msg_decode (proto_msg_t *self, const void *frame0, size_t frame0_size,
                      const void *header, size_t header_size);

//  Send; prepends routing_id when set. The body is sent and kept (a
//  zmq_msg_copy is sent, which shares the bytes), so a message can be
//  resent. On a ROUTER it never blocks (ZMQ_DONTWAIT). Returns 0, or -1 with
//  errno (EHOSTUNREACH on a ROUTER with ZMQ_ROUTER_MANDATORY for a peer that
//  has gone, EAGAIN for a peer at its high-water mark, EINVAL for a command
//  that needs a body and has none).
int proto_msg_send (proto_msg_t *self, zsock_t *sock);

//  Take ownership of a body / routing id (caller's pointer is NULLed).
void proto_msg_set_body (proto_msg_t *self, zframe_t **body_p);
void proto_msg_set_routing_id (proto_msg_t *self, zframe_t **routing_id_p);
//  Hand the body to the caller (self->body becomes NULL).
zframe_t *proto_msg_get_body (proto_msg_t *self);

//  Reset every field to the empty message of cmd (keeps nothing).
void proto_msg_reset (proto_msg_t *self, proto_cmd_t cmd);

//  "READY", "JOB", ... ("UNKNOWN" otherwise).
const char *proto_cmd_name (proto_cmd_t cmd);

//  Copy a string into a header field, truncated to fit.
void proto_msg_set_str (char field[PROTO_MAX_STR], const char *value);

//  Apply the socket options every kgym socket uses: bounded HWMs (10000),
//  maximum message size (PROTO_MAX_BODY + 64 KiB), linger (0 on ROUTERs,
//  200 ms on others so a last DISCONNECT leaves), and ZMQ_ROUTER_MANDATORY
//  on ROUTER sockets. Call before bind/connect.
void proto_sock_configure (zsock_t *sock, bool router);

#endif
