/*  test_worker_cache - the compiled-module cache on a real SQLite file:
    miss then hit, key material checked, LRU eviction, two processes
    writing at once, a deleted or damaged file recreated, private modes,
    and the cost of a hit.
*/
#include "testutil.h"
#include "worker_cache.h"
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char s_dir [64];             //  per test: a fresh directory
static char s_path [128];           //  the cache file inside it (in a subdirectory)

static void
s_setup (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/kgym-cachetest-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/sub/dir/modules.sqlite", s_dir);
}

static void
s_teardown (void)
{
    char cmd [128];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", s_dir);
    if (system (cmd) != 0)
        fprintf (stderr, "cannot remove %s\n", s_dir);
}

static void
s_key (uint8_t key [COMMON_HASH_BYTES], int n)
{
    memset (key, 0, COMMON_HASH_BYTES);
    memcpy (key, &n, sizeof n);
    key [31] = 0x5a;
}

static worker_cache_t *
s_open (uint64_t max_bytes)
{
    char err [256] = "";
    worker_cache_t *cache = worker_cache_new (s_path, max_bytes, err, sizeof err);
    ck_assert_msg (cache != NULL, "cannot open the cache: %s", err);
    return cache;
}

START_TEST (test_miss_then_hit)
{
    worker_cache_t *cache = s_open (0);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 1);
    uint8_t *blob;
    size_t size;
    char *log;
    ck_assert_int_eq (worker_cache_get (cache, key, "material-1", &blob, &size, &log), 1);
    ck_assert_ptr_null (blob);
    const uint8_t so [] = { 0x7f, 'E', 'L', 'F', 0, 1, 2, 3 };
    ck_assert_int_eq (worker_cache_put (cache, key, "material-1", so, sizeof so, "warning: x"), 0);
    ck_assert_int_eq (worker_cache_get (cache, key, "material-1", &blob, &size, &log), 0);
    ck_assert_uint_eq (size, sizeof so);
    ck_assert_mem_eq (blob, so, sizeof so);
    ck_assert_str_eq (log, "warning: x");
    free (blob);
    free (log);
    //  Same key, other material: a miss (collision or stale format).
    ck_assert_int_eq (worker_cache_get (cache, key, "material-2", &blob, &size, &log), 1);
    //  Replacing works; a NULL log comes back NULL.
    ck_assert_int_eq (worker_cache_put (cache, key, "material-1", so, 4, NULL), 0);
    ck_assert_int_eq (worker_cache_get (cache, key, "material-1", &blob, &size, &log), 0);
    ck_assert_uint_eq (size, 4);
    ck_assert_ptr_null (log);
    free (blob);
    uint64_t entries, bytes, hits, misses;
    ck_assert_int_eq (worker_cache_stats (cache, &entries, &bytes, &hits, &misses), 0);
    ck_assert_uint_eq (entries, 1);
    ck_assert_uint_eq (bytes, 4 + strlen ("material-1"));
    ck_assert_uint_eq (hits, 2);
    ck_assert_uint_eq (misses, 2);
    ck_assert_int_eq (worker_cache_clear (cache), 0);
    ck_assert_int_eq (worker_cache_stats (cache, &entries, NULL, NULL, NULL), 0);
    ck_assert_uint_eq (entries, 0);
    ck_assert_str_eq (worker_cache_path (cache), s_path);
    worker_cache_destroy (&cache);
    ck_assert_ptr_null (cache);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_private_modes)
{
    worker_cache_t *cache = s_open (0);
    struct stat st;
    ck_assert_int_eq (stat (s_path, &st), 0);
    ck_assert_int_eq (st.st_mode & 0777, 0600);
    char dir [160];
    snprintf (dir, sizeof dir, "%s/sub", s_dir);
    ck_assert_int_eq (stat (dir, &st), 0);
    ck_assert_int_eq (st.st_mode & 0777, 0700);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 1);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "x", 1, NULL), 0);
    char wal [160];
    snprintf (wal, sizeof wal, "%s-wal", s_path);
    if (stat (wal, &st) == 0)
        ck_assert_int_eq (st.st_mode & 0777, 0600);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_lru_eviction)
{
    //  Each entry is 1000 bytes of blob + 1 of material: two fit, three do not.
    worker_cache_t *cache = s_open (2500);
    uint8_t blob [1000];
    memset (blob, 7, sizeof blob);
    uint8_t a [COMMON_HASH_BYTES], b [COMMON_HASH_BYTES], c [COMMON_HASH_BYTES];
    s_key (a, 1);
    s_key (b, 2);
    s_key (c, 3);
    ck_assert_int_eq (worker_cache_put (cache, a, "m", blob, sizeof blob, NULL), 0);
    ck_assert_int_eq (worker_cache_put (cache, b, "m", blob, sizeof blob, NULL), 0);
    uint8_t *got;
    size_t size;
    ck_assert_int_eq (worker_cache_get (cache, a, "m", &got, &size, NULL), 0);     //  a is now newer than b
    free (got);
    ck_assert_int_eq (worker_cache_put (cache, c, "m", blob, sizeof blob, NULL), 0);
    ck_assert_int_eq (worker_cache_get (cache, b, "m", &got, &size, NULL), 1);
    ck_assert_int_eq (worker_cache_get (cache, a, "m", &got, &size, NULL), 0);
    free (got);
    ck_assert_int_eq (worker_cache_get (cache, c, "m", &got, &size, NULL), 0);
    free (got);
    uint64_t bytes;
    ck_assert_int_eq (worker_cache_stats (cache, NULL, &bytes, NULL, NULL), 0);
    ck_assert_uint_le (bytes, 2500);
    //  Something bigger than the whole bound is not stored at all.
    uint8_t big [3000] = { 0 };
    ck_assert_int_eq (worker_cache_put (cache, b, "m", big, sizeof big, NULL), -1);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_two_processes_write)
{
    const int per_child = 150;
    pid_t pids [2];
    for (int c = 0; c < 2; c++) {
        pids [c] = fork ();
        ck_assert_int_ge (pids [c], 0);
        if (pids [c] == 0) {
            //  The child opens its own handle after the fork.
            char err [256];
            worker_cache_t *cache = worker_cache_new (s_path, 0, err, sizeof err);
            if (!cache)
                _exit (2);
            int failed = 0;
            for (int i = 0; i < per_child; i++) {
                uint8_t key [COMMON_HASH_BYTES];
                int n = c * 10000 + i;
                s_key (key, n);
                char material [32], blob [64];
                snprintf (material, sizeof material, "m%d", n);
                snprintf (blob, sizeof blob, "blob of %d", n);
                failed += worker_cache_put (cache, key, material, (uint8_t *) blob,
                                            strlen (blob) + 1, NULL) != 0;
            }
            worker_cache_destroy (&cache);
            _exit (failed? 1: 0);
        }
    }
    for (int c = 0; c < 2; c++) {
        int status;
        ck_assert_int_eq (waitpid (pids [c], &status, 0), pids [c]);
        ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "writer %d failed", c);
    }
    worker_cache_t *cache = s_open (0);
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < per_child; i++) {
            uint8_t key [COMMON_HASH_BYTES];
            int n = c * 10000 + i;
            s_key (key, n);
            char material [32], want [64];
            snprintf (material, sizeof material, "m%d", n);
            snprintf (want, sizeof want, "blob of %d", n);
            uint8_t *blob;
            size_t size;
            ck_assert_int_eq (worker_cache_get (cache, key, material, &blob, &size, NULL), 0);
            ck_assert_str_eq ((char *) blob, want);
            free (blob);
        }
    worker_cache_destroy (&cache);
    sqlite3 *db;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    sqlite3_stmt *stmt;
    ck_assert_int_eq (sqlite3_prepare_v2 (db, "PRAGMA integrity_check", -1, &stmt, NULL), SQLITE_OK);
    ck_assert_int_eq (sqlite3_step (stmt), SQLITE_ROW);
    ck_assert_str_eq ((const char *) sqlite3_column_text (stmt, 0), "ok");
    sqlite3_finalize (stmt);
    sqlite3_close (db);
}
END_TEST

START_TEST (test_deleted_file_recreated)
{
    worker_cache_t *cache = s_open (0);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 9);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "abc", 3, NULL), 0);
    const char *suffixes [] = { "", "-wal", "-shm" };
    for (int i = 0; i < 3; i++) {
        char path [200];
        snprintf (path, sizeof path, "%s%s", s_path, suffixes [i]);
        unlink (path);
    }
    uint8_t *blob;
    size_t size;
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 1);
    struct stat st;
    ck_assert_int_eq (stat (s_path, &st), 0);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "abc", 3, NULL), 0);
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 0);
    free (blob);
    //  The whole directory going away is survived too.
    worker_cache_destroy (&cache);
    s_teardown ();
    cache = s_open (0);
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 1);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_damaged_file_replaced)
{
    char dir [160];
    snprintf (dir, sizeof dir, "%s/sub", s_dir);
    mkdir (dir, 0700);
    snprintf (dir, sizeof dir, "%s/sub/dir", s_dir);
    mkdir (dir, 0700);
    FILE *file = fopen (s_path, "w");
    ck_assert_ptr_nonnull (file);
    for (int i = 0; i < 200; i++)
        fputs ("this is not an SQLite database at all\n", file);
    fclose (file);
    worker_cache_t *cache = s_open (0);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 1);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "abc", 3, NULL), 0);
    uint8_t *blob;
    size_t size;
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 0);
    free (blob);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_old_format_dropped)
{
    worker_cache_t *cache = s_open (0);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 1);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "abc", 3, NULL), 0);
    worker_cache_destroy (&cache);
    sqlite3 *db;
    ck_assert_int_eq (sqlite3_open (s_path, &db), SQLITE_OK);
    ck_assert_int_eq (sqlite3_exec (db, "PRAGMA user_version=99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close (db);
    cache = s_open (0);
    uint8_t *blob;
    size_t size;
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 1);
    ck_assert_int_eq (worker_cache_put (cache, key, "m", (const uint8_t *) "abc", 3, NULL), 0);
    ck_assert_int_eq (worker_cache_get (cache, key, "m", &blob, &size, NULL), 0);
    free (blob);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_hit_is_cheap)
{
    worker_cache_t *cache = s_open (0);
    uint8_t key [COMMON_HASH_BYTES];
    s_key (key, 1);
    static uint8_t so [16384];
    char material [4096];
    memset (material, 'k', sizeof material - 1);
    material [sizeof material - 1] = 0;
    ck_assert_int_eq (worker_cache_put (cache, key, material, so, sizeof so, "log"), 0);
    struct timespec t0, t1;
    const int rounds = 2000;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < rounds; i++) {
        uint8_t *blob;
        size_t size;
        char *log;
        ck_assert_int_eq (worker_cache_get (cache, key, material, &blob, &size, &log), 0);
        free (blob);
        free (log);
    }
    clock_gettime (CLOCK_MONOTONIC, &t1);
    double us = ((double) (t1.tv_sec - t0.tv_sec) * 1e9 + (double) (t1.tv_nsec - t0.tv_nsec)) / 1e3 / rounds;
    fprintf (stderr, "cache hit (16 KiB module): %.1f us\n", us);
    ck_assert_msg (us < 1000.0, "a hit took %.1f us", us);
    worker_cache_destroy (&cache);
}
END_TEST

START_TEST (test_default_path)
{
    char *path = worker_cache_default_path ("/x/y.sqlite");
    ck_assert_str_eq (path, "/x/y.sqlite");
    free (path);
    setenv ("KGYM_CACHE_DIR", "/kc", 1);
    path = worker_cache_default_path (NULL);
    ck_assert_str_eq (path, "/kc/modules.sqlite");
    free (path);
    unsetenv ("KGYM_CACHE_DIR");
    setenv ("XDG_CACHE_HOME", "/xdg", 1);
    path = worker_cache_default_path (NULL);
    ck_assert_str_eq (path, "/xdg/kgym/modules.sqlite");
    free (path);
    unsetenv ("XDG_CACHE_HOME");
    setenv ("HOME", "/home/u", 1);
    path = worker_cache_default_path ("");
    ck_assert_str_eq (path, "/home/u/.cache/kgym/modules.sqlite");
    free (path);
}
END_TEST

START_TEST (test_unopenable_path)
{
    char err [256] = "";
    char path [200];
    //  A regular file where a directory should be.
    snprintf (path, sizeof path, "%s/file", s_dir);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fclose (file);
    snprintf (path, sizeof path, "%s/file/modules.sqlite", s_dir);
    worker_cache_t *cache = worker_cache_new (path, 0, err, sizeof err);
    ck_assert_ptr_null (cache);
    ck_assert (err [0]);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("worker_cache");
    TCase *tc = tcase_create ("cache");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_miss_then_hit);
    tcase_add_test (tc, test_private_modes);
    tcase_add_test (tc, test_lru_eviction);
    tcase_add_test (tc, test_two_processes_write);
    tcase_add_test (tc, test_deleted_file_recreated);
    tcase_add_test (tc, test_damaged_file_replaced);
    tcase_add_test (tc, test_old_format_dropped);
    tcase_add_test (tc, test_hit_is_cheap);
    tcase_add_test (tc, test_default_path);
    tcase_add_test (tc, test_unopenable_path);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
