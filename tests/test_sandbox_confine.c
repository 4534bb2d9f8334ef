/*  test_sandbox_confine - the pieces of the sandbox, one at a time: the
    runner's option parser, the uid range, cgroups (the v2 code path on the
    v2 mount without controllers this host has, the host's own kind), the
    runner's root (in a forked child: a view shows only what it lists and
    never writes to the host), and the seccomp filter installed in a child.
*/
#include "testutil.h"
#include "sandbox_cgroup.h"
#include "sandbox_confine.h"
#include "sandbox_root.h"
#include "sandbox_seccomp.h"
#include "sandbox_uid.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_V2_MOUNT "/sys/fs/cgroup/unified"

START_TEST (test_parse_takes_its_options)
{
    char *argv [] = { "prog", "--mode", "kernel", "--kind", "cc", "--sync", "5", "--uid", "1879048199",
                      "--cgroup", "/sys/fs/cgroup/x", "--ro", "/usr/bin", "--rw", "/tmp/w",
                      "--keep", "7", "--rlimit-cpu", "3", "--rlimit-fsize", "0", "--selftest",
                      "--sock", "9", "--", "--kind", "x", NULL };
    int argc = (int) (sizeof argv / sizeof argv [0]) - 1;
    sandbox_confine_args_t args;
    char err [256];
    int left = sandbox_confine_parse (argc, argv, &args, err, sizeof err);
    ck_assert_msg (left == 8, "left %d: %s", left, err);
    //  What is not the sandbox's stays, in order, "--" and after untouched.
    const char *want [] = { "prog", "--mode", "kernel", "--sock", "9", "--", "--kind", "x" };
    for (int i = 0; i < left; i++)
        ck_assert_str_eq (argv [i], want [i]);
    ck_assert_ptr_null (argv [left]);
    ck_assert_int_eq (args.kind, SANDBOX_CC);
    ck_assert_int_eq (args.sync, 5);
    ck_assert_uint_eq (args.uid, 1879048199u);
    ck_assert_str_eq (args.cgroups [0], "/sys/fs/cgroup/x");
    ck_assert_uint_eq (args.nro, 1);
    ck_assert_str_eq (args.rw, "/tmp/w");
    ck_assert_uint_eq (args.nkeep, 1);
    ck_assert_int_eq (args.keep [0], 7);
    ck_assert_uint_eq (args.rlimit_cpu, 3);
    ck_assert_uint_eq (args.rlimit_fsize, 0);
    ck_assert (args.rlimit_as == SANDBOX_RLIMIT_LEAVE);
    ck_assert (args.selftest);
}
END_TEST

START_TEST (test_parse_refuses_bad_options)
{
    static const char *bad [][6] = {
        { "prog", "--sync", "5", NULL },                            //  no kind
        { "prog", "--kind", "kernel", NULL },                       //  no sync
        { "prog", "--kind", "bogus", "--sync", "5", NULL },
        { "prog", "--kind", "kernel", "--sync", "1", NULL },        //  stdio is not a descriptor to pass
        { "prog", "--kind", "kernel", "--sync", "5x", NULL },
        { "prog", "--kind", "kernel", "--sync", "5", "--uid" },     //  missing value
        { "prog", "--kind", "kernel", "--sync", "5", "--ro" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        char *argv [8] = { NULL };
        int argc = 0;
        while (argc < 6 && bad [i][argc])
            argv [argc] = (char *) bad [i][argc], argc++;
        sandbox_confine_args_t args;
        char err [256] = "";
        ck_assert_msg (sandbox_confine_parse (argc, argv, &args, err, sizeof err) == -1,
                       "case %zu accepted", i);
        ck_assert_msg (err [0], "case %zu: no reason given", i);
    }
    char *both [] = { "prog", "--kind", "kernel", "--sync", "5", "--uid", "7", "--userns", NULL };
    sandbox_confine_args_t args;
    char err [256] = "";
    ck_assert_int_eq (sandbox_confine_parse (8, both, &args, err, sizeof err), -1);
}
END_TEST

START_TEST (test_uid_range)
{
    uid_t first, count;
    char err [256];
    unsetenv ("KGYM_SANDBOX_UIDS");
    ck_assert_int_eq (sandbox_uid_range (&first, &count, err, sizeof err), 0);
    ck_assert_uint_eq (first, SANDBOX_UID_FIRST);
    ck_assert_uint_eq (count, SANDBOX_UID_COUNT);
    setenv ("KGYM_SANDBOX_UIDS", "3000000000-3000000009", 1);
    ck_assert_int_eq (sandbox_uid_range (&first, &count, err, sizeof err), 0);
    ck_assert_uint_eq (first, 3000000000u);
    ck_assert_uint_eq (count, 10);
    const char *bad [] = { "0-10", "10", "20-10", "60000-70000", "1-4294967295", "x-y", "5-6-7" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        setenv ("KGYM_SANDBOX_UIDS", bad [i], 1);
        ck_assert_msg (sandbox_uid_range (&first, &count, err, sizeof err) == -1, "'%s' accepted", bad [i]);
        ck_assert_ptr_null (sandbox_uid_new (err, sizeof err));
    }
    unsetenv ("KGYM_SANDBOX_UIDS");
}
END_TEST

START_TEST (test_uids_are_distinct_and_come_back)
{
    //  A small range of our own, so the test fills it.
    char range [64];
    uid_t base = 3000000000u + (uid_t) (getpid () % 100000) * 4;
    snprintf (range, sizeof range, "%u-%u", (unsigned) base, (unsigned) base + 2);
    setenv ("KGYM_SANDBOX_UIDS", range, 1);
    char err [256];
    sandbox_uid_t *uids [3];
    for (int i = 0; i < 3; i++) {
        uids [i] = sandbox_uid_new (err, sizeof err);
        ck_assert_msg (uids [i] != NULL, "uid %d: %s", i, err);
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne (sandbox_uid_number (uids [i]), sandbox_uid_number (uids [j]));
    }
    //  Full: a fourth is refused, with the reason.
    ck_assert_ptr_null (sandbox_uid_new (err, sizeof err));
    ck_assert_msg (strstr (err, "in use"), "err: %s", err);
    //  Another process sees them held too (the lock is host-wide).
    pid_t pid = fork ();
    if (pid == 0)
        _exit (sandbox_uid_new (err, sizeof err) == NULL? 0: 1);
    int status = -1;
    waitpid (pid, &status, 0);
    ck_assert_int_eq (status, 0);
    uid_t freed = sandbox_uid_number (uids [1]);
    sandbox_uid_destroy (&uids [1]);
    ck_assert_ptr_null (uids [1]);
    uids [1] = sandbox_uid_new (err, sizeof err);
    ck_assert_ptr_nonnull (uids [1]);
    ck_assert_uint_eq (sandbox_uid_number (uids [1]), freed);
    for (int i = 0; i < 3; i++)
        sandbox_uid_destroy (&uids [i]);
    unsetenv ("KGYM_SANDBOX_UIDS");
}
END_TEST

//  The v2 code path, on the v2 mount this host has (no controllers): make,
//  join, see the member, kill it with cgroup.kill, remove.
START_TEST (test_cgroup_v2_path)
{
    char err [256], path [256];
    struct stat st;
    if (geteuid () != 0 || stat (S_V2_MOUNT "/cgroup.procs", &st) != 0) {
        fprintf (stderr, "no writable cgroup v2 mount here: skipped\n");
        return;
    }
    char name [64];
    snprintf (name, sizeof name, "kgym-test-%d", (int) getpid ());
    sandbox_cgroup_t *cg = sandbox_cgroup_new_at (2, S_V2_MOUNT, name, 256ull << 20, 16, err, sizeof err);
    ck_assert_msg (cg != NULL, "v2 cgroup: %s", err);
    ck_assert_str_eq (sandbox_cgroup_version (cg), "v2");
    snprintf (path, sizeof path, "%s/%s", S_V2_MOUNT, name);
    ck_assert_str_eq (sandbox_cgroup_dir (cg, 0), path);
    ck_assert_ptr_null (sandbox_cgroup_dir (cg, 1));
    //  No memory or pids controller here: no cap binds, and it says so.
    if (access ("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0 && sandbox_cgroup_memory (cg) == 0)
        ck_assert_uint_eq (sandbox_cgroup_pids (cg), 0);
    ck_assert_int_eq (sandbox_cgroup_procs (cg), 0);
    int ready [2];
    ck_assert_int_eq (pipe (ready), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        char procs [300];
        snprintf (procs, sizeof procs, "%s/cgroup.procs", path);
        int fd = open (procs, O_WRONLY);
        if (fd < 0 || write (fd, "0", 1) != 1)
            _exit (1);
        close (fd);
        if (write (ready [1], "x", 1) != 1)
            _exit (2);
        for (;;)
            pause ();
    }
    char byte;
    ck_assert_int_eq (read (ready [0], &byte, 1), 1);
    ck_assert (sandbox_cgroup_contains (cg, pid));
    ck_assert (!sandbox_cgroup_contains (cg, getpid ()));
    ck_assert_int_eq (sandbox_cgroup_procs (cg), 1);
    ck_assert (!sandbox_cgroup_oom (cg));
    sandbox_cgroup_empty (cg);
    int status = 0;
    ck_assert_int_eq (waitpid (pid, &status, 0), pid);
    ck_assert (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
    sandbox_cgroup_destroy (&cg);
    ck_assert_ptr_null (cg);
    ck_assert_int_ne (stat (path, &st), 0);
    close (ready [0]);
    close (ready [1]);
}
END_TEST

START_TEST (test_cgroup_host)
{
    const char *host = sandbox_cgroup_host ();
    fprintf (stderr, "host cgroups: %s\n", host);
    ck_assert (!strcmp (host, "v2") || !strcmp (host, "v1") || !strcmp (host, "none"));
    if (geteuid () != 0) {
        ck_assert_str_eq (host, "none");
        ck_assert_ptr_null (sandbox_cgroup_new (NULL, 1 << 30, 8));
        return;
    }
    sandbox_cgroup_t *cg = sandbox_cgroup_new (NULL, 256ull << 20, 16);
    if (!cg)
        return;
    ck_assert_str_eq (sandbox_cgroup_version (cg), host);
    //  The caps read back are what was written.
    ck_assert_uint_eq (sandbox_cgroup_memory (cg), 256ull << 20);
    ck_assert_uint_eq (sandbox_cgroup_pids (cg), 16);
    char dir [PATH_MAX];
    snprintf (dir, sizeof dir, "%s", sandbox_cgroup_dir (cg, 0));
    sandbox_cgroup_destroy (&cg);
    struct stat st;
    ck_assert_int_ne (stat (dir, &st), 0);
}
END_TEST

//  In a child (its own mount namespace): a view holds what it lists and
//  nothing else; listing the tree shows no host file.
START_TEST (test_view_holds_only_its_paths)
{
    if (geteuid () != 0)
        return;                     //  the unprivileged path is covered through the runners
    char dir [] = "/tmp/kgym-view-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    pid_t pid = fork ();
    if (pid == 0) {
        const char *ro [] = { "/usr/bin", "/bin", "/nonexistent/kgym", "/usr/bin/env", "/dev/null" };
        char err [256];
        if (sandbox_root_enter (SANDBOX_ROOT_VIEW, ro, 5, dir, NULL, -1, err, sizeof err) != 0) {
            fprintf (stderr, "view: %s\n", err);
            _exit (1);
        }
        struct stat st;
        char cwd [256];
        if (stat ("/etc/passwd", &st) == 0 || stat ("/proc/self", &st) == 0 || stat ("/usr/lib", &st) == 0)
            _exit (2);                  //  host files
        if (stat ("/usr/bin/env", &st) != 0 || stat ("/bin/sh", &st) != 0 || !getcwd (cwd, sizeof cwd)
        ||  strcmp (cwd, dir) != 0)
            _exit (3);                  //  listed paths
        //  Read-only everywhere but the writable directory.
        if (open ("/usr/bin/kgym-x", O_WRONLY | O_CREAT, 0600) >= 0 || errno != EROFS
        ||  mkdir ("/kgym-x", 0700) == 0 || errno != EROFS)
            _exit (4);
        int fd = open ("made", O_WRONLY | O_CREAT, 0600);
        if (fd < 0)
            _exit (5);
        close (fd);
        //  One entry at the top: the symlink to usr/bin, the two trees.
        DIR *d = opendir ("/");
        struct dirent *e;
        int entries = 0;
        while (d && (e = readdir (d)))
            entries += e->d_name [0] != '.';
        _exit (entries == 4? 0: 10 + entries);     //  bin, dev, tmp, usr
    }
    int status = -1;
    waitpid (pid, &status, 0);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child: status 0x%x", status);
    char made [64];
    snprintf (made, sizeof made, "%s/made", dir);
    struct stat st;
    ck_assert_int_eq (stat (made, &st), 0);
    unlink (made);
    rmdir (dir);
}
END_TEST

//  The writable directory shown at a place of its own: the runner works
//  in the same path whatever the host's directory is, and the host's path
//  is not in its view.
START_TEST (test_view_places_its_directory)
{
    if (geteuid () != 0)
        return;
    char dir [] = "/tmp/kgym-at-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    pid_t pid = fork ();
    if (pid == 0) {
        const char *ro [] = { "/usr/bin", "/bin" };
        char err [256], cwd [256];
        if (sandbox_root_enter (SANDBOX_ROOT_VIEW, ro, 2, dir, "/kgym/work", -1, err, sizeof err) != 0) {
            fprintf (stderr, "view: %s\n", err);
            _exit (1);
        }
        struct stat st;
        if (!getcwd (cwd, sizeof cwd) || strcmp (cwd, "/kgym/work") != 0)
            _exit (2);
        if (stat (dir, &st) == 0 || stat ("/tmp", &st) == 0)
            _exit (3);                  //  the host's path
        int fd = open ("/kgym/work/made", O_WRONLY | O_CREAT, 0600);
        if (fd < 0 || mkdir ("/kgym/other", 0700) == 0 || errno != EROFS)
            _exit (4);
        close (fd);
        _exit (0);
    }
    int status = -1;
    waitpid (pid, &status, 0);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child: status 0x%x", status);
    char made [64];
    snprintf (made, sizeof made, "%s/made", dir);
    struct stat st;
    ck_assert_int_eq (stat (made, &st), 0);
    unlink (made);
    rmdir (dir);
    //  Not the root, not a path with "..".
    const char *bad [] = { "/", "/kgym/../etc", "kgym" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        pid = fork ();
        if (pid == 0) {
            char err [256];
            const char *ro [] = { "/bin" };
            _exit (sandbox_root_enter (SANDBOX_ROOT_VIEW, ro, 1, "/tmp", bad [i], -1, err, sizeof err) == -1
                   && strstr (err, "bad place")? 0: 1);
        }
        waitpid (pid, &status, 0);
        ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "'%s' accepted", bad [i]);
    }
}
END_TEST

//  What is mounted below a listed path shows too (a container's runtime
//  mounts the GPU driver's libraries file by file into /usr/lib), and is
//  read-only like the rest.
START_TEST (test_view_shows_mounts_below)
{
    if (geteuid () != 0)
        return;
    char top [] = "/tmp/kgym-below-XXXXXX", rw [] = "/tmp/kgym-below-rw-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (top));
    ck_assert_ptr_nonnull (mkdtemp (rw));
    char sub [96], file [128];
    snprintf (sub, sizeof sub, "%s/sub", top);
    snprintf (file, sizeof file, "%s/lib.so", sub);
    ck_assert_int_eq (mkdir (sub, 0755), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        //  The mount is the child's own: nothing is left on the host.
        if (unshare (CLONE_NEWNS) != 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
        ||  mount ("tmpfs", sub, "tmpfs", 0, "size=64k") != 0)
            _exit (1);
        int fd = open (file, O_WRONLY | O_CREAT, 0644);
        if (fd < 0 || write (fd, "elf", 3) != 3)
            _exit (2);
        close (fd);
        const char *ro [] = { top };
        char err [256];
        if (sandbox_root_enter (SANDBOX_ROOT_VIEW, ro, 1, rw, NULL, -1, err, sizeof err) != 0) {
            fprintf (stderr, "view: %s\n", err);
            _exit (3);
        }
        char buf [8] = { 0 };
        fd = open (file, O_RDONLY);
        if (fd < 0 || read (fd, buf, sizeof buf) != 3 || strcmp (buf, "elf") != 0)
            _exit (4);                  //  the mount below is missing
        close (fd);
        if (open (file, O_WRONLY) >= 0 || errno != EROFS)
            _exit (5);                  //  writable below
        _exit (0);
    }
    int status = -1;
    waitpid (pid, &status, 0);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child: status 0x%x", status);
    rmdir (sub);
    rmdir (top);
    rmdir (rw);
}
END_TEST

START_TEST (test_view_refuses_bad_paths)
{
    if (geteuid () != 0)
        return;
    const char *bad [] = { "usr/bin", "/usr/../etc", "/usr//bin", "/usr/./bin" };
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        pid_t pid = fork ();
        if (pid == 0) {
            char err [256];
            _exit (sandbox_root_enter (SANDBOX_ROOT_VIEW, &bad [i], 1, NULL, NULL, -1, err, sizeof err) == -1
                   && strstr (err, "bad path")? 0: 1);
        }
        int status = -1;
        waitpid (pid, &status, 0);
        ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "'%s' accepted", bad [i]);
    }
}
END_TEST

//  The filter in a child: what the kernel kind denies, pinned to its CPU
//  (the strictest filter), fails with the test errno, what it allows works.
START_TEST (test_seccomp_in_child)
{
    int sv [2];
    ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork ();
    if (pid == 0) {
        char err [256];
        close (sv [0]);
        if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        ||  sandbox_seccomp_load (SANDBOX_SECCOMP_PINNED, SANDBOX_SECCOMP_TEST_ERRNO, err, sizeof err) != 0)
            _exit (1);
        sandbox_seccomp_selftest (SANDBOX_SECCOMP_PINNED, sv [1]);
        struct rlimit rl;
        //  Its own limits and threads are its own business.
        _exit (getrlimit (RLIMIT_NOFILE, &rl) == 0 && setrlimit (RLIMIT_NOFILE, &rl) == 0? 0: 2);
    }
    close (sv [1]);
    char report [8192] = "";
    size_t used = 0;
    ssize_t n;
    while (used + 1 < sizeof report && (n = read (sv [0], report + used, sizeof report - 1 - used)) > 0)
        used += (size_t) n;
    close (sv [0]);
    int status = -1;
    waitpid (pid, &status, 0);
    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "child status 0x%x", status);
    json_error_t jerr;
    json_t *json = json_loads (report, 0, &jerr);
    ck_assert_msg (json != NULL, "report: %s", report);
    const char *key;
    json_t *value;
    json_object_foreach (json, key, value) {
        int want = !strcmp (key, "clone3") || !strcmp (key, "openat2")? ENOSYS: SANDBOX_SECCOMP_TEST_ERRNO;
        ck_assert_msg (json_integer_value (value) == want, "%s: errno %lld, want %d", key,
                       (long long) json_integer_value (value), want);
    }
    ck_assert_uint_gt (json_object_size (json), 80);
    json_decref (json);
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("sandbox_confine");
    TCase *tc = tcase_create ("confine");
    tcase_add_test (tc, test_parse_takes_its_options);
    tcase_add_test (tc, test_parse_refuses_bad_options);
    tcase_add_test (tc, test_uid_range);
    tcase_add_test (tc, test_uids_are_distinct_and_come_back);
    tcase_add_test (tc, test_cgroup_v2_path);
    tcase_add_test (tc, test_cgroup_host);
    tcase_add_test (tc, test_view_holds_only_its_paths);
    tcase_add_test (tc, test_view_shows_mounts_below);
    tcase_add_test (tc, test_view_places_its_directory);
    tcase_add_test (tc, test_view_refuses_bad_paths);
    tcase_add_test (tc, test_seccomp_in_child);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
