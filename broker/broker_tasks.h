/*  broker_tasks - rolling statistics per task name, for curriculum sampling.

    For every task the broker keeps its last `window` graded results in a
    ring and answers "which tasks lie in a pass-rate band" (the learnable
    zone: neither always solved nor never). Results with status invalid or
    internal_error (or a status this module does not know) say nothing about
    the kernel: they count in `attempts` only. Rewards and speedups that are
    NAN (or not finite) are absent.

    A task's statistics, as broker_tasks_get returns them (docs/protocol.md
    section 14.5): `task`, `attempts` (every result ever recorded),
    `window` (graded results in the window), `compile_rate` (not
    compile_error), `pass_rate` (ok), `mean_speedup` (over the results with
    a speedup), `reward_mean` and `reward_var` (population, over non-null
    rewards), `statuses` (count per graded status in the window), `updated`
    (unix seconds of the last record), `reward_std` (the square root of
    reward_var), `groups` (GRPO groups of the task that ended lately, at
    most 32), `zero_variance_groups` (how many of them had every reward
    equal: no signal), `last_group_zero_variance`, and `operators` (the
    latest profile.reference.operators a result carried: the reference's
    dominant operators, [{name, share}], at most 16). What has no value is
    null.

    Bounded: at most BROKER_TASKS_MAX tasks; a new one past it drops the
    least recently updated (a client inventing task names cannot grow the
    broker). Names are cut to 255 bytes (at a UTF-8 boundary; invalid bytes
    become '?'); an empty or NULL name is "(unnamed)".

    Persisted in table `task_stats` of a SQLite file, one row per task:
        name TEXT PRIMARY KEY, attempts INTEGER, updated INTEGER,
        results BLOB, groups INTEGER, zero_groups INTEGER, operators TEXT
    (the last three added to a table an older broker made; NULL there)
    results: byte 0 is the format version (1), then the window oldest
    first, 17 bytes a result: the status code (1 byte: 0 ok, 1
    compile_error, 2 incorrect, 3 runtime_error, 4 timeout), the reward and
    the speedup (each an IEEE-754 binary64, little-endian; NaN = null). A
    row that does not parse is skipped with a warning, never trusted. Only
    tasks changed since the last flush are written, in one transaction; the
    rows of dropped tasks are deleted then.

    The broker's job file is held by broker_store with an exclusive lock,
    so a second connection to it is refused: to keep the statistics in that
    file, hand its connection to broker_tasks_new_shared. Flushes then nest
    in whatever transaction the owner has open (a SAVEPOINT) and are
    committed by it. Destroy this instance before the connection is closed
    (its statements would keep the close from happening), and commit after:
    its last flush may land in the owner's open transaction.

    One thread owns an instance (the broker's actor).
*/
#ifndef BROKER_TASKS_H
#define BROKER_TASKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct sqlite3 sqlite3;
typedef struct broker_tasks_t broker_tasks_t;

#define BROKER_TASKS_MAX 100000         //  tasks kept; the least recently updated go first
#define BROKER_TASKS_NAME_MAX 255       //  bytes of a task name
#define BROKER_TASKS_WINDOW_MAX 100000  //  largest window (a row's blob must fit SQLite's limits)

//  window: results kept per task (1 to BROKER_TASKS_WINDOW_MAX). db_path: SQLite file to persist in
//  (own connection, busy_timeout set; the table is created when missing), or
//  NULL for memory only. Loads what the file holds. NULL with a reason in
//  err on failure (bad window, cannot open, file locked by another connection).
broker_tasks_t *broker_tasks_new (size_t window, const char *db_path, char *err, size_t errlen);

//  The same on a connection someone else owns (borrowed: it must outlive
//  this instance). Loads what the file holds.
broker_tasks_t *broker_tasks_new_shared (size_t window, sqlite3 *db, char *err, size_t errlen);

//  Flush, then free. Harmless on NULL or twice.
void broker_tasks_destroy (broker_tasks_t **self_p);

//  One finished result of task. 0, or -1 (out of memory).
int broker_tasks_record (broker_tasks_t *self, const char *task, const char *status,
                         double reward, double speedup);

//  A GRPO group of task ended; zero_variance: every reward in it was equal.
//  A task not known is left alone. 0, or -1 (out of memory).
int broker_tasks_record_group (broker_tasks_t *self, const char *task, bool zero_variance);

//  Keep the reference's operators of a result document (its
//  profile.reference.operators: entries without a name or with a share
//  outside [0, 1] are dropped, at most 16 kept, names cut to 128 bytes) as
//  the task's latest. A result without them changes nothing. 0, or -1 (out
//  of memory).
int broker_tasks_record_profile (broker_tasks_t *self, const char *task, json_t *doc);

//  Write the tasks changed since the last flush, and delete the rows of
//  dropped ones, in one transaction (a savepoint on a shared connection).
//  0 (also with nothing to write or no database), or -1 with a log line: then
//  nothing was written and the next flush tries again.
int broker_tasks_flush (broker_tasks_t *self);

//  One task's statistics as a new JSON object, or NULL when unknown.
json_t *broker_tasks_get (broker_tasks_t *self, const char *task);

//  Every task as a new JSON array sorted by name; with band, only those with
//  at least min_attempts graded results in the window and
//  lo <= pass_rate <= hi (a task with an empty window is never in a band).
json_t *broker_tasks_list (broker_tasks_t *self, bool band, double lo, double hi,
                           size_t min_attempts);

//  Tasks known.
size_t broker_tasks_size (broker_tasks_t *self);

#endif
