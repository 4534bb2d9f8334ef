/*  sandbox_cgroup - the memory and pids cgroup of one runner.

    The supervisor (root) makes the cgroup and writes its caps; the runner
    joins it itself before anything untrusted runs; the supervisor checks
    that it did (cgroup.procs), reads the caps back for the caps object,
    notices OOM kills and kills whatever is left. Found once per process:

      v2    a cgroup2 mount whose root offers memory and pids: kgym/ at its
            root with both delegated; memory.max, memory.swap.max 0,
            memory.oom.group 1, pids.max; cgroup.kill to empty it.
      v1    the memory and pids hierarchies (either alone works): kgym/
            under this process's own cgroup in each, so the worker's own
            bounds still apply; memory.limit_in_bytes and memsw, pids.max.
      none  not root, or nothing writable: rlimits only (logged once).

    Names: a runner without a slot gets r<worker pid>-<random>, removed on
    destroy; a slot's runners reuse s-<slot> (s-<slot>.N while another live
    runner holds it), kept for the next one. Every cgroup in use is held
    with flock on its directory, so a dead worker's leftovers are told from
    live ones: stale r* cgroups are removed at start-up, a slot taken over
    is emptied first.
*/
#ifndef SANDBOX_CGROUP_H
#define SANDBOX_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_CGROUP_DIRS 2       //  v1: memory and pids hierarchies; v2: one

typedef struct sandbox_cgroup_t sandbox_cgroup_t;

//  "v2", "v1" or "none": what this host offers (found once).
const char *sandbox_cgroup_host (void);

//  Make or take the cgroup of slot (NULL: a fresh one) with the caps
//  written. NULL when the host offers none or it could not be made (logged).
sandbox_cgroup_t *sandbox_cgroup_new (const char *slot, uint64_t mem_bytes, uint32_t max_pids);

//  The same below an explicit parent directory of a cgroup hierarchy of
//  version 1 or 2 (tests: a v2 mount without controllers). Caps that the
//  hierarchy does not offer are left unset. NULL with a reason.
sandbox_cgroup_t *sandbox_cgroup_new_at (int version, const char *parent, const char *name,
                                         uint64_t mem_bytes, uint32_t max_pids,
                                         char *err, size_t errlen);

//  "v2" or "v1".
const char *sandbox_cgroup_version (sandbox_cgroup_t *self);

//  Directory i (a runner joins every one), NULL past the last.
const char *sandbox_cgroup_dir (sandbox_cgroup_t *self, int i);

//  The caps in force, read back from the cgroup: bytes / processes, 0 when
//  none binds (unset, "max", or far above what was asked).
uint64_t sandbox_cgroup_memory (sandbox_cgroup_t *self);
uint64_t sandbox_cgroup_pids (sandbox_cgroup_t *self);

//  True when pid is a member of every directory (its cgroup.procs list it).
bool sandbox_cgroup_contains (sandbox_cgroup_t *self, pid_t pid);

//  Processes in it now (-1 when it cannot be read).
int sandbox_cgroup_procs (sandbox_cgroup_t *self);

//  True once an OOM kill happened in it since it was taken (sticky).
bool sandbox_cgroup_oom (sandbox_cgroup_t *self);

//  Kill every member until it is empty (bounded wait).
void sandbox_cgroup_empty (sandbox_cgroup_t *self);

//  Empty it, remove it unless it is a slot's, release it.
void sandbox_cgroup_destroy (sandbox_cgroup_t **self_p);

//  Remove this slot's kept cgroups (s-SLOT, s-SLOT.N) that no live runner
//  holds, killing anything left in them (a worker shutting down). How many.
int sandbox_cgroup_slot_remove (const char *slot);

#endif
