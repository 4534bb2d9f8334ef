/*  sandbox_caps - what confines a runner, seen by its supervisor.  */
#include "common_util.h"
#include "sandbox_caps.h"
#include "sandbox_confine.h"
#include "sandbox_file.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  What /proc shows of the runner.
typedef struct {
    unsigned long uid [4], gid [4]; //  real, effective, saved, file system
    unsigned long long cap_prm, cap_eff;
    int no_new_privs;               //  -1 unknown
    int seccomp;                    //  0 off, 1 strict, 2 filter, -1 unknown
    int nspid_depth;                //  fields of NSpid
    long nspid_last;                //  its pid in its innermost namespace
    bool ns_differs [5];            //  net, ipc, mnt, pid, user not the supervisor's
    bool root_tmpfs_ro;             //  its root is a read-only tmpfs
    int mounts;                     //  mounts it sees
    uint64_t soft [5], hard [5];    //  as, cpu, fsize, nofile, nproc; UINT64_MAX unlimited
} s_seen_t;

static const char *const s_ns [5] = { "net", "ipc", "mnt", "pid", "user" };
enum { S_NET, S_IPC, S_MNT, S_PID, S_USER };
static const char *const s_limits [5] = {
    "Max address space", "Max cpu time", "Max file size", "Max open files", "Max processes"
};
static const char *const s_limit_keys [5] = {
    "rlimit_as", "rlimit_cpu", "rlimit_fsize", "rlimit_nofile", "rlimit_nproc"
};

//  /proc/PID/name, open for reading lines.
static FILE *
s_proc (pid_t pid, const char *name)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/%s", (int) pid, name);
    return fopen (path, "re");
}

static int
s_status (pid_t pid, s_seen_t *seen)
{
    char line [512];
    FILE *file = s_proc (pid, "status");
    if (!file)
        return -1;
    seen->no_new_privs = seen->seccomp = -1;
    int fields = 0;
    while (fgets (line, sizeof line, file)) {
        //  Look at the lines we want only (sscanf on each of ~60 is slow).
        const char *value = strchr (line, ':');
        if (!value)
            continue;
        size_t key = (size_t) (value++ - line);
        if (key == 3 && strncmp (line, "Uid", 3) == 0)
            fields += sscanf (value, "%lu %lu %lu %lu", &seen->uid [0], &seen->uid [1], &seen->uid [2],
                              &seen->uid [3]) == 4;
        else
        if (key == 3 && strncmp (line, "Gid", 3) == 0)
            fields += sscanf (value, "%lu %lu %lu %lu", &seen->gid [0], &seen->gid [1], &seen->gid [2],
                              &seen->gid [3]) == 4;
        else
        if (key == 6 && strncmp (line, "CapPrm", 6) == 0)
            fields += sscanf (value, "%llx", &seen->cap_prm) == 1;
        else
        if (key == 6 && strncmp (line, "CapEff", 6) == 0)
            fields += sscanf (value, "%llx", &seen->cap_eff) == 1;
        else
        if (key == 10 && strncmp (line, "NoNewPrivs", 10) == 0)
            fields += sscanf (value, "%d", &seen->no_new_privs) == 1;
        else
        if (key == 7 && strncmp (line, "Seccomp", 7) == 0)
            fields += sscanf (value, "%d", &seen->seccomp) == 1;
        else
        if (key == 5 && strncmp (line, "NSpid", 5) == 0) {
            fields++;
            char *p = (char *) value, *end;
            for (long v; (v = strtol (p, &end, 10)), end != p; p = end) {
                seen->nspid_depth++;
                seen->nspid_last = v;
            }
        }
    }
    fclose (file);
    return fields == 7? 0: -1;
}

//  The supervisor's own network and IPC namespaces and uid map (they do
//  not change).
static struct stat s_mine [2];
static char s_mine_map [256];
static int s_mine_ok = -1;
static pthread_once_t s_mine_once = PTHREAD_ONCE_INIT;

static void
s_mine_init (void)
{
    s_mine_ok = stat ("/proc/self/ns/net", &s_mine [0]) == 0 && stat ("/proc/self/ns/ipc", &s_mine [1]) == 0
             && sandbox_file_read ("/proc/self/uid_map", s_mine_map, sizeof s_mine_map) >= 0? 0: -1;
}

//  Which namespaces are not ours. The pid namespace shows in NSpid, the
//  user namespace in uid_map, the mount namespace in mountinfo (its root
//  is its own tmpfs); the network and IPC ones only in /proc/PID/ns, which
//  needs ptrace access (CAP_SYS_PTRACE for another uid): where that cannot
//  be read they count as the supervisor made them (it entered or made them
//  for the runner before exec).
static int
s_namespaces (pid_t pid, s_seen_t *seen)
{
    pthread_once (&s_mine_once, s_mine_init);
    if (s_mine_ok != 0)
        return -1;
    const int which [2] = { S_NET, S_IPC };
    for (int i = 0; i < 2; i++) {
        char path [64];
        struct stat theirs;
        snprintf (path, sizeof path, "/proc/%d/ns/%s", (int) pid, s_ns [which [i]]);
        if (stat (path, &theirs) == 0)
            seen->ns_differs [which [i]] = theirs.st_ino != s_mine [i].st_ino || theirs.st_dev != s_mine [i].st_dev;
        else
        if (errno == EACCES || errno == EPERM)
            seen->ns_differs [which [i]] = true;
        else
            return -1;
    }
    char path [64], theirs [256];
    snprintf (path, sizeof path, "/proc/%d/uid_map", (int) pid);
    if (sandbox_file_read (path, theirs, sizeof theirs) < 0)
        return -1;
    seen->ns_differs [S_USER] = strcmp (theirs, s_mine_map) != 0;
    return 0;
}

static int
s_mounts (pid_t pid, s_seen_t *seen)
{
    char line [4096];
    FILE *file = s_proc (pid, "mountinfo");
    if (!file)
        return -1;
    while (fgets (line, sizeof line, file)) {
        //  id parent maj:min root mountpoint options ... - fstype source superoptions
        char mnt [1024], options [256], fstype [64];
        char *sep = strstr (line, " - ");
        if (!sep || sscanf (line, "%*s %*s %*s %*s %1023s %255s", mnt, options) != 2
        ||  sscanf (sep + 3, "%63s", fstype) != 1)
            continue;
        seen->mounts++;
        if (strcmp (mnt, "/") == 0)
            seen->root_tmpfs_ro = strcmp (fstype, "tmpfs") == 0
                               && (strncmp (options, "ro,", 3) == 0 || strcmp (options, "ro") == 0);
    }
    fclose (file);
    return 0;
}

static uint64_t
s_limit_value (const char *text)
{
    return strncmp (text, "unlimited", 9) == 0? UINT64_MAX: strtoull (text, NULL, 10);
}

static int
s_rlimits (pid_t pid, s_seen_t *seen)
{
    char line [256];
    FILE *file = s_proc (pid, "limits");
    if (!file)
        return -1;
    int found = 0;
    while (fgets (line, sizeof line, file))
        for (int i = 0; i < 5; i++) {
            size_t len = strlen (s_limits [i]);
            char soft [32], hard [32];
            if (strncmp (line, s_limits [i], len) == 0 && line [len] == ' '
            &&  sscanf (line + len, "%31s %31s", soft, hard) == 2) {
                seen->soft [i] = s_limit_value (soft);
                seen->hard [i] = s_limit_value (hard);
                found++;
            }
        }
    fclose (file);
    return found == 5? 0: -1;
}

//  The first difference from want, into err; 0 when none.
static int
s_compare (const sandbox_caps_want_t *want, const s_seen_t *seen, bool in_cgroup,
           char *err, size_t errlen)
{
    const sandbox_kind_info_t *kind = sandbox_kind_info (want->kind);
    for (int i = 0; i < 4; i++)
        if (seen->uid [i] != want->uid || seen->gid [i] != want->gid) {
            common_seterr (err, errlen, "uid/gid %lu/%lu, want %u/%u", seen->uid [i], seen->gid [i],
                           (unsigned) want->uid, (unsigned) want->gid);
            return -1;
        }
    const char *what = seen->seccomp != 2? "no seccomp filter"
                     : seen->no_new_privs != 1? "no_new_privs not set"
                     : seen->cap_prm || seen->cap_eff? "capabilities left"
                     : seen->nspid_depth < 2 || seen->nspid_last != 1? "not pid 1 of its own pid namespace"
                     : !seen->ns_differs [S_PID]? "in the worker's pid namespace"
                     : !seen->ns_differs [S_NET]? "in the worker's network namespace"
                     : !seen->ns_differs [S_IPC]? "in the worker's IPC namespace"
                     : seen->ns_differs [S_USER] != want->userns? (want->userns? "no user namespace"
                                                                                 : "an unexpected user namespace")
                     : kind->root != SANDBOX_ROOT_HOST && (!seen->ns_differs [S_MNT] || !seen->root_tmpfs_ro)?
                       "its root is not its own read-only tmpfs"
                     : want->cgroup && !in_cgroup? "not in its cgroup"
                     : NULL;
    if (what) {
        common_seterr (err, errlen, "%s", what);
        return -1;
    }
    const uint64_t asked [5] = { want->rlimit_as, want->rlimit_cpu, want->rlimit_fsize,
                                 want->rlimit_nofile, want->rlimit_nproc };
    for (int i = 0; i < 5; i++) {
        uint64_t hard = asked [i] == SANDBOX_RLIMIT_LEAVE? asked [i]: asked [i] + (i == 1);
        if (asked [i] != SANDBOX_RLIMIT_LEAVE && (seen->soft [i] > asked [i] || seen->hard [i] > hard)) {
            common_seterr (err, errlen, "%s is %llu, want at most %llu", s_limit_keys [i],
                           (unsigned long long) seen->soft [i], (unsigned long long) asked [i]);
            return -1;
        }
    }
    return 0;
}

static const char *
s_bool (bool value)
{
    return value? "true": "false";
}

//  A number, or null for 0 / unlimited.
static const char *
s_num (uint64_t value, bool zero_is_null, char *buf, size_t len)
{
    if (value == UINT64_MAX || (zero_is_null && value == 0))
        return "null";
    snprintf (buf, len, "%llu", (unsigned long long) value);
    return buf;
}

int
sandbox_caps_read (const sandbox_caps_want_t *want, pid_t pid, bool strict,
                   char *json, size_t len, char *err, size_t errlen)
{
    s_seen_t seen;
    memset (&seen, 0, sizeof seen);
    if (pid <= 0 || s_status (pid, &seen) || s_namespaces (pid, &seen) || s_rlimits (pid, &seen)
    ||  s_mounts (pid, &seen)) {
        common_seterr (err, errlen, "cannot read /proc/%d: %s", (int) pid, strerror (errno));
        return -1;
    }
    seen.ns_differs [S_PID] = seen.nspid_depth >= 2;
    seen.ns_differs [S_MNT] = seen.root_tmpfs_ro;
    bool in_cgroup = want->cgroup && sandbox_cgroup_contains (want->cgroup, pid);
    if (strict && s_compare (want, &seen, in_cgroup, err, errlen))
        return -1;
    const sandbox_kind_info_t *kind = sandbox_kind_info (want->kind);
    const char *root = !seen.ns_differs [S_MNT] || !seen.root_tmpfs_ro? "host"
                     : seen.mounts <= 1? "empty": "view";
    char mem [24] = "", pids [24] = "", limit [5][24];
    size_t n = (size_t) snprintf (json, len,
        "{\"kind\":\"%s\",\"uid\":%lu,\"userns\":%s,\"pidns\":%s,\"netns\":%s,\"ipcns\":%s,"
        "\"root\":\"%s\",\"seccomp\":%s,\"no_new_privs\":%s,\"capabilities\":%s,\"cgroup\":\"%s\","
        "\"memory_bytes\":%s,\"pids\":%s",
        kind->name, seen.uid [1], s_bool (seen.ns_differs [S_USER]),
        s_bool (seen.ns_differs [S_PID] && seen.nspid_last == 1), s_bool (seen.ns_differs [S_NET]),
        s_bool (seen.ns_differs [S_IPC]), root, s_bool (seen.seccomp == 2),
        s_bool (seen.no_new_privs == 1), s_bool (seen.cap_prm || seen.cap_eff),
        in_cgroup? sandbox_cgroup_version (want->cgroup): "none",
        s_num (in_cgroup? sandbox_cgroup_memory (want->cgroup): 0, true, mem, sizeof mem),
        s_num (in_cgroup? sandbox_cgroup_pids (want->cgroup): 0, true, pids, sizeof pids));
    for (int i = 0; i < 5 && n < len; i++)
        n += (size_t) snprintf (json + n, len - n, ",\"%s\":%s", s_limit_keys [i],
                                s_num (seen.soft [i], false, limit [i], sizeof limit [i]));
    if (n + 2 > len) {
        common_seterr (err, errlen, "caps do not fit in %zu bytes", len);
        return -1;
    }
    snprintf (json + n, len - n, "}");
    return 0;
}
