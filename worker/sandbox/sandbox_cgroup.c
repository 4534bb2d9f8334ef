/*  sandbox_cgroup - the memory and pids cgroup of one runner.  */
#include "common_util.h"
#include "sandbox_cgroup.h"
#include "sandbox_file.h"
#include "common_log.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S_NAME_MAX      64              //  leaf name
#define S_EMPTY_WAIT_NS 2000000000ull   //  killed members leave within this

enum { S_NONE = 0, S_V1 = 1, S_V2 = 2 };

struct sandbox_cgroup_t {
    int version;                            //  S_V1 or S_V2
    char dir [SANDBOX_CGROUP_DIRS][PATH_MAX];   //  v2: [0]; v1: [0] memory, [1] pids; "" when absent
    int lock;                               //  flock held on the first directory present
    bool slot;                              //  a slot's: kept on destroy
    uint64_t mem_asked;                     //  memory cap written, 0 = none
    uint64_t pids_asked;                    //  pids cap written, 0 = none
    uint64_t mem_read, pids_read;           //  the caps read back once written (0 = none binds)
    uint64_t oom_base;                      //  OOM kills counted before we took it
    bool oom_seen;                          //  an OOM kill was seen (sticky)
};

//  ---------------------------------------------------------------------
//  Small helpers

//  Value of "key N" in a flat keyed file (memory.events, memory.oom_control).
static uint64_t
s_read_key (const char *path, const char *key)
{
    char buf [2048];
    if (sandbox_file_read (path, buf, sizeof buf) < 0)
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

//  The number in a one-value file; 0 for "max", absent or unreadable.
static uint64_t
s_read_u64 (const char *dir, const char *file)
{
    char path [PATH_MAX + 64], buf [64];
    snprintf (path, sizeof path, "%s/%s", dir, file);
    if (sandbox_file_read (path, buf, sizeof buf) <= 0)
        return 0;
    return strtoull (buf, NULL, 10);
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

//  Kill every process listed in dirs until they are empty (bounded).
static void
s_empty_dirs (char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX], int version)
{
    if (version == S_V2 && dirs [0][0]) {
        char path [PATH_MAX + 16];
        snprintf (path, sizeof path, "%s/cgroup.kill", dirs [0]);
        sandbox_file_write (path, "1");
    }
    uint64_t deadline = common_now_ns () + S_EMPTY_WAIT_NS;
    for (int round = 0; ; round++) {
        bool any = false;
        for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++) {
            if (!dirs [h][0])
                continue;
            char path [PATH_MAX + 16], buf [8192];
            snprintf (path, sizeof path, "%s/cgroup.procs", dirs [h]);
            if (sandbox_file_read (path, buf, sizeof buf) <= 0)
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

//  ---------------------------------------------------------------------
//  The host's cgroups (found once per process)

typedef struct {
    int version;                            //  S_*
    char base [SANDBOX_CGROUP_DIRS][PATH_MAX];  //  the kgym/ parents, as dir
    char why [256];                         //  why none, for the log
} s_host_t;

static s_host_t s_host;
static pthread_once_t s_host_once = PTHREAD_ONCE_INIT;

//  Try the cgroup2 mount at mnt: kgym/ at its root with memory and pids.
static bool
s_try_v2 (const char *mnt)
{
    char path [PATH_MAX], buf [512], base [PATH_MAX];
    snprintf (path, sizeof path, "%s/cgroup.controllers", mnt);
    if (sandbox_file_read (path, buf, sizeof buf) < 0
    ||  !s_contains_word (buf, "memory") || !s_contains_word (buf, "pids"))
        return false;
    snprintf (base, sizeof base, "%s/kgym", mnt);
    bool made = mkdir (base, 0755) == 0;
    if (!made && errno != EEXIST)
        return false;
    snprintf (path, sizeof path, "%s/cgroup.controllers", base);
    if (sandbox_file_read (path, buf, sizeof buf) < 0
    ||  !s_contains_word (buf, "memory") || !s_contains_word (buf, "pids")) {
        //  The root may not delegate them yet; it may refuse (processes in it).
        snprintf (path, sizeof path, "%s/cgroup.subtree_control", mnt);
        sandbox_file_write (path, "+memory +pids");
    }
    snprintf (path, sizeof path, "%s/cgroup.subtree_control", base);
    sandbox_file_write (path, "+memory +pids");
    if (sandbox_file_read (path, buf, sizeof buf) >= 0
    &&  s_contains_word (buf, "memory") && s_contains_word (buf, "pids")) {
        s_host.version = S_V2;
        snprintf (s_host.base [0], PATH_MAX, "%s", base);
        return true;
    }
    if (made)
        rmdir (base);
    return false;
}

//  This process's path in the v1 hierarchy holding controller, from /proc/self/cgroup.
static bool
s_own_path (const char *controller, char *out, size_t len)
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
s_try_v1 (const char *controller, const char *mnt, const char *mroot, char *base)
{
    char own [PATH_MAX], dir [PATH_MAX * 2];
    snprintf (dir, sizeof dir, "%s", mnt);
    //  Under our own cgroup, so the caps nest inside whatever bounds the worker.
    if (s_own_path (controller, own, sizeof own)) {
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
static void
s_clean_stale (void)
{
    int primary = s_host.base [0][0]? 0: 1;
    DIR *dir = opendir (s_host.base [primary]);
    if (!dir)
        return;
    struct dirent *ent;
    while ((ent = readdir (dir))) {
        int owner = 0;
        if (ent->d_name [0] != 'r' || sscanf (ent->d_name, "r%d-", &owner) != 1 || owner <= 0)
            continue;
        if (owner == getpid () || kill (owner, 0) == 0 || errno != ESRCH)
            continue;
        char path [PATH_MAX * 2];
        snprintf (path, sizeof path, "%s/%s", s_host.base [primary], ent->d_name);
        int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock (fd, LOCK_EX | LOCK_NB) == 0) {
            char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX] = { "", "" };
            for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
                if (s_host.base [h][0] && strlen (s_host.base [h]) + strlen (ent->d_name) + 2 < PATH_MAX)
                    snprintf (dirs [h], PATH_MAX, "%s/%s", s_host.base [h], ent->d_name);
            s_empty_dirs (dirs, s_host.version);
            for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
                if (dirs [h][0])
                    rmdir (dirs [h]);
        }
        close (fd);
    }
    closedir (dir);
}

static void
s_detect (void)
{
    memset (&s_host, 0, sizeof s_host);
    if (geteuid () != 0) {
        snprintf (s_host.why, sizeof s_host.why, "not root");
        return;
    }
    FILE *file = fopen ("/proc/self/mountinfo", "re");
    if (!file) {
        snprintf (s_host.why, sizeof s_host.why, "no /proc/self/mountinfo");
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
        if (strcmp (fstype, "cgroup") == 0)
            for (int h = 0; h < 2; h++)
                if (!v1_mnt [h][0] && s_contains_word (super, h == 0? "memory": "pids")) {
                    snprintf (v1_mnt [h], PATH_MAX, "%s", mnt);
                    snprintf (v1_root [h], PATH_MAX, "%s", root);
                }
    }
    fclose (file);
    for (int i = 0; i < nv2 && s_host.version == S_NONE; i++)
        s_try_v2 (v2_mnt [i]);
    if (s_host.version == S_NONE) {
        bool any = false;
        for (int h = 0; h < 2; h++)
            if (v1_mnt [h][0] && s_try_v1 (h == 0? "memory": "pids", v1_mnt [h], v1_root [h],
                                           s_host.base [h]))
                any = true;
            else
                s_host.base [h][0] = 0;
        if (any)
            s_host.version = S_V1;
        else
            snprintf (s_host.why, sizeof s_host.why,
                      "no writable cgroup v2 (memory+pids) or v1 memory/pids hierarchy");
    }
    if (s_host.version != S_NONE)
        s_clean_stale ();
    else
        log_warn ("sandbox", "no cgroup: %s; memory and process caps are rlimits only", s_host.why);
}

const char *
sandbox_cgroup_host (void)
{
    pthread_once (&s_host_once, s_detect);
    return s_host.version == S_V2? "v2": s_host.version == S_V1? "v1": "none";
}

//  ---------------------------------------------------------------------
//  One cgroup

//  Number of OOM kills the cgroup has seen.
static uint64_t
s_oom_count (sandbox_cgroup_t *self)
{
    char path [PATH_MAX + 32];
    if (!self->dir [0][0])
        return 0;
    snprintf (path, sizeof path, self->version == S_V2? "%s/memory.events": "%s/memory.oom_control",
              self->dir [0]);
    return s_read_key (path, "oom_kill");
}

//  Write the caps into the directories (those the hierarchy offers).
static void
s_set_limits (sandbox_cgroup_t *self)
{
    char path [PATH_MAX + 32], value [32], pids [32];
    snprintf (value, sizeof value, "%llu", (unsigned long long) self->mem_asked);
    snprintf (pids, sizeof pids, "%llu", (unsigned long long) self->pids_asked);
    const char *mem_dir = self->dir [0], *pids_dir = self->version == S_V2? self->dir [0]: self->dir [1];
    if (self->mem_asked && mem_dir [0]) {
        snprintf (path, sizeof path, "%s/%s", mem_dir,
                  self->version == S_V2? "memory.max": "memory.limit_in_bytes");
        if (access (path, F_OK) == 0) {
            if (self->version == S_V2) {
                if (sandbox_file_write (path, value))
                    log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
                snprintf (path, sizeof path, "%s/memory.swap.max", mem_dir);
                sandbox_file_write (path, "0");
                //  An OOM kill takes the whole cgroup, not one thread's process.
                snprintf (path, sizeof path, "%s/memory.oom.group", mem_dir);
                sandbox_file_write (path, "1");
            }
            else {
                //  memsw must stay >= limit: set it around the limit, in either order.
                char memsw [PATH_MAX + 48];
                snprintf (memsw, sizeof memsw, "%s/memory.memsw.limit_in_bytes", mem_dir);
                sandbox_file_write (memsw, value);
                if (sandbox_file_write (path, value))
                    log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
                sandbox_file_write (memsw, value);
                snprintf (path, sizeof path, "%s/memory.failcnt", mem_dir);
                sandbox_file_write (path, "0");
            }
        }
    }
    if (self->pids_asked && pids_dir [0]) {
        snprintf (path, sizeof path, "%s/pids.max", pids_dir);
        if (access (path, F_OK) == 0 && sandbox_file_write (path, pids))
            log_warn ("sandbox", "cannot set %s: %s", path, strerror (errno));
    }
}

static sandbox_cgroup_t *
s_new (int version, uint64_t mem_bytes, uint32_t max_pids)
{
    sandbox_cgroup_t *self = calloc (1, sizeof *self);
    if (self) {
        self->version = version;
        self->lock = -1;
        self->mem_asked = mem_bytes;
        self->pids_asked = max_pids;
    }
    return self;
}

//  Take the directories dirs (made or found): lock, empty if reused, caps.
//  0, or 1 when another live runner holds them, -1 on failure.
static int
s_take (sandbox_cgroup_t *self, char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX], bool fresh)
{
    int primary = dirs [0][0]? 0: 1;
    int fd = open (dirs [primary], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
        close (fd);
        return 1;
    }
    self->lock = fd;
    memcpy (self->dir, dirs, sizeof self->dir);
    //  A reused one may hold a dead worker's leftovers.
    if (!fresh)
        s_empty_dirs (self->dir, self->version);
    s_set_limits (self);
    //  Read back once: only we write them.
    const char *pids_dir = self->version == S_V2? self->dir [0]: self->dir [1];
    uint64_t mem = self->dir [0][0] && self->mem_asked
                 ? s_read_u64 (self->dir [0], self->version == S_V2? "memory.max": "memory.limit_in_bytes"): 0;
    uint64_t pids = pids_dir [0] && self->pids_asked? s_read_u64 (pids_dir, "pids.max"): 0;
    //  v1 reads "unlimited" as a huge number rounded to pages: binds nothing.
    self->mem_read = mem && mem <= self->mem_asked + (64ull << 20)? mem: 0;
    self->pids_read = pids && pids <= self->pids_asked? pids: 0;
    self->oom_base = s_oom_count (self);
    return 0;
}

sandbox_cgroup_t *
sandbox_cgroup_new (const char *slot, uint64_t mem_bytes, uint32_t max_pids)
{
    pthread_once (&s_host_once, s_detect);
    if (s_host.version == S_NONE)
        return NULL;
    sandbox_cgroup_t *self = s_new (s_host.version, mem_bytes, max_pids);
    if (!self)
        return NULL;
    char safe [S_NAME_MAX] = "";
    if (slot)
        s_slot_name (slot, safe);
    for (int attempt = 0; attempt < 64; attempt++) {
        char name [S_NAME_MAX + 16];
        if (slot && attempt == 0)
            snprintf (name, sizeof name, "s-%s", safe);
        else
        if (slot)
            snprintf (name, sizeof name, "s-%s.%d", safe, attempt);
        else {
            uint32_t rnd = 0;
            if (getrandom (&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
                rnd = (uint32_t) common_now_ns () ^ (uint32_t) attempt * 2654435761u;
            snprintf (name, sizeof name, "r%d-%08x", (int) getpid (), rnd);
        }
        char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX] = { "", "" };
        bool fresh = true, made [SANDBOX_CGROUP_DIRS] = { false, false };
        int failed = 0;
        for (int h = 0; h < SANDBOX_CGROUP_DIRS && !failed; h++) {
            if (!s_host.base [h][0])
                continue;
            if (strlen (s_host.base [h]) + strlen (name) + 2 >= PATH_MAX) {
                failed = ENAMETOOLONG;
                break;
            }
            snprintf (dirs [h], PATH_MAX, "%s/%s", s_host.base [h], name);
            if (mkdir (dirs [h], 0755) == 0)
                made [h] = true;
            else
            if (errno == EEXIST)
                fresh = false;
            else
                failed = errno;
        }
        int rc = failed? -1: !slot && !fresh? 1: s_take (self, dirs, fresh);
        if (rc == 0) {
            self->slot = slot != NULL;
            return self;
        }
        for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
            if (made [h])
                rmdir (dirs [h]);
        if (rc < 0) {
            log_warn ("sandbox", "cannot make cgroup %s: %s", name, strerror (failed? failed: errno));
            break;
        }
        //  A random name taken, or a slot in use by another runner: the next.
    }
    if (slot)
        log_warn ("sandbox", "no free cgroup for slot %s", safe);
    free (self);
    return NULL;
}

sandbox_cgroup_t *
sandbox_cgroup_new_at (int version, const char *parent, const char *name, uint64_t mem_bytes,
                       uint32_t max_pids, char *err, size_t errlen)
{
    if ((version != 1 && version != 2) || !parent || !name || !*name || strchr (name, '/')
    ||  strlen (parent) + strlen (name) + 2 >= PATH_MAX) {
        common_seterr (err, errlen, "bad cgroup version, parent or name");
        return NULL;
    }
    sandbox_cgroup_t *self = s_new (version == 2? S_V2: S_V1, mem_bytes, max_pids);
    if (!self) {
        common_seterr (err, errlen, "out of memory");
        return NULL;
    }
    char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX] = { "", "" };
    snprintf (dirs [0], PATH_MAX, "%s/%s", parent, name);
    bool fresh = mkdir (dirs [0], 0755) == 0;
    int rc = fresh || errno == EEXIST? s_take (self, dirs, fresh): -1;
    if (rc != 0) {
        common_seterr (err, errlen, "cannot take %s: %s", dirs [0], rc > 0? "in use": strerror (errno));
        if (fresh)
            rmdir (dirs [0]);
        free (self);
        return NULL;
    }
    return self;
}

const char *
sandbox_cgroup_version (sandbox_cgroup_t *self)
{
    return self->version == S_V2? "v2": "v1";
}

const char *
sandbox_cgroup_dir (sandbox_cgroup_t *self, int i)
{
    for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
        if (self->dir [h][0] && i-- == 0)
            return self->dir [h];
    return NULL;
}

uint64_t
sandbox_cgroup_memory (sandbox_cgroup_t *self)
{
    return self->mem_read;
}

uint64_t
sandbox_cgroup_pids (sandbox_cgroup_t *self)
{
    return self->pids_read;
}

bool
sandbox_cgroup_contains (sandbox_cgroup_t *self, pid_t pid)
{
    bool all = true;
    for (int h = 0; h < SANDBOX_CGROUP_DIRS && all; h++) {
        if (!self->dir [h][0])
            continue;
        char path [PATH_MAX + 16], buf [8192];
        snprintf (path, sizeof path, "%s/cgroup.procs", self->dir [h]);
        bool found = false;
        if (sandbox_file_read (path, buf, sizeof buf) > 0)
            for (char *p = buf, *end; *p && !found; p = end + (*end != 0)) {
                long value = strtol (p, &end, 10);
                if (end == p)
                    break;
                found = value == (long) pid;
            }
        all = found;
    }
    return all;
}

int
sandbox_cgroup_procs (sandbox_cgroup_t *self)
{
    const char *dir = sandbox_cgroup_dir (self, 0);
    char path [PATH_MAX + 16], buf [8192];
    snprintf (path, sizeof path, "%s/cgroup.procs", dir? dir: "");
    if (!dir || sandbox_file_read (path, buf, sizeof buf) < 0)
        return -1;
    int count = 0;
    for (char *p = buf; *p; p++)
        count += *p == '\n';
    return count;
}

bool
sandbox_cgroup_oom (sandbox_cgroup_t *self)
{
    if (!self->oom_seen && s_oom_count (self) > self->oom_base)
        self->oom_seen = true;
    return self->oom_seen;
}

void
sandbox_cgroup_empty (sandbox_cgroup_t *self)
{
    sandbox_cgroup_oom (self);
    s_empty_dirs (self->dir, self->version);
}

void
sandbox_cgroup_destroy (sandbox_cgroup_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sandbox_cgroup_t *self = *self_p;
    sandbox_cgroup_empty (self);
    if (!self->slot) {
        //  rmdir waits for the last exiting task to leave the cgroup.
        uint64_t deadline = common_now_ns () + S_EMPTY_WAIT_NS;
        for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
            while (self->dir [h][0] && rmdir (self->dir [h]) != 0 && errno == EBUSY
               &&  common_now_ns () < deadline) {
                s_empty_dirs (self->dir, self->version);
                sched_yield ();
            }
    }
    if (self->lock >= 0)
        close (self->lock);
    free (self);
    *self_p = NULL;
}

int
sandbox_cgroup_slot_remove (const char *slot)
{
    if (!slot)
        return 0;
    pthread_once (&s_host_once, s_detect);
    if (s_host.version == S_NONE)
        return 0;
    char safe [S_NAME_MAX];
    s_slot_name (slot, safe);
    int primary = s_host.base [0][0]? 0: 1;
    int removed = 0;
    for (int n = 0; n < 64; n++) {
        char name [S_NAME_MAX + 16];
        if (n == 0)
            snprintf (name, sizeof name, "s-%s", safe);
        else
            snprintf (name, sizeof name, "s-%s.%d", safe, n);
        char dirs [SANDBOX_CGROUP_DIRS][PATH_MAX] = { "", "" };
        for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
            if (s_host.base [h][0])
                snprintf (dirs [h], PATH_MAX, "%s/%s", s_host.base [h], name);
        int fd = open (dirs [primary], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            continue;               //  suffixes need not be contiguous
        //  Held: a live runner uses it.
        if (flock (fd, LOCK_EX | LOCK_NB) == 0) {
            s_empty_dirs (dirs, s_host.version);
            bool gone = true;
            for (int h = 0; h < SANDBOX_CGROUP_DIRS; h++)
                if (dirs [h][0] && rmdir (dirs [h]) != 0 && errno != ENOENT)
                    gone = false;
            removed += gone;
        }
        close (fd);
    }
    return removed;
}
