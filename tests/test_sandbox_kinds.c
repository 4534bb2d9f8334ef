/*  test_sandbox_kinds - every runner kind is confined the same way.

    Each kind's real program (kgym-runner in kernel, exec-for-cc and
    exec-for-python modes, kgym-nvrtc, kgym-cuda-runner: the last confines
    before cuInit, so no GPU is needed) is started through the sandbox in
    its self-test mode: once confined and checked by the supervisor, it
    attempts every call the filter can deny and reports the errno of each.
    The test holds its own table of what each kind may do (kept apart from
    sandbox_kind.c on purpose): every other call must be refused by the
    filter (the self-test's marker errno) in every kind, and every kind's
    caps object has the same keys, built by the supervisor.
*/
#include "testutil.h"
#include "sandbox.h"
#include "sandbox_seccomp.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

//  Calls a relaxation allows, by relaxation (the self-test's names).
static const char *s_unix [] = { "socket_unix", "socketpair_unix", NULL };
static const char *s_procs [] = { "fork", "clone_process", "execve", "execveat", "tgkill_other",
                                  "rt_tgsigqueueinfo_other", NULL };
static const char *s_files [] = { "open_write", "openat_write", "openat_append", "openat2", "creat",
                                  "mkdir", "rmdir", "unlink", "rename", "link", "symlink", "chmod",
                                  "fchmodat2", "truncate", "ftruncate", "fallocate", "utimensat", NULL };
static const char *s_affinity [] = { "sched_setaffinity_other", NULL };
//  Its own threads' CPUs: every kind but a pinned runner (s_selftest's pinned).
static const char *s_own_affinity [] = { "sched_setaffinity_self", NULL };

typedef struct {
    sandbox_kind_t kind;
    const char *root;           //  "empty", "view", "host"
    const char **relaxed [5];   //  groups it may use, NULL-terminated
} s_kind_t;

static const s_kind_t s_kinds [] = {
    { SANDBOX_KERNEL, "empty", { s_own_affinity, NULL } },
    { SANDBOX_CC, "view", { s_procs, s_files, s_own_affinity, NULL } },
    { SANDBOX_NVRTC, "view", { s_own_affinity, NULL } },
    { SANDBOX_CUDA, "host", { s_unix, s_files, s_affinity, s_own_affinity, NULL } },
    { SANDBOX_PYTHON, "view", { s_unix, s_procs, s_files, s_own_affinity, NULL } },
};

static bool
s_relaxed (const s_kind_t *kind, const char *name)
{
    for (int g = 0; kind->relaxed [g]; g++)
        for (int i = 0; kind->relaxed [g][i]; i++)
            if (strcmp (kind->relaxed [g][i], name) == 0)
                return true;
    return false;
}

//  Start kind in self-test mode; its caps and report (caller frees both).
//  false when its program is not built here.
static bool
s_selftest_as (sandbox_kind_t kind, bool pinned, json_t **caps, json_t **report)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.kind = kind;
    cfg.pinned = pinned;
    cfg.selftest = true;
    char err [512] = "";
    sandbox_t *sandbox = sandbox_new (&cfg, err, sizeof err);
    if (!sandbox && strstr (err, "not found") && (kind == SANDBOX_NVRTC || kind == SANDBOX_CUDA)) {
        fprintf (stderr, "kind %d: %s (built without CUDA): skipped\n", (int) kind, err);
        return false;
    }
    ck_assert_msg (sandbox != NULL, "kind %d: %s", (int) kind, err);
    char dir [] = "/tmp/kgym-kinds-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    int sv [2] = { -1, -1 }, shm = -1;
    char sock_text [16], shm_text [16];
    char *kernel_args [] = { "--mode", "kernel", "--sock", sock_text, "--shm", shm_text, NULL };
    char *cc_args [] = { "--mode", "exec", "--", "/bin/true", NULL };
    char *python_args [] = { "--mode", "exec", "--", "/usr/bin/python3", NULL };
    char *cuda_args [] = { "--serve", "--device", "0", NULL };
    int keep [3] = { -1, -1, -1 };
    sandbox_spawn_t what = { .object_fd = -1, .out_fd = -1, .cwd = dir };
    if (kind == SANDBOX_KERNEL) {
        ck_assert_int_eq (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        shm = memfd_create ("kinds", MFD_CLOEXEC);
        snprintf (sock_text, sizeof sock_text, "%d", sv [1]);
        snprintf (shm_text, sizeof shm_text, "%d", shm);
        keep [0] = sv [1];
        keep [1] = shm;
        what.args = kernel_args;
        what.keep = keep;
    }
    else
        what.args = kind == SANDBOX_CC? cc_args: kind == SANDBOX_PYTHON? python_args
                  : kind == SANDBOX_CUDA? cuda_args: NULL;
    ck_assert_msg (sandbox_spawn (sandbox, &what, err, sizeof err) == 0, "kind %d: %s", (int) kind, err);
    ck_assert_msg (sandbox_confirm (sandbox, 30.0, err, sizeof err) == 0, "kind %d: %s", (int) kind, err);
    json_error_t jerr;
    *caps = json_loads (sandbox_caps (sandbox), 0, &jerr);
    ck_assert_msg (*caps != NULL, "kind %d caps: %s", (int) kind, sandbox_caps (sandbox));
    char *text = NULL;
    ck_assert_msg (sandbox_selftest (sandbox, 30.0, &text, err, sizeof err) == 0, "kind %d: %s",
                   (int) kind, err);
    *report = json_loads (text, 0, &jerr);
    ck_assert_msg (*report != NULL, "kind %d report: %s", (int) kind, text);
    free (text);
    //  It exits by itself once it has reported.
    ck_assert_int_eq (sandbox_wait (sandbox, 10.0), 0);
    int wstatus = -1;
    ck_assert (sandbox_reaped (sandbox, &wstatus, NULL));
    ck_assert_msg (WIFEXITED (wstatus) && WEXITSTATUS (wstatus) == 0, "kind %d: status 0x%x",
                   (int) kind, wstatus);
    sandbox_destroy (&sandbox);
    for (int i = 0; i < 2; i++)
        if (sv [i] >= 0)
            close (sv [i]);
    if (shm >= 0)
        close (shm);
    rmdir (dir);
    return true;
}

static bool
s_selftest (sandbox_kind_t kind, json_t **caps, json_t **report)
{
    return s_selftest_as (kind, false, caps, report);
}

START_TEST (test_every_kind_alike)
{
    json_t *first_caps = NULL, *first_report = NULL;
    size_t tried = 0;
    for (size_t k = 0; k < sizeof s_kinds / sizeof s_kinds [0]; k++) {
        const s_kind_t *kind = &s_kinds [k];
        if (kind->kind == SANDBOX_PYTHON && access ("/usr/bin/python3", X_OK) != 0)
            continue;
        json_t *caps = NULL, *report = NULL;
        if (!s_selftest (kind->kind, &caps, &report))
            continue;
        tried++;
        char *text = json_dumps (caps, JSON_COMPACT);
        fprintf (stderr, "%s\n", text);
        free (text);
        //  What every kind holds, checked from outside.
        ck_assert (json_is_true (json_object_get (caps, "seccomp")));
        ck_assert (json_is_true (json_object_get (caps, "no_new_privs")));
        ck_assert (json_is_false (json_object_get (caps, "capabilities")));
        ck_assert (json_is_true (json_object_get (caps, "pidns")));
        ck_assert (json_is_true (json_object_get (caps, "netns")));
        ck_assert (json_is_true (json_object_get (caps, "ipcns")));
        ck_assert_str_eq (json_string_value (json_object_get (caps, "root")), kind->root);
        //  The same keys for every kind.
        if (!first_caps)
            first_caps = json_incref (caps);
        const char *key;
        json_t *value;
        ck_assert_uint_eq (json_object_size (caps), json_object_size (first_caps));
        json_object_foreach (first_caps, key, value)
            ck_assert_msg (json_object_get (caps, key), "kind %d lacks caps key %s", (int) kind->kind, key);
        //  The same calls tried everywhere; each refused unless relaxed.
        if (!first_report)
            first_report = json_incref (report);
        ck_assert_uint_eq (json_object_size (report), json_object_size (first_report));
        json_object_foreach (report, key, value) {
            ck_assert_msg (json_object_get (first_report, key), "kind %d reports %s alone", (int) kind->kind, key);
            if (s_relaxed (kind, key)) {
                ck_assert_msg (json_is_null (value), "kind %d: %s should be relaxed", (int) kind->kind, key);
                continue;
            }
            int want = !strcmp (key, "clone3") || !strcmp (key, "openat2")? ENOSYS
                     : !strcmp (key, "socket_inet") && s_relaxed (kind, "socket_unix")? EAFNOSUPPORT
                     : SANDBOX_SECCOMP_TEST_ERRNO;
            ck_assert_msg (json_integer_value (value) == want && json_is_integer (value),
                           "kind %d: %s gave %s, want errno %d", (int) kind->kind, key,
                           json_is_null (value)? "relaxed": "another errno", want);
        }
        json_decref (caps);
        json_decref (report);
    }
    ck_assert_uint_ge (tried, 3);
    json_decref (first_caps);
    json_decref (first_report);
}
END_TEST

//  A pinned runner (a CPU job's: the kernel runner, a Python runner on the
//  CPU) may not set any thread's CPUs, its own included; the rest of its
//  report is its kind's.
START_TEST (test_pinned_runner_keeps_its_cpu)
{
    sandbox_kind_t kinds [] = { SANDBOX_KERNEL, SANDBOX_PYTHON };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds [0]; k++) {
        if (kinds [k] == SANDBOX_PYTHON && access ("/usr/bin/python3", X_OK) != 0)
            continue;
        json_t *caps = NULL, *report = NULL, *free_caps = NULL, *free_report = NULL;
        ck_assert (s_selftest_as (kinds [k], true, &caps, &report));
        ck_assert (s_selftest_as (kinds [k], false, &free_caps, &free_report));
        const char *key;
        json_t *value;
        json_object_foreach (report, key, value) {
            if (strncmp (key, "sched_setaffinity", 17) == 0)
                ck_assert_msg (json_integer_value (value) == SANDBOX_SECCOMP_TEST_ERRNO,
                               "kind %d pinned: %s not refused", (int) kinds [k], key);
            else
                ck_assert_msg (json_equal (value, json_object_get (free_report, key)),
                               "kind %d pinned: %s differs", (int) kinds [k], key);
        }
        ck_assert (json_is_null (json_object_get (free_report, "sched_setaffinity_self")));
        json_decref (caps);
        json_decref (report);
        json_decref (free_caps);
        json_decref (free_report);
    }
}
END_TEST

int
main (void)
{
    Suite *suite = suite_create ("sandbox_kinds");
    TCase *tc = tcase_create ("kinds");
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_every_kind_alike);
    tcase_add_test (tc, test_pinned_runner_keeps_its_cpu);
    suite_add_tcase (suite, tc);
    return testutil_run_suite (suite);
}
