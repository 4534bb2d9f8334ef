/*  worker_server - a worker's connection to the broker.

    Job actor protocol (pipe between the server and one job's thread):
        job -> server   "PREPARED"              compiled, waiting for a slot
        server -> job   "GO"                     a run slot is free
        job -> server   "RESULT" + body frame    done
        server -> job   "$TERM"                  (zactor_destroy) end
*/
#include "worker_server.h"
#include "worker_eval.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "common_log.h"
#include <unistd.h>

#define BACKOFF_MAX_MS 32000

struct worker_server_t {
    worker_config_t cfg;            //  copy; strings owned below
    char name[PROTO_MAX_STR];       //  worker name
    char backend[16];               //  served backend
    char *endpoint;                 //  broker endpoint
    worker_eval_t *eval;            //  the evaluator, shared by job threads
    zsock_t *broker;                //  DEALER to the broker
    zpoller_t *poller;              //  broker socket, pipe, job actors
    zlistx_t *jobs;                 //  s_job_t in arrival order
    uint32_t running;               //  jobs holding a run slot
    int64_t last_heard;             //  last message from the broker (ms)
    int64_t last_sent;              //  last message to the broker (ms)
    uint32_t backoff_ms;            //  next reconnect delay
    int64_t reconnect_at;           //  when to reconnect (0 = connected)
    uint64_t done;                  //  jobs finished
};

//  One job in this worker.
typedef struct {
    worker_server_t *server;        //  back pointer (read-only use in the thread: eval only)
    uint64_t job;                   //  broker's job id
    uint32_t attempt;               //  lease attempt
    zframe_t *body;                 //  job body (owned until the thread takes it)
    zactor_t *actor;                //  the job's thread
    bool prepared;                  //  said PREPARED
    bool go;                        //  holds a run slot
} s_job_t;

void
worker_config_default (worker_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->backend = "cpu";
    cfg->slots = 0;
    cfg->prefetch = 1;
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
}

static json_t *
s_invalid_result (const char *reason)
{
    return json_pack ("{s:s, s:n, s:n, s:s}", "status", "invalid", "reward", "speedup",
                      "message", reason);
}

//  The job's thread: decode, prepare, wait for GO, execute, hand back the result.
static void
s_job_actor (zsock_t *pipe, void *args)
{
    s_job_t *job = (s_job_t *) args;
    worker_eval_t *eval = job->server->eval;
    zframe_t *body = job->body;
    job->body = NULL;
    zsock_signal (pipe, 0);

    char err [256] = "";
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    json_t *json = body? proto_mpk_decode (zframe_data (body), zframe_size (body), &limits,
                                           err, sizeof err): NULL;
    zframe_destroy (&body);
    worker_job_t *wjob = NULL;
    json_t *result = NULL;
    if (json)
        wjob = worker_eval_prepare (eval, json);
    else
        result = s_invalid_result (err [0]? err: "job body missing");
    json_decref (json);

    zstr_send (pipe, "PREPARED");
    bool terminated = false;
    while (!terminated) {
        char *command = zstr_recv (pipe);
        if (!command)
            break;
        if (streq (command, "GO")) {
            if (!result)
                result = worker_eval_execute (eval, &wjob);
            char *data = NULL;
            size_t size = 0;
            if (!result || proto_mpk_encode (result, &data, &size)) {
                json_decref (result);
                result = json_pack ("{s:s, s:n, s:n, s:s}", "status", "internal_error",
                                    "reward", "speedup", "message", "could not encode the result");
                proto_mpk_encode (result, &data, &size);
            }
            zframe_t *frame = zframe_new (data, size);
            free (data);
            zstr_sendm (pipe, "RESULT");
            zframe_send (&frame, pipe, 0);
        }
        else
        if (streq (command, "$TERM"))
            terminated = true;
        free (command);
    }
    if (wjob)
        json_decref (worker_eval_execute (eval, &wjob));     //  frees an unrun job
    json_decref (result);
}

worker_server_t *
worker_server_new (const worker_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg->broker_endpoint || !cfg->backend) {
        snprintf (err, errlen, "broker endpoint and backend are required");
        return NULL;
    }
    worker_server_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    snprintf (self->backend, sizeof self->backend, "%s", cfg->backend);
    self->endpoint = strdup (cfg->broker_endpoint);
    if (cfg->name)
        snprintf (self->name, sizeof self->name, "%s", cfg->name);
    else {
        char host [128] = "localhost";
        gethostname (host, sizeof host - 1);
        snprintf (self->name, sizeof self->name, "%s:%d", host, (int) getpid ());
    }
    if (self->cfg.slots == 0)
        self->cfg.slots = streq (self->backend, "cuda")? 1: 2;
    if (self->cfg.heartbeat_ms == 0)
        self->cfg.heartbeat_ms = 1000;
    if (self->cfg.liveness == 0)
        self->cfg.liveness = 3;
    worker_eval_config_t ecfg;
    worker_eval_config_default (&ecfg);
    ecfg.backend = self->backend;
    ecfg.device = cfg->device;
    ecfg.cache_path = cfg->cache_path;
    ecfg.worker_name = self->name;
    ecfg.fresh_runner = cfg->fresh_runner;
    self->eval = worker_eval_new (&ecfg, err, errlen);
    self->jobs = zlistx_new ();
    if (!self->eval || !self->jobs) {
        worker_server_destroy (&self);
        return NULL;
    }
    self->backoff_ms = 1000;
    return self;
}

static void
s_job_destroy (s_job_t **job_p)
{
    s_job_t *job = *job_p;
    if (!job)
        return;
    zactor_destroy (&job->actor);
    zframe_destroy (&job->body);
    free (job);
    *job_p = NULL;
}

void
worker_server_destroy (worker_server_t **self_p)
{
    worker_server_t *self = *self_p;
    if (!self)
        return;
    if (self->jobs) {
        s_job_t *job = (s_job_t *) zlistx_first (self->jobs);
        while (job) {
            s_job_destroy (&job);
            job = (s_job_t *) zlistx_next (self->jobs);
        }
        zlistx_destroy (&self->jobs);
    }
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->broker);
    worker_eval_destroy (&self->eval);
    free (self->endpoint);
    free (self);
    *self_p = NULL;
}

const char *
worker_server_device (worker_server_t *self)
{
    return worker_eval_device (self->eval);
}

static int
s_send (worker_server_t *self, proto_msg_t *msg)
{
    int rc = proto_msg_send (msg, self->broker);
    self->last_sent = zclock_mono ();
    return rc;
}

static void
s_send_ready (worker_server_t *self)
{
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    proto_msg_set_str (msg->backend, self->backend);
    proto_msg_set_str (msg->device, worker_eval_device (self->eval));
    proto_msg_set_str (msg->name, self->name);
    msg->capacity = self->cfg.slots + self->cfg.prefetch;
    msg->pid = (uint32_t) getpid ();
    s_send (self, msg);
    proto_msg_destroy (&msg);
}

static int
s_connect (worker_server_t *self)
{
    if (self->broker) {
        zpoller_remove (self->poller, self->broker);
        zsock_destroy (&self->broker);
    }
    self->broker = zsock_new (ZMQ_DEALER);
    if (!self->broker)
        return -1;
    proto_sock_configure (self->broker, false);
    if (zsock_connect (self->broker, "%s", self->endpoint)) {
        log_error ("worker", "cannot connect to %s", self->endpoint);
        return -1;
    }
    zpoller_add (self->poller, self->broker);
    self->last_heard = zclock_mono ();
    self->reconnect_at = 0;
    s_send_ready (self);
    return 0;
}

static void
s_start_job (worker_server_t *self, proto_msg_t *msg)
{
    s_job_t *job = calloc (1, sizeof *job);
    if (!job)
        return;
    job->server = self;
    job->job = msg->job;
    job->attempt = msg->attempt;
    job->body = proto_msg_get_body (msg);
    job->actor = zactor_new (s_job_actor, job);
    if (!job->actor) {
        log_error ("worker", "cannot start a thread for job %llu", (unsigned long long) job->job);
        s_job_destroy (&job);
        return;
    }
    zpoller_add (self->poller, job->actor);
    zlistx_add_end (self->jobs, job);
}

//  Hand free run slots to prepared jobs, oldest first.
static void
s_dispatch (worker_server_t *self)
{
    s_job_t *job = (s_job_t *) zlistx_first (self->jobs);
    while (job && self->running < self->cfg.slots) {
        if (job->prepared && !job->go) {
            job->go = true;
            self->running++;
            zstr_send (job->actor, "GO");
        }
        job = (s_job_t *) zlistx_next (self->jobs);
    }
}

static void
s_handle_job_actor (worker_server_t *self, zactor_t *actor)
{
    s_job_t *job = (s_job_t *) zlistx_first (self->jobs);
    while (job && job->actor != actor)
        job = (s_job_t *) zlistx_next (self->jobs);
    zmsg_t *reply = zmsg_recv (actor);
    if (!job || !reply) {
        zmsg_destroy (&reply);
        return;
    }
    char *command = zmsg_popstr (reply);
    if (command && streq (command, "PREPARED"))
        job->prepared = true;
    else
    if (command && streq (command, "RESULT")) {
        proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
        msg->job = job->job;
        msg->attempt = job->attempt;
        zframe_t *body = zmsg_pop (reply);
        proto_msg_set_body (msg, &body);
        if (self->broker && s_send (self, msg))
            log_warn ("worker", "could not send the result of job %llu",
                      (unsigned long long) job->job);
        proto_msg_destroy (&msg);
        self->done++;
        self->running--;
        zpoller_remove (self->poller, job->actor);
        void *handle = zlistx_find (self->jobs, job);
        if (handle)
            zlistx_delete (self->jobs, handle);
        s_job_destroy (&job);
    }
    free (command);
    zmsg_destroy (&reply);
    s_dispatch (self);
}

static void
s_handle_broker (worker_server_t *self, proto_msg_t *msg)
{
    int rc = proto_msg_recv (msg, self->broker);
    if (rc == -1)
        return;
    self->last_heard = zclock_mono ();
    self->backoff_ms = 1000;
    if (rc == -2) {
        log_warn ("worker", "malformed message from the broker: %s", msg->reason);
        return;
    }
    switch (msg->cmd) {
        case PROTO_JOB:
            s_start_job (self, msg);
            break;
        case PROTO_ERROR:
            if (msg->code == PROTO_ERR_UNKNOWN_PEER)
                s_send_ready (self);
            else
                log_warn ("worker", "broker error %u: %s", msg->code, msg->reason);
            break;
        case PROTO_DISCONNECT:
            log_info ("worker", "broker asked us to reconnect: %s", msg->reason);
            s_connect (self);
            break;
        default:
            break;                  //  HEARTBEAT: its arrival was the point
    }
}

int
worker_server_run (worker_server_t *self, zsock_t *pipe)
{
    self->poller = pipe? zpoller_new (pipe, NULL): zpoller_new (NULL);
    if (!self->poller || s_connect (self))
        return -1;
    log_info ("worker", "%s serving %s on %s, %u slots, broker %s", self->name, self->backend,
              worker_eval_device (self->eval), self->cfg.slots, self->endpoint);
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    bool terminated = false;
    while (!terminated && !zsys_interrupted) {
        void *which = zpoller_wait (self->poller, (int) self->cfg.heartbeat_ms);
        if (which == pipe && pipe) {
            char *command = zstr_recv (pipe);
            terminated = !command || streq (command, "$TERM");
            free (command);
            continue;
        }
        if (which && which == self->broker)
            s_handle_broker (self, msg);
        else
        if (which)
            s_handle_job_actor (self, (zactor_t *) which);
        int64_t now = zclock_mono ();
        if (self->reconnect_at && now >= self->reconnect_at) {
            log_info ("worker", "reconnecting to %s", self->endpoint);
            s_connect (self);
        }
        else
        if (!self->reconnect_at
        &&  now - self->last_heard > (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness) {
            //  The broker went quiet: back off, then start over with a new socket.
            log_warn ("worker", "broker silent for %lld ms", (long long) (now - self->last_heard));
            self->reconnect_at = now + self->backoff_ms;
            self->backoff_ms = self->backoff_ms * 2 > BACKOFF_MAX_MS? BACKOFF_MAX_MS
                                                                    : self->backoff_ms * 2;
            self->last_heard = now;
        }
        if (self->broker && now - self->last_sent >= (int64_t) self->cfg.heartbeat_ms) {
            proto_msg_reset (msg, PROTO_HEARTBEAT);
            s_send (self, msg);
        }
    }
    if (self->broker) {
        proto_msg_reset (msg, PROTO_DISCONNECT);
        proto_msg_set_str (msg->reason, "worker stopping");
        s_send (self, msg);
    }
    proto_msg_destroy (&msg);
    return 0;
}

void
worker_server_actor (zsock_t *pipe, void *args)
{
    worker_server_t *self = (worker_server_t *) args;
    zsock_signal (pipe, 0);
    worker_server_run (self, pipe);
    worker_server_destroy (&self);
}
