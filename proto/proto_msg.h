/*  proto_msg - the kgym wire protocol (version 1): one message class.

    Spec: docs/protocol.md. Each message is a ZeroMQ multipart message:
        [routing id]      only on a ROUTER socket (set/read by recv/send)
        frame 0: signature "KGYM" + version byte (1) + command byte  (6 bytes)
        frame 1: header, a msgpack map with the command's fields
        frame 2: body (optional), opaque msgpack (a job or a result)
    Unknown header keys are ignored (extensible); missing required keys and
    wrong types are malformed. Bodies are never decoded here: the broker
    routes them untouched.

    Commands and their header fields (all integers unsigned):
        READY      W->B  backend(str) device(str) capacity(int) name(str) [pid(int)]
        HEARTBEAT  any   -
        DISCONNECT any   [reason(str)]
        SUBMIT     C->B  ref(int) backend(str) [tag(str)]                 body: job
        ACCEPTED   B->C  ref(int) job(int)
        JOB        B->W  job(int) attempt(int)                            body: job
        RESULT     W->B  job(int) attempt(int)                            body: result
        RESULT     B->C  job(int) ref(int) [queue_s(real)] [worker(str)]   body: result
                   (one shape both ways: job required; attempt, ref sent always)
        ERROR      B->any code(int) reason(str) [ref(int)] [job(int)]
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
    PROTO_ERROR = 8
} proto_cmd_t;

//  Error codes carried by ERROR (and used as result "invalid" reasons).
typedef enum {
    PROTO_ERR_MALFORMED = 400,      //  could not decode the message
    PROTO_ERR_UNKNOWN_COMMAND = 401,
    PROTO_ERR_TOO_LARGE = 413,
    PROTO_ERR_NO_BACKEND = 404,     //  no worker of that backend has connected
    PROTO_ERR_OVERLOADED = 429,     //  queue or client limit reached
    PROTO_ERR_UNKNOWN_PEER = 440,   //  worker not registered: send READY again
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
    double queue_s;                 //  RESULT to client: seconds queued
    char backend[PROTO_MAX_STR];    //  READY, SUBMIT
    char device[PROTO_MAX_STR];     //  READY
    char name[PROTO_MAX_STR];       //  READY: worker name; RESULT to client: worker
    char tag[PROTO_MAX_STR];        //  SUBMIT
    char reason[PROTO_MAX_STR];     //  ERROR, DISCONNECT
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
