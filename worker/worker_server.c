/*  worker_server - a worker's connection to the broker.

    Job actor protocol (pipe between the server and one job's thread):
        server -> job   "COMPILE"                a compile slot is free: decode, prepare
        job -> server   "PREPARED"              compiled, waiting for a run slot
        server -> job   "GO"                     a run slot is free
        job -> server   "RESULT" + body + status done: after GO, or at once after
                                                 COMPILE when prepare decided the job
        server -> job   "$TERM"                  (zactor_destroy) end
    A job's way: queued (for a compile slot), compiling, prepared (waiting
    for a run slot), running. The server hands compile slots to queued
    jobs and run slots to prepared ones, oldest first.

    The server as a state machine (states in worker_server.h):
        state        event                       action
        any          JOB                         start its thread (quarantined: drop, it is stale)
        any          ERROR 440, silence, DISCONNECT  orphan held jobs, new socket, READY
        ready        DRAIN (broker, pipe, set)   draining; HEARTBEAT{state} now
        any          QUARANTINE (set, pipe)      quarantined; READY{state} (broker
                                                 takes its leases back); orphan held jobs
        quarantined  READY (set, pipe)           ready; READY{state}
        draining     last held job done          DISCONNECT "drained", return
        any          STOP, $TERM                 DISCONNECT, return
    An orphaned job belongs to a lease the broker has taken back: its result
    is dropped when it comes. One still queued ends at once (its thread
    waits for a command, so it leaves at once); one compiling finishes its
    compile (ending its thread from here would stall the worker until it
    did); a prepared one runs only in a slot no live job wants (never while
    quarantined).
*/
#include "worker_server.h"
#include "worker_registry.h"
#include "worker_eval.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "proto_curve.h"
#include "common_log.h"
#include "common_notify.h"
#include <stdatomic.h>
#include <unistd.h>

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 32000
#define STATE_LINGER_MS 1000        //  how long a state request may wait for the server
#define BUSY_SAMPLES 11             //  busy ratio samples kept, a second apart: ~10 s of window
#define BUSY_SAMPLE_MS 1000         //  their spacing

static const char *s_state_names [] = { "ready", "draining", "quarantined" };

struct worker_server_t {
    worker_config_t cfg;            //  copy; strings owned below
    char name[PROTO_MAX_STR];       //  worker name
    char backend[16];               //  served backend
    char *endpoint;                 //  broker endpoint
    char *curve_secret;             //  own certificate file, or NULL
    char *broker_key;               //  broker's certificate file, or NULL
    char *python;                   //  the python backend's interpreter, or NULL (its backend
                                    //  starts on its first job, so the path must last)
    worker_eval_t *eval;            //  the evaluator, shared by job threads
    zsock_t *broker;                //  DEALER to the broker
    zsock_t *control;               //  PULL for worker_server_set_state from other threads
    char control_endpoint[64];      //  its inproc endpoint
    zpoller_t *poller;              //  broker socket, control, pipe, job actors
    zlistx_t *jobs;                 //  s_job_t in arrival order
    uint32_t running;               //  jobs holding a run slot
    uint32_t compiling;             //  jobs holding a compile slot
    uint32_t compiling_max;         //  most compiles at once so far
    double busy_s;                  //  run-slot seconds of the jobs that finished running
    double busy_told;               //  of s_busy_s, what the counter has had
    struct { int64_t at; double busy_s; } busy [BUSY_SAMPLES];   //  ring of (ms, s_busy_s)
    size_t nbusy, busy_next;        //  samples kept, where the next goes
    worker_state_t state;           //  what READY and HEARTBEAT say
    char reason[PROTO_MAX_STR];     //  why (quarantine), for logs and STATUS
    int64_t last_heard;             //  last message from the broker (ms)
    int64_t last_sent;              //  last message to the broker (ms)
    uint32_t backoff_ms;            //  next reconnect delay
    int64_t reconnect_at;           //  when to reconnect (0 = connected)
    int64_t ready_sent;             //  when READY went out (ms)
    bool registered;                //  the broker spoke (not an ERROR) since READY went out
    uint64_t done;                  //  jobs finished
    uint64_t connects;              //  sockets made (1 + reconnects)
    bool stop;                      //  leave at the next turn
    common_metrics_worker_t m;      //  Prometheus figures (all NULL without metrics: no-ops)
    char gpu [16];                  //  label gpu: the CUDA ordinal, "" for cpu
    char uuid [48];                 //  label UUID: the GPU's, "" for cpu (dcgm-exporter's labels)
    bool ready_told;                //  READY=1 went to systemd
    bool was_ready;                 //  /readyz said ok at the last turn
    int64_t next_status;            //  sd_notify: next STATUS line (ms)
};

//  Where a job is on its way through the pools.
typedef enum {
    S_QUEUED = 0,                   //  waiting for a compile slot
    S_COMPILING,                    //  holds a compile slot
    S_PREPARED,                     //  compiled, waiting for a run slot
    S_RUNNING                       //  holds a run slot
} s_job_state_t;

//  One job in this worker.
typedef struct {
    worker_server_t *server;        //  back pointer (read-only use in the thread: eval only)
    uint64_t job;                   //  broker's job id
    uint32_t attempt;               //  lease attempt
    zframe_t *body;                 //  job body (owned until the thread takes it)
    zactor_t *actor;                //  the job's thread
    s_job_state_t state;            //  where it is
    int64_t go_at;                  //  when it took its run slot (us, monotonic)
    bool orphaned;                  //  its lease is gone: drop its result
} s_job_t;

void
worker_config_default (worker_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->backend = "cpu";
    cfg->slots = 0;
    cfg->compilers = 0;
    cfg->prefetch = WORKER_PREFETCH_AUTO;
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
}

const char *
worker_state_name (worker_state_t state)
{
    return (unsigned) state < 3? s_state_names [state]: "unknown";
}

static json_t *
s_invalid_result (const char *reason)
{
    return json_pack ("{s:s, s:n, s:n, s:s}", "status", "invalid", "reward", "speedup",
                      "message", reason);
}

//  The figures one result moves (from its job's thread: the registry is
//  thread-safe): jobs by status, faults, compile cache, phase durations.
static void
s_count_result (worker_server_t *self, json_t *result)
{
    const common_metrics_worker_t *m = &self->m;
    if (!m->jobs)
        return;
    const char *status = json_string_value (json_object_get (result, "status"));
    if (!status)
        status = "internal_error";
    common_metric_inc (m->jobs, status);
    if (streq (status, "timeout"))
        common_metric_inc (m->faults, "timeout");
    else
    if (streq (status, "runtime_error")) {
        //  The memory caps (cgroup or rlimit) say so in the message.
        const char *message = json_string_value (json_object_get (result, "message"));
        common_metric_inc (m->faults, message && strstr (message, "memory cap")? "oom": "runner_crash");
    }
    json_t *cache = json_object_get (result, "cache");
    json_t *candidate = cache? json_object_get (cache, "candidate"): NULL;
    if (json_is_boolean (candidate))
        common_metric_inc (json_is_true (candidate)? m->compile_cache_hits: m->compile_cache_misses);
    json_t *phases = json_object_get (result, "phases");
    const char *names [] = { "compile", "run", "total" };
    const char *keys [] = { "compile_s", "run_s", "total_s" };
    for (int i = 0; i < 3; i++) {
        json_t *value = phases? json_object_get (phases, keys [i]): NULL;
        if (json_is_number (value))
            common_metric_observe (m->job_duration, json_number_value (value), names [i]);
    }
}

//  Encode result (taking it) and hand it to the server.
static void
s_send_result (s_job_t *job, zsock_t *pipe, json_t **result_p)
{
    json_t *result = *result_p;
    *result_p = NULL;
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
    const char *status = json_string_value (json_object_get (result, "status"));
    s_count_result (job->server, result);
    zstr_sendm (pipe, "RESULT");
    zframe_send (&frame, pipe, ZFRAME_MORE);
    zstr_send (pipe, status? status: "");
    json_decref (result);
}

//  Wait for one of the server's commands: true for want, false for $TERM
//  (or a pipe that broke).
static bool
s_job_wait (zsock_t *pipe, const char *want)
{
    while (true) {
        char *command = zstr_recv (pipe);
        if (!command)
            return false;
        bool wanted = streq (command, want), term = streq (command, "$TERM");
        free (command);
        if (wanted || term)
            return wanted;
    }
}

//  The job's thread: wait for COMPILE, decode, prepare; a job prepare
//  decided is answered at once, any other waits for GO, runs and answers.
static void
s_job_actor (zsock_t *pipe, void *args)
{
    s_job_t *job = (s_job_t *) args;
    worker_eval_t *eval = job->server->eval;
    zframe_t *body = job->body;
    job->body = NULL;
    zsock_signal (pipe, 0);
    char job_id [24];
    snprintf (job_id, sizeof job_id, "%llu", (unsigned long long) job->job);
    common_log_set_job (job_id);
    if (!s_job_wait (pipe, "COMPILE")) {
        zframe_destroy (&body);
        return;
    }
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
    //  Decided without running (it does not parse or compile): answered now,
    //  the device is not needed.
    if (!result && (!wjob || worker_eval_decided (wjob)))
        result = worker_eval_execute (eval, &wjob);
    if (result)
        s_send_result (job, pipe, &result);
    else {
        zstr_send (pipe, "PREPARED");
        if (s_job_wait (pipe, "GO")) {
            result = worker_eval_execute (eval, &wjob);
            s_send_result (job, pipe, &result);
        }
    }
    s_job_wait (pipe, "$TERM");
    worker_eval_discard (eval, &wjob);      //  a job stopped before it ran
}

//  The evaluator found the GPU unfit (from a job's thread): stop taking jobs.
static void
s_quarantine (void *arg, const char *reason)
{
    worker_server_set_state ((worker_server_t *) arg, WORKER_STATE_QUARANTINED, reason);
}

worker_server_t *
worker_server_new (const worker_config_t *cfg, char *err, size_t errlen)
{
    if (!cfg->broker_endpoint || !cfg->backend) {
        snprintf (err, errlen, "broker endpoint and backend are required");
        return NULL;
    }
    if (!cfg->curve_secret != !cfg->broker_key) {
        snprintf (err, errlen, "CURVE needs both the worker's secret certificate and the broker's key");
        return NULL;
    }
    worker_server_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->cfg = *cfg;
    self->cfg.metrics = NULL;           //  the caller's struct: copied
    if (cfg->metrics)
        self->m = *cfg->metrics;
    snprintf (self->backend, sizeof self->backend, "%s", cfg->backend);
    const worker_backend_t *backend = worker_registry_find (self->backend, NULL);
    if (!backend) {
        char names [128];
        snprintf (err, errlen, "unknown backend '%s' (this build serves %s)", self->backend,
                  worker_registry_targets (names, sizeof names));
        worker_server_destroy (&self);
        return NULL;
    }
    if (backend->device_ordinal)
        snprintf (self->gpu, sizeof self->gpu, "%d", cfg->device);
    self->endpoint = strdup (cfg->broker_endpoint);
    if (cfg->curve_secret) {
        self->curve_secret = strdup (cfg->curve_secret);
        self->broker_key = strdup (cfg->broker_key);
        //  Check the certificates now, on a socket that is thrown away.
        zsock_t *probe = zsock_new (ZMQ_DEALER);
        int rc = probe? proto_curve_client (probe, cfg->curve_secret, cfg->broker_key, err, errlen): -1;
        zsock_destroy (&probe);
        if (rc) {
            worker_server_destroy (&self);
            return NULL;
        }
    }
    self->cfg.curve_secret = self->cfg.broker_key = NULL;
    if (cfg->name)
        snprintf (self->name, sizeof self->name, "%s", cfg->name);
    else {
        char host [128] = "localhost";
        gethostname (host, sizeof host - 1);
        snprintf (self->name, sizeof self->name, "%s:%d", host, (int) getpid ());
    }
    if (self->cfg.slots == 0)
        self->cfg.slots = backend->default_slots? backend->default_slots (NULL): 1;
    if (self->cfg.compilers == 0)
        self->cfg.compilers = backend->default_compilers? backend->default_compilers (NULL): 1;
    if (self->cfg.prefetch == WORKER_PREFETCH_AUTO) {
        //  Every compiler busy while a compiled job waits for each run slot.
        uint64_t prefetch = (uint64_t) self->cfg.compilers + self->cfg.slots;
        self->cfg.prefetch = prefetch > WORKER_PREFETCH_AUTO_MAX? WORKER_PREFETCH_AUTO_MAX: (uint32_t) prefetch;
    }
    if (self->cfg.slots > WORKER_POOL_MAX || self->cfg.compilers > WORKER_POOL_MAX
    ||  self->cfg.prefetch > WORKER_POOL_MAX) {
        snprintf (err, errlen, "slots %u, compilers %u, prefetch %u: none may exceed %u",
                  self->cfg.slots, self->cfg.compilers, self->cfg.prefetch, WORKER_POOL_MAX);
        worker_server_destroy (&self);
        return NULL;
    }
    if (self->cfg.heartbeat_ms == 0)
        self->cfg.heartbeat_ms = 1000;
    if (self->cfg.liveness == 0)
        self->cfg.liveness = 3;
    //  State requests from other threads arrive here; bound now, so a
    //  request made before worker_server_run waits for it.
    //  A name never used before in this process: a destroyed server's name
    //  stays bound until ZeroMQ's reaper closes its socket (later, on a
    //  loaded host), and the next server may be allocated at its address.
    static atomic_uint s_servers;
    snprintf (self->control_endpoint, sizeof self->control_endpoint, "inproc://kgym-worker-%u",
              atomic_fetch_add (&s_servers, 1));
    self->control = zsock_new (ZMQ_PULL);
    if (!self->control || zsock_bind (self->control, "%s", self->control_endpoint) == -1) {
        snprintf (err, errlen, "cannot bind %s", self->control_endpoint);
        worker_server_destroy (&self);
        return NULL;
    }
    worker_eval_config_t ecfg;
    worker_eval_config_default (&ecfg);
    ecfg.backend = self->backend;
    ecfg.device = cfg->device;
    ecfg.cache_path = cfg->cache_path;
    ecfg.worker_name = self->name;
    ecfg.fresh_runner = cfg->fresh_runner;
    self->python = cfg->python? strdup (cfg->python): NULL;
    self->cfg.python = ecfg.python = self->python;
    ecfg.max_job_bytes = cfg->max_job_bytes;
    ecfg.on_quarantine = s_quarantine;
    ecfg.on_quarantine_arg = self;
    self->eval = worker_eval_new (&ecfg, err, errlen);
    self->jobs = zlistx_new ();
    if (!self->eval || !self->jobs) {
        worker_server_destroy (&self);
        return NULL;
    }
    self->backoff_ms = BACKOFF_MIN_MS;
    snprintf (self->uuid, sizeof self->uuid, "%s", worker_eval_device_uuid (self->eval));
    //  The device is up (CUDA initialised): alive; ready once registered.
    common_metric_set (self->m.info, 1, self->gpu, self->uuid, self->backend, worker_eval_device (self->eval));
    common_metric_set (self->m.slots, self->cfg.slots, self->gpu, self->uuid);
    common_metric_set (self->m.compilers, self->cfg.compilers, self->gpu, self->uuid);
    common_metrics_set_alive (self->cfg.registry, true, NULL);
    common_metrics_set_ready (self->cfg.registry, false, "connecting to the broker");
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
    zsock_destroy (&self->control);
    worker_eval_destroy (&self->eval);
    free (self->endpoint);
    free (self->curve_secret);
    free (self->broker_key);
    free (self->python);
    free (self);
    *self_p = NULL;
}

const char *
worker_server_device (worker_server_t *self)
{
    return worker_eval_device (self->eval);
}

worker_state_t
worker_server_state (worker_server_t *self)
{
    return self->state;
}

size_t
worker_server_jobs (worker_server_t *self)
{
    return zlistx_size (self->jobs);
}

int
worker_server_set_state (worker_server_t *self, worker_state_t state, const char *reason)
{
    if (!self || (unsigned) state > WORKER_STATE_QUARANTINED)
        return -1;
    //  A socket of the caller's own, so any thread may ask.
    zsock_t *push = zsock_new (ZMQ_PUSH);
    if (!push)
        return -1;
    zsock_set_linger (push, STATE_LINGER_MS);
    int rc = zsock_connect (push, "%s", self->control_endpoint);
    if (rc == 0)
        rc = zstr_sendx (push, "STATE", s_state_names [state], reason? reason: "", NULL);
    zsock_destroy (&push);
    return rc == 0? 0: -1;
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
    if (self->state != WORKER_STATE_READY)
        proto_msg_set_str (msg->state, s_state_names [self->state]);
    char host [256] = "";
    if (gethostname (host, sizeof host - 1) == 0)
        proto_msg_set_str (msg->host, host);
    s_send (self, msg);
    proto_msg_destroy (&msg);
    self->ready_sent = zclock_mono ();
    self->registered = false;
}

//  Run-slot seconds held so far, all slots together, running jobs included.
static double
s_busy_s (worker_server_t *self, int64_t now_us)
{
    double busy = self->busy_s;
    for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs); job;
         job = (s_job_t *) zlistx_next (self->jobs))
        if (job->state == S_RUNNING && now_us > job->go_at)
            busy += (double) (now_us - job->go_at) / 1e6;
    return busy;
}

//  Keep a sample of s_busy_s at most once a second.
static void
s_busy_sample (worker_server_t *self)
{
    int64_t now = zclock_mono ();
    if (self->nbusy) {
        size_t last = (self->busy_next + BUSY_SAMPLES - 1) % BUSY_SAMPLES;
        if (now - self->busy [last].at < BUSY_SAMPLE_MS)
            return;
    }
    self->busy [self->busy_next].at = now;
    self->busy [self->busy_next].busy_s = s_busy_s (self, zclock_usecs ());
    self->busy_next = (self->busy_next + 1) % BUSY_SAMPLES;
    if (self->nbusy < BUSY_SAMPLES)
        self->nbusy++;
}

//  The share of the run slots' wall time jobs held them since the oldest
//  sample (about ten seconds), 0 to 1.
static double
s_busy_ratio (worker_server_t *self)
{
    if (!self->nbusy)
        return 0;
    size_t oldest = (self->busy_next + BUSY_SAMPLES - self->nbusy) % BUSY_SAMPLES;
    double wall = (double) (zclock_mono () - self->busy [oldest].at) / 1000.0 * self->cfg.slots;
    double held = s_busy_s (self, zclock_usecs ()) - self->busy [oldest].busy_s;
    if (wall <= 0 || held <= 0)
        return 0;
    return held >= wall? 1.0: held / wall;
}

//  A HEARTBEAT, with the state when it is not plain ready, and the busy ratio.
static void
s_send_heartbeat (worker_server_t *self)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    if (self->state != WORKER_STATE_READY)
        proto_msg_set_str (msg->state, s_state_names [self->state]);
    msg->busy = s_busy_ratio (self);
    s_send (self, msg);
    proto_msg_destroy (&msg);
}

static void
s_remove_job (worker_server_t *self, s_job_t *job)
{
    if (job->state == S_RUNNING) {
        self->running--;
        int64_t now = zclock_usecs ();
        if (now > job->go_at)
            self->busy_s += (double) (now - job->go_at) / 1e6;
    }
    else
    if (job->state == S_COMPILING)
        self->compiling--;
    zpoller_remove (self->poller, job->actor);
    void *handle = zlistx_find (self->jobs, job);
    if (handle)
        zlistx_delete (self->jobs, handle);
    s_job_destroy (&job);
}

static void s_end_queued_orphans (worker_server_t *self);

//  The broker has taken back every lease we hold: end what has not
//  started, and drop the results of what runs.
static void
s_orphan_jobs (worker_server_t *self)
{
    size_t count = 0;
    for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs); job;
         job = (s_job_t *) zlistx_next (self->jobs))
        if (!job->orphaned) {
            job->orphaned = true;
            count++;
        }
    if (count)
        log_info ("worker", "%zu job(s) given up: the broker took their leases back", count);
    s_end_queued_orphans (self);
}

static int
s_connect (worker_server_t *self)
{
    if (self->broker) {
        zpoller_remove (self->poller, self->broker);
        zsock_destroy (&self->broker);
    }
    s_orphan_jobs (self);
    self->broker = zsock_new (ZMQ_DEALER);
    if (!self->broker)
        return -1;
    proto_sock_configure (self->broker, false);
    zsock_set_sndtimeo (self->broker, 0);      //  a full queue drops a heartbeat, never stalls us
    char err [256];
    if (self->curve_secret
    &&  proto_curve_client (self->broker, self->curve_secret, self->broker_key, err, sizeof err)) {
        log_error ("worker", "%s", err);
        return -1;
    }
    if (zsock_connect (self->broker, "%s", self->endpoint)) {
        log_error ("worker", "cannot connect to %s", self->endpoint);
        return -1;
    }
    zpoller_add (self->poller, self->broker);
    self->connects++;
    if (self->connects > 1)
        common_metric_inc (self->m.reconnects);
    self->last_heard = zclock_mono ();
    self->reconnect_at = 0;
    s_send_ready (self);
    return 0;
}

static void s_dispatch (worker_server_t *self);

//  Apply a state change (the server's thread).
static void
s_set_state (worker_server_t *self, worker_state_t state, const char *reason)
{
    if (state == self->state)
        return;
    worker_state_t was = self->state;
    self->state = state;
    if (state == WORKER_STATE_QUARANTINED)
        common_metric_inc (self->m.faults, "gpu_check");
    proto_msg_set_str (self->reason, reason);
    log_info ("worker", "%s: %s (was %s)%s%s", self->name, s_state_names [state], s_state_names [was],
              reason && *reason? ": ": "", reason? reason: "");
    s_dispatch (self);
    if (!self->broker)
        return;
    if (state == WORKER_STATE_QUARANTINED) {
        //  A READY hands every lease back to the broker at once.
        s_send_ready (self);
        s_orphan_jobs (self);
    }
    else
    if (was == WORKER_STATE_QUARANTINED)
        s_send_ready (self);
    else
        s_send_heartbeat (self);
}

static void
s_start_job (worker_server_t *self, proto_msg_t *msg)
{
    if (self->state == WORKER_STATE_QUARANTINED) {
        //  Sent before the broker heard we are quarantined: it has taken it back.
        log_debug ("worker", "job %llu dropped: quarantined", (unsigned long long) msg->job);
        return;
    }
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
    log_debug ("worker", "job %llu attempt %u: started", (unsigned long long) job->job, job->attempt);
    zpoller_add (self->poller, job->actor);
    zlistx_add_end (self->jobs, job);
    s_dispatch (self);
}

//  End orphaned jobs that never started compiling: their threads only wait.
static void
s_end_queued_orphans (worker_server_t *self)
{
    bool again = true;
    while (again) {
        again = false;
        for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs); job;
             job = (s_job_t *) zlistx_next (self->jobs))
            if (job->orphaned && job->state == S_QUEUED) {
                log_debug ("worker", "job %llu attempt %u: ended before compiling (orphaned)",
                           (unsigned long long) job->job, job->attempt);
                s_remove_job (self, job);
                again = true;
                break;
            }
    }
}

//  Hand free compile slots to queued live jobs and free run slots to
//  prepared jobs, oldest first: live ones, then orphaned ones (to end
//  them) when no live one waits.
static void
s_dispatch (worker_server_t *self)
{
    s_end_queued_orphans (self);
    if (self->state == WORKER_STATE_QUARANTINED)
        return;
    for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs);
         job && self->compiling < self->cfg.compilers; job = (s_job_t *) zlistx_next (self->jobs))
        if (job->state == S_QUEUED && !job->orphaned) {
            job->state = S_COMPILING;
            self->compiling++;
            if (self->compiling > self->compiling_max)
                self->compiling_max = self->compiling;
            zstr_send (job->actor, "COMPILE");
        }
    for (int pass = 0; pass < 2; pass++) {
        s_job_t *job = (s_job_t *) zlistx_first (self->jobs);
        while (job && self->running < self->cfg.slots) {
            if (job->state == S_PREPARED && job->orphaned == (pass == 1)) {
                job->state = S_RUNNING;
                job->go_at = zclock_usecs ();
                self->running++;
                log_debug ("worker", "job %llu attempt %u: running%s", (unsigned long long) job->job,
                           job->attempt, job->orphaned? " (orphaned)": "");
                zstr_send (job->actor, "GO");
            }
            job = (s_job_t *) zlistx_next (self->jobs);
        }
    }
}

//  Jobs held in state.
static size_t
s_count (worker_server_t *self, s_job_state_t state)
{
    size_t count = 0;
    for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs); job;
         job = (s_job_t *) zlistx_next (self->jobs))
        count += job->state == state;
    return count;
}

//  Jobs held that the broker still counts on.
static size_t
s_live_jobs (worker_server_t *self)
{
    size_t live = 0;
    for (s_job_t *job = (s_job_t *) zlistx_first (self->jobs); job;
         job = (s_job_t *) zlistx_next (self->jobs))
        live += !job->orphaned;
    return live;
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
    if (command && streq (command, "PREPARED") && job->state == S_COMPILING) {
        job->state = S_PREPARED;
        self->compiling--;
    }
    else
    if (command && streq (command, "RESULT")) {
        if (job->orphaned)
            log_info ("worker", "result of job %llu attempt %u dropped: lease taken back",
                      (unsigned long long) job->job, job->attempt);
        else {
            proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
            msg->job = job->job;
            msg->attempt = job->attempt;
            zframe_t *body = zmsg_pop (reply);
            char *status = zmsg_popstr (reply);
            proto_msg_set_str (msg->status, status);
            zstr_free (&status);
            proto_msg_set_body (msg, &body);
            if (self->broker && s_send (self, msg))
                log_warn ("worker", "could not send the result of job %llu",
                          (unsigned long long) job->job);
            proto_msg_destroy (&msg);
            self->done++;
        }
        s_remove_job (self, job);
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
    self->backoff_ms = BACKOFF_MIN_MS;
    self->reconnect_at = 0;         //  it is back: no new socket needed
    if (rc == 0 && msg->cmd != PROTO_ERROR)
        self->registered = true;
    if (rc == -2) {
        log_warn ("worker", "malformed message from the broker: %s", msg->reason);
        return;
    }
    switch (msg->cmd) {
        case PROTO_JOB:
            s_start_job (self, msg);
            break;
        case PROTO_ERROR:
            if (msg->code == PROTO_ERR_UNKNOWN_PEER) {
                //  A broker that does not know us (it restarted, or dropped
                //  us): it has requeued our leases. Start over, once: the
                //  440s that answer what we sent before our READY (the
                //  heartbeats queued while it was away) are not news.
                if (!self->registered && zclock_mono () - self->ready_sent
                                         < (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness)
                    break;
                log_info ("worker", "the broker does not know us: announcing again");
                s_orphan_jobs (self);
                s_send_ready (self);
            }
            else
                log_warn ("worker", "broker error %u: %s", msg->code, msg->reason);
            break;
        case PROTO_DRAIN:
            s_set_state (self, WORKER_STATE_DRAINING, msg->reason);
            break;
        case PROTO_DISCONNECT:
            log_info ("worker", "broker asked us to reconnect: %s", msg->reason);
            s_connect (self);
            break;
        default:
            break;                  //  HEARTBEAT: its arrival was the point
    }
}

//  Once per turn: gauges, readiness (/readyz, sd_notify READY once), the
//  stall beat, and a STATUS line at most every 5 s.
static void
s_turn (worker_server_t *self)
{
    bool connected = self->broker && self->registered && !self->reconnect_at;
    bool ready = connected && self->state == WORKER_STATE_READY;
    common_metric_set (self->m.busy, self->running, self->gpu, self->uuid);
    s_busy_sample (self);
    double busy = s_busy_s (self, zclock_usecs ());
    if (busy > self->busy_told) {
        common_metric_add (self->m.busy_seconds, busy - self->busy_told, self->gpu, self->uuid);
        self->busy_told = busy;
    }
    common_metric_set (self->m.busy_ratio, s_busy_ratio (self), self->gpu, self->uuid);
    common_metric_set (self->m.compiles, self->compiling, self->gpu, self->uuid);
    common_metric_set (self->m.prepared, s_count (self, S_PREPARED), self->gpu, self->uuid);
    common_metric_set (self->m.connected, connected? 1: 0);
    for (int i = 0; i < 3; i++)
        common_metric_set (self->m.state, (int) self->state == i? 1: 0, self->gpu, self->uuid, s_state_names [i]);
    common_metrics_t *registry = self->cfg.registry;
    common_metrics_beat (registry);
    if (ready != self->was_ready) {
        common_metrics_set_ready (registry, ready, ready? NULL:
                                  !connected? "not connected to the broker":
                                  s_state_names [self->state]);
        self->was_ready = ready;
    }
    if (!self->cfg.notify)
        return;
    if (ready && !self->ready_told) {
        common_notify_ready (NULL);
        self->ready_told = true;
    }
    int64_t now = zclock_mono ();
    if (self->ready_told && now >= self->next_status) {
        common_notify_status ("%s%s, %llu jobs done", s_state_names [self->state],
                              connected? "": " (disconnected)", (unsigned long long) self->done);
        self->next_status = now + 5000;
    }
}

//  A state request from another thread, or a command on the pipe.
static void
s_handle_command (worker_server_t *self, zsock_t *from, zsock_t *pipe)
{
    zmsg_t *request = zmsg_recv (from);
    char *command = request? zmsg_popstr (request): NULL;
    char *arg = request? zmsg_popstr (request): NULL;
    char *reason = request? zmsg_popstr (request): NULL;
    if (!command || streq (command, "$TERM") || streq (command, "STOP"))
        self->stop = true;
    else
    if (streq (command, "DRAIN"))
        s_set_state (self, WORKER_STATE_DRAINING, arg? arg: "asked to drain");
    else
    if (streq (command, "QUARANTINE"))
        s_set_state (self, WORKER_STATE_QUARANTINED, arg);
    else
    if (streq (command, "READY"))
        s_set_state (self, WORKER_STATE_READY, arg);
    else
    if (streq (command, "STATE") && arg) {
        for (int i = 0; i < 3; i++)
            if (streq (arg, s_state_names [i]))
                s_set_state (self, (worker_state_t) i, reason);
    }
    else
    if (streq (command, "STATUS") && from == pipe)
        zstr_sendf (pipe, "{\"state\":\"%s\",\"jobs\":%zu,\"done\":%llu,\"connects\":%llu,"
                    "\"slots\":%u,\"compilers\":%u,\"prefetch\":%u,\"compiling\":%u,"
                    "\"compiling_max\":%u,\"prepared\":%zu,\"running\":%u,\"busy\":%.4f}",
                    s_state_names [self->state], s_live_jobs (self),
                    (unsigned long long) self->done, (unsigned long long) self->connects,
                    self->cfg.slots, self->cfg.compilers, self->cfg.prefetch, self->compiling,
                    self->compiling_max, s_count (self, S_PREPARED), self->running,
                    s_busy_ratio (self));
    else
        log_warn ("worker", "unknown command '%s'", command);
    free (command);
    free (arg);
    free (reason);
    zmsg_destroy (&request);
}

int
worker_server_run (worker_server_t *self, zsock_t *pipe)
{
    self->poller = pipe? zpoller_new (pipe, self->control, NULL): zpoller_new (self->control, NULL);
    if (!self->poller || s_connect (self))
        return -1;
    log_info ("worker", "%s serving %s on %s, %u slots, %u compilers, %u prefetched, broker %s%s",
              self->name, self->backend, worker_eval_device (self->eval), self->cfg.slots,
              self->cfg.compilers, self->cfg.prefetch, self->endpoint, self->curve_secret? " (CURVE)": "");
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    bool drained = false;
    while (!self->stop && !drained && !zsys_interrupted) {
        void *which = zpoller_wait (self->poller, (int) self->cfg.heartbeat_ms);
        if (which && (which == pipe || which == self->control))
            s_handle_command (self, (zsock_t *) which, pipe);
        else
        if (which && which == self->broker)
            s_handle_broker (self, msg);
        else
        if (which)
            s_handle_job_actor (self, (zactor_t *) which);
        int64_t now = zclock_mono ();
        if (self->reconnect_at && now >= self->reconnect_at) {
            log_info ("worker", "reconnecting to %s", self->endpoint);
            if (s_connect (self))
                self->reconnect_at = now + self->backoff_ms;
        }
        else
        if (!self->reconnect_at
        &&  now - self->last_heard > (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness) {
            //  The broker went quiet: back off, then start over with a new socket.
            log_warn ("worker", "broker silent for %lld ms%s", (long long) (now - self->last_heard),
                      self->curve_secret? " (or it refuses our key)": "");
            self->reconnect_at = now + self->backoff_ms;
            self->backoff_ms = self->backoff_ms * 2 > BACKOFF_MAX_MS? BACKOFF_MAX_MS
                                                                    : self->backoff_ms * 2;
            self->last_heard = now;
        }
        if (self->broker && now - self->last_sent >= (int64_t) self->cfg.heartbeat_ms)
            s_send_heartbeat (self);
        if (self->state == WORKER_STATE_DRAINING && s_live_jobs (self) == 0 && !self->reconnect_at)
            drained = true;
        s_turn (self);
    }
    common_metrics_set_ready (self->cfg.registry, false, "stopping");
    if (self->cfg.notify)
        common_notify_stopping (drained? "drained": "stopping");
    if (self->broker) {
        proto_msg_reset (msg, PROTO_DISCONNECT);
        proto_msg_set_str (msg->reason, drained? "drained": "worker stopping");
        s_send (self, msg);
    }
    log_info ("worker", "%s %s after %llu job(s)", self->name, drained? "drained": "stopping",
              (unsigned long long) self->done);
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
