/*  cpu_runner - the supervisor's handle on one sandboxed kgym-runner.

    new() makes the shared memory (a sealed memfd the runner can not
    shrink), a SOCK_SEQPACKET socketpair and a sandbox (uid, cgroup,
    process group, pid namespace), spawns the runner on a read-only
    reopening of the module, lets the sandbox check the runner's
    confinement from outside (the caps come from there, never from the
    runner) and waits for its READY reply. Between requests
    the runner is kept stopped (SIGSTOP, waited for), so nothing a kernel
    left running can touch the outputs while the caller checks them. Every
    reply is untrusted: sizes are checked, text is sanitised, time is
    measured here. A runner that dies or overruns is killed with its whole
    group and cgroup and reaped; it is never signalled after that.
*/
#include "common_util.h"
#include "cpu_runner.h"
#include "common_log.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_CONFIRM_TIMEOUT_S 10.0    //  exec and confinement (a loaded host is slow)
#define S_READY_TIMEOUT_S   5.0     //  the module's constructors
#define S_STOP_TIMEOUT_S    2.0     //  SIGSTOP normally takes microseconds
#define S_EXIT_GRACE_S      1.0     //  a runner whose socket closed should be dead by then

struct cpu_runner_t {
    sandbox_t *sandbox;      //  cgroup and process group of the runner
    int sock;                       //  our end of the socketpair
    int shm_fd;                     //  memfd of the shared memory
    uint8_t *shm;                   //  our mapping of it, NULL until asked for
    size_t shm_size;                //  bytes mapped (= the memfd's size)
    bool alive;                     //  not known to be dead
    bool stopped;                   //  SIGSTOPped since the last reply
    bool confirmed;                 //  the sandbox checked its confinement
    uint32_t seq;                   //  the last request's number (READY's reply is 0)
};


//  Copy untrusted text: NUL-terminated, printable ASCII only.
static void
s_sanitise (char *dst, size_t len, const char *src, size_t srclen)
{
    size_t n = strnlen (src, srclen);
    if (n >= len)
        n = len - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) src [i];
        dst [i] = c >= 32 && c < 127? (char) c: '?';
    }
    dst [n] = 0;
}

//  Discard anything queued from the runner (a stray write by a kernel's
//  leftover thread must not pass for the next reply). -1 on EOF.
static int
s_drain (cpu_runner_t *self)
{
    runner_reply_t junk;
    for (;;) {
        ssize_t n = recv (self->sock, &junk, sizeof junk, MSG_DONTWAIT);
        if (n == 0)
            return -1;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR? 0: -1;
    }
}

uint64_t cpu_runner_cpu_ns (cpu_runner_t *self);

//  Wait for one reply until deadline, or until the runner's CPU clock passes
//  cpu_deadline (0: no such limit; checked every CPU_POLL_MS). 0 got it, 1
//  timed out, 2 over its CPU time, -1 EOF or error, -2 malformed.
#define CPU_POLL_MS 20
static int
s_wait_reply_cpu (cpu_runner_t *self, uint64_t deadline, uint64_t cpu_deadline,
                  runner_reply_t *reply)
{
    for (;;) {
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return 1;
        if (cpu_deadline && cpu_runner_cpu_ns (self) > cpu_deadline)
            return 2;
        struct pollfd pfd = { .fd = self->sock, .events = POLLIN };
        int ms = (int) ((deadline - now + 999999) / 1000000);
        if (cpu_deadline && ms > CPU_POLL_MS)
            ms = CPU_POLL_MS;
        int rc = poll (&pfd, 1, ms);
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc <= 0)
            continue;
        if (pfd.revents & POLLIN) {
            ssize_t n = recv (self->sock, reply, sizeof *reply, MSG_DONTWAIT | MSG_TRUNC);
            if (n == (ssize_t) sizeof *reply && reply->seq != self->seq)
                continue;           //  not the answer to this request: a late or forged one
            if (n == (ssize_t) sizeof *reply)
                return 0;
            if (n == 0)
                return -1;
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            return n < 0? -1: -2;
        }
        if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
            return -1;
    }
}

static int
s_wait_reply (cpu_runner_t *self, uint64_t deadline, runner_reply_t *reply)
{
    return s_wait_reply_cpu (self, deadline, 0, reply);
}

//  Send one request, waiting for room no later than deadline. 0, 1 timed
//  out, -1 the runner is gone.
static int
s_send (cpu_runner_t *self, const runner_request_t *req, uint64_t deadline)
{
    for (;;) {
        ssize_t n = send (self->sock, req, sizeof *req, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t) sizeof *req)
            return 0;
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return 1;
        struct pollfd pfd = { .fd = self->sock, .events = POLLOUT };
        poll (&pfd, 1, (int) ((deadline - now + 999999) / 1000000));
    }
}

//  The runner died or misbehaved: make sure it is dead and reaped, and say how.
static void
s_crashed (cpu_runner_t *self, cpu_run_outcome_t *out, const char *how)
{
    self->alive = false;
    self->stopped = false;
    bool still = sandbox_wait (self->sandbox, S_EXIT_GRACE_S) != 0;
    sandbox_kill (self->sandbox);
    int status = 0;
    sandbox_reaped (self->sandbox, &status, NULL);
    out->status = RUN_CRASH;
    if (WIFSIGNALED (status))
        out->signal = WTERMSIG (status);
    else
    if (WIFEXITED (status))
        out->exit_code = WEXITSTATUS (status);
    if (how || still)
        snprintf (out->message, sizeof out->message, "%s", how? how: "runner closed its socket");
    else
        sandbox_describe (self->sandbox, out->message, sizeof out->message);
}

uint64_t
cpu_runner_cpu_ns (cpu_runner_t *self)
{
    int pid = self? sandbox_pid (self->sandbox): 0;
    clockid_t clock;
    struct timespec ts;
    if (pid <= 0 || clock_getcpuclockid (pid, &clock) != 0 || clock_gettime (clock, &ts) != 0)
        return 0;
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

//  Threads of the runner process now (from /proc, not from it); 0 when unknown.
static uint32_t
s_threads (cpu_runner_t *self)
{
    char path [64], buf [4096];
    snprintf (path, sizeof path, "/proc/%d/status", sandbox_pid (self->sandbox));
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read (fd, buf, sizeof buf - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf [n] = 0;
    const char *line = strstr (buf, "\nThreads:");
    return line? (uint32_t) strtoul (line + 9, NULL, 10): 0;
}

//  One request/reply round trip; out filled for anything but a reply.
//  0 with *reply and wall time; 1 when out already tells the outcome.
static int
s_exchange (cpu_runner_t *self, runner_request_t *req, double timeout_s, double cpu_s,
            runner_reply_t *reply, uint64_t *wall_ns, cpu_run_outcome_t *out)
{
    if (s_drain (self) != 0) {
        s_crashed (self, out, NULL);
        return 1;
    }
    if (++self->seq == 0)           //  never READY's 0
        self->seq = 1;
    req->seq = self->seq;
    //  The clock starts before the runner wakes: nothing it does once awake
    //  is outside the measured time.
    uint64_t c0 = cpu_runner_cpu_ns (self);
    uint64_t t0 = common_now_ns ();
    if (self->stopped) {
        sandbox_signal (self->sandbox, SIGCONT);
        self->stopped = false;
    }
    uint64_t deadline = t0 + (uint64_t) (timeout_s > 0? timeout_s * 1e9: 0);
    uint64_t cpu_deadline = cpu_s > 0? c0 + (uint64_t) (cpu_s * 1e9): 0;
    int rc = s_send (self, req, deadline);
    if (rc == 0)
        rc = s_wait_reply_cpu (self, deadline, cpu_deadline, reply);
    uint64_t t1 = common_now_ns ();
    *wall_ns = t1 - t0;
    out->wall_ns = t1 - t0;
    if (rc == 1 || rc == 2) {
        self->alive = false;
        out->cpu_ns = cpu_runner_cpu_ns (self) - c0;
        sandbox_kill (self->sandbox);
        out->status = RUN_TIMEOUT;
        out->over_cpu = rc == 2;
        if (rc == 2)
            snprintf (out->message, sizeof out->message, "used %.3g s of CPU time, its limit", cpu_s);
        else
            snprintf (out->message, sizeof out->message, "no reply after %.3g s", timeout_s);
        if (sandbox_oom (self->sandbox))
            snprintf (out->message + strlen (out->message), sizeof out->message - strlen (out->message),
                      " (and ran out of memory)");
        return 1;
    }
    if (rc == -2) {
        sandbox_kill (self->sandbox);
        s_crashed (self, out, "malformed reply from the runner");
        return 1;
    }
    if (rc != 0) {
        s_crashed (self, out, NULL);
        return 1;
    }
    //  Freeze whatever the kernel left running until the next request. A
    //  runner that exits right after replying, or can not be stopped (a
    //  vfork child holding it), has failed this call: its reply counts for
    //  nothing.
    if (sandbox_stop (self->sandbox, S_STOP_TIMEOUT_S) != 0) {
        s_crashed (self, out, "the runner exited or could not be stopped right after replying");
        return 1;
    }
    self->stopped = true;
    out->cpu_ns = cpu_runner_cpu_ns (self) - c0;
    out->threads = s_threads (self);
    return 0;
}

cpu_runner_t *
cpu_runner_start (const sandbox_config_t *cfg, int so_fd, char *err, size_t errlen)
{
    char why [256] = "";
    cpu_runner_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, errlen, "out of memory");
        return NULL;
    }
    self->sock = -1;
    int peer = -1, ro = -1;
    //  The runner may grow but never shrink or seal it (a shrink would
    //  SIGBUS the supervisor reading the outputs).
    self->shm_fd = memfd_create ("kgym-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (self->shm_fd < 0
    ||  fcntl (self->shm_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
        snprintf (why, sizeof why, "memfd: %s", strerror (errno));
        goto fail;
    }
    int sv [2];
    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        snprintf (why, sizeof why, "socketpair: %s", strerror (errno));
        goto fail;
    }
    self->sock = sv [0];
    peer = sv [1];
    //  A read-only description of the module, so the runner can not rewrite it.
    char path [64];
    snprintf (path, sizeof path, "/proc/self/fd/%d", so_fd);
    ro = open (path, O_RDONLY | O_CLOEXEC);
    if (ro < 0)
        ro = fcntl (so_fd, F_DUPFD_CLOEXEC, 3);
    if (ro < 0) {
        snprintf (why, sizeof why, "module fd %d: %s", so_fd, strerror (errno));
        goto fail;
    }
    self->sandbox = sandbox_new (cfg, why, sizeof why);
    if (!self->sandbox)
        goto fail;
    char sock [16], shm [16];
    snprintf (sock, sizeof sock, "%d", peer);
    snprintf (shm, sizeof shm, "%d", self->shm_fd);
    char *args [] = { "--mode", "kernel", "--sock", sock, "--shm", shm, NULL };
    int keep [] = { peer, self->shm_fd, -1 };
    sandbox_spawn_t what = { .args = args, .keep = keep, .object_fd = ro, .out_fd = -1 };
    if (sandbox_spawn (self->sandbox, &what, why, sizeof why))
        goto fail;
    close (peer);
    close (ro);
    self->alive = true;
    return self;
fail:
    if (peer >= 0)
        close (peer);
    if (ro >= 0)
        close (ro);
    snprintf (err, errlen, "%s", why [0]? why: "cannot start the runner");
    cpu_runner_destroy (&self);
    return NULL;
}

int
cpu_runner_ready (cpu_runner_t *self, char *err, size_t errlen)
{
    char why [512] = "";
    //  Nothing of the candidate's runs before the sandbox has checked the runner.
    if (cpu_runner_confirm (self, why, sizeof why) != 0)
        goto fail;
    runner_reply_t reply;
    int rc = s_wait_reply (self, common_now_ns () + (uint64_t) (S_READY_TIMEOUT_S * 1e9), &reply);
    if (rc == 1) {
        //  The candidate's constructors run inside this wait.
        snprintf (why, sizeof why, "load: the module did not finish loading within %.0f s",
                  S_READY_TIMEOUT_S);
        goto fail;
    }
    if (rc != 0) {
        cpu_run_outcome_t out;
        memset (&out, 0, sizeof out);
        s_crashed (self, &out, rc == -2? "malformed reply": NULL);
        snprintf (why, sizeof why, "load: the runner died while loading the module (%s)",
                  out.message);
        goto fail;
    }
    if (reply.status != RUNNER_OK) {
        char text [sizeof reply.message];
        s_sanitise (text, sizeof text, reply.message, sizeof reply.message);
        snprintf (why, sizeof why, "%s", text [0]? text: "runner setup failed");
        goto fail;
    }
    if (sandbox_stop (self->sandbox, S_STOP_TIMEOUT_S) != 0) {
        snprintf (why, sizeof why, "runner died after loading");
        goto fail;
    }
    self->stopped = true;
    return 0;
fail:
    snprintf (err, errlen, "%s", why [0]? why: "cannot start the runner");
    return -1;
}

int
cpu_runner_confirm (cpu_runner_t *self, char *err, size_t errlen)
{
    if (self->confirmed)
        return 0;
    if (sandbox_confirm (self->sandbox, S_CONFIRM_TIMEOUT_S, err, errlen) != 0) {
        self->alive = false;
        return -1;
    }
    self->confirmed = true;
    return 0;
}

cpu_runner_t *
cpu_runner_new (const sandbox_config_t *cfg, int so_fd, char *err, size_t errlen)
{
    cpu_runner_t *self = cpu_runner_start (cfg, so_fd, err, errlen);
    if (self && cpu_runner_ready (self, err, errlen))
        cpu_runner_destroy (&self);
    return self;
}

void *
cpu_runner_shm (cpu_runner_t *self, size_t size)
{
    if (self->shm && size <= self->shm_size)
        return self->shm;
    long page = sysconf (_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - (size_t) page)
        return NULL;
    size_t bytes = (size + (size_t) page - 1) / (size_t) page * (size_t) page;
    if (ftruncate (self->shm_fd, (off_t) bytes) != 0) {
        log_warn ("runner", "cannot grow shared memory to %zu bytes: %s", bytes, strerror (errno));
        return NULL;
    }
    if (self->shm)
        munmap (self->shm, self->shm_size);
    self->shm = NULL;
    self->shm_size = 0;
    void *base = mmap (NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, self->shm_fd, 0);
    if (base == MAP_FAILED) {
        log_warn ("runner", "cannot map %zu bytes of shared memory: %s", bytes, strerror (errno));
        return NULL;
    }
    self->shm = base;
    self->shm_size = bytes;
    return base;
}

int
cpu_runner_run (cpu_runner_t *self, runner_request_t *req, double timeout_s, double cpu_s,
                cpu_run_outcome_t *out)
{
    memset (out, 0, sizeof *out);
    if (!cpu_runner_alive (self)) {
        out->status = RUN_ERROR;
        snprintf (out->message, sizeof out->message, "the runner is not running");
        return -1;
    }
    req->op = RUNNER_OP_RUN;
    req->shm_size = self->shm? self->shm_size: 0;
    runner_reply_t reply;
    uint64_t wall = 0;
    if (s_exchange (self, req, timeout_s, cpu_s, &reply, &wall, out) != 0)
        return 0;
    out->runner_ns = reply.elapsed_ns;
    if (reply.status == RUNNER_OK) {
        out->status = RUN_OK;
        out->nlaunches = reply.nlaunches <= req->nlaunches? reply.nlaunches: req->nlaunches;
        memcpy (out->launch_wall_ns, reply.launch_wall_ns, sizeof out->launch_wall_ns);
        memcpy (out->launch_cpu_ns, reply.launch_cpu_ns, sizeof out->launch_cpu_ns);
        return 0;
    }
    out->status = RUN_ERROR;
    out->runner_status = reply.status;
    char text [sizeof reply.message];
    s_sanitise (text, sizeof text, reply.message, sizeof reply.message);
    const char *kind = reply.status == RUNNER_NO_SYMBOL? "no such kernel"
                     : reply.status == RUNNER_BAD_REQUEST? "bad request"
                     : reply.status == RUNNER_SHM_FAILED? "shared memory failed": "runner error";
    snprintf (out->message, sizeof out->message, "%s: %s", kind, text);
    return 0;
}

int
cpu_runner_ping (cpu_runner_t *self, double timeout_s, uint64_t *rtt_ns)
{
    *rtt_ns = 0;
    if (!cpu_runner_alive (self))
        return -1;
    runner_request_t *req = calloc (1, sizeof *req);
    if (!req)
        return -1;
    req->op = RUNNER_OP_PING;
    req->shm_size = self->shm? self->shm_size: 0;
    runner_reply_t reply;
    cpu_run_outcome_t out;
    memset (&out, 0, sizeof out);
    uint64_t wall = 0;
    int rc = s_exchange (self, req, timeout_s, 0, &reply, &wall, &out);
    free (req);
    if (rc != 0 || reply.status != RUNNER_OK)
        return -1;
    *rtt_ns = wall;
    return 0;
}

bool
cpu_runner_alive (cpu_runner_t *self)
{
    return self && self->alive && sandbox_pid (self->sandbox) != 0;
}

int
cpu_runner_pin (cpu_runner_t *self, int cpu)
{
    return self && self->alive? sandbox_pin (self->sandbox, cpu): -1;
}

const char *
cpu_runner_caps (cpu_runner_t *self)
{
    return sandbox_caps (self->sandbox);
}

sandbox_t *
cpu_runner_sandbox (cpu_runner_t *self)
{
    return self->sandbox;
}

void
cpu_runner_destroy (cpu_runner_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cpu_runner_t *self = *self_p;
    sandbox_destroy (&self->sandbox);
    if (self->shm)
        munmap (self->shm, self->shm_size);
    if (self->sock >= 0)
        close (self->sock);
    if (self->shm_fd >= 0)
        close (self->shm_fd);
    free (self);
    *self_p = NULL;
}
