/*  client_kgym - the C client library: submit jobs to a broker, read results.

    A thin layer over proto_msg on a DEALER: jobs are encoded with proto_mpk
    on the way out and results decoded with it on the way in; ACCEPTED and
    ERROR carry only header fields. Spec: docs/protocol.md.
*/
#include "client_kgym.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <time.h>
#include <errno.h>
#include <string.h>
#include <stdio.h>

#define CLIENT_HEARTBEAT_MS 1000    //  idle time before a HEARTBEAT asks the broker for a sign

struct _client_kgym_t {
    zsock_t *sock;              //  DEALER to the broker
    zpoller_t *poller;          //  on sock
    proto_msg_t *msg;           //  reused for every send and receive
    int64_t last_sent_ms;       //  monotonic time of the last send
    int64_t last_heard_ms;      //  monotonic time of the last message from the broker
    bool heard;                 //  the broker has answered at least once
};

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

client_kgym_t *
client_kgym_new (const char *endpoint)
{
    if (!endpoint)
        return NULL;
    client_kgym_t *self = (client_kgym_t *) calloc (1, sizeof (client_kgym_t));
    if (!self)
        return NULL;
    self->sock = zsock_new (ZMQ_DEALER);
    self->msg = proto_msg_new (PROTO_HEARTBEAT);
    if (!self->sock || !self->msg) {
        client_kgym_destroy (&self);
        return NULL;
    }
    proto_sock_configure (self->sock, false);
    if (zsock_connect (self->sock, "%s", endpoint) == -1) {
        log_debug ("client", "cannot connect to %s: %s", endpoint, zmq_strerror (zmq_errno ()));
        client_kgym_destroy (&self);
        return NULL;
    }
    self->poller = zpoller_new (self->sock, NULL);
    if (!self->poller) {
        client_kgym_destroy (&self);
        return NULL;
    }
    self->last_sent_ms = self->last_heard_ms = s_now_ms ();
    return self;
}

void
client_kgym_destroy (client_kgym_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    client_kgym_t *self = *self_p;
    if (self->sock && self->msg && self->poller) {
        proto_msg_reset (self->msg, PROTO_DISCONNECT);
        proto_msg_send (self->msg, self->sock);
    }
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->sock);
    proto_msg_destroy (&self->msg);
    free (self);
    *self_p = NULL;
}

int
client_kgym_submit_encoded (client_kgym_t *self, uint64_t ref, const char *backend,
                            const char *tag, const void *body, size_t size,
                            char *err, size_t errlen)
{
    if (!backend || !*backend || strlen (backend) >= PROTO_MAX_STR) {
        snprintf (err, errlen, "backend missing or longer than %d bytes", PROTO_MAX_STR - 1);
        return -1;
    }
    if (!body || size == 0 || size > PROTO_MAX_BODY) {
        snprintf (err, errlen, "job of %zu bytes (encoded) over the limit of %u", size, PROTO_MAX_BODY);
        return -1;
    }
    proto_msg_reset (self->msg, PROTO_SUBMIT);
    self->msg->ref = ref;
    proto_msg_set_str (self->msg->backend, backend);
    //  The header's tag is for the broker's logs: the job's own tag (in the
    //  body, up to 256 bytes) is the one echoed, so a cut here loses nothing.
    proto_msg_set_str (self->msg->tag, tag);
    zframe_t *frame = zframe_new (body, size);
    if (!frame) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    proto_msg_set_body (self->msg, &frame);
    if (proto_msg_send (self->msg, self->sock)) {
        snprintf (err, errlen, "cannot send: %s", zmq_strerror (errno));
        return -1;
    }
    self->last_sent_ms = s_now_ms ();
    return 0;
}

int
client_kgym_submit (client_kgym_t *self, uint64_t ref, json_t *job, char *err, size_t errlen)
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
    int rc = client_kgym_submit_encoded (self, ref, backend, json_string_value (tag), data, size,
                                         err, errlen);
    free (data);
    return rc;
}

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
        snprintf (event->reason, sizeof (event->reason), "result body: %s",
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

int
client_kgym_recv (client_kgym_t *self, int timeout_ms, client_event_t *event)
{
    memset (event, 0, sizeof (*event));
    int64_t deadline = s_now_ms () + (timeout_ms > 0? timeout_ms: 0);
    while (true) {
        int64_t now = s_now_ms ();
        if (now - self->last_sent_ms >= CLIENT_HEARTBEAT_MS) {
            proto_msg_reset (self->msg, PROTO_HEARTBEAT);
            proto_msg_send (self->msg, self->sock);
            self->last_sent_ms = now;
        }
        if (!(zsock_events (self->sock) & ZMQ_POLLIN)) {
            int64_t wait = deadline - now;
            if (wait <= 0) {
                errno = EAGAIN;
                return -1;
            }
            //  Wake for the next heartbeat too.
            int64_t heartbeat = self->last_sent_ms + CLIENT_HEARTBEAT_MS - now;
            if (heartbeat < wait)
                wait = heartbeat > 0? heartbeat: 0;
            if (!zpoller_wait (self->poller, (int) wait)) {
                if (zpoller_terminated (self->poller)) {
                    errno = EINTR;
                    return -1;
                }
                continue;
            }
        }
        int rc = proto_msg_recv (self->msg, self->sock);
        if (rc == -1) {
            errno = EINTR;
            return -1;
        }
        self->last_heard_ms = s_now_ms ();
        self->heard = true;
        if (rc == -2) {
            log_warn ("client", "malformed message from the broker: %s", self->msg->reason);
            continue;
        }
        switch (self->msg->cmd) {
            case PROTO_ACCEPTED:
                event->type = CLIENT_EVENT_ACCEPTED;
                event->ref = self->msg->ref;
                event->job = self->msg->job;
                return 0;
            case PROTO_RESULT:
                s_result_event (self, event);
                return 0;
            case PROTO_ERROR:
                event->type = CLIENT_EVENT_ERROR;
                event->ref = self->msg->ref;
                event->job = self->msg->job;
                event->code = self->msg->code;
                memcpy (event->reason, self->msg->reason, sizeof (event->reason));
                return 0;
            default:
                //  HEARTBEAT, or something a broker should not send: a sign of life only.
                continue;
        }
    }
}

int64_t
client_kgym_silence_ms (client_kgym_t *self)
{
    return s_now_ms () - self->last_heard_ms;
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
