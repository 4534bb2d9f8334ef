/*  broker_server - the broker: routes jobs from clients to capable workers.

    One thread, two ROUTER sockets, no blocking call. A job lives in exactly
    one list at a time: its backend's queue while it waits, the list of the
    worker that holds its lease while it runs, or the finished list while
    its result is kept. That makes every step O(1) except picking a worker
    (a scan of that backend's few workers) and FETCH by tag (a scan of the
    kept results):
        SUBMIT   -> job table + store row + backend queue; ACCEPTED deferred
        batch end-> commit the store, send the deferred ACCEPTEDs, dispatch
        dispatch -> queue head to the least-loaded ready worker, JOB (attempt+1)
        RESULT   -> lease check (job, attempt, worker), store, RESULT to the
                    client, job to the finished list
        expiry   -> the worker's jobs back to the front of their queue, or
                    failed when they have lost max_attempts workers
    A batch is what one wakeup reads (up to 256 messages per socket): its
    store writes are one transaction, and no JOB leaves before the
    transaction that stored it commits and its ACCEPTED is out, so a client
    always sees ACCEPTED first and every acknowledged job is on disk.
    Bodies and routing ids are moved between messages, never copied; a JOB
    resend shares the body's bytes (zmq_msg_copy). Spec: docs/protocol.md.
    This file holds the socket loop, the command tables (what each command
    from a worker, a client or the pipe leads to), batches and the life
    cycle; the parts are named in broker_internal.h.
*/
#include "broker_internal.h"
#include "proto_curve.h"
#include "common_notify.h"

//  Send self->out to a peer: the identity and body are lent, not taken.
int
broker_send (broker_server_t *self, zsock_t *sock, zframe_t *identity, zframe_t *body)
{
    self->out->routing_id = identity;
    self->out->body = body;
    int rc = proto_msg_send (self->out, sock);
    int saved = errno;
    self->out->routing_id = NULL;
    self->out->body = NULL;
    errno = saved;
    return rc;
}

void
broker_send_error (broker_server_t *self, zsock_t *sock, zframe_t *identity, uint32_t code,
                   const char *reason, uint64_t ref, uint64_t job)
{
    if (!identity)
        return;
    proto_msg_reset (self->out, PROTO_ERROR);
    self->out->code = code;
    proto_msg_set_str (self->out->reason, reason);
    self->out->ref = ref;
    self->out->job = job;
    if (broker_send (self, sock, identity, NULL)) {
        if (sock == self->clients)
            broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        log_debug ("broker", "ERROR %u not delivered: %s", code, zmq_strerror (errno));
    }
}

//  One message from sock (a worker's or a client's) into self->in. 0: one
//  to handle; -1: none, one from a connection CURVE never approved (nothing
//  at all is said to it), or a malformed one (counted, answered with an ERROR).
static int
s_receive (broker_server_t *self, zsock_t *sock)
{
    proto_msg_t *msg = self->in;
    int rc = proto_msg_recv (msg, sock);
    if (rc == -1)
        return -1;
    if (self->auth && !msg->user_id [0]) {
        self->stats.unauthorized++;
        return -1;
    }
    if (rc == -2) {
        broker_bump (&self->stats.malformed, self->m.messages_malformed);
        if (sock == self->clients && msg->cmd == PROTO_SUBMIT)
            common_metric_inc (self->m.jobs_rejected, "malformed");
        log_info ("broker", "malformed message from a %s: %s", sock == self->clients? "client": "worker",
                  msg->reason);
        broker_send_error (self, sock, msg->routing_id, msg->code, msg->reason, 0, 0);
        return -1;
    }
    return 0;
}

static void
s_handle_worker (broker_server_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    if (s_receive (self, self->workers))
        return;
    if (msg->cmd == PROTO_READY) {
        broker_worker_ready (self, msg, now);
        return;
    }
    broker_worker_t *worker = broker_worker_lookup (self, msg->routing_id);
    if (!worker) {
        if (msg->cmd == PROTO_RESULT) {
            broker_bump (&self->stats.dropped_results, self->m.results_dropped);
            log_info ("broker", "RESULT job %" PRIu64 " from an unknown worker dropped", msg->job);
        }
        if (msg->cmd != PROTO_DISCONNECT)
            broker_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_PEER,
                               "unknown worker: send READY", 0, 0);
        return;
    }
    //  Any message is a sign of life.
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    worker->heard_us = now;
    switch (msg->cmd) {
        case PROTO_HEARTBEAT:
            //  Kept for `kgym workers`; the decoder has bounded it to 0..1.
            if (msg->busy >= 0)
                worker->busy = msg->busy;
            if (msg->state [0]) {
                int state = broker_worker_state_parse (msg->state);
                if (state < 0) {
                    broker_bump (&self->stats.malformed, self->m.messages_malformed);
                    broker_send_error (self, self->workers, msg->routing_id, PROTO_ERR_MALFORMED,
                                       "HEARTBEAT with an unknown state", 0, 0);
                }
                else
                    broker_worker_set_state (self, worker, (broker_worker_state_t) state);
            }
            break;
        case PROTO_RESULT:
            broker_worker_result (self, worker, msg);
            break;
        case PROTO_DISCONNECT:
            //  Leaving on purpose: whatever it still held is no fault of the jobs.
            broker_worker_drop (self, worker, msg->reason [0]? msg->reason: "disconnected", false,
                                NULL);
            break;
        case PROTO_ERROR:
            log_warn ("broker", "worker %s reports error %u: %s", worker->name, msg->code, msg->reason);
            break;
        default: {
            char why [64];
            snprintf (why, sizeof (why), "%s is not a worker command", proto_cmd_name (msg->cmd));
            broker_bump (&self->stats.malformed, self->m.messages_malformed);
            broker_send_error (self, self->workers, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why,
                               0, 0);
        }
    }
}

static void
s_handle_client (broker_server_t *self, int64_t now)
{
    proto_msg_t *msg = self->in;
    if (s_receive (self, self->clients))
        return;
    switch (msg->cmd) {
        case PROTO_SUBMIT:
            broker_client_submit (self, msg);
            break;
        case PROTO_HEARTBEAT: {
            char *key = broker_client_key (msg);
            broker_client_t *client = key? broker_client_named (self, key, false): NULL;
            free (key);
            if (client)
                broker_client_bind (self, client, msg->routing_id);
            proto_msg_reset (self->out, PROTO_HEARTBEAT);
            broker_send (self, self->clients, msg->routing_id, NULL);
            break;
        }
        case PROTO_FETCH:
            broker_client_fetch (self, msg);
            break;
        case PROTO_DRAIN:
            broker_client_drain (self, msg);
            break;
        case PROTO_CANCEL:
            broker_client_cancel (self, msg);
            break;
        case PROTO_QUERY:
            broker_client_query (self, msg);
            break;
        case PROTO_DISCONNECT:
            broker_client_disconnect (self, msg->routing_id);
            break;
        case PROTO_ERROR:
            log_warn ("broker", "a client reports error %u: %s", msg->code, msg->reason);
            break;
        default: {
            char why [64];
            snprintf (why, sizeof (why), "%s is not a client command", proto_cmd_name (msg->cmd));
            broker_bump (&self->stats.malformed, self->m.messages_malformed);
            broker_send_error (self, self->clients, msg->routing_id, PROTO_ERR_UNKNOWN_COMMAND, why,
                               msg->cmd == PROTO_RESULT? msg->ref: 0, 0);
        }
    }
}

//  Drop kept results past the count or the age limit, oldest first.
static void
s_retire (broker_server_t *self)
{
    if (!self->finished.head)
        return;
    int64_t oldest = broker_wall_us () - (int64_t) self->cfg.keep_s * 1000000;
    while (self->finished.head
    &&    (self->finished.size > self->cfg.keep_results || self->finished.head->finished_us < oldest)) {
        broker_job_t *job = self->finished.head;
        broker_joblist_remove (&self->finished, job);
        if (self->store && broker_store_delete (self->store, job->id))
            self->stats.store_errors++;
        broker_job_destroy (self, &job);
    }
}

//  ACCEPTED to the job's client; false when it could not go.
static bool
s_send_accepted (broker_server_t *self, broker_job_t *job)
{
    zframe_t *identity = job->client->identity;
    if (!identity)
        return false;
    proto_msg_reset (self->out, PROTO_ACCEPTED);
    self->out->ref = job->ref;
    self->out->job = job->id;
    if (broker_send (self, self->clients, identity, NULL) == 0)
        return true;
    broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
    if (errno == EHOSTUNREACH)
        broker_client_unbind (self, job->client);
    return false;
}

//  End of a batch: commit what it stored, then send what waited for that
//  (ACCEPTEDs, 503 notices, results of jobs that waited too long for a
//  worker, SUMMARYs), then lease what can be leased.
static void
s_end_batch (broker_server_t *self)
{
    s_retire (self);
    bool committed = true;
    if (self->store && broker_store_pending (self->store) && broker_store_commit (self->store)) {
        self->stats.store_errors++;
        committed = false;
    }
    for (size_t i = 0; i < self->ndeferred; i++) {
        broker_deferred_t *entry = &self->deferred [i];
        if (entry->identity) {
            broker_send_error (self, self->clients, entry->identity, entry->code, entry->reason,
                               entry->ref, 0);
            zframe_destroy (&entry->identity);
            free (entry->reason);
            continue;
        }
        broker_job_t *job = (broker_job_t *) zhashx_lookup (self->jobs, &entry->job);
        if (!job)
            continue;           //  cancelled in the meantime
        if (job->fresh && !committed) {
            //  Not on disk: it was never accepted. The client may resubmit.
            broker_send_error (self, self->clients, job->client->identity, PROTO_ERR_INTERNAL,
                               "cannot store the job", job->ref, 0);
            self->stats.rejected++;
            common_metric_inc (self->m.jobs_rejected, "store_error");
            broker_job_unlink (self, job);
            broker_job_destroy (self, &job);
            continue;
        }
        if (entry->new_job) {
            self->stats.submitted++;
            common_metric_inc (self->m.jobs_submitted, job->backend->name);
        }
        job->fresh = false;
        bool told = s_send_accepted (self, job);
        //  A new job that no registered worker serves is told so (after its
        //  ACCEPTED) and waits for one a while, not for ever.
        if (entry->new_job && !job->backend->nworkers
        &&  (job->state == JOB_QUEUED || job->state == JOB_FOLLOWING))
            broker_job_unserved (self, job, self->cfg.no_worker_grace_s, told);
        if (told && entry->resend && job->state == JOB_DONE && !job->cancelled)
            broker_resend_result (self, job, NULL);
    }
    self->ndeferred = 0;
    int64_t now = broker_now_us ();
    broker_unserved_check (self);
    broker_unserved_expire (self, now);
    broker_send_summaries (self, now);
    //  Task statistics reach the disk at most once a second.
    if (self->tasks && now >= self->next_tasks_flush_us) {
        broker_tasks_flush (self->tasks);
        self->next_tasks_flush_us = now + 1000000;
    }
    if (self->dispatch_due)
        broker_dispatch_all (self);
    //  Dispatch does not write the store, but a failed send may requeue
    //  (attempt counts): commit those too.
    if (self->store && broker_store_pending (self->store) && broker_store_commit (self->store))
        self->stats.store_errors++;
}

//  Once per loop turn: gauges, the stall beat, sd_notify STATUS (at most
//  once a second) and WATCHDOG (at half of $WATCHDOG_USEC).
static void
s_turn (broker_server_t *self)
{
    if (self->metrics)
        broker_update_gauges (self);
    if (self->cfg.registry)
        common_metrics_beat (self->cfg.registry);
    if (!self->cfg.notify)
        return;
    int64_t now = broker_now_us ();
    if (now >= self->next_status_us) {
        common_notify_status ("%zu queued, %zu in flight, %zu workers", self->queued,
                              self->inflight, zhashx_size (self->worker_table));
        self->next_status_us = now + 1000000;
    }
    if (self->watchdog_us && now >= self->next_watchdog_us) {
        common_notify_watchdog ();
        self->next_watchdog_us = now + self->watchdog_us;
    }
}

static void
s_handle_pipe (broker_server_t *self)
{
    char *command = zstr_recv (self->pipe);
    if (!command) {
        self->terminated = true;        //  interrupted
        return;
    }
    if (streq (command, "$TERM"))
        self->terminated = true;
    else
    if (streq (command, "ENDPOINTS")) {
        zstr_sendm (self->pipe, self->clients_endpoint);
        zstr_send (self->pipe, self->workers_endpoint);
    }
    else
    if (streq (command, "STATS")) {
        char *json = broker_stats_json (self);
        if (json && self->auth) {
            //  The handshakes the ZAP handler let in and refused.
            zstr_send (self->auth, "STATS");
            char *auth = zstr_recv (self->auth);
            if (auth && auth [0] == '{') {
                json [strlen (json) - 1] = 0;
                char *both = zsys_sprintf ("%s,\"auth\":%s}", json, auth);
                zstr_free (&json);
                json = both;
            }
            zstr_free (&auth);
        }
        zstr_send (self->pipe, json? json: "{}");
        zstr_free (&json);
    }
    else
        log_warn ("broker", "unknown pipe command '%s'", command);
    zstr_free (&command);
}

static void
s_broker_destroy (broker_server_t **self_p)
{
    broker_server_t *self = *self_p;
    if (!self)
        return;
    //  Sockets first: nothing more comes in while the rest goes.
    zpoller_destroy (&self->poller);
    zsock_destroy (&self->clients);
    zsock_destroy (&self->workers);
    zactor_destroy (&self->auth);
    broker_tasks_destroy (&self->tasks);        //  flushes through the store's connection
    broker_store_destroy (&self->store);
    //  Every job is in one list: a queue, a worker's leases, or the
    //  finished list (a walk of the job table would rescan it per delete).
    if (self->worker_table) {
        broker_worker_t *worker;
        while ((worker = (broker_worker_t *) zhashx_first (self->worker_table))) {
            while (worker->jobs.head) {
                broker_job_t *job = worker->jobs.head;
                broker_joblist_remove (&worker->jobs, job);
                broker_job_destroy (self, &job);
            }
            zhashx_delete (self->worker_table, worker->identity);
            zframe_destroy (&worker->identity);
            free (worker);
        }
    }
    if (self->backends)
        for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
             backend = (broker_backend_t *) zhashx_next (self->backends))
            while (backend->queue.head) {
                broker_job_t *job = backend->queue.head;
                broker_joblist_remove (&backend->queue, job);
                broker_job_destroy (self, &job);
            }
    while (self->finished.head) {
        broker_job_t *job = self->finished.head;
        broker_joblist_remove (&self->finished, job);
        broker_job_destroy (self, &job);
    }
    if (self->clients_by_key) {
        //  Clients with no job were freed with their last job; none is left.
        broker_client_t *client;
        while ((client = (broker_client_t *) zhashx_first (self->clients_by_key))) {
            client->jobs = 0;
            broker_client_release (self, client);
        }
    }
    if (self->orphans) {
        zframe_destroy (&self->orphans->identity);
        free (self->orphans);
    }
    zhashx_destroy (&self->jobs);
    zhashx_destroy (&self->leaders);
    if (self->summaries) {
        zmsg_t *entry;
        while ((entry = (zmsg_t *) zlist_pop (self->summaries)))
            zmsg_destroy (&entry);
        zlist_destroy (&self->summaries);
    }
    zhashx_destroy (&self->settling);
    broker_cache_destroy (&self->cache);
    broker_groups_destroy (&self->groups);
    broker_trajectories_destroy (&self->trajectories);
    zhashx_destroy (&self->worker_table);
    zhashx_destroy (&self->backends);
    zhashx_destroy (&self->clients_by_key);
    zhashx_destroy (&self->clients_by_id);
    free (self->deferred);
    proto_msg_destroy (&self->in);
    proto_msg_destroy (&self->out);
    zstr_free (&self->clients_endpoint);
    zstr_free (&self->workers_endpoint);
    free (self);
    *self_p = NULL;
}

//  Bind a ROUTER (a CURVE server in the given ZAP domain when a secret is
//  given); NULL with a reason.
static zsock_t *
s_bind (const char *endpoint, const char *what, const char *curve_secret, const char *domain,
        char **bound, char *err, size_t errlen)
{
    zsock_t *sock = zsock_new (ZMQ_ROUTER);
    if (!sock) {
        snprintf (err, errlen, "cannot create the %s socket", what);
        return NULL;
    }
    proto_sock_configure (sock, true);
    if (curve_secret && proto_curve_server (sock, curve_secret, domain, err, errlen)) {
        zsock_destroy (&sock);
        return NULL;
    }
    if (!endpoint || zsock_bind (sock, "%s", endpoint) == -1) {
        snprintf (err, errlen, "cannot bind %s endpoint %s: %s", what, endpoint? endpoint: "(none)",
                  zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
        return NULL;
    }
    const char *last = zsock_endpoint (sock);
    *bound = strdup (last? last: endpoint);
    return sock;
}

static broker_server_t *
s_broker_new (zsock_t *pipe, const broker_config_t *cfg, char *err, size_t errlen)
{
    broker_server_t *self = (broker_server_t *) calloc (1, sizeof (broker_server_t));
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->pipe = pipe;
    broker_config_default (&self->cfg);
    if (cfg)
        self->cfg = *cfg;
    if (self->cfg.metrics) {
        self->m = *self->cfg.metrics;
        self->metrics = true;
    }
    self->cfg.metrics = NULL;           //  the caller's struct: copied
    if (self->cfg.notify)
        self->watchdog_us = (int64_t) common_notify_watchdog_usec () / 2;
    if (self->cfg.heartbeat_ms == 0)
        self->cfg.heartbeat_ms = 1000;
    if (self->cfg.liveness == 0)
        self->cfg.liveness = 3;
    if (self->cfg.max_attempts == 0)
        self->cfg.max_attempts = 3;
    //  Ids grow across restarts even without a store: a client that kept
    //  the ids of a broker that died never sees one again for another job.
    self->next_job = (uint64_t) broker_wall_us ();
    self->in = proto_msg_new (0);
    self->out = proto_msg_new (0);
    self->jobs = broker_table_new (broker_u64_hash, broker_u64_compare);
    self->worker_table = broker_table_new (broker_frame_hash, broker_frame_compare);
    self->backends = zhashx_new ();
    self->clients_by_key = broker_table_new (NULL, NULL);
    self->clients_by_id = broker_table_new (broker_frame_hash, broker_frame_compare);
    self->orphans = broker_client_new (NULL);
    self->leaders = broker_table_new (broker_key_hash, broker_key_compare);
    self->summaries = zlist_new ();
    self->settling = zhashx_new ();
    self->cache = broker_cache_new (self->cfg.cache_entries, (size_t) self->cfg.cache_bytes);
    self->groups = broker_groups_new (100000);
    self->trajectories = broker_trajectories_new (100000, 256u << 20);
    self->started_us = broker_now_us ();
    if (!self->in || !self->out || !self->jobs || !self->worker_table || !self->backends
    ||  !self->clients_by_key || !self->clients_by_id || !self->orphans || !self->leaders
    ||  !self->summaries || !self->settling || !self->cache || !self->groups
    ||  !self->trajectories) {
        snprintf (err, errlen, "out of memory");
        s_broker_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->backends, broker_backend_free);
    zhashx_set_destructor (self->settling, broker_settling_free);

    if (self->cfg.db_path) {
        self->store = broker_store_new (self->cfg.db_path, self->cfg.db_full_sync, err, errlen);
        if (!self->store || broker_jobs_load (self, err, errlen)) {
            s_broker_destroy (&self);
            return NULL;
        }
        self->cfg.db_path = NULL;       //  the caller's string
    }
    //  Task statistics live in the job database when there is one.
    size_t window = self->cfg.task_window? self->cfg.task_window: 100;
    self->tasks = self->store? broker_tasks_new_shared (window, broker_store_db (self->store), err,
                                                        errlen):
                               broker_tasks_new (window, NULL, err, errlen);
    if (!self->tasks) {
        s_broker_destroy (&self);
        return NULL;
    }
    if (self->cfg.curve_secret) {
        //  The ZAP handler runs before anything binds, and for the broker's
        //  whole life: ZeroMQ lets CURVE peers in when none answers.
        broker_auth_config_t acfg = { self->cfg.trainer_keys, self->cfg.worker_keys };
        self->auth = zactor_new (broker_auth_actor, &acfg);
        char *reason = self->auth? zstr_recv (self->auth): NULL;
        if (!reason || reason [0]) {
            snprintf (err, errlen, "%s", reason? reason: "cannot start the ZAP handler");
            zstr_free (&reason);
            s_broker_destroy (&self);
            return NULL;
        }
        zstr_free (&reason);
    }
    const char *secret = self->cfg.curve_secret;
    self->clients = s_bind (self->cfg.clients_endpoint, "clients", secret, BROKER_AUTH_CLIENTS,
                            &self->clients_endpoint, err, errlen);
    if (!self->clients) {
        s_broker_destroy (&self);
        return NULL;
    }
    self->workers = s_bind (self->cfg.workers_endpoint, "workers", secret, BROKER_AUTH_WORKERS,
                            &self->workers_endpoint, err, errlen);
    if (!self->workers) {
        s_broker_destroy (&self);
        return NULL;
    }
    //  The config's strings belong to the caller, who may free them once started.
    self->cfg.clients_endpoint = self->clients_endpoint;
    self->cfg.workers_endpoint = self->workers_endpoint;
    self->cfg.curve_secret = self->cfg.trainer_keys = self->cfg.worker_keys = NULL;
    self->poller = zpoller_new (pipe, self->clients, self->workers, NULL);
    if (!self->poller) {
        snprintf (err, errlen, "cannot create the poller");
        s_broker_destroy (&self);
        return NULL;
    }
    self->dispatch_due = true;
    return self;
}

//  A start that failed still answers the pipe: ENDPOINTS gets "" and the reason.
static void
s_failed_actor (zsock_t *pipe, const char *reason)
{
    zsock_signal (pipe, 0);
    while (true) {
        char *command = zstr_recv (pipe);
        if (!command)
            return;
        bool term = streq (command, "$TERM");
        if (streq (command, "ENDPOINTS")) {
            zstr_sendm (pipe, "");
            zstr_send (pipe, reason);
        }
        else
        if (streq (command, "STATS"))
            zstr_send (pipe, "{}");
        zstr_free (&command);
        if (term)
            return;
    }
}

//  Read up to BROKER_BATCH messages from a socket; true if it may hold more.
static bool
s_drain (broker_server_t *self, zsock_t *sock, void (*handler) (broker_server_t *, int64_t))
{
    int64_t now = broker_now_us ();
    for (int i = 0; i < BROKER_BATCH; i++) {
        if (!(zsock_events (sock) & ZMQ_POLLIN))
            return false;
        handler (self, now);
        if ((i & 15) == 15)
            now = broker_now_us ();
    }
    return true;
}

void
broker_config_default (broker_config_t *cfg)
{
    memset (cfg, 0, sizeof (*cfg));
    cfg->clients_endpoint = "tcp://*:5555";
    cfg->workers_endpoint = "tcp://*:5556";
    cfg->heartbeat_ms = 1000;
    cfg->liveness = 3;
    cfg->max_queue = 100000;
    cfg->max_attempts = 3;
    cfg->keep_results = 100000;
    cfg->keep_s = 3600;
    cfg->cache_entries = 10000;
    cfg->cache_bytes = 256u << 20;
    cfg->task_window = 100;
    cfg->no_worker_grace_s = 60;
}

void
broker_server_actor (zsock_t *pipe, void *args)
{
    char err [512] = "";
    broker_server_t *self = s_broker_new (pipe, (const broker_config_t *) args, err, sizeof (err));
    if (!self) {
        //  Reported through ENDPOINTS: the caller decides how to say it.
        log_debug ("broker", "%s", err);
        s_failed_actor (pipe, err);
        return;
    }
    log_debug ("broker", "clients on %s, workers on %s%s", self->clients_endpoint,
               self->workers_endpoint, self->auth? " (CURVE)": "");
    zsock_signal (pipe, 0);

    int64_t interval_us = (int64_t) self->cfg.heartbeat_ms * 1000;
    self->next_heartbeat_us = broker_now_us () + interval_us;
    s_end_batch (self);         //  jobs loaded from the store wait for workers
    s_turn (self);
    while (!self->terminated) {
        int64_t now = broker_now_us ();
        int timeout_ms = 0;
        if (self->next_heartbeat_us > now)
            timeout_ms = (int) ((self->next_heartbeat_us - now + 999) / 1000);
        if (self->watchdog_us && timeout_ms > self->watchdog_us / 1000)
            timeout_ms = (int) (self->watchdog_us / 1000);
        int64_t settled_us = broker_settling_next (self);     //  a held SUMMARY goes out on time
        if (settled_us && (settled_us - now + 999) / 1000 < timeout_ms)
            timeout_ms = settled_us > now? (int) ((settled_us - now + 999) / 1000): 0;
        zsock_t *which = (zsock_t *) zpoller_wait (self->poller, timeout_ms);
        if (!which && zpoller_terminated (self->poller))
            break;
        if (which == pipe)
            s_handle_pipe (self);
        //  Serve both sockets until neither has more, whoever woke us, but
        //  never past the heartbeat time: a busy broker still heartbeats.
        //  Each turn is a batch: one commit, then ACCEPTEDs, then dispatch.
        bool more = true;
        while (more && !self->terminated && broker_now_us () < self->next_heartbeat_us) {
            more = s_drain (self, self->workers, s_handle_worker);
            more = s_drain (self, self->clients, s_handle_client) || more;
            s_end_batch (self);
            if (zsock_events (pipe) & ZMQ_POLLIN)
                s_handle_pipe (self);
        }
        now = broker_now_us ();
        if (now >= self->next_heartbeat_us) {
            broker_heartbeat (self, now);
            s_end_batch (self);
            self->next_heartbeat_us = now + interval_us;
        }
        s_turn (self);
    }
    s_end_batch (self);
    s_broker_destroy (&self);
}
