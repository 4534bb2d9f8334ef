/*  broker_tasks - rolling statistics per task name, for curriculum sampling.

    A hash of tasks by name; each holds its window as a ring of results
    that grows on demand up to `window` (so a client inventing names costs
    one small ring each, not a full window). A list in update order picks
    the task to drop past the bound; a list of changed tasks and a set of
    dropped names make a flush write only what changed. The format of a
    row is in the header.
*/
#include "broker_tasks.h"
#include "common_util.h"
#include "common_log.h"
#include <czmq.h>
#include <sqlite3.h>
#include <math.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TASKS_BUSY_MS 1000          //  wait for another connection's lock before failing
#define TASKS_BLOB_VERSION 1        //  byte 0 of a row's results
#define TASKS_BLOB_ENTRY 17         //  status byte + two binary64
#define TASKS_RING_START 4          //  first ring size of a new task
#define TASKS_UNNAMED "(unnamed)"
#define TASKS_GROUPS 32             //  recent GRPO groups remembered per task (bits of a mask)
#define TASKS_OPERATORS 16          //  reference operators kept per task
#define TASKS_OPERATOR_NAME 128     //  bytes of an operator's name

//  Graded statuses, in the order of their code in a row; anything else
//  (invalid, internal_error, unknown) is not graded.
typedef enum {
    S_OK, S_COMPILE_ERROR, S_INCORRECT, S_RUNTIME_ERROR, S_TIMEOUT, S_NGRADED
} s_status_t;

static const char *s_status_name [S_NGRADED] = {
    "ok", "compile_error", "incorrect", "runtime_error", "timeout"
};

//  One graded result in a window.
typedef struct {
    double reward;              //  NAN: none
    double speedup;             //  NAN: none
    uint8_t status;             //  s_status_t
} s_result_t;

//  One task.
typedef struct {
    char *name;                 //  cleaned name (also the hash key)
    uint64_t attempts;          //  results ever recorded, graded or not
    int64_t updated;            //  unix seconds of the last record
    s_result_t *ring;           //  the window; oldest at head once full
    size_t cap;                 //  ring's allocated entries (<= window)
    size_t head;                //  index of the oldest entry
    size_t count;               //  entries in use (<= window)
    void *lru_handle;           //  in self->lru
    void *dirty_handle;         //  in self->dirty; NULL when written
    uint32_t groups;            //  recent groups ended (at most TASKS_GROUPS)
    uint32_t zero_groups;       //  which were zero-variance: bit 0 the newest
    char *operators;            //  the latest profile.reference.operators, JSON text, or NULL
} s_task_t;

//  A task's figures, computed from its window.
typedef struct {
    size_t count;               //  graded results in the window
    size_t statuses [S_NGRADED];//  per status
    size_t speedups;            //  results with a speedup
    double speedup_sum;
    size_t rewards;             //  results with a reward
    double reward_mean;
    double reward_var;          //  population variance
} s_stats_t;

struct broker_tasks_t {
    size_t window;              //  results kept per task
    size_t max_tasks;           //  bound on tasks held
    zhashx_t *tasks;            //  name -> s_task_t (not owned: freed through lru)
    zlistx_t *lru;              //  every task, least recently updated first
    zlistx_t *dirty;            //  tasks changed since the last flush (db only)
    zhashx_t *gone;             //  names of dropped tasks whose rows go at flush (db only)
    sqlite3 *db;                //  NULL: memory only
    bool own_db;                //  we opened it (else borrowed)
    sqlite3_stmt *upsert;       //  write one row (results, groups, operators)
    sqlite3_stmt *remove;       //  delete one row
    uint8_t *blob;              //  encoding buffer, room for a full window
    char *where;                //  database name for logs
};

//  The name a task is kept under: at most BROKER_TASKS_NAME_MAX bytes, cut
//  at a character boundary, invalid bytes as '?', so it is always a valid
//  JSON string; "(unnamed)" for NULL or "".
static void
s_clean_name (const char *name, char out [BROKER_TASKS_NAME_MAX + 1])
{
    if (!name || !*name) {
        strcpy (out, TASKS_UNNAMED);
        return;
    }
    common_utf8_copy (out, BROKER_TASKS_NAME_MAX + 1, name);
}

static int
s_status_code (const char *status)
{
    for (int i = 0; status && i < S_NGRADED; i++)
        if (streq (status, s_status_name [i]))
            return i;
    return -1;
}

static s_task_t *
s_task_new (const char *name)
{
    s_task_t *task = (s_task_t *) calloc (1, sizeof (s_task_t));
    if (task && !(task->name = strdup (name))) {
        free (task);
        task = NULL;
    }
    return task;
}

static void
s_task_destroy (s_task_t **task_p)
{
    if (*task_p) {
        free ((*task_p)->ring);
        free ((*task_p)->operators);
        free ((*task_p)->name);
        free (*task_p);
        *task_p = NULL;
    }
}

//  Append a result to the task's window, dropping the oldest when full.
static int
s_task_push (s_task_t *task, size_t window, const s_result_t *result)
{
    if (task->count < window) {
        //  Not full yet: the ring has not wrapped, entries are [0, count).
        if (task->count == task->cap) {
            size_t cap = task->cap? task->cap * 2: TASKS_RING_START;
            if (cap > window)
                cap = window;
            s_result_t *ring = (s_result_t *) realloc (task->ring, cap * sizeof (s_result_t));
            if (!ring)
                return -1;
            task->ring = ring;
            task->cap = cap;
        }
        task->ring [task->count++] = *result;
    }
    else {
        task->ring [task->head] = *result;
        task->head = (task->head + 1) % task->cap;
    }
    return 0;
}

//  The i-th oldest result of the window.
static const s_result_t *
s_task_at (const s_task_t *task, size_t i)
{
    return &task->ring [(task->head + i) % task->cap];
}

static void
s_task_stats (const s_task_t *task, s_stats_t *stats)
{
    memset (stats, 0, sizeof (*stats));
    stats->count = task->count;
    double reward_sum = 0;
    for (size_t i = 0; i < task->count; i++) {
        const s_result_t *result = s_task_at (task, i);
        stats->statuses [result->status]++;
        if (!isnan (result->speedup)) {
            stats->speedups++;
            stats->speedup_sum += result->speedup;
        }
        if (!isnan (result->reward)) {
            stats->rewards++;
            reward_sum += result->reward;
        }
    }
    if (stats->rewards == 0)
        return;
    //  Two passes: the variance from deviations, not from a difference of sums.
    stats->reward_mean = reward_sum / (double) stats->rewards;
    double squares = 0;
    for (size_t i = 0; i < task->count; i++) {
        const s_result_t *result = s_task_at (task, i);
        if (!isnan (result->reward))
            squares += (result->reward - stats->reward_mean) * (result->reward - stats->reward_mean);
    }
    stats->reward_var = squares / (double) stats->rewards;
}

static double
s_pass_rate (const s_stats_t *stats)
{
    return stats->count? (double) stats->statuses [S_OK] / (double) stats->count: NAN;
}

static json_t *
s_real (double value)
{
    return isfinite (value)? json_real (value): json_null ();
}

static json_t *
s_task_json (const s_task_t *task, const s_stats_t *stats)
{
    double count = (double) stats->count;
    json_t *statuses = json_object ();
    for (int i = 0; statuses && i < S_NGRADED; i++)
        if (json_object_set_new (statuses, s_status_name [i],
                                 json_integer ((json_int_t) stats->statuses [i]))) {
            json_decref (statuses);
            statuses = NULL;
        }
    if (!statuses)
        return NULL;
    size_t zero = 0;
    for (uint32_t i = 0; i < task->groups; i++)
        zero += (task->zero_groups >> i) & 1;
    json_t *operators = task->operators? json_loads (task->operators, 0, NULL): NULL;
    return json_pack ("{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:I}",
        "task", task->name,
        "attempts", (json_int_t) task->attempts,
        "window", (json_int_t) stats->count,
        "compile_rate", s_real (stats->count?
            (count - (double) stats->statuses [S_COMPILE_ERROR]) / count: NAN),
        "pass_rate", s_real (s_pass_rate (stats)),
        "mean_speedup", s_real (stats->speedups?
            stats->speedup_sum / (double) stats->speedups: NAN),
        "reward_mean", s_real (stats->rewards? stats->reward_mean: NAN),
        "reward_var", s_real (stats->rewards? stats->reward_var: NAN),
        "reward_std", s_real (stats->rewards? sqrt (stats->reward_var): NAN),
        "statuses", statuses,
        "groups", (json_int_t) task->groups,
        "zero_variance_groups", (json_int_t) zero,
        "last_group_zero_variance", task->groups? json_boolean (task->zero_groups & 1): json_null (),
        "operators", operators? operators: json_null (),
        "updated", (json_int_t) task->updated);
}

//  Remember that a task needs writing.
static int
s_mark_dirty (broker_tasks_t *self, s_task_t *task)
{
    if (self->db && !task->dirty_handle
    &&  !(task->dirty_handle = zlistx_add_end (self->dirty, task)))
        return -1;
    return 0;
}

//  Forget the least recently updated task (its row goes at the next flush).
static void
s_drop_oldest (broker_tasks_t *self)
{
    s_task_t *task = (s_task_t *) zlistx_head (self->lru);
    if (!task)
        return;
    zlistx_delete (self->lru, task->lru_handle);
    if (task->dirty_handle)
        zlistx_delete (self->dirty, task->dirty_handle);
    zhashx_delete (self->tasks, task->name);
    //  Best effort: a name not remembered here leaves a row that a reload drops again.
    if (self->db)
        zhashx_insert (self->gone, task->name, (void *) 1);
    log_debug ("broker", "task statistics: dropped '%s' (bound of %zu tasks)",
               task->name, self->max_tasks);
    s_task_destroy (&task);
}

//  A new task, last in update order; NULL when out of memory.
static s_task_t *
s_add (broker_tasks_t *self, const char *name)
{
    while (zhashx_size (self->tasks) >= self->max_tasks)
        s_drop_oldest (self);
    s_task_t *task = s_task_new (name);
    if (!task)
        return NULL;
    if (!(task->lru_handle = zlistx_add_end (self->lru, task))) {
        s_task_destroy (&task);
        return NULL;
    }
    if (zhashx_insert (self->tasks, task->name, task)) {
        zlistx_delete (self->lru, task->lru_handle);
        s_task_destroy (&task);
        return NULL;
    }
    return task;
}

static void
s_put_double (uint8_t *out, double value)
{
    uint64_t bits;
    memcpy (&bits, &value, sizeof (bits));
    for (int i = 0; i < 8; i++)
        out [i] = (uint8_t) (bits >> (8 * i));
}

static double
s_get_double (const uint8_t *in)
{
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++)
        bits |= (uint64_t) in [i] << (8 * i);
    double value;
    memcpy (&value, &bits, sizeof (value));
    return value;
}

//  The task's window as a row's results into self->blob; its size.
static size_t
s_encode (broker_tasks_t *self, const s_task_t *task)
{
    uint8_t *out = self->blob;
    *out++ = TASKS_BLOB_VERSION;
    for (size_t i = 0; i < task->count; i++) {
        const s_result_t *result = s_task_at (task, i);
        out [0] = result->status;
        s_put_double (out + 1, result->reward);
        s_put_double (out + 9, result->speedup);
        out += TASKS_BLOB_ENTRY;
    }
    return (size_t) (out - self->blob);
}

//  Rebuild a task from its row; 0, -1 when the row is malformed (skipped),
//  -2 when out of memory.
static int
s_load_row (broker_tasks_t *self, sqlite3_stmt *stmt)
{
    const char *stored = (const char *) sqlite3_column_text (stmt, 0);
    int64_t attempts = sqlite3_column_int64 (stmt, 1);
    const uint8_t *blob = (const uint8_t *) sqlite3_column_blob (stmt, 3);
    int size = sqlite3_column_bytes (stmt, 3);
    if (!stored || attempts < 0 || sqlite3_column_type (stmt, 3) != SQLITE_BLOB
    ||  size < 1 || blob [0] != TASKS_BLOB_VERSION || (size - 1) % TASKS_BLOB_ENTRY)
        return -1;
    size_t entries = (size_t) (size - 1) / TASKS_BLOB_ENTRY;
    for (size_t i = 0; i < entries; i++)
        if (blob [1 + i * TASKS_BLOB_ENTRY] >= S_NGRADED)
            return -1;
    char name [BROKER_TASKS_NAME_MAX + 1];
    s_clean_name (stored, name);
    if (zhashx_lookup (self->tasks, name))
        return -1;
    s_task_t *task = s_add (self, name);
    if (!task)
        return -2;
    task->attempts = (uint64_t) attempts;
    task->updated = sqlite3_column_int64 (stmt, 2);
    //  Columns of format 2: the recent groups and the operators (NULL in
    //  rows an older broker wrote).
    sqlite3_int64 groups = sqlite3_column_int64 (stmt, 4);
    if (groups > 0 && groups <= TASKS_GROUPS) {
        task->groups = (uint32_t) groups;
        task->zero_groups = (uint32_t) sqlite3_column_int64 (stmt, 5);
    }
    const char *operators = (const char *) sqlite3_column_text (stmt, 6);
    json_t *list = operators? json_loads (operators, 0, NULL): NULL;
    if (json_is_array (list) && !(task->operators = strdup (operators)))
        return -2;
    json_decref (list);
    //  A window smaller than when it was written keeps the newest results.
    size_t skip = entries > self->window? entries - self->window: 0;
    for (size_t i = skip; i < entries; i++) {
        const uint8_t *in = blob + 1 + i * TASKS_BLOB_ENTRY;
        s_result_t result = { s_get_double (in + 1), s_get_double (in + 9), in [0] };
        if (s_task_push (task, self->window, &result))
            return -2;
    }
    if (strcmp (name, stored) || skip)
        return s_mark_dirty (self, task)? -2: 0;
    return 0;
}

//  Oldest first, so the update order survives the restart.
static int
s_load (broker_tasks_t *self, char *err, size_t errlen)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2 (self->db, "SELECT name, attempts, updated, results, groups,"
                            " zero_groups, operators FROM task_stats"
                            " ORDER BY updated, name", -1, &stmt, NULL) != SQLITE_OK) {
        snprintf (err, errlen, "%s: %s", self->where, sqlite3_errmsg (self->db));
        return -1;
    }
    size_t skipped = 0;
    int rc;
    while ((rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        int loaded = s_load_row (self, stmt);
        if (loaded == -2) {
            snprintf (err, errlen, "out of memory");
            break;
        }
        skipped += loaded == -1;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        snprintf (err, errlen, "%s: %s", self->where, sqlite3_errmsg (self->db));
    sqlite3_finalize (stmt);
    if (skipped)
        log_warn ("broker", "task statistics in %s: %zu malformed rows skipped", self->where,
                  skipped);
    return rc == SQLITE_DONE? 0: -1;
}

//  Run SQL without rows; 0 or -1 with the reason in err (when given).
static int
s_exec (broker_tasks_t *self, const char *sql, char *err, size_t errlen)
{
    int rc = sqlite3_exec (self->db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return 0;
    if (err && ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED))
        snprintf (err, errlen, "%s is in use by another connection (the broker's store?"
                  " then use broker_tasks_new_shared)", self->where);
    else
    if (err)
        snprintf (err, errlen, "%s: %s", self->where, sqlite3_errmsg (self->db));
    else
        log_error ("broker", "task statistics in %s: %s: %s", self->where, sql,
                   sqlite3_errmsg (self->db));
    return -1;
}

//  A table an older broker made lacks the groups and operators columns: add them.
static int
s_upgrade (broker_tasks_t *self, char *err, size_t errlen)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2 (self->db, "SELECT 1 FROM pragma_table_info('task_stats')"
                            " WHERE name = 'operators'", -1, &stmt, NULL) != SQLITE_OK) {
        snprintf (err, errlen, "%s: %s", self->where, sqlite3_errmsg (self->db));
        return -1;
    }
    int rc = sqlite3_step (stmt);
    sqlite3_finalize (stmt);
    if (rc == SQLITE_ROW)
        return 0;
    return s_exec (self, "ALTER TABLE task_stats ADD COLUMN groups INTEGER", err, errlen)
        || s_exec (self, "ALTER TABLE task_stats ADD COLUMN zero_groups INTEGER", err, errlen)
        || s_exec (self, "ALTER TABLE task_stats ADD COLUMN operators TEXT", err, errlen);
}

//  What both constructors share; db NULL: memory only.
static broker_tasks_t *
s_new (size_t window, sqlite3 *db, bool own_db, const char *where, char *err, size_t errlen)
{
    if (window < 1 || window > BROKER_TASKS_WINDOW_MAX) {
        snprintf (err, errlen, "task window must be 1 to %d", BROKER_TASKS_WINDOW_MAX);
        if (own_db)
            sqlite3_close (db);
        return NULL;
    }
    broker_tasks_t *self = (broker_tasks_t *) calloc (1, sizeof (broker_tasks_t));
    if (!self) {
        snprintf (err, errlen, "out of memory");
        if (own_db)
            sqlite3_close (db);
        return NULL;
    }
    self->window = window;
    self->max_tasks = BROKER_TASKS_MAX;
    self->db = db;
    self->own_db = own_db;
    self->tasks = zhashx_new ();
    self->lru = zlistx_new ();
    self->dirty = zlistx_new ();
    self->gone = zhashx_new ();
    self->where = strdup (where? where: "memory");
    self->blob = (uint8_t *) malloc (1 + window * TASKS_BLOB_ENTRY);
    if (!self->tasks || !self->lru || !self->dirty || !self->gone || !self->where
    ||  !self->blob) {
        snprintf (err, errlen, "out of memory");
        broker_tasks_destroy (&self);
        return NULL;
    }
    if (!db)
        return self;
    if (s_exec (self,
            "CREATE TABLE IF NOT EXISTS task_stats ("
            " name TEXT PRIMARY KEY,"           //  task name
            " attempts INTEGER NOT NULL,"       //  results ever recorded
            " updated INTEGER NOT NULL,"        //  unix seconds of the last one
            " results BLOB NOT NULL,"           //  the window (broker_tasks.h)
            " groups INTEGER,"                  //  recent groups ended
            " zero_groups INTEGER,"             //  which were zero-variance (bit 0 newest)
            " operators TEXT)",                 //  the reference's operators, JSON
            err, errlen)
    ||  s_upgrade (self, err, errlen)
    ||  s_load (self, err, errlen)) {
        broker_tasks_destroy (&self);
        return NULL;
    }
    if (sqlite3_prepare_v3 (db, "INSERT OR REPLACE INTO task_stats (name, attempts, updated,"
                            " results, groups, zero_groups, operators)"
                            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1,
                            SQLITE_PREPARE_PERSISTENT, &self->upsert, NULL) != SQLITE_OK
    ||  sqlite3_prepare_v3 (db, "DELETE FROM task_stats WHERE name = ?1", -1,
                            SQLITE_PREPARE_PERSISTENT, &self->remove, NULL) != SQLITE_OK) {
        snprintf (err, errlen, "%s: %s", self->where, sqlite3_errmsg (db));
        broker_tasks_destroy (&self);
        return NULL;
    }
    return self;
}

broker_tasks_t *
broker_tasks_new (size_t window, const char *db_path, char *err, size_t errlen)
{
    if (!db_path)
        return s_new (window, NULL, false, NULL, err, errlen);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2 (db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                         | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf (err, errlen, "cannot open %s: %s", db_path,
                  db? sqlite3_errmsg (db): "out of memory");
        sqlite3_close (db);
        return NULL;
    }
    sqlite3_busy_timeout (db, TASKS_BUSY_MS);
    return s_new (window, db, true, db_path, err, errlen);
}

broker_tasks_t *
broker_tasks_new_shared (size_t window, sqlite3 *db, char *err, size_t errlen)
{
    assert (db);
    const char *file = sqlite3_db_filename (db, "main");
    return s_new (window, db, false, file && *file? file: "shared connection", err, errlen);
}

void
broker_tasks_destroy (broker_tasks_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_tasks_t *self = *self_p;
    if (self->upsert)
        broker_tasks_flush (self);
    sqlite3_finalize (self->upsert);
    sqlite3_finalize (self->remove);
    if (self->own_db)
        sqlite3_close (self->db);
    if (self->lru) {
        s_task_t *task = (s_task_t *) zlistx_first (self->lru);
        while (task) {
            s_task_destroy (&task);
            task = (s_task_t *) zlistx_next (self->lru);
        }
    }
    zlistx_destroy (&self->lru);
    zlistx_destroy (&self->dirty);
    zhashx_destroy (&self->tasks);
    zhashx_destroy (&self->gone);
    free (self->blob);
    free (self->where);
    free (self);
    *self_p = NULL;
}

int
broker_tasks_record (broker_tasks_t *self, const char *task_name, const char *status,
                     double reward, double speedup)
{
    char name [BROKER_TASKS_NAME_MAX + 1];
    s_clean_name (task_name, name);
    s_task_t *task = (s_task_t *) zhashx_lookup (self->tasks, name);
    if (!task && !(task = s_add (self, name)))
        return -1;
    int code = s_status_code (status);
    if (code >= 0) {
        //  Non-finite values would poison every mean: they count as absent.
        s_result_t result = {
            isfinite (reward)? reward: NAN, isfinite (speedup)? speedup: NAN, (uint8_t) code
        };
        if (s_task_push (task, self->window, &result))
            return -1;
    }
    task->attempts++;
    task->updated = (int64_t) time (NULL);
    zlistx_move_end (self->lru, task->lru_handle);
    return s_mark_dirty (self, task);
}

int
broker_tasks_record_group (broker_tasks_t *self, const char *task_name, bool zero_variance)
{
    char name [BROKER_TASKS_NAME_MAX + 1];
    s_clean_name (task_name, name);
    s_task_t *task = (s_task_t *) zhashx_lookup (self->tasks, name);
    if (!task)
        return 0;               //  its results made it; dropped since: nothing to say
    task->zero_groups = (task->zero_groups << 1) | (zero_variance? 1: 0);
    if (task->groups < TASKS_GROUPS)
        task->groups++;
    if (task->groups < 32)
        task->zero_groups &= (1u << task->groups) - 1;
    return s_mark_dirty (self, task);
}

//  The operators list of a result document, cleaned: at most
//  TASKS_OPERATORS entries {name, share} with a name and a share in [0, 1];
//  NULL when there is no usable list.
static json_t *
s_operators (json_t *doc)
{
    json_t *list = json_object_get (json_object_get (json_object_get (doc, "profile"), "reference"),
                                    "operators");
    if (!json_is_array (list))
        return NULL;
    json_t *clean = json_array ();
    size_t i;
    json_t *op;
    json_array_foreach (list, i, op) {
        const char *name = json_string_value (json_object_get (op, "name"));
        json_t *share = json_object_get (op, "share");
        if (!name || !*name || !json_is_number (share) || !(json_number_value (share) >= 0)
        ||  json_number_value (share) > 1)
            continue;
        char cut [TASKS_OPERATOR_NAME + 1];
        common_utf8_copy (cut, sizeof cut, name);
        json_array_append_new (clean, json_pack ("{s:s, s:f}", "name", cut, "share",
                                                 json_number_value (share)));
        if (json_array_size (clean) == TASKS_OPERATORS)
            break;
    }
    if (json_array_size (clean) == 0) {
        json_decref (clean);
        return NULL;
    }
    return clean;
}

int
broker_tasks_record_profile (broker_tasks_t *self, const char *task_name, json_t *doc)
{
    json_t *operators = s_operators (doc);
    if (!operators)
        return 0;
    char name [BROKER_TASKS_NAME_MAX + 1];
    s_clean_name (task_name, name);
    s_task_t *task = (s_task_t *) zhashx_lookup (self->tasks, name);
    char *text = task? json_dumps (operators, JSON_COMPACT): NULL;
    json_decref (operators);
    if (!task)
        return 0;
    if (!text)
        return -1;
    free (task->operators);
    task->operators = text;
    return s_mark_dirty (self, task);
}

//  Step a write statement and reset it; 0 or -1 (logged).
static int
s_step (broker_tasks_t *self, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step (stmt);
    sqlite3_reset (stmt);
    sqlite3_clear_bindings (stmt);
    if (rc == SQLITE_DONE)
        return 0;
    log_error ("broker", "task statistics in %s: %s: %s", self->where, what,
               sqlite3_errmsg (self->db));
    return -1;
}

int
broker_tasks_flush (broker_tasks_t *self)
{
    if (!self->db || (zlistx_size (self->dirty) == 0 && zhashx_size (self->gone) == 0))
        return 0;
    //  A savepoint is a transaction of its own, or nests in the owner's.
    if (s_exec (self, "SAVEPOINT broker_tasks", NULL, 0))
        return -1;
    int rc = 0;
    //  Deletes first: a name dropped and then recorded again is written below.
    for (void *item = zhashx_first (self->gone); item && rc == 0; item = zhashx_next (self->gone)) {
        sqlite3_bind_text (self->remove, 1, (const char *) zhashx_cursor (self->gone), -1,
                           SQLITE_STATIC);
        rc = s_step (self, self->remove, "delete");
    }
    s_task_t *task = (s_task_t *) zlistx_first (self->dirty);
    while (task && rc == 0) {
        sqlite3_bind_text (self->upsert, 1, task->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64 (self->upsert, 2, (sqlite3_int64) task->attempts);
        sqlite3_bind_int64 (self->upsert, 3, task->updated);
        sqlite3_bind_blob (self->upsert, 4, self->blob, (int) s_encode (self, task),
                           SQLITE_STATIC);
        sqlite3_bind_int64 (self->upsert, 5, task->groups);
        sqlite3_bind_int64 (self->upsert, 6, task->zero_groups);
        if (task->operators)
            sqlite3_bind_text (self->upsert, 7, task->operators, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null (self->upsert, 7);
        rc = s_step (self, self->upsert, "write");
        task = (s_task_t *) zlistx_next (self->dirty);
    }
    if (rc == 0 && s_exec (self, "RELEASE broker_tasks", NULL, 0) == 0) {
        for (task = (s_task_t *) zlistx_first (self->dirty); task;
             task = (s_task_t *) zlistx_next (self->dirty))
            task->dirty_handle = NULL;
        zlistx_purge (self->dirty);
        zhashx_purge (self->gone);
        return 0;
    }
    //  Undo our part only; what stays dirty is written by the next flush.
    s_exec (self, "ROLLBACK TO broker_tasks", NULL, 0);
    s_exec (self, "RELEASE broker_tasks", NULL, 0);
    if (self->own_db && !sqlite3_get_autocommit (self->db))
        s_exec (self, "ROLLBACK", NULL, 0);
    return -1;
}

json_t *
broker_tasks_get (broker_tasks_t *self, const char *task_name)
{
    char name [BROKER_TASKS_NAME_MAX + 1];
    s_clean_name (task_name, name);
    s_task_t *task = (s_task_t *) zhashx_lookup (self->tasks, name);
    if (!task)
        return NULL;
    s_stats_t stats;
    s_task_stats (task, &stats);
    return s_task_json (task, &stats);
}

static int
s_by_name (const void *a, const void *b)
{
    return strcmp ((*(s_task_t * const *) a)->name, (*(s_task_t * const *) b)->name);
}

json_t *
broker_tasks_list (broker_tasks_t *self, bool band, double lo, double hi, size_t min_attempts)
{
    size_t size = zhashx_size (self->tasks);
    s_task_t **sorted = (s_task_t **) malloc ((size? size: 1) * sizeof (s_task_t *));
    json_t *list = json_array ();
    if (!sorted || !list) {
        free (sorted);
        json_decref (list);
        return NULL;
    }
    size_t n = 0;
    for (s_task_t *task = (s_task_t *) zlistx_first (self->lru); task && n < size;
         task = (s_task_t *) zlistx_next (self->lru))
        sorted [n++] = task;
    qsort (sorted, n, sizeof (s_task_t *), s_by_name);
    for (size_t i = 0; i < n; i++) {
        s_stats_t stats;
        s_task_stats (sorted [i], &stats);
        if (band) {
            double pass_rate = s_pass_rate (&stats);
            //  An empty window has no pass rate: never in a band.
            if (stats.count == 0 || stats.count < min_attempts
            ||  !(pass_rate >= lo && pass_rate <= hi))
                continue;
        }
        if (json_array_append_new (list, s_task_json (sorted [i], &stats))) {
            json_decref (list);
            list = NULL;
            break;
        }
    }
    free (sorted);
    return list;
}

size_t
broker_tasks_size (broker_tasks_t *self)
{
    return zhashx_size (self->tasks);
}
