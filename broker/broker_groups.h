/*  broker_groups - GRPO group summaries (docs/protocol.md section 14.4).

    Jobs may carry a group id (and the group's size). A group is per owner
    (the submitting client's key): two clients using the same name are two
    groups. The broker tells this module when a job of a group is accepted
    and when it ends; when the group's last job ends it gets the group's
    summary to send to the owner.

    Complete: with a declared size, when that many jobs have ended (the
    group is then forgotten; a later job starts a new one); without, every
    time no job of it is unfinished (the summary covers every job so far;
    the group stays, so a later job adds to it). A job that ends in a group
    this module does not know (a broker restart, a dropped group) creates it
    with that one job, so its summary still comes out.

    Summary: `group`, `count` (counted jobs), `cancelled`, `declared_size`
    (null when not declared), `statuses` (count per status, all seven keys;
    a status this module does not know counts as internal_error),
    `pass_rate` (ok / count), `rewards` (non-null rewards), `reward_mean`,
    `reward_std` (population), `reward_min`, `reward_max`, `zero_variance`
    (at least one reward and all within 1e-12: a dead group, no gradient),
    `best_job` (the first job to reach the highest reward), `jobs` (counted
    job ids in finishing order, at most BROKER_GROUPS_JOBS_MAX) and
    `jobs_truncated`. What has no value is null. Rewards that are NAN or not
    finite are absent.

    Bounded: at most max_groups groups are held. Past it, a group with no
    unfinished job (an undeclared one that has sent its summary) is
    forgotten first, least recently touched first; only when there is none
    is the least recently touched group still waiting for jobs dropped, and
    only those drops are counted (broker_groups_dropped): each is a summary
    that will be wrong or missing. Group names are cut to 255 bytes (at a
    UTF-8 boundary; invalid bytes become '?').

    One thread owns an instance (the broker's actor). Memory only: a broker
    restarted on its database rebuilds its groups from the stored jobs
    (each added, the finished ones ended in the order they finished).
*/
#ifndef BROKER_GROUPS_H
#define BROKER_GROUPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broker_groups_t broker_groups_t;

#define BROKER_GROUPS_JOBS_MAX 1024     //  job ids listed in a summary
#define BROKER_GROUPS_NAME_MAX 255      //  bytes of a group name

//  max_groups: groups held at most (at least 1).
broker_groups_t *broker_groups_new (size_t max_groups);

//  Free. Harmless on NULL or twice.
void broker_groups_destroy (broker_groups_t **self_p);

//  A job of (owner, group) was accepted. size: the group's declared size
//  (0 = not declared; the first non-zero size given wins). 0, or -1 (out of
//  memory).
int broker_groups_add (broker_groups_t *self, const char *owner, const char *group, uint32_t size);

//  A job of (owner, group) ended. counted: false for a cancelled job (it
//  ends the job but adds nothing to the statistics). reward: NAN = null.
//  The summary (a new object, the caller's) when this completes the group,
//  else NULL (also when out of memory).
json_t *broker_groups_finish (broker_groups_t *self, const char *owner, const char *group,
                              uint64_t job, const char *status, double reward, bool counted);

//  The summary (a new object, the caller's) of an undeclared group none of
//  whose jobs is unfinished, as broker_groups_finish gave it when its last
//  job ended; NULL when the group is unknown, declared, waits for jobs, or
//  memory runs out. For a caller that holds a summary back (the broker,
//  when jobs are answered at once) and sends the newest one later.
json_t *broker_groups_summary (broker_groups_t *self, const char *owner, const char *group);

//  Groups held.
size_t broker_groups_size (broker_groups_t *self);

//  Groups dropped while they still had unfinished jobs.
uint64_t broker_groups_dropped (broker_groups_t *self);

#endif
