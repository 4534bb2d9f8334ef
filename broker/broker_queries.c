/*  broker_queries - part of broker_server: what it tells about itself.

    QUERY (docs/protocol.md section 14.3): answers built from what is in
    memory, plus kept results from the store when a job's result is asked
    for; the pipe's STATS (section 11); the Prometheus gauges
    (docs/metrics.md). State and the other parts: broker_internal.h.
*/
#include "broker_internal.h"
#include "common_util.h"

#define S_LIMIT_DEFAULT 100
#define S_LIMIT_MAX 10000

static const char *s_job_states [] = { "queued", "running", "done", "following" };
static const char *s_kind_names [] = { "idle", "busy", "draining", "quarantined" };

//  A header string as JSON: peers' header strings need not be UTF-8, and
//  jansson takes nothing else (one bad name must not sink a whole answer).
static json_t *
s_str_or_null (const char *value)
{
    if (!value)
        return json_null ();
    char text [PROTO_MAX_STR];
    common_utf8_copy (text, sizeof text, value);
    return json_string (text);
}

static json_t *
s_real_or_null (double value)
{
    return isfinite (value)? json_real (value): json_null ();
}

//  A job's kept result as a map, or null.
static json_t *
s_job_result_json (broker_server_t *self, broker_job_t *job)
{
    if (job->state != JOB_DONE || job->cancelled)
        return json_null ();
    zframe_t *loaded = NULL;
    zframe_t *body = job->result;
    if (!body && self->store)
        body = loaded = broker_store_result (self->store, job->id);
    json_t *result = NULL;
    if (body) {
        proto_mpk_limits_t limits;
        proto_mpk_limits_default (&limits);
        char err [128];
        result = proto_mpk_decode (zframe_data (body), zframe_size (body), &limits, err, sizeof err);
    }
    zframe_destroy (&loaded);
    return result? result: json_null ();
}

static json_t *
s_job_json (broker_server_t *self, broker_job_t *job, bool with_result)
{
    bool done = job->state == JOB_DONE;
    const char *state = job->cancelled && done? "cancelled": s_job_states [job->state];
    const char *worker = job->worker? job->worker->name: job->graded_by;
    json_t *map = json_pack ("{s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:b, s:f, s:o, s:o}",
        "job", (json_int_t) job->id, "ref", (json_int_t) job->ref, "state", state,
        "backend", s_str_or_null (job->backend? job->backend->name: NULL),
        "task", s_str_or_null (job->task), "tag", s_str_or_null (job->tag),
        "group", s_str_or_null (job->group), "trajectory", s_str_or_null (job->trajectory),
        "attempt", (json_int_t) job->attempt, "worker", s_str_or_null (worker),
        "status", s_str_or_null (done && job->status [0]? job->status: NULL),
        "cached", job->cached, "accepted", (double) job->accepted_us / 1e6,
        "finished", done && job->finished_us? json_real ((double) job->finished_us / 1e6): json_null (),
        "queue_s", done && !job->cancelled? json_real (job->queue_s): json_null ());
    if (map && with_result)
        json_object_set_new (map, "result", s_job_result_json (self, job));
    return map;
}

static int
s_job_newest_first (const void *a, const void *b)
{
    const broker_job_t *x = *(broker_job_t * const *) a, *y = *(broker_job_t * const *) b;
    return x->id > y->id? -1: x->id < y->id? 1: 0;
}

//  The query's "limit": default, or 1..S_LIMIT_MAX; -1 when bad.
static long
s_query_limit (json_t *query)
{
    json_t *value = json_object_get (query, "limit");
    if (!value)
        return S_LIMIT_DEFAULT;
    if (!json_is_integer (value) || json_integer_value (value) < 1
    ||  json_integer_value (value) > S_LIMIT_MAX)
        return -1;
    return (long) json_integer_value (value);
}

//  jobs by tag, group or trajectory, newest first.
static json_t *
s_answer_jobs (broker_server_t *self, json_t *query, char *why, size_t whylen)
{
    const char *fields [] = { "tag", "group", "trajectory" };
    const char *field = NULL, *value = NULL;
    int which = 0;
    for (int i = 0; i < 3; i++)
        if (json_object_get (query, fields [i])) {
            if (field) {
                snprintf (why, whylen, "jobs: one of tag, group or trajectory, not several");
                return NULL;
            }
            field = fields [i];
            which = i;
            value = json_string_value (json_object_get (query, field));
        }
    long limit = s_query_limit (query);
    json_t *results = json_object_get (query, "results");
    if (!field || !value || limit < 0 || (results && !json_is_boolean (results))) {
        snprintf (why, whylen, "jobs: wants one of tag, group or trajectory (a string), "
                  "[limit 1..%d], [results true|false]", S_LIMIT_MAX);
        return NULL;
    }
    size_t n = 0, cap = 64;
    broker_job_t **found = (broker_job_t **) malloc (cap * sizeof (broker_job_t *));
    for (broker_job_t *job = (broker_job_t *) zhashx_first (self->jobs); job && found;
         job = (broker_job_t *) zhashx_next (self->jobs)) {
        const char *have = which == 0? job->tag: which == 1? job->group: job->trajectory;
        if (!have || !streq (have, value))
            continue;
        if (n == cap) {
            broker_job_t **grown = (broker_job_t **) realloc (found,
                                                               (cap *= 2) * sizeof (broker_job_t *));
            if (!grown) {
                free (found);
                found = NULL;
                break;
            }
            found = grown;
        }
        found [n++] = job;
    }
    if (!found) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    qsort (found, n, sizeof (broker_job_t *), s_job_newest_first);
    json_t *list = json_array ();
    for (size_t i = 0; i < n && i < (size_t) limit; i++)
        json_array_append_new (list, s_job_json (self, found [i], json_is_true (results)));
    free (found);
    return json_pack ("{s:o, s:b}", "jobs", list, "truncated", n > (size_t) limit);
}

//  finished results of one task, newest first.
static json_t *
s_answer_results (broker_server_t *self, json_t *query, char *why, size_t whylen)
{
    const char *task = json_string_value (json_object_get (query, "task"));
    long limit = s_query_limit (query);
    if (!task || limit < 0) {
        snprintf (why, whylen, "results: wants task (a string) and [limit 1..%d]", S_LIMIT_MAX);
        return NULL;
    }
    json_t *list = json_array ();
    bool truncated = false;
    for (broker_job_t *job = self->finished.tail; job; job = job->prev) {
        if (job->cancelled || !job->task || !streq (job->task, task))
            continue;
        if (json_array_size (list) == (size_t) limit) {
            truncated = true;
            break;
        }
        json_array_append_new (list, json_pack ("{s:I, s:s, s:o, s:o, s:o, s:f, s:b}",
            "job", (json_int_t) job->id, "status", job->status,
            "reward", s_real_or_null (job->reward), "speedup", s_real_or_null (job->speedup),
            "worker", s_str_or_null (job->graded_by), "finished", (double) job->finished_us / 1e6,
            "cached", job->cached));
    }
    return json_pack ("{s:o, s:b}", "results", list, "truncated", truncated);
}

static json_t *
s_answer_workers (broker_server_t *self)
{
    int64_t now = broker_now_us ();
    json_t *list = json_array ();
    for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (broker_worker_t *) zhashx_next (self->worker_table)) {
        json_t *jobs = json_array ();
        for (broker_job_t *job = worker->jobs.head; job; job = job->next)
            json_array_append_new (jobs, json_integer ((json_int_t) job->id));
        const char *state = s_kind_names [broker_worker_kind (worker)];
        json_array_append_new (list, json_pack (
            "{s:o, s:o, s:o, s:o, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:f, s:f}",
            "name", s_str_or_null (worker->name), "host", s_str_or_null (worker->host),
            "backend", s_str_or_null (worker->backend->name),
            "device", s_str_or_null (worker->device), "state", state,
            "capacity", (json_int_t) worker->capacity,
            "busy", worker->busy >= 0? json_real (worker->busy): json_null (),
            "jobs", jobs, "done", (json_int_t) worker->done, "faults", (json_int_t) worker->faults,
            "bad_results", (json_int_t) worker->bad_results,
            "pid", (json_int_t) worker->pid, "since_s", (double) (now - worker->since_us) / 1e6,
            "heard_s", (double) (now - worker->heard_us) / 1e6));
    }
    return json_pack ("{s:o}", "workers", list);
}

static json_t *
s_answer_stats (broker_server_t *self)
{
    broker_stats_t *st = &self->stats;
    json_t *queued = json_object ();
    size_t kinds [BROKER_KINDS] = { 0 };
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends)) {
        char name [PROTO_MAX_STR];
        common_utf8_copy (name, sizeof name, backend->name);
        json_object_set_new (queued, name, json_integer ((json_int_t) backend->queue.size));
    }
    for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (broker_worker_t *) zhashx_next (self->worker_table))
        kinds [broker_worker_kind (worker)]++;
    json_t *statuses = json_object ();
    uint64_t graded = 0;
    for (size_t i = 0; i <= BROKER_VERDICT_STATUSES; i++) {
        if (st->statuses [i])
            json_object_set_new (statuses,
                                 i < BROKER_VERDICT_STATUSES? broker_verdict_statuses [i]: "unknown",
                                 json_integer ((json_int_t) st->statuses [i]));
        if (i < 5)
            graded += st->statuses [i];     //  ok .. timeout: the kernel's own verdicts
    }
    json_t *cache = broker_cache_stats_json (self->cache);
    json_t *answer = json_pack ("{s:f, s:o, s:I, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
                      "s:o, s:f, s:f, s:o, s:o}",
        "uptime_s", (double) (broker_now_us () - self->started_us) / 1e6,
        "queued", queued, "in_flight", (json_int_t) self->inflight,
        "workers", "idle", (json_int_t) kinds [BROKER_KIND_IDLE],
                   "busy", (json_int_t) kinds [BROKER_KIND_BUSY],
                   "draining", (json_int_t) kinds [BROKER_KIND_DRAINING],
                   "quarantined", (json_int_t) kinds [BROKER_KIND_QUARANTINED],
        "counts", "submitted", (json_int_t) st->submitted, "completed", (json_int_t) st->completed,
                  "cancelled", (json_int_t) st->cancelled, "rejected", (json_int_t) st->rejected,
                  "requeued", (json_int_t) st->requeued, "failed", (json_int_t) st->failed,
                  "cache_hits", (json_int_t) st->cache_hits, "coalesced", (json_int_t) st->coalesced,
        "statuses", statuses, "rate_1m", broker_rate (self, 60), "rate_10s", broker_rate (self, 10),
        "pass_rate", graded? json_real ((double) st->statuses [0] / (double) graded): json_null (),
        "cache", cache? cache: json_null ());
    if (answer)
        json_object_set_new (answer, "following", json_integer ((json_int_t) self->following));
    return answer;
}

static json_t *
s_answer_tasks (broker_server_t *self, json_t *query, char *why, size_t whylen)
{
    json_t *lo = json_object_get (query, "lo"), *hi = json_object_get (query, "hi");
    json_t *min = json_object_get (query, "min_attempts");
    if ((lo && !json_is_number (lo)) || (hi && !json_is_number (hi)) || (!lo != !hi)
    ||  (min && (!json_is_integer (min) || json_integer_value (min) < 0))) {
        snprintf (why, whylen, "tasks: lo and hi (numbers) together or neither, "
                  "[min_attempts >= 0]");
        return NULL;
    }
    json_t *list = broker_tasks_list (self->tasks, lo != NULL,
                                      lo? json_number_value (lo): 0, hi? json_number_value (hi): 1,
                                      min? (size_t) json_integer_value (min): 1);
    if (!list) {
        snprintf (why, whylen, "out of memory");
        return NULL;
    }
    json_t *answer = json_pack ("{s:o}", "tasks", list);
    if (answer && lo)
        json_object_set_new (answer, "band", json_pack ("[f, f]", json_number_value (lo),
                                                        json_number_value (hi)));
    return answer;
}

//  A multi-turn tool's state: get, put (optionally only over the version
//  it read) or close. *code says which ERROR when NULL comes back.
static json_t *
s_answer_trajectory (broker_server_t *self, json_t *query, uint32_t *code, char *why, size_t whylen)
{
    const char *id = json_string_value (json_object_get (query, "id"));
    const char *op = json_string_value (json_object_get (query, "op"));
    json_t *state = json_object_get (query, "state");
    json_t *if_version = json_object_get (query, "if_version");
    if (!id || !*id || strlen (id) >= PROTO_MAX_STR || !op
    ||  (!streq (op, "get") && !streq (op, "put") && !streq (op, "close"))
    ||  (streq (op, "put") && !state)
    ||  (if_version && (!json_is_integer (if_version) || json_integer_value (if_version) < 0))) {
        snprintf (why, whylen, "trajectory: wants id (1 to %d bytes), op get, put or close, "
                  "state (put), [if_version >= 0 (put)]", PROTO_MAX_STR - 1);
        return NULL;
    }
    uint64_t version = 0;
    json_t *value = NULL;
    if (streq (op, "get")) {
        value = json_incref (broker_trajectories_get (self->trajectories, id, &version));
    }
    else
    if (streq (op, "close"))
        value = broker_trajectories_close (self->trajectories, id);
    else {
        char *data = NULL;
        size_t size = 0;
        if (proto_mpk_encode (state, &data, &size)) {
            snprintf (why, whylen, "out of memory");
            return NULL;
        }
        free (data);
        uint64_t wanted = !if_version? 0:
                          json_integer_value (if_version) == 0? UINT64_MAX:
                          (uint64_t) json_integer_value (if_version);
        int rc = broker_trajectories_put (self->trajectories, id, state, size, wanted, &version);
        if (rc == -2) {
            *code = PROTO_ERR_CONFLICT;
            snprintf (why, whylen, "trajectory '%.64s' is at version %" PRIu64 ", not %" PRIu64,
                      id, version, (uint64_t) json_integer_value (if_version));
            return NULL;
        }
        if (rc) {
            *code = PROTO_ERR_TOO_LARGE;
            snprintf (why, whylen, "trajectory state of %zu bytes: over %u, or out of memory",
                      size, BROKER_TRAJECTORY_MAX_STATE);
            return NULL;
        }
        value = json_incref (state);
    }
    return json_pack ("{s:s, s:o, s:I}", "id", id, "state", value? value: json_null (),
                      "version", (json_int_t) version);
}

//  QUERY: ANSWER with a map, or ERROR 400 / 404 with the reason.
void
broker_client_query (broker_server_t *self, proto_msg_t *msg)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    limits.max_bytes = 2 * BROKER_TRAJECTORY_MAX_STATE;     //  a few keys, or one state
    char why [256] = "";
    uint32_t code = PROTO_ERR_MALFORMED;
    json_t *answer = NULL;
    json_t *query = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), &limits,
                                      why, sizeof why);
    const char *what = json_string_value (json_object_get (query, "what"));
    if (!query || !json_is_object (query))
        snprintf (why, sizeof why, "QUERY body is not a map");
    else
    if (!what)
        snprintf (why, sizeof why, "QUERY without 'what'");
    else
    if (streq (what, "stats"))
        answer = s_answer_stats (self);
    else
    if (streq (what, "workers"))
        answer = s_answer_workers (self);
    else
    if (streq (what, "cache"))
        answer = broker_cache_stats_json (self->cache);
    else
    if (streq (what, "job")) {
        json_t *id = json_object_get (query, "job");
        broker_job_t *job = NULL;
        if (json_is_integer (id) && json_integer_value (id) >= 0) {
            uint64_t key = (uint64_t) json_integer_value (id);
            job = (broker_job_t *) zhashx_lookup (self->jobs, &key);
            if (!job) {
                code = PROTO_ERR_NOT_FOUND;
                snprintf (why, sizeof why, "no job %" PRIu64 " (unknown, or its result was retired)", key);
            }
        }
        else
            snprintf (why, sizeof why, "job: wants job (an integer id)");
        if (job)
            answer = json_pack ("{s:o}", "job", s_job_json (self, job, true));
    }
    else
    if (streq (what, "jobs"))
        answer = s_answer_jobs (self, query, why, sizeof why);
    else
    if (streq (what, "results"))
        answer = s_answer_results (self, query, why, sizeof why);
    else
    if (streq (what, "tasks"))
        answer = s_answer_tasks (self, query, why, sizeof why);
    else
    if (streq (what, "trajectory"))
        answer = s_answer_trajectory (self, query, &code, why, sizeof why);
    else
        snprintf (why, sizeof why, "unknown query '%.64s': stats, workers, job, jobs, results, "
                  "cache, tasks or trajectory", what);
    json_decref (query);

    char *data = NULL;
    size_t size = 0;
    if (answer && proto_mpk_encode (answer, &data, &size) == 0 && size <= PROTO_MAX_BODY) {
        zframe_t *body = zframe_new (data, size);
        proto_msg_reset (self->out, PROTO_ANSWER);
        self->out->ref = msg->ref;
        if (broker_send (self, self->clients, msg->routing_id, body))
            broker_bump (&self->stats.undeliverable, self->m.results_undeliverable);
        zframe_destroy (&body);
    }
    else {
        if (answer) {
            code = PROTO_ERR_TOO_LARGE;
            snprintf (why, sizeof why, "the answer is over %u bytes: ask for fewer (limit)",
                      PROTO_MAX_BODY);
        }
        else
        if (code == PROTO_ERR_MALFORMED)
            broker_bump (&self->stats.malformed, self->m.messages_malformed);
        broker_send_error (self, self->clients, msg->routing_id, code, why, msg->ref, 0);
    }
    free (data);
    json_decref (answer);
}

//  The gauges of docs/metrics.md, from the lists themselves (a few
//  backends and workers: cheap enough for every turn).
void
broker_update_gauges (broker_server_t *self)
{
    for (broker_backend_t *backend = (broker_backend_t *) zhashx_first (self->backends); backend;
         backend = (broker_backend_t *) zhashx_next (self->backends)) {
        size_t kinds [BROKER_KINDS] = { 0 }, leased = 0;
        for (size_t i = 0; i < backend->nworkers; i++) {
            leased += backend->workers [i]->jobs.size;
            kinds [broker_worker_kind (backend->workers [i])]++;
        }
        common_metric_set (self->m.queue_depth, (double) backend->queue.size, backend->name);
        common_metric_set (self->m.jobs_in_flight, (double) leased, backend->name);
        for (int kind = 0; kind < BROKER_KINDS; kind++)
            common_metric_set (self->m.workers, (double) kinds [kind], backend->name,
                               s_kind_names [kind]);
    }
}

char *
broker_stats_json (broker_server_t *self)
{
    broker_stats_t *st = &self->stats;
    size_t draining = 0, quarantined = 0;
    for (broker_worker_t *worker = (broker_worker_t *) zhashx_first (self->worker_table); worker;
         worker = (broker_worker_t *) zhashx_next (self->worker_table)) {
        draining += worker->state == WORKER_DRAINING;
        quarantined += worker->state == WORKER_QUARANTINED;
    }
    return zsys_sprintf (
        "{\"submitted\":%" PRIu64 ",\"resubmitted\":%" PRIu64 ",\"rejected\":%" PRIu64
        ",\"dispatched\":%" PRIu64 ",\"completed\":%" PRIu64 ",\"failed\":%" PRIu64
        ",\"requeued\":%" PRIu64 ",\"dropped_results\":%" PRIu64 ",\"undeliverable\":%" PRIu64
        ",\"resent\":%" PRIu64 ",\"cancelled\":%" PRIu64 ",\"malformed\":%" PRIu64
        ",\"unauthorized\":%" PRIu64 ",\"workers_lost\":%" PRIu64 ",\"workers_left\":%" PRIu64
        ",\"store_errors\":%" PRIu64 ",\"bad_results\":%" PRIu64 ",\"unserved\":%" PRIu64
        ",\"workers\":%zu,\"draining\":%zu,\"quarantined\":%zu"
        ",\"queued\":%zu,\"inflight\":%zu,\"results\":%zu,\"clients\":%zu}",
        st->submitted, st->resubmitted, st->rejected, st->dispatched, st->completed, st->failed,
        st->requeued, st->dropped_results, st->undeliverable, st->resent, st->cancelled,
        st->malformed, st->unauthorized, st->workers_lost, st->workers_left, st->store_errors,
        st->bad_results, st->unserved, zhashx_size (self->worker_table), draining, quarantined, self->queued, self->inflight,
        self->finished.size, zhashx_size (self->clients_by_key));
}
