/*  broker_jobs - part of broker_server: jobs and their queues.

    A job's life after SUBMIT: queued under its backend, leased to the
    least-loaded ready worker of that backend (dispatch), finished with a
    result (kept, cached, counted, sent to its client and to the jobs that
    followed it), cancelled or failed; and at start, reloaded from the
    store. Every step moves the job between intrusive lists in O(1).
    State and the other parts: broker_internal.h.
*/
#include "broker_internal.h"

const char *const broker_policy_names [BROKER_POLICIES] = { "use", "refresh", "bypass" };

//  Count one completion in its second, for rate_10s and rate_1m.
void
broker_rate_count (broker_server_t *self)
{
    int64_t second = broker_now_us () / 1000000;
    size_t i = (size_t) (second % BROKER_RATE_SECONDS);
    if (self->rate_second [i] != second) {
        self->rate_second [i] = second;
        self->rate [i] = 0;
    }
    self->rate [i]++;
}

double
broker_rate (broker_server_t *self, int seconds)
{
    int64_t now = broker_now_us () / 1000000;
    uint64_t sum = 0;
    for (size_t i = 0; i < BROKER_RATE_SECONDS; i++)
        if (self->rate_second [i] > now - seconds && self->rate_second [i] <= now)
            sum += self->rate [i];
    return (double) sum / seconds;
}

void
broker_joblist_push_back (broker_joblist_t *list, broker_job_t *job)
{
    job->prev = list->tail;
    job->next = NULL;
    if (list->tail)
        list->tail->next = job;
    else
        list->head = job;
    list->tail = job;
    list->size++;
}

void
broker_joblist_push_front (broker_joblist_t *list, broker_job_t *job)
{
    job->prev = NULL;
    job->next = list->head;
    if (list->head)
        list->head->prev = job;
    else
        list->tail = job;
    list->head = job;
    list->size++;
}

void
broker_joblist_remove (broker_joblist_t *list, broker_job_t *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        list->head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    else
        list->tail = job->prev;
    job->prev = job->next = NULL;
    list->size--;
}

size_t
broker_u64_hash (const void *key)
{
    uint64_t x = *(const uint64_t *) key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t) x;
}

int
broker_u64_compare (const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y? -1: x > y? 1: 0;
}

//  FNV-1a over the routing id bytes.
size_t
broker_frame_hash (const void *key)
{
    zframe_t *frame = (zframe_t *) key;
    const uint8_t *data = zframe_data (frame);
    size_t size = zframe_size (frame);
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ data [i]) * 1099511628211ull;
    return (size_t) hash;
}

int
broker_frame_compare (const void *a, const void *b)
{
    zframe_t *x = (zframe_t *) a, *y = (zframe_t *) b;
    size_t sx = zframe_size (x), sy = zframe_size (y);
    if (sx != sy)
        return sx < sy? -1: 1;
    return memcmp (zframe_data (x), zframe_data (y), sx);
}

//  A table that owns neither keys nor items.
zhashx_t *
broker_table_new (zhashx_hash_fn *hasher, zhashx_comparator_fn *comparator)
{
    zhashx_t *table = zhashx_new ();
    if (table) {
        if (hasher)
            zhashx_set_key_hasher (table, hasher);
        if (comparator)
            zhashx_set_key_comparator (table, comparator);
        zhashx_set_key_duplicator (table, NULL);
        zhashx_set_key_destructor (table, NULL);
        zhashx_set_destructor (table, NULL);
    }
    return table;
}

//  The backend of that name, created on first use.
broker_backend_t *
broker_backend_require (broker_server_t *self, const char *name)
{
    broker_backend_t *backend = (broker_backend_t *) zhashx_lookup (self->backends, name);
    if (!backend) {
        backend = (broker_backend_t *) calloc (1, sizeof (broker_backend_t));
        if (!backend)
            return NULL;
        proto_msg_set_str (backend->name, name);
        zhashx_insert (self->backends, name, backend);
    }
    return backend;
}

void
broker_backend_free (void **item)
{
    broker_backend_t *backend = (broker_backend_t *) *item;
    if (backend) {
        free (backend->workers);
        free (backend);
        *item = NULL;
    }
}

//  The ready worker with the most free slots, or NULL when none has one.
static broker_worker_t *
s_backend_pick (broker_backend_t *backend)
{
    broker_worker_t *best = NULL;
    uint32_t best_free = 0;
    size_t n = backend->nworkers;
    for (size_t i = 0; i < n; i++) {
        broker_worker_t *worker = backend->workers [(backend->cursor + i) % n];
        if (worker->state != WORKER_READY || worker->jobs.size >= worker->capacity)
            continue;
        uint32_t free_slots = worker->capacity - (uint32_t) worker->jobs.size;
        if (free_slots > best_free) {
            best = worker;
            best_free = free_slots;
        }
    }
    if (best)
        backend->cursor = (best->slot + 1) % n;
    return best;
}

//  Free a job that is in no list any more.
void
broker_job_destroy (broker_server_t *self, broker_job_t **job_p)
{
    broker_job_t *job = *job_p;
    if (!job)
        return;
    //  Followers are in no other list: they go with it (only at shutdown).
    while (job->followers.head) {
        broker_job_t *follower = job->followers.head;
        broker_joblist_remove (&job->followers, follower);
        follower->leader = NULL;
        broker_job_destroy (self, &follower);
    }
    if (job->leads) {
        zhashx_delete (self->leaders, job->key);
        job->leads = false;
    }
    zhashx_delete (self->jobs, &job->id);
    broker_client_t *client = job->client;
    if (client) {
        if (client->refs && zhashx_lookup (client->refs, &job->ref) == job)
            zhashx_delete (client->refs, &job->ref);
        if (job->state != JOB_DONE)
            client->unfinished--;
        client->jobs--;
        broker_client_release (self, client);
    }
    zframe_destroy (&job->body);
    zframe_destroy (&job->result);
    free (job->tag);
    free (job->graded_by);
    free (job->task);
    free (job->group);
    free (job->trajectory);
    free (job->body_tag);
    free (job);
    *job_p = NULL;
}

//  The reference's operators a result carries (profile.reference.operators),
//  kept as the task's latest for curriculum sampling. Only a body that
//  names them is decoded again.
static void
s_tasks_profile (broker_server_t *self, const char *task, zframe_t *result)
{
    if (!result || !memmem (zframe_data (result), zframe_size (result), "operators", 9))
        return;
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    char err [128];
    json_t *doc = proto_mpk_decode (zframe_data (result), zframe_size (result), &limits, err,
                                    sizeof err);
    if (doc && broker_tasks_record_profile (self->tasks, task, doc))
        log_warn ("broker", "task statistics: out of memory keeping the operators of '%s'", task);
    json_decref (doc);
}

//  The job is finished with this result (taken) and its verdict: keep it,
//  tell the client (unless send is false: a resend after the batch commits
//  does, or it was cancelled), then its followers. device: the grader's,
//  when a worker graded it, so the result may be cached; NULL for results
//  the broker made.
void
broker_job_finish (broker_server_t *self, broker_job_t *job, zframe_t **result_p, const char *graded_by,
                   const broker_verdict_t *verdict, const char *device, bool send)
{
    zframe_t *result = *result_p;
    *result_p = NULL;
    job->state = JOB_DONE;
    job->worker = NULL;
    job->client->unfinished--;
    job->finished_us = broker_wall_us ();
    snprintf (job->status, sizeof job->status, "%s", verdict->status);
    job->reward = verdict->reward;
    job->speedup = verdict->speedup;
    common_metric_inc (self->m.jobs_completed, job->status [0]? job->status: "unknown");
    self->stats.statuses [broker_verdict_status_index (job->status)]++;
    broker_rate_count (self);
    if (job->leased_us)
        common_metric_observe (self->m.job_duration,
                               (double) (job->finished_us - job->leased_us) / 1e6, "lease");
    common_metric_observe (self->m.job_duration,
                           (double) (job->finished_us - job->accepted_us) / 1e6, "total");
    job->queue_s = job->dispatched_us? (double) (job->dispatched_us - job->accepted_us) / 1e6: 0;
    free (job->graded_by);
    job->graded_by = strdup (graded_by);
    zframe_destroy (&job->body);
    if (self->store
    &&  broker_store_finish (self->store, job->id, job->attempt, job->lost, zframe_data (result),
                             zframe_size (result), graded_by, job->queue_s, job->finished_us,
                             job->status, job->reward, job->speedup))
        self->stats.store_errors++;
    if (device && job->keyed && job->policy != BROKER_POLICY_BYPASS
    &&  broker_cache_status_cacheable (job->status))
        broker_cache_put (self->cache, job->key, device, zframe_data (result), zframe_size (result));
    if (job->task && self->tasks) {
        broker_tasks_record (self->tasks, job->task, job->status, job->reward, job->speedup);
        s_tasks_profile (self, job->task, result);
    }
    broker_group_end (self, job, true, !send);     //  not sent now: answered at SUBMIT
    if (send && !job->cancelled)
        broker_send_result (self, job, result, NULL);
    broker_joblist_push_back (&self->finished, job);
    self->stats.completed++;

    //  Jobs that followed this one take its result, marked as not their own.
    broker_unlead (self, job);
    while (job->followers.head) {
        broker_job_t *follower = job->followers.head;
        broker_joblist_remove (&job->followers, follower);
        follower->leader = NULL;
        follower->cached = true;
        self->following--;
        json_t *tag = follower->body_tag? json_string (follower->body_tag): json_null ();
        zframe_t *copy = broker_cache_mark (zframe_data (result), zframe_size (result), true, tag,
                                            NULL);
        json_decref (tag);
        if (!copy)
            copy = zframe_dup (result);
        if (copy)
            broker_job_finish (self, follower, &copy, graded_by, verdict, NULL, true);
        zframe_destroy (&copy);
    }
    if (self->store)
        zframe_destroy (&result);
    else
        job->result = result;
}

//  The client gave the job up. A queued job with no followers, or a
//  following one, ends now without a result; a running one (or one that
//  others follow) runs on for them, the cache and the statistics, and its
//  result goes to no one.
void
broker_job_cancel (broker_server_t *self, broker_job_t *job)
{
    job->cancelled = true;
    self->stats.cancelled++;
    common_metric_inc (self->m.jobs_cancelled);
    if (job->state == JOB_RUNNING || (job->state == JOB_QUEUED && job->followers.size))
        return;
    if (job->state == JOB_QUEUED) {
        broker_joblist_remove (&job->backend->queue, job);
        self->queued--;
        broker_unlead (self, job);
    }
    else
    if (job->state == JOB_FOLLOWING && job->leader) {
        broker_joblist_remove (&job->leader->followers, job);
        job->leader = NULL;
        self->following--;
    }
    job->state = JOB_DONE;
    job->client->unfinished--;
    job->finished_us = broker_wall_us ();
    //  Kept as cancelled, not deleted: a restart must not forget it ended
    //  (its group counts it, a FETCH skips it).
    if (self->store
    &&  broker_store_finish (self->store, job->id, job->attempt, job->lost, NULL, 0, "", 0,
                             job->finished_us, BROKER_CANCELLED, NAN, NAN))
        self->stats.store_errors++;
    zframe_destroy (&job->body);
    broker_group_end (self, job, false, false);
    broker_joblist_push_back (&self->finished, job);
}

//  Take a job that is not leased out of the list that holds it; its
//  followers, if any, are queued on their own.
void
broker_job_unlink (broker_server_t *self, broker_job_t *job)
{
    if (job->state == JOB_QUEUED) {
        broker_joblist_remove (&job->backend->queue, job);
        self->queued--;
    }
    else
    if (job->state == JOB_FOLLOWING && job->leader) {
        broker_joblist_remove (&job->leader->followers, job);
        job->leader = NULL;
        self->following--;
    }
    else
    if (job->state == JOB_DONE)
        broker_joblist_remove (&self->finished, job);
    broker_unlead (self, job);
    while (job->followers.head) {
        broker_job_t *follower = job->followers.head;
        broker_joblist_remove (&job->followers, follower);
        follower->leader = NULL;
        follower->state = JOB_QUEUED;
        broker_joblist_push_back (&follower->backend->queue, follower);
        self->queued++;
        self->following--;
        broker_lead (self, follower);
        if (!follower->backend->nworkers)
            follower->backend->recheck = true;
    }
}

void
broker_job_fail (broker_server_t *self, broker_job_t *job, const char *message, bool log)
{
    zframe_t *result = broker_verdict_make (message);
    if (!result)
        result = zframe_new ("\x80", 1);        //  out of memory: an empty map still answers
    self->stats.failed++;
    if (log)
        log_warn ("broker", "job %" PRIu64 " (ref %" PRIu64 ") failed: %s", job->id, job->ref,
                  message);
    broker_verdict_t verdict = { "internal_error", NAN, NAN };
    broker_job_finish (self, job, &result, BROKER_NAME, &verdict, NULL, true);
    zframe_destroy (&result);
}

//  Lease waiting jobs of backend to its workers while any has a free slot.
static void
s_dispatch (broker_server_t *self, broker_backend_t *backend)
{
    while (backend->queue.head) {
        broker_worker_t *worker = s_backend_pick (backend);
        if (!worker)
            return;
        broker_job_t *job = backend->queue.head;
        broker_joblist_remove (&backend->queue, job);
        self->queued--;
        job->attempt++;
        job->state = JOB_RUNNING;
        job->worker = worker;
        job->leased_us = broker_wall_us ();
        if (!job->dispatched_us) {
            job->dispatched_us = job->leased_us;
            common_metric_observe (self->m.queue_wait,
                                   (double) (job->dispatched_us - job->accepted_us) / 1e6,
                                   backend->name);
        }
        broker_joblist_push_back (&worker->jobs, job);
        self->inflight++;

        proto_msg_reset (self->out, PROTO_JOB);
        self->out->job = job->id;
        self->out->attempt = job->attempt;
        if (broker_send (self, self->workers, worker->identity, job->body) == 0) {
            self->stats.dispatched++;
            common_metric_inc (self->m.jobs_dispatched, backend->name);
            log_debug ("broker", "job %" PRIu64 " attempt %u -> %s", job->id, job->attempt,
                       worker->name);
        }
        else
            //  Gone (EHOSTUNREACH) or not reading (EAGAIN): either way it
            //  cannot hold leases. Its jobs, this one too, go back in front
            //  and the loop offers them to the others; this one never
            //  reached it, so it is not counted against the job.
            broker_worker_drop (self, worker, errno == EHOSTUNREACH? "unreachable": "not reading",
                                true, job);
    }
}

void
broker_dispatch_all (broker_server_t *self)
{
    self->dispatch_due = false;
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends))
        if (backend->queue.head && backend->nworkers)
            s_dispatch (self, backend);
}

//  --------------------------------------------------------------------------
//  No silent waits: a job no registered worker serves is told so (503) and
//  fails after a grace period (docs/protocol.md 7.3)

void
broker_job_unserved (broker_server_t *self, broker_job_t *job, uint32_t grace_s, bool notify)
{
    broker_backend_t *backend = job->backend;
    if (!job->unserved_until_us) {
        job->unserved_until_us = broker_now_us () + (int64_t) grace_s * 1000000;
        job->unserved_grace_s = grace_s;
    }
    if (!backend->unserved_next_us || job->unserved_until_us < backend->unserved_next_us)
        backend->unserved_next_us = job->unserved_until_us;
    if (!backend->unserved) {
        //  Once per backend and episode, not per job.
        backend->unserved = true;
        log_warn ("broker", "no worker serves backend '%s': its waiting jobs fail after %u s "
                  "unless one joins", backend->name, job->unserved_grace_s);
    }
    if (notify && job->client) {
        char reason [PROTO_MAX_STR];
        snprintf (reason, sizeof reason, "no connected worker serves backend '%s'; the job waits "
                  "up to %u s for one", backend->name, job->unserved_grace_s);
        broker_send_error (self, self->clients, job->client->identity, PROTO_ERR_NO_WORKER,
                           reason, job->ref, job->id);
    }
}

void
broker_unserved_check (broker_server_t *self)
{
    uint32_t grace = self->cfg.no_worker_grace_s;
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends)) {
        if (!backend->recheck)
            continue;
        backend->recheck = false;
        if (backend->nworkers)
            continue;       //  one came back in the meantime (a worker that announced itself again)
        for (broker_job_t *job = backend->queue.head; job; job = job->next) {
            if (!job->unserved_until_us)
                broker_job_unserved (self, job, grace, !job->cancelled);
            for (broker_job_t *follower = job->followers.head; follower; follower = follower->next)
                if (!follower->unserved_until_us)
                    broker_job_unserved (self, follower, grace, !follower->cancelled);
        }
    }
}

void
broker_backend_served (broker_server_t *self, broker_backend_t *backend, const char *worker)
{
    backend->recheck = false;
    if (!backend->unserved)
        return;
    log_info ("broker", "worker %s serves backend '%s': %zu job(s) waited for one", worker,
              backend->name, backend->queue.size);
    //  The episode is over: should the last worker leave again, the jobs
    //  then waiting get a new wait (and notice) of their own.
    for (broker_job_t *job = backend->queue.head; job; job = job->next) {
        job->unserved_until_us = 0;
        for (broker_job_t *follower = job->followers.head; follower; follower = follower->next)
            follower->unserved_until_us = 0;
    }
    backend->unserved = false;
    backend->unserved_next_us = 0;
}

void
broker_unserved_expire (broker_server_t *self, int64_t now)
{
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends)) {
        if (backend->nworkers || !backend->unserved_next_us || now < backend->unserved_next_us)
            continue;
        int64_t next = 0;
        broker_job_t *job = backend->queue.head;
        while (job) {
            broker_job_t *later = job->next;
            if (job->unserved_until_us && now >= job->unserved_until_us) {
                broker_joblist_remove (&backend->queue, job);
                self->queued--;
                broker_unlead (self, job);
                self->stats.unserved++;
                common_metric_inc (self->m.jobs_unserved, backend->name);
                char message [PROTO_MAX_STR + 64];
                snprintf (message, sizeof message, "no worker serves backend '%s' (none joined "
                          "within %u s)", backend->name, job->unserved_grace_s);
                log_debug ("broker", "job %" PRIu64 " (ref %" PRIu64 ") failed: %s", job->id,
                           job->ref, message);
                broker_job_fail (self, job, message, false);    //  its followers too
            }
            else
            if (job->unserved_until_us && (!next || job->unserved_until_us < next))
                next = job->unserved_until_us;
            job = later;
        }
        backend->unserved_next_us = next;
    }
}

static int
s_load_row (const broker_store_row_t *row, void *arg)
{
    broker_server_t *self = (broker_server_t *) arg;
    broker_client_t *client = row->client [0]? broker_client_named (self, row->client, true):
                                               self->orphans;
    broker_backend_t *backend = row->done? NULL: broker_backend_require (self, row->backend);
    broker_job_t *job = (broker_job_t *) calloc (1, sizeof (broker_job_t));
    if (!client || (!row->done && !backend) || !job) {
        free (job);
        return -1;
    }
    job->id = row->id;
    job->ref = row->ref;
    job->attempt = row->attempts;
    job->lost = row->lost;
    job->client = client;
    job->tag = row->tag [0]? strdup (row->tag): NULL;
    job->group = row->group [0]? strdup (row->group): NULL;
    job->trajectory = row->trajectory [0]? strdup (row->trajectory): NULL;
    job->accepted_us = row->accepted_us;
    job->backend = backend;
    if (job->group && self->groups) {
        //  Every job of a group is in it again; those that finished count
        //  once all are loaded (broker_jobs_load), in the order they did.
        char owner [PROTO_MAX_STR + 64];
        broker_owner (client, owner, sizeof owner);
        broker_groups_add (self->groups, owner, job->group, row->group_size);
    }
    client->jobs++;
    zhashx_insert (self->jobs, &job->id, job);
    if (client->refs) {
        zhashx_delete (client->refs, &job->ref);
        zhashx_insert (client->refs, &job->ref, job);
    }
    if (row->done) {
        job->state = JOB_DONE;
        job->cancelled = streq (row->status, BROKER_CANCELLED);
        if (broker_verdict_status_index (row->status) < BROKER_VERDICT_STATUSES)
            snprintf (job->status, sizeof job->status, "%s", row->status);
        job->reward = row->reward;
        job->speedup = row->speedup;
        job->finished_us = row->finished_us;
        job->queue_s = row->queue_s;
        job->graded_by = strdup (row->worker);
        broker_joblist_push_back (&self->finished, job);
    }
    else {
        job->state = JOB_QUEUED;
        job->body = zframe_new (row->body, row->body_size);
        //  Its policy as SUBMIT said it (a file of schema 1 did not keep
        //  it: refresh, as brokers of then restarted its jobs).
        job->policy = BROKER_POLICY_REFRESH;
        for (uint8_t policy = 0; policy < BROKER_POLICIES; policy++)
            if (streq (row->cache, broker_policy_names [policy]))
                job->policy = policy;
        job->reward = job->speedup = NAN;
        if (job->body)
            broker_job_describe (self, job, job->body);
        client->unfinished++;
        //  Rows come in id order: an identical "use" job loaded before
        //  leads again, and this one follows it as it did.
        broker_job_t *leader = job->keyed && job->policy == BROKER_POLICY_USE?
                               (broker_job_t *) zhashx_lookup (self->leaders, job->key): NULL;
        if (leader) {
            job->state = JOB_FOLLOWING;
            job->leader = leader;
            broker_joblist_push_back (&leader->followers, job);
            self->following++;
        }
        else {
            broker_joblist_push_back (&backend->queue, job);
            self->queued++;
            broker_lead (self, job);
        }
    }
    if (job->id >= self->next_job)
        self->next_job = job->id + 1;
    return 0;
}

static int
s_finished_order (const void *a, const void *b)
{
    const broker_job_t *x = *(broker_job_t * const *) a, *y = *(broker_job_t * const *) b;
    if (x->finished_us != y->finished_us)
        return x->finished_us < y->finished_us? -1: 1;
    return x->id < y->id? -1: x->id > y->id? 1: 0;
}

//  Everything the store holds back in memory; finished results in the
//  order they finished, so retention retires the oldest first.
int
broker_jobs_load (broker_server_t *self, char *err, size_t errlen)
{
    int64_t keep_after = broker_wall_us () - (int64_t) self->cfg.keep_s * 1000000;
    if (broker_store_load (self->store, keep_after, self->cfg.keep_results, s_load_row, self)) {
        snprintf (err, errlen, "cannot load the jobs from %s", self->cfg.db_path);
        return -1;
    }
    size_t n = self->finished.size;
    if (n > 1) {
        broker_job_t **order = (broker_job_t **) malloc (n * sizeof (broker_job_t *));
        if (order) {
            size_t i = 0;
            for (broker_job_t *job = self->finished.head; job; job = job->next)
                order [i++] = job;
            qsort (order, n, sizeof (broker_job_t *), s_finished_order);
            memset (&self->finished, 0, sizeof (self->finished));
            for (i = 0; i < n; i++)
                broker_joblist_push_back (&self->finished, order [i]);
            free (order);
        }
    }
    //  Groups go on where they were: their finished jobs count again (the
    //  summaries they completed went out before; no client is bound yet, so
    //  none goes out twice).
    for (broker_job_t *job = self->finished.head; job; job = job->next)
        broker_group_end (self, job, !job->cancelled, false);
    //  No worker is registered yet: the waits start now, but last at least
    //  as long as the workers of a broker that restarted take to announce
    //  themselves again (their clients are told nothing: none is bound).
    uint32_t grace = self->cfg.no_worker_grace_s;
    uint32_t again = (uint32_t) (((uint64_t) self->cfg.heartbeat_ms * self->cfg.liveness + 999) / 1000);
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends))
        for (broker_job_t *job = backend->queue.head; job; job = job->next)
            broker_job_unserved (self, job, grace > again? grace: again, false);
    log_info ("broker", "store %s: %zu unfinished job(s) queued again (%zu following an identical "
              "one), %zu result(s) kept", self->cfg.db_path, self->queued + self->following,
              self->following, self->finished.size);
    return 0;
}
