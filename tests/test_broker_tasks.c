/*  test_broker_tasks - rolling per-task statistics: rates over a window
    checked against hand-computed values, the ring dropping its oldest,
    invalid/internal_error counting in attempts only, the pass-rate band,
    rows that reload identically (and in the documented format), flushes
    that write only what changed, the bound on tasks, names, and the
    broker's exclusively locked job file (refused to a second connection,
    shared through broker_tasks_new_shared); for curriculum sampling, the
    reward spread, the task's recent GRPO groups (zero-variance ones
    counted) and the latest reference operators of its results, kept
    across a restart and added to a table an older broker wrote.  */
#include "testutil.h"
#include "broker_tasks.h"
#include "broker_store.h"
#include "common_log.h"
#include <sqlite3.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char s_dir [64];
static char s_path [128];

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    snprintf (s_dir, sizeof (s_dir), "/tmp/kgym-test-tasks-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof (s_path), "%s/jobs.sqlite", s_dir);
}

static void
s_teardown (void)
{
    char command [160];
    snprintf (command, sizeof (command), "rm -rf '%s'", s_dir);
    if (system (command) != 0)
        fprintf (stderr, "cannot remove %s\n", s_dir);
}

static broker_tasks_t *
s_new (size_t window, const char *path)
{
    char err [256] = "";
    broker_tasks_t *tasks = broker_tasks_new (window, path, err, sizeof (err));
    ck_assert_msg (tasks != NULL, "broker_tasks_new (%zu, %s): %s", window,
                   path? path: "NULL", err);
    return tasks;
}

static void
s_record (broker_tasks_t *tasks, const char *task, const char *status, double reward,
          double speedup)
{
    ck_assert_int_eq (broker_tasks_record (tasks, task, status, reward, speedup), 0);
}

//  A number field, NAN when null; fails when it is neither.
static double
s_num (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    ck_assert_msg (value != NULL, "no '%s' in the statistics", key);
    if (json_is_null (value))
        return NAN;
    ck_assert_msg (json_is_number (value), "'%s' is not a number", key);
    return json_number_value (value);
}

static long long
s_int (json_t *object, const char *key)
{
    json_t *value = json_object_get (object, key);
    ck_assert_msg (json_is_integer (value), "'%s' is not an integer", key);
    return json_integer_value (value);
}

static void
s_assert_near (json_t *object, const char *key, double expected)
{
    double got = s_num (object, key);
    ck_assert_msg (fabs (got - expected) < 1e-12, "%s: expected %.15g, got %.15g", key,
                   expected, got);
}

static void
s_assert_null (json_t *object, const char *key)
{
    ck_assert_msg (json_is_null (json_object_get (object, key)), "%s: expected null", key);
}

//  The statuses object as "ok compile_error incorrect runtime_error timeout".
static void
s_assert_statuses (json_t *stats, const char *expected)
{
    json_t *statuses = json_object_get (stats, "statuses");
    char got [128];
    snprintf (got, sizeof (got), "%lld %lld %lld %lld %lld",
              s_int (statuses, "ok"), s_int (statuses, "compile_error"),
              s_int (statuses, "incorrect"), s_int (statuses, "runtime_error"),
              s_int (statuses, "timeout"));
    ck_assert_msg (strcmp (got, expected) == 0, "statuses: expected %s, got %s", expected, got);
    ck_assert_uint_eq (json_object_size (statuses), 5);
}

//  The task names of a list, as "a,b,c".
static char *
s_names (json_t *list)
{
    static char names [4096];
    names [0] = 0;
    size_t i;
    json_t *item;
    json_array_foreach (list, i, item) {
        size_t used = strlen (names);
        snprintf (names + used, sizeof (names) - used, "%s%s", i? ",": "",
                  json_string_value (json_object_get (item, "task")));
    }
    return names;
}

START_TEST (test_rates_over_a_window)
{
    broker_tasks_t *tasks = s_new (10, NULL);
    int64_t before = (int64_t) time (NULL);
    s_record (tasks, "add", "ok", 2.0, 2.0);
    s_record (tasks, "add", "ok", 1.0, 1.0);
    s_record (tasks, "add", "incorrect", -0.5, NAN);
    s_record (tasks, "add", "compile_error", -1.0, NAN);
    s_record (tasks, "add", "timeout", -0.5, NAN);
    s_record (tasks, "add", "runtime_error", NAN, NAN);      //  graded, no reward
    s_record (tasks, "other", "ok", 5.0, INFINITY);         //  not finite: absent
    int64_t after = (int64_t) time (NULL);

    json_t *stats = broker_tasks_get (tasks, "add");
    ck_assert_ptr_nonnull (stats);
    ck_assert_str_eq (json_string_value (json_object_get (stats, "task")), "add");
    ck_assert_int_eq (s_int (stats, "attempts"), 6);
    ck_assert_int_eq (s_int (stats, "window"), 6);
    s_assert_near (stats, "compile_rate", 5.0 / 6.0);
    s_assert_near (stats, "pass_rate", 2.0 / 6.0);
    s_assert_near (stats, "mean_speedup", 1.5);
    //  Rewards 2, 1, -0.5, -1, -0.5: mean 0.2; deviations 1.8 0.8 -0.7 -1.2 -0.7,
    //  squares 3.24 + 0.64 + 0.49 + 1.44 + 0.49 = 6.3, / 5 = 1.26.
    s_assert_near (stats, "reward_mean", 0.2);
    s_assert_near (stats, "reward_var", 1.26);
    s_assert_statuses (stats, "2 1 1 1 1");
    ck_assert_int_ge (s_int (stats, "updated"), before);
    ck_assert_int_le (s_int (stats, "updated"), after);
    ck_assert_uint_eq (json_object_size (stats), 15);
    json_decref (stats);

    stats = broker_tasks_get (tasks, "other");
    s_assert_null (stats, "mean_speedup");
    s_assert_near (stats, "reward_mean", 5.0);
    s_assert_near (stats, "reward_var", 0.0);
    json_decref (stats);

    ck_assert_ptr_null (broker_tasks_get (tasks, "unknown"));
    ck_assert_uint_eq (broker_tasks_size (tasks), 2);
    broker_tasks_destroy (&tasks);
    broker_tasks_destroy (&tasks);
    ck_assert_ptr_null (tasks);
}
END_TEST

START_TEST (test_ring_wraps_and_drops_the_oldest)
{
    broker_tasks_t *tasks = s_new (3, NULL);
    s_record (tasks, "t", "ok", 1.0, 1.0);
    s_record (tasks, "t", "ok", 2.0, 2.0);
    s_record (tasks, "t", "incorrect", -0.5, NAN);
    s_record (tasks, "t", "compile_error", -1.0, NAN);
    s_record (tasks, "t", "timeout", -0.5, NAN);
    //  Window: incorrect, compile_error, timeout; both oks are gone.
    json_t *stats = broker_tasks_get (tasks, "t");
    ck_assert_int_eq (s_int (stats, "attempts"), 5);
    ck_assert_int_eq (s_int (stats, "window"), 3);
    s_assert_near (stats, "pass_rate", 0.0);
    s_assert_near (stats, "compile_rate", 2.0 / 3.0);
    s_assert_null (stats, "mean_speedup");
    s_assert_near (stats, "reward_mean", -2.0 / 3.0);
    s_assert_statuses (stats, "0 1 1 0 1");
    json_decref (stats);

    //  A bigger window grows its ring on the way (4, then 5) and then wraps:
    //  rewards 1..12 leave 8..12, mean 10, variance (4+1+0+1+4)/5 = 2.
    broker_tasks_t *big = s_new (5, NULL);
    for (int i = 1; i <= 12; i++)
        s_record (big, "t", i % 2? "incorrect": "ok", (double) i, (double) i);
    stats = broker_tasks_get (big, "t");
    ck_assert_int_eq (s_int (stats, "attempts"), 12);
    ck_assert_int_eq (s_int (stats, "window"), 5);
    s_assert_near (stats, "reward_mean", 10.0);
    s_assert_near (stats, "reward_var", 2.0);
    s_assert_near (stats, "mean_speedup", 10.0);
    s_assert_near (stats, "pass_rate", 3.0 / 5.0);             //  8, 10, 12
    s_assert_statuses (stats, "3 0 2 0 0");
    json_decref (stats);
    broker_tasks_destroy (&big);
    broker_tasks_destroy (&tasks);
}
END_TEST

START_TEST (test_invalid_and_internal_error_count_only_in_attempts)
{
    broker_tasks_t *tasks = s_new (4, NULL);
    s_record (tasks, "t", "invalid", NAN, NAN);
    s_record (tasks, "t", "internal_error", NAN, NAN);
    s_record (tasks, "t", "no_such_status", 1.0, 1.0);
    s_record (tasks, "t", NULL, 1.0, 1.0);
    json_t *stats = broker_tasks_get (tasks, "t");
    ck_assert_int_eq (s_int (stats, "attempts"), 4);
    ck_assert_int_eq (s_int (stats, "window"), 0);
    const char *rates [] = {
        "compile_rate", "pass_rate", "mean_speedup", "reward_mean", "reward_var"
    };
    for (size_t i = 0; i < sizeof (rates) / sizeof (rates [0]); i++)
        s_assert_null (stats, rates [i]);
    s_assert_statuses (stats, "0 0 0 0 0");
    json_decref (stats);

    //  They also never push a graded result out of the window.
    s_record (tasks, "t", "ok", 1.0, 1.5);
    for (int i = 0; i < 10; i++)
        s_record (tasks, "t", "internal_error", NAN, NAN);
    stats = broker_tasks_get (tasks, "t");
    ck_assert_int_eq (s_int (stats, "attempts"), 15);
    ck_assert_int_eq (s_int (stats, "window"), 1);
    s_assert_near (stats, "pass_rate", 1.0);
    s_assert_near (stats, "mean_speedup", 1.5);
    json_decref (stats);
    broker_tasks_destroy (&tasks);
}
END_TEST

START_TEST (test_band_filter)
{
    broker_tasks_t *tasks = s_new (10, NULL);
    //  Recorded out of name order: lists are sorted by name.
    for (int i = 0; i < 4; i++)
        s_record (tasks, "d", "incorrect", -0.5, NAN);              //  pass 0
    for (int i = 0; i < 4; i++)
        s_record (tasks, "c", "ok", 1.0, 1.0);                      //  pass 1
    s_record (tasks, "e", "invalid", NAN, NAN);                     //  empty window
    s_record (tasks, "b", "ok", 1.0, 1.0);                          //  pass 0.5, 2 results
    s_record (tasks, "b", "incorrect", -0.5, NAN);
    s_record (tasks, "a", "ok", 1.0, 1.0);                          //  pass 0.25, 4 results
    for (int i = 0; i < 3; i++)
        s_record (tasks, "a", "compile_error", -1.0, NAN);

    json_t *list = broker_tasks_list (tasks, false, 0, 0, 0);
    ck_assert_str_eq (s_names (list), "a,b,c,d,e");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.2, 0.8, 1);
    ck_assert_str_eq (s_names (list), "a,b");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.2, 0.8, 3);
    ck_assert_str_eq (s_names (list), "a");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.0, 1.0, 0);            //  bounds included
    ck_assert_str_eq (s_names (list), "a,b,c,d");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.5, 0.5, 2);
    ck_assert_str_eq (s_names (list), "b");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.26, 0.49, 1);
    ck_assert_str_eq (s_names (list), "");
    json_decref (list);
    list = broker_tasks_list (tasks, true, 0.0, 1.0, 5);
    ck_assert_uint_eq (json_array_size (list), 0);
    json_decref (list);
    //  A list entry is the same object get returns.
    list = broker_tasks_list (tasks, true, 0.2, 0.3, 1);
    json_t *stats = broker_tasks_get (tasks, "a");
    ck_assert (json_equal (json_array_get (list, 0), stats));
    json_decref (stats);
    json_decref (list);
    broker_tasks_destroy (&tasks);
}
END_TEST

static char *
s_dump (json_t *json)
{
    char *text = json_dumps (json, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref (json);
    ck_assert_ptr_nonnull (text);
    return text;
}

START_TEST (test_rows_reload_identically)
{
    broker_tasks_t *tasks = s_new (4, s_path);
    for (int i = 0; i < 7; i++)                                     //  wrapped twice over
        s_record (tasks, "matmul", i % 3? "ok": "runtime_error", 0.1 * i, i % 3? 1.0 + i: NAN);
    s_record (tasks, "softmax", "compile_error", -1.0, NAN);
    s_record (tasks, "softmax", "invalid", NAN, NAN);
    s_record (tasks, "only-invalid", "internal_error", NAN, NAN);
    s_record (tasks, "rms norm ü", "ok", 1.25, 1.25);
    char *before = s_dump (broker_tasks_list (tasks, false, 0, 0, 0));
    broker_tasks_destroy (&tasks);                                  //  flushes

    tasks = s_new (4, s_path);
    ck_assert_uint_eq (broker_tasks_size (tasks), 4);
    char *after = s_dump (broker_tasks_list (tasks, false, 0, 0, 0));
    ck_assert_str_eq (after, before);
    free (after);
    //  Later results go on from the reloaded window (attempts 8, rewards
    //  0.4 0.5 0.6 1.0 of the last four).
    s_record (tasks, "matmul", "ok", 1.0, 2.0);
    json_t *stats = broker_tasks_get (tasks, "matmul");
    ck_assert_int_eq (s_int (stats, "attempts"), 8);
    s_assert_near (stats, "reward_mean", (0.4 + 0.5 + 0.6 + 1.0) / 4);
    json_decref (stats);
    broker_tasks_destroy (&tasks);

    //  A smaller window keeps the newest results.
    tasks = s_new (1, s_path);
    stats = broker_tasks_get (tasks, "matmul");
    ck_assert_int_eq (s_int (stats, "window"), 1);
    s_assert_near (stats, "reward_mean", 1.0);
    s_assert_near (stats, "mean_speedup", 2.0);
    json_decref (stats);
    broker_tasks_destroy (&tasks);
    free (before);
}
END_TEST

//  One row read by a connection of the test's own: attempts (-1 when absent)
//  and the results blob's size and first two bytes.
typedef struct {
    long long attempts;
    int size;
    int version;
    int first_status;
} s_row_t;

static s_row_t
s_read_row (sqlite3 *db, const char *name)
{
    s_row_t row = { -1, 0, -1, -1 };
    sqlite3_stmt *stmt = NULL;
    ck_assert_int_eq (sqlite3_prepare_v2 (db, "SELECT attempts, results FROM task_stats"
                                          " WHERE name = ?1", -1, &stmt, NULL), SQLITE_OK);
    sqlite3_bind_text (stmt, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step (stmt) == SQLITE_ROW) {
        row.attempts = sqlite3_column_int64 (stmt, 0);
        const unsigned char *blob = (const unsigned char *) sqlite3_column_blob (stmt, 1);
        row.size = sqlite3_column_bytes (stmt, 1);
        row.version = row.size > 0? blob [0]: -1;
        row.first_status = row.size > 1? blob [1]: -1;
    }
    sqlite3_finalize (stmt);
    return row;
}

static long long
s_count_rows (sqlite3 *db)
{
    sqlite3_stmt *stmt = NULL;
    ck_assert_int_eq (sqlite3_prepare_v2 (db, "SELECT count (*) FROM task_stats", -1, &stmt,
                                          NULL), SQLITE_OK);
    ck_assert_int_eq (sqlite3_step (stmt), SQLITE_ROW);
    long long count = sqlite3_column_int64 (stmt, 0);
    sqlite3_finalize (stmt);
    return count;
}

static void
s_sql (sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec (db, sql, NULL, NULL, &msg);
    ck_assert_msg (rc == SQLITE_OK, "%s: %s", sql, msg? msg: "?");
}

START_TEST (test_flush_writes_only_dirty_tasks)
{
    broker_tasks_t *tasks = s_new (8, s_path);
    sqlite3 *peek = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &peek), SQLITE_OK);
    sqlite3_busy_timeout (peek, 1000);

    s_record (tasks, "a", "incorrect", -0.5, NAN);
    s_record (tasks, "a", "ok", 1.0, 1.0);
    s_record (tasks, "b", "ok", 1.0, 1.0);
    ck_assert_int_eq (s_count_rows (peek), 0);                      //  nothing before a flush
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert_int_eq (s_count_rows (peek), 2);
    //  The documented format: version 1, then 17 bytes a result, oldest first.
    s_row_t row = s_read_row (peek, "a");
    ck_assert_int_eq (row.attempts, 2);
    ck_assert_int_eq (row.size, 1 + 2 * 17);
    ck_assert_int_eq (row.version, 1);
    ck_assert_int_eq (row.first_status, 2);                         //  incorrect

    //  Mark both rows behind the module's back: a row it rewrites loses the mark.
    s_sql (peek, "UPDATE task_stats SET attempts = 777");
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);               //  nothing changed
    ck_assert_int_eq (s_read_row (peek, "a").attempts, 777);
    ck_assert_int_eq (s_read_row (peek, "b").attempts, 777);
    s_record (tasks, "a", "invalid", NAN, NAN);                     //  attempts only: still a change
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert_int_eq (s_read_row (peek, "a").attempts, 3);
    ck_assert_int_eq (s_read_row (peek, "b").attempts, 777);        //  clean: not written
    s_record (tasks, "c", "timeout", -0.5, NAN);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert_int_eq (s_read_row (peek, "b").attempts, 777);
    ck_assert_int_eq (s_read_row (peek, "c").attempts, 1);
    ck_assert_int_eq (s_count_rows (peek), 3);

    //  A flush that cannot write keeps its changes for the next one.
    s_record (tasks, "d", "ok", 1.0, 1.0);
    s_sql (peek, "BEGIN EXCLUSIVE");
    ck_assert_int_eq (broker_tasks_flush (tasks), -1);              //  after the busy timeout
    s_sql (peek, "COMMIT");
    ck_assert_int_eq (s_read_row (peek, "d").attempts, -1);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert_int_eq (s_read_row (peek, "d").attempts, 1);
    ck_assert_int_eq (s_count_rows (peek), 4);

    //  A row that does not parse is skipped at load, the others load.
    s_sql (peek, "INSERT INTO task_stats (name, attempts, updated, results)"
                 " VALUES ('broken', 1, 0, x'0200')");
    s_sql (peek, "INSERT INTO task_stats (name, attempts, updated, results)"
                 " VALUES ('bad-status', 1, 0,"
                 " x'010900000000000000000000000000000000')");
    s_sql (peek, "INSERT INTO task_stats (name, attempts, updated, results)"
                 " VALUES ('text', 1, 0, '[]')");
    broker_tasks_destroy (&tasks);
    tasks = s_new (8, s_path);
    ck_assert_uint_eq (broker_tasks_size (tasks), 4);
    ck_assert_ptr_null (broker_tasks_get (tasks, "broken"));
    ck_assert_ptr_null (broker_tasks_get (tasks, "bad-status"));
    json_t *stats = broker_tasks_get (tasks, "b");
    ck_assert_int_eq (s_int (stats, "attempts"), 777);              //  what the row said
    json_decref (stats);
    broker_tasks_destroy (&tasks);
    sqlite3_close (peek);
}
END_TEST

START_TEST (test_task_count_is_bounded)
{
    broker_tasks_t *tasks = s_new (2, s_path);
    char name [32];
    for (int i = 0; i < BROKER_TASKS_MAX; i++) {
        snprintf (name, sizeof (name), "t%06d", i);
        s_record (tasks, name, "ok", 1.0, 1.0);
    }
    ck_assert_uint_eq (broker_tasks_size (tasks), BROKER_TASKS_MAX);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    s_record (tasks, "t000000", "ok", 1.0, 1.0);                    //  now the most recent
    s_record (tasks, "new-1", "ok", 1.0, 1.0);                      //  drops t000001
    s_record (tasks, "new-2", "ok", 1.0, 1.0);                      //  drops t000002
    ck_assert_uint_eq (broker_tasks_size (tasks), BROKER_TASKS_MAX);
    ck_assert_ptr_null (broker_tasks_get (tasks, "t000001"));
    ck_assert_ptr_null (broker_tasks_get (tasks, "t000002"));
    json_t *stats = broker_tasks_get (tasks, "t000000");
    ck_assert_ptr_nonnull (stats);
    ck_assert_int_eq (s_int (stats, "attempts"), 2);
    json_decref (stats);
    stats = broker_tasks_get (tasks, "new-2");
    ck_assert_ptr_nonnull (stats);
    json_decref (stats);
    //  The file is bounded too: the dropped rows go at the flush.
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    sqlite3 *peek = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &peek), SQLITE_OK);
    ck_assert_int_eq (s_count_rows (peek), BROKER_TASKS_MAX);
    ck_assert_int_eq (s_read_row (peek, "t000001").attempts, -1);
    ck_assert_int_eq (s_read_row (peek, "new-1").attempts, 1);
    //  A dropped name that comes back is a new task whose row stays, flush after flush.
    s_record (tasks, "t000001", "ok", 1.0, 1.0);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    s_record (tasks, "new-3", "ok", 1.0, 1.0);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert_int_eq (s_read_row (peek, "t000001").attempts, 1);
    ck_assert_int_eq (s_count_rows (peek), BROKER_TASKS_MAX);
    sqlite3_close (peek);
    broker_tasks_destroy (&tasks);
}
END_TEST

START_TEST (test_names_empty_long_and_invalid)
{
    broker_tasks_t *tasks = s_new (2, NULL);
    s_record (tasks, NULL, "ok", 1.0, 1.0);
    s_record (tasks, "", "incorrect", -0.5, NAN);
    json_t *stats = broker_tasks_get (tasks, "");
    ck_assert_ptr_nonnull (stats);
    ck_assert_str_eq (json_string_value (json_object_get (stats, "task")), "(unnamed)");
    ck_assert_int_eq (s_int (stats, "attempts"), 2);
    json_decref (stats);

    //  300 bytes: kept as the first 255, and the long name finds them.
    char name [512];
    memset (name, 'x', 300);
    name [300] = 0;
    s_record (tasks, name, "ok", 1.0, 1.0);
    stats = broker_tasks_get (tasks, name);
    ck_assert_ptr_nonnull (stats);
    ck_assert_uint_eq (strlen (json_string_value (json_object_get (stats, "task"))), 255);
    json_decref (stats);
    //  254 bytes then a 2-byte character: cut before it, never through it.
    memset (name, 'y', 254);
    strcpy (name + 254, "\xc3\xbc");
    s_record (tasks, name, "ok", 1.0, 1.0);
    name [254] = 0;
    stats = broker_tasks_get (tasks, name);
    ck_assert_ptr_nonnull (stats);
    json_decref (stats);
    //  Bytes that are not UTF-8 become '?', so every name is a JSON string.
    s_record (tasks, "bad\xff\xc0name", "ok", 1.0, 1.0);
    stats = broker_tasks_get (tasks, "bad??name");
    ck_assert_ptr_nonnull (stats);
    json_decref (stats);
    json_t *list = broker_tasks_list (tasks, false, 0, 0, 0);
    ck_assert_uint_eq (json_array_size (list), 4);
    char *text = json_dumps (list, 0);
    ck_assert_ptr_nonnull (text);
    free (text);
    json_decref (list);
    broker_tasks_destroy (&tasks);

    char err [128];
    ck_assert_ptr_null (broker_tasks_new (0, NULL, err, sizeof (err)));
    ck_assert_msg (strstr (err, "window"), "reason: %s", err);
}
END_TEST

//  The broker's store holds its file with an exclusive lock: a second
//  connection is refused (saying why), and the store's own connection can
//  be shared, flushes nesting in its open transaction.
START_TEST (test_locked_file_and_shared_connection)
{
    char err [256] = "";
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open the store: %s", err);
    ck_assert_ptr_null (broker_tasks_new (4, s_path, err, sizeof (err)));
    ck_assert_msg (strstr (err, "in use"), "reason: %s", err);
    broker_store_destroy (&store);

    //  A connection set up as broker_store sets up its own.
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    s_sql (db, "PRAGMA locking_mode = EXCLUSIVE");
    s_sql (db, "PRAGMA journal_mode = WAL");
    s_sql (db, "BEGIN EXCLUSIVE; COMMIT");
    broker_tasks_t *tasks = broker_tasks_new_shared (4, db, err, sizeof (err));
    ck_assert_msg (tasks != NULL, "cannot share: %s", err);
    s_record (tasks, "a", "ok", 1.0, 1.0);
    s_sql (db, "BEGIN IMMEDIATE");                                  //  the owner's batch
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);
    ck_assert (!sqlite3_get_autocommit (db));                       //  still the owner's to end
    ck_assert_int_eq (s_count_rows (db), 1);
    s_sql (db, "COMMIT");
    s_record (tasks, "b", "ok", 1.0, 1.0);
    ck_assert_int_eq (broker_tasks_flush (tasks), 0);               //  no batch open: its own
    ck_assert (sqlite3_get_autocommit (db));
    broker_tasks_destroy (&tasks);
    ck_assert_int_eq (sqlite3_close (db), SQLITE_OK);               //  nothing left prepared

    tasks = s_new (4, s_path);
    ck_assert_uint_eq (broker_tasks_size (tasks), 2);
    broker_tasks_destroy (&tasks);
}
END_TEST

//  A result document whose profile names the reference's operators.
static json_t *
s_profiled (const char *ops_json)
{
    json_t *ops = json_loads (ops_json, 0, NULL);
    ck_assert_ptr_nonnull (ops);
    return json_pack ("{s:s, s:{s:{s:o}}}", "status", "ok", "profile", "reference", "operators", ops);
}

START_TEST (test_curriculum_signals)
{
    broker_tasks_t *tasks = s_new (8, NULL);
    s_record (tasks, "gemm", "ok", 1.0, 1.0);
    s_record (tasks, "gemm", "incorrect", -0.5, NAN);
    json_t *stats = broker_tasks_get (tasks, "gemm");
    s_assert_near (stats, "reward_std", 0.75);
    ck_assert_int_eq (s_int (stats, "groups"), 0);
    s_assert_null (stats, "last_group_zero_variance");
    s_assert_null (stats, "operators");
    json_decref (stats);

    //  Groups: the newest first; at most 32 remembered.
    ck_assert_int_eq (broker_tasks_record_group (tasks, "gemm", true), 0);
    ck_assert_int_eq (broker_tasks_record_group (tasks, "gemm", false), 0);
    ck_assert_int_eq (broker_tasks_record_group (tasks, "gemm", true), 0);
    stats = broker_tasks_get (tasks, "gemm");
    ck_assert_int_eq (s_int (stats, "groups"), 3);
    ck_assert_int_eq (s_int (stats, "zero_variance_groups"), 2);
    ck_assert (json_is_true (json_object_get (stats, "last_group_zero_variance")));
    json_decref (stats);
    for (int i = 0; i < 40; i++)
        broker_tasks_record_group (tasks, "gemm", i >= 30);      //  the last 10 dead
    stats = broker_tasks_get (tasks, "gemm");
    ck_assert_int_eq (s_int (stats, "groups"), 32);
    ck_assert_int_eq (s_int (stats, "zero_variance_groups"), 10);
    json_decref (stats);
    //  A group of a task without results says nothing.
    ck_assert_int_eq (broker_tasks_record_group (tasks, "unknown", true), 0);
    ck_assert_ptr_null (broker_tasks_get (tasks, "unknown"));

    //  Operators: the latest usable list, cleaned; a result without one keeps it.
    json_t *doc = s_profiled ("[{\"name\": \"aten::mm\", \"share\": 0.75},"
                              " {\"name\": \"aten::relu\", \"share\": 0.25},"
                              " {\"name\": \"bad share\", \"share\": 1.5},"
                              " {\"share\": 0.1}, \"junk\"]");
    ck_assert_int_eq (broker_tasks_record_profile (tasks, "gemm", doc), 0);
    json_decref (doc);
    doc = json_pack ("{s:s, s:n}", "status", "ok", "profile");
    ck_assert_int_eq (broker_tasks_record_profile (tasks, "gemm", doc), 0);
    json_decref (doc);
    stats = broker_tasks_get (tasks, "gemm");
    char *ops = json_dumps (json_object_get (stats, "operators"), JSON_COMPACT);
    ck_assert_str_eq (ops, "[{\"name\":\"aten::mm\",\"share\":0.75},"
                           "{\"name\":\"aten::relu\",\"share\":0.25}]");
    free (ops);
    json_decref (stats);
    //  At most 16 kept.
    char many [4096] = "[";
    for (int i = 0; i < 20; i++)
        snprintf (many + strlen (many), sizeof many - strlen (many),
                  "%s{\"name\": \"op%d\", \"share\": 0.05}", i? ", ": "", i);
    strcat (many, "]");
    doc = s_profiled (many);
    broker_tasks_record_profile (tasks, "gemm", doc);
    json_decref (doc);
    stats = broker_tasks_get (tasks, "gemm");
    ck_assert_uint_eq (json_array_size (json_object_get (stats, "operators")), 16);
    json_decref (stats);
    broker_tasks_destroy (&tasks);
}
END_TEST

//  Groups and operators survive a restart; a table an older broker wrote
//  (without their columns) is upgraded in place and keeps its rows.
START_TEST (test_curriculum_signals_persist_and_upgrade)
{
    sqlite3 *db = NULL;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    s_sql (db, "CREATE TABLE task_stats (name TEXT PRIMARY KEY, attempts INTEGER NOT NULL,"
               " updated INTEGER NOT NULL, results BLOB NOT NULL)");
    //  One ok result, reward 1.0 and speedup 1.0, in the row format of the header.
    s_sql (db, "INSERT INTO task_stats VALUES ('old', 1, 100,"
               " X'0100000000000000F03F000000000000F03F')");
    sqlite3_close (db);

    broker_tasks_t *tasks = s_new (4, s_path);
    json_t *stats = broker_tasks_get (tasks, "old");
    ck_assert_ptr_nonnull (stats);
    s_assert_near (stats, "pass_rate", 1.0);
    s_assert_near (stats, "reward_mean", 1.0);
    ck_assert_int_eq (s_int (stats, "groups"), 0);
    json_decref (stats);
    broker_tasks_record_group (tasks, "old", true);
    broker_tasks_record_group (tasks, "old", false);
    json_t *doc = s_profiled ("[{\"name\": \"aten::softmax\", \"share\": 1.0}]");
    broker_tasks_record_profile (tasks, "old", doc);
    json_decref (doc);
    char *before = s_dump (broker_tasks_list (tasks, false, 0, 0, 0));
    broker_tasks_destroy (&tasks);

    tasks = s_new (4, s_path);
    char *after = s_dump (broker_tasks_list (tasks, false, 0, 0, 0));
    ck_assert_str_eq (after, before);
    ck_assert (strstr (after, "\"zero_variance_groups\":1"));
    ck_assert (strstr (after, "aten::softmax"));
    broker_tasks_destroy (&tasks);
    free (before);
    free (after);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_tasks");
    TCase *memory = tcase_create ("memory");
    tcase_add_checked_fixture (memory, s_setup, s_teardown);
    tcase_add_test (memory, test_rates_over_a_window);
    tcase_add_test (memory, test_ring_wraps_and_drops_the_oldest);
    tcase_add_test (memory, test_invalid_and_internal_error_count_only_in_attempts);
    tcase_add_test (memory, test_band_filter);
    tcase_add_test (memory, test_names_empty_long_and_invalid);
    tcase_add_test (memory, test_curriculum_signals);
    suite_add_tcase (suite, memory);
    TCase *file = tcase_create ("file");
    tcase_add_checked_fixture (file, s_setup, s_teardown);
    tcase_add_test (file, test_rows_reload_identically);
    tcase_add_test (file, test_flush_writes_only_dirty_tasks);
    tcase_add_test (file, test_task_count_is_bounded);
    tcase_add_test (file, test_locked_file_and_shared_connection);
    tcase_add_test (file, test_curriculum_signals_persist_and_upgrade);
    suite_add_tcase (suite, file);
    return testutil_run_suite (suite);
}
