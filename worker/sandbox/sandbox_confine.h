/*  sandbox_confine - a runner confines itself before untrusted input.

    The runner's half of the sandbox, the same for every kind (kgym-runner
    for kernels, the compiler and interpreters; kgym-cuda-runner;
    kgym-nvrtc). The supervisor (sandbox.c) started it as pid 1 of a new pid
    namespace, in network and IPC namespaces not the worker's (and, when
    not root, as root of a new user namespace) and says on the command
    line what to apply; sandbox_confine_parse takes those options out of
    argv, sandbox_confine applies them in this order:

        1. join the cgroup directories (write 0 to cgroup.procs)
        2. parent death signal (kinds spawned by a long-lived thread)
        3. as pid 1: relay self-sent fatal signals as exit 128+N (the kernel
           ignores them for a namespace's init; in-process kinds only)
        4. the kind's root: empty (the object only), a view, or the host's
        5. identity: as root, groups dropped and uid/gid switched to the
           runner's own (--uid); in a user namespace, every capability
           dropped for good (bounding set, securebits NOROOT, capset 0)
        6. parent death signal again (a credential change clears it)
        7. rlimits: CORE 0, MSGQUEUE 0, and AS, CPU (hard = soft + 1),
           FSIZE, NOFILE, NPROC as given
        8. no_new_privs, not dumpable
        9. close every descriptor but 0-2, --sync and --keep ones
       10. seccomp: the kind's filter (sandbox_seccomp)
       11. say "confined" on --sync and wait for the supervisor's go: it
           checks from outside (/proc) that all of the above holds first.

    Every step is required: a failure is reported on --sync ("error: why")
    and the runner must exit. Nothing untrusted has been read until the go.

    Options: --kind NAME --sync FD [--uid N | --userns] [--cgroup DIR]...
    [--object FD] [--ro PATH]... [--rw DIR [--rw-at PATH]]
    [--keep FD]... [--rlimit-as B] [--rlimit-cpu S] [--rlimit-fsize B]
    [--rlimit-nofile N] [--rlimit-nproc N] [--pinned] [--selftest]
*/
#ifndef SANDBOX_CONFINE_H
#define SANDBOX_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sandbox_kind.h"
#include "sandbox_cgroup.h"

#define SANDBOX_CONFINE_PATHS   32          //  --ro paths at most
#define SANDBOX_CONFINE_KEEP    8           //  --keep fds at most
#define SANDBOX_RLIMIT_LEAVE    UINT64_MAX  //  an rlimit not asked for

//  What the supervisor asked for.
typedef struct {
    sandbox_kind_t kind;                    //  --kind
    int sync;                               //  --sync: the handshake socket
    uid_t uid;                              //  --uid: the uid to become (root); 0 = none
    bool userns;                            //  --userns: root of a fresh user namespace
    const char *cgroups [SANDBOX_CGROUP_DIRS];  //  --cgroup, NULL-terminated
    int object;                             //  --object: the empty root's file, -1 none
    const char *ro [SANDBOX_CONFINE_PATHS]; //  --ro: the view's read-only paths
    size_t nro;                             //  entries in ro
    const char *rw;                         //  --rw: the view's writable directory
    const char *rw_at;                      //  --rw-at: where the view shows it (NULL: at rw)
    int keep [SANDBOX_CONFINE_KEEP];        //  --keep: descriptors handed over
    size_t nkeep;                           //  entries in keep
    uint64_t rlimit_as, rlimit_cpu, rlimit_fsize, rlimit_nofile, rlimit_nproc;
    bool selftest;                          //  --selftest: report denied calls, exit
    bool pinned;                            //  --pinned: no sched_setaffinity at all (SANDBOX_SECCOMP_PINNED)
} sandbox_confine_args_t;

//  Take the sandbox's options out of argv (up to "--"); the others stay in
//  order. Returns the new argc, or -1 with why.
int sandbox_confine_parse (int argc, char **argv, sandbox_confine_args_t *args,
                           char *err, size_t errlen);

//  Apply everything (see above) and wait for the go. 0: confined, the
//  caller goes on; -1: refused (reported on --sync, err says why), the
//  caller must exit. With --selftest it never returns.
int sandbox_confine (const sandbox_confine_args_t *args, char *err, size_t errlen);

#endif
