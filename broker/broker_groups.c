/*  broker_groups - GRPO group summaries.

    A hash of groups by (owner, name), and two lists in touch order: groups
    still waiting for jobs ("open") and undeclared groups whose every job
    has ended ("idle"), so the bound forgets idle ones before it loses an
    open one. Rewards are folded in as they come (Welford's mean and sum of
    squared deviations, min, max): a group holds no per-job state but its
    job ids, which are capped.
*/
#include "broker_groups.h"
#include "common_util.h"
#include "common_log.h"
#include <czmq.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#define GROUPS_EQUAL 1e-12          //  rewards this close count as equal (zero variance)
#define GROUPS_JOBS_START 16        //  first size of a group's job list

typedef enum {
    S_OK, S_COMPILE_ERROR, S_INCORRECT, S_RUNTIME_ERROR, S_TIMEOUT, S_INVALID,
    S_INTERNAL_ERROR, S_NSTATUSES
} s_status_t;

static const char *s_status_name [S_NSTATUSES] = {
    "ok", "compile_error", "incorrect", "runtime_error", "timeout", "invalid", "internal_error"
};

//  One group.
typedef struct {
    char *key;                  //  hash key: owner's length, ':', owner, name
    char *name;                 //  the group's (cleaned) name
    uint32_t declared;          //  declared size; 0 = not said
    uint64_t added;             //  jobs accepted (or implied by an unexpected end)
    uint64_t ended;             //  jobs ended, counted or cancelled
    uint64_t count;             //  counted jobs
    uint64_t cancelled;         //  jobs ended without counting
    uint64_t statuses [S_NSTATUSES];    //  counted jobs per status
    uint64_t rewards;           //  non-null rewards
    double mean;                //  their running mean
    double m2;                  //  their sum of squared deviations from it
    double min;                 //  lowest reward
    double max;                 //  highest reward
    uint64_t best_job;          //  first job with the highest reward
    uint64_t *jobs;             //  counted job ids in finishing order (capped)
    size_t jobs_size;           //  ids held
    size_t jobs_cap;            //  ids allocated
    bool idle;                  //  on the idle list (else open)
    void *handle;               //  on that list
} s_group_t;

struct broker_groups_t {
    size_t max_groups;          //  groups held at most
    zhashx_t *groups;           //  key -> s_group_t (owned: freed through the lists)
    zlistx_t *open;             //  groups waiting for jobs, least recently touched first
    zlistx_t *idle;             //  undeclared groups with nothing unfinished, likewise
    uint64_t dropped;           //  open groups dropped by the bound
};

//  The group's name as it goes into a summary: a valid JSON string of at
//  most BROKER_GROUPS_NAME_MAX bytes ("" for NULL).
static void
s_clean_name (const char *name, char out [BROKER_GROUPS_NAME_MAX + 1])
{
    common_utf8_copy (out, BROKER_GROUPS_NAME_MAX + 1, name? name: "");
}

//  (owner, name) as one unambiguous key: the owner's length comes first,
//  so ("a", "bc") and ("ab", "c") differ. A new string, or NULL.
static char *
s_key (const char *owner, const char *name)
{
    owner = owner? owner: "";
    size_t size = strlen (owner) + strlen (name) + 24;
    char *key = (char *) malloc (size);
    if (key)
        snprintf (key, size, "%zu:%s%s", strlen (owner), owner, name);
    return key;
}

static int
s_status_code (const char *status)
{
    for (int i = 0; status && i < S_NSTATUSES; i++)
        if (streq (status, s_status_name [i]))
            return i;
    //  A result without a known status is kgym's fault, not the kernel's.
    return S_INTERNAL_ERROR;
}

static void
s_group_destroy (s_group_t **group_p)
{
    if (*group_p) {
        free ((*group_p)->key);
        free ((*group_p)->name);
        free ((*group_p)->jobs);
        free (*group_p);
        *group_p = NULL;
    }
}

//  Forget a group.
static void
s_remove (broker_groups_t *self, s_group_t *group)
{
    zlistx_delete (group->idle? self->idle: self->open, group->handle);
    zhashx_delete (self->groups, group->key);
    s_group_destroy (&group);
}

//  Put the group last on the list its state says (open or idle).
static int
s_touch (broker_groups_t *self, s_group_t *group)
{
    bool idle = group->declared == 0 && group->ended == group->added;
    if (group->handle && idle == group->idle) {
        zlistx_move_end (idle? self->idle: self->open, group->handle);
        return 0;
    }
    if (group->handle)
        zlistx_detach (group->idle? self->idle: self->open, group->handle);
    group->idle = idle;
    group->handle = zlistx_add_end (idle? self->idle: self->open, group);
    return group->handle? 0: -1;
}

//  The group of (owner, name), made when absent (and create); NULL when
//  out of memory, or absent and not made.
static s_group_t *
s_lookup (broker_groups_t *self, const char *owner, const char *group_name, bool create)
{
    char name [BROKER_GROUPS_NAME_MAX + 1];
    s_clean_name (group_name, name);
    char *key = s_key (owner, name);
    if (!key)
        return NULL;
    s_group_t *group = (s_group_t *) zhashx_lookup (self->groups, key);
    if (group || !create) {
        free (key);
        return group;
    }
    while (zhashx_size (self->groups) >= self->max_groups) {
        s_group_t *oldest = (s_group_t *) zlistx_head (self->idle);
        if (!oldest) {
            oldest = (s_group_t *) zlistx_head (self->open);
            self->dropped++;
            log_warn ("broker", "group '%s' dropped with %llu unfinished jobs (bound of %zu groups)",
                      oldest->name, (unsigned long long) (oldest->added - oldest->ended),
                      self->max_groups);
        }
        s_remove (self, oldest);
    }
    group = (s_group_t *) calloc (1, sizeof (s_group_t));
    if (!group || !(group->name = strdup (name))) {
        free (group);
        free (key);
        return NULL;
    }
    group->key = key;
    if (s_touch (self, group)) {
        s_group_destroy (&group);
        return NULL;
    }
    if (zhashx_insert (self->groups, group->key, group)) {
        zlistx_delete (group->idle? self->idle: self->open, group->handle);
        s_group_destroy (&group);
        return NULL;
    }
    return group;
}

broker_groups_t *
broker_groups_new (size_t max_groups)
{
    broker_groups_t *self = (broker_groups_t *) calloc (1, sizeof (broker_groups_t));
    if (!self)
        return NULL;
    self->max_groups = max_groups? max_groups: 1;
    self->groups = zhashx_new ();
    self->open = zlistx_new ();
    self->idle = zlistx_new ();
    if (!self->groups || !self->open || !self->idle)
        broker_groups_destroy (&self);
    return self;
}

void
broker_groups_destroy (broker_groups_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_groups_t *self = *self_p;
    zlistx_t *lists [2] = { self->open, self->idle };
    for (int i = 0; i < 2; i++) {
        s_group_t *group = lists [i]? (s_group_t *) zlistx_first (lists [i]): NULL;
        while (group) {
            s_group_destroy (&group);
            group = (s_group_t *) zlistx_next (lists [i]);
        }
    }
    zlistx_destroy (&self->open);
    zlistx_destroy (&self->idle);
    zhashx_destroy (&self->groups);
    free (self);
    *self_p = NULL;
}

int
broker_groups_add (broker_groups_t *self, const char *owner, const char *group_name,
                   uint32_t size)
{
    s_group_t *group = s_lookup (self, owner, group_name, true);
    if (!group)
        return -1;
    group->added++;
    if (group->declared == 0)
        group->declared = size;
    return s_touch (self, group);
}

static json_t *
s_real (double value)
{
    return isfinite (value)? json_real (value): json_null ();
}

static json_t *
s_summary (const s_group_t *group)
{
    json_t *statuses = json_object ();
    json_t *jobs = json_array ();
    for (int i = 0; statuses && i < S_NSTATUSES; i++)
        if (json_object_set_new (statuses, s_status_name [i],
                                 json_integer ((json_int_t) group->statuses [i])))
            break;
    for (size_t i = 0; jobs && i < group->jobs_size; i++)
        if (json_array_append_new (jobs, json_integer ((json_int_t) group->jobs [i])))
            break;
    if (!statuses || !jobs || json_object_size (statuses) != S_NSTATUSES
    ||  json_array_size (jobs) != group->jobs_size) {
        json_decref (statuses);
        json_decref (jobs);
        return NULL;
    }
    bool rewards = group->rewards > 0;
    return json_pack ("{s:s, s:I, s:I, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:b, s:o,"
                      " s:o, s:b}",
        "group", group->name,
        "count", (json_int_t) group->count,
        "cancelled", (json_int_t) group->cancelled,
        "declared_size", group->declared? json_integer (group->declared): json_null (),
        "statuses", statuses,
        "pass_rate", s_real (group->count?
            (double) group->statuses [S_OK] / (double) group->count: NAN),
        "rewards", (json_int_t) group->rewards,
        "reward_mean", s_real (rewards? group->mean: NAN),
        "reward_std", s_real (rewards? sqrt (group->m2 / (double) group->rewards): NAN),
        "reward_min", s_real (rewards? group->min: NAN),
        "reward_max", s_real (rewards? group->max: NAN),
        "zero_variance", rewards && group->max - group->min <= GROUPS_EQUAL,
        "best_job", rewards? json_integer ((json_int_t) group->best_job): json_null (),
        "jobs", jobs,
        "jobs_truncated", group->count > group->jobs_size);
}

//  Fold one counted job into the group's figures; 0 or -1 (out of memory).
static int
s_count (s_group_t *group, uint64_t job, const char *status, double reward)
{
    if (group->jobs_size < BROKER_GROUPS_JOBS_MAX) {
        if (group->jobs_size == group->jobs_cap) {
            size_t cap = group->jobs_cap? group->jobs_cap * 2: GROUPS_JOBS_START;
            if (cap > BROKER_GROUPS_JOBS_MAX)
                cap = BROKER_GROUPS_JOBS_MAX;
            uint64_t *jobs = (uint64_t *) realloc (group->jobs, cap * sizeof (uint64_t));
            if (!jobs)
                return -1;
            group->jobs = jobs;
            group->jobs_cap = cap;
        }
        group->jobs [group->jobs_size++] = job;
    }
    group->count++;
    group->statuses [s_status_code (status)]++;
    if (!isfinite (reward))
        return 0;
    group->rewards++;
    double delta = reward - group->mean;
    group->mean += delta / (double) group->rewards;
    group->m2 += delta * (reward - group->mean);
    if (group->rewards == 1 || reward < group->min)
        group->min = reward;
    if (group->rewards == 1 || reward > group->max) {
        group->max = reward;
        group->best_job = job;
    }
    return 0;
}

json_t *
broker_groups_finish (broker_groups_t *self, const char *owner, const char *group_name,
                      uint64_t job, const char *status, double reward, bool counted)
{
    s_group_t *group = s_lookup (self, owner, group_name, true);
    if (!group)
        return NULL;
    //  An end nobody announced (restart, dropped group): that job was accepted.
    if (group->ended == group->added)
        group->added++;
    if (counted && s_count (group, job, status, reward))
        return NULL;
    group->ended++;
    group->cancelled += !counted;
    bool complete = group->declared? group->ended >= group->declared:
                                     group->ended == group->added;
    json_t *summary = complete? s_summary (group): NULL;
    if (group->declared && complete)
        s_remove (self, group);
    else
        s_touch (self, group);
    return summary;
}

json_t *
broker_groups_summary (broker_groups_t *self, const char *owner, const char *group_name)
{
    s_group_t *group = s_lookup (self, owner, group_name, false);
    if (!group || group->declared || group->ended != group->added)
        return NULL;
    return s_summary (group);
}

size_t
broker_groups_size (broker_groups_t *self)
{
    return zhashx_size (self->groups);
}

uint64_t
broker_groups_dropped (broker_groups_t *self)
{
    return self->dropped;
}
