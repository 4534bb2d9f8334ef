/*  broker_store - the broker's durable job table: one SQLite file in WAL mode.

    One table, prepared statements, one open transaction at a time: the
    first write of a poll wakeup begins it and broker_store_commit ends it.
    Schema version in PRAGMA user_version; a file from a newer kgym is
    refused rather than misread, one from an older kgym is brought up to
    date in place (version 1 lacked the SUBMIT options and the verdict:
    its unfinished rows load with the refresh policy they ran with then).
*/
#include "broker_store.h"
#include "common_log.h"
#include <sqlite3.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

#define STORE_SCHEMA_VERSION 2
#define S_TEXT(x) S_TEXT_ (x)
#define S_TEXT_(x) #x
#define STORE_BUSY_MS 500           //  wait for a lock at open before calling it taken

//  Statements, prepared once.
typedef enum {
    S_BEGIN, S_COMMIT, S_ROLLBACK, S_INSERT, S_REQUEUE, S_FINISH, S_DELETE, S_RESULT,
    S_NSTATEMENTS
} s_stmt_id_t;

static const char *s_sql [S_NSTATEMENTS] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_INSERT] = "INSERT INTO jobs (id, client, ref, tag, backend, body, state, attempts, lost,"
                 " accepted_us, cache, grp, group_size, trajectory)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, 0, ?7, ?8, ?9, ?10, ?11)",
    [S_REQUEUE] = "UPDATE jobs SET attempts = ?2, lost = ?3 WHERE id = ?1",
    [S_FINISH] = "UPDATE jobs SET state = 2, attempts = ?2, lost = ?3, result = ?4, worker = ?5,"
                 " queue_s = ?6, finished_us = ?7, status = ?8, reward = ?9, speedup = ?10,"
                 " body = x'' WHERE id = ?1",
    [S_DELETE] = "DELETE FROM jobs WHERE id = ?1",
    [S_RESULT] = "SELECT result FROM jobs WHERE id = ?1 AND state = 2",
};

struct broker_store_t {
    sqlite3 *db;                        //  the connection
    sqlite3_stmt *stmt [S_NSTATEMENTS]; //  prepared statements
    bool in_txn;                        //  a transaction is open
    char *path;                         //  for logs
};

//  Run a statement that returns no rows; 0 or -1 (logged).
static int
s_step_done (broker_store_t *self, sqlite3_stmt *stmt, const char *what)
{
    int rc = sqlite3_step (stmt);
    sqlite3_reset (stmt);
    sqlite3_clear_bindings (stmt);
    if (rc != SQLITE_DONE) {
        log_error ("broker", "store %s: %s: %s", self->path, what, sqlite3_errmsg (self->db));
        return -1;
    }
    return 0;
}

//  Begin the batch's transaction if none is open.
static int
s_begin (broker_store_t *self)
{
    if (self->in_txn)
        return 0;
    if (s_step_done (self, self->stmt [S_BEGIN], "begin"))
        return -1;
    self->in_txn = true;
    return 0;
}

static int
s_exec (broker_store_t *self, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    int rc = sqlite3_exec (self->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
            snprintf (err, errlen, "%s is in use (another broker?)", self->path);
        else
            snprintf (err, errlen, "%s: %s", self->path, msg? msg: sqlite3_errmsg (self->db));
        sqlite3_free (msg);
        return -1;
    }
    return 0;
}

//  One integer from a query; -1 on error.
static int64_t
s_query_int (broker_store_t *self, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL) == SQLITE_OK
    &&  sqlite3_step (stmt) == SQLITE_ROW)
        value = sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    return value;
}

broker_store_t *
broker_store_new (const char *path, bool full_sync, char *err, size_t errlen)
{
    broker_store_t *self = (broker_store_t *) calloc (1, sizeof (broker_store_t));
    if (!self || !path || !(self->path = strdup (path))) {
        snprintf (err, errlen, "out of memory");
        free (self);
        return NULL;
    }
    if (sqlite3_open_v2 (path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                         | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf (err, errlen, "cannot open %s: %s", path,
                  self->db? sqlite3_errmsg (self->db): "out of memory");
        broker_store_destroy (&self);
        return NULL;
    }
    sqlite3_busy_timeout (self->db, STORE_BUSY_MS);
    //  Exclusive: one broker per file (and WAL needs no shared memory then).
    if (s_exec (self, "PRAGMA locking_mode = EXCLUSIVE", err, errlen)
    ||  s_exec (self, "PRAGMA journal_mode = WAL", err, errlen)
    ||  s_exec (self, full_sync? "PRAGMA synchronous = FULL": "PRAGMA synchronous = NORMAL",
                err, errlen)
    //  Fewer, larger checkpoints (each one syncs the file): 16 MiB of WAL.
    ||  s_exec (self, "PRAGMA wal_autocheckpoint = 4096", err, errlen)
    ||  s_exec (self, "PRAGMA cache_size = -32768", err, errlen)) {
        broker_store_destroy (&self);
        return NULL;
    }
    //  Take the lock now, so a second broker is told at start, not at its first write.
    if (s_exec (self, "BEGIN EXCLUSIVE", err, errlen)) {
        broker_store_destroy (&self);
        return NULL;
    }
    int64_t version = s_query_int (self, "PRAGMA user_version");
    if (version > STORE_SCHEMA_VERSION) {
        snprintf (err, errlen, "%s has schema version %lld; this broker knows %d", path,
                  (long long) version, STORE_SCHEMA_VERSION);
        s_exec (self, "ROLLBACK", err + strlen (err), 0);
        broker_store_destroy (&self);
        return NULL;
    }
    if (s_exec (self,
            "CREATE TABLE IF NOT EXISTS jobs ("
            " id INTEGER PRIMARY KEY,"          //  broker's job id
            " client TEXT NOT NULL,"            //  client key, '' = none
            " ref INTEGER NOT NULL,"            //  client's reference
            " tag TEXT NOT NULL,"               //  header tag
            " backend TEXT NOT NULL,"           //  backend name
            " body BLOB NOT NULL,"              //  the job; x'' once done
            " state INTEGER NOT NULL,"          //  0 unfinished, 2 done
            " attempts INTEGER NOT NULL,"       //  dispatches that ended
            " lost INTEGER NOT NULL,"           //  leases lost with a worker
            " accepted_us INTEGER NOT NULL,"    //  wall clock, us since the epoch
            " finished_us INTEGER,"             //  done: when
            " queue_s REAL,"                    //  done: ACCEPTED to first dispatch
            " worker TEXT,"                     //  done: who graded it
            " result BLOB,"                     //  done: the result
            " cache TEXT NOT NULL DEFAULT 'use',"       //  SUBMIT's cache policy
            " grp TEXT NOT NULL DEFAULT '',"            //  SUBMIT's group
            " group_size INTEGER NOT NULL DEFAULT 0,"   //  SUBMIT's group_size
            " trajectory TEXT NOT NULL DEFAULT '',"     //  SUBMIT's trajectory
            " status TEXT NOT NULL DEFAULT '',"         //  done: the result's status
            " reward REAL,"                     //  done: its reward (NULL: null)
            " speedup REAL)", err, errlen)
    ||  (version == 1 && s_exec (self,
            //  Rows of version 1 ran with the refresh policy after a restart.
            "ALTER TABLE jobs ADD COLUMN cache TEXT NOT NULL DEFAULT 'refresh';"
            "ALTER TABLE jobs ADD COLUMN grp TEXT NOT NULL DEFAULT '';"
            "ALTER TABLE jobs ADD COLUMN group_size INTEGER NOT NULL DEFAULT 0;"
            "ALTER TABLE jobs ADD COLUMN trajectory TEXT NOT NULL DEFAULT '';"
            "ALTER TABLE jobs ADD COLUMN status TEXT NOT NULL DEFAULT '';"
            "ALTER TABLE jobs ADD COLUMN reward REAL;"
            "ALTER TABLE jobs ADD COLUMN speedup REAL", err, errlen))
    ||  s_exec (self, "PRAGMA user_version = " S_TEXT (STORE_SCHEMA_VERSION) "; COMMIT", err, errlen)) {
        broker_store_destroy (&self);
        return NULL;
    }
    for (int i = 0; i < S_NSTATEMENTS; i++)
        if (sqlite3_prepare_v3 (self->db, s_sql [i], -1, SQLITE_PREPARE_PERSISTENT,
                                &self->stmt [i], NULL) != SQLITE_OK) {
            snprintf (err, errlen, "%s: %s", path, sqlite3_errmsg (self->db));
            broker_store_destroy (&self);
            return NULL;
        }
    return self;
}

void
broker_store_destroy (broker_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_store_t *self = *self_p;
    if (self->db && self->stmt [S_COMMIT])
        broker_store_commit (self);
    for (int i = 0; i < S_NSTATEMENTS; i++)
        sqlite3_finalize (self->stmt [i]);
    if (self->db)
        sqlite3_close (self->db);
    free (self->path);
    free (self);
    *self_p = NULL;
}

static const char *
s_text (sqlite3_stmt *stmt, int col)
{
    const char *text = (const char *) sqlite3_column_text (stmt, col);
    return text? text: "";
}

//  A REAL column; NULL (and anything not a number) is NAN.
static double
s_real_or_nan (sqlite3_stmt *stmt, int col)
{
    int type = sqlite3_column_type (stmt, col);
    return type == SQLITE_FLOAT || type == SQLITE_INTEGER? sqlite3_column_double (stmt, col): NAN;
}

//  Bind a double, NAN as NULL.
static void
s_bind_real (sqlite3_stmt *stmt, int col, double value)
{
    if (isnan (value))
        sqlite3_bind_null (stmt, col);
    else
        sqlite3_bind_double (stmt, col, value);
}

int
broker_store_load (broker_store_t *self, int64_t keep_after_us, size_t keep_results,
                   int (*fn) (const broker_store_row_t *row, void *arg), void *arg)
{
    if (broker_store_commit (self) || s_begin (self))
        return -1;
    //  Retention first: what expired while the broker was down goes now.
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db,
        "DELETE FROM jobs WHERE state = 2 AND (finished_us < ?1 OR id IN"
        " (SELECT id FROM jobs WHERE state = 2 ORDER BY finished_us DESC, id DESC"
        "  LIMIT -1 OFFSET ?2))", -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64 (stmt, 1, keep_after_us);
        sqlite3_bind_int64 (stmt, 2, (sqlite3_int64) keep_results);
        rc = sqlite3_step (stmt) == SQLITE_DONE? SQLITE_OK: SQLITE_ERROR;
    }
    sqlite3_finalize (stmt);
    if (rc != SQLITE_OK || broker_store_commit (self)) {
        log_error ("broker", "store %s: retention: %s", self->path, sqlite3_errmsg (self->db));
        return -1;
    }
    rc = sqlite3_prepare_v2 (self->db,
        "SELECT id, client, ref, tag, backend, body, state, attempts, lost, accepted_us,"
        " finished_us, queue_s, worker, cache, grp, group_size, trajectory, status, reward,"
        " speedup FROM jobs ORDER BY id", -1, &stmt, NULL);
    if (rc != SQLITE_OK) {
        log_error ("broker", "store %s: load: %s", self->path, sqlite3_errmsg (self->db));
        return -1;
    }
    int result = 0;
    while ((rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        broker_store_row_t row;
        memset (&row, 0, sizeof (row));
        row.id = (uint64_t) sqlite3_column_int64 (stmt, 0);
        row.client = s_text (stmt, 1);
        row.ref = (uint64_t) sqlite3_column_int64 (stmt, 2);
        row.tag = s_text (stmt, 3);
        row.backend = s_text (stmt, 4);
        row.body = sqlite3_column_blob (stmt, 5);
        row.body_size = (size_t) sqlite3_column_bytes (stmt, 5);
        row.done = sqlite3_column_int (stmt, 6) == 2;
        row.attempts = (uint32_t) sqlite3_column_int64 (stmt, 7);
        row.lost = (uint32_t) sqlite3_column_int64 (stmt, 8);
        row.accepted_us = sqlite3_column_int64 (stmt, 9);
        row.finished_us = sqlite3_column_int64 (stmt, 10);
        row.queue_s = sqlite3_column_double (stmt, 11);
        row.worker = s_text (stmt, 12);
        row.cache = s_text (stmt, 13);
        row.group = s_text (stmt, 14);
        int64_t size = sqlite3_column_int64 (stmt, 15);
        row.group_size = size > 0 && size <= UINT32_MAX? (uint32_t) size: 0;
        row.trajectory = s_text (stmt, 16);
        row.status = s_text (stmt, 17);
        row.reward = s_real_or_nan (stmt, 18);
        row.speedup = s_real_or_nan (stmt, 19);
        if (fn (&row, arg)) {
            result = -1;
            break;
        }
    }
    if (result == 0 && rc != SQLITE_DONE) {
        log_error ("broker", "store %s: load: %s", self->path, sqlite3_errmsg (self->db));
        result = -1;
    }
    sqlite3_finalize (stmt);
    return result;
}

uint64_t
broker_store_last_id (broker_store_t *self)
{
    int64_t last = s_query_int (self, "SELECT coalesce (max (id), 0) FROM jobs");
    return last > 0? (uint64_t) last: 0;
}

int
broker_store_insert (broker_store_t *self, const broker_store_row_t *row)
{
    if (s_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmt [S_INSERT];
    sqlite3_bind_int64 (stmt, 1, (sqlite3_int64) row->id);
    sqlite3_bind_text (stmt, 2, row->client? row->client: "", -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 3, (sqlite3_int64) row->ref);
    sqlite3_bind_text (stmt, 4, row->tag? row->tag: "", -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 5, row->backend, -1, SQLITE_STATIC);
    sqlite3_bind_blob64 (stmt, 6, row->body? row->body: "", row->body_size, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 7, row->accepted_us);
    sqlite3_bind_text (stmt, 8, row->cache? row->cache: "use", -1, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 9, row->group? row->group: "", -1, SQLITE_STATIC);
    sqlite3_bind_int64 (stmt, 10, row->group_size);
    sqlite3_bind_text (stmt, 11, row->trajectory? row->trajectory: "", -1, SQLITE_STATIC);
    return s_step_done (self, stmt, "insert");
}

int
broker_store_requeue (broker_store_t *self, uint64_t id, uint32_t attempts, uint32_t lost)
{
    if (s_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmt [S_REQUEUE];
    sqlite3_bind_int64 (stmt, 1, (sqlite3_int64) id);
    sqlite3_bind_int64 (stmt, 2, attempts);
    sqlite3_bind_int64 (stmt, 3, lost);
    return s_step_done (self, stmt, "requeue");
}

int
broker_store_finish (broker_store_t *self, uint64_t id, uint32_t attempts, uint32_t lost,
                     const void *result, size_t size, const char *worker, double queue_s,
                     int64_t finished_us, const char *status, double reward, double speedup)
{
    if (s_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmt [S_FINISH];
    sqlite3_bind_int64 (stmt, 1, (sqlite3_int64) id);
    sqlite3_bind_int64 (stmt, 2, attempts);
    sqlite3_bind_int64 (stmt, 3, lost);
    sqlite3_bind_blob64 (stmt, 4, result? result: "", result? size: 0, SQLITE_STATIC);
    sqlite3_bind_text (stmt, 5, worker? worker: "", -1, SQLITE_STATIC);
    sqlite3_bind_double (stmt, 6, queue_s);
    sqlite3_bind_int64 (stmt, 7, finished_us);
    sqlite3_bind_text (stmt, 8, status? status: "", -1, SQLITE_STATIC);
    s_bind_real (stmt, 9, reward);
    s_bind_real (stmt, 10, speedup);
    return s_step_done (self, stmt, "finish");
}

int
broker_store_delete (broker_store_t *self, uint64_t id)
{
    if (s_begin (self))
        return -1;
    sqlite3_stmt *stmt = self->stmt [S_DELETE];
    sqlite3_bind_int64 (stmt, 1, (sqlite3_int64) id);
    return s_step_done (self, stmt, "delete");
}

zframe_t *
broker_store_result (broker_store_t *self, uint64_t id)
{
    sqlite3_stmt *stmt = self->stmt [S_RESULT];
    sqlite3_bind_int64 (stmt, 1, (sqlite3_int64) id);
    zframe_t *frame = NULL;
    int rc = sqlite3_step (stmt);
    if (rc == SQLITE_ROW) {
        const void *data = sqlite3_column_blob (stmt, 0);
        int size = sqlite3_column_bytes (stmt, 0);
        if (data && size > 0)
            frame = zframe_new (data, (size_t) size);
    }
    else
    if (rc != SQLITE_DONE)
        log_error ("broker", "store %s: result of job %llu: %s", self->path,
                   (unsigned long long) id, sqlite3_errmsg (self->db));
    sqlite3_reset (stmt);
    sqlite3_clear_bindings (stmt);
    return frame;
}

struct sqlite3 *
broker_store_db (broker_store_t *self)
{
    return self->db;
}

bool
broker_store_pending (broker_store_t *self)
{
    return self->in_txn;
}

int
broker_store_commit (broker_store_t *self)
{
    if (!self->in_txn)
        return 0;
    self->in_txn = false;
    if (s_step_done (self, self->stmt [S_COMMIT], "commit") == 0)
        return 0;
    //  A failed COMMIT may leave the transaction open: end it.
    if (!sqlite3_get_autocommit (self->db))
        s_step_done (self, self->stmt [S_ROLLBACK], "rollback");
    return -1;
}
