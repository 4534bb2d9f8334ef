/*  sandbox - how untrusted code is confined, and finding kgym-runner.

    Every candidate (and the compiler run on its source) executes inside
    kgym-runner, which confines itself before loading anything untrusted:
    own process group; a new network namespace (only lo); uid/gid dropped to
    nobody when started as root, else a new user namespace; no_new_privs;
    not dumpable; rlimits on address space, CPU time, file size, open files,
    core dumps and processes; a seccomp filter (no sockets but AF_UNIX, no
    ptrace/process_vm_*, no mount/unshare/setns/bpf/keyctl/perf_event_open,
    no file writes or creation, no new processes in kernel mode); and a cgroup
    (v2 memory.max+pids.max, or v1 memory+pids hierarchies) wherever one can
    be created, so memory and process caps bind even for root. What could be
    enforced is reported as a JSON object (see cpu_runner_caps).
*/
#ifndef SANDBOX_H
#define SANDBOX_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *runner_path;    //  kgym-runner; NULL = sandbox_runner_path()
    uint64_t mem_bytes;         //  memory cap (cgroup + RLIMIT_AS); default 4 GiB + tensors
    uint32_t max_pids;          //  processes+threads cap (cgroup pids / RLIMIT_NPROC); default 32
    uint32_t cpu_s;             //  RLIMIT_CPU seconds; default 120
    const char *slot;           //  cgroup name for this slot, reused across runners; NULL = per process
} sandbox_config_t;

//  Defaults for a config (runner_path NULL, mem 4 GiB, 32 pids, 120 s, no slot).
void sandbox_config_default (sandbox_config_t *cfg);

//  Where kgym-runner is: $KGYM_RUNNER, else beside /proc/self/exe, else the
//  build tree, else libexecdir. NULL when none exists. Process-wide, cached.
const char *sandbox_runner_path (void);

//  Run argv (argv[0] a path) confined like a candidate but allowed to start
//  processes and write inside cwd (the compiler needs both), with a timeout
//  killing the whole group. stdout+stderr are captured (first 64 KiB, then
//  "[truncated]") into *output (malloc'd). Returns 0 when it ran (see
//  *exit_status, *timed_out), -1 with a reason when it could not start.
int sandbox_exec (const sandbox_config_t *cfg, char *const argv[], const char *cwd,
                         double timeout_s, char **output, int *exit_status, bool *timed_out,
                         char *err, size_t errlen);

//  What this host lets the sandbox enforce, as JSON text (static string),
//  e.g. {"netns":true,"uid":"nobody","seccomp":true,"cgroup":"v1","memory":true,"pids":true}.
const char *sandbox_host_caps (void);

//  ---------------------------------------------------------------------
//  One confinement instance (used by cpu_runner and sandbox_exec):
//  the cgroup made for it, when the host allows one, and the kgym-runner
//  process group spawned into it. The runner is this process's child; its
//  pid is also its process group id. Never signalled once reaped.
typedef struct sandbox_t sandbox_t;

typedef enum {
    SANDBOX_MODE_KERNEL = 0,    //  load so_fd, serve requests on sock_fd, shared memory shm_fd
    SANDBOX_MODE_EXEC,          //  run argv with stdout+stderr on out_fd, cwd its directory
    SANDBOX_MODE_PROBE          //  confine, send the caps reply on sock_fd, exit
} sandbox_mode_t;

//  Prepare a sandbox: a fresh cgroup (cfg->slot NULL, removed on destroy)
//  or this slot's reusable one, capped; none when the host has none.
//  cfg may be NULL (defaults). NULL with a reason.
sandbox_t *sandbox_new (const sandbox_config_t *cfg, char *err, size_t errlen);

//  Spawn kgym-runner once (posix_spawn, own process group, stdin and, but
//  in exec mode, stdout/stderr on /dev/null). sock_fd, so_fd, shm_fd keep
//  their numbers in the child (pass -1 for unused); out_fd becomes its
//  stdout and stderr; cwd may be NULL. 0 or -1 with a reason.
int sandbox_spawn (sandbox_t *self, sandbox_mode_t mode, int sock_fd,
                          int so_fd, int shm_fd, int out_fd, const char *cwd,
                          char *const argv[], char *err, size_t errlen);

//  The runner's pid (= process group id); 0 before spawn and once reaped.
int sandbox_pid (sandbox_t *self);

//  Signal the whole process group (SIGSTOP, SIGCONT...). 0 or -1.
int sandbox_signal (sandbox_t *self, int sig);

//  Stop the group (SIGSTOP) and wait until the runner is seen stopped.
//  0 stopped; -1 when it exited instead or did not stop in timeout_s (it is
//  then killed and reaped; see sandbox_status).
int sandbox_stop (sandbox_t *self, double timeout_s);

//  Wait up to timeout_s for the runner to exit, then kill whatever is left
//  of its group and cgroup and reap it. 0 reaped, 1 still running.
int sandbox_wait (sandbox_t *self, double timeout_s);

//  Kill the whole group and cgroup now and reap the runner (idempotent).
void sandbox_kill (sandbox_t *self);

//  True once reaped; *wstatus (waitpid style) and *cpu_s (user+system
//  seconds) of the runner; either may be NULL.
bool sandbox_reaped (sandbox_t *self, int *wstatus, double *cpu_s);

//  Why the reaped runner ended, in words: "killed by SIGSEGV", "exited
//  with code 3", "killed by SIGKILL: out of memory (cap 512 MiB)", ...
void sandbox_describe (sandbox_t *self, char *buf, size_t len);

//  True when the cgroup has seen an OOM kill since this sandbox was made.
bool sandbox_oom (sandbox_t *self);

//  "v2", "v1" or "none"; and the first cgroup directory (NULL when none).
const char *sandbox_cgroup (sandbox_t *self);
const char *sandbox_cgroup_path (sandbox_t *self);

//  Number of processes in the sandbox's cgroup now (-1 when it has none).
int sandbox_cgroup_count (sandbox_t *self);

//  Kill, reap, empty the cgroup and remove it unless it is a slot's.
void sandbox_destroy (sandbox_t **self_p);

//  Remove this slot's kept cgroups (s-SLOT, s-SLOT.N) that no live sandbox
//  holds, killing anything left in them; for a worker shutting down.
//  Returns how many were removed.
int sandbox_slot_remove (const char *slot);

#endif
