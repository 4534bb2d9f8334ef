/*  test_cpu_runner - real kgym-runner processes loading real compiled
    kernels: a good one gives the right outputs; hostile ones (loops,
    crashes, memory and fork bombs, sockets, file writes and reads, ptrace, exec,
    leftover threads, libc symbols, bad offsets, attacks on another runner
    running at the same time, a forged READY) are contained, and no
    process of any runner outlives it.
*/
#include "testutil.h"
#include "cpu_runner.h"
#include "cpu_cc.h"
#include "common_dtype.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *s_kernels =
    "#define _GNU_SOURCE\n"
    "#include <dirent.h>\n"
    "#include <errno.h>\n"
    "#include <fcntl.h>\n"
    "#include <pthread.h>\n"
    "#include <signal.h>\n"
    "#include <stdlib.h>\n"
    "#include <string.h>\n"
    "#include <sched.h>\n"
    "#include <sys/ptrace.h>\n"
    "#include <sys/resource.h>\n"
    "#include <sys/socket.h>\n"
    "#include <sys/syscall.h>\n"
    "#include <unistd.h>\n"
    "void scale (const float *x, float *y, float a, int n)\n"
    "{ for (int i = 0; i < n; i++) y [i] = a * x [i]; }\n"
    "void add_one (int *y) { y [0] += 1; }\n"
    "void spin (int *out) { volatile int x = 0; for (;;) x++; }\n"
    "void null_deref (int *out) { volatile int *p = 0; *p = 1; }\n"
    "void do_abort (int *out) { abort (); }\n"
    "void mem_bomb (int *out)\n"
    "{ size_t chunk = 64u << 20; out [0] = 0;\n"
    "  for (int i = 0; i < 128; i++) { char *p = malloc (chunk);\n"
    "    if (!p) { out [0] = -1; out [1] = i; return; }\n"
    "    memset (p, 1, chunk); out [1] = i; } out [0] = 1; }\n"
    "void fork_bomb (int *out)\n"
    "{ out [0] = 0; for (int i = 0; i < 64; i++) { pid_t p = fork ();\n"
    "    if (p == 0) for (;;) ;\n"
    "    if (p < 0) { out [0] = -1; out [1] = errno; return; } out [0] = i + 1; } }\n"
    "void net (int *out) { out [0] = socket (AF_INET, SOCK_STREAM, 0); out [1] = errno; }\n"
    "void unix_socket (int *out) { int sv [2]; out [0] = socketpair (AF_UNIX, SOCK_STREAM, 0, sv); out [1] = errno; }\n"
    "void write_file (int *out) { out [0] = open (\"/tmp/kgym-test-x\", O_WRONLY | O_CREAT, 0644); out [1] = errno; }\n"
    "void read_file (int *out) { out [0] = open (\"/etc/hostname\", O_RDONLY); out [1] = errno; if (out [0] >= 0) close (out [0]); }\n"
    "void read_proc (int *out) { out [0] = open (\"/proc/self/maps\", O_RDONLY); out [1] = errno; if (out [0] >= 0) close (out [0]); }\n"
    "void list_root (int *out)\n"
    "{ DIR *d = opendir (\"/\"); out [0] = 0; out [1] = 0; struct dirent *e;\n"
    "  while (d && (e = readdir (d))) if (e->d_name [0] != '.') { out [0]++; out [1] |= strcmp (e->d_name, \"candidate.so\") != 0; }\n"
    "  if (d) closedir (d); else out [0] = -1; }\n"
    "void trace (int *out) { out [0] = (int) ptrace (PTRACE_ATTACH, getppid (), 0, 0); out [1] = errno; }\n"
    "void shell (int *out) { char *argv [] = { \"/bin/sh\", \"-c\", \"true\", 0 };\n"
    "  out [0] = execve (\"/bin/sh\", argv, 0); out [1] = errno; }\n"
    "void kill_parent (int *out) { out [0] = kill (getppid (), SIGTERM); out [1] = errno; }\n"
    "void kill_all (int *out) { out [0] = kill (-1, SIGKILL); out [1] = errno; }\n"
    "void new_session (int *out) { out [0] = setsid (); out [1] = errno; out [2] = setpgid (0, 0); out [3] = errno; }\n"
    "static void *s_noop (void *arg) { return arg; }\n"
    "void thread_ok (int *out) { pthread_t t; out [0] = pthread_create (&t, 0, s_noop, 0);\n"
    "  if (out [0] == 0) pthread_join (t, 0); }\n"
    "static void *s_writer (void *arg) { volatile int *y = arg; for (;;) y [0]++; return 0; }\n"
    "void leave_thread (volatile int *y) { pthread_t t; y [0] = 0; pthread_create (&t, 0, s_writer, (void *) y);\n"
    "  pthread_detach (t); while (y [0] < 1000) ; }\n"
    "void whoami (int *out) { out [0] = (int) getuid (); out [1] = (int) geteuid (); out [2] = (int) getpid (); }\n"
    //  Given another runner's pid and uid (as the host sees them), try to
    //  reach it: signal, re-limit, renice, re-pin it; errno of each, 0 = done.
    "#define E(call) ((call) < 0? errno: 0)\n"
    "void attack (int *io)\n"
    "{ pid_t v = io [0]; uid_t u = (uid_t) io [1]; struct rlimit rl = { 1, 1 }; cpu_set_t set;\n"
    "  CPU_ZERO (&set); CPU_SET (0, &set);\n"
    "  io [2] = E (kill (v, 0)); io [3] = E (kill (v, SIGKILL)); io [4] = E (kill (-1, SIGKILL));\n"
    "  io [5] = E (prlimit (v, RLIMIT_CPU, &rl, 0)); io [6] = E (setpriority (PRIO_PROCESS, v, 19));\n"
    "  io [7] = E (setpriority (PRIO_USER, u, 19)); io [8] = E (sched_setaffinity (v, sizeof set, &set));\n"
    "  io [9] = E (syscall (SYS_ioprio_set, 1, v, 7)); io [10] = E (syscall (SYS_tgkill, v, v, SIGKILL));\n"
    "  io [11] = E (setpriority (PRIO_PGRP, 0, 19)); io [12] = E (syscall (SYS_pidfd_open, v, 0));\n"
    "  io [13] = E (getpriority (PRIO_PROCESS, v)); }\n"
    "int some_data = 5;\n";

static uint8_t *s_so;               //  the kernels above, compiled once in main
static size_t s_so_size;

//  A runner on the compiled kernels (or on other module bytes).
static cpu_runner_t *
s_runner_from (const uint8_t *so, size_t size, const sandbox_config_t *cfg,
               char *err, size_t errlen)
{
    int fd = memfd_create ("test-so", MFD_CLOEXEC);
    ck_assert_int_ge (fd, 0);
    ck_assert_int_eq (write (fd, so, size), (ssize_t) size);
    cpu_runner_t *runner = cpu_runner_new (cfg, fd, err, errlen);
    close (fd);
    return runner;
}

static cpu_runner_t *
s_runner (const sandbox_config_t *cfg)
{
    char err [256] = "";
    cpu_runner_t *runner = s_runner_from (s_so, s_so_size, cfg, err, sizeof err);
    ck_assert_msg (runner != NULL, "runner did not start: %s", err);
    return runner;
}

//  Call kernel(int *out) with out at the start of a page of shared memory,
//  its first nin ints set from in, the rest zero.
static cpu_run_outcome_t
s_call_with (cpu_runner_t *runner, const char *kernel, double timeout_s, const int *in, size_t nin,
             int **out_p)
{
    int *out = cpu_runner_shm (runner, 4096);
    ck_assert_ptr_nonnull (out);
    memset (out, 0, 4096);
    for (size_t i = 0; i < nin; i++)
        out [i] = in [i];
    runner_request_t *req = calloc (1, sizeof *req);
    ck_assert_ptr_nonnull (req);
    req->nargs = 1;
    req->args [0].kind = RUNNER_ARG_PTR;
    req->args [0].offset = 0;
    req->nlaunches = 1;
    snprintf (req->launches [0].kernel, RUNNER_MAX_SYMBOL, "%s", kernel);
    req->launches [0].nargs = 1;
    req->launches [0].args [0] = 0;
    cpu_run_outcome_t run;
    ck_assert_int_eq (cpu_runner_run (runner, req, timeout_s, 0, &run), 0);
    free (req);
    if (out_p)
        *out_p = out;
    return run;
}

static cpu_run_outcome_t
s_call (cpu_runner_t *runner, const char *kernel, double timeout_s, int **out_p)
{
    return s_call_with (runner, kernel, timeout_s, NULL, 0, out_p);
}

//  Destroy and prove nothing of the runner is left: no process in its
//  group, its cgroup gone.
static void
s_destroy_and_check (cpu_runner_t **runner_p)
{
    sandbox_t *sandbox = cpu_runner_sandbox (*runner_p);
    int pgid = sandbox_pid (sandbox);
    char cgroup [4096] = "";
    if (sandbox_cgroup_path (sandbox))
        snprintf (cgroup, sizeof cgroup, "%s", sandbox_cgroup_path (sandbox));
    cpu_runner_destroy (runner_p);
    ck_assert_ptr_null (*runner_p);
    if (pgid > 0) {
        errno = 0;
        ck_assert_msg (kill (-pgid, 0) == -1 && errno == ESRCH,
                       "process group %d still has members after destroy", pgid);
    }
    if (cgroup [0]) {
        struct stat st;
        ck_assert_msg (stat (cgroup, &st) != 0, "cgroup %s still exists", cgroup);
    }
}

static bool
s_has_cgroup_memory (cpu_runner_t *runner)
{
    return strstr (cpu_runner_caps (runner), "\"memory_bytes\":null") == NULL
        && strstr (cpu_runner_caps (runner), "\"cgroup\":\"none\"") == NULL;
}

START_TEST (test_scale_right)
{
    cpu_runner_t *runner = s_runner (NULL);
    const int n = 1000;
    float *shm = cpu_runner_shm (runner, 2 * 4096 + 8192);
    ck_assert_ptr_nonnull (shm);
    for (int i = 0; i < n; i++)
        shm [i] = (float) i * 0.5f;
    runner_request_t *req = calloc (1, sizeof *req);
    req->nargs = 4;
    req->args [0].kind = RUNNER_ARG_PTR;
    req->args [0].offset = 0;
    req->args [1].kind = RUNNER_ARG_PTR;
    req->args [1].offset = 8192;
    float a = 3.0f;
    uint32_t bits;
    memcpy (&bits, &a, 4);
    req->args [2].kind = RUNNER_ARG_SCALAR;
    req->args [2].dtype = DTYPE_F32;
    req->args [2].bits = bits;
    req->args [3].kind = RUNNER_ARG_SCALAR;
    req->args [3].dtype = DTYPE_I32;
    req->args [3].bits = (uint32_t) n;
    req->nlaunches = 2;
    for (int l = 0; l < 2; l++) {
        snprintf (req->launches [l].kernel, RUNNER_MAX_SYMBOL, "scale");
        req->launches [l].nargs = 4;
        for (uint32_t k = 0; k < 4; k++)
            req->launches [l].args [k] = k;
    }
    cpu_run_outcome_t run;
    ck_assert_int_eq (cpu_runner_run (runner, req, 10.0, 0, &run), 0);
    ck_assert_msg (run.status == RUN_OK, "expected RUN_OK, got %d: %s", run.status, run.message);
    const float *y = (const float *) ((const uint8_t *) shm + 8192);
    for (int i = 0; i < n; i++)
        ck_assert_msg (y [i] == 3.0f * (float) i * 0.5f, "y[%d] = %g, expected %g", i,
                       (double) y [i], 3.0 * i * 0.5);
    ck_assert_uint_gt (run.wall_ns, 0);
    //  Growing the shared memory remaps it on both sides.
    shm = cpu_runner_shm (runner, 1 << 20);
    ck_assert_ptr_nonnull (shm);
    for (int i = 0; i < n; i++)
        shm [i] = 1.0f;
    req->args [1].offset = (1 << 20) - 4096;
    req->args [3].bits = 1000;
    ck_assert_int_eq (cpu_runner_run (runner, req, 10.0, 0, &run), 0);
    ck_assert_int_eq (run.status, RUN_OK);
    y = (const float *) ((const uint8_t *) shm + (1 << 20) - 4096);
    ck_assert (y [0] == 3.0f && y [999] == 3.0f);
    uint64_t rtt = 0;
    ck_assert_int_eq (cpu_runner_ping (runner, 5.0, &rtt), 0);
    ck_assert_uint_gt (rtt, 0);
    free (req);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_caps_reported)
{
    cpu_runner_t *runner = s_runner (NULL);
    const char *caps = cpu_runner_caps (runner);
    fprintf (stderr, "caps: %s\n", caps);
    json_error_t jerr;
    json_t *json = json_loads (caps, 0, &jerr);
    ck_assert_msg (json != NULL, "caps are not JSON: %s", caps);
    ck_assert_str_eq (json_string_value (json_object_get (json, "kind")), "kernel");
    ck_assert (json_is_true (json_object_get (json, "seccomp")));
    ck_assert (json_is_true (json_object_get (json, "no_new_privs")));
    ck_assert (json_is_false (json_object_get (json, "capabilities")));
    ck_assert (json_is_true (json_object_get (json, "netns")));
    ck_assert (json_is_true (json_object_get (json, "ipcns")));
    ck_assert (json_is_true (json_object_get (json, "pidns")));
    ck_assert_str_eq (json_string_value (json_object_get (json, "root")), "empty");
    ck_assert (json_is_string (json_object_get (json, "cgroup")));
    ck_assert (json_equal (json_object_get (json, "userns"), json_boolean (geteuid () != 0)));
    //  The uid in the caps is the one the sandbox gave, and the kernel's.
    uid_t uid = sandbox_uid (cpu_runner_sandbox (runner));
    ck_assert_int_eq (json_integer_value (json_object_get (json, "uid")), uid);
    if (geteuid () == 0)
        ck_assert_uint_ge (uid, 65536);
    else
        ck_assert_uint_eq (uid, geteuid ());
    json_decref (json);
    int *out;
    cpu_run_outcome_t run = s_call (runner, "whoami", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    //  As root: its own uid. In a user namespace: root there, no capabilities.
    ck_assert_int_eq (out [0], geteuid () == 0? (int) uid: 0);
    ck_assert_int_eq (out [1], out [0]);
    //  pid 1 of a pid namespace of its own.
    ck_assert_int_eq (out [2], 1);
    s_destroy_and_check (&runner);
}
END_TEST

//  Two runners at once (as the candidate and reference of one job, or two
//  jobs): the one cannot signal, re-limit, renice or re-pin the other.
START_TEST (test_runner_cannot_reach_another)
{
    cpu_runner_t *victim = s_runner (NULL);
    cpu_runner_t *attacker = s_runner (NULL);
    sandbox_t *vs = cpu_runner_sandbox (victim), *as = cpu_runner_sandbox (attacker);
    //  As root each runner has a uid of its own; unprivileged both are the
    //  worker's (each root of its own user namespace): then only the pid
    //  namespaces and the filter stand between them, as checked below.
    if (geteuid () == 0)
        ck_assert_uint_ne (sandbox_uid (vs), sandbox_uid (as));
    else
        ck_assert (sandbox_uid (vs) == geteuid () && sandbox_uid (as) == geteuid ());
    int vpid = sandbox_pid (vs);
    char path [64], before [2048] = "", after [2048] = "";
    snprintf (path, sizeof path, "/proc/%d/limits", vpid);
    FILE *file = fopen (path, "r");
    ck_assert_ptr_nonnull (file);
    ck_assert_uint_gt (fread (before, 1, sizeof before - 1, file), 0);
    fclose (file);
    //  The victim must not be stopped (a stopped process still counts).
    sandbox_signal (vs, SIGCONT);
    int *io;
    const int target [2] = { vpid, (int) sandbox_uid (vs) };
    cpu_run_outcome_t run = s_call_with (attacker, "attack", 10.0, target, 2, &io);
    ck_assert_msg (run.status == RUN_OK, "attacker: %d %s", run.status, run.message);
    static const char *what [] = { "", "", "kill 0", "kill", "kill -1", "prlimit", "setpriority",
                                   "setpriority user", "sched_setaffinity", "ioprio_set", "tgkill",
                                   "setpriority group", "pidfd_open", "getpriority" };
    for (int i = 2; i <= 13; i++)
        ck_assert_msg (io [i] == EPERM, "%s of another runner: errno %d, want EPERM", what [i], io [i]);
    //  The victim is as it was: alive, same limits, same nice.
    ck_assert (cpu_runner_alive (victim));
    file = fopen (path, "r");
    ck_assert_ptr_nonnull (file);
    ck_assert_uint_gt (fread (after, 1, sizeof after - 1, file), 0);
    fclose (file);
    ck_assert_str_eq (before, after);
    errno = 0;
    ck_assert_int_eq (getpriority (PRIO_PROCESS, (id_t) vpid), 0);
    ck_assert_int_eq (errno, 0);
    int *out;
    run = s_call (victim, "add_one", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert_int_eq (out [0], 1);
    s_destroy_and_check (&attacker);
    s_destroy_and_check (&victim);
}
END_TEST

//  A runner program that says it is confined and is not: refused by the
//  sandbox before the module loads, and said to be the sandbox's failure
//  ("sandbox: ..."), which the backend reports as internal_error.
START_TEST (test_unconfined_runner_refused)
{
    char liar [] = "/tmp/kgym-liar-XXXXXX";
    int fd = mkstemp (liar);
    ck_assert_int_ge (fd, 0);
    const char *text = "#!/bin/bash\nfor a; do [ \"$prev\" = --sync ] && s=$a; prev=$a; done\n"
                       "eval \"echo confined >&$s\"; exec sleep 30\n";
    ck_assert_int_eq (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    ck_assert_int_eq (chmod (liar, 0755), 0);
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.runner_path = liar;
    char err [512] = "";
    cpu_runner_t *runner = s_runner_from (s_so, s_so_size, &cfg, err, sizeof err);
    unlink (liar);
    ck_assert_ptr_null (runner);
    ck_assert_msg (strncmp (err, "sandbox: ", 9) == 0 && strstr (err, "not confined as asked"), "err: %s", err);
}
END_TEST

//  A candidate's constructor answers READY itself, with caps of its own
//  making: what the supervisor reports is its own look at the runner.
START_TEST (test_forged_ready_ignored)
{
    char src [2048];
    snprintf (src, sizeof src,
              "#include <string.h>\n"
              "#include <sys/socket.h>\n"
              "__attribute__ ((constructor)) static void forge (void)\n"
              "{ static char reply [%zu]; memset (reply, 0, sizeof reply);\n"
              "  strcpy (reply + 16, \"{\\\"uid\\\":0,\\\"seccomp\\\":false,\\\"cgroup\\\":\\\"forged\\\"}\");\n"
              "  for (int fd = 3; fd < 64; fd++) send (fd, reply, sizeof reply, MSG_NOSIGNAL | MSG_DONTWAIT); }\n"
              "void add_one (int *y) { y [0] += 1; }\n", sizeof (runner_reply_t));
    cpu_cc_result_t result;
    char err [256];
    ck_assert_msg (cpu_cc_compile (NULL, NULL, src, NULL, 0, 60.0, &result, err, sizeof err) == 0,
                   "compile: %s %s", err, result.log? result.log: "");
    cpu_runner_t *runner = s_runner_from (result.so, result.so_size, NULL, err, sizeof err);
    cpu_cc_result_free (&result);
    ck_assert_msg (runner != NULL, "runner: %s", err);
    const char *caps = cpu_runner_caps (runner);
    ck_assert_msg (strstr (caps, "forged") == NULL && strstr (caps, "\"seccomp\":true"), "caps: %s", caps);
    char uid [48];
    snprintf (uid, sizeof uid, "\"uid\":%u,", (unsigned) sandbox_uid (cpu_runner_sandbox (runner)));
    ck_assert_msg (strstr (caps, uid), "caps %s lack %s", caps, uid);
    //  The runner still serves: the stray replies are not taken for answers.
    int *out;
    cpu_run_outcome_t run = s_call (runner, "add_one", 5.0, &out);
    ck_assert_msg (run.status == RUN_OK, "run: %d %s", run.status, run.message);
    ck_assert_int_eq (out [0], 1);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_infinite_loop_times_out)
{
    cpu_runner_t *runner = s_runner (NULL);
    cpu_run_outcome_t run = s_call (runner, "spin", 0.3, NULL);
    ck_assert_msg (run.status == RUN_TIMEOUT, "expected RUN_TIMEOUT, got %d: %s", run.status,
                   run.message);
    ck_assert (run.wall_ns >= 300000000ull);
    ck_assert (!cpu_runner_alive (runner));
    //  A dead runner refuses further requests.
    runner_request_t *req = calloc (1, sizeof *req);
    cpu_run_outcome_t again;
    ck_assert_int_eq (cpu_runner_run (runner, req, 1.0, 0, &again), -1);
    free (req);
    s_destroy_and_check (&runner);
    //  The next runner works.
    runner = s_runner (NULL);
    int *out;
    run = s_call (runner, "add_one", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert_int_eq (out [0], 1);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_null_deref_crashes)
{
    cpu_runner_t *runner = s_runner (NULL);
    cpu_run_outcome_t run = s_call (runner, "null_deref", 5.0, NULL);
    ck_assert_msg (run.status == RUN_CRASH, "expected RUN_CRASH, got %d", run.status);
    ck_assert_int_eq (run.signal, SIGSEGV);
    ck_assert_msg (strstr (run.message, "SIGSEGV"), "message: %s", run.message);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_abort_crashes)
{
    cpu_runner_t *runner = s_runner (NULL);
    cpu_run_outcome_t run = s_call (runner, "do_abort", 5.0, NULL);
    ck_assert_int_eq (run.status, RUN_CRASH);
    ck_assert_int_eq (run.signal, SIGABRT);
    ck_assert_msg (strstr (run.message, "SIGABRT"), "message: %s", run.message);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_memory_bomb_contained)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.mem_bytes = 512ull << 20;
    cpu_runner_t *runner = s_runner (&cfg);
    int *out;
    cpu_run_outcome_t run = s_call (runner, "mem_bomb", 30.0, &out);
    fprintf (stderr, "memory bomb: status %d, %s (out %d %d)\n", run.status, run.message,
             out [0], out [1]);
    if (s_has_cgroup_memory (runner)) {
        ck_assert_msg (run.status == RUN_CRASH, "expected RUN_CRASH, got %d", run.status);
        ck_assert_msg (strstr (run.message, "out of memory"), "message: %s", run.message);
    }
    else {
        //  rlimits only: malloc fails within the cap plus the runner's allowance.
        ck_assert (run.status == RUN_CRASH || (run.status == RUN_OK && out [0] == -1));
        if (run.status == RUN_OK)
            ck_assert_int_le ((out [1] + 1) * 64, 512 + 256);
    }
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_cpu_limit)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    cfg.cpu_s = 1;
    cpu_runner_t *runner = s_runner (&cfg);
    cpu_run_outcome_t run = s_call (runner, "spin", 20.0, NULL);
    ck_assert_msg (run.status == RUN_CRASH, "expected RUN_CRASH, got %d: %s", run.status, run.message);
    ck_assert_msg (strstr (run.message, "CPU time limit"), "message: %s", run.message);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_fork_bomb_denied)
{
    cpu_runner_t *runner = s_runner (NULL);
    int *out;
    cpu_run_outcome_t run = s_call (runner, "fork_bomb", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert_msg (out [0] == -1 && out [1] == EPERM, "fork: out %d errno %d", out [0], out [1]);
    s_destroy_and_check (&runner);
}
END_TEST

//  Each kernel tries something forbidden and records (result, errno).
START_TEST (test_forbidden_calls_fail)
{
    static const struct { const char *kernel; int err; } cases [] = {
        { "net", EPERM }, { "write_file", EPERM }, { "trace", EPERM }, { "shell", EPERM },
        { "kill_parent", EPERM }, { "kill_all", EPERM },
    };
    cpu_runner_t *runner = s_runner (NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        int *out;
        cpu_run_outcome_t run = s_call (runner, cases [i].kernel, 5.0, &out);
        ck_assert_msg (run.status == RUN_OK, "%s: status %d %s", cases [i].kernel, run.status,
                       run.message);
        ck_assert_msg (out [0] == -1 && out [1] == cases [i].err,
                       "%s: expected -1 errno %d, got %d errno %d", cases [i].kernel,
                       cases [i].err, out [0], out [1]);
    }
    struct stat st;
    ck_assert_msg (stat ("/tmp/kgym-test-x", &st) != 0, "the kernel created a file");
    int *out;
    cpu_run_outcome_t run = s_call (runner, "new_session", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert (out [0] == -1 && out [1] == EPERM && out [2] == -1 && out [3] == EPERM);
    //  No file of the host can be read: the root is a tmpfs of the runner's
    //  own holding only the candidate's object.
    const char *caps = cpu_runner_caps (runner);
    ck_assert_msg (strstr (caps, "\"root\":\"empty\""), "caps: %s", caps);
    {
        run = s_call (runner, "read_file", 5.0, &out);
        ck_assert_int_eq (run.status, RUN_OK);
        ck_assert_msg (out [0] == -1 && out [1] == ENOENT, "/etc/hostname: %d errno %d", out [0], out [1]);
        run = s_call (runner, "read_proc", 5.0, &out);
        ck_assert_int_eq (run.status, RUN_OK);
        ck_assert_msg (out [0] == -1 && out [1] == ENOENT, "/proc/self/maps: %d errno %d", out [0], out [1]);
        run = s_call (runner, "list_root", 5.0, &out);
        ck_assert_int_eq (run.status, RUN_OK);
        ck_assert_msg (out [0] == 1 && out [1] == 0, "/ holds %d entries (other than candidate.so: %d)",
                       out [0], out [1]);
    }
    //  What kernels legitimately do still works.
    run = s_call (runner, "thread_ok", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert_int_eq (out [0], 0);
    //  Not even local sockets: runners may share one empty network namespace.
    run = s_call (runner, "unix_socket", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    ck_assert_msg (out [0] == -1 && out [1] == EPERM, "AF_UNIX socket: %d errno %d", out [0], out [1]);
    s_destroy_and_check (&runner);
}
END_TEST

static uint64_t
s_now_ns (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

START_TEST (test_leftover_thread_frozen)
{
    cpu_runner_t *runner = s_runner (NULL);
    int *out;
    cpu_run_outcome_t run = s_call (runner, "leave_thread", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    volatile int *y = out;
    int seen = y [0];
    ck_assert_int_ge (seen, 1000);
    //  An observation window, not a wait: the value must not move at all.
    uint64_t until = s_now_ns () + 100000000ull;
    while (s_now_ns () < until)
        ck_assert_msg (y [0] == seen, "the output changed after run returned: %d -> %d", seen, y [0]);
    //  The runner stays usable.
    run = s_call (runner, "add_one", 5.0, &out);
    ck_assert_int_eq (run.status, RUN_OK);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_libc_symbol_refused)
{
    cpu_runner_t *runner = s_runner (NULL);
    cpu_run_outcome_t run = s_call (runner, "system", 5.0, NULL);
    ck_assert_int_eq (run.status, RUN_ERROR);
    ck_assert_int_eq (run.runner_status, RUNNER_NO_SYMBOL);
    run = s_call (runner, "some_data", 5.0, NULL);
    ck_assert_int_eq (run.status, RUN_ERROR);
    ck_assert_int_eq (run.runner_status, RUNNER_NO_SYMBOL);
    run = s_call (runner, "no_such_kernel", 5.0, NULL);
    ck_assert_int_eq (run.runner_status, RUNNER_NO_SYMBOL);
    ck_assert (cpu_runner_alive (runner));
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_bad_offsets_refused)
{
    cpu_runner_t *runner = s_runner (NULL);
    ck_assert_ptr_nonnull (cpu_runner_shm (runner, 4096));
    runner_request_t *req = calloc (1, sizeof *req);
    req->nargs = 1;
    req->args [0].kind = RUNNER_ARG_PTR;
    req->args [0].offset = 1ull << 40;
    req->nlaunches = 1;
    snprintf (req->launches [0].kernel, RUNNER_MAX_SYMBOL, "add_one");
    req->launches [0].nargs = 1;
    cpu_run_outcome_t run;
    ck_assert_int_eq (cpu_runner_run (runner, req, 5.0, 0, &run), 0);
    ck_assert_int_eq (run.status, RUN_ERROR);
    ck_assert_int_eq (run.runner_status, RUNNER_BAD_REQUEST);
    req->args [0].offset = 4096;        //  one past the end
    ck_assert_int_eq (cpu_runner_run (runner, req, 5.0, 0, &run), 0);
    ck_assert_int_eq (run.runner_status, RUNNER_BAD_REQUEST);
    req->args [0].offset = 0;
    req->launches [0].args [0] = 7;     //  names an arg that is not there
    ck_assert_int_eq (cpu_runner_run (runner, req, 5.0, 0, &run), 0);
    ck_assert_int_eq (run.runner_status, RUNNER_BAD_REQUEST);
    req->launches [0].args [0] = 0;
    req->nlaunches = RUNNER_MAX_LAUNCHES + 1;
    ck_assert_int_eq (cpu_runner_run (runner, req, 5.0, 0, &run), 0);
    ck_assert_int_eq (run.runner_status, RUNNER_BAD_REQUEST);
    req->nlaunches = 1;
    ck_assert_int_eq (cpu_runner_run (runner, req, 5.0, 0, &run), 0);
    ck_assert_int_eq (run.status, RUN_OK);
    free (req);
    s_destroy_and_check (&runner);
}
END_TEST

START_TEST (test_bad_modules_fail_to_load)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    char err [256] = "";
    static const uint8_t junk [] = "this is not an ELF file";
    cpu_runner_t *runner = s_runner_from (junk, sizeof junk, &cfg, err, sizeof err);
    ck_assert_ptr_null (runner);
    ck_assert_msg (strncmp (err, "load: ", 6) == 0, "err: %s", err);
    //  A constructor that crashes is the module's failure too.
    cpu_cc_result_t result;
    const char *src = "volatile int *volatile nothing;\n"
                      "__attribute__ ((constructor)) void c (void) { *nothing = 1; }\n"
                      "void k (int *y) { y [0] = 1; }\n";
    ck_assert_int_eq (cpu_cc_compile (NULL, NULL, src, NULL, 0, 60.0, &result, err, sizeof err), 0);
    runner = s_runner_from (result.so, result.so_size, &cfg, err, sizeof err);
    cpu_cc_result_free (&result);
    ck_assert_ptr_null (runner);
    ck_assert_msg (strncmp (err, "load: ", 6) == 0 && strstr (err, "SIGSEGV"), "err: %s", err);
    //  An undefined symbol fails at load (RTLD_NOW).
    src = "extern void nowhere (void); void k (int *y) { nowhere (); }\n";
    ck_assert_int_eq (cpu_cc_compile (NULL, NULL, src, NULL, 0, 60.0, &result, err, sizeof err), 0);
    runner = s_runner_from (result.so, result.so_size, &cfg, err, sizeof err);
    cpu_cc_result_free (&result);
    ck_assert_ptr_null (runner);
    ck_assert_msg (strncmp (err, "load: ", 6) == 0 && strstr (err, "nowhere"), "err: %s", err);
}
END_TEST

START_TEST (test_slot_cgroup_reused)
{
    sandbox_config_t cfg;
    sandbox_config_default (&cfg);
    char slot [32];
    snprintf (slot, sizeof slot, "test%d", (int) getpid ());
    cfg.slot = slot;
    cpu_runner_t *a = s_runner (&cfg);
    cpu_runner_t *b = s_runner (&cfg);
    const char *pa = sandbox_cgroup_path (cpu_runner_sandbox (a));
    const char *pb = sandbox_cgroup_path (cpu_runner_sandbox (b));
    if (!pa) {
        cpu_runner_destroy (&a);
        cpu_runner_destroy (&b);
        return;                     //  no cgroups on this host
    }
    char first [4096], second [4096];
    snprintf (first, sizeof first, "%s", pa);
    snprintf (second, sizeof second, "%s", pb);
    ck_assert_msg (strcmp (first, second) != 0, "two live runners share cgroup %s", first);
    ck_assert_int_eq (sandbox_cgroup_count (cpu_runner_sandbox (a)), 1);
    cpu_runner_destroy (&a);
    //  The slot's cgroup stays, empty, and the next runner of the slot takes it.
    struct stat st;
    ck_assert_int_eq (stat (first, &st), 0);
    a = s_runner (&cfg);
    ck_assert_str_eq (sandbox_cgroup_path (cpu_runner_sandbox (a)), first);
    //  A slot's cgroup held by a live runner is not removed.
    ck_assert_int_eq (sandbox_slot_remove (slot), 0);
    cpu_runner_destroy (&a);
    ck_assert_int_eq (sandbox_slot_remove (slot), 1);
    ck_assert_int_ne (stat (first, &st), 0);
    ck_assert_int_eq (stat (second, &st), 0);
    cpu_runner_destroy (&b);
    ck_assert_int_eq (sandbox_slot_remove (slot), 1);
    ck_assert_int_ne (stat (second, &st), 0);
}
END_TEST

//  Several threads of one process use their own runners at once.
static void *
s_thread_body (void *arg)
{
    int *failures = arg;
    for (int i = 0; i < 4; i++) {
        char err [256];
        int fd = memfd_create ("so", MFD_CLOEXEC);
        if (fd < 0 || write (fd, s_so, s_so_size) != (ssize_t) s_so_size) {
            (*failures)++;
            continue;
        }
        cpu_runner_t *runner = cpu_runner_new (NULL, fd, err, sizeof err);
        close (fd);
        if (!runner) {
            (*failures)++;
            continue;
        }
        int *out = cpu_runner_shm (runner, 4096);
        runner_request_t *req = calloc (1, sizeof *req);
        req->nargs = 1;
        req->args [0].kind = RUNNER_ARG_PTR;
        req->nlaunches = 1;
        snprintf (req->launches [0].kernel, RUNNER_MAX_SYMBOL, "add_one");
        req->launches [0].nargs = 1;
        cpu_run_outcome_t run;
        out [0] = 41;
        if (cpu_runner_run (runner, req, 10.0, 0, &run) != 0 || run.status != RUN_OK || out [0] != 42)
            (*failures)++;
        free (req);
        cpu_runner_destroy (&runner);
    }
    return NULL;
}

START_TEST (test_threads_use_runners_at_once)
{
    pthread_t threads [4];
    int failures [4] = { 0 };
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq (pthread_create (&threads [i], NULL, s_thread_body, &failures [i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join (threads [i], NULL);
        ck_assert_int_eq (failures [i], 0);
    }
}
END_TEST

START_TEST (test_cost)
{
    //  Not a bound, a measurement for the report.
    uint64_t t0 = s_now_ns ();
    const int rounds = 10;
    for (int i = 0; i < rounds; i++) {
        cpu_runner_t *runner = s_runner (NULL);
        cpu_run_outcome_t run = s_call (runner, "add_one", 5.0, NULL);
        ck_assert_int_eq (run.status, RUN_OK);
        cpu_runner_destroy (&runner);
    }
    double ms = (double) (s_now_ns () - t0) / 1e6 / rounds;
    fprintf (stderr, "cpu_runner new + run + destroy: %.2f ms\n", ms);
    cpu_runner_t *runner = s_runner (NULL);
    t0 = s_now_ns ();
    for (int i = 0; i < 100; i++)
        s_call (runner, "add_one", 5.0, NULL);
    fprintf (stderr, "one run (send, reply, stop): %.1f us\n", (double) (s_now_ns () - t0) / 1e3 / 100);
    cpu_runner_destroy (&runner);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("cpu_runner");
    TCase *tc = tcase_create ("runner");
    tcase_set_timeout (tc, 60);
    tcase_add_test (tc, test_scale_right);
    tcase_add_test (tc, test_caps_reported);
    tcase_add_test (tc, test_runner_cannot_reach_another);
    tcase_add_test (tc, test_forged_ready_ignored);
    tcase_add_test (tc, test_unconfined_runner_refused);
    tcase_add_test (tc, test_infinite_loop_times_out);
    tcase_add_test (tc, test_null_deref_crashes);
    tcase_add_test (tc, test_abort_crashes);
    tcase_add_test (tc, test_memory_bomb_contained);
    tcase_add_test (tc, test_cpu_limit);
    tcase_add_test (tc, test_fork_bomb_denied);
    tcase_add_test (tc, test_forbidden_calls_fail);
    tcase_add_test (tc, test_leftover_thread_frozen);
    tcase_add_test (tc, test_libc_symbol_refused);
    tcase_add_test (tc, test_bad_offsets_refused);
    tcase_add_test (tc, test_bad_modules_fail_to_load);
    tcase_add_test (tc, test_slot_cgroup_reused);
    tcase_add_test (tc, test_threads_use_runners_at_once);
    tcase_add_test (tc, test_cost);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    unlink ("/tmp/kgym-test-x");
    cpu_cc_result_t result;
    char err [256];
    int rc = cpu_cc_compile (NULL, NULL, s_kernels, NULL, 0, 60.0, &result, err, sizeof err);
    if (rc != 0) {
        fprintf (stderr, "cannot compile the test kernels (%d): %s\n%s\n", rc, err,
                 result.log? result.log: "");
        return 1;
    }
    s_so = result.so;
    s_so_size = result.so_size;
    free (result.log);
    return testutil_run_suite (s_suite ());
}
