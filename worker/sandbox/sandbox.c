/*  sandbox - the supervisor's half of confinement.

    kgym-runner confines itself (cpu_runner_main.c); this side prepares what
    the child can not do for itself and cleans up after it: finds the
    runner, makes a capped cgroup per runner (or per slot, reused), spawns
    the runner with posix_spawn (the worker is multi-threaded: no fork) in
    its own process group with only the descriptors it needs, and kills the
    whole group and cgroup when done. Nothing is signalled after it has been
    reaped, so a recycled pid can never be hit.

    cgroups: v2 when a cgroup2 mount offers memory and pids (a kgym/ parent
    at its root with those controllers delegated), else the v1 memory and
    pids hierarchies (a kgym/ parent under this process's own cgroup), else
    none (rlimits only; the runner's caps then say "cgroup":"none"). Every
    cgroup directory in use is held with flock, so stale ones left by a dead
    worker can be told from live ones and slots can be shared safely.
*/
#include "common_util.h"
#include "sandbox.h"
#include "cpu_runner_proto.h"
#include "common_log.h"
#include "kgym_config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_OUTPUT_MAX    (64 * 1024)     //  captured exec output before "[truncated]"
#define S_NAME_MAX      64              //  cgroup leaf name
#define S_MAX_ARGV      256             //  exec mode argv entries
#define S_PROBE_WAIT_S  5.0

enum { S_CG_NONE = 0, S_CG_V1 = 1, S_CG_V2 = 2 };

struct sandbox_t {
    sandbox_config_t cfg;    //  copy; runner_path points at runner, slot NULL
    char runner [PATH_MAX];         //  kgym-runner to spawn
    int cg_mode;                    //  S_CG_*
    char cg_dir[2][PATH_MAX];       //  v2: [0]; v1: [0] memory, [1] pids; "" when absent
    int cg_lock;                    //  flock held on the primary directory, -1 when none
    bool cg_slot;                   //  a slot's reusable cgroup (kept on destroy)
    uint64_t oom_base;              //  OOM kills counted before this sandbox
    bool oom_seen;                  //  an OOM kill was seen (sticky, checked before removal)
    int pid;                        //  runner pid = pgid; 0 when none
    int pidfd;                      //  pidfd of the runner, -1 when none
    bool reaped;                    //  waited for; never signal again
    int wstatus;                    //  its wait status once reaped
    double cpu_s;                   //  its user+system seconds once reaped
};

//  ---------------------------------------------------------------------
//  Small helpers


static int
s_write_file (const char *path, const char *text)
{
    int fd = open (path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen (text);
    ssize_t n = write (fd, text, len);
    int saved = errno;
    close (fd);
    errno = saved;
    return n == (ssize_t) len? 0: -1;
}

//  Read a small file into buf (NUL-terminated). Bytes read or -1.
static ssize_t
s_read_file (const char *path, char *buf, size_t len)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read (fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    close (fd);
    buf [got] = 0;
    return (ssize_t) got;
}

//  Value of "key N" in a flat keyed file (memory.events, memory.oom_control).
static uint64_t
s_read_key (const char *path, const char *key)
{
    char buf [2048];
    if (s_read_file (path, buf, sizeof buf) < 0)
        return 0;
    size_t klen = strlen (key);
    for (char *line = buf; line && *line; ) {
        if (strncmp (line, key, klen) == 0 && line [klen] == ' ')
            return strtoull (line + klen + 1, NULL, 10);
        line = strchr (line, '\n');
        if (line)
            line++;
    }
    return 0;
}

static bool
s_contains_word (const char *list, const char *word)
{
    size_t wlen = strlen (word);
    for (const char *p = list; (p = strstr (p, word)); p += wlen) {
        bool start = p == list || p [-1] == ' ' || p [-1] == ',' || p [-1] == '+';
        char end = p [wlen];
        if (start && (end == 0 || end == ' ' || end == ',' || end == '\n'))
            return true;
    }
    return false;
}

static void
s_set_err (char *err, size_t errlen, const char *fmt, const char *what)
{
    if (err && errlen)
        snprintf (err, errlen, fmt, what);
}

//  ---------------------------------------------------------------------
//  Configuration and finding kgym-runner

void
sandbox_config_default (sandbox_config_t *cfg)
{
    memset (cfg, 0, sizeof *cfg);
    cfg->mem_bytes = 4ull << 30;
    cfg->max_pids = 32;
    cfg->cpu_s = 120;
}

static char s_runner_path [PATH_MAX];
static pthread_once_t s_runner_once = PTHREAD_ONCE_INIT;

static bool
s_executable (const char *path)
{
    struct stat st;
    return stat (path, &st) == 0 && S_ISREG (st.st_mode) && access (path, X_OK) == 0;
}

static void
s_runner_find (void)
{
    const char *env = getenv ("KGYM_RUNNER");
    if (env && *env && s_executable (env)) {
        snprintf (s_runner_path, sizeof s_runner_path, "%s", env);
        return;
    }
    char self [PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self [n] = 0;
        char *slash = strrchr (self, '/');
        if (slash) {
            *slash = 0;
            char cand [PATH_MAX + 32];
            snprintf (cand, sizeof cand, "%s/kgym-runner", self);
            if (s_executable (cand) && strlen (cand) < sizeof s_runner_path) {
                snprintf (s_runner_path, sizeof s_runner_path, "%s", cand);
                return;
            }
        }
    }
    const char *fixed [] = { KGYM_BUILD_DIR "/worker/cpu/kgym-runner", KGYM_LIBEXECDIR "/kgym-runner" };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed [0]; i++)
        if (s_executable (fixed [i])) {
            snprintf (s_runner_path, sizeof s_runner_path, "%s", fixed [i]);
            return;
        }
}

const char *
sandbox_runner_path (void)
{
    pthread_once (&s_runner_once, s_runner_find);
    return s_runner_path [0]? s_runner_path: NULL;
}

//  ---------------------------------------------------------------------
//  The host's cgroups (found once per process)

typedef struct {
    int mode;                       //  S_CG_*
    char base [2][PATH_MAX];        //  the kgym/ parents, as cg_dir
    char why [256];                 //  why none, for the log
} s_cg_host_t;

static s_cg_host_t s_cg_host;
static pthread_once_t s_cg_once = PTHREAD_ONCE_INIT;

//  Try the cgroup2 mount at mnt: kgym/ at its root with memory and pids.
static bool
s_cg_try_v2 (const char *mnt)
{
    char path [PATH_MAX], buf [512], base [PATH_MAX];
    snprintf (path, sizeof path, "%s/cgroup.controllers", mnt);
    if (s_read_file (path, buf, sizeof buf) < 0
    ||  !s_contains_word (buf, "memory") || !s_contains_word (buf, "pids"))
        return false;
    snprintf (base, sizeof base, "%s/kgym", mnt);
    bool made = mkdir (base, 0755) == 0;
    if (!made && errno != EEXIST)
        return false;
    snprintf (path, sizeof path, "%s/cgroup.controllers", base);
    if (s_read_file (path, buf, sizeof buf) < 0
    ||  !s_contains_word (buf, "memory") || !s_contains_word (buf, "pids")) {
        //  The root may not delegate them yet; it may refuse (processes in it).
        snprintf (path, sizeof path, "%s/cgroup.subtree_control", mnt);
        s_write_file (path, "+memory +pids");
        snprintf (path, sizeof path, "%s/cgroup.controllers", base);
        s_read_file (path, buf, sizeof buf);
    }
    snprintf (path, sizeof path, "%s/cgroup.subtree_control", base);
    s_write_file (path, "+memory +pids");
    if (s_read_file (path, buf, sizeof buf) >= 0
    &&  s_contains_word (buf, "memory") && s_contains_word (buf, "pids")) {
        s_cg_host.mode = S_CG_V2;
        snprintf (s_cg_host.base [0], PATH_MAX, "%s", base);
        return true;
    }
    if (made)
        rmdir (base);
    return false;
}

//  This process's path in the v1 hierarchy holding controller, from /proc/self/cgroup.
static bool
s_cg_own_path (const char *controller, char *out, size_t len)
{
    FILE *file = fopen ("/proc/self/cgroup", "re");
    if (!file)
        return false;
    char line [PATH_MAX + 128];
    bool found = false;
    while (!found && fgets (line, sizeof line, file)) {
        char *c1 = strchr (line, ':');
        char *c2 = c1? strchr (c1 + 1, ':'): NULL;
        if (!c2)
            continue;
        *c2 = 0;
        if (s_contains_word (c1 + 1, controller)) {
            char *nl = strchr (c2 + 1, '\n');
            if (nl)
                *nl = 0;
            snprintf (out, len, "%s", c2 + 1);
            found = true;
        }
    }
    fclose (file);
    return found;
}

//  The v1 kgym/ parent for controller mounted at mnt (mount root mroot).
static bool
s_cg_try_v1 (const char *controller, const char *mnt, const char *mroot, char *base)
{
    char own [PATH_MAX], dir [PATH_MAX * 2];
    snprintf (dir, sizeof dir, "%s", mnt);
    //  Under our own cgroup, so the caps nest inside whatever bounds the worker.
    if (s_cg_own_path (controller, own, sizeof own)) {
        size_t rlen = strcmp (mroot, "/") == 0? 0: strlen (mroot);
        if (strncmp (own, mroot, rlen) == 0) {
            struct stat st;
            char cand [PATH_MAX * 2];
            snprintf (cand, sizeof cand, "%s%s", mnt, own + rlen);
            if (stat (cand, &st) == 0 && S_ISDIR (st.st_mode))
                snprintf (dir, sizeof dir, "%s", cand);
        }
    }
    size_t dlen = strlen (dir);
    while (dlen > 1 && dir [dlen - 1] == '/')
        dir [--dlen] = 0;
    if (dlen + 6 >= PATH_MAX)
        return false;
    snprintf (base, PATH_MAX, "%s/kgym", dir);
    if (mkdir (base, 0755) != 0 && errno != EEXIST)
        return false;
    char probe [PATH_MAX + 16];
    snprintf (probe, sizeof probe, "%s/cgroup.procs", base);
    return access (probe, W_OK) == 0;
}

//  Remove per-runner cgroups left by dead processes (their flock is gone).
static void s_cg_empty (char dirs [2][PATH_MAX], int mode);

static void
s_cg_clean_stale (void)
{
    DIR *dir = opendir (s_cg_host.base [0][0]? s_cg_host.base [0]: s_cg_host.base [1]);
    if (!dir)
        return;
    const char *primary = s_cg_host.base [0][0]? s_cg_host.base [0]: s_cg_host.base [1];
    struct dirent *ent;
    while ((ent = readdir (dir))) {
        int owner = 0;
        if (ent->d_name [0] != 'r' || sscanf (ent->d_name, "r%d-", &owner) != 1 || owner <= 0)
            continue;
        if (owner == getpid () || kill (owner, 0) == 0 || errno != ESRCH)
            continue;
        char path [PATH_MAX * 2];
        snprintf (path, sizeof path, "%s/%s", primary, ent->d_name);
        int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock (fd, LOCK_EX | LOCK_NB) == 0) {
            char dirs [2][PATH_MAX] = { "", "" };
            for (int h = 0; h < 2; h++)
                if (s_cg_host.base [h][0]
                &&  strlen (s_cg_host.base [h]) + strlen (ent->d_name) + 2 < PATH_MAX)
                    snprintf (dirs [h], PATH_MAX, "%s/%s", s_cg_host.base [h], ent->d_name);
            s_cg_empty (dirs, s_cg_host.mode);
            for (int h = 0; h < 2; h++)
                if (dirs [h][0])
                    rmdir (dirs [h]);
        }
        close (fd);
    }
    closedir (dir);
}

static void
s_cg_detect (void)
{
    memset (&s_cg_host, 0, sizeof s_cg_host);
    if (geteuid () != 0) {
        snprintf (s_cg_host.why, sizeof s_cg_host.why, "not root");
        return;
    }
    FILE *file = fopen ("/proc/self/mountinfo", "re");
    if (!file) {
        snprintf (s_cg_host.why, sizeof s_cg_host.why, "no /proc/self/mountinfo");
        return;
    }
    char line [4096];
    char v1_mnt [2][PATH_MAX] = { "", "" }, v1_root [2][PATH_MAX] = { "", "" };
    char v2_mnt [4][PATH_MAX];
    int nv2 = 0;
    while (fgets (line, sizeof line, file)) {
        //  id parent maj:min root mountpoint options [optional...] - fstype source superoptions
        char root [PATH_MAX], mnt [PATH_MAX];
        if (sscanf (line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
            continue;
        char *sep = strstr (line, " - ");
        if (!sep)
            continue;
        char fstype [64], source [256], super [1024] = "";
        if (sscanf (sep + 3, "%63s %255s %1023s", fstype, source, super) < 2)
            continue;
        if (strcmp (fstype, "cgroup2") == 0 && nv2 < 4)
            snprintf (v2_mnt [nv2++], PATH_MAX, "%s", mnt);
        else
        if (strcmp (fstype, "cgroup") == 0) {
            for (int h = 0; h < 2; h++)
                if (!v1_mnt [h][0] && s_contains_word (super, h == 0? "memory": "pids")) {
                    snprintf (v1_mnt [h], PATH_MAX, "%s", mnt);
                    snprintf (v1_root [h], PATH_MAX, "%s", root);
                }
        }
    }
    fclose (file);
    for (int i = 0; i < nv2 && s_cg_host.mode == S_CG_NONE; i++)
        s_cg_try_v2 (v2_mnt [i]);
    if (s_cg_host.mode == S_CG_NONE) {
        bool any = false;
        for (int h = 0; h < 2; h++)
            if (v1_mnt [h][0] && s_cg_try_v1 (h == 0? "memory": "pids", v1_mnt [h], v1_root [h],
                                              s_cg_host.base [h]))
                any = true;
            else
                s_cg_host.base [h][0] = 0;
        if (any)
            s_cg_host.mode = S_CG_V1;
        else
            snprintf (s_cg_host.why, sizeof s_cg_host.why,
                      "no writable cgroup v2 (memory+pids) or v1 memory/pids hierarchy");
    }
    if (s_cg_host.mode != S_CG_NONE)
        s_cg_clean_stale ();
    else
        log_warn ("sandbox", "no cgroup: %s; memory and process caps are rlimits only",
                  s_cg_host.why);
}

//  Kill every process listed in the cgroup(s) until they are empty (bounded).
static void
s_cg_empty (char dirs [2][PATH_MAX], int mode)
{
    if (mode == S_CG_V2 && dirs [0][0]) {
        char path [PATH_MAX + 16];
        snprintf (path, sizeof path, "%s/cgroup.kill", dirs [0]);
        s_write_file (path, "1");
    }
    uint64_t deadline = common_now_ns () + 2000000000ull;
    for (int round = 0; ; round++) {
        bool any = false;
        for (int h = 0; h < 2; h++) {
            if (!dirs [h][0])
                continue;
            char path [PATH_MAX + 16], buf [8192];
            snprintf (path, sizeof path, "%s/cgroup.procs", dirs [h]);
            if (s_read_file (path, buf, sizeof buf) <= 0)
                continue;
            for (char *p = buf; *p; ) {
                char *end;
                long pid = strtol (p, &end, 10);
                if (end == p)
                    break;
                if (pid > 0) {
                    kill ((pid_t) pid, SIGKILL);
                    any = true;
                }
                p = end;
                while (*p == '\n' || *p == ' ')
                    p++;
            }
        }
        if (!any || common_now_ns () > deadline)
            return;
        //  Killed processes leave the list only once they have exited.
        if (round > 8) {
            struct timespec ts = { 0, 200000 };
            nanosleep (&ts, NULL);
        }
        else
            sched_yield ();
    }
}

//  Number of OOM kills the cgroup has seen.
static uint64_t
s_cg_oom_count (sandbox_t *self)
{
    char path [PATH_MAX + 32];
    if (self->cg_mode == S_CG_V2 && self->cg_dir [0][0]) {
        snprintf (path, sizeof path, "%s/memory.events", self->cg_dir [0]);
        return s_read_key (path, "oom_kill");
    }
    if (self->cg_mode == S_CG_V1 && self->cg_dir [0][0]) {
        snprintf (path, sizeof path, "%s/memory.oom_control", self->cg_dir [0]);
        return s_read_key (path, "oom_kill");
    }
    return 0;
}

//  Write the caps into this sandbox's cgroup directories.
static void
s_cg_set_limits (sandbox_t *self)
{
    char path [PATH_MAX + 32], value [32];
    snprintf (value, sizeof value, "%llu", (unsigned long long) self->cfg.mem_bytes);
    char pids [32];
    snprintf (pids, sizeof pids, "%u", self->cfg.max_pids);
    if (self->cg_mode == S_CG_V2) {
        const char *dir = self->cg_dir [0];
        snprintf (path, sizeof path, "%s/memory.max", dir);
        if (s_write_file (path, value))
            log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
        snprintf (path, sizeof path, "%s/memory.swap.max", dir);
        s_write_file (path, "0");
        //  An OOM kill takes the whole cgroup, not one thread's process.
        snprintf (path, sizeof path, "%s/memory.oom.group", dir);
        s_write_file (path, "1");
        snprintf (path, sizeof path, "%s/pids.max", dir);
        if (s_write_file (path, pids))
            log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
        return;
    }
    if (self->cg_dir [0][0]) {
        const char *dir = self->cg_dir [0];
        //  memsw must stay >= limit: set it around the limit, in either order.
        snprintf (path, sizeof path, "%s/memory.memsw.limit_in_bytes", dir);
        s_write_file (path, value);
        char lpath [PATH_MAX + 32];
        snprintf (lpath, sizeof lpath, "%s/memory.limit_in_bytes", dir);
        if (s_write_file (lpath, value))
            log_warn ("sandbox", "cannot set %s: %s", lpath, strerror (errno));
        s_write_file (path, value);
        snprintf (path, sizeof path, "%s/memory.failcnt", dir);
        s_write_file (path, "0");
    }
    if (self->cg_dir [1][0]) {
        snprintf (path, sizeof path, "%s/pids.max", self->cg_dir [1]);
        if (s_write_file (path, pids))
            log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
    }
}

//  A slot name safe as a path component (at most 39 bytes).
static void
s_slot_name (const char *slot, char out [S_NAME_MAX])
{
    size_t j = 0;
    for (const char *p = slot; *p && j + 1 < 40; p++)
        out [j++] = (char) ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                         || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'? *p: '_');
    out [j] = 0;
}

//  Make (or take) this sandbox's cgroup. Without one the sandbox still works.
static void
s_cg_acquire (sandbox_t *self)
{
    pthread_once (&s_cg_once, s_cg_detect);
    self->cg_mode = S_CG_NONE;
    if (s_cg_host.mode == S_CG_NONE)
        return;
    char slot [S_NAME_MAX] = "";
    if (self->cfg.slot)
        s_slot_name (self->cfg.slot, slot);
    int primary = s_cg_host.base [0][0]? 0: 1;
    for (int attempt = 0; attempt < 64; attempt++) {
        char name [S_NAME_MAX];
        if (self->cfg.slot && attempt == 0)
            snprintf (name, sizeof name, "s-%s", slot);
        else
        if (self->cfg.slot)
            snprintf (name, sizeof name, "s-%s.%d", slot, attempt);
        else {
            uint32_t rnd = 0;
            if (getrandom (&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
                rnd = (uint32_t) common_now_ns () ^ (uint32_t) attempt * 2654435761u;
            snprintf (name, sizeof name, "r%d-%08x", (int) getpid (), rnd);
        }
        char dirs [2][PATH_MAX] = { "", "" };
        bool fresh = true, made [2] = { false, false };
        int failed = 0;
        for (int h = 0; h < 2 && !failed; h++) {
            if (!s_cg_host.base [h][0])
                continue;
            if (strlen (s_cg_host.base [h]) + strlen (name) + 2 >= PATH_MAX) {
                failed = ENAMETOOLONG;
                break;
            }
            snprintf (dirs [h], PATH_MAX, "%s/%s", s_cg_host.base [h], name);
            if (mkdir (dirs [h], 0755) == 0)
                made [h] = true;
            else
            if (errno == EEXIST)
                fresh = false;
            else
                failed = errno;
        }
        if (failed) {
            for (int h = 0; h < 2; h++)
                if (made [h])
                    rmdir (dirs [h]);
            log_warn ("sandbox", "cannot make cgroup %s: %s", name, strerror (failed));
            return;
        }
        if (!self->cfg.slot && !fresh) {
            for (int h = 0; h < 2; h++)
                if (made [h])
                    rmdir (dirs [h]);
            continue;               //  random name taken: draw again
        }
        int fd = open (dirs [primary], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return;
        if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
            close (fd);             //  slot in use by another runner: next suffix
            continue;
        }
        self->cg_lock = fd;
        self->cg_slot = self->cfg.slot != NULL;
        self->cg_mode = s_cg_host.mode;
        memcpy (self->cg_dir, dirs, sizeof dirs);
        //  A reused slot may hold a dead worker's leftovers.
        if (!fresh)
            s_cg_empty (self->cg_dir, self->cg_mode);
        s_cg_set_limits (self);
        self->oom_base = s_cg_oom_count (self);
        return;
    }
    log_warn ("sandbox", "no free cgroup for slot %s", slot);
}

static void
s_cg_release (sandbox_t *self)
{
    if (self->cg_mode == S_CG_NONE)
        return;
    s_cg_empty (self->cg_dir, self->cg_mode);
    if (!self->cg_slot) {
        //  rmdir waits for the last exiting task to leave the cgroup.
        uint64_t deadline = common_now_ns () + 2000000000ull;
        for (int h = 0; h < 2; h++) {
            while (self->cg_dir [h][0] && rmdir (self->cg_dir [h]) != 0 && errno == EBUSY
               &&  common_now_ns () < deadline) {
                s_cg_empty (self->cg_dir, self->cg_mode);
                sched_yield ();
            }
        }
    }
    if (self->cg_lock >= 0)
        close (self->cg_lock);
    self->cg_lock = -1;
    self->cg_mode = S_CG_NONE;
}

//  ---------------------------------------------------------------------
//  The sandbox instance

sandbox_t *
sandbox_new (const sandbox_config_t *cfg, char *err, size_t errlen)
{
    sandbox_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_set_err (err, errlen, "%s", "out of memory");
        return NULL;
    }
    if (cfg)
        self->cfg = *cfg;
    else
        sandbox_config_default (&self->cfg);
    sandbox_config_t def;
    sandbox_config_default (&def);
    if (self->cfg.mem_bytes == 0)
        self->cfg.mem_bytes = def.mem_bytes;
    if (self->cfg.max_pids == 0)
        self->cfg.max_pids = def.max_pids;
    if (self->cfg.cpu_s == 0)
        self->cfg.cpu_s = def.cpu_s;
    if (!self->cfg.runner_path)
        self->cfg.runner_path = sandbox_runner_path ();
    if (!self->cfg.runner_path || strlen (self->cfg.runner_path) >= sizeof self->runner) {
        s_set_err (err, errlen, "%s", "kgym-runner not found (set KGYM_RUNNER)");
        free (self);
        return NULL;
    }
    snprintf (self->runner, sizeof self->runner, "%s", self->cfg.runner_path);
    self->cfg.runner_path = self->runner;
    self->cg_lock = -1;
    self->pidfd = -1;
    s_cg_acquire (self);
    self->cfg.slot = NULL;          //  not kept: the caller owns the string
    return self;
}

//  A copy of fd at 3 or above (CLOEXEC) when it is one of 0..2, so that
//  placing /dev/null on 0..2 in the child cannot clobber it.
static int
s_high_fd (int fd, int *owned)
{
    *owned = -1;
    if (fd < 0 || fd > 2)
        return fd;
    int copy = fcntl (fd, F_DUPFD_CLOEXEC, 3);
    *owned = copy;
    return copy;
}

//  Defined with the probe below: the host's caps, and its namespaces.
static pthread_once_t s_caps_once;
static int s_shared_ns [2];
static void s_probe (void);

int
sandbox_spawn (sandbox_t *self, sandbox_mode_t mode, int sock_fd,
                      int so_fd, int shm_fd, int out_fd, const char *cwd,
                      char *const argv[], char *err, size_t errlen)
{
    if (self->pid || self->reaped) {
        s_set_err (err, errlen, "%s", "sandbox already used");
        return -1;
    }
    int owned [4];
    sock_fd = s_high_fd (sock_fd, &owned [0]);
    so_fd = s_high_fd (so_fd, &owned [1]);
    shm_fd = s_high_fd (shm_fd, &owned [2]);
    out_fd = s_high_fd (out_fd, &owned [3]);

    //  argv: fixed options, then the command in exec mode.
    char num [12][32];
    const char *args [S_MAX_ARGV + 40];
    int n = 0, k = 0;
    args [n++] = self->cfg.runner_path;
    args [n++] = "--mode";
    args [n++] = mode == SANDBOX_MODE_EXEC? "exec": mode == SANDBOX_MODE_PROBE? "probe": "kernel";
    snprintf (num [k], 32, "%d", (int) getpid ());
    args [n++] = "--ppid"; args [n++] = num [k++];
    snprintf (num [k], 32, "%llu", (unsigned long long) self->cfg.mem_bytes);
    args [n++] = "--mem"; args [n++] = num [k++];
    snprintf (num [k], 32, "%u", self->cfg.max_pids);
    args [n++] = "--pids"; args [n++] = num [k++];
    snprintf (num [k], 32, "%u", self->cfg.cpu_s);
    args [n++] = "--cpu"; args [n++] = num [k++];
    if (sock_fd >= 0) {
        snprintf (num [k], 32, "%d", sock_fd);
        args [n++] = "--sock"; args [n++] = num [k++];
    }
    if (so_fd >= 0) {
        snprintf (num [k], 32, "%d", so_fd);
        args [n++] = "--so"; args [n++] = num [k++];
    }
    if (shm_fd >= 0) {
        snprintf (num [k], 32, "%d", shm_fd);
        args [n++] = "--shm"; args [n++] = num [k++];
    }
    //  Runners enter the namespaces the probe made, instead of making their own.
    int ns_fd [2] = { -1, -1 };
    if (mode != SANDBOX_MODE_PROBE) {
        pthread_once (&s_caps_once, s_probe);
        const char *ns_opt [2] = { "--netns", "--ipcns" };
        for (int i = 0; i < 2; i++)
            if (s_shared_ns [i] >= 0) {
                ns_fd [i] = s_shared_ns [i];
                snprintf (num [k], 32, "%d", ns_fd [i]);
                args [n++] = ns_opt [i]; args [n++] = num [k++];
            }
    }
    for (int h = 0; h < 2; h++)
        if (self->cg_mode != S_CG_NONE && self->cg_dir [h][0]) {
            args [n++] = "--cgroup";
            args [n++] = self->cg_dir [h];
        }
    if (mode == SANDBOX_MODE_EXEC) {
        args [n++] = "--";
        for (int i = 0; argv && argv [i]; i++) {
            if (i >= S_MAX_ARGV) {
                s_set_err (err, errlen, "%s", "too many arguments");
                goto fail;
            }
            args [n++] = argv [i];
        }
    }
    args [n] = NULL;

    //  A small fixed environment: the worker's own never reaches a candidate.
    char tmpdir [PATH_MAX + 16];
    snprintf (tmpdir, sizeof tmpdir, "TMPDIR=%s", cwd && strlen (cwd) < PATH_MAX? cwd: "/tmp");
    const char *envp [] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "LANG=C", tmpdir, NULL };

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init (&fa);
    posix_spawnattr_init (&attr);
    posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDWR, 0);
    if (mode == SANDBOX_MODE_EXEC && out_fd >= 0) {
        posix_spawn_file_actions_adddup2 (&fa, out_fd, 1);
        posix_spawn_file_actions_adddup2 (&fa, out_fd, 2);
    }
    else {
        posix_spawn_file_actions_adddup2 (&fa, 0, 1);
        posix_spawn_file_actions_adddup2 (&fa, 0, 2);
    }
    //  dup2 onto itself clears FD_CLOEXEC in the child only (glibc >= 2.29).
    int keep [5] = { sock_fd, so_fd, shm_fd, ns_fd [0], ns_fd [1] };
    for (int i = 0; i < 5; i++)
        if (keep [i] >= 0)
            posix_spawn_file_actions_adddup2 (&fa, keep [i], keep [i]);
    if (cwd)
        posix_spawn_file_actions_addchdir_np (&fa, cwd);
    sigset_t all, none;
    sigfillset (&all);
    sigemptyset (&none);
    posix_spawnattr_setsigdefault (&attr, &all);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setpgroup (&attr, 0);
    posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF
                                   | POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    int rc = posix_spawn (&pid, self->cfg.runner_path, &fa, &attr, (char *const *) args,
                          (char *const *) envp);
    posix_spawn_file_actions_destroy (&fa);
    posix_spawnattr_destroy (&attr);
    if (rc != 0) {
        if (err && errlen)
            snprintf (err, errlen, "cannot start %s: %s", self->cfg.runner_path, strerror (rc));
        goto fail;
    }
    self->pid = pid;
    self->pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
    if (self->pidfd >= 0)
        fcntl (self->pidfd, F_SETFD, FD_CLOEXEC);
    for (int i = 0; i < 4; i++)
        if (owned [i] >= 0)
            close (owned [i]);
    return 0;
fail:
    for (int i = 0; i < 4; i++)
        if (owned [i] >= 0)
            close (owned [i]);
    return -1;
}

int
sandbox_pid (sandbox_t *self)
{
    return self && !self->reaped? self->pid: 0;
}

int
sandbox_signal (sandbox_t *self, int sig)
{
    if (!self->pid || self->reaped)
        return -1;
    return kill (-self->pid, sig);
}

//  Reap the runner (after its group was killed). Blocks only on an exited
//  or killed process.
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

//  Everything in the group and cgroup dies; the leader is reaped last so
//  its pid (= the group id) is not free to be reused while we signal it.
void
sandbox_kill (sandbox_t *self)
{
    if (!self->pid || self->reaped)
        return;
    kill (-self->pid, SIGKILL);
    kill (self->pid, SIGKILL);
    if (self->cg_mode != S_CG_NONE) {
        if (s_cg_oom_count (self) > self->oom_base)
            self->oom_seen = true;
        //  Returns once every member has exited (zombies leave the list).
        s_cg_empty (self->cg_dir, self->cg_mode);
    }
    int pgid = self->pid;
    s_reap (self);
    //  Members orphaned by the kill (the compiler's cc1, as, ld) come to
    //  us when this process is a child subreaper: reap them too, or they
    //  stay zombies under an init that does not reap. No-op otherwise.
    siginfo_t info;
    for (int i = 0; i < 1024; i++) {
        memset (&info, 0, sizeof info);
        if (waitid (P_PGID, (id_t) pgid, &info, WEXITED | WNOHANG) != 0 || info.si_pid == 0)
            break;
    }
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

int
sandbox_wait (sandbox_t *self, double timeout_s)
{
    if (!self->pid || self->reaped)
        return 0;
    uint64_t deadline = common_now_ns () + (uint64_t) (timeout_s > 0? timeout_s * 1e9: 0);
    uint64_t backoff_us = 20;
    while (!s_exited (self)) {
        uint64_t now = common_now_ns ();
        if (now >= deadline)
            return 1;
        if (self->pidfd >= 0) {
            struct pollfd pfd = { .fd = self->pidfd, .events = POLLIN };
            int ms = (int) ((deadline - now + 999999) / 1000000);
            poll (&pfd, 1, ms > 0? ms: 1);
        }
        else {
            struct timespec ts = { 0, (long) backoff_us * 1000 };
            nanosleep (&ts, NULL);
            if (backoff_us < 5000)
                backoff_us *= 2;
        }
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
    if (self->oom_seen)
        return true;
    if (self->cg_mode != S_CG_NONE && s_cg_oom_count (self) > self->oom_base)
        self->oom_seen = true;
    return self->oom_seen;
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
    bool cpu_out = self->cpu_s + 0.05 >= (double) self->cfg.cpu_s;
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
        if (sig == SIGKILL && self->cg_mode == S_CG_NONE)
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
    return self->cg_mode == S_CG_V2? "v2": self->cg_mode == S_CG_V1? "v1": "none";
}

const char *
sandbox_cgroup_path (sandbox_t *self)
{
    if (self->cg_mode == S_CG_NONE)
        return NULL;
    return self->cg_dir [0][0]? self->cg_dir [0]: self->cg_dir [1];
}

int
sandbox_cgroup_count (sandbox_t *self)
{
    const char *dir = sandbox_cgroup_path (self);
    if (!dir)
        return -1;
    char path [PATH_MAX + 16], buf [8192];
    snprintf (path, sizeof path, "%s/cgroup.procs", dir);
    if (s_read_file (path, buf, sizeof buf) < 0)
        return -1;
    int count = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            count++;
    return count;
}

void
sandbox_destroy (sandbox_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sandbox_t *self = *self_p;
    sandbox_kill (self);
    s_cg_release (self);
    if (self->pidfd >= 0)
        close (self->pidfd);
    free (self);
    *self_p = NULL;
}

int
sandbox_slot_remove (const char *slot)
{
    if (!slot)
        return 0;
    pthread_once (&s_cg_once, s_cg_detect);
    if (s_cg_host.mode == S_CG_NONE)
        return 0;
    char safe [S_NAME_MAX];
    s_slot_name (slot, safe);
    int primary = s_cg_host.base [0][0]? 0: 1;
    int removed = 0;
    for (int n = 0; n < 64; n++) {
        char name [S_NAME_MAX + 16];
        if (n == 0)
            snprintf (name, sizeof name, "s-%s", safe);
        else
            snprintf (name, sizeof name, "s-%s.%d", safe, n);
        char dirs [2][PATH_MAX] = { "", "" };
        for (int h = 0; h < 2; h++)
            if (s_cg_host.base [h][0])
                snprintf (dirs [h], PATH_MAX, "%s/%s", s_cg_host.base [h], name);
        int fd = open (dirs [primary], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue;               //  suffixes need not be contiguous
        //  Held: a live sandbox uses it.
        if (flock (fd, LOCK_EX | LOCK_NB) == 0) {
            s_cg_empty (dirs, s_cg_host.mode);
            bool gone = true;
            for (int h = 0; h < 2; h++)
                if (dirs [h][0] && rmdir (dirs [h]) != 0 && errno != ENOENT)
                    gone = false;
            removed += gone;
        }
        close (fd);
    }
    return removed;
}

//  ---------------------------------------------------------------------
//  Exec mode: the compiler

int
sandbox_exec (const sandbox_config_t *cfg, char *const argv[], const char *cwd,
                     double timeout_s, char **output, int *exit_status, bool *timed_out,
                     char *err, size_t errlen)
{
    *output = NULL;
    *exit_status = -1;
    *timed_out = false;
    if (!argv || !argv [0] || argv [0][0] != '/') {
        s_set_err (err, errlen, "%s", "exec needs an absolute program path");
        return -1;
    }
    sandbox_t *sandbox = sandbox_new (cfg, err, errlen);
    if (!sandbox)
        return -1;
    int pipefd [2];
    if (pipe2 (pipefd, O_CLOEXEC) != 0) {
        s_set_err (err, errlen, "pipe: %s", strerror (errno));
        sandbox_destroy (&sandbox);
        return -1;
    }
    if (sandbox_spawn (sandbox, SANDBOX_MODE_EXEC, -1, -1, -1, pipefd [1], cwd, argv,
                              err, errlen)) {
        close (pipefd [0]);
        close (pipefd [1]);
        sandbox_destroy (&sandbox);
        return -1;
    }
    close (pipefd [1]);
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
        int nfds = sandbox->pidfd >= 0? 2: 1;
        int ms = (int) ((deadline - now + 999999) / 1000000);
        //  Without a pidfd, look at the process now and then.
        if (nfds == 1 && ms > 20)
            ms = 20;
        int rc = poll (pfd, (nfds_t) nfds, ms);
        if (rc < 0 && errno != EINTR)
            break;
        if (pfd [0].revents) {
            char chunk [16384];
            ssize_t n = read (pipefd [0], chunk, sizeof chunk);
            if (n > 0) {
                size_t take = (size_t) n;
                if (used + take > S_OUTPUT_MAX) {
                    take = S_OUTPUT_MAX - used;
                    truncated = true;
                }
                if (buf && take)
                    memcpy (buf + used, chunk, take);
                used += take;
            }
            else
            if (n == 0)
                eof = true;
        }
        //  The program is done: its leftovers die, so the pipe closes now.
        if ((nfds == 2 && pfd [1].revents) || (nfds == 1 && s_exited (sandbox))) {
            kill (-sandbox->pid, SIGKILL);
            if (sandbox->cg_mode != S_CG_NONE)
                s_cg_empty (sandbox->cg_dir, sandbox->cg_mode);
            while (!eof) {
                char chunk [16384];
                struct pollfd rp = { .fd = pipefd [0], .events = POLLIN };
                if (poll (&rp, 1, 1000) <= 0)
                    break;
                ssize_t n = read (pipefd [0], chunk, sizeof chunk);
                if (n <= 0) {
                    eof = n == 0 || errno != EAGAIN;
                    if (eof)
                        break;
                    continue;
                }
                size_t take = (size_t) n;
                if (used + take > S_OUTPUT_MAX) {
                    take = S_OUTPUT_MAX - used;
                    truncated = true;
                }
                if (buf && take)
                    memcpy (buf + used, chunk, take);
                used += take;
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
//  What the host allows: ask a probe runner

static char s_host_caps [300];
static pthread_once_t s_caps_once = PTHREAD_ONCE_INIT;
//  The probe's empty network and IPC namespaces, kept open for later runners
//  to enter (root only); -1 when there are none.
static int s_shared_ns [2] = { -1, -1 };

//  Keep the probe's namespaces: /proc/PID/ns/* while it still lives.
static void
s_keep_namespaces (pid_t pid)
{
    if (geteuid () != 0)
        return;
    const char *names [2] = { "net", "ipc" };
    for (int i = 0; i < 2; i++) {
        char path [64];
        snprintf (path, sizeof path, "/proc/%d/ns/%s", (int) pid, names [i]);
        s_shared_ns [i] = open (path, O_RDONLY | O_CLOEXEC);
    }
    //  Never share the host's own namespaces by mistake.
    for (int i = 0; i < 2; i++) {
        struct stat mine, theirs;
        char path [64];
        snprintf (path, sizeof path, "/proc/self/ns/%s", names [i]);
        if (s_shared_ns [i] >= 0
        && (stat (path, &mine) != 0 || fstat (s_shared_ns [i], &theirs) != 0
        ||  mine.st_ino == theirs.st_ino)) {
            close (s_shared_ns [i]);
            s_shared_ns [i] = -1;
        }
    }
}

static void
s_probe (void)
{
    snprintf (s_host_caps, sizeof s_host_caps, "{\"runner\":false}");
    char err [256];
    sandbox_t *sandbox = sandbox_new (NULL, err, sizeof err);
    if (!sandbox)
        return;
    int sv [2];
    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        sandbox_destroy (&sandbox);
        return;
    }
    if (sandbox_spawn (sandbox, SANDBOX_MODE_PROBE, sv [1], -1, -1, -1, NULL, NULL,
                              err, sizeof err) == 0) {
        close (sv [1]);
        sv [1] = -1;
        struct pollfd pfd = { .fd = sv [0], .events = POLLIN };
        runner_reply_t reply;
        if (poll (&pfd, 1, (int) (S_PROBE_WAIT_S * 1000)) == 1
        &&  recv (sv [0], &reply, sizeof reply, 0) == (ssize_t) sizeof reply
        &&  reply.status == RUNNER_OK) {
            reply.message [sizeof reply.message - 1] = 0;
            if (reply.message [0] == '{')
                snprintf (s_host_caps, sizeof s_host_caps, "%s", reply.message);
            s_keep_namespaces (sandbox_pid (sandbox));
        }
    }
    if (sv [1] >= 0)
        close (sv [1]);
    close (sv [0]);
    sandbox_destroy (&sandbox);
}

const char *
sandbox_host_caps (void)
{
    pthread_once (&s_caps_once, s_probe);
    return s_host_caps;
}
