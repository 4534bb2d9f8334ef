/*  sandbox_confine - a runner confines itself before untrusted code loads.

    Shared by kgym-cuda-runner (and, once the lead switches it over,
    kgym-runner). The supervisor creates a cgroup per runner slot with
    sandbox_confine_cgroup_new (it needs write access to the cgroup tree,
    which the runner, once confined, does not have); the runner, right after
    it starts, calls sandbox_confine() with the options it wants. Every step
    is attempted in a fixed order that keeps the later ones possible:

        1. join the cgroup dirs (write own pid to cgroup.procs)
        2. new network namespace: as root unshare(CLONE_NEWNET); else
           unshare(CLONE_NEWUSER|CLONE_NEWNET) with own uid/gid mapped
        3. rlimits: CORE 0 always; AS, CPU, FSIZE, NOFILE, NPROC when set
        4. Landlock: read-only access below the given paths (best effort)
        5. drop to nobody when root (setgroups, setgid, setuid)
        6. PR_SET_PDEATHSIG SIGKILL (after 5: a uid change clears it)
        7. PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE 0
        8. seccomp (libseccomp): default allow; EPERM for socket/socketpair
           of families other than AF_UNIX (CUDA's cuInit needs AF_UNIX),
           ptrace, process_vm_readv/writev, mount, umount2, pivot_root,
           unshare, setns, bpf, keyctl, add_key, request_key, kexec_*,
           init/finit/delete_module, io_uring_*, userfaultfd, and unless
           allowed perf_event_open, execve/execveat, fork/vfork and clone
           without CLONE_THREAD (clone3 answers ENOSYS so glibc falls back to
           clone, whose flags seccomp can see); optionally open/openat/creat
           for writing and the calls that create, remove or rename files.

    Steps 2, 4 and 5 are best effort unless `strict` is set: what was
    actually enforced is written as a compact JSON object into caps, e.g.
    {"cgroup":"v2","memory_max":4294967296,"pids_max":64,"netns":true,
     "user":"nobody","rlimit_as":0,"rlimit_cpu":120,"nofile":256,
     "no_new_privs":true,"dumpable":false,"seccomp":true,"landlock":false}

    PR_SET_PDEATHSIG fires when the *thread* that spawned the runner ends,
    not the process: spawn from a long-lived thread, or leave it off and
    watch getppid() (kgym-cuda-runner does the latter).
*/
#ifndef SANDBOX_CONFINE_H
#define SANDBOX_CONFINE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#define SANDBOX_CONFINE_MAX_CGROUPS  4
#define SANDBOX_CONFINE_MAX_PATHS    16
#define SANDBOX_CONFINE_PATH         512

//  seccomp relaxations, or-ed into sandbox_confine_opts_t.seccomp_allow
#define SANDBOX_CONFINE_ALLOW_EXEC   0x01u   //  execve, execveat
#define SANDBOX_CONFINE_ALLOW_FORK   0x02u   //  fork, vfork, clone without CLONE_THREAD
#define SANDBOX_CONFINE_ALLOW_PERF   0x04u   //  perf_event_open (CUPTI may want it)
#define SANDBOX_CONFINE_DENY_WRITE   0x08u   //  also deny opening files for writing and fs changes

//  What to apply. Zero-initialised = only CORE 0, no_new_privs, not dumpable.
typedef struct {
    const char *cgroups[SANDBOX_CONFINE_MAX_CGROUPS];  //  cgroup dirs to join, NULL-terminated
    bool netns;                 //  new network namespace (only lo)
    bool drop_to_nobody;        //  when root: setuid/setgid nobody (65534)
    bool pdeathsig;             //  SIGKILL when the spawning thread ends
    uint64_t rlimit_as;         //  bytes, 0 = leave (CUDA needs ~14 GiB + its largest allocation)
    uint32_t rlimit_cpu;        //  seconds, 0 = leave
    uint64_t rlimit_fsize;      //  bytes, 0 = leave
    uint32_t rlimit_nofile;     //  0 = leave
    uint32_t rlimit_nproc;      //  0 = leave (counts threads of the whole uid)
    const char *landlock_read[SANDBOX_CONFINE_MAX_PATHS];  //  readable trees, NULL-terminated; empty = no Landlock
    const char *landlock_write[SANDBOX_CONFINE_MAX_PATHS]; //  read-write trees (e.g. /dev/null)
    bool seccomp;               //  install the filter
    unsigned seccomp_allow;     //  SANDBOX_CONFINE_* bits
    bool strict;                //  fail when a best-effort step fails
} sandbox_confine_opts_t;

//  Confine the calling process (call before any thread exists if the
//  seccomp filter must cover them all: filters are per thread unless
//  synchronised, which we do with SECCOMP_FILTER_FLAG_TSYNC). Returns 0 and
//  the caps JSON in caps, or -1 with a reason in err.
int sandbox_confine (const sandbox_confine_opts_t *opts, char *caps, size_t capslen,
                    char *err, size_t errlen);

//  --- supervisor side: one cgroup per runner slot ---

//  A cgroup (v2, or v1 memory+pids) for one runner slot.
typedef struct {
    int version;                //  2, 1, or 0 when none could be made
    char dirs[SANDBOX_CONFINE_MAX_CGROUPS][SANDBOX_CONFINE_PATH];  //  dirs to join
    size_t ndirs;               //  entries used
    uint64_t memory_max;        //  bytes set, 0 = none
    uint32_t pids_max;          //  set, 0 = none
} sandbox_confine_cgroup_t;

//  Create (or reuse) /sys/fs/cgroup/kgym/<name> with memory.max (swap 0) and
//  pids.max; v1 hierarchies when there is no v2 one. Returns 0 (cg filled),
//  or -1 with a reason (cg->version 0): the host lets us create none.
int sandbox_confine_cgroup_new (const char *name, uint64_t memory_max, uint32_t pids_max,
                               sandbox_confine_cgroup_t *cg, char *err, size_t errlen);

//  Kill every process in the cgroup (cgroup.kill, else SIGKILL each pid).
void sandbox_confine_cgroup_kill (const sandbox_confine_cgroup_t *cg);

//  True when the memory controller recorded an OOM kill since creation.
bool sandbox_confine_cgroup_oom (const sandbox_confine_cgroup_t *cg);

//  Kill what is left and remove the cgroup dirs.
void sandbox_confine_cgroup_remove (sandbox_confine_cgroup_t *cg);

#endif
