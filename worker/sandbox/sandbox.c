/*  sandbox - one confined runner, seen from the supervisor.

    See sandbox.h for the life of a runner. The pieces live in their own
    classes: sandbox_kind (policies), sandbox_uid, sandbox_cgroup,
    sandbox_caps (the check from outside), sandbox_confine (the runner's
    half), sandbox_find (the programs). This file starts, checks, watches
    and ends the process, and runs the exec mode (the compiler).
*/
#include "common_util.h"
#include "sandbox.h"
#include "sandbox_caps.h"
#include "sandbox_cgroup.h"
#include "sandbox_confine.h"
#include "sandbox_file.h"
#include "sandbox_find.h"
#include "sandbox_uid.h"
#include "common_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_OUTPUT_MAX    (64 * 1024)     //  captured exec output before "[truncated]"
#define S_MAX_ARGV      256             //  program arguments
#define S_MAX_KEEP      8               //  descriptors handed over by the caller
#define S_STACK         (64 * 1024)     //  the clone child's stack until it execs
#define S_CAPS_LEN      512             //  fits a result's sandbox field
#define S_CONFIRM_S     10.0            //  exec, confinement (the probe's)
#define S_MAX_ENV       64              //  operator variables passed on

extern char **environ;

struct sandbox_t {
    sandbox_config_t cfg;               //  copy; runner_path points at program, slot NULL
    const sandbox_kind_info_t *kind;    //  its policy
    char program [PATH_MAX];            //  what to start
    bool userns;                        //  not root: a user namespace of its own
    bool probe;                         //  the probe runner (makes the shared namespaces)
    sandbox_uid_t *uid;                 //  root: the uid it holds
    sandbox_cgroup_t *cgroup;           //  its cgroup, NULL when none
    sandbox_caps_want_t want;           //  what it is asked to be (the check)
    char caps [S_CAPS_LEN];             //  the caps object, "{}" before confirm
    int sync;                           //  our end of the handshake socket, -1
    int channel;                        //  our end of the channel, -1
    int pid;                            //  runner pid = pgid; 0 when none
    int pidfd;                          //  its pidfd, -1 when none
    bool reaped;                        //  waited for; never signal again
    int wstatus;                        //  its wait status once reaped
    double cpu_s;                       //  its user+system seconds once reaped
};

//  ---------------------------------------------------------------------
//  Configuration

void
sandbox_config_default (sandbox_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->kind = SANDBOX_KERNEL;
    cfg->mem_bytes = 4ull << 30;
    cfg->max_pids = 32;
    cfg->cpu_s = 120;
}

const char *
sandbox_runner_path (void)
{
    const sandbox_kind_info_t *kind = sandbox_kind_info (SANDBOX_KERNEL);
    return sandbox_find (kind->program, kind->program_env, kind->backend);
}

sandbox_t *
sandbox_new (const sandbox_config_t *cfg, char *err, size_t errlen)
{
    sandbox_t *self = calloc (1, sizeof *self);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    self->sync = self->channel = self->pidfd = -1;
    snprintf (self->caps, sizeof self->caps, "{}");
    sandbox_config_t def;
    sandbox_config_default (&def);
    self->cfg = cfg? *cfg: def;
    if ((unsigned) self->cfg.kind >= SANDBOX_KINDS) {
        common_seterr (err, errlen, "unknown sandbox kind %d", (int) self->cfg.kind);
        free (self);
        return NULL;
    }
    self->kind = sandbox_kind_info (self->cfg.kind);
    if (self->cfg.mem_bytes == 0)
        self->cfg.mem_bytes = def.mem_bytes;
    if (self->cfg.max_pids == 0)
        self->cfg.max_pids = def.max_pids;
    if (self->cfg.cpu_s == 0)
        self->cfg.cpu_s = def.cpu_s;
    const char *program = self->cfg.runner_path? self->cfg.runner_path
                        : sandbox_find (self->kind->program, self->kind->program_env, self->kind->backend);
    if (!program || strlen (program) >= sizeof self->program) {
        common_seterr (err, errlen, "%s not found (set %s)", self->kind->program, self->kind->program_env);
        free (self);
        return NULL;
    }
    snprintf (self->program, sizeof self->program, "%s", program);
    self->cfg.runner_path = self->program;
    self->userns = geteuid () != 0;
    if (self->userns) {
        self->want.uid = geteuid ();
        self->want.gid = getegid ();
    }
    else {
        self->uid = sandbox_uid_new (err, errlen);
        if (!self->uid) {
            free (self);
            return NULL;
        }
        self->want.uid = sandbox_uid_number (self->uid);
        self->want.gid = (gid_t) self->want.uid;
    }
    if (self->kind->cgroup)
        self->cgroup = sandbox_cgroup_new (self->cfg.slot, self->cfg.mem_bytes, self->cfg.max_pids);
    self->cfg.slot = NULL;              //  not kept: the caller owns the string
    //  What it will be asked to hold. With a memory cgroup the address space
    //  cap is only a backstop, loose enough that the cgroup binds first
    //  (a clear "out of memory"); without one it is the cap.
    uint64_t mem = self->cfg.mem_bytes;
    bool cg_mem = self->cgroup && sandbox_cgroup_memory (self->cgroup);
    self->want.kind = self->cfg.kind;
    self->want.userns = self->userns;
    self->want.cgroup = self->cgroup;
    self->want.rlimit_as = !self->kind->rlimit_as || self->cfg.gpu? SANDBOX_RLIMIT_LEAVE
                         : cg_mem? mem + mem / 2 + (1ull << 30): mem + (256ull << 20);
    self->want.rlimit_cpu = self->cfg.cpu_s == SANDBOX_NO_LIMIT? SANDBOX_RLIMIT_LEAVE: self->cfg.cpu_s;
    self->want.rlimit_fsize = self->cfg.fsize_bytes? self->cfg.fsize_bytes: self->kind->fsize;
    self->want.rlimit_nofile = self->kind->nofile;
    //  Its uid is its own: RLIMIT_NPROC counts exactly its processes.
    self->want.rlimit_nproc = self->cfg.max_pids;
    return self;
}

//  ---------------------------------------------------------------------
//  Starting: clone as pid 1 of a new pid namespace, then exec

//  What the clone child needs, prepared before (it shares our memory and
//  must not allocate).
typedef struct {
    const char *path;                   //  program
    char *const *argv, *const *envp;
    int fds [S_MAX_KEEP + 8];           //  handed over: close-on-exec cleared
    int nfds;
    int devnull;                        //  stdin, and stdout/stderr without out_fd
    int out_fd;                         //  stdout and stderr, -1 none
    bool userns;                        //  write the maps of a fresh user namespace
    char uid_map [48], gid_map [48];    //  "0 <uid> 1"
    int netns, ipcns;                   //  empty namespaces to enter, -1: make new ones
    int err;                            //  errno of the step that failed
    const char *step;                   //  which
} s_child_t;

static int
s_child_fail (s_child_t *c, const char *step)
{
    c->err = errno? errno: EINVAL;
    c->step = step;
    _exit (127);
}

static int
s_child (void *arg)
{
    s_child_t *c = arg;
    struct sigaction dfl;
    memset (&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < _NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction (sig, &dfl, NULL);        //  glibc's own ones refuse: fine
    if (setpgid (0, 0) != 0)
        return s_child_fail (c, "setpgid");
    //  Root of its user namespace, mapped to us: it keeps its capabilities
    //  there across exec, to make its namespaces and root, then drops them.
    if (c->userns
    && (sandbox_file_write ("/proc/self/setgroups", "deny") != 0
    ||  sandbox_file_write ("/proc/self/uid_map", c->uid_map) != 0
    ||  sandbox_file_write ("/proc/self/gid_map", c->gid_map) != 0))
        return s_child_fail (c, "user namespace maps");
    //  Network and IPC namespaces: the shared empty ones (entering costs
    //  microseconds), else new ones (milliseconds).
    if ((c->netns >= 0? setns (c->netns, CLONE_NEWNET): unshare (CLONE_NEWNET)) != 0)
        return s_child_fail (c, "network namespace");
    if ((c->ipcns >= 0? setns (c->ipcns, CLONE_NEWIPC): unshare (CLONE_NEWIPC)) != 0)
        return s_child_fail (c, "IPC namespace");
    int out = c->out_fd >= 0? c->out_fd: c->devnull;
    if (dup2 (c->devnull, 0) < 0 || dup2 (out, 1) < 0 || dup2 (out, 2) < 0)
        return s_child_fail (c, "stdio");
    for (int i = 0; i < c->nfds; i++)
        if (fcntl (c->fds [i], F_SETFD, 0) != 0)
            return s_child_fail (c, "descriptors");
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);
    execve (c->path, c->argv, c->envp);
    return s_child_fail (c, "exec");
}

//  Clone the child (see s_child); its pid and pidfd. 0 or -1 with why.
static int
s_clone (sandbox_t *self, s_child_t *c, char *err, size_t errlen)
{
    void *stack = mmap (NULL, S_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        common_seterr (err, errlen, "stack: %s", strerror (errno));
        return -1;
    }
    int flags = CLONE_VM | CLONE_VFORK | CLONE_NEWPID | CLONE_PIDFD | SIGCHLD;
    if (self->userns)
        flags |= CLONE_NEWUSER;
    //  No handler of ours may run in the child while it shares our memory.
    sigset_t all, old;
    sigfillset (&all);
    pthread_sigmask (SIG_BLOCK, &all, &old);
    int pidfd = -1;
    pid_t pid = clone (s_child, (char *) stack + S_STACK, flags, c, &pidfd);
    int saved = errno;
    pthread_sigmask (SIG_SETMASK, &old, NULL);
    munmap (stack, S_STACK);
    if (pid < 0) {
        common_seterr (err, errlen, "cannot start %s: clone (new pid%s namespace): %s", self->program,
                       self->userns? " and user": "", strerror (saved));
        return -1;
    }
    if (c->err) {
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
            ;
        if (pidfd >= 0)
            close (pidfd);
        common_seterr (err, errlen, "cannot start %s: %s: %s", self->program, c->step, strerror (c->err));
        return -1;
    }
    self->pid = pid;
    self->pidfd = pidfd;
    return 0;
}

//  A copy of fd at 3 or above (close-on-exec) when it is one of 0..2, so
//  that placing stdio in the child cannot clobber it.
static int
s_high_fd (int fd, int *owned)
{
    *owned = -1;
    if (fd < 0 || fd > 2)
        return fd;
    *owned = fcntl (fd, F_DUPFD_CLOEXEC, 3);
    return *owned;
}

//  The argument vector under construction (numbers kept alive in it).
typedef struct {
    const char *v [S_MAX_ARGV + 96];
    int n;
    char num [40][24];
    int k;
    bool full;
} s_argv_t;

static void
s_arg (s_argv_t *a, const char *opt, const char *value)
{
    if (a->n + 2 >= (int) (sizeof a->v / sizeof a->v [0]) - 1) {
        a->full = true;
        return;
    }
    a->v [a->n++] = opt;
    if (value)
        a->v [a->n++] = value;
}

static void
s_arg_num (s_argv_t *a, const char *opt, unsigned long long value)
{
    if (a->k >= 40) {
        a->full = true;
        return;
    }
    snprintf (a->num [a->k], sizeof a->num [0], "%llu", value);
    s_arg (a, opt, a->num [a->k++]);
}

//  Defined with the probe below: the shared namespaces.
static pthread_once_t s_probe_once;
static int s_shared_ns [2];
static void s_probe (void);

//  Hand the writable directory to the runner's uid (its contents stay ours
//  to read: the runner only needs to read what is there and add to it).
//  Only a private directory of ours: never a tree others use (/tmp).
static int
s_hand_over (sandbox_t *self, const char *cwd, char *err, size_t errlen)
{
    int fd = open (cwd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat (fd, &st) != 0) {
        common_seterr (err, errlen, "the runner's directory %s: %s", cwd, strerror (errno));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    if (st.st_uid != geteuid () || (st.st_mode & 022)) {
        common_seterr (err, errlen, "the runner's directory %s is not a private directory of the "
                       "worker's (owner %u, mode %o)", cwd, (unsigned) st.st_uid,
                       (unsigned) (st.st_mode & 07777));
        close (fd);
        return -1;
    }
    if (!self->userns && fchown (fd, self->want.uid, self->want.gid) != 0) {
        common_seterr (err, errlen, "cannot hand %s to the runner: %s", cwd, strerror (errno));
        close (fd);
        return -1;
    }
    close (fd);
    return 0;
}

int
sandbox_spawn (sandbox_t *self, const sandbox_spawn_t *what, char *err, size_t errlen)
{
    if (self->pid || self->reaped) {
        common_seterr (err, errlen, "sandbox already used");
        return -1;
    }
    const sandbox_kind_info_t *kind = self->kind;
    const char *cwd = kind->root == SANDBOX_ROOT_VIEW? what->cwd: NULL;
    if (cwd && s_hand_over (self, cwd, err, errlen))
        return -1;
    int rc = -1;
    int owned [S_MAX_KEEP + 2], nowned = 0;
    int sync [2] = { -1, -1 }, chan [2] = { -1, -1 };
    int devnull = open ("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) != 0
    || (kind->channel && socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0)) {
        common_seterr (err, errlen, "descriptors: %s", strerror (errno));
        goto done;
    }
    s_child_t c;
    memset (&c, 0, sizeof c);
    c.path = self->program;
    c.devnull = devnull;
    c.out_fd = s_high_fd (what->out_fd, &owned [nowned++]);
    c.userns = self->userns;
    snprintf (c.uid_map, sizeof c.uid_map, "0 %u 1", (unsigned) geteuid ());
    snprintf (c.gid_map, sizeof c.gid_map, "0 %u 1", (unsigned) getegid ());
    c.fds [c.nfds++] = sync [1];
    s_argv_t a;
    memset (&a, 0, sizeof a);
    a.v [a.n++] = self->program;
    s_arg (&a, "--kind", kind->name);
    s_arg_num (&a, "--sync", (unsigned) sync [1]);
    if (self->userns)
        s_arg (&a, "--userns", NULL);
    else
        s_arg_num (&a, "--uid", self->want.uid);
    for (int i = 0; self->cgroup && sandbox_cgroup_dir (self->cgroup, i); i++)
        s_arg (&a, "--cgroup", sandbox_cgroup_dir (self->cgroup, i));
    //  As root, runners enter the empty namespaces the probe made.
    c.netns = c.ipcns = -1;
    if (!self->userns && !self->probe) {
        pthread_once (&s_probe_once, s_probe);
        c.netns = s_shared_ns [0];
        c.ipcns = s_shared_ns [1];
    }
    if (kind->root == SANDBOX_ROOT_EMPTY && what->object_fd >= 0) {
        s_arg_num (&a, "--object", (unsigned) what->object_fd);
        c.fds [c.nfds++] = what->object_fd;
    }
    for (int i = 0; kind->root == SANDBOX_ROOT_VIEW && kind->view [i]; i++)
        s_arg (&a, "--ro", kind->view [i]);
    for (int i = 0; kind->root == SANDBOX_ROOT_VIEW && i < SANDBOX_VIEW_PATHS && self->cfg.view [i]; i++)
        s_arg (&a, "--ro", self->cfg.view [i]);
    if (cwd)
        s_arg (&a, "--rw", cwd);
    if (cwd && what->cwd_at)
        s_arg (&a, "--rw-at", what->cwd_at);
    for (int i = 0; what->keep && what->keep [i] >= 0; i++) {
        if (i >= S_MAX_KEEP || nowned >= S_MAX_KEEP + 2) {
            common_seterr (err, errlen, "too many descriptors to hand over");
            goto done;
        }
        int fd = s_high_fd (what->keep [i], &owned [nowned++]);
        s_arg_num (&a, "--keep", (unsigned) fd);
        c.fds [c.nfds++] = fd;
    }
    if (kind->channel) {
        s_arg_num (&a, "--keep", (unsigned) chan [1]);
        c.fds [c.nfds++] = chan [1];
    }
    const sandbox_caps_want_t *w = &self->want;
    const struct { const char *opt; uint64_t value; } limits [] = {
        { "--rlimit-as", w->rlimit_as }, { "--rlimit-cpu", w->rlimit_cpu },
        { "--rlimit-fsize", w->rlimit_fsize }, { "--rlimit-nofile", w->rlimit_nofile },
        { "--rlimit-nproc", w->rlimit_nproc },
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits [0]; i++)
        if (limits [i].value != SANDBOX_RLIMIT_LEAVE)
            s_arg_num (&a, limits [i].opt, limits [i].value);
    if (self->cfg.pinned)
        s_arg (&a, "--pinned", NULL);
    if (self->cfg.selftest)
        s_arg (&a, "--selftest", NULL);
    //  The program's own: a channel is its --fd, then what the caller says.
    if (kind->channel)
        s_arg_num (&a, "--fd", (unsigned) chan [1]);
    for (int i = 0; what->args && what->args [i]; i++)
        s_arg (&a, what->args [i], NULL);
    if (a.full) {
        common_seterr (err, errlen, "too many arguments");
        goto done;
    }
    a.v [a.n] = NULL;
    //  A small fixed environment: the worker's own never reaches a runner,
    //  but for the operator's settings trusted runners read (sandbox_kind.c).
    char tmpdir [PATH_MAX + 16];
    const char *inside = cwd && what->cwd_at? what->cwd_at: cwd;
    snprintf (tmpdir, sizeof tmpdir, "TMPDIR=%s", inside && strlen (inside) < PATH_MAX? inside: "/tmp");
    const char *envp [S_MAX_ENV + 5] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "LANG=C", tmpdir };
    int nenv = 4;
    for (char **e = environ; kind->operator_env && e && *e && nenv < S_MAX_ENV + 4; e++)
        if (strncmp (*e, "LD_LIBRARY_PATH=", 16) == 0 || strncmp (*e, "KGYM_", 5) == 0
        ||  strncmp (*e, "CUDA_", 5) == 0)
            envp [nenv++] = *e;
    envp [nenv] = NULL;
    c.argv = (char *const *) a.v;
    c.envp = (char *const *) envp;
    if (s_clone (self, &c, err, errlen) != 0)
        goto done;
    self->sync = sync [0];
    sync [0] = -1;
    self->channel = chan [0];
    chan [0] = -1;
    rc = 0;
done:
    for (int i = 0; i < 2; i++) {
        if (sync [i] >= 0)
            close (sync [i]);
        if (chan [i] >= 0)
            close (chan [i]);
    }
    for (int i = 0; i < nowned; i++)
        if (owned [i] >= 0)
            close (owned [i]);
    if (devnull >= 0)
        close (devnull);
    return rc;
}

//  ---------------------------------------------------------------------
//  The handshake

//  One line from the runner on sync until deadline (NUL-terminated, no
//  newline). 0, or -1 on EOF, timeout or error.
static int
s_read_line (sandbox_t *self, uint64_t deadline, char *line, size_t len)
{
    size_t used = 0;
    while (used + 1 < len) {
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return -1;
        struct pollfd pfd = { .fd = self->sync, .events = POLLIN };
        int rc = poll (&pfd, 1, (int) ((deadline - now + 999999) / 1000000));
        if (rc < 0 && errno != EINTR)
            return -1;
        if (rc <= 0)
            continue;
        ssize_t n = recv (self->sync, line + used, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        if (line [used] == '\n')
            break;
        used++;
    }
    line [used] = 0;
    return 0;
}

int
sandbox_confirm (sandbox_t *self, double timeout_s, char *err, size_t errlen)
{
    if (self->sync < 0 || !self->pid || self->reaped) {
        common_seterr (err, errlen, "sandbox: nothing to confirm");
        return -1;
    }
    char line [640];
    uint64_t deadline = common_now_ns () + (uint64_t) (timeout_s * 1e9);
    char why [256] = "";
    if (s_read_line (self, deadline, line, sizeof line) != 0) {
        bool gone = sandbox_wait (self, 0.5) == 0;
        sandbox_kill (self);
        if (gone)
            sandbox_describe (self, why, sizeof why);
        common_seterr (err, errlen, "sandbox: %s did not confine itself (%s)", self->kind->program,
                       gone? why: "no answer");
        return -1;
    }
    if (strcmp (line, "confined") != 0) {
        sandbox_kill (self);
        common_seterr (err, errlen, "sandbox: %s: %.400s", self->kind->program,
                       strncmp (line, "error: ", 7) == 0? line + 7: "malformed answer");
        return -1;
    }
    //  Its word is not enough: look at it.
    if (sandbox_caps_read (&self->want, self->pid, true, self->caps, sizeof self->caps,
                           why, sizeof why) != 0) {
        sandbox_kill (self);
        snprintf (self->caps, sizeof self->caps, "{}");
        common_seterr (err, errlen, "sandbox: %s is not confined as asked: %s", self->kind->program, why);
        return -1;
    }
    if (send (self->sync, "g", 1, MSG_NOSIGNAL) != 1) {
        sandbox_kill (self);
        common_seterr (err, errlen, "sandbox: %s went away", self->kind->program);
        return -1;
    }
    if (!self->cfg.selftest) {
        close (self->sync);
        self->sync = -1;
    }
    return 0;
}

const char *
sandbox_caps (sandbox_t *self)
{
    return self->caps;
}

int
sandbox_caps_refresh (sandbox_t *self)
{
    char caps [S_CAPS_LEN], why [128];
    if (!self->pid || self->reaped
    ||  sandbox_caps_read (&self->want, self->pid, false, caps, sizeof caps, why, sizeof why) != 0)
        return -1;
    memcpy (self->caps, caps, sizeof caps);
    return 0;
}

int
sandbox_channel (sandbox_t *self)
{
    return self->channel;
}

int
sandbox_selftest (sandbox_t *self, double timeout_s, char **report, char *err, size_t errlen)
{
    *report = NULL;
    if (!self->cfg.selftest || self->sync < 0) {
        common_seterr (err, errlen, "not a self-test sandbox, or not confirmed");
        return -1;
    }
    char line [8192];
    if (s_read_line (self, common_now_ns () + (uint64_t) (timeout_s * 1e9), line, sizeof line) != 0
    ||  line [0] != '{') {
        common_seterr (err, errlen, "no self-test report");
        return -1;
    }
    *report = strdup (line);
    return *report? 0: -1;
}

//  ---------------------------------------------------------------------
//  Supervision

uid_t
sandbox_uid (sandbox_t *self)
{
    return self->want.uid;
}

int
sandbox_pid (sandbox_t *self)
{
    return self && !self->reaped? self->pid: 0;
}

int
sandbox_threads (sandbox_t *self, int (*fn) (pid_t tid, void *arg), void *arg)
{
    int pid = sandbox_pid (self);
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/task", pid);
    DIR *dir = pid > 0? opendir (path): NULL;
    if (!dir)
        return -1;
    int rc = 0, threads = 0;
    struct dirent *ent;
    while ((ent = readdir (dir)))
        if (ent->d_name [0] != '.') {
            threads++;
            if (fn ((pid_t) atoi (ent->d_name), arg) != 0)
                rc = -1;
        }
    closedir (dir);
    return threads? rc: -1;
}

static int
s_pin_thread (pid_t tid, void *arg)
{
    return sched_setaffinity (tid, sizeof (cpu_set_t), (cpu_set_t *) arg);
}

int
sandbox_pin (sandbox_t *self, int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return -1;
    cpu_set_t set;
    CPU_ZERO (&set);
    CPU_SET (cpu, &set);
    return sandbox_threads (self, s_pin_thread, &set);
}

int
sandbox_signal (sandbox_t *self, int sig)
{
    if (!self->pid || self->reaped)
        return -1;
    return kill (-self->pid, sig);
}

//  Reap the runner (after its group was killed). Blocks only on an exited
//  or killed process; its pid namespace is empty by then.
static void
s_reap (sandbox_t *self)
{
    if (!self->pid || self->reaped)
        return;
    int status = 0;
    struct rusage ru;
    memset (&ru, 0, sizeof ru);
    pid_t got;
    do
        got = wait4 (self->pid, &status, 0, &ru);
    while (got < 0 && errno == EINTR);
    self->reaped = true;
    if (got == self->pid) {
        //  A namespace's init cannot die of a signal it sends itself: an
        //  in-process runner relays it as exit 128+N (sandbox_confine).
        int code = WIFEXITED (status)? WEXITSTATUS (status): 0;
        if (self->kind->in_process && code > 128 && code - 128 < 65)
            status = code - 128;
        self->wstatus = status;
        self->cpu_s = (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6
                    + (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
    }
    else
        self->wstatus = W_EXITCODE (255, 0);    //  reaped elsewhere (SIGCHLD ignored?)
    if (self->pidfd >= 0)
        close (self->pidfd);
    self->pidfd = -1;
}

//  Everything in the group, pid namespace and cgroup dies; the leader is
//  reaped last so its pid (= the group id) is not reused while we signal it.
void
sandbox_kill (sandbox_t *self)
{
    if (!self->pid || self->reaped)
        return;
    kill (-self->pid, SIGKILL);
    kill (self->pid, SIGKILL);
    if (self->cgroup)
        sandbox_cgroup_empty (self->cgroup);
    s_reap (self);
}

//  Has the runner exited? Peeks without reaping (WNOWAIT).
static bool
s_exited (sandbox_t *self)
{
    siginfo_t info;
    memset (&info, 0, sizeof info);
    if (waitid (P_PID, (id_t) self->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD;
    return info.si_pid == self->pid;
}

bool
sandbox_exited (sandbox_t *self)
{
    if (!self->pid || self->reaped)
        return true;
    if (!s_exited (self))
        return false;
    sandbox_kill (self);
    return true;
}

int
sandbox_wait (sandbox_t *self, double timeout_s)
{
    if (!self->pid || self->reaped)
        return 0;
    uint64_t deadline = common_now_ns () + (uint64_t) (timeout_s > 0? timeout_s * 1e9: 0);
    while (!s_exited (self)) {
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return 1;
        struct pollfd pfd = { .fd = self->pidfd, .events = POLLIN };
        int ms = (int) ((deadline - now + 999999) / 1000000);
        poll (&pfd, 1, ms > 0? ms: 1);
    }
    sandbox_kill (self);
    return 0;
}

int
sandbox_stop (sandbox_t *self, double timeout_s)
{
    if (!self->pid || self->reaped)
        return -1;
    kill (-self->pid, SIGSTOP);
    uint64_t deadline = common_now_ns () + (uint64_t) (timeout_s * 1e9);
    uint64_t backoff_us = 10;
    for (int round = 0; ; round++) {
        siginfo_t info;
        memset (&info, 0, sizeof info);
        int rc = waitid (P_PID, (id_t) self->pid, &info, WSTOPPED | WEXITED | WNOHANG | WNOWAIT);
        if (rc != 0 && errno != EINTR) {
            sandbox_kill (self);
            return -1;
        }
        if (rc == 0 && info.si_pid == self->pid) {
            if (info.si_code == CLD_STOPPED || info.si_code == CLD_TRAPPED) {
                //  Consume the stop report so the next stop is seen afresh.
                memset (&info, 0, sizeof info);
                waitid (P_PID, (id_t) self->pid, &info, WSTOPPED | WNOHANG);
                return 0;
            }
            sandbox_kill (self);     //  it exited: clean up and reap
            return -1;
        }
        if (common_now_ns () > deadline) {
            log_warn ("sandbox", "runner %d did not stop within %.3g s; killing it",
                      self->pid, timeout_s);
            sandbox_kill (self);
            return -1;
        }
        //  Stopping takes microseconds: yield first, then back off.
        if (round < 16)
            sched_yield ();
        else {
            struct timespec ts = { 0, (long) backoff_us * 1000 };
            nanosleep (&ts, NULL);
            if (backoff_us < 2000)
                backoff_us *= 2;
        }
    }
}

bool
sandbox_reaped (sandbox_t *self, int *wstatus, double *cpu_s)
{
    if (!self->reaped)
        return false;
    if (wstatus)
        *wstatus = self->wstatus;
    if (cpu_s)
        *cpu_s = self->cpu_s;
    return true;
}

bool
sandbox_oom (sandbox_t *self)
{
    return self->cgroup && sandbox_cgroup_oom (self->cgroup);
}

static const char *
s_signal_name (int sig, char *buf, size_t len)
{
    const char *abbrev = sigabbrev_np (sig);
    if (abbrev)
        snprintf (buf, len, "SIG%s", abbrev);
    else
        snprintf (buf, len, "signal %d", sig);
    return buf;
}

void
sandbox_describe (sandbox_t *self, char *buf, size_t len)
{
    if (!self->reaped) {
        snprintf (buf, len, "still running");
        return;
    }
    int st = self->wstatus;
    char name [32];
    bool cpu_out = self->cfg.cpu_s != SANDBOX_NO_LIMIT && self->cpu_s + 0.05 >= (double) self->cfg.cpu_s;
    if (WIFSIGNALED (st)) {
        int sig = WTERMSIG (st);
        s_signal_name (sig, name, sizeof name);
        if (sandbox_oom (self))
            snprintf (buf, len, "killed by %s: out of memory (cap %llu MiB)", name,
                      (unsigned long long) (self->cfg.mem_bytes >> 20));
        else
        if (sig == SIGXCPU || (sig == SIGKILL && cpu_out))
            snprintf (buf, len, "killed by %s: CPU time limit (%u s)", name, self->cfg.cpu_s);
        else
        if (sig == SIGKILL && !self->cgroup)
            snprintf (buf, len, "killed by SIGKILL (out of memory?)");
        else
        if (sig == SIGXFSZ)
            snprintf (buf, len, "killed by %s: file size limit", name);
        else
            snprintf (buf, len, "killed by %s", name);
    }
    else
    if (WIFEXITED (st))
        snprintf (buf, len, "exited with code %d", WEXITSTATUS (st));
    else
        snprintf (buf, len, "ended (status 0x%x)", st);
}

const char *
sandbox_cgroup (sandbox_t *self)
{
    return self->cgroup? sandbox_cgroup_version (self->cgroup): "none";
}

const char *
sandbox_cgroup_path (sandbox_t *self)
{
    return self->cgroup? sandbox_cgroup_dir (self->cgroup, 0): NULL;
}

int
sandbox_cgroup_count (sandbox_t *self)
{
    return self->cgroup? sandbox_cgroup_procs (self->cgroup): -1;
}

void
sandbox_destroy (sandbox_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sandbox_t *self = *self_p;
    sandbox_kill (self);
    sandbox_cgroup_destroy (&self->cgroup);
    //  Its processes are gone: the uid may serve another runner.
    sandbox_uid_destroy (&self->uid);
    if (self->sync >= 0)
        close (self->sync);
    if (self->channel >= 0)
        close (self->channel);
    if (self->pidfd >= 0)
        close (self->pidfd);
    free (self);
    *self_p = NULL;
}

int
sandbox_slot_remove (const char *slot)
{
    return sandbox_cgroup_slot_remove (slot);
}

//  ---------------------------------------------------------------------
//  Exec mode: the compiler (or an interpreter)

//  Append a chunk of output, keeping the first S_OUTPUT_MAX bytes.
static void
s_take_output (char *buf, size_t *used, bool *truncated, const char *chunk, size_t n)
{
    if (*used + n > S_OUTPUT_MAX) {
        n = S_OUTPUT_MAX - *used;
        *truncated = true;
    }
    if (buf && n)
        memcpy (buf + *used, chunk, n);
    *used += n;
}

int
sandbox_exec (const sandbox_config_t *cfg, char *const argv[], const char *cwd,
              double timeout_s, char **output, int *exit_status, bool *timed_out,
              char *err, size_t errlen)
{
    *output = NULL;
    *exit_status = -1;
    *timed_out = false;
    if (!argv || !argv [0] || argv [0][0] != '/') {
        common_seterr (err, errlen, "exec needs an absolute program path");
        return -1;
    }
    sandbox_config_t def;
    if (!cfg) {
        sandbox_config_default (&def);
        def.kind = SANDBOX_CC;
        cfg = &def;
    }
    if (sandbox_kind_info (cfg->kind)->in_process) {
        common_seterr (err, errlen, "sandbox kind %s does not run programs", sandbox_kind_info (cfg->kind)->name);
        return -1;
    }
    const char *args [S_MAX_ARGV + 4];
    int n = 0;
    args [n++] = "--mode";
    args [n++] = "exec";
    args [n++] = "--";
    for (int i = 0; argv [i]; i++) {
        if (n >= S_MAX_ARGV + 3) {
            common_seterr (err, errlen, "too many arguments");
            return -1;
        }
        args [n++] = argv [i];
    }
    args [n] = NULL;
    sandbox_t *sandbox = sandbox_new (cfg, err, errlen);
    if (!sandbox)
        return -1;
    int pipefd [2];
    if (pipe2 (pipefd, O_CLOEXEC) != 0) {
        common_seterr (err, errlen, "pipe: %s", strerror (errno));
        sandbox_destroy (&sandbox);
        return -1;
    }
    sandbox_spawn_t what = { .args = (char *const *) args, .object_fd = -1, .out_fd = pipefd [1], .cwd = cwd };
    int started = sandbox_spawn (sandbox, &what, err, errlen);
    close (pipefd [1]);
    if (started != 0 || sandbox_confirm (sandbox, S_CONFIRM_S, err, errlen) != 0) {
        close (pipefd [0]);
        sandbox_destroy (&sandbox);
        return -1;
    }
    fcntl (pipefd [0], F_SETFL, O_NONBLOCK);
    char *buf = malloc (S_OUTPUT_MAX + 64);
    size_t used = 0;
    bool truncated = false, eof = false;
    uint64_t deadline = common_now_ns () + (uint64_t) (timeout_s > 0? timeout_s * 1e9: 0);
    while (!eof) {
        uint64_t now = common_now_ns ();
        if (now >= deadline) {
            *timed_out = true;
            break;
        }
        struct pollfd pfd [2] = {
            { .fd = pipefd [0], .events = POLLIN },
            { .fd = sandbox->pidfd, .events = POLLIN },
        };
        int rc = poll (pfd, 2, (int) ((deadline - now + 999999) / 1000000));
        if (rc < 0 && errno != EINTR)
            break;
        if (pfd [0].revents) {
            char chunk [16384];
            ssize_t got = read (pipefd [0], chunk, sizeof chunk);
            if (got > 0)
                s_take_output (buf, &used, &truncated, chunk, (size_t) got);
            else
            if (got == 0)
                eof = true;
        }
        //  The program is done: its namespace is gone, so the pipe drains now.
        if (pfd [1].revents) {
            sandbox_kill (sandbox);
            while (!eof) {
                char chunk [16384];
                struct pollfd rp = { .fd = pipefd [0], .events = POLLIN };
                if (poll (&rp, 1, 1000) <= 0)
                    break;
                ssize_t got = read (pipefd [0], chunk, sizeof chunk);
                if (got > 0)
                    s_take_output (buf, &used, &truncated, chunk, (size_t) got);
                else
                    eof = got == 0 || errno != EAGAIN;
            }
            break;
        }
    }
    close (pipefd [0]);
    //  It may have closed its output and still run: the deadline holds.
    if (!*timed_out) {
        uint64_t now = common_now_ns ();
        double left = now < deadline? (double) (deadline - now) * 1e-9: 0;
        if (sandbox_wait (sandbox, left) != 0)
            *timed_out = true;
    }
    sandbox_kill (sandbox);
    int st = sandbox->wstatus;
    if (WIFEXITED (st))
        *exit_status = WEXITSTATUS (st);
    else
    if (WIFSIGNALED (st))
        *exit_status = 128 + WTERMSIG (st);
    if (buf) {
        if (truncated)
            used += (size_t) snprintf (buf + used, 64, "\n[truncated]\n");
        buf [used] = 0;
        //  Say why it ended when the output alone would not.
        if (!*timed_out && WIFSIGNALED (st)) {
            char why [160];
            sandbox_describe (sandbox, why, sizeof why);
            size_t wl = strlen (why);
            char *grown = realloc (buf, used + wl + 16);
            if (grown) {
                buf = grown;
                used += (size_t) sprintf (buf + used, "%s[%s]\n",
                                          used && buf [used - 1] != '\n'? "\n": "", why);
            }
        }
    }
    *output = buf? buf: strdup ("");
    sandbox_destroy (&sandbox);
    return 0;
}

//  ---------------------------------------------------------------------
//  The probe: what the host allows, and the namespaces to share

static char s_host_caps [S_CAPS_LEN];
static pthread_once_t s_probe_once = PTHREAD_ONCE_INIT;
static int s_shared_ns [2] = { -1, -1 };

//  Keep the probe's network and IPC namespaces (root only), never the host's.
static void
s_keep_namespaces (pid_t pid)
{
    const char *names [2] = { "net", "ipc" };
    for (int i = 0; i < 2; i++) {
        char path [64];
        struct stat mine, theirs;
        snprintf (path, sizeof path, "/proc/%d/ns/%s", (int) pid, names [i]);
        int fd = open (path, O_RDONLY | O_CLOEXEC);
        snprintf (path, sizeof path, "/proc/self/ns/%s", names [i]);
        if (fd >= 0 && stat (path, &mine) == 0 && fstat (fd, &theirs) == 0 && mine.st_ino != theirs.st_ino)
            s_shared_ns [i] = fd;
        else
        if (fd >= 0)
            close (fd);
    }
}

static void
s_probe (void)
{
    snprintf (s_host_caps, sizeof s_host_caps, "{\"runner\":false}");
    char err [256];
    sandbox_t *sandbox = sandbox_new (NULL, err, sizeof err);
    int sv [2] = { -1, -1 };
    if (!sandbox || socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        log_warn ("sandbox", "no probe runner: %s", sandbox? strerror (errno): err);
        sandbox_destroy (&sandbox);
        return;
    }
    sandbox->probe = true;
    char sock [16];
    snprintf (sock, sizeof sock, "%d", sv [1]);
    char *args [] = { "--mode", "probe", "--sock", sock, NULL };
    int keep [] = { sv [1], -1 };
    sandbox_spawn_t what = { .args = args, .keep = keep, .object_fd = -1, .out_fd = -1 };
    if (sandbox_spawn (sandbox, &what, err, sizeof err) == 0
    &&  sandbox_confirm (sandbox, S_CONFIRM_S, err, sizeof err) == 0) {
        snprintf (s_host_caps, sizeof s_host_caps, "%s", sandbox_caps (sandbox));
        if (!sandbox->userns)
            s_keep_namespaces (sandbox->pid);
    }
    else
        log_warn ("sandbox", "probe runner: %s", err);
    close (sv [0]);
    close (sv [1]);
    sandbox_destroy (&sandbox);
}

const char *
sandbox_host_caps (void)
{
    pthread_once (&s_probe_once, s_probe);
    return s_host_caps;
}
