/*  worker_cache - compiled modules in SQLite, keyed by content.

    Schema (PRAGMA user_version 1): modules(key BLOB PRIMARY KEY, size,
    last_used, material, log, blob), size and last_used ahead of the big
    columns so that sums and LRU scans never read the blobs. WAL with
    synchronous=NORMAL: a hit costs a read and a tiny autocommit UPDATE of
    last_used (skipped when another writer holds the lock: LRU is a hint).
    Writes are short BEGIN IMMEDIATE transactions that also evict the least
    recently used entries past max_bytes. Any SQLite error is a miss and is
    logged once per handle. The file is checked before every use and
    reopened (recreated) when it was deleted or replaced. A mutex makes one
    handle safe to share between threads.
*/
#include "worker_cache.h"
#include "common_log.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_FORMAT        1           //  PRAGMA user_version of this schema
#define S_BUSY_MS       5000

struct worker_cache_t {
    char *path;                     //  the database file
    uint64_t max_bytes;             //  bound on the sum of entry sizes
    sqlite3 *db;                    //  NULL while the file could not be opened
    sqlite3_stmt *get;              //  prepared statements
    sqlite3_stmt *touch;
    sqlite3_stmt *put;
    sqlite3_stmt *evict;
    dev_t dev;                      //  the file we opened, to notice it deleted
    ino_t ino;
    uint64_t hits;                  //  this handle's counters
    uint64_t misses;
    bool logged;                    //  an error was logged already
    pthread_mutex_t lock;           //  one operation at a time
};

static const char *s_schema =
    "CREATE TABLE IF NOT EXISTS modules ("
    "  key BLOB PRIMARY KEY,"
    "  size INTEGER NOT NULL,"
    "  last_used INTEGER NOT NULL,"
    "  material TEXT NOT NULL,"
    "  log TEXT,"
    "  blob BLOB NOT NULL);"
    "CREATE INDEX IF NOT EXISTS modules_lru ON modules (last_used);";

static int64_t
s_now_us (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

//  Log the first failure of a handle; later ones only at debug level.
static void
s_error (worker_cache_t *self, const char *what)
{
    const char *msg = self->db? sqlite3_errmsg (self->db): "not open";
    if (!self->logged)
        log_warn ("cache", "%s: %s: %s (treated as a miss)", self->path, what, msg);
    else
        log_debug ("cache", "%s: %s: %s", self->path, what, msg);
    self->logged = true;
}

char *
worker_cache_default_path (const char *explicit_path)
{
    char buf [PATH_MAX];
    const char *env;
    if (explicit_path && *explicit_path)
        return strdup (explicit_path);
    if ((env = getenv ("KGYM_CACHE_DIR")) && *env)
        snprintf (buf, sizeof buf, "%s/modules.sqlite", env);
    else
    if ((env = getenv ("XDG_CACHE_HOME")) && *env)
        snprintf (buf, sizeof buf, "%s/kgym/modules.sqlite", env);
    else
    if ((env = getenv ("HOME")) && *env)
        snprintf (buf, sizeof buf, "%s/.cache/kgym/modules.sqlite", env);
    else
        snprintf (buf, sizeof buf, "/tmp/kgym-cache-%u/modules.sqlite", (unsigned) getuid ());
    return strdup (buf);
}

//  mkdir -p of path's directory; new directories are 0700.
static int
s_make_dirs (const char *path)
{
    char dir [PATH_MAX];
    if (strlen (path) >= sizeof dir)
        return -1;
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *p = dir + 1; ; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir (dir, 0700) != 0 && errno != EEXIST)
                return -1;
            *p = saved;
            if (saved == 0)
                break;
        }
    }
    return 0;
}

static void
s_close (worker_cache_t *self)
{
    sqlite3_finalize (self->get);
    sqlite3_finalize (self->touch);
    sqlite3_finalize (self->put);
    sqlite3_finalize (self->evict);
    self->get = self->touch = self->put = self->evict = NULL;
    if (self->db)
        sqlite3_close (self->db);
    self->db = NULL;
}

static int
s_exec (worker_cache_t *self, const char *sql)
{
    return sqlite3_exec (self->db, sql, NULL, NULL, NULL);
}

static int
s_user_version (worker_cache_t *self, int *version)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, "PRAGMA user_version", -1, &stmt, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        *version = sqlite3_column_int (stmt, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize (stmt);
    return rc;
}

//  The journal mode now ("wal", "delete", ...) into mode.
static int
s_journal_mode (worker_cache_t *self, char *mode, size_t len)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2 (self->db, "PRAGMA journal_mode", -1, &stmt, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step (stmt)) == SQLITE_ROW) {
        const char *text = (const char *) sqlite3_column_text (stmt, 0);
        snprintf (mode, len, "%s", text? text: "");
        rc = SQLITE_OK;
    }
    sqlite3_finalize (stmt);
    return rc;
}

//  Schema at this format (an older or newer one is dropped: it is a cache).
static int
s_setup_once (worker_cache_t *self)
{
    int rc, version = -1;
    char mode [16] = "";
    //  WAL is stored in the file: switch only once (the switch needs an
    //  exclusive lock and may fail busy without waiting).
    if ((rc = s_journal_mode (self, mode, sizeof mode)) != SQLITE_OK)
        return rc;
    if (strcmp (mode, "wal") != 0 && (rc = s_exec (self, "PRAGMA journal_mode=WAL")) != SQLITE_OK)
        return rc;
    if ((rc = s_exec (self, "PRAGMA synchronous=NORMAL")) != SQLITE_OK
    ||  (rc = s_user_version (self, &version)) != SQLITE_OK)
        return rc;
    if (version == S_FORMAT)
        return SQLITE_OK;
    if ((rc = s_exec (self, "BEGIN IMMEDIATE")) != SQLITE_OK)
        return rc;
    //  Another process may have done it meanwhile.
    if ((rc = s_user_version (self, &version)) == SQLITE_OK && version != S_FORMAT) {
        char sql [64];
        snprintf (sql, sizeof sql, "PRAGMA user_version=%d", S_FORMAT);
        if ((rc = s_exec (self, "DROP TABLE IF EXISTS modules")) == SQLITE_OK
        &&  (rc = s_exec (self, s_schema)) == SQLITE_OK)
            rc = s_exec (self, sql);
    }
    if (rc == SQLITE_OK)
        rc = s_exec (self, "COMMIT");
    else
        s_exec (self, "ROLLBACK");
    return rc;
}

//  Setting up races other processes opening a new file: retry while busy.
static int
s_setup (worker_cache_t *self)
{
    int rc = SQLITE_BUSY;
    long wait_us = 1000;
    for (long waited = 0; waited < S_BUSY_MS * 1000L; waited += wait_us) {
        rc = s_setup_once (self);
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            return rc;
        struct timespec ts = { 0, wait_us * 1000 };
        nanosleep (&ts, NULL);
        if (wait_us < 100000)
            wait_us *= 2;
    }
    return rc;
}

static int
s_prepare (worker_cache_t *self)
{
    int rc;
    if ((rc = sqlite3_prepare_v2 (self->db,
            "SELECT material, blob, log FROM modules WHERE key = ?1", -1, &self->get, NULL))
    ||  (rc = sqlite3_prepare_v2 (self->db,
            "UPDATE modules SET last_used = ?2 WHERE key = ?1", -1, &self->touch, NULL))
    ||  (rc = sqlite3_prepare_v2 (self->db,
            "INSERT OR REPLACE INTO modules (key, size, last_used, material, log, blob)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &self->put, NULL))
    //  Keep the most recent entries that fit; everything older goes.
    ||  (rc = sqlite3_prepare_v2 (self->db,
            "DELETE FROM modules WHERE key IN (SELECT key FROM (SELECT key, SUM (size) OVER"
            " (ORDER BY last_used DESC, rowid DESC) AS running FROM modules) WHERE running > ?1)",
            -1, &self->evict, NULL)))
        return rc;
    return SQLITE_OK;
}

//  Open (creating) the file; on a damaged file, delete it and start over.
static int
s_open (worker_cache_t *self)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (s_make_dirs (self->path) != 0)
            return -1;
        int fd = open (self->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return -1;
        struct stat st;
        int src = fstat (fd, &st);
        close (fd);
        if (src != 0 || !S_ISREG (st.st_mode))
            return -1;
        self->dev = st.st_dev;
        self->ino = st.st_ino;
        int rc = sqlite3_open_v2 (self->path, &self->db,
                                  SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
                                | SQLITE_OPEN_NOFOLLOW, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_busy_timeout (self->db, S_BUSY_MS);
            rc = s_setup (self);
        }
        if (rc == SQLITE_OK && (rc = s_prepare (self)) == SQLITE_OK)
            return 0;
        s_error (self, "open");
        s_close (self);
        if (rc != SQLITE_NOTADB && rc != SQLITE_CORRUPT)
            return -1;
        char side [PATH_MAX + 8];
        unlink (self->path);
        snprintf (side, sizeof side, "%s-wal", self->path);
        unlink (side);
        snprintf (side, sizeof side, "%s-shm", self->path);
        unlink (side);
    }
    return -1;
}

//  Reopen when the file was deleted or replaced since we opened it.
static void
s_check_file (worker_cache_t *self)
{
    struct stat st;
    if (self->db && stat (self->path, &st) == 0 && st.st_dev == self->dev && st.st_ino == self->ino)
        return;
    s_close (self);
    s_open (self);
}

worker_cache_t *
worker_cache_new (const char *path, uint64_t max_bytes, char *err, size_t errlen)
{
    if (!path || !*path) {
        snprintf (err, errlen, "no cache path");
        return NULL;
    }
    worker_cache_t *self = calloc (1, sizeof *self);
    if (!self || !(self->path = strdup (path))) {
        free (self);
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->max_bytes = max_bytes? max_bytes: WORKER_CACHE_DEFAULT_MAX;
    pthread_mutex_init (&self->lock, NULL);
    if (s_open (self) != 0) {
        snprintf (err, errlen, "cannot open cache %s: %s", path,
                  errno? strerror (errno): "SQLite error");
        worker_cache_destroy (&self);
        return NULL;
    }
    return self;
}

void
worker_cache_destroy (worker_cache_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    worker_cache_t *self = *self_p;
    s_close (self);
    pthread_mutex_destroy (&self->lock);
    free (self->path);
    free (self);
    *self_p = NULL;
}

int
worker_cache_get (worker_cache_t *self, const uint8_t key[COMMON_HASH_BYTES],
                  const char *key_material, uint8_t **blob, size_t *size, char **log)
{
    *blob = NULL;
    *size = 0;
    if (log)
        *log = NULL;
    pthread_mutex_lock (&self->lock);
    s_check_file (self);
    int result = 1;
    if (!self->db)
        goto done;
    sqlite3_stmt *get = self->get;
    sqlite3_bind_blob (get, 1, key, COMMON_HASH_BYTES, SQLITE_STATIC);
    int rc = sqlite3_step (get);
    if (rc == SQLITE_ROW) {
        const void *material = sqlite3_column_blob (get, 0);
        size_t mlen = (size_t) sqlite3_column_bytes (get, 0);
        size_t want = strlen (key_material);
        const void *data = sqlite3_column_blob (get, 1);
        size_t dlen = (size_t) sqlite3_column_bytes (get, 1);
        const char *text = (const char *) sqlite3_column_text (get, 2);
        //  Same hash but different inputs: a collision or a stale format.
        if (mlen == want && (want == 0 || (material && memcmp (material, key_material, want) == 0))) {
            uint8_t *copy = malloc (dlen? dlen: 1);
            char *lcopy = text && log? strdup (text): NULL;
            if (copy && (!text || !log || lcopy)) {
                if (dlen)
                    memcpy (copy, data, dlen);
                *blob = copy;
                *size = dlen;
                if (log)
                    *log = lcopy;
                result = 0;
            }
            else {
                free (copy);
                free (lcopy);
            }
        }
    }
    else
    if (rc != SQLITE_DONE)
        s_error (self, "get");
    sqlite3_reset (get);
    sqlite3_clear_bindings (get);
    if (result == 0) {
        //  LRU bookkeeping must not wait behind another writer.
        sqlite3_busy_timeout (self->db, 0);
        sqlite3_bind_blob (self->touch, 1, key, COMMON_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int64 (self->touch, 2, s_now_us ());
        rc = sqlite3_step (self->touch);
        if (rc != SQLITE_DONE && rc != SQLITE_BUSY)
            s_error (self, "touch");
        sqlite3_reset (self->touch);
        sqlite3_clear_bindings (self->touch);
        sqlite3_busy_timeout (self->db, S_BUSY_MS);
    }
done:
    if (result == 0)
        self->hits++;
    else
        self->misses++;
    pthread_mutex_unlock (&self->lock);
    return result;
}

int
worker_cache_put (worker_cache_t *self, const uint8_t key[COMMON_HASH_BYTES],
                  const char *key_material, const uint8_t *blob, size_t size, const char *log)
{
    size_t mlen = strlen (key_material);
    size_t llen = log? strlen (log): 0;
    uint64_t total = (uint64_t) size + mlen + llen;
    if (total > self->max_bytes || size > INT_MAX || mlen > INT_MAX || llen > INT_MAX)
        return -1;
    pthread_mutex_lock (&self->lock);
    s_check_file (self);
    int result = -1;
    if (!self->db)
        goto done;
    if (s_exec (self, "BEGIN IMMEDIATE") != SQLITE_OK) {
        s_error (self, "begin");
        goto done;
    }
    sqlite3_stmt *put = self->put;
    sqlite3_bind_blob (put, 1, key, COMMON_HASH_BYTES, SQLITE_STATIC);
    sqlite3_bind_int64 (put, 2, (sqlite3_int64) total);
    sqlite3_bind_int64 (put, 3, s_now_us ());
    sqlite3_bind_text (put, 4, key_material, (int) mlen, SQLITE_STATIC);
    if (log)
        sqlite3_bind_text (put, 5, log, (int) llen, SQLITE_STATIC);
    else
        sqlite3_bind_null (put, 5);
    sqlite3_bind_blob (put, 6, size? (const void *) blob: "", (int) size, SQLITE_STATIC);
    int rc = sqlite3_step (put);
    sqlite3_reset (put);
    sqlite3_clear_bindings (put);
    if (rc == SQLITE_DONE) {
        sqlite3_bind_int64 (self->evict, 1, (sqlite3_int64) self->max_bytes);
        rc = sqlite3_step (self->evict);
        sqlite3_reset (self->evict);
        sqlite3_clear_bindings (self->evict);
    }
    if (rc == SQLITE_DONE && s_exec (self, "COMMIT") == SQLITE_OK)
        result = 0;
    else {
        s_error (self, "put");
        s_exec (self, "ROLLBACK");
    }
done:
    pthread_mutex_unlock (&self->lock);
    return result;
}

int
worker_cache_stats (worker_cache_t *self, uint64_t *entries, uint64_t *bytes,
                    uint64_t *hits, uint64_t *misses)
{
    pthread_mutex_lock (&self->lock);
    s_check_file (self);
    int result = -1;
    if (entries)
        *entries = 0;
    if (bytes)
        *bytes = 0;
    if (hits)
        *hits = self->hits;
    if (misses)
        *misses = self->misses;
    sqlite3_stmt *stmt = NULL;
    if (self->db && sqlite3_prepare_v2 (self->db,
            "SELECT COUNT (*), COALESCE (SUM (size), 0) FROM modules", -1, &stmt, NULL) == SQLITE_OK
    &&  sqlite3_step (stmt) == SQLITE_ROW) {
        if (entries)
            *entries = (uint64_t) sqlite3_column_int64 (stmt, 0);
        if (bytes)
            *bytes = (uint64_t) sqlite3_column_int64 (stmt, 1);
        result = 0;
    }
    else
        s_error (self, "stats");
    sqlite3_finalize (stmt);
    pthread_mutex_unlock (&self->lock);
    return result;
}

int
worker_cache_clear (worker_cache_t *self)
{
    pthread_mutex_lock (&self->lock);
    s_check_file (self);
    int result = -1;
    if (self->db && s_exec (self, "DELETE FROM modules") == SQLITE_OK)
        result = 0;
    else
        s_error (self, "clear");
    pthread_mutex_unlock (&self->lock);
    return result;
}

const char *
worker_cache_path (worker_cache_t *self)
{
    return self->path;
}
