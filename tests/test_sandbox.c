/*  test_sandbox - finding kgym-runner, what the host allows, and
    exec mode (the compiler's sandbox): output capture and truncation, exit
    codes, timeouts that kill the whole group, no reading root's files.
*/
#include "testutil.h"
#include "sandbox.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

//  A private directory the sandboxed command (nobody when root) can write.
static void
s_make_dir (char *dir, size_t len)
{
    snprintf (dir, len, "/tmp/kgym-sbtest-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (dir));
    if (geteuid () == 0)
        ck_assert_int_eq (chown (dir, 65534, 65534), 0);
}

static void
s_remove_dir (const char *dir)
{
    char cmd [PATH_MAX + 16];
    snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq (system (cmd), 0);
}

static double
s_now (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

START_TEST (test_runner_found)
{
    const char *path = sandbox_runner_path ();
    ck_assert_ptr_nonnull (path);
    ck_assert_int_eq (access (path, X_OK), 0);
}
END_TEST

START_TEST (test_host_caps)
{
    const char *caps = sandbox_host_caps ();
    fprintf (stderr, "host caps: %s\n", caps);
    json_error_t jerr;
    json_t *json = json_loads (caps, 0, &jerr);
    ck_assert_msg (json != NULL, "not JSON: %s", caps);
    ck_assert (json_is_true (json_object_get (json, "seccomp")));
    ck_assert (json_is_true (json_object_get (json, "netns")));
    const char *cgroup = json_string_value (json_object_get (json, "cgroup"));
    ck_assert (cgroup && (!strcmp (cgroup, "v1") || !strcmp (cgroup, "v2") || !strcmp (cgroup, "none")));
    json_decref (json);
    //  Cached: the same text again.
    ck_assert_ptr_eq (sandbox_host_caps (), caps);
}
END_TEST

START_TEST (test_exec_output_and_status)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *argv [] = { "/bin/sh", "-c", "echo hello; echo oops >&2; touch made; exit 3", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 10.0, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    ck_assert (!timed_out);
    ck_assert_int_eq (status, 3);
    ck_assert_msg (strstr (output, "hello") && strstr (output, "oops"), "output: %s", output);
    free (output);
    //  It could write in its directory.
    char path [128];
    snprintf (path, sizeof path, "%s/made", dir);
    struct stat st;
    ck_assert_int_eq (stat (path, &st), 0);
    if (geteuid () == 0)
        ck_assert_int_eq (st.st_uid, 65534);
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_output_truncated)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *argv [] = { "/bin/sh", "-c", "yes kgym | head -c 300000", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 10.0, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    ck_assert_int_eq (status, 0);
    ck_assert_uint_le (strlen (output), 64 * 1024 + 64);
    ck_assert_msg (strstr (output, "[truncated]"), "no truncation marker");
    free (output);
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_timeout_kills_group)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    //  A child in the background and one in the foreground: both must die.
    char *argv [] = { "/bin/sh", "-c", "sleep 1000 & echo $! > bg; sleep 1000 & echo $! > fg; wait", NULL };
    //  As the worker should be: orphans of the killed group come to us and are reaped.
    ck_assert_int_eq (prctl (PR_SET_CHILD_SUBREAPER, 1), 0);
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = false;
    double t0 = s_now ();
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 0.5, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    double took = s_now () - t0;
    ck_assert (timed_out);
    ck_assert_msg (took < 5.0, "took %.2f s", took);
    free (output);
    const char *files [] = { "bg", "fg" };
    for (int i = 0; i < 2; i++) {
        char path [128], buf [32] = "";
        snprintf (path, sizeof path, "%s/%s", dir, files [i]);
        FILE *file = fopen (path, "r");
        ck_assert_ptr_nonnull (file);
        ck_assert_ptr_nonnull (fgets (buf, sizeof buf, file));
        fclose (file);
        int pid = atoi (buf);
        ck_assert_int_gt (pid, 0);
        //  Gone: killed and reaped (not even a zombie is left).
        char stat_path [64], line [512] = "";
        snprintf (stat_path, sizeof stat_path, "/proc/%d/stat", pid);
        file = fopen (stat_path, "r");
        if (file) {
            ck_assert_ptr_nonnull (fgets (line, sizeof line, file));
            fclose (file);
            ck_abort_msg ("%s (pid %d) is still there: %s", files [i], pid, line);
        }
    }
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_closed_output_still_times_out)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *argv [] = { "/bin/sh", "-c", "exec >&- 2>&-; while :; do :; done", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = false;
    double t0 = s_now ();
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 0.5, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    ck_assert (timed_out);
    ck_assert (s_now () - t0 < 3.0);
    free (output);
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_cannot_read_shadow)
{
    if (geteuid () != 0)
        return;                     //  only root could read it anyway
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char path [128];
    snprintf (path, sizeof path, "%s/k.c", dir);
    FILE *file = fopen (path, "w");
    ck_assert_ptr_nonnull (file);
    fputs ("#include \"/etc/shadow\"\n", file);
    fclose (file);
    chown (path, 65534, 65534);
    char *argv [] = { "/usr/bin/cc", "-c", "k.c", "-o", "k.o", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 30.0, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    ck_assert (!timed_out);
    ck_assert_int_ne (status, 0);
    ck_assert_msg (strstr (output, "Permission denied"), "output: %s", output);
    free (output);
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_no_network)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    //  A network namespace of its own: only lo.
    char *argv [] = { "/bin/sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 10.0, &output, &status, &timed_out,
                                           err, sizeof err), 0);
    ck_assert_msg (strcmp (output, "lo\n") == 0, "interfaces: %s", output);
    free (output);
    s_remove_dir (dir);
}
END_TEST

START_TEST (test_exec_bad_program)
{
    char *output = NULL, err [256] = "";
    int status = -1;
    bool timed_out = true;
    char *relative [] = { "cc", NULL };
    ck_assert_int_eq (sandbox_exec (NULL, relative, "/tmp", 5.0, &output, &status,
                                           &timed_out, err, sizeof err), -1);
    char *missing [] = { "/nonexistent/program", NULL };
    ck_assert_int_eq (sandbox_exec (NULL, missing, "/tmp", 5.0, &output, &status,
                                           &timed_out, err, sizeof err), 0);
    ck_assert_int_eq (status, 127);
    ck_assert_msg (strstr (output, "cannot run"), "output: %s", output);
    free (output);
}
END_TEST

START_TEST (test_sandbox_cgroup_removed)
{
    char err [256];
    sandbox_t *sandbox = sandbox_new (NULL, err, sizeof err);
    ck_assert_ptr_nonnull (sandbox);
    char path [4096] = "";
    if (sandbox_cgroup_path (sandbox))
        snprintf (path, sizeof path, "%s", sandbox_cgroup_path (sandbox));
    ck_assert_int_eq (sandbox_pid (sandbox), 0);
    sandbox_destroy (&sandbox);
    ck_assert_ptr_null (sandbox);
    sandbox_destroy (&sandbox);
    if (path [0]) {
        struct stat st;
        ck_assert_int_ne (stat (path, &st), 0);
    }
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("sandbox");
    TCase *tc = tcase_create ("sandbox");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_runner_found);
    tcase_add_test (tc, test_host_caps);
    tcase_add_test (tc, test_exec_output_and_status);
    tcase_add_test (tc, test_exec_output_truncated);
    tcase_add_test (tc, test_exec_timeout_kills_group);
    tcase_add_test (tc, test_exec_closed_output_still_times_out);
    tcase_add_test (tc, test_exec_cannot_read_shadow);
    tcase_add_test (tc, test_exec_no_network);
    tcase_add_test (tc, test_exec_bad_program);
    tcase_add_test (tc, test_sandbox_cgroup_removed);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
