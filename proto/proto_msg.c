/*  proto_msg - the kgym wire protocol (version 1): one message class.

    Encodes and decodes the frames described in docs/protocol.md. The
    header is packed straight from the typed fields with msgpack-c's packer
    into a stack buffer, and read back with the bounded reader proto_mpr:
    no jansson and no allocation on this path but the frames themselves.
    Bodies are moved, never decoded or copied (a resend shares the bytes
    through zmq_msg_copy).
*/
#include "proto_msg.h"
#include <math.h>
#include "proto_mpr.h"
#include <msgpack.h>
#include <string.h>
#include <errno.h>

#define PROTO_SIGNATURE "KGYM"
#define PROTO_FRAME0_SIZE 6
#define PROTO_HWM 10000                 //  messages queued per peer, each way
#define PROTO_DEALER_LINGER_MS 200      //  time for a last DISCONNECT to leave

//  Header fields, one bit each.
enum {
    F_REF = 1 << 0,
    F_JOB = 1 << 1,
    F_ATTEMPT = 1 << 2,
    F_CAPACITY = 1 << 3,
    F_CODE = 1 << 4,
    F_PID = 1 << 5,
    F_QUEUE_S = 1 << 6,
    F_BACKEND = 1 << 7,
    F_DEVICE = 1 << 8,
    F_NAME = 1 << 9,
    F_WORKER = 1 << 10,
    F_TAG = 1 << 11,
    F_REASON = 1 << 12,
    F_CLIENT = 1 << 13,
    F_RETRY = 1 << 14,
    F_STATE = 1 << 15,
    F_COUNT = 1 << 16,
    F_PENDING = 1 << 17,
    F_STATUS = 1 << 18,
    F_GROUP = 1 << 19,
    F_GROUP_SIZE = 1 << 20,
    F_TRAJECTORY = 1 << 21,
    F_CACHE = 1 << 22,
    F_HOST = 1 << 23,
    F_BUSY = 1 << 24
};

typedef enum { T_U64, T_U32, T_REAL, T_RATIO, T_STR } s_field_type_t;

//  How one header key maps to a field of proto_msg_t.
typedef struct {
    const char *key;            //  name on the wire
    size_t keylen;              //  strlen (key)
    unsigned bit;               //  F_*
    s_field_type_t type;        //  wire type expected
    size_t offset;              //  where it lands in proto_msg_t
} s_field_t;

#define S_FIELD(k, b, t, m) { k, sizeof (k) - 1, b, t, offsetof (proto_msg_t, m) }
static const s_field_t s_fields [] = {
    S_FIELD ("ref", F_REF, T_U64, ref),
    S_FIELD ("job", F_JOB, T_U64, job),
    S_FIELD ("attempt", F_ATTEMPT, T_U32, attempt),
    S_FIELD ("capacity", F_CAPACITY, T_U32, capacity),
    S_FIELD ("code", F_CODE, T_U32, code),
    S_FIELD ("pid", F_PID, T_U32, pid),
    S_FIELD ("queue_s", F_QUEUE_S, T_REAL, queue_s),
    S_FIELD ("backend", F_BACKEND, T_STR, backend),
    S_FIELD ("device", F_DEVICE, T_STR, device),
    S_FIELD ("name", F_NAME, T_STR, name),
    S_FIELD ("worker", F_WORKER, T_STR, name),
    S_FIELD ("tag", F_TAG, T_STR, tag),
    S_FIELD ("reason", F_REASON, T_STR, reason),
    S_FIELD ("client", F_CLIENT, T_STR, client),
    S_FIELD ("retry", F_RETRY, T_U32, retry),
    S_FIELD ("state", F_STATE, T_STR, state),
    S_FIELD ("count", F_COUNT, T_U32, count),
    S_FIELD ("pending", F_PENDING, T_U32, pending),
    S_FIELD ("status", F_STATUS, T_STR, status),
    S_FIELD ("group", F_GROUP, T_STR, group),
    S_FIELD ("group_size", F_GROUP_SIZE, T_U32, group_size),
    S_FIELD ("trajectory", F_TRAJECTORY, T_STR, trajectory),
    S_FIELD ("cache", F_CACHE, T_STR, cache),
    S_FIELD ("host", F_HOST, T_STR, host),
    S_FIELD ("busy", F_BUSY, T_RATIO, busy),
};
#define S_NFIELDS (sizeof (s_fields) / sizeof (s_fields [0]))

//  What each command may carry and must carry.
typedef struct {
    const char *name;           //  for logs
    unsigned allowed;           //  keys read (others are ignored)
    unsigned required;          //  keys that must be present
    bool body;                  //  a body frame must (true) or must not (false) follow
} s_command_t;

static const s_command_t s_commands [] = {
    [0] = { "UNKNOWN", 0, 0, false },
    [PROTO_READY] = { "READY", F_BACKEND | F_DEVICE | F_CAPACITY | F_NAME | F_PID | F_STATE | F_HOST,
                      F_BACKEND | F_DEVICE | F_CAPACITY | F_NAME, false },
    [PROTO_HEARTBEAT] = { "HEARTBEAT", F_CLIENT | F_STATE | F_BUSY, 0, false },
    [PROTO_DISCONNECT] = { "DISCONNECT", F_REASON, 0, false },
    [PROTO_SUBMIT] = { "SUBMIT", F_REF | F_BACKEND | F_TAG | F_CLIENT | F_RETRY | F_GROUP
                                 | F_GROUP_SIZE | F_TRAJECTORY | F_CACHE,
                       F_REF | F_BACKEND, true },
    [PROTO_ACCEPTED] = { "ACCEPTED", F_REF | F_JOB, F_REF | F_JOB, false },
    [PROTO_JOB] = { "JOB", F_JOB | F_ATTEMPT, F_JOB | F_ATTEMPT, true },
    [PROTO_RESULT] = { "RESULT", F_JOB | F_ATTEMPT | F_REF | F_QUEUE_S | F_WORKER | F_STATUS,
                       F_JOB, true },
    [PROTO_ERROR] = { "ERROR", F_CODE | F_REASON | F_REF | F_JOB, F_CODE | F_REASON, false },
    [PROTO_FETCH] = { "FETCH", F_REF | F_CLIENT | F_JOB | F_TAG, F_REF | F_CLIENT, false },
    [PROTO_DONE] = { "DONE", F_REF | F_COUNT | F_PENDING, F_REF | F_COUNT, false },
    [PROTO_DRAIN] = { "DRAIN", F_REF | F_NAME | F_REASON, 0, false },
    [PROTO_CANCEL] = { "CANCEL", F_REF | F_JOB | F_CLIENT, F_REF | F_JOB, false },
    [PROTO_QUERY] = { "QUERY", F_REF | F_CLIENT, F_REF, true },
    [PROTO_ANSWER] = { "ANSWER", F_REF, F_REF, true },
    [PROTO_SUMMARY] = { "SUMMARY", F_GROUP, F_GROUP, true },
};
#define S_NCOMMANDS (sizeof (s_commands) / sizeof (s_commands [0]))

static bool
s_command_valid (int cmd)
{
    return cmd >= PROTO_READY && cmd <= PROTO_CMD_MAX;
}

const char *
proto_cmd_name (proto_cmd_t cmd)
{
    return s_command_valid ((int) cmd)? s_commands [cmd].name: "UNKNOWN";
}

void
proto_msg_set_str (char field [PROTO_MAX_STR], const char *value)
{
    if (!value)
        value = "";
    size_t len = strnlen (value, PROTO_MAX_STR - 1);
    memcpy (field, value, len);
    field [len] = 0;
}

static void s_clear_fields (proto_msg_t *self, proto_cmd_t cmd);

proto_msg_t *
proto_msg_new (proto_cmd_t cmd)
{
    proto_msg_t *self = (proto_msg_t *) calloc (1, sizeof (proto_msg_t));
    if (self)
        s_clear_fields (self, cmd);
    return self;
}

void
proto_msg_destroy (proto_msg_t **self_p)
{
    if (self_p && *self_p) {
        proto_msg_t *self = *self_p;
        zframe_destroy (&self->routing_id);
        zframe_destroy (&self->body);
        free (self);
        *self_p = NULL;
    }
}

//  Empty every header field and set cmd; the frames are left alone.
static void
s_clear_fields (proto_msg_t *self, proto_cmd_t cmd)
{
    //  Only the first byte of each string needs clearing; zero the numbers.
    self->cmd = cmd;
    self->ref = self->job = 0;
    self->attempt = self->capacity = self->code = self->pid = 0;
    self->retry = self->count = self->pending = 0;
    self->queue_s = 0;
    self->busy = -1;
    self->backend [0] = self->device [0] = self->name [0] = 0;
    self->tag [0] = self->reason [0] = 0;
    self->client [0] = self->state [0] = self->status [0] = 0;
    self->group [0] = self->trajectory [0] = self->cache [0] = self->host [0] = 0;
    self->group_size = 0;
}

void
proto_msg_reset (proto_msg_t *self, proto_cmd_t cmd)
{
    zframe_destroy (&self->routing_id);
    zframe_destroy (&self->body);
    s_clear_fields (self, cmd);
    self->user_id [0] = 0;
}

void
proto_msg_set_body (proto_msg_t *self, zframe_t **body_p)
{
    zframe_destroy (&self->body);
    self->body = *body_p;
    *body_p = NULL;
}

void
proto_msg_set_routing_id (proto_msg_t *self, zframe_t **routing_id_p)
{
    zframe_destroy (&self->routing_id);
    self->routing_id = *routing_id_p;
    *routing_id_p = NULL;
}

zframe_t *
proto_msg_get_body (proto_msg_t *self)
{
    zframe_t *body = self->body;
    self->body = NULL;
    return body;
}

//  --------------------------------------------------------------------------
//  Decoding

//  Mark self malformed with an error code and a reason.
static int
s_malformed (proto_msg_t *self, uint32_t code, const char *reason)
{
    self->code = code;
    proto_msg_set_str (self->reason, reason);
    return -2;
}

//  Read the header map into the typed fields.
static int
s_decode_header (proto_msg_t *self, const uint8_t *data, size_t size)
{
    const s_command_t *command = &s_commands [self->cmd];
    proto_mpr_t reader;
    proto_mpr_init (&reader, data, size);
    proto_mpr_item_t item;
    char why [PROTO_MAX_STR];

    if (proto_mpr_next (&reader, &item))
        return s_malformed (self, PROTO_ERR_MALFORMED, reader.reason);
    if (item.type != MPR_MAP)
        return s_malformed (self, PROTO_ERR_MALFORMED, "header is not a map");

    unsigned seen = 0;
    for (uint32_t i = 0; i < item.count; i++) {
        proto_mpr_item_t key;
        if (proto_mpr_next (&reader, &key))
            return s_malformed (self, PROTO_ERR_MALFORMED, reader.reason);
        if (key.type != MPR_STR)
            return s_malformed (self, PROTO_ERR_MALFORMED, "header key is not a string");
        const s_field_t *field = NULL;
        for (size_t f = 0; f < S_NFIELDS; f++)
            if ((s_fields [f].bit & command->allowed)
            &&  s_fields [f].keylen == key.len
            &&  memcmp (s_fields [f].key, key.str, key.len) == 0) {
                field = &s_fields [f];
                break;
            }
        if (!field) {
            //  Unknown keys are room for later versions: skip the value.
            if (proto_mpr_skip (&reader, 8))
                return s_malformed (self, PROTO_ERR_MALFORMED, reader.reason);
            continue;
        }
        if (seen & field->bit) {
            snprintf (why, sizeof (why), "duplicate header field '%s'", field->key);
            return s_malformed (self, PROTO_ERR_MALFORMED, why);
        }
        seen |= field->bit;

        proto_mpr_item_t value;
        if (proto_mpr_next (&reader, &value))
            return s_malformed (self, PROTO_ERR_MALFORMED, reader.reason);
        char *target = (char *) self + field->offset;
        bool ok = true;
        switch (field->type) {
            case T_U64:
                ok = value.type == MPR_UINT;
                if (ok)
                    *(uint64_t *) target = value.u;
                break;
            case T_U32:
                ok = value.type == MPR_UINT && value.u <= UINT32_MAX;
                if (ok)
                    *(uint32_t *) target = (uint32_t) value.u;
                break;
            case T_REAL:
                //  Finite only: a NaN or infinity has no meaning in any field.
                ok = (value.type == MPR_FLOAT && isfinite (value.f)) || value.type == MPR_UINT;
                if (ok)
                    *(double *) target = value.type == MPR_FLOAT? value.f: (double) value.u;
                break;
            case T_RATIO:
                //  A share: 0 to 1, nothing else means anything.
                ok = (value.type == MPR_FLOAT && value.f >= 0 && value.f <= 1) || (value.type == MPR_UINT && value.u <= 1);
                if (ok)
                    *(double *) target = value.type == MPR_FLOAT? value.f: (double) value.u;
                else
                if (value.type == MPR_FLOAT || value.type == MPR_UINT) {
                    snprintf (why, sizeof (why), "header field '%s' is not between 0 and 1", field->key);
                    return s_malformed (self, PROTO_ERR_MALFORMED, why);
                }
                break;
            case T_STR:
                if (value.type != MPR_STR)
                    ok = false;
                else
                if (value.len >= PROTO_MAX_STR) {
                    snprintf (why, sizeof (why), "header field '%s' longer than %d bytes",
                              field->key, PROTO_MAX_STR - 1);
                    return s_malformed (self, PROTO_ERR_MALFORMED, why);
                }
                else
                if (memchr (value.str, 0, value.len)) {
                    snprintf (why, sizeof (why), "header field '%s' holds a NUL byte", field->key);
                    return s_malformed (self, PROTO_ERR_MALFORMED, why);
                }
                else {
                    memcpy (target, value.str, value.len);
                    target [value.len] = 0;
                }
                break;
        }
        if (!ok) {
            snprintf (why, sizeof (why), "header field '%s' has the wrong type", field->key);
            return s_malformed (self, PROTO_ERR_MALFORMED, why);
        }
    }
    if (proto_mpr_left (&reader) > 0)
        return s_malformed (self, PROTO_ERR_MALFORMED, "trailing bytes after the header map");
    unsigned missing = command->required & ~seen;
    if (missing) {
        for (size_t f = 0; f < S_NFIELDS; f++)
            if (s_fields [f].bit & missing) {
                snprintf (why, sizeof (why), "%s without '%s'", command->name, s_fields [f].key);
                break;
            }
        return s_malformed (self, PROTO_ERR_MALFORMED, why);
    }
    return 0;
}

//  Read and drop the rest of a multipart message.
static int
s_drain (void *handle)
{
    int more = 0;
    size_t more_size = sizeof (more);
    int dropped = 0;
    while (zmq_getsockopt (handle, ZMQ_RCVMORE, &more, &more_size) == 0 && more) {
        zmq_msg_t part;
        zmq_msg_init (&part);
        if (zmq_msg_recv (&part, handle, 0) == -1) {
            zmq_msg_close (&part);
            break;
        }
        zmq_msg_close (&part);
        dropped++;
    }
    return dropped;
}

int
proto_msg_decode (proto_msg_t *self, const void *frame0, size_t frame0_size,
                  const void *header, size_t header_size)
{
    assert (self);
    s_clear_fields (self, 0);
    int rc = 0;
    const uint8_t *sig = (const uint8_t *) frame0;
    if (!sig || frame0_size != PROTO_FRAME0_SIZE || memcmp (sig, PROTO_SIGNATURE, 4) != 0) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "bad signature (expected KGYM)");
        goto done;
    }
    if (sig [4] != PROTO_VERSION) {
        char why [64];
        snprintf (why, sizeof (why), "protocol version %u not supported (speaks %d)",
                  sig [4], PROTO_VERSION);
        rc = s_malformed (self, PROTO_ERR_MALFORMED, why);
        goto done;
    }
    if (!s_command_valid (sig [5])) {
        char why [64];
        snprintf (why, sizeof (why), "unknown command %u", sig [5]);
        rc = s_malformed (self, PROTO_ERR_UNKNOWN_COMMAND, why);
        goto done;
    }
    self->cmd = (proto_cmd_t) sig [5];
    if (header_size > PROTO_MAX_HEADER) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "header frame too large");
        goto done;
    }
    const s_command_t *command = &s_commands [self->cmd];
    if (command->body && !self->body) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "missing body frame");
        goto done;
    }
    if (!command->body && self->body) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "unexpected body frame");
        goto done;
    }
    if (self->body && zframe_size (self->body) == 0) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "empty body frame");
        goto done;
    }
    if (self->body && zframe_size (self->body) > PROTO_MAX_BODY) {
        rc = s_malformed (self, PROTO_ERR_TOO_LARGE, "body frame too large");
        goto done;
    }
    rc = s_decode_header (self, (const uint8_t *) header, header_size);
done:
    if (rc == -2)
        zframe_destroy (&self->body);
    return rc;
}

int
proto_msg_recv (proto_msg_t *self, zsock_t *sock)
{
    assert (self);
    assert (sock);
    proto_msg_reset (self, 0);
    void *handle = zsock_resolve (sock);

    if (zsock_type (sock) == ZMQ_ROUTER) {
        self->routing_id = zframe_recv (sock);
        if (!self->routing_id)
            return -1;
        if (!zframe_more (self->routing_id))
            return s_malformed (self, PROTO_ERR_MALFORMED, "empty message");
    }
    zmq_msg_t frame0, header;
    zmq_msg_init (&frame0);
    zmq_msg_init (&header);
    int rc = 0;
    if (zmq_msg_recv (&frame0, handle, 0) == -1) {
        rc = -1;
        goto done;
    }
    //  The connection's authenticated identity (CURVE: the peer's public key
    //  in Z85), as the ZAP handler approved it: every frame from the wire
    //  carries it, none does when no ZAP handler ran. Read first, so a
    //  malformed message from an approved peer is still known as its.
    const char *user_id = zmq_msg_gets (&frame0, "User-Id");
    if (user_id)
        snprintf (self->user_id, sizeof (self->user_id), "%s", user_id);
    if (!zmq_msg_more (&frame0)) {
        rc = s_malformed (self, PROTO_ERR_MALFORMED, "missing header frame");
        goto done;
    }
    if (zmq_msg_recv (&header, handle, 0) == -1) {
        rc = -1;
        goto done;
    }
    if (zmq_msg_more (&header)) {
        self->body = zframe_recv (sock);
        if (!self->body) {
            rc = -1;
            goto done;
        }
        if (zframe_more (self->body)) {
            s_drain (handle);
            zframe_destroy (&self->body);
            rc = s_malformed (self, PROTO_ERR_MALFORMED, "too many frames");
            goto done;
        }
    }
    //  Every frame is in: now judge them.
    rc = proto_msg_decode (self, zmq_msg_data (&frame0), zmq_msg_size (&frame0),
                           zmq_msg_data (&header), zmq_msg_size (&header));
done:
    zmq_msg_close (&frame0);
    zmq_msg_close (&header);
    if (rc == -2)
        zframe_destroy (&self->body);
    return rc;
}

//  --------------------------------------------------------------------------
//  Encoding

//  A fixed buffer the packer writes into.
typedef struct {
    char data [PROTO_MAX_HEADER];   //  packed bytes
    size_t size;                    //  used
    bool overflow;                  //  a write did not fit
} s_header_buf_t;

static int
s_header_write (void *data, const char *buf, size_t len)
{
    s_header_buf_t *hb = (s_header_buf_t *) data;
    if (len > sizeof (hb->data) - hb->size) {
        hb->overflow = true;
        return -1;
    }
    memcpy (hb->data + hb->size, buf, len);
    hb->size += len;
    return 0;
}

static void
s_pack_key (msgpack_packer *pk, const char *key)
{
    size_t len = strlen (key);
    msgpack_pack_str (pk, len);
    msgpack_pack_str_body (pk, key, len);
}

static void
s_pack_str (msgpack_packer *pk, const char *key, const char *value)
{
    s_pack_key (pk, key);
    size_t len = strnlen (value, PROTO_MAX_STR - 1);
    msgpack_pack_str (pk, len);
    msgpack_pack_str_body (pk, value, len);
}

static void
s_pack_uint (msgpack_packer *pk, const char *key, uint64_t value)
{
    s_pack_key (pk, key);
    msgpack_pack_uint64 (pk, value);
}

//  Pack the header of self; 0 or -1 when it does not fit.
static int
s_encode_header (proto_msg_t *self, s_header_buf_t *hb)
{
    msgpack_packer pk;
    msgpack_packer_init (&pk, hb, s_header_write);
    switch (self->cmd) {
        case PROTO_READY:
            msgpack_pack_map (&pk, 4 + (self->pid? 1: 0) + (self->state [0]? 1: 0)
                                   + (self->host [0]? 1: 0));
            s_pack_str (&pk, "backend", self->backend);
            s_pack_str (&pk, "device", self->device);
            s_pack_uint (&pk, "capacity", self->capacity);
            s_pack_str (&pk, "name", self->name);
            if (self->pid)
                s_pack_uint (&pk, "pid", self->pid);
            if (self->state [0])
                s_pack_str (&pk, "state", self->state);
            if (self->host [0])
                s_pack_str (&pk, "host", self->host);
            break;
        case PROTO_HEARTBEAT: {
            bool busy = self->busy >= 0 && self->busy <= 1;
            msgpack_pack_map (&pk, (self->client [0]? 1: 0) + (self->state [0]? 1: 0) + (busy? 1: 0));
            if (self->client [0])
                s_pack_str (&pk, "client", self->client);
            if (self->state [0])
                s_pack_str (&pk, "state", self->state);
            if (busy) {
                s_pack_key (&pk, "busy");
                msgpack_pack_double (&pk, self->busy);
            }
            break;
        }
        case PROTO_DISCONNECT:
            msgpack_pack_map (&pk, self->reason [0]? 1: 0);
            if (self->reason [0])
                s_pack_str (&pk, "reason", self->reason);
            break;
        case PROTO_SUBMIT:
            msgpack_pack_map (&pk, 2 + (self->tag [0]? 1: 0) + (self->client [0]? 1: 0)
                                   + (self->retry? 1: 0) + (self->group [0]? 1: 0)
                                   + (self->group_size? 1: 0) + (self->trajectory [0]? 1: 0)
                                   + (self->cache [0]? 1: 0));
            s_pack_uint (&pk, "ref", self->ref);
            s_pack_str (&pk, "backend", self->backend);
            if (self->tag [0])
                s_pack_str (&pk, "tag", self->tag);
            if (self->client [0])
                s_pack_str (&pk, "client", self->client);
            if (self->retry)
                s_pack_uint (&pk, "retry", self->retry);
            if (self->group [0])
                s_pack_str (&pk, "group", self->group);
            if (self->group_size)
                s_pack_uint (&pk, "group_size", self->group_size);
            if (self->trajectory [0])
                s_pack_str (&pk, "trajectory", self->trajectory);
            if (self->cache [0])
                s_pack_str (&pk, "cache", self->cache);
            break;
        case PROTO_ACCEPTED:
            msgpack_pack_map (&pk, 2);
            s_pack_uint (&pk, "ref", self->ref);
            s_pack_uint (&pk, "job", self->job);
            break;
        case PROTO_JOB:
            msgpack_pack_map (&pk, 2);
            s_pack_uint (&pk, "job", self->job);
            s_pack_uint (&pk, "attempt", self->attempt);
            break;
        case PROTO_RESULT:
            //  One shape both ways: the broker's copy adds queue_s and worker;
            //  either may carry the result's status.
            msgpack_pack_map (&pk, (self->name [0]? 5: 3) + (self->status [0]? 1: 0));
            s_pack_uint (&pk, "job", self->job);
            s_pack_uint (&pk, "attempt", self->attempt);
            s_pack_uint (&pk, "ref", self->ref);
            if (self->status [0])
                s_pack_str (&pk, "status", self->status);
            if (self->name [0]) {
                s_pack_key (&pk, "queue_s");
                msgpack_pack_double (&pk, self->queue_s);
                s_pack_str (&pk, "worker", self->name);
            }
            break;
        case PROTO_ERROR:
            msgpack_pack_map (&pk, 2 + (self->ref? 1: 0) + (self->job? 1: 0));
            s_pack_uint (&pk, "code", self->code);
            s_pack_str (&pk, "reason", self->reason);
            if (self->ref)
                s_pack_uint (&pk, "ref", self->ref);
            if (self->job)
                s_pack_uint (&pk, "job", self->job);
            break;
        case PROTO_FETCH:
            msgpack_pack_map (&pk, 2 + (self->job? 1: 0) + (self->tag [0]? 1: 0));
            s_pack_uint (&pk, "ref", self->ref);
            s_pack_str (&pk, "client", self->client);
            if (self->job)
                s_pack_uint (&pk, "job", self->job);
            if (self->tag [0])
                s_pack_str (&pk, "tag", self->tag);
            break;
        case PROTO_DONE:
            msgpack_pack_map (&pk, 3);
            s_pack_uint (&pk, "ref", self->ref);
            s_pack_uint (&pk, "count", self->count);
            s_pack_uint (&pk, "pending", self->pending);
            break;
        case PROTO_DRAIN:
            msgpack_pack_map (&pk, (self->ref? 1: 0) + (self->name [0]? 1: 0)
                                   + (self->reason [0]? 1: 0));
            if (self->ref)
                s_pack_uint (&pk, "ref", self->ref);
            if (self->name [0])
                s_pack_str (&pk, "name", self->name);
            if (self->reason [0])
                s_pack_str (&pk, "reason", self->reason);
            break;
        case PROTO_CANCEL:
            msgpack_pack_map (&pk, 2 + (self->client [0]? 1: 0));
            s_pack_uint (&pk, "ref", self->ref);
            s_pack_uint (&pk, "job", self->job);
            if (self->client [0])
                s_pack_str (&pk, "client", self->client);
            break;
        case PROTO_QUERY:
            msgpack_pack_map (&pk, 1 + (self->client [0]? 1: 0));
            s_pack_uint (&pk, "ref", self->ref);
            if (self->client [0])
                s_pack_str (&pk, "client", self->client);
            break;
        case PROTO_ANSWER:
            msgpack_pack_map (&pk, 1);
            s_pack_uint (&pk, "ref", self->ref);
            break;
        case PROTO_SUMMARY:
            msgpack_pack_map (&pk, 1);
            s_pack_str (&pk, "group", self->group);
            break;
        default:
            return -1;
    }
    return hb->overflow? -1: 0;
}

int
proto_msg_send (proto_msg_t *self, zsock_t *sock)
{
    assert (self);
    assert (sock);
    if (!s_command_valid ((int) self->cmd)) {
        errno = EINVAL;
        return -1;
    }
    if (s_commands [self->cmd].body && !self->body) {
        errno = EINVAL;
        return -1;
    }
    s_header_buf_t hb;
    hb.size = 0;
    hb.overflow = false;
    if (s_encode_header (self, &hb)) {
        errno = EMSGSIZE;
        return -1;
    }
    void *handle = zsock_resolve (sock);
    //  A ROUTER never blocks: a full or vanished peer is an error to handle.
    int flags = zsock_type (sock) == ZMQ_ROUTER? ZMQ_DONTWAIT: 0;
    if (self->routing_id
    &&  zmq_send (handle, zframe_data (self->routing_id), zframe_size (self->routing_id),
                  flags | ZMQ_SNDMORE) == -1)
        return -1;
    uint8_t frame0 [PROTO_FRAME0_SIZE] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, (uint8_t) self->cmd };
    if (zmq_send (handle, frame0, sizeof (frame0), flags | ZMQ_SNDMORE) == -1)
        return -1;
    bool body = s_commands [self->cmd].body;
    if (zmq_send (handle, hb.data, hb.size, flags | (body? ZMQ_SNDMORE: 0)) == -1)
        return -1;
    if (body) {
        //  REUSE sends a zmq_msg_copy, which shares the bytes: no copy.
        if (zframe_send (&self->body, sock, ZFRAME_REUSE | (flags? ZFRAME_DONTWAIT: 0)) == -1)
            return -1;
    }
    return 0;
}

void
proto_sock_configure (zsock_t *sock, bool router)
{
    zsock_set_sndhwm (sock, PROTO_HWM);
    zsock_set_rcvhwm (sock, PROTO_HWM);
    zsock_set_maxmsgsize (sock, (int) (PROTO_MAX_BODY + (64u << 10)));
    zsock_set_linger (sock, router? 0: PROTO_DEALER_LINGER_MS);
    if (router)
        zsock_set_router_mandatory (sock, 1);
}
