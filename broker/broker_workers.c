/*  broker_workers - part of broker_server: workers and their leases.

    READY registers a worker under its backend; any message renews its
    expiry; a RESULT that matches a lease it holds finishes the job; a
    worker that is silent too long, unreachable, or leaves gives its leases
    back to the front of their queue (counted against the jobs when it
    vanished: poison jobs fail after max_attempts). State and the other
    parts: broker_internal.h.
*/
#include "broker_internal.h"

static const char *s_state_names [] = { "ready", "draining", "quarantined" };

int
broker_worker_kind (const broker_worker_t *worker)
{
    return worker->state == WORKER_DRAINING? BROKER_KIND_DRAINING:
           worker->state == WORKER_QUARANTINED? BROKER_KIND_QUARANTINED:
           worker->jobs.size? BROKER_KIND_BUSY: BROKER_KIND_IDLE;
}

//  The device model of a worker's device text: "NVIDIA H200 (sm_90,
//  0000:00:06.0)" is "NVIDIA H200 (sm_90)", so every board of a model
//  shares cached results; other texts stay as they are.
static void
s_device_model (const char *device, char model [PROTO_MAX_STR])
{
    proto_msg_set_str (model, device);
    size_t len = strlen (model);
    char *open = strrchr (model, '(');
    char *comma = strrchr (model, ',');
    if (len > 0 && model [len - 1] == ')' && open && comma && comma > open)
        strcpy (comma, ")");
}

broker_worker_t *
broker_worker_lookup (broker_server_t *self, zframe_t *identity)
{
    return identity? (broker_worker_t *) zhashx_lookup (self->worker_table, identity): NULL;
}

//  Forget a worker; every job it held goes back to the front of its queue in
//  the order it was dispatched, to be leased again with the next attempt.
//  lost: it vanished (expiry, failed send), which counts against each job it
//  held (but unsent, whose JOB never left); a job that has lost
//  max_attempts workers is failed instead. Does not dispatch (the batch end
//  does), so a drop never frees another worker under the caller's feet.
void
broker_worker_drop (broker_server_t *self, broker_worker_t *worker, const char *why, bool lost,
                    broker_job_t *unsent)
{
    broker_backend_t *backend = worker->backend;
    size_t held = worker->jobs.size;
    size_t failed = 0;
    while (worker->jobs.tail) {
        broker_job_t *job = worker->jobs.tail;
        broker_joblist_remove (&worker->jobs, job);
        job->worker = NULL;
        self->inflight--;
        bool counted = lost && job != unsent;
        if (counted)
            job->lost++;
        if (counted && job->lost >= self->cfg.max_attempts) {
            char message [128];
            snprintf (message, sizeof message, "worker lost %u times while running this job",
                      job->lost);
            broker_job_fail (self, job, message, true);
            failed++;
            continue;
        }
        job->state = JOB_QUEUED;
        broker_joblist_push_front (&backend->queue, job);
        self->queued++;
        broker_bump (&self->stats.requeued, self->m.jobs_requeued);
        if (self->store && broker_store_requeue (self->store, job->id, job->attempt, job->lost))
            self->stats.store_errors++;
    }
    //  Swap-remove from the backend's array.
    size_t last = backend->nworkers - 1;
    backend->workers [worker->slot] = backend->workers [last];
    backend->workers [worker->slot]->slot = worker->slot;
    backend->nworkers = last;
    if (backend->cursor >= backend->nworkers)
        backend->cursor = 0;
    if (backend->nworkers == 0 && backend->queue.size)
        backend->recheck = true;        //  its jobs are told at the batch end, after ACCEPTEDs

    zhashx_delete (self->worker_table, worker->identity);
    if (held || lost)
        broker_bump (&self->stats.workers_lost, self->m.workers_lost);
    else
        self->stats.workers_left++;
    if (held || lost)
        log_info ("broker", "worker %s (%s, %s) dropped: %s; %zu job(s) requeued, %zu failed",
                  worker->name, backend->name, worker->device, why, held - failed, failed);
    else
        log_info ("broker", "worker %s (%s, %s) left: %s", worker->name, backend->name,
                  worker->device, why);
    zframe_destroy (&worker->identity);
    free (worker);
    self->dispatch_due = true;
}

//  A state name to a state; -1 when unknown ("" is ready).
int
broker_worker_state_parse (const char *name)
{
    if (!name [0])
        return WORKER_READY;
    for (int i = 0; i < 3; i++)
        if (streq (name, s_state_names [i]))
            return i;
    return -1;
}

void
broker_worker_set_state (broker_server_t *self, broker_worker_t *worker, broker_worker_state_t state)
{
    if (worker->state == state)
        return;
    log_info ("broker", "worker %s is %s (was %s), holding %zu job(s)", worker->name,
              s_state_names [state], s_state_names [worker->state], worker->jobs.size);
    worker->state = state;
    if (state == WORKER_QUARANTINED)
        worker->faults++;
    if (state == WORKER_READY)
        self->dispatch_due = true;
}

//  READY: register (or re-register) the sender.
void
broker_worker_ready (broker_server_t *self, proto_msg_t *msg, int64_t now)
{
    int state = broker_worker_state_parse (msg->state);
    if (msg->capacity == 0 || msg->backend [0] == 0 || state < 0) {
        broker_bump (&self->stats.malformed, self->m.messages_malformed);
        broker_send_error (self, self->workers, msg->routing_id, PROTO_ERR_MALFORMED,
                           msg->capacity == 0? "READY with capacity 0":
                           state < 0? "READY with an unknown state": "READY with empty backend",
                           0, 0);
        return;
    }
    broker_worker_t *worker = broker_worker_lookup (self, msg->routing_id);
    if (worker)
        //  It started over (or changed its mind about its device): what it
        //  held goes back, which is no fault of the jobs.
        broker_worker_drop (self, worker, "announced itself again", false, NULL);
    broker_backend_t *backend = broker_backend_require (self, msg->backend);
    worker = (broker_worker_t *) calloc (1, sizeof (broker_worker_t));
    if (backend && worker && backend->nworkers == backend->maxworkers) {
        size_t grown = backend->maxworkers? backend->maxworkers * 2: 8;
        broker_worker_t **workers = (broker_worker_t **) realloc (backend->workers,
                                                                  grown * sizeof (broker_worker_t *));
        if (workers) {
            backend->workers = workers;
            backend->maxworkers = grown;
        }
    }
    if (!backend || !worker || backend->nworkers == backend->maxworkers) {
        free (worker);
        broker_send_error (self, self->workers, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory",
                           0, 0);
        return;
    }
    worker->identity = msg->routing_id;
    msg->routing_id = NULL;
    memcpy (worker->name, msg->name, sizeof (worker->name));
    memcpy (worker->device, msg->device, sizeof (worker->device));
    memcpy (worker->host, msg->host, sizeof (worker->host));
    s_device_model (msg->device, worker->model);
    memcpy (backend->last_device, worker->model, sizeof (backend->last_device));
    worker->since_us = worker->heard_us = now;
    worker->capacity = msg->capacity;
    worker->busy = -1;
    worker->pid = msg->pid;
    worker->state = (broker_worker_state_t) state;
    worker->backend = backend;
    worker->slot = backend->nworkers;
    worker->expires_us = now + (int64_t) self->cfg.heartbeat_ms * self->cfg.liveness * 1000;
    backend->workers [backend->nworkers++] = worker;
    zhashx_insert (self->worker_table, worker->identity, worker);
    broker_backend_served (self, backend, worker->name);
    log_info ("broker", "worker %s %s: backend %s, device %s, capacity %u, pid %u",
              worker->name, s_state_names [state], backend->name, worker->device,
              worker->capacity, worker->pid);
    self->dispatch_due = true;
}

//  RESULT from a worker: keep and forward it if it matches the current lease.
void
broker_worker_result (broker_server_t *self, broker_worker_t *worker, proto_msg_t *msg)
{
    broker_job_t *job = (broker_job_t *) zhashx_lookup (self->jobs, &msg->job);
    if (!job || job->state != JOB_RUNNING || job->worker != worker || job->attempt != msg->attempt) {
        //  A lease that was taken back (or never was): the job lives on elsewhere.
        broker_bump (&self->stats.dropped_results, self->m.results_dropped);
        log_info ("broker", "stale RESULT job %" PRIu64 " attempt %u from %s dropped",
                  msg->job, msg->attempt, worker->name);
        return;
    }
    broker_joblist_remove (&worker->jobs, job);
    self->inflight--;
    worker->done++;
    self->dispatch_due = true;
    //  Checked before it is believed (stored, cached, counted, forwarded).
    zframe_t *body = proto_msg_get_body (msg);
    broker_verdict_t verdict;
    char why [256];
    if (broker_verdict_parse (zframe_data (body), zframe_size (body), msg->status, &verdict, why,
                              sizeof why) == 0
    &&  broker_verdict_judge (&verdict, broker_verdict_rewarded (verdict.status)?
                              broker_job_rewards (job): NULL, why, sizeof why) == 0) {
        broker_job_finish (self, job, &body, worker->name, &verdict, worker->model, true);
        if (streq (job->status, "runtime_error") || streq (job->status, "timeout"))
            worker->faults++;
        return;
    }
    zframe_destroy (&body);
    worker->bad_results++;
    self->stats.bad_results++;
    common_metric_inc (self->m.results_rejected, worker->name);
    char message [512];
    snprintf (message, sizeof message, "the result from worker %s was rejected: %s",
              worker->name, why);
    log_warn ("broker", "job %" PRIu64 " attempt %u: %s", job->id, job->attempt, message);
    broker_job_fail (self, job, message, false);
}

//  Every heartbeat interval: a HEARTBEAT to each worker, then drop the ones
//  silent too long (or found unreachable); their jobs are re-offered at the
//  batch end.
void
broker_heartbeat (broker_server_t *self, int64_t now)
{
    proto_msg_reset (self->out, PROTO_HEARTBEAT);
    for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (broker_worker_t *) zhashx_next (self->worker_table))
        if (broker_send (self, self->workers, worker->identity, NULL) && errno == EHOSTUNREACH)
            worker->expires_us = 0;

    bool again = true;
    while (again) {
        //  Restart the walk after each drop: it changes the table.
        again = false;
        for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
             worker = (broker_worker_t *) zhashx_next (self->worker_table))
            if (now >= worker->expires_us) {
                broker_worker_drop (self, worker, worker->expires_us? "silent too long": "unreachable",
                                    true, NULL);
                again = true;
                break;
            }
    }
}
