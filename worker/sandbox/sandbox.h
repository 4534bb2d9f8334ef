/*  sandbox - one confined runner, seen from the supervisor.

    Every runner kind (sandbox_kind: a CPU kernel, the C compiler, NVRTC,
    the CUDA runner, an interpreter) is started, checked, supervised and
    killed by this class; the runner confines itself with sandbox_confine
    before it reads anything untrusted. Per runner the supervisor:

      - takes a uid of its own (sandbox_uid; as root) and a memory + pids
        cgroup where the host has one (sandbox_cgroup; slots reuse theirs),
      - starts the program with clone (CLONE_VM|CLONE_VFORK, like
        posix_spawn: the worker is multi-threaded) as pid 1 of a new pid
        namespace (and root of a new user namespace when not root), in
        network and IPC namespaces that are not the worker's, a process
        group of its own, default signal dispositions, an empty signal
        mask, a fixed environment, and exactly the descriptors given (at
        their own numbers; stdio on /dev/null or the output pipe),
      - tells it on the command line what to apply (sandbox_confine.h),
      - waits for it to say "confined", then checks from outside that it is
        (sandbox_caps: uid, seccomp, no_new_privs, capabilities, namespaces,
        root, cgroup, rlimits) and only then lets it go on: a runner whose
        confinement differs from what was asked is killed and refused,
      - stops, continues, waits for, kills (group, pid namespace and
        cgroup) and reaps it; never signals it once reaped.

    As root the network and IPC namespaces are shared empty ones, made once
    by a probe runner (making one costs milliseconds, entering microseconds).
*/
#ifndef SANDBOX_H
#define SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sandbox_kind.h"

#define SANDBOX_NO_LIMIT    UINT32_MAX  //  cpu_s: no RLIMIT_CPU
#define SANDBOX_VIEW_PATHS  16          //  extra read-only paths of a view

typedef struct {
    sandbox_kind_t kind;        //  which runner; default SANDBOX_KERNEL
    const char *runner_path;    //  its program; NULL = the kind's (sandbox_find)
    uint64_t mem_bytes;         //  memory cap (cgroup + RLIMIT_AS); default 4 GiB
    uint32_t max_pids;          //  processes+threads (pids cgroup, RLIMIT_NPROC); default 32
    uint32_t cpu_s;             //  RLIMIT_CPU seconds; default 120; SANDBOX_NO_LIMIT for none
    const char *slot;           //  cgroup reused by this slot's runners; NULL = its own
    const char *view [SANDBOX_VIEW_PATHS];  //  read-only paths added to the kind's view, NULL-terminated
    uint64_t fsize_bytes;       //  largest file it may write; 0 = the kind's
    bool gpu;                   //  it drives a GPU: no address-space cap (the driver
                                //  reserves far more than it uses), the cgroup's alone
    bool pinned;                //  a CPU job's runner, pinned by sandbox_pin: it may not
                                //  change any thread's CPUs (SANDBOX_SECCOMP_PINNED)
    bool selftest;              //  test-only: the runner reports its denied calls and exits
} sandbox_config_t;

//  Defaults (kernel kind, 4 GiB, 32 pids, 120 s, no slot, nothing added).
void sandbox_config_default (sandbox_config_t *cfg);

//  Where kgym-runner is (sandbox_find); NULL when none exists.
const char *sandbox_runner_path (void);

typedef struct sandbox_t sandbox_t;

//  Prepare a runner: its uid and cgroup. cfg may be NULL (defaults). NULL
//  with a reason (program not found, no free uid).
sandbox_t *sandbox_new (const sandbox_config_t *cfg, char *err, size_t errlen);

//  What to start. Descriptors are handed over at their own numbers (they
//  may be close-on-exec here); the runner closes everything else.
typedef struct {
    char *const *args;          //  the program's own arguments, NULL-terminated (may be NULL)
    const int *keep;            //  descriptors to hand over, -1-terminated (may be NULL)
    int object_fd;              //  SANDBOX_ROOT_EMPTY: the file its root holds, -1 none
    int out_fd;                 //  its stdout and stderr; -1: /dev/null
    const char *cwd;            //  SANDBOX_ROOT_VIEW: its writable directory, handed to its uid
    const char *cwd_at;         //  where it sees cwd (NULL: at the same path), so that
                                //  what it builds there names one path from run to run
} sandbox_spawn_t;

//  Start the runner once; returns when it runs (not yet confined). 0, or
//  -1 with a reason.
int sandbox_spawn (sandbox_t *self, const sandbox_spawn_t *what, char *err, size_t errlen);

//  Wait up to timeout_s for the runner to confine itself, check it from
//  outside, and let it go on. 0; -1 with why (it failed to confine, died,
//  or is not confined as asked: it is then killed and reaped).
int sandbox_confirm (sandbox_t *self, double timeout_s, char *err, size_t errlen);

//  The caps object (JSON text) the supervisor built at confirm; "{}" before.
const char *sandbox_caps (sandbox_t *self);

//  Look again (limits the runner lowered itself since, e.g. the CUDA
//  runner's address space after cuInit). 0, or -1 (caps left as they were).
int sandbox_caps_refresh (sandbox_t *self);

//  Kinds with a channel: the supervisor's end of its SOCK_STREAM socketpair
//  (the runner's is passed as --fd N). -1 otherwise.
int sandbox_channel (sandbox_t *self);

//  Test-only (cfg.selftest): after confirm, the runner's report of every
//  denied call (sandbox_seccomp_selftest), malloc'd into *report. 0 or -1.
int sandbox_selftest (sandbox_t *self, double timeout_s, char **report, char *err, size_t errlen);

//  The uid the runner runs as, seen from the host.
uid_t sandbox_uid (sandbox_t *self);

//  The runner's pid (= its process group id); 0 before spawn and once reaped.
int sandbox_pid (sandbox_t *self);

//  Signal the whole process group (SIGSTOP, SIGCONT...). 0 or -1.
int sandbox_signal (sandbox_t *self, int sig);

//  Apply fn to every thread of the runner's process (each tid as this
//  side's /proc names it). 0 when fn returned 0 for each; -1 otherwise, or
//  when there was none.
int sandbox_threads (sandbox_t *self, int (*fn) (pid_t tid, void *arg), void *arg);

//  Every thread of the runner's process on one CPU (the threads it starts
//  later inherit it). 0, or -1 when one could not be moved.
int sandbox_pin (sandbox_t *self, int cpu);

//  Stop the group (SIGSTOP) and wait until the runner is seen stopped.
//  0 stopped; -1 when it exited instead or did not stop in timeout_s (it is
//  then killed and reaped).
int sandbox_stop (sandbox_t *self, double timeout_s);

//  Has the runner exited? Then everything left is killed and it is reaped.
bool sandbox_exited (sandbox_t *self);

//  Wait up to timeout_s for the runner to exit, then kill whatever is left
//  and reap it. 0 reaped, 1 still running.
int sandbox_wait (sandbox_t *self, double timeout_s);

//  Kill the whole group, pid namespace and cgroup now and reap (idempotent).
void sandbox_kill (sandbox_t *self);

//  True once reaped; *wstatus (waitpid style) and *cpu_s (user+system
//  seconds) of the runner; either may be NULL.
bool sandbox_reaped (sandbox_t *self, int *wstatus, double *cpu_s);

//  Why the reaped runner ended, in words: "killed by SIGSEGV", "exited
//  with code 3", "killed by SIGKILL: out of memory (cap 512 MiB)", ...
void sandbox_describe (sandbox_t *self, char *buf, size_t len);

//  True when its cgroup has seen an OOM kill since the sandbox was made.
bool sandbox_oom (sandbox_t *self);

//  "v2", "v1" or "none"; its first cgroup directory (NULL when none); the
//  processes in that cgroup now (-1 when it has none).
const char *sandbox_cgroup (sandbox_t *self);
const char *sandbox_cgroup_path (sandbox_t *self);
int sandbox_cgroup_count (sandbox_t *self);

//  Kill, reap, empty the cgroup and remove it unless it is a slot's.
void sandbox_destroy (sandbox_t **self_p);

//  Remove this slot's kept cgroups that no live runner holds (a worker
//  shutting down). Returns how many were removed.
int sandbox_slot_remove (const char *slot);

//  Run argv (argv[0] an absolute path inside the kind's view) in a runner
//  of cfg's kind (SANDBOX_CC when cfg is NULL) with cwd as its writable
//  directory and a timeout that kills it. stdout+stderr are captured
//  (first 64 KiB, then "[truncated]") into *output (malloc'd). Returns 0
//  when it ran (see *exit_status, *timed_out), -1 with a reason when it
//  could not start or was not confined.
int sandbox_exec (const sandbox_config_t *cfg, char *const argv[], const char *cwd,
                  double timeout_s, char **output, int *exit_status, bool *timed_out,
                  char *err, size_t errlen);

//  What this host lets a kernel runner have: the caps object of a probe
//  runner (static string; {"runner":false} when none could start).
const char *sandbox_host_caps (void);

#endif
