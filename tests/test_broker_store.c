/*  test_broker_store - the broker's durable job table on a scratch file:
    rows survive a close (and a commit is what makes them), finished rows
    keep their result and verdict and lose their body, the SUBMIT options
    come back, a file of an older schema is upgraded, retention retires by
    age and by count at load, and a second opener of the same file is
    refused.  */
#include "testutil.h"
#include "broker_store.h"
#include "common_log.h"
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <math.h>
#include <sqlite3.h>

static char s_dir [64];
static char s_path [128];

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_QUIET);
    snprintf (s_dir, sizeof (s_dir), "/tmp/kgym-test-store-XXXXXX");
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

//  Rows seen by a load, as "id:client:ref:tag:backend:done:attempts:lost:body|".
typedef struct {
    char text [4096];
    size_t rows;
} s_seen_t;

static int
s_collect (const broker_store_row_t *row, void *arg)
{
    s_seen_t *seen = (s_seen_t *) arg;
    size_t used = strlen (seen->text);
    snprintf (seen->text + used, sizeof (seen->text) - used, "%llu:%s:%llu:%s:%s:%d:%u:%u:%.*s|",
              (unsigned long long) row->id, row->client, (unsigned long long) row->ref, row->tag,
              row->done? "": row->backend, row->done, row->attempts, row->lost,
              (int) row->body_size, (const char *) row->body);
    seen->rows++;
    return 0;
}

static void
s_insert (broker_store_t *store, uint64_t id, const char *client, uint64_t ref, const char *body)
{
    broker_store_row_t row = {
        .id = id, .client = client, .ref = ref, .tag = "t", .backend = "cpu",
        .body = body, .body_size = strlen (body), .accepted_us = 1000
    };
    ck_assert_int_eq (broker_store_insert (store, &row), 0);
}

START_TEST (test_rows_survive_a_reopen)
{
    char err [256];
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open: %s", err);
    s_insert (store, 1, "alice", 11, "job-1");
    s_insert (store, 2, "", 12, "job-2");
    ck_assert (broker_store_pending (store));
    ck_assert_int_eq (broker_store_commit (store), 0);
    ck_assert (!broker_store_pending (store));
    ck_assert_int_eq (broker_store_requeue (store, 2, 1, 1), 0);
    ck_assert_int_eq (broker_store_finish (store, 1, 1, 0, "result-1", 8, "w1", 0.25, 2000, "ok",
                                           1.5, NAN), 0);
    ck_assert_int_eq (broker_store_commit (store), 0);
    zframe_t *result = broker_store_result (store, 1);
    ck_assert_ptr_nonnull (result);
    ck_assert (zframe_streq (result, "result-1"));
    zframe_destroy (&result);
    ck_assert_ptr_null (broker_store_result (store, 2));        //  not finished
    ck_assert_uint_eq (broker_store_last_id (store), 2);
    broker_store_destroy (&store);
    broker_store_destroy (&store);

    store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot reopen: %s", err);
    s_seen_t seen = { "", 0 };
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect, &seen), 0);
    //  A finished row has no body left; the unfinished one keeps its counts.
    ck_assert_str_eq (seen.text, "1:alice:11:t::1:1:0:|2::12:t:cpu:0:1:1:job-2|");
    broker_store_destroy (&store);
}
END_TEST

//  A process that dies (no close, no destructor) keeps what it committed and
//  nothing else: what the broker promises when it says ACCEPTED.
START_TEST (test_a_killed_writer_keeps_exactly_its_commits)
{
    pid_t pid = fork ();
    ck_assert_int_ge (pid, 0);
    if (pid == 0) {
        char err [256];
        broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
        if (!store)
            _exit (1);
        s_insert (store, 1, "c", 1, "committed");
        if (broker_store_commit (store))
            _exit (2);
        s_insert (store, 2, "c", 2, "not committed");
        _exit (0);          //  as a SIGKILL would: no commit, no close
    }
    int status;
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    char err [256];
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot reopen after the kill: %s", err);
    s_seen_t seen = { "", 0 };
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect, &seen), 0);
    ck_assert_str_eq (seen.text, "1:c:1:t:cpu:0:0:0:committed|");
    broker_store_destroy (&store);
}
END_TEST

START_TEST (test_retention_at_load_by_age_and_count)
{
    char err [256];
    broker_store_t *store = broker_store_new (s_path, true, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open: %s", err);
    for (uint64_t id = 1; id <= 5; id++) {
        s_insert (store, id, "c", id, "body");
        if (id <= 4)
            ck_assert_int_eq (broker_store_finish (store, id, 1, 0, "r", 1, "w", 0, (int64_t) id * 100,
                                                   "ok", 1, 1), 0);
    }
    ck_assert_int_eq (broker_store_delete (store, 5), 0);
    ck_assert_int_eq (broker_store_commit (store), 0);
    //  Older than 150 us goes (id 1); past 2 kept results the oldest go (id 2).
    s_seen_t seen = { "", 0 };
    ck_assert_int_eq (broker_store_load (store, 150, 2, s_collect, &seen), 0);
    ck_assert_uint_eq (seen.rows, 2);
    ck_assert_msg (strncmp (seen.text, "3:", 2) == 0 && strstr (seen.text, "|4:"), "rows: %s", seen.text);
    broker_store_destroy (&store);
}
END_TEST

//  Rows seen by a load, as "id:cache:group:group_size:trajectory:status:reward:speedup|".
static int
s_collect_options (const broker_store_row_t *row, void *arg)
{
    s_seen_t *seen = (s_seen_t *) arg;
    size_t used = strlen (seen->text);
    snprintf (seen->text + used, sizeof (seen->text) - used, "%llu:%s:%s:%u:%s:%s:%g:%g|",
              (unsigned long long) row->id, row->cache, row->group, row->group_size,
              row->trajectory, row->status, row->reward, row->speedup);
    seen->rows++;
    return 0;
}

START_TEST (test_submit_options_and_verdicts_survive_a_reopen)
{
    char err [256];
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open: %s", err);
    broker_store_row_t row = {
        .id = 1, .client = "c", .ref = 1, .tag = "t", .backend = "cpu", .body = "b", .body_size = 1,
        .accepted_us = 1000, .cache = "bypass", .group = "g", .group_size = 4, .trajectory = "traj"
    };
    ck_assert_int_eq (broker_store_insert (store, &row), 0);
    row = (broker_store_row_t) { .id = 2, .client = "c", .ref = 2, .backend = "cpu", .body = "b",
                                 .body_size = 1, .accepted_us = 1000 };
    ck_assert_int_eq (broker_store_insert (store, &row), 0);       //  NULL options: the defaults
    row.id = 3;
    row.cache = "refresh";
    ck_assert_int_eq (broker_store_insert (store, &row), 0);
    ck_assert_int_eq (broker_store_finish (store, 2, 1, 0, "r", 1, "w", 0, 2000, "incorrect", -0.5,
                                           NAN), 0);
    ck_assert_int_eq (broker_store_finish (store, 3, 1, 0, "r", 1, "w", 0, 2000, "internal_error",
                                           NAN, NAN), 0);
    broker_store_destroy (&store);
    store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot reopen: %s", err);
    s_seen_t seen = { "", 0 };
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect_options, &seen), 0);
    ck_assert_str_eq (seen.text, "1:bypass:g:4:traj::nan:nan|2:use::0::incorrect:-0.5:nan|"
                                 "3:refresh::0::internal_error:nan:nan|");
    broker_store_destroy (&store);
}
END_TEST

//  A file of schema 1 (kgym before the options were kept) is brought up to
//  date: its unfinished rows come back with the refresh policy they had.
START_TEST (test_a_schema_1_file_is_upgraded)
{
    sqlite3 *db;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (db,
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, client TEXT NOT NULL, ref INTEGER NOT NULL,"
        " tag TEXT NOT NULL, backend TEXT NOT NULL, body BLOB NOT NULL, state INTEGER NOT NULL,"
        " attempts INTEGER NOT NULL, lost INTEGER NOT NULL, accepted_us INTEGER NOT NULL,"
        " finished_us INTEGER, queue_s REAL, worker TEXT, result BLOB);"
        "INSERT INTO jobs VALUES (7, 'c', 1, 't', 'cpu', x'6a6f62', 0, 1, 0, 1000, NULL, NULL,"
        " NULL, NULL);"
        "PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (db);
    char err [256];
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open a schema 1 file: %s", err);
    s_seen_t seen = { "", 0 };
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect, &seen), 0);
    ck_assert_str_eq (seen.text, "7:c:1:t:cpu:0:1:0:job|");
    memset (&seen, 0, sizeof seen);
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect_options, &seen), 0);
    ck_assert_str_eq (seen.text, "7:refresh::0:::nan:nan|");
    //  ... and written by this kgym from then on.
    ck_assert_int_eq (broker_store_finish (store, 7, 2, 0, "r", 1, "w", 0, 2000, "ok", 1, 1), 0);
    broker_store_destroy (&store);
    store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot reopen: %s", err);
    memset (&seen, 0, sizeof seen);
    ck_assert_int_eq (broker_store_load (store, 0, 100, s_collect_options, &seen), 0);
    ck_assert_str_eq (seen.text, "7:refresh::0::ok:1:1|");
    broker_store_destroy (&store);
    //  A file from a newer kgym is refused, not misread.
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (db);
    ck_assert_ptr_null (broker_store_new (s_path, false, err, sizeof (err)));
    ck_assert_msg (strstr (err, "schema version 99"), "reason: %s", err);
}
END_TEST

START_TEST (test_second_opener_is_refused)
{
    char err [256];
    broker_store_t *store = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (store != NULL, "cannot open: %s", err);
    broker_store_t *second = broker_store_new (s_path, false, err, sizeof (err));
    ck_assert_msg (second == NULL, "a second broker opened the same file");
    ck_assert_msg (strstr (err, "in use"), "reason: %s", err);
    broker_store_destroy (&store);
    //  Not a database at all.
    char junk [160];
    snprintf (junk, sizeof (junk), "%s/junk", s_dir);
    FILE *file = fopen (junk, "w");
    fputs ("this is not SQLite, just text long enough to look like a header ............\n", file);
    fclose (file);
    ck_assert_ptr_null (broker_store_new (junk, false, err, sizeof (err)));
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("broker_store");
    TCase *tc = tcase_create ("file");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_add_test (tc, test_rows_survive_a_reopen);
    tcase_add_test (tc, test_a_killed_writer_keeps_exactly_its_commits);
    tcase_add_test (tc, test_retention_at_load_by_age_and_count);
    tcase_add_test (tc, test_submit_options_and_verdicts_survive_a_reopen);
    tcase_add_test (tc, test_a_schema_1_file_is_upgraded);
    tcase_add_test (tc, test_second_opener_is_refused);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
