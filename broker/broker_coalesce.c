/*  broker_coalesce - part of broker_server: what it reads of bodies.

    The broker decodes each job body once (section 14 of docs/protocol.md):
    to name its task, key the result cache (broker_cache), let identical
    jobs in flight follow one leader, and keep its reward settings, against
    which its result is checked (broker_verdict). Each result's verdict
    (status, reward, speedup) feeds the task statistics and the GRPO groups
    (broker_groups), whose SUMMARYs go out at the batch end. State and the
    other parts: broker_internal.h.
*/
#include "broker_internal.h"

size_t
broker_key_hash (const void *key)
{
    size_t hash;
    memcpy (&hash, key, sizeof hash);
    return hash;
}

int
broker_key_compare (const void *a, const void *b)
{
    return memcmp (a, b, BROKER_CACHE_KEY_BYTES);
}

//  The name a client's groups live under.
void
broker_owner (const broker_client_t *client, char *owner, size_t size)
{
    if (client->key)
        snprintf (owner, size, "%s", client->key);
    else
        snprintf (owner, size, "anonymous:%p", (const void *) client);
}

//  The task's name, its reward settings and, unless the job bypasses the
//  cache, its key. A body that does not decode is the worker's to call
//  invalid: no key, no name (its settings are read if a result needs them).
void
broker_job_describe (broker_server_t *self, broker_job_t *job, zframe_t *body)
{
    proto_mpk_limits_t limits;
    proto_mpk_limits_default (&limits);
    //  A real job is a few hundred values; a body built to cost the broker's
    //  one thread time and memory is simply not keyed (its worker judges it).
    limits.max_total = 1 << 16;
    char err [256];
    json_t *doc = proto_mpk_decode (zframe_data (body), zframe_size (body), &limits, err, sizeof err);
    if (!doc)
        return;
    job->rewards_read = broker_verdict_settings (doc, &job->rewards) == 0?
                        BROKER_REWARDS_KNOWN: BROKER_REWARDS_NONE;
    const char *name = json_string_value (json_object_get (json_object_get (doc, "task"), "name"));
    if (name && *name)
        job->task = strndup (name, PROTO_MAX_STR - 1);
    const char *tag = json_string_value (json_object_get (doc, "tag"));
    if (tag)
        job->body_tag = strdup (tag);
    if (job->policy != BROKER_POLICY_BYPASS && broker_cache_enabled (self->cache)
    &&  broker_cache_key (doc, job->backend->name, job->key, err, sizeof err) == 0)
        job->keyed = true;
    json_decref (doc);
}

const common_reward_t *
broker_job_rewards (broker_job_t *job)
{
    if (job->rewards_read == BROKER_REWARDS_UNREAD) {
        //  Past the bound of broker_job_describe, within the section-5
        //  limits a worker decodes it with: read once, and only when a
        //  result claims a reward for it.
        proto_mpk_limits_t limits;
        proto_mpk_limits_default (&limits);
        char err [128];
        json_t *doc = job->body? proto_mpk_decode (zframe_data (job->body), zframe_size (job->body),
                                                   &limits, err, sizeof err): NULL;
        job->rewards_read = doc && broker_verdict_settings (doc, &job->rewards) == 0?
                            BROKER_REWARDS_KNOWN: BROKER_REWARDS_NONE;
        json_decref (doc);
    }
    return job->rewards_read == BROKER_REWARDS_KNOWN? &job->rewards: NULL;
}

//  A kept result for the job, from a device that serves its backend now
//  (or that served it last when none does); counts a hit or a miss.
zframe_t *
broker_cached_result (broker_server_t *self, broker_job_t *job)
{
    broker_backend_t *backend = job->backend;
    const char *device = NULL;
    for (size_t i = 0; i < backend->nworkers && !device; i++)
        if (broker_cache_has (self->cache, job->key, backend->workers [i]->model))
            device = backend->workers [i]->model;
    if (!device && backend->nworkers == 0 && backend->last_device [0])
        device = backend->last_device;
    return broker_cache_get (self->cache, job->key, device? device: "");
}

//  A "use" job in flight is the one identical "use" jobs follow.
void
broker_lead (broker_server_t *self, broker_job_t *job)
{
    if (job->keyed && job->policy == BROKER_POLICY_USE && !zhashx_lookup (self->leaders, job->key)) {
        zhashx_insert (self->leaders, job->key, job);
        job->leads = true;
    }
}

void
broker_unlead (broker_server_t *self, broker_job_t *job)
{
    if (job->leads) {
        zhashx_delete (self->leaders, job->key);
        job->leads = false;
    }
}

void
broker_settling_free (void **item)
{
    broker_settling_t *wait = (broker_settling_t *) *item;
    if (wait) {
        zframe_destroy (&wait->identity);
        free (wait->owner);
        free (wait->group);
        free (wait->task);
        free (wait);
        *item = NULL;
    }
}

int64_t
broker_settling_next (broker_server_t *self)
{
    int64_t next = 0;
    for (broker_settling_t *wait = (broker_settling_t *) zhashx_first (self->settling); wait;
         wait = (broker_settling_t *) zhashx_next (self->settling))
        if (!next || wait->due_us < next)
            next = wait->due_us;
    return next;
}

//  Queue a SUMMARY (summary lent) for the batch end.
static void
s_queue_summary (broker_server_t *self, zframe_t *identity, const char *group, json_t *summary)
{
    char *data = NULL;
    size_t size = 0;
    if (identity && proto_mpk_encode (summary, &data, &size) == 0) {
        zmsg_t *entry = zmsg_new ();
        if (entry) {
            zframe_t *copy = zframe_dup (identity);
            zmsg_append (entry, &copy);
            zmsg_addstr (entry, group);
            zmsg_addmem (entry, data, size);
            zlist_append (self->summaries, entry);
        }
    }
    free (data);
}

//  A summary that goes out is a group of task that ended: its curriculum
//  statistics count whether it carried any reward spread.
static void
s_tasks_group (broker_server_t *self, const char *task, json_t *summary)
{
    if (task && self->tasks
    &&  broker_tasks_record_group (self->tasks, task,
                                   json_is_true (json_object_get (summary, "zero_variance"))))
        log_warn ("broker", "task statistics: out of memory counting a group of '%s'", task);
}

void
broker_group_end (broker_server_t *self, broker_job_t *job, bool counted, bool settle)
{
    if (!job->group || !self->groups)
        return;
    char owner [PROTO_MAX_STR + 64];
    broker_owner (job->client, owner, sizeof owner);
    json_t *summary = broker_groups_finish (self->groups, owner, job->group, job->id, job->status,
                                            job->reward, counted);
    if (!summary)
        return;
    //  (owner, group) as one key: the owner's length first.
    char *key = zsys_sprintf ("%zu:%s%s", strlen (owner), owner, job->group);
    if (settle && json_is_null (json_object_get (summary, "declared_size")) && key) {
        //  Answered at once, so its group looks complete between two
        //  SUBMITs: the summary waits a heartbeat for the rest of them.
        broker_settling_t *entry = (broker_settling_t *) calloc (1, sizeof (broker_settling_t));
        if (entry && job->client->identity) {
            entry->identity = zframe_dup (job->client->identity);
            entry->owner = strdup (owner);
            entry->group = strdup (job->group);
            entry->task = job->task? strdup (job->task): NULL;
            entry->due_us = broker_now_us () + (int64_t) self->cfg.heartbeat_ms * 1000;
            zhashx_update (self->settling, key, entry);         //  the newest wait wins
        }
        else
            free (entry);
    }
    else {
        if (key)
            zhashx_delete (self->settling, key);                //  this summary covers it
        s_queue_summary (self, job->client->identity, job->group, summary);
        s_tasks_group (self, job->task, summary);
    }
    zstr_free (&key);
    json_decref (summary);
}

//  Send the SUMMARYs of groups that ended in this batch.
void
broker_send_summaries (broker_server_t *self, int64_t now)
{
    if (zhashx_size (self->settling)) {
        zlist_t *due = zlist_new ();           //  keys (copies): the table changes below
        if (due)
            zlist_autofree (due);
        for (broker_settling_t *wait = (broker_settling_t *) zhashx_first (self->settling); wait && due;
             wait = (broker_settling_t *) zhashx_next (self->settling))
            if (now >= wait->due_us)
                zlist_append (due, (void *) zhashx_cursor (self->settling));
        //  Due: its newest summary, unless a job of it came meanwhile and
        //  is still unfinished (its end sends one then).
        for (const char *key = due? (const char *) zlist_first (due): NULL; key;
             key = (const char *) zlist_next (due)) {
            broker_settling_t *wait = (broker_settling_t *) zhashx_lookup (self->settling, key);
            json_t *summary = broker_groups_summary (self->groups, wait->owner, wait->group);
            if (summary) {
                s_queue_summary (self, wait->identity, wait->group, summary);
                s_tasks_group (self, wait->task, summary);
            }
            json_decref (summary);
            zhashx_delete (self->settling, key);
        }
        zlist_destroy (&due);
    }
    zmsg_t *entry;
    while ((entry = (zmsg_t *) zlist_pop (self->summaries))) {
        zframe_t *identity = zmsg_pop (entry);
        char *group = zmsg_popstr (entry);
        zframe_t *body = zmsg_pop (entry);
        proto_msg_reset (self->out, PROTO_SUMMARY);
        proto_msg_set_str (self->out->group, group);
        if (identity && body && broker_send (self, self->clients, identity, body))
            log_debug ("broker", "SUMMARY of group '%s' not delivered", group);
        zframe_destroy (&identity);
        zframe_destroy (&body);
        zstr_free (&group);
        zmsg_destroy (&entry);
    }
}
