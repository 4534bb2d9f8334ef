/*  test_sandbox - finding kgym-runner, what the host allows, and
    exec mode (the compiler's and the interpreter's sandbox): output capture
    and truncation, exit codes, timeouts that kill everything the program
    started, a view that holds the toolchain only, a runner that claims to
    be confined and is not refused.
*/
#include "testutil.h"
#include "sandbox.h"
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

//  A private directory for the sandboxed command (the sandbox hands it to
//  the runner's uid).
static void
s_make_dir (char *dir, size_t len)
{
    snprintf (dir, len, "/tmp/kgym-sbtest-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (dir));
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
    ck_assert (json_is_true (json_object_get (json, "pidns")));
    ck_assert_str_eq (json_string_value (json_object_get (json, "root")), "empty");
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
    //  As root, by a uid of the sandbox's range, not root or nobody.
    if (geteuid () == 0)
        ck_assert_uint_ge (st.st_uid, 65536);
    else
        ck_assert_uint_eq (st.st_uid, geteuid ());
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
    //  Children in the background and in the foreground: all must die. A
    //  slot keeps the cgroup after the runner, so we can look into it.
    char *argv [] = { "/bin/sh", "-c", "sleep 1000 & sleep 1000 & (sleep 1000 &) ; echo started; wait", NULL };
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.kind = SANDBOX_CC;
    char slot [32];
    snprintf (slot, sizeof slot, "exec%d", (int) getpid ());
    cfg.slot = slot;
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = false;
    double t0 = s_now ();
    ck_assert_int_eq (sandbox_exec (&cfg, argv, dir, 0.5, &output, &status, &timed_out,
                                    err, sizeof err), 0);
    double took = s_now () - t0;
    ck_assert (timed_out);
    ck_assert_msg (took < 5.0, "took %.2f s", took);
    ck_assert_msg (strstr (output, "started"), "output: %s", output);
    free (output);
    //  Nothing of it is left: its cgroup is empty (where the host has one).
    sandbox_t *look = sandbox_new (&cfg, err, sizeof err);
    ck_assert_ptr_nonnull (look);
    if (sandbox_cgroup_path (look))
        ck_assert_int_eq (sandbox_cgroup_count (look), 0);
    sandbox_destroy (&look);
    sandbox_slot_remove (slot);
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

//  The compiler's root: its toolchain, read-only, and its own directory.
START_TEST (test_exec_sees_only_its_view)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *argv [] = { "/bin/sh", "-c", "ls /; ls /dev; cat /etc/passwd; ls /proc; touch /usr/x; touch ok", NULL };
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 30.0, &output, &status, &timed_out,
                                    err, sizeof err), 0);
    ck_assert (!timed_out);
    ck_assert_int_eq (status, 0);
    //  bin, lib, lib64 (merged /usr: symlinks), dev, tmp (its directory's
    //  parents), usr; /dev has null only; no /etc, no /proc.
    ck_assert_msg (strstr (output, "bin\ndev\nlib\nlib64\ntmp\nusr\nnull\n"), "output: %s", output);
    ck_assert_msg (strstr (output, "/etc/passwd: No such file"), "output: %s", output);
    ck_assert_msg (strstr (output, "/proc': No such file"), "output: %s", output);
    ck_assert_msg (strstr (output, "Read-only file system"), "output: %s", output);
    ck_assert_msg (strstr (output, "root:") == NULL, "output: %s", output);
    free (output);
    char path [128];
    snprintf (path, sizeof path, "%s/ok", dir);
    struct stat st;
    ck_assert_int_eq (stat (path, &st), 0);
    s_remove_dir (dir);
}
END_TEST

//  No socket of any kind for the compiler (its network namespace is empty
//  anyway: the caps say netns, checked by the supervisor).
START_TEST (test_exec_no_sockets)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *argv [] = { "/usr/bin/python3", "-c",
                      "import socket\n"
                      "for f in (socket.AF_INET, socket.AF_UNIX):\n"
                      "  try: socket.socket(f); print('open')\n"
                      "  except OSError as e: print(e.errno)\n", NULL };
    if (access (argv [0], X_OK) != 0)
        return;
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_int_eq (sandbox_exec (NULL, argv, dir, 30.0, &output, &status, &timed_out,
                                    err, sizeof err), 0);
    ck_assert_msg (strcmp (output, "1\n1\n") == 0, "socket errnos: %s", output);
    free (output);
    s_remove_dir (dir);
}
END_TEST

//  The next backend's runner, an interpreter, is one more kind: it starts
//  confined in a view of its own, writes only its private directory.
START_TEST (test_python_kind)
{
    char *argv [] = { "/usr/bin/python3", "-c",
                      "import os, sys, json\n"
                      "open('scratch', 'w').write('x')\n"
                      "try: open('/etc/passwd')\n"
                      "except OSError as e: print('passwd', e.errno)\n"
                      "try: open('/usr/lib/x', 'w')\n"
                      "except OSError as e: print('usr', e.errno)\n"
                      "print('pid', os.getpid(), 'version', sys.version_info[0])\n", NULL };
    if (access (argv [0], X_OK) != 0)
        return;
    char dir [64];
    s_make_dir (dir, sizeof dir);
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.kind = SANDBOX_PYTHON;
    char *output = NULL, err [256];
    int status = -1;
    bool timed_out = true;
    ck_assert_msg (sandbox_exec (&cfg, argv, dir, 30.0, &output, &status, &timed_out, err, sizeof err) == 0,
                   "python: %s", err);
    ck_assert_msg (status == 0, "status %d: %s", status, output);
    ck_assert_msg (strstr (output, "passwd 2\nusr 30\npid 1 version 3\n"), "output: %s", output);
    free (output);
    char path [128];
    snprintf (path, sizeof path, "%s/scratch", dir);
    struct stat st;
    ck_assert_int_eq (stat (path, &st), 0);
    s_remove_dir (dir);
}
END_TEST

//  A sandbox whose runner is a script of text, written to a new file made
//  from the template script (the caller unlinks it).
static sandbox_t *
s_script_sandbox (char *script, const char *text)
{
    int fd = mkstemp (script);
    ck_assert_int_ge (fd, 0);
    ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    ck_assert_int_eq (chmod (script, 0755), 0);
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.runner_path = script;
    char err [512] = "";
    sandbox_t *sandbox = sandbox_new (&cfg, err, sizeof err);
    ck_assert_msg (sandbox, "sandbox_new: %s", err);
    return sandbox;
}

//  A program that says "confined" without being so is refused: the
//  supervisor looks at it, it does not take its word.
START_TEST (test_lying_runner_refused)
{
    char script [] = "/tmp/kgym-liar-XXXXXX";
    sandbox_t *sandbox = s_script_sandbox (script,
        "#!/bin/bash\n"
        "while [ $# -gt 0 ]; do [ \"$1\" = --sync ] && fd=$2; shift; done\n"
        "eval \"echo confined >&$fd\"\n"
        "exec sleep 30\n");
    char err [512] = "";
    sandbox_spawn_t what = { .object_fd = -1, .out_fd = -1 };
    ck_assert_int_eq (sandbox_spawn (sandbox, &what, err, sizeof err), 0);
    ck_assert_int_eq (sandbox_confirm (sandbox, 10.0, err, sizeof err), -1);
    ck_assert_msg (strstr (err, "not confined as asked"), "err: %s", err);
    //  ...and killed.
    ck_assert_int_eq (sandbox_pid (sandbox), 0);
    ck_assert_str_eq (sandbox_caps (sandbox), "{}");
    sandbox_destroy (&sandbox);
    unlink (script);
}
END_TEST

//  A runner's threads pinned to one CPU (sandbox_pin), as the kernel
//  says; nothing to pin before the spawn, nor a CPU out of range.
START_TEST (test_pin_to_one_cpu)
{
    cpu_set_t mine;
    ck_assert_int_eq (sched_getaffinity (0, sizeof mine, &mine), 0);
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET (c, &mine))
            cpu = c;                    //  the last this process may use
    ck_assert_int_ge (cpu, 0);
    char script [] = "/tmp/kgym-pin-XXXXXX";
    sandbox_t *sandbox = s_script_sandbox (script, "#!/bin/bash\nexec sleep 30\n");
    char err [512] = "";
    ck_assert_int_eq (sandbox_pin (sandbox, cpu), -1);
    sandbox_spawn_t what = { .object_fd = -1, .out_fd = -1 };
    ck_assert_int_eq (sandbox_spawn (sandbox, &what, err, sizeof err), 0);
    ck_assert_int_eq (sandbox_pin (sandbox, -1), -1);
    ck_assert_int_eq (sandbox_pin (sandbox, CPU_SETSIZE), -1);
    ck_assert_int_eq (sandbox_pin (sandbox, cpu), 0);
    cpu_set_t got;
    ck_assert_int_eq (sched_getaffinity (sandbox_pid (sandbox), sizeof got, &got), 0);
    ck_assert_int_eq (CPU_COUNT (&got), 1);
    ck_assert (CPU_ISSET (cpu, &got));
    sandbox_destroy (&sandbox);
    unlink (script);
}
END_TEST

START_TEST (test_exec_bad_program)
{
    char dir [64];
    s_make_dir (dir, sizeof dir);
    char *output = NULL, err [256] = "";
    int status = -1;
    bool timed_out = true;
    char *relative [] = { "cc", NULL };
    ck_assert_int_eq (sandbox_exec (NULL, relative, dir, 5.0, &output, &status,
                                    &timed_out, err, sizeof err), -1);
    char *missing [] = { "/nonexistent/program", NULL };
    ck_assert_int_eq (sandbox_exec (NULL, missing, dir, 5.0, &output, &status,
                                    &timed_out, err, sizeof err), 0);
    ck_assert_int_eq (status, 127);
    ck_assert_msg (strstr (output, "cannot run"), "output: %s", output);
    free (output);
    //  A tree others use is no runner's writable directory.
    char *sh [] = { "/bin/true", NULL };
    ck_assert_int_eq (sandbox_exec (NULL, sh, "/tmp", 5.0, &output, &status, &timed_out,
                                    err, sizeof err), -1);
    ck_assert_msg (strstr (err, "not a private directory"), "err: %s", err);
    struct stat st;
    ck_assert_int_eq (stat ("/tmp", &st), 0);
    ck_assert_uint_eq (st.st_uid, 0);
    s_remove_dir (dir);
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
    tcase_add_test (tc, test_pin_to_one_cpu);
    tcase_add_test (tc, test_exec_output_and_status);
    tcase_add_test (tc, test_exec_output_truncated);
    tcase_add_test (tc, test_exec_timeout_kills_group);
    tcase_add_test (tc, test_exec_closed_output_still_times_out);
    tcase_add_test (tc, test_exec_sees_only_its_view);
    tcase_add_test (tc, test_exec_no_sockets);
    tcase_add_test (tc, test_python_kind);
    tcase_add_test (tc, test_lying_runner_refused);
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
