/*  worker_sandbox - how untrusted code is confined, and finding kgym-runner.

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
    enforced is reported as a JSON object (see worker_runner_caps).
*/
#ifndef WORKER_SANDBOX_H
#define WORKER_SANDBOX_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *runner_path;    //  kgym-runner; NULL = worker_sandbox_runner_path()
    uint64_t mem_bytes;         //  memory cap (cgroup + RLIMIT_AS); default 4 GiB + tensors
    uint32_t max_pids;          //  processes+threads cap (cgroup pids / RLIMIT_NPROC); default 32
    uint32_t cpu_s;             //  RLIMIT_CPU seconds; default 120
    const char *slot;           //  cgroup name for this slot, reused across runners; NULL = per process
} worker_sandbox_config_t;

//  Defaults for a config (runner_path NULL, mem 4 GiB, 32 pids, 120 s, no slot).
void worker_sandbox_config_default (worker_sandbox_config_t *cfg);

//  Where kgym-runner is: $KGYM_RUNNER, else beside /proc/self/exe, else the
//  build tree, else libexecdir. NULL when none exists. Process-wide, cached.
const char *worker_sandbox_runner_path (void);

//  Run argv (argv[0] a path) confined like a candidate but allowed to start
//  processes and write inside cwd (the compiler needs both), with a timeout
//  killing the whole group. stdout+stderr are captured (first 64 KiB, then
//  "[truncated]") into *output (malloc'd). Returns 0 when it ran (see
//  *exit_status, *timed_out), -1 with a reason when it could not start.
int worker_sandbox_exec (const worker_sandbox_config_t *cfg, char *const argv[], const char *cwd,
                         double timeout_s, char **output, int *exit_status, bool *timed_out,
                         char *err, size_t errlen);

//  What this host lets the sandbox enforce, as JSON text (static string),
//  e.g. {"netns":true,"uid":"nobody","seccomp":true,"cgroup":"v1","memory":true,"pids":true}.
const char *worker_sandbox_host_caps (void);

#endif
