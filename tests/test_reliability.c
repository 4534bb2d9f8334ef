/*  test_reliability - fault tests with real processes on loopback.

    kgym-broker, kgym-worker and `kgym submit` run as processes; fake
    workers are this very binary started again with --fake-worker (a DEALER
    that answers each JOB after a set delay, so a thousand jobs take
    seconds). Every test kills or stops something on purpose and then
    checks that nothing was lost and nothing came twice:
      - a worker killed with SIGKILL mid-job: the job finishes elsewhere,
        one result, and how long the requeue took;
      - the broker killed with SIGKILL under load and restarted on its
        database: `kgym submit` rides it out, every job printed once;
      - workers killed, started and frozen (SIGSTOP) while 1,000 jobs run;
      - malformed frames flooding both broker sockets between valid jobs,
        and a hostile "broker" feeding a real worker junk;
      - SIGTERM and `kgym drain` drain a worker: it finishes, then exits 0.
    Heartbeats are 100 ms so a lost worker is noticed in a few tenths of a
    second. Nothing sleeps: every wait is a poll on a pipe or socket, or a
    waitpid, with a deadline. Each test prints a FIGURES line (the numbers
    in docs/reliability.md).
*/
#include "testutil.h"
#include "client_kgym.h"
#include "client_admin.h"
#include "broker_server.h"
#include "worker_server.h"
#include "proto_msg.h"
#include "proto_mpk.h"
#include "common_log.h"
#include "kgym_config.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define HEARTBEAT "100"         //  ms, for every process here
#define WAIT_MS 60000           //  longest any step that must happen may take
#define MAX_PROCS 32

//  A process this test started.
typedef struct {
    pid_t pid;                  //  0 once reaped
    int out;                    //  its stdout, when piped (else -1)
    int err;                    //  its stderr, when piped (else -1)
    char buf [8192];            //  partial line read from err
    size_t used;                //  bytes in buf
} s_proc_t;

static s_proc_t s_procs [MAX_PROCS];
static char s_dir [64];                 //  this test's scratch directory
static char s_cache [128];              //  compile cache shared by the suite's workers
static char s_client_ep [64], s_worker_ep [64];
static char s_self [512];               //  this binary, for --fake-worker

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
s_free_port (void)
{
    return testutil_free_port ();
}

//  --------------------------------------------------------------------------
//  Processes

//  Start argv; pipe its stdout and/or stderr to us, else send them to a log
//  file in the scratch directory named after argv [0]'s base and the slot.
static s_proc_t *
s_spawn (char *const argv [], bool pipe_out, bool pipe_err)
{
    int slot = 0;
    while (slot < MAX_PROCS && s_procs [slot].pid)
        slot++;
    ck_assert_int_lt (slot, MAX_PROCS);
    s_proc_t *proc = &s_procs [slot];
    memset (proc, 0, sizeof (*proc));
    proc->out = proc->err = -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init (&actions);
    int out [2] = { -1, -1 }, err [2] = { -1, -1 };
    char log [256];
    const char *base = strrchr (argv [0], '/');
    snprintf (log, sizeof (log), "%s/%s-%d.log", s_dir, base? base + 1: argv [0], slot);
    if (pipe_out) {
        ck_assert_int_eq (pipe2 (out, O_CLOEXEC), 0);
        posix_spawn_file_actions_adddup2 (&actions, out [1], 1);
    }
    else
        posix_spawn_file_actions_addopen (&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (pipe_err) {
        ck_assert_int_eq (pipe2 (err, O_CLOEXEC), 0);
        posix_spawn_file_actions_adddup2 (&actions, err [1], 2);
    }
    else
        posix_spawn_file_actions_addopen (&actions, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    int rc = posix_spawn (&proc->pid, argv [0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy (&actions);
    ck_assert_msg (rc == 0, "cannot start %s: %s", argv [0], strerror (rc));
    if (pipe_out) {
        close (out [1]);
        proc->out = out [0];
    }
    if (pipe_err) {
        close (err [1]);
        proc->err = err [0];
        fcntl (proc->err, F_SETFL, O_NONBLOCK);
    }
    return proc;
}

//  Wait up to ms for the process to exit (on a pidfd: it becomes readable
//  at exit); its exit status (128 + signal when killed), or -1 on time out.
static int
s_wait_exit (s_proc_t *proc, int ms)
{
    if (!proc->pid)
        return -1;
    int pidfd = (int) syscall (SYS_pidfd_open, proc->pid, 0);
    ck_assert_msg (pidfd >= 0, "pidfd_open: %s", strerror (errno));
    struct pollfd fd = { pidfd, POLLIN, 0 };
    int ready = poll (&fd, 1, ms);
    close (pidfd);
    if (ready <= 0)
        return -1;
    int status;
    ck_assert_int_eq (waitpid (proc->pid, &status, 0), proc->pid);
    proc->pid = 0;
    return WIFEXITED (status)? WEXITSTATUS (status): 128 + WTERMSIG (status);
}

static void
s_kill (s_proc_t *proc, int sig)
{
    if (proc->pid)
        kill (proc->pid, sig);
}

//  Read proc's stderr until a line holding needle (copied into line), or
//  ms pass. 0, or -1 on time out / end of output.
static int
s_wait_line (s_proc_t *proc, const char *needle, int ms, char *line, size_t linesize)
{
    int64_t deadline = s_now_ms () + ms;
    while (proc->err >= 0) {
        //  A whole line already in the buffer?
        char *nl;
        while ((nl = memchr (proc->buf, '\n', proc->used))) {
            *nl = 0;
            bool hit = strstr (proc->buf, needle) != NULL;
            if (hit && line)
                snprintf (line, linesize, "%s", proc->buf);
            size_t rest = proc->used - (size_t) (nl + 1 - proc->buf);
            memmove (proc->buf, nl + 1, rest);
            proc->used = rest;
            if (hit)
                return 0;
        }
        if (proc->used == sizeof (proc->buf))
            proc->used = 0;             //  an endless line: drop it
        int64_t left = deadline - s_now_ms ();
        if (left <= 0)
            return -1;
        struct pollfd fd = { proc->err, POLLIN, 0 };
        if (poll (&fd, 1, (int) left) <= 0)
            continue;
        ssize_t got = read (proc->err, proc->buf + proc->used, sizeof (proc->buf) - proc->used);
        if (got <= 0 && !(got < 0 && errno == EAGAIN)) {
            close (proc->err);
            proc->err = -1;
            return -1;
        }
        if (got > 0)
            proc->used += (size_t) got;
    }
    return -1;
}

//  Program under the build directory.
static char *
s_prog (const char *relative)
{
    return zsys_sprintf ("%s/%s", KGYM_BUILD_DIR, relative);
}

static s_proc_t *
s_start_broker (bool with_db)
{
    char *prog = s_prog ("broker/kgym-broker");
    char db [160];
    snprintf (db, sizeof (db), "%s/broker.sqlite", s_dir);
    //  No result cache: identical jobs here must each be graded (faults
    //  are what is tested).
    char *argv [] = { prog, "--clients", s_client_ep, "--workers", s_worker_ep, "--heartbeat", HEARTBEAT,
                      "--liveness", "3", "--cache-entries", "0", with_db? "--db": NULL, db, NULL };
    s_proc_t *proc = s_spawn (argv, false, false);
    zstr_free (&prog);
    //  Up when it answers a HEARTBEAT (queued by ZeroMQ until it listens).
    zsock_t *probe = zsock_new_dealer (s_client_ep);
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    ck_assert_int_eq (proto_msg_send (msg, probe), 0);
    zpoller_t *poller = zpoller_new (probe, NULL);
    ck_assert_msg (zpoller_wait (poller, WAIT_MS) == probe, "the broker did not start");
    zpoller_destroy (&poller);
    proto_msg_destroy (&msg);
    zsock_destroy (&probe);
    return proc;
}

//  A real CPU worker: one slot, nothing prefetched; its debug log on a
//  pipe when watched (it must then be read: few jobs only), else in a file.
static s_proc_t *
s_start_worker (const char *name, bool watched)
{
    char *prog = s_prog ("worker/kgym-worker");
    char *argv [] = { prog, "--broker", s_worker_ep, "--backend", "cpu", "--name", (char *) name,
                      "--heartbeat", HEARTBEAT, "--slots", "1", "--prefetch", "0", "--cache", s_cache,
                      "-v", NULL };
    s_proc_t *proc = s_spawn (argv, false, watched);
    zstr_free (&prog);
    return proc;
}

static s_proc_t *
s_start_fake_worker (const char *name, const char *capacity, const char *delay_ms)
{
    char *argv [] = { s_self, "--fake-worker", s_worker_ep, (char *) name, (char *) capacity,
                      (char *) delay_ms, HEARTBEAT, NULL };
    return s_spawn (argv, false, false);
}

//  Sum the numbers that precede needle on the lines of a log file that hold
//  it ("... 3 job(s) requeued" -> 3), or count those lines when count_only.
static long
s_log_sum (const char *name, const char *needle, bool count_only)
{
    char path [192];
    snprintf (path, sizeof (path), "%s/%s", s_dir, name);
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    long sum = 0;
    char line [2048];
    while (fgets (line, sizeof (line), file)) {
        char *hit = strstr (line, needle);
        if (!hit)
            continue;
        if (count_only) {
            sum++;
            continue;
        }
        char *start = hit;
        while (start > line && start [-1] == ' ')
            start--;
        while (start > line && start [-1] >= '0' && start [-1] <= '9')
            start--;
        sum += strtol (start, NULL, 10);
    }
    fclose (file);
    return sum;
}

//  --------------------------------------------------------------------------
//  The fake worker (this binary with --fake-worker EP NAME CAPACITY DELAY_MS HEARTBEAT_MS)

typedef struct {
    uint64_t job;               //  job id
    uint32_t attempt;           //  lease attempt
    int64_t due;                //  when to answer (ms)
} s_fake_lease_t;

static int
s_fake_worker_main (char **argv)
{
    const char *endpoint = argv [0], *name = argv [1];
    uint32_t capacity = (uint32_t) atoi (argv [2]);
    int delay = atoi (argv [3]), heartbeat = atoi (argv [4]);
    if (capacity < 1 || capacity > 64)
        return 2;
    zsock_t *sock = zsock_new (ZMQ_DEALER);
    proto_sock_configure (sock, false);
    zsock_connect (sock, "%s", endpoint);
    proto_msg_t *msg = proto_msg_new (PROTO_READY);
    json_t *json = json_pack ("{s:s, s:f}", "status", "ok", "reward", 1.0);
    char *data;
    size_t size;
    proto_mpk_encode (json, &data, &size);
    json_decref (json);
    s_fake_lease_t leases [64];
    size_t held = 0;
    int64_t last_sent = 0;
    bool announce = true;
    zpoller_t *poller = zpoller_new (sock, NULL);
    while (!zsys_interrupted) {
        int64_t now = s_now_ms ();
        if (announce) {
            proto_msg_reset (msg, PROTO_READY);
            proto_msg_set_str (msg->backend, "cpu");
            proto_msg_set_str (msg->device, "fake");
            proto_msg_set_str (msg->name, name);
            msg->capacity = capacity;
            msg->pid = (uint32_t) getpid ();
            proto_msg_send (msg, sock);
            last_sent = now;
            announce = false;
            held = 0;           //  a broker that did not know us took them back
        }
        for (size_t i = 0; i < held; ) {
            if (leases [i].due > now) {
                i++;
                continue;
            }
            proto_msg_reset (msg, PROTO_RESULT);
            msg->job = leases [i].job;
            msg->attempt = leases [i].attempt;
            zframe_t *body = zframe_new (data, size);
            proto_msg_set_body (msg, &body);
            proto_msg_send (msg, sock);
            last_sent = now;
            leases [i] = leases [--held];
        }
        if (now - last_sent >= heartbeat) {
            proto_msg_reset (msg, PROTO_HEARTBEAT);
            proto_msg_send (msg, sock);
            last_sent = now;
        }
        int64_t wait = heartbeat - (now - last_sent);
        for (size_t i = 0; i < held; i++)
            if (leases [i].due - now < wait)
                wait = leases [i].due - now;
        if (!zpoller_wait (poller, wait > 0? (int) wait: 0))
            continue;
        if (proto_msg_recv (msg, sock) != 0)
            continue;
        if (msg->cmd == PROTO_JOB && held < 64)
            leases [held++] = (s_fake_lease_t) { msg->job, msg->attempt, s_now_ms () + delay };
        else
        if (msg->cmd == PROTO_ERROR && msg->code == PROTO_ERR_UNKNOWN_PEER)
            announce = true;
    }
    free (data);
    zpoller_destroy (&poller);
    proto_msg_destroy (&msg);
    zsock_destroy (&sock);
    return 0;
}

//  --------------------------------------------------------------------------
//  Jobs

//  A candidate that spins ns nanoseconds first, for testutil_scale_task:
//  a real job whose length the test chooses.
static json_t *
s_candidate (long ns)
{
    char *source = zsys_sprintf (
        "#include <time.h>\n"
        "void scale (const float *x, float *y, float a, int n)\n"
        "{\n"
        "    struct timespec t0, t;\n"
        "    clock_gettime (CLOCK_MONOTONIC, &t0);\n"
        "    do clock_gettime (CLOCK_MONOTONIC, &t);\n"
        "    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < %ldL);\n"
        "    for (int i = 0; i < n; i++) y [i] = a * x [i];\n"
        "}\n", ns);
    json_t *candidate = json_pack ("{s:s, s:[{s:s}]}", "source", source, "launches", "kernel", "scale");
    zstr_free (&source);
    return candidate;
}

//  {"task", "candidate", "eval": {check_only, one trial}}
static json_t *
s_job (long ns)
{
    return json_pack ("{s:o, s:o, s:{s:b, s:i, s:f}}", "task", testutil_scale_task (), "candidate", s_candidate (ns),
                      "eval", "check_only", 1, "trials", 1, "timeout", 20.0);
}

static client_kgym_t *
s_client (void)
{
    client_kgym_config_t cfg;
    client_kgym_config_default (&cfg);
    cfg.endpoint = s_client_ep;
    cfg.heartbeat_ms = 100;
    char err [256];
    client_kgym_t *client = client_kgym_new_config (&cfg, err, sizeof (err));
    ck_assert_msg (client != NULL, "%s", err);
    return client;
}

//  The next RESULT (ACCEPTED and the 503 notice that a job submitted before
//  its worker registered gets skipped, anything else fails the test).
static void
s_next_result (client_kgym_t *client, int ms, client_event_t *event)
{
    int64_t deadline = s_now_ms () + ms;
    while (true) {
        int64_t left = deadline - s_now_ms ();
        ck_assert_msg (left > 0 && client_kgym_recv (client, (int) left, event) == 0,
                       "no result within %d ms", ms);
        if (event->type == CLIENT_EVENT_RESULT)
            return;
        ck_assert_msg (event->type == CLIENT_EVENT_ACCEPTED || event->code == PROTO_ERR_NO_WORKER,
                       "unexpected event %d: %u %s", event->type, event->code, event->reason);
        client_event_clear (event);
    }
}

//  --------------------------------------------------------------------------
//  Fixture

static void
s_setup (void)
{
    common_log_set_level (LOG_LEVEL_WARN);
    snprintf (s_dir, sizeof (s_dir), "/tmp/kgym-test-reliability-XXXXXX");
    ck_assert_ptr_nonnull (mkdtemp (s_dir));
    snprintf (s_client_ep, sizeof (s_client_ep), "tcp://127.0.0.1:%d", s_free_port ());
    snprintf (s_worker_ep, sizeof (s_worker_ep), "tcp://127.0.0.1:%d", s_free_port ());
    memset (s_procs, 0, sizeof (s_procs));
}

static void
s_teardown (void)
{
    for (int i = 0; i < MAX_PROCS; i++)
        if (s_procs [i].pid) {
            kill (s_procs [i].pid, SIGCONT);
            kill (s_procs [i].pid, SIGKILL);
            waitpid (s_procs [i].pid, NULL, 0);
            s_procs [i].pid = 0;
        }
    for (int i = 0; i < MAX_PROCS; i++) {
        if (s_procs [i].err >= 0 && s_procs [i].pid == 0 && s_procs [i].err > 2)
            close (s_procs [i].err);
        if (s_procs [i].out >= 0 && s_procs [i].pid == 0 && s_procs [i].out > 2)
            close (s_procs [i].out);
    }
    if (!getenv ("KGYM_KEEP_TEST_DIR")) {
        char command [128];
        snprintf (command, sizeof (command), "rm -rf '%s'", s_dir);
        if (system (command) != 0)
            fprintf (stderr, "cannot remove %s\n", s_dir);
    }
}

//  --------------------------------------------------------------------------
//  Tests

START_TEST (test_worker_killed_or_hung_mid_job_job_finishes_elsewhere_once)
{
    s_start_broker (true);
    s_proc_t *victim = s_start_worker ("victim", true);
    ck_assert (s_wait_line (victim, "serving cpu", WAIT_MS, NULL, 0) == 0);
    client_kgym_t *client = s_client ();
    json_t *job = s_job (500 * 1000000L);
    char err [256];
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);
    json_decref (job);
    //  The victim runs it (compiled, in its sandbox); a spare worker waits.
    char line [1024];
    ck_assert_msg (s_wait_line (victim, "attempt 1: running", WAIT_MS, line, sizeof (line)) == 0,
                   "the job never ran on the victim");
    s_proc_t *spare = s_start_worker ("spare", true);
    ck_assert (s_wait_line (spare, "serving cpu", WAIT_MS, NULL, 0) == 0);
    int64_t killed = s_now_ms ();
    s_kill (victim, SIGKILL);
    ck_assert_int_eq (s_wait_exit (victim, WAIT_MS), 128 + SIGKILL);
    //  Requeued within a few heartbeats, leased again with the next attempt.
    ck_assert_msg (s_wait_line (spare, "attempt 2: started", WAIT_MS, line, sizeof (line)) == 0,
                   "the job was not requeued to the spare worker");
    int64_t requeued = s_now_ms () - killed;
    client_event_t event;
    s_next_result (client, WAIT_MS, &event);
    int64_t finished = s_now_ms () - killed;
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_str_eq (event.worker, "spare");
    ck_assert_str_eq (json_string_value (json_object_get (event.result, "status")), "ok");
    client_event_clear (&event);
    //  Exactly once: nothing more comes, and nothing was dropped as a duplicate.
    ck_assert_int_eq (client_kgym_recv (client, 500, &event), -1);
    ck_assert_uint_eq (client_kgym_duplicates (client), 0);
    ck_assert_msg (requeued < 10 * 100, "requeue took %lld ms with 100 ms heartbeats",
                   (long long) requeued);

    //  A worker that hangs (SIGSTOP: its connection stays up, it just goes
    //  silent, like a process stuck on a GPU) loses its job at expiry.
    job = s_job (500 * 1000000L);
    ck_assert_int_eq (client_kgym_submit (client, 2, job, err, sizeof (err)), 0);
    json_decref (job);
    ck_assert_msg (s_wait_line (spare, "attempt 1: running", WAIT_MS, line, sizeof (line)) == 0,
                   "job 2 never ran on the spare");
    s_proc_t *third = s_start_worker ("third", true);
    ck_assert (s_wait_line (third, "serving cpu", WAIT_MS, NULL, 0) == 0);
    int64_t frozen = s_now_ms ();
    s_kill (spare, SIGSTOP);
    ck_assert_msg (s_wait_line (third, "attempt 2: started", WAIT_MS, line, sizeof (line)) == 0,
                   "the hung worker's job was not requeued");
    int64_t requeued_hung = s_now_ms () - frozen;
    s_next_result (client, WAIT_MS, &event);
    ck_assert_uint_eq (event.ref, 2);
    ck_assert_str_eq (event.worker, "third");
    client_event_clear (&event);
    ck_assert_int_eq (client_kgym_recv (client, 300, &event), -1);
    ck_assert_uint_eq (client_kgym_duplicates (client), 0);
    ck_assert_msg (requeued_hung < 10 * 100, "requeue of a hung worker's job took %lld ms",
                   (long long) requeued_hung);
    fprintf (stderr, "FIGURES kill-worker: jobs 2, results 2, lost 0, duplicated 0; requeue latency "
             "%lld ms after SIGKILL (kill to result %lld ms), %lld ms after SIGSTOP "
             "(heartbeat 100 ms x liveness 3)\n", (long long) requeued, (long long) finished,
             (long long) requeued_hung);
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_broker_killed_under_load_no_job_lost_or_doubled)
{
    s_proc_t *broker = s_start_broker (true);
    s_start_worker ("w1", false);
    s_start_worker ("w2", false);
    //  A batch of 40 real jobs of ~50 ms each (one candidate: compiled once).
    char task_path [160], batch_path [160];
    snprintf (task_path, sizeof (task_path), "%s/task.json", s_dir);
    snprintf (batch_path, sizeof (batch_path), "%s/batch.jsonl", s_dir);
    json_t *task = testutil_scale_task ();
    ck_assert_int_eq (json_dump_file (task, task_path, 0), 0);
    json_decref (task);
    FILE *batch = fopen (batch_path, "w");
    const int jobs = 40;
    for (int i = 0; i < jobs; i++) {
        json_t *line = json_pack ("{s:s, s:o, s:{s:b, s:i}, s:s}", "task", task_path,
                                  "candidate", s_candidate (50 * 1000000L),
                                  "eval", "check_only", 1, "trials", 1, "tag", "restart-test");
        char *text = json_dumps (line, JSON_COMPACT);
        fprintf (batch, "%s\n", text);
        free (text);
        json_decref (line);
    }
    fclose (batch);
    char *kgym = s_prog ("client/kgym");
    char *argv [] = { kgym, "submit", "--broker", s_client_ep, "--batch", batch_path, "--window", "16",
                      "--heartbeat", "100", "--broker-timeout", "60", NULL };
    s_proc_t *submit = s_spawn (argv, true, false);
    zstr_free (&kgym);

    //  Read its lines; at the 10th, kill the broker and start it again.
    const size_t room = 1u << 20;
    char *lines = (char *) calloc (1, room);
    size_t used = 0, count = 0;
    int64_t deadline = s_now_ms () + 2 * WAIT_MS;
    int64_t killed_at = 0, restarted_in = 0;
    while (submit->out >= 0) {
        int64_t left = deadline - s_now_ms ();
        ck_assert_msg (left > 0, "kgym submit did not finish: %zu lines", count);
        struct pollfd fd = { submit->out, POLLIN, 0 };
        if (poll (&fd, 1, (int) left) <= 0)
            continue;
        ssize_t got = read (submit->out, lines + used, room - 1 - used);
        if (got <= 0) {
            close (submit->out);
            submit->out = -1;
            break;
        }
        for (ssize_t i = 0; i < got; i++)
            count += lines [used + i] == '\n';
        used += (size_t) got;
        if (!killed_at && count >= 10) {
            killed_at = s_now_ms ();
            s_kill (broker, SIGKILL);
            ck_assert_int_eq (s_wait_exit (broker, WAIT_MS), 128 + SIGKILL);
            broker = s_start_broker (true);
            restarted_in = s_now_ms () - killed_at;
        }
    }
    lines [used] = 0;
    ck_assert_int_eq (s_wait_exit (submit, WAIT_MS), 0);
    ck_assert_msg (killed_at, "the batch finished before the broker could be killed");
    //  Every job printed once, every one graded.
    json_t *seen = json_object ();
    size_t duplicated = 0, ok = 0;
    for (char *line = strtok (lines, "\n"); line; line = strtok (NULL, "\n")) {
        json_t *result = json_loads (line, 0, NULL);
        ck_assert_msg (json_is_object (result), "not a JSON line: %s", line);
        const char *label = json_string_value (json_object_get (result, "candidate"));
        if (json_object_get (seen, label))
            duplicated++;
        json_object_set_new (seen, label, json_true ());
        ok += streq (json_string_value (json_object_get (result, "status")), "ok");
        json_decref (result);
    }
    size_t distinct = json_object_size (seen);
    json_decref (seen);
    free (lines);
    ck_assert_uint_eq (duplicated, 0);
    ck_assert_uint_eq (distinct, (size_t) jobs);
    ck_assert_uint_eq (ok, (size_t) jobs);
    fprintf (stderr, "FIGURES kill-broker: jobs %d, results %zu, lost %zu, duplicated %zu, "
             "killed after 10 results, broker back in %lld ms; the restarted broker queued %ld "
             "unfinished job(s) again; kgym submit reconnected %ld time(s) and dropped %ld "
             "duplicate repl(ies)\n", jobs, distinct,
             (size_t) jobs - distinct, duplicated, (long long) restarted_in,
             s_log_sum ("kgym-broker-0.log", "unfinished job(s) queued again", false),
             s_log_sum ("kgym-3.log", "time(s);", false),
             s_log_sum ("kgym-3.log", "duplicate repl", false));
}
END_TEST

START_TEST (test_workers_killed_started_and_frozen_during_1000_jobs)
{
    s_start_broker (true);
    s_proc_t *workers [3];
    char name [32];
    int started = 0;
    for (int i = 0; i < 3; i++) {
        snprintf (name, sizeof (name), "fake-%d", started++);
        workers [i] = s_start_fake_worker (name, "4", "20");
    }
    client_kgym_t *client = s_client ();
    const uint64_t jobs = 1000;
    uint8_t *seen = (uint8_t *) calloc (jobs + 1, 1);
    json_t *job = json_pack ("{s:{s:s}, s:{}}", "task", "backend", "cpu", "candidate");
    uint64_t next = 1, done = 0, duplicated = 0, kills = 0, freezes = 0;
    size_t inflight = 0;
    char err [256];
    int64_t start = s_now_ms ();
    s_proc_t *frozen = NULL;
    uint64_t thaw_at = 0;
    while (done < jobs) {
        while (next <= jobs && inflight < 200) {
            ck_assert_int_eq (client_kgym_submit (client, next++, job, err, sizeof (err)), 0);
            inflight++;
        }
        client_event_t event;
        s_next_result (client, WAIT_MS, &event);
        ck_assert_msg (event.ref >= 1 && event.ref <= jobs, "result for ref %llu",
                       (unsigned long long) event.ref);
        if (seen [event.ref])
            duplicated++;
        seen [event.ref] = 1;
        done++;
        inflight--;
        client_event_clear (&event);
        //  Every 100 results: a worker dies (SIGKILL) and a new one starts;
        //  at 300 one freezes (SIGSTOP: a hung GPU) and thaws 300 results later.
        if (done % 100 == 0 && done < jobs) {
            int victim = (int) (done / 100) % 3;
            if (workers [victim] == frozen)
                victim = (victim + 1) % 3;
            s_kill (workers [victim], SIGKILL);
            s_wait_exit (workers [victim], WAIT_MS);
            kills++;
            snprintf (name, sizeof (name), "fake-%d", started++);
            workers [victim] = s_start_fake_worker (name, "4", "20");
        }
        if (done == 300) {
            frozen = workers [2];
            s_kill (frozen, SIGSTOP);
            freezes++;
            thaw_at = 600;
        }
        if (frozen && done == thaw_at) {
            s_kill (frozen, SIGCONT);
            frozen = NULL;
        }
    }
    int64_t elapsed = s_now_ms () - start;
    json_decref (job);
    size_t missing = 0;
    for (uint64_t ref = 1; ref <= jobs; ref++)
        missing += !seen [ref];
    free (seen);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, 500, &event), -1);
    ck_assert_uint_eq (missing, 0);
    ck_assert_uint_eq (duplicated, 0);
    fprintf (stderr, "FIGURES churn: jobs %llu, results %llu, lost %zu, duplicated %llu "
             "(+%llu dropped by the client library), workers killed %llu, frozen %llu; "
             "broker: %ld leases requeued, %ld workers dropped, %ld stale results dropped; "
             "%lld ms in all\n", (unsigned long long) jobs, (unsigned long long) done, missing,
             (unsigned long long) duplicated, (unsigned long long) client_kgym_duplicates (client),
             (unsigned long long) kills, (unsigned long long) freezes,
             s_log_sum ("kgym-broker-0.log", "job(s) requeued", false),
             s_log_sum ("kgym-broker-0.log", " dropped: ", true),
             s_log_sum ("kgym-broker-0.log", "RESULT job", true), (long long) elapsed);
    client_kgym_destroy (&client);
}
END_TEST

//  One malformed message of kind i (0..11) on sock; true when the broker
//  must answer it with an ERROR.
static bool
s_send_junk (zsock_t *sock, int i, unsigned seed)
{
    zmsg_t *msg = zmsg_new ();
    unsigned char bytes [600];
    for (size_t k = 0; k < sizeof (bytes); k++)
        bytes [k] = (unsigned char) ((seed * 2654435761u + k * 40503u) >> 13);
    unsigned char sig [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, PROTO_SUBMIT };
    switch (i % 12) {
        case 0:                 //  random bytes, one frame
            zmsg_addmem (msg, bytes, 1 + seed % sizeof (bytes));
            break;
        case 1:                 //  random bytes, three frames
            zmsg_addmem (msg, bytes, 6);
            zmsg_addmem (msg, bytes + 6, 40);
            zmsg_addmem (msg, bytes + 46, 100);
            break;
        case 2: {               //  truncated msgpack header
            zmsg_addmem (msg, sig, 6);
            unsigned char header [] = { 0x83, 0xa3, 'r', 'e', 'f', 0xcf, 0, 0 };
            zmsg_addmem (msg, header, sizeof (header));
            zmsg_addstr (msg, "x");
            break;
        }
        case 3: {               //  header nested 200 deep under an unknown key
            zmsg_addmem (msg, sig, 6);
            unsigned char header [220];
            size_t n = 0;
            header [n++] = 0x81;
            header [n++] = 0xa1;
            header [n++] = 'z';
            for (int d = 0; d < 200; d++)
                header [n++] = 0x91;
            header [n++] = 0xc0;
            zmsg_addmem (msg, header, n);
            zmsg_addstr (msg, "x");
            break;
        }
        case 4: {               //  wrong types: ref a string, backend a number
            zmsg_addmem (msg, sig, 6);
            unsigned char header [] = { 0x82, 0xa3, 'r', 'e', 'f', 0xa1, 'x',
                                        0xa7, 'b', 'a', 'c', 'k', 'e', 'n', 'd', 0x07 };
            zmsg_addmem (msg, header, sizeof (header));
            zmsg_addstr (msg, "x");
            break;
        }
        case 5: {               //  unknown command
            unsigned char unknown [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, (unsigned char) (12 + seed % 200) };
            zmsg_addmem (msg, unknown, 6);
            zmsg_addmem (msg, "\x80", 1);
            break;
        }
        case 6: {               //  missing field: SUBMIT without backend
            zmsg_addmem (msg, sig, 6);
            zmsg_addmem (msg, "\x81\xa3ref\x01", 6);
            zmsg_addstr (msg, "x");
            break;
        }
        case 7: {               //  absurd size: a map claiming 2^32-1 entries
            zmsg_addmem (msg, sig, 6);
            unsigned char header [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa3, 'r', 'e', 'f' };
            zmsg_addmem (msg, header, sizeof (header));
            zmsg_addstr (msg, "x");
            break;
        }
        case 8: {               //  a header over 4 KiB
            zmsg_addmem (msg, sig, 6);
            unsigned char *big = (unsigned char *) calloc (1, 5000);
            big [0] = 0x80;
            zmsg_addmem (msg, big, 5000);
            free (big);
            zmsg_addstr (msg, "x");
            break;
        }
        case 9: {               //  wrong version
            unsigned char v2 [6] = { 'K', 'G', 'Y', 'M', 2, PROTO_HEARTBEAT };
            zmsg_addmem (msg, v2, 6);
            zmsg_addmem (msg, "\x80", 1);
            break;
        }
        case 10: {              //  a worker's command on the client socket
            unsigned char ready [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, PROTO_RESULT };
            zmsg_addmem (msg, ready, 6);
            zmsg_addmem (msg, "\x82\xa3job\x01\xa7" "attempt\x01", 16);
            zmsg_addstr (msg, "r");
            break;
        }
        default: {              //  empty body frame
            zmsg_addmem (msg, sig, 6);
            zmsg_addmem (msg, "\x82\xa3ref\x01\xa7" "backend\xa3" "cpu", 18);
            zmsg_addmem (msg, "", 0);
            break;
        }
    }
    ck_assert_int_eq (zmsg_send (&msg, sock), 0);
    return true;
}

START_TEST (test_malformed_flood_between_valid_jobs)
{
    s_proc_t *broker = s_start_broker (false);
    s_start_fake_worker ("fast-0", "8", "1");
    s_start_fake_worker ("fast-1", "8", "1");
    client_kgym_t *client = s_client ();
    zsock_t *junk = zsock_new_dealer (s_client_ep);
    zsock_t *junk_worker = zsock_new_dealer (s_worker_ep);
    zpoller_t *poller = zpoller_new (junk, NULL);
    proto_msg_t *reply = proto_msg_new (0);
    const int valid = 200, per_valid = 10;
    int sent = 0, errors = 0, accepted = 0, results = 0;
    json_t *job = json_pack ("{s:{s:s}, s:{}}", "task", "backend", "cpu", "candidate");
    char err [256];
    for (int v = 1; v <= valid; v++) {
        for (int k = 0; k < per_valid; k++) {
            s_send_junk (junk, sent, (unsigned) sent);
            s_send_junk (junk_worker, sent + 3, (unsigned) sent);
            sent++;
        }
        ck_assert_int_eq (client_kgym_submit (client, (uint64_t) v, job, err, sizeof (err)), 0);
        //  Keep the junk socket's replies read (each malformed message gets one).
        while (zsock_events (junk) & ZMQ_POLLIN) {
            if (proto_msg_recv (reply, junk) == 0 && reply->cmd == PROTO_ERROR)
                errors++;
        }
    }
    json_decref (job);
    //  An oversized frame: libzmq cuts that connection; nothing else notices.
    zsock_t *big = zsock_new_dealer (s_client_ep);
    zframe_t *huge = zframe_new (NULL, PROTO_MAX_BODY + (128u << 10));
    memset (zframe_data (huge), 0xc1, zframe_size (huge));
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, "KGYM\x01\x04", 6);
    zmsg_addmem (msg, "\x82\xa3ref\x01\xa7" "backend\xa3" "cpu", 18);
    zmsg_append (msg, &huge);
    ck_assert_int_eq (zmsg_send (&msg, big), 0);
    //  Every valid job comes back; every malformed message got its ERROR.
    int64_t deadline = s_now_ms () + WAIT_MS;
    while (results < valid || errors < sent) {
        int64_t left = deadline - s_now_ms ();
        ck_assert_msg (left > 0, "%d of %d results, %d of %d errors", results, valid, errors, sent);
        if (results < valid) {
            client_event_t event;
            if (client_kgym_recv (client, errors < sent? 10: (int) left, &event) == 0) {
                if (event.type == CLIENT_EVENT_RESULT && event.ref <= (uint64_t) valid)
                    results++;
                else
                if (event.type == CLIENT_EVENT_ACCEPTED)
                    accepted++;
                client_event_clear (&event);
            }
        }
        if (errors < sent && zpoller_wait (poller, results < valid? 10: (int) left))
            if (proto_msg_recv (reply, junk) == 0 && reply->cmd == PROTO_ERROR)
                errors++;
    }
    ck_assert_int_eq (accepted, valid);
    //  The broker is alive and well: it still answers.
    int rc = waitpid (broker->pid, NULL, WNOHANG);
    ck_assert_int_eq (rc, 0);
    fprintf (stderr, "FIGURES flood: malformed messages %d to the client socket and %d to the worker "
             "socket, ERROR replies %d; valid jobs %d, results %d, lost %d\n", sent, sent, errors,
             valid, results, valid - results);
    proto_msg_destroy (&reply);
    zpoller_destroy (&poller);
    zsock_destroy (&junk);
    zsock_destroy (&junk_worker);
    zsock_destroy (&big);
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_worker_survives_a_hostile_broker)
{
    //  The test is the broker: a ROUTER that feeds a real worker junk.
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    proto_sock_configure (router, true);
    ck_assert_int_ge (zsock_bind (router, "%s", s_worker_ep), 0);
    s_proc_t *worker = s_start_worker ("target", false);
    proto_msg_t *msg = proto_msg_new (0);
    zpoller_t *poller = zpoller_new (router, NULL);
    zframe_t *to = NULL;
    int64_t deadline = s_now_ms () + WAIT_MS;
    while (!to) {
        ck_assert_msg (zpoller_wait (poller, (int) (deadline - s_now_ms ())), "no READY");
        if (proto_msg_recv (msg, router) == 0 && msg->cmd == PROTO_READY)
            to = zframe_dup (msg->routing_id);
    }
    //  Junk frames of every kind, then JOBs with bodies no evaluator takes.
    for (int i = 0; i < 60; i++) {
        zmsg_t *raw = zmsg_new ();
        zframe_t *id = zframe_dup (to);
        zmsg_append (raw, &id);
        unsigned char bytes [64];
        for (size_t k = 0; k < sizeof (bytes); k++)
            bytes [k] = (unsigned char) (i * 131 + k * 7);
        if (i % 3 == 0)
            zmsg_addmem (raw, bytes, 1 + i % 64);
        else
        if (i % 3 == 1) {
            unsigned char sig [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, (unsigned char) (i % 16) };
            zmsg_addmem (raw, sig, 6);
            zmsg_addmem (raw, bytes, 8);
        }
        else {
            unsigned char sig [6] = { 'K', 'G', 'Y', 'M', PROTO_VERSION, PROTO_JOB };
            zmsg_addmem (raw, sig, 6);
            zmsg_addmem (raw, "\x81\xa3job\x05", 6);     //  JOB without attempt
            zmsg_addmem (raw, bytes, 16);
        }
        ck_assert_int_eq (zmsg_send (&raw, router), 0);
    }
    const char *bodies [] = { "\xc1", "\x93\x01\x02\x03", "\xdf\xff\xff\xff\xff",
                              "\x81\xa4task\x81\xa7" "backend\xa3" "cpu" };
    for (int i = 0; i < 4; i++) {
        proto_msg_reset (msg, PROTO_JOB);
        zframe_t *id = zframe_dup (to);
        proto_msg_set_routing_id (msg, &id);
        msg->job = (uint64_t) (100 + i);
        msg->attempt = 1;
        zframe_t *body = zframe_new (bodies [i], strlen (bodies [i]));
        proto_msg_set_body (msg, &body);
        ck_assert_int_eq (proto_msg_send (msg, router), 0);
    }
    //  A valid job last.
    json_t *job = s_job (1000000L);
    char *data;
    size_t size;
    proto_mpk_encode (job, &data, &size);
    json_decref (job);
    proto_msg_reset (msg, PROTO_JOB);
    zframe_t *id = zframe_dup (to);
    proto_msg_set_routing_id (msg, &id);
    msg->job = 200;
    msg->attempt = 1;
    zframe_t *body = zframe_new (data, size);
    free (data);
    proto_msg_set_body (msg, &body);
    ck_assert_int_eq (proto_msg_send (msg, router), 0);
    //  Every lease is answered: four invalid, one graded ok.
    int invalid = 0, ok = 0;
    while (invalid + ok < 5) {
        int64_t left = deadline - s_now_ms ();
        ck_assert_msg (left > 0 && zpoller_wait (poller, (int) left), "%d of 5 results", invalid + ok);
        if (proto_msg_recv (msg, router) != 0 || msg->cmd != PROTO_RESULT)
            continue;
        json_t *result = proto_mpk_decode (zframe_data (msg->body), zframe_size (msg->body), NULL, NULL, 0);
        const char *status = json_string_value (json_object_get (result, "status"));
        if (msg->job == 200) {
            ck_assert_str_eq (status, "ok");
            ok++;
        }
        else {
            ck_assert_msg (status && streq (status, "invalid"), "job %llu: %s",
                           (unsigned long long) msg->job, status);
            invalid++;
        }
        json_decref (result);
    }
    ck_assert_int_eq (waitpid (worker->pid, NULL, WNOHANG), 0);
    fprintf (stderr, "FIGURES hostile-broker: 60 malformed frames and 4 bad job bodies to a real "
             "worker; leases answered 5 of 5 (4 invalid, 1 ok); worker alive\n");
    zframe_destroy (&to);
    zpoller_destroy (&poller);
    proto_msg_destroy (&msg);
    zsock_destroy (&router);
}
END_TEST

START_TEST (test_sigterm_and_kgym_drain_let_a_worker_finish_and_leave)
{
    s_start_broker (false);
    s_proc_t *busy = s_start_worker ("busy", true);
    ck_assert (s_wait_line (busy, "serving cpu", WAIT_MS, NULL, 0) == 0);
    client_kgym_t *client = s_client ();
    json_t *job = s_job (500 * 1000000L);
    char err [256];
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);
    ck_assert (s_wait_line (busy, "attempt 1: running", WAIT_MS, NULL, 0) == 0);
    //  SIGTERM mid-job: it finishes the job, takes nothing new, exits 0.
    s_kill (busy, SIGTERM);
    ck_assert_int_eq (client_kgym_submit (client, 2, job, err, sizeof (err)), 0);
    client_event_t event;
    s_next_result (client, WAIT_MS, &event);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_str_eq (event.worker, "busy");
    ck_assert_str_eq (json_string_value (json_object_get (event.result, "status")), "ok");
    client_event_clear (&event);
    ck_assert_int_eq (s_wait_exit (busy, WAIT_MS), 0);
    //  Job 2 waited for a worker that takes jobs.
    s_proc_t *idle = s_start_worker ("idle", true);
    s_next_result (client, WAIT_MS, &event);
    ck_assert_uint_eq (event.ref, 2);
    ck_assert_str_eq (event.worker, "idle");
    client_event_clear (&event);
    //  kgym drain NAME: the idle worker leaves at once, exit 0.
    char *argv [] = { "drain", "--broker", s_client_ep, "--timeout", "10", "idle", NULL };
    ck_assert_int_eq (client_admin_main (6, argv), 0);
    ck_assert_int_eq (s_wait_exit (idle, WAIT_MS), 0);
    json_decref (job);
    fprintf (stderr, "FIGURES drain: SIGTERM mid-job: job finished on the draining worker, "
             "exit 0; kgym drain on an idle worker: exit 0; jobs 2, results 2, lost 0\n");
    client_kgym_destroy (&client);
}
END_TEST

START_TEST (test_second_sigterm_leaves_at_once_and_the_job_runs_elsewhere)
{
    s_start_broker (false);
    s_proc_t *stubborn = s_start_worker ("stubborn", true);
    ck_assert (s_wait_line (stubborn, "serving cpu", WAIT_MS, NULL, 0) == 0);
    client_kgym_t *client = s_client ();
    json_t *job = s_job (3000 * 1000000L);
    char err [256];
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);
    json_decref (job);
    ck_assert (s_wait_line (stubborn, "attempt 1: running", WAIT_MS, NULL, 0) == 0);
    s_kill (stubborn, SIGTERM);
    ck_assert (s_wait_line (stubborn, "draining", WAIT_MS, NULL, 0) == 0);
    int64_t second = s_now_ms ();
    s_kill (stubborn, SIGTERM);
    //  Out well before its 3 s job could have finished.
    ck_assert_int_eq (s_wait_exit (stubborn, 2000), 0);
    int64_t left_in = s_now_ms () - second;
    s_proc_t *other = s_start_worker ("other", true);
    client_event_t event;
    s_next_result (client, WAIT_MS, &event);
    ck_assert_uint_eq (event.ref, 1);
    ck_assert_str_eq (event.worker, "other");
    client_event_clear (&event);
    (void) other;
    fprintf (stderr, "FIGURES stop: a second SIGTERM ended a worker mid-job in %lld ms (exit 0); "
             "the job was requeued and finished elsewhere, once\n", (long long) left_in);
    client_kgym_destroy (&client);
}
END_TEST

//  In-process: the state a GPU check sets from a job thread reaches the broker.
START_TEST (test_quarantined_worker_takes_no_job_until_ready_again)
{
    common_log_set_level (LOG_LEVEL_WARN);
    broker_config_t bcfg;
    broker_config_default (&bcfg);
    bcfg.clients_endpoint = "tcp://127.0.0.1:*";
    bcfg.workers_endpoint = "tcp://127.0.0.1:*";
    bcfg.heartbeat_ms = 100;
    zactor_t *broker = zactor_new (broker_server_actor, &bcfg);
    char *clients = NULL, *workers = NULL;
    zstr_send (broker, "ENDPOINTS");
    ck_assert_int_eq (zstr_recvx (broker, &clients, &workers, NULL), 2);
    snprintf (s_client_ep, sizeof (s_client_ep), "%s", clients);
    worker_config_t wcfg;
    worker_config_default (&wcfg);
    wcfg.broker_endpoint = workers;
    wcfg.name = "gpu-under-test";
    wcfg.cache_path = s_cache;
    wcfg.heartbeat_ms = 100;
    char err [256];
    worker_server_t *server = worker_server_new (&wcfg, err, sizeof (err));
    ck_assert_msg (server != NULL, "%s", err);
    zactor_t *worker = zactor_new (worker_server_actor, server);
    //  Another thread (here: this one) says the device failed its check.
    ck_assert_int_eq (worker_server_set_state (server, WORKER_STATE_QUARANTINED, "GPU check failed"), 0);
    zstr_send (worker, "STATUS");
    char *status = zstr_recv (worker);
    //  The request may still be on its way: ask until the state shows (a
    //  loaded machine can take a while to run the server's thread).
    int64_t deadline = zclock_mono () + 10000;
    while (!strstr (status, "quarantined") && zclock_mono () < deadline) {
        zstr_free (&status);
        zpoller_t *poller = zpoller_new (NULL);
        zpoller_wait (poller, 5);
        zpoller_destroy (&poller);
        zstr_send (worker, "STATUS");
        status = zstr_recv (worker);
    }
    ck_assert_msg (strstr (status, "\"state\":\"quarantined\""), "status: %s", status);
    zstr_free (&status);
    client_kgym_t *client = s_client ();
    json_t *job = s_job (1000000L);
    ck_assert_int_eq (client_kgym_submit (client, 1, job, err, sizeof (err)), 0);
    json_decref (job);
    client_event_t event;
    ck_assert_int_eq (client_kgym_recv (client, WAIT_MS, &event), 0);
    ck_assert_int_eq (event.type, CLIENT_EVENT_ACCEPTED);
    //  The broker knows: the job waits, the worker is counted quarantined.
    zstr_send (broker, "STATS");
    char *stats = zstr_recv (broker);
    ck_assert_msg (strstr (stats, "\"quarantined\":1") && strstr (stats, "\"queued\":1"), "stats: %s", stats);
    zstr_free (&stats);
    ck_assert_int_eq (client_kgym_recv (client, 300, &event), -1);
    //  Fit again: the job runs.
    ck_assert_int_eq (worker_server_set_state (server, WORKER_STATE_READY, NULL), 0);
    s_next_result (client, WAIT_MS, &event);
    ck_assert_str_eq (event.worker, "gpu-under-test");
    ck_assert_str_eq (json_string_value (json_object_get (event.result, "status")), "ok");
    client_event_clear (&event);
    client_kgym_destroy (&client);
    zactor_destroy (&worker);
    zactor_destroy (&broker);
    zstr_free (&clients);
    zstr_free (&workers);
}
END_TEST

int
main (int argc, char **argv)
{
    if (argc == 7 && streq (argv [1], "--fake-worker")) {
        zsys_init ();
        return s_fake_worker_main (argv + 2);
    }
    ssize_t len = readlink ("/proc/self/exe", s_self, sizeof (s_self) - 1);
    if (len <= 0)
        return 1;
    s_self [len] = 0;
    //  One compile cache for the whole suite: each candidate compiles once.
    char cache_dir [] = "/tmp/kgym-test-reliability-cache-XXXXXX";
    if (!mkdtemp (cache_dir))
        return 1;
    snprintf (s_cache, sizeof (s_cache), "%s/modules.sqlite", cache_dir);

    Suite *suite = suite_create ("reliability");
    TCase *tc = tcase_create ("faults");
    tcase_add_checked_fixture (tc, s_setup, s_teardown);
    tcase_set_timeout (tc, 120);
    tcase_add_test (tc, test_worker_killed_or_hung_mid_job_job_finishes_elsewhere_once);
    tcase_add_test (tc, test_broker_killed_under_load_no_job_lost_or_doubled);
    tcase_add_test (tc, test_workers_killed_started_and_frozen_during_1000_jobs);
    tcase_add_test (tc, test_malformed_flood_between_valid_jobs);
    tcase_add_test (tc, test_worker_survives_a_hostile_broker);
    tcase_add_test (tc, test_sigterm_and_kgym_drain_let_a_worker_finish_and_leave);
    tcase_add_test (tc, test_second_sigterm_leaves_at_once_and_the_job_runs_elsewhere);
    tcase_add_test (tc, test_quarantined_worker_takes_no_job_until_ready_again);
    suite_add_tcase (suite, tc);
    int rc = testutil_run_suite (suite);
    char command [128];
    snprintf (command, sizeof (command), "rm -rf '%s'", cache_dir);
    if (system (command) != 0)
        fprintf (stderr, "cannot remove %s\n", cache_dir);
    return rc;
}
