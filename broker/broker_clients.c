/*  broker_clients - part of broker_server: clients and their requests.

    A client is known by its id (named, across connections) or by its
    connection (anonymous); its record holds the routing id its replies go
    to now. SUBMIT (a new job, a resend, or a refusal), FETCH, DRAIN,
    CANCEL and DISCONNECT are answered here, and results are delivered
    (or kept when the client cannot take them). ACCEPTEDs and the ERRORs
    that follow them wait for the batch's commit (deferred). State and the
    other parts: broker_internal.h.
*/
#include "broker_internal.h"

broker_client_t *
broker_client_new (const char *key)
{
    broker_client_t *client = (broker_client_t *) calloc (1, sizeof (broker_client_t));
    if (!client)
        return NULL;
    if (key) {
        client->key = strdup (key);
        client->refs = broker_table_new (broker_u64_hash, broker_u64_compare);
        if (!client->key || !client->refs) {
            free (client->key);
            zhashx_destroy (&client->refs);
            free (client);
            return NULL;
        }
    }
    return client;
}

//  Forget the client's routing id (it went away, or another client took it).
void
broker_client_unbind (broker_server_t *self, broker_client_t *client)
{
    if (client->identity) {
        if (zhashx_lookup (self->clients_by_id, client->identity) == client)
            zhashx_delete (self->clients_by_id, client->identity);
        zframe_destroy (&client->identity);
    }
}

//  Free a client nothing refers to any more.
void
broker_client_release (broker_server_t *self, broker_client_t *client)
{
    if (!client || client->jobs > 0 || client == self->orphans)
        return;
    broker_client_unbind (self, client);
    if (client->key)
        zhashx_delete (self->clients_by_key, client->key);
    zhashx_destroy (&client->refs);
    free (client->key);
    free (client);
}

//  From now on, results for client go to this routing id.
void
broker_client_bind (broker_server_t *self, broker_client_t *client, zframe_t *identity)
{
    if (!identity || (client->identity && zframe_eq (client->identity, identity)))
        return;
    broker_client_unbind (self, client);
    broker_client_t *other = (broker_client_t *) zhashx_lookup (self->clients_by_id, identity);
    if (other) {
        //  The same connection spoke for another client before: it is this one now.
        broker_client_unbind (self, other);
        broker_client_release (self, other);
    }
    client->identity = zframe_dup (identity);
    if (client->identity)
        zhashx_insert (self->clients_by_id, client->identity, client);
}

//  The client key of a message: its client id, in the namespace of its key.
char *
broker_client_key (const proto_msg_t *msg)
{
    if (!msg->client [0])
        return NULL;
    if (msg->user_id [0])
        return zsys_sprintf ("%s/%s", msg->user_id, msg->client);
    return strdup (msg->client);
}

//  The named client of this key (created when create), or NULL.
broker_client_t *
broker_client_named (broker_server_t *self, const char *key, bool create)
{
    broker_client_t *client = (broker_client_t *) zhashx_lookup (self->clients_by_key, key);
    if (!client && create) {
        client = broker_client_new (key);
        if (client)
            zhashx_insert (self->clients_by_key, client->key, client);
    }
    return client;
}

//  Send a job's result (body lent) to its client, if it can be reached.
//  The result stays kept either way. 0 or -1.
int
broker_send_result (broker_server_t *self, broker_job_t *job, zframe_t *body, zframe_t *to)
{
    broker_client_t *client = job->client;
    zframe_t *identity = to? to: client? client->identity: NULL;
    if (!identity) {
        broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        return -1;
    }
    proto_msg_reset (self->out, PROTO_RESULT);
    self->out->job = job->id;
    self->out->ref = job->ref;
    self->out->attempt = job->attempt;
    self->out->queue_s = job->queue_s;
    proto_msg_set_str (self->out->name, job->graded_by? job->graded_by: BROKER_NAME);
    proto_msg_set_str (self->out->status, job->status);
    if (broker_send (self, self->clients, identity, body) == 0)
        return 0;
    broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
    log_info ("broker", "result of job %" PRIu64 " (ref %" PRIu64 ") kept: client %s", job->id,
              job->ref, errno == EHOSTUNREACH? "has gone": "is not reading");
    if (errno == EHOSTUNREACH && client && identity == client->identity)
        broker_client_unbind (self, client);
    return -1;
}

//  Send a finished job's kept result again (to the given routing id). 0 or -1.
int
broker_resend_result (broker_server_t *self, broker_job_t *job, zframe_t *to)
{
    zframe_t *loaded = NULL;
    zframe_t *body = job->result;
    if (!body && self->store)
        body = loaded = broker_store_result (self->store, job->id);
    if (!body) {
        log_warn ("broker", "result of job %" PRIu64 " is not in the store", job->id);
        return -1;
    }
    int rc = broker_send_result (self, job, body, to);
    zframe_destroy (&loaded);
    if (rc == 0)
        self->stats.resent++;
    return rc;
}

//  Room for one more deferred reply; NULL when out of memory.
static broker_deferred_t *
s_defer_slot (broker_server_t *self)
{
    if (self->ndeferred == self->maxdeferred) {
        size_t grown = self->maxdeferred? self->maxdeferred * 2: 1024;
        broker_deferred_t *deferred = (broker_deferred_t *) realloc (self->deferred,
                                                                     grown * sizeof (broker_deferred_t));
        if (!deferred)
            return NULL;
        self->deferred = deferred;
        self->maxdeferred = grown;
    }
    broker_deferred_t *slot = &self->deferred [self->ndeferred++];
    memset (slot, 0, sizeof (*slot));
    return slot;
}

//  Hold an ACCEPTED (and maybe a result) until the batch commits.
static void
s_defer (broker_server_t *self, broker_job_t *job, bool resend, bool new_job)
{
    broker_deferred_t *slot = s_defer_slot (self);
    if (!slot) {
        //  Cannot hold it: the client resubmits, and gets it then.
        log_error ("broker", "out of memory: ACCEPTED of job %" PRIu64 " not sent", job->id);
        return;
    }
    slot->job = job->id;
    slot->resend = resend;
    slot->new_job = new_job;
}

//  An ERROR about a SUBMIT: after the ACCEPTEDs that wait, so a client sees
//  its replies in the order it submitted.
static void
s_submit_error (broker_server_t *self, zframe_t *identity, uint32_t code, const char *reason,
                uint64_t ref)
{
    broker_deferred_t *slot = self->ndeferred? s_defer_slot (self): NULL;
    if (slot) {
        slot->identity = zframe_dup (identity);
        slot->code = code;
        slot->ref = ref;
        slot->reason = strdup (reason);
    }
    else
        broker_send_error (self, self->clients, identity, code, reason, ref, 0);
}

void
broker_client_submit (broker_server_t *self, proto_msg_t *msg)
{
    if (msg->backend [0] == 0) {
        broker_bump (&self->stats.malformed, self->m.messages_malformed);
        common_metric_inc (self->m.jobs_rejected, "malformed");
        s_submit_error (self, msg->routing_id, PROTO_ERR_MALFORMED, "SUBMIT with empty backend",
                        msg->ref);
        return;
    }
    int policy = msg->cache [0]? -1: BROKER_POLICY_USE;
    for (int i = 0; i < BROKER_POLICIES; i++)
        if (streq (msg->cache, broker_policy_names [i]))
            policy = i;
    if (policy < 0) {
        broker_bump (&self->stats.malformed, self->m.messages_malformed);
        common_metric_inc (self->m.jobs_rejected, "malformed");
        s_submit_error (self, msg->routing_id, PROTO_ERR_MALFORMED,
                        "SUBMIT with a cache policy other than use, refresh or bypass", msg->ref);
        return;
    }
    broker_client_t *client = NULL;
    char *key = broker_client_key (msg);
    if (key) {
        client = broker_client_named (self, key, true);
        free (key);
    }
    else {
        client = (broker_client_t *) zhashx_lookup (self->clients_by_id, msg->routing_id);
        if (client && client->key)
            client = NULL;      //  that connection spoke as a named client before: a new one now
        if (!client)
            client = broker_client_new (NULL);
    }
    if (!client) {
        s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", msg->ref);
        return;
    }
    broker_client_bind (self, client, msg->routing_id);
    if (client->refs) {
        //  The same (client, ref) again: a resend after a reconnect. The job
        //  it names is answered, not run twice; a finished one (when the
        //  resend says so) with its kept result.
        broker_job_t *known = (broker_job_t *) zhashx_lookup (client->refs, &msg->ref);
        if (known && !known->cancelled && (known->state != JOB_DONE || msg->retry)) {
            self->stats.resubmitted++;
            s_defer (self, known, known->state == JOB_DONE, false);
            return;
        }
    }
    const char *refused = NULL;
    if (self->queued + self->following >= self->cfg.max_queue)
        refused = "queue full";
    else
    if (self->cfg.max_client_jobs && client->unfinished >= self->cfg.max_client_jobs)
        refused = "client limit: too many unfinished jobs";
    broker_backend_t *backend = refused? NULL: broker_backend_require (self, msg->backend);
    broker_job_t *job = refused? NULL: (broker_job_t *) calloc (1, sizeof (broker_job_t));
    if (!refused && (!backend || !job)) {
        free (job);
        job = NULL;
        s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "out of memory", msg->ref);
        broker_client_release (self, client);
        return;
    }
    if (refused) {
        self->stats.rejected++;
        common_metric_inc (self->m.jobs_rejected,
                           self->queued + self->following >= self->cfg.max_queue?
                           "overloaded": "client_limit");
        s_submit_error (self, msg->routing_id, PROTO_ERR_OVERLOADED, refused, msg->ref);
        broker_client_release (self, client);
        return;
    }
    job->id = self->next_job++;
    job->ref = msg->ref;
    job->client = client;
    job->body = proto_msg_get_body (msg);
    job->tag = msg->tag [0]? strdup (msg->tag): NULL;
    job->backend = backend;
    job->accepted_us = broker_wall_us ();
    job->state = JOB_QUEUED;
    job->policy = (uint8_t) policy;
    job->group = msg->group [0]? strdup (msg->group): NULL;
    job->trajectory = msg->trajectory [0]? strdup (msg->trajectory): NULL;
    job->reward = job->speedup = NAN;
    broker_job_describe (self, job, job->body);
    //  Answered by the cache, or by an identical job in flight, or queued.
    zframe_t *hit = NULL;
    broker_job_t *leader = NULL;
    if (job->keyed && job->policy == BROKER_POLICY_USE) {
        hit = broker_cached_result (self, job);
        if (!hit)
            leader = (broker_job_t *) zhashx_lookup (self->leaders, job->key);
    }
    if (self->store) {
        broker_store_row_t row = {
            .id = job->id, .client = client->key? client->key: "", .ref = job->ref,
            .tag = msg->tag, .backend = backend->name, .body = zframe_data (job->body),
            .body_size = zframe_size (job->body), .accepted_us = job->accepted_us,
            .cache = broker_policy_names [job->policy], .group = msg->group,
            .group_size = msg->group_size, .trajectory = msg->trajectory
        };
        if (broker_store_insert (self->store, &row)) {
            self->stats.store_errors++;
            self->stats.rejected++;
            common_metric_inc (self->m.jobs_rejected, "store_error");
            s_submit_error (self, msg->routing_id, PROTO_ERR_INTERNAL, "cannot store the job",
                            msg->ref);
            zframe_destroy (&job->body);
            zframe_destroy (&hit);
            free (job->tag);
            free (job->task);
            free (job->group);
            free (job->trajectory);
            free (job->body_tag);
            free (job);
            broker_client_release (self, client);
            return;
        }
        job->fresh = true;
    }
    zhashx_insert (self->jobs, &job->id, job);
    client->jobs++;
    client->unfinished++;
    if (client->refs) {
        zhashx_delete (client->refs, &job->ref);
        zhashx_insert (client->refs, &job->ref, job);
    }
    if (job->group && self->groups) {
        char owner [PROTO_MAX_STR + 64];
        broker_owner (client, owner, sizeof owner);
        broker_groups_add (self->groups, owner, job->group, msg->group_size);
    }
    if (hit) {
        //  Finished now; the result follows its ACCEPTED after the commit.
        self->stats.cache_hits++;
        common_metric_inc (self->m.cache_hits);
        job->cached = true;
        json_t *tag = job->body_tag? json_string (job->body_tag): json_null ();
        json_t *map = NULL;
        zframe_t *marked = broker_cache_mark (zframe_data (hit), zframe_size (hit), false, tag, &map);
        json_decref (tag);
        broker_verdict_t verdict;
        if (marked) {
            broker_verdict_of (map, &verdict);
            zframe_destroy (&hit);
        }
        else {
            char why [128];
            broker_verdict_parse (zframe_data (hit), zframe_size (hit), NULL, &verdict, why,
                                  sizeof why);
            marked = hit;
        }
        json_decref (map);
        broker_job_finish (self, job, &marked, BROKER_CACHE_WORKER, &verdict, NULL, false);
        s_defer (self, job, true, true);
    }
    else
    if (leader) {
        job->state = JOB_FOLLOWING;
        job->leader = leader;
        broker_joblist_push_back (&leader->followers, job);
        self->following++;
        self->stats.coalesced++;
        broker_cache_count_coalesced (self->cache);
        s_defer (self, job, false, true);
    }
    else {
        broker_joblist_push_back (&backend->queue, job);
        self->queued++;
        broker_lead (self, job);
        self->dispatch_due = true;
        s_defer (self, job, false, true);
    }
    log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ", backend %s, tag '%s') accepted%s",
               job->id, job->ref, backend->name, msg->tag,
               hit? " from the cache": leader? ", following an identical job": "");
}

//  DONE {ref, count, pending} to the sender of a request.
static void
s_send_done (broker_server_t *self, proto_msg_t *msg, uint32_t count, uint32_t pending)
{
    proto_msg_reset (self->out, PROTO_DONE);
    self->out->ref = msg->ref;
    self->out->count = count;
    self->out->pending = pending;
    if (broker_send (self, self->clients, msg->routing_id, NULL))
        broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
}

//  FETCH: the kept results of a client's jobs (one job, a tag, or all), then DONE.
void
broker_client_fetch (broker_server_t *self, proto_msg_t *msg)
{
    uint32_t count = 0, pending = 0;
    char *key = broker_client_key (msg);
    broker_client_t *client = key? broker_client_named (self, key, false): NULL;
    free (key);
    if (client) {
        broker_client_bind (self, client, msg->routing_id);
        if (msg->job) {
            broker_job_t *job = (broker_job_t *) zhashx_lookup (self->jobs, &msg->job);
            if (job && job->client == client && !job->cancelled) {
                if (job->state != JOB_DONE)
                    pending++;
                else
                if (broker_resend_result (self, job, msg->routing_id) == 0)
                    count++;
            }
        }
        else {
            for (broker_job_t *job = self->finished.head; job; job = job->next)
                if (job->client == client && !job->cancelled
                &&  (!msg->tag [0] || (job->tag && streq (job->tag, msg->tag)))) {
                    if (broker_resend_result (self, job, msg->routing_id))
                        break;      //  the client's queue is full: it fetches the rest later
                    count++;
                }
            for (broker_job_t *job = (broker_job_t *) zhashx_first (client->refs); job;
                 job = (broker_job_t *) zhashx_next (client->refs))
                if (job->state != JOB_DONE
                &&  (!msg->tag [0] || (job->tag && streq (job->tag, msg->tag))))
                    pending++;
        }
    }
    s_send_done (self, msg, count, pending);
}

//  DRAIN from a client: the named workers finish what they hold and leave.
void
broker_client_drain (broker_server_t *self, proto_msg_t *msg)
{
    if (!msg->name [0]) {
        broker_bump (&self->stats.malformed, self->m.messages_malformed);
        broker_send_error (self, self->clients, msg->routing_id, PROTO_ERR_MALFORMED,
                           "DRAIN without 'name'", msg->ref, 0);
        return;
    }
    uint32_t count = 0;
    for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (broker_worker_t *) zhashx_next (self->worker_table)) {
        if (!streq (worker->name, msg->name))
            continue;
        broker_worker_set_state (self, worker, WORKER_DRAINING);
        proto_msg_reset (self->out, PROTO_DRAIN);
        proto_msg_set_str (self->out->reason, "drain asked by a client");
        if (broker_send (self, self->workers, worker->identity, NULL) == 0)
            count++;
    }
    if (count == 0) {
        char why [PROTO_MAX_STR];
        snprintf (why, sizeof (why), "no worker named '%s'", msg->name);
        broker_send_error (self, self->clients, msg->routing_id, PROTO_ERR_NOT_FOUND, why, msg->ref, 0);
        return;
    }
    s_send_done (self, msg, count, 0);
}

//  CANCEL: the client gives up one of its jobs; DONE says whether it did.
void
broker_client_cancel (broker_server_t *self, proto_msg_t *msg)
{
    broker_client_t *owner = NULL;
    char *key = broker_client_key (msg);
    if (key) {
        owner = broker_client_named (self, key, false);
        free (key);
        if (owner)
            broker_client_bind (self, owner, msg->routing_id);
    }
    else
        owner = (broker_client_t *) zhashx_lookup (self->clients_by_id, msg->routing_id);
    broker_job_t *job = (broker_job_t *) zhashx_lookup (self->jobs, &msg->job);
    uint32_t count = 0;
    if (job && owner && job->client == owner && !job->cancelled && job->state != JOB_DONE) {
        broker_job_cancel (self, job);
        count = 1;
        log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ") cancelled", job->id, job->ref);
    }
    s_send_done (self, msg, count, 0);
}

//  DISCONNECT from a client: its waiting jobs are dropped (running ones
//  finish and their results are kept for a while).
void
broker_client_disconnect (broker_server_t *self, zframe_t *identity)
{
    broker_client_t *client = (broker_client_t *) zhashx_lookup (self->clients_by_id, identity);
    if (!client)
        return;
    size_t dropped = 0;
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends)) {
        broker_job_t *job = backend->queue.head;
        while (job) {
            broker_job_t *next = job->next;
            if (job->client == client && job->followers.size) {
                job->cancelled = true;          //  runs on for the jobs that follow it
                dropped++;
            }
            else
            if (job->client == client) {
                broker_unlead (self, job);
                broker_joblist_remove (&backend->queue, job);
                self->queued--;
                if (self->store && broker_store_delete (self->store, job->id))
                    self->stats.store_errors++;
                client->jobs++;             //  hold it over the job's release
                broker_job_destroy (self, &job);
                client->jobs--;
                dropped++;
            }
            job = next;
        }
    }
    self->stats.cancelled += dropped;
    common_metric_add (self->m.jobs_cancelled, (double) dropped);
    broker_client_unbind (self, client);
    broker_client_release (self, client);
    log_info ("broker", "client disconnected; %zu queued job(s) dropped", dropped);
}
