/*  test_sandbox_confine - what sandbox_confine enforces, proved in a child.

    Each test forks (libcheck does) and confines that child, then tries what
    a hostile kernel's host-side accomplice would: open a TCP socket, exec,
    fork, ptrace. No GPU needed.
*/
#include "testutil.h"
#include "sandbox_confine.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void *
s_thread (void *arg)
{
    return arg;
}

START_TEST (test_seccomp_denies_network_exec_fork)
{
    sandbox_confine_opts_t opts;
    memset (&opts, 0, sizeof opts);
    opts.netns = true;
    opts.drop_to_nobody = true;
    opts.rlimit_nofile = 64;
    opts.seccomp = true;
    char caps [1024], err [256];
    ck_assert_msg (sandbox_confine (&opts, caps, sizeof caps, err, sizeof err) == 0, "confine: %s", err);
    json_error_t jerr;
    json_t *json = json_loads (caps, 0, &jerr);
    ck_assert_msg (json != NULL, "caps are JSON: %s", caps);
    ck_assert (json_is_true (json_object_get (json, "seccomp")));
    ck_assert (json_is_true (json_object_get (json, "no_new_privs")));
    json_decref (json);

    //  AF_UNIX stays (CUDA's cuInit needs it); the network does not.
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge (fd, 0);
    close (fd);
    errno = 0;
    ck_assert_int_eq (socket (AF_INET, SOCK_STREAM, 0), -1);
    ck_assert_int_eq (errno, EAFNOSUPPORT);
    ck_assert_int_eq (socket (AF_INET6, SOCK_DGRAM, 0), -1);
    ck_assert_int_eq (socket (AF_NETLINK, SOCK_RAW, 0), -1);
    char *argv [] = { "/bin/true", NULL };
    errno = 0;
    ck_assert_int_eq (execv ("/bin/true", argv), -1);
    ck_assert_int_eq (errno, EPERM);
    ck_assert_int_eq (fork (), -1);
    ck_assert_int_eq (ptrace (PTRACE_TRACEME, 0, NULL, NULL), -1);
    ck_assert_int_eq (prctl (PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
    //  Threads still work (CUDA makes its own): clone3 falls back to clone.
    pthread_t thread;
    ck_assert_int_eq (pthread_create (&thread, NULL, s_thread, NULL), 0);
    ck_assert_int_eq (pthread_join (thread, NULL), 0);
}
END_TEST

START_TEST (test_deny_write_blocks_file_creation)
{
    sandbox_confine_opts_t opts;
    memset (&opts, 0, sizeof opts);
    opts.seccomp = true;
    opts.seccomp_allow = SANDBOX_CONFINE_DENY_WRITE;
    char caps [1024], err [256];
    ck_assert_msg (sandbox_confine (&opts, caps, sizeof caps, err, sizeof err) == 0, "confine: %s", err);
    ck_assert_int_eq (open ("/tmp/kgym-confine-should-not-exist", O_WRONLY | O_CREAT, 0600), -1);
    ck_assert_int_eq (errno, EPERM);
    int fd = open ("/etc/hostname", O_RDONLY);
    if (fd >= 0)
        close (fd);
    ck_assert_int_eq (mkdir ("/tmp/kgym-confine-dir", 0700), -1);
}
END_TEST

START_TEST (test_landlock_limits_reads)
{
    sandbox_confine_opts_t opts;
    memset (&opts, 0, sizeof opts);
    opts.landlock_read [0] = "/usr/lib";
    opts.landlock_read [1] = "/lib";
    char caps [1024], err [256];
    ck_assert_msg (sandbox_confine (&opts, caps, sizeof caps, err, sizeof err) == 0, "confine: %s", err);
    if (!strstr (caps, "\"landlock\":true"))
        return;             //  kernel without Landlock: reported, nothing more to prove
    ck_assert_int_eq (open ("/etc/hostname", O_RDONLY), -1);
    ck_assert_int_ge (open ("/usr/lib", O_RDONLY | O_DIRECTORY), 0);
}
END_TEST

START_TEST (test_cgroup_slot_when_host_allows)
{
    sandbox_confine_cgroup_t cg;
    char err [256];
    if (sandbox_confine_cgroup_new ("test-confine", 256ull << 20, 16, &cg, err, sizeof err)) {
        printf ("cgroup not available here: %s\n", err);
        return;
    }
    ck_assert_int_gt (cg.version, 0);
    ck_assert_uint_gt (cg.ndirs, 0);
    pid_t pid = fork ();
    ck_assert_int_ge (pid, 0);
    if (pid == 0) {
        sandbox_confine_opts_t opts;
        memset (&opts, 0, sizeof opts);
        for (size_t i = 0; i < cg.ndirs; i++)
            opts.cgroups [i] = cg.dirs [i];
        char caps [1024], e [256];
        if (sandbox_confine (&opts, caps, sizeof caps, e, sizeof e))
            _exit (1);
        _exit (strstr (caps, "\"memory_max\":268435456")? 0: 2);
    }
    int status = 0;
    waitpid (pid, &status, 0);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child status %d", status);
    sandbox_confine_cgroup_remove (&cg);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("sandbox_confine");
    TCase *tc = tcase_create ("confine");
    tcase_add_test (tc, test_seccomp_denies_network_exec_fork);
    tcase_add_test (tc, test_deny_write_blocks_file_creation);
    tcase_add_test (tc, test_landlock_limits_reads);
    tcase_add_test (tc, test_cgroup_slot_when_host_allows);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
