/*  sandbox_caps - what confines a runner, seen by its supervisor.

    The caps object of a result's `sandbox` field is built here, by the
    supervisor, from what it set up and what the kernel shows of the runner
    from outside: /proc/PID/status (Uid, Gid, CapPrm, CapEff, NoNewPrivs,
    Seccomp, NSpid), /proc/PID/ns/..., /proc/PID/mountinfo, /proc/PID/limits
    and the cgroup's own cgroup.procs and limit files. Nothing in it comes
    from a message the runner (or code loaded into it) could forge. The same
    keys for every kind:

      kind          "kernel", "cc", "nvrtc", "cuda", "python"
      uid           the runner's uid on the host
      userns        in a user namespace of its own (the worker is not root)
      pidns         pid 1 of a pid namespace of its own
      netns, ipcns  network / IPC namespace not the worker's
      root          "empty", "view" or "host": its file system
      seccomp       a seccomp filter is installed
      no_new_privs  set
      capabilities  any capability left (false)
      cgroup        "v2", "v1" or "none": joined its cgroup
      memory_bytes, pids        the cgroup's caps, null when none binds
      rlimit_as, rlimit_cpu, rlimit_fsize, rlimit_nofile, rlimit_nproc
                    soft limits in force, null when unlimited
*/
#ifndef SANDBOX_CAPS_H
#define SANDBOX_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "sandbox_kind.h"
#include "sandbox_cgroup.h"

//  What the supervisor set up and asked for.
typedef struct {
    sandbox_kind_t kind;            //  the runner's kind
    uid_t uid;                      //  its uid on the host
    gid_t gid;                      //  its gid on the host
    bool userns;                    //  a user namespace of its own
    sandbox_cgroup_t *cgroup;       //  its cgroup, NULL when none
    uint64_t rlimit_as, rlimit_cpu, rlimit_fsize, rlimit_nofile, rlimit_nproc;  //  asked, SANDBOX_RLIMIT_LEAVE if not
} sandbox_caps_want_t;

//  Look at pid and write the caps object (compact JSON) into json. strict:
//  -1 with what differs when the runner is not confined as want says (its
//  uid, seccomp, no_new_privs, capabilities, namespaces, root, cgroup,
//  rlimits no looser than asked). -1 also when /proc cannot be read.
int sandbox_caps_read (const sandbox_caps_want_t *want, pid_t pid, bool strict,
                       char *json, size_t len, char *err, size_t errlen);

#endif
