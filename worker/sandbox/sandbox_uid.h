/*  sandbox_uid - a host uid of its own for every live runner.

    As root, each runner drops to a uid (and the gid of the same number)
    that no other live runner on the host holds, so no runner can signal,
    trace or re-limit another's processes even outside its pid namespace,
    and RLIMIT_NPROC counts one runner's processes exactly. The uids come
    from a range, KGYM_SANDBOX_UIDS="FIRST-LAST", default 1879048192-
    1879113727 (0x70000000 + 64 Ki: systemd leaves 0x70000000-0x7FFDFFFF
    unused). A uid is held by binding the abstract unix socket name
    "kgym-sandbox-uid-<uid>": the workers that share a network namespace
    (those of one host, as a rule) share the range, a dead worker's uids
    come free with its sockets, and no file system is needed (the worker
    unit's /run and /tmp are its own). Workers in separate network
    namespaces (containers) need ranges of their own.
*/
#ifndef SANDBOX_UID_H
#define SANDBOX_UID_H

#include <sys/types.h>
#include <stddef.h>

#define SANDBOX_UID_FIRST   1879048192u     //  0x70000000
#define SANDBOX_UID_COUNT   65536u

typedef struct sandbox_uid_t sandbox_uid_t;

//  Take a free uid of the range. NULL with a reason (range exhausted,
//  malformed KGYM_SANDBOX_UIDS, no lock directory).
sandbox_uid_t *sandbox_uid_new (char *err, size_t errlen);

//  The uid held.
uid_t sandbox_uid_number (sandbox_uid_t *self);

//  Give it back (its processes must be gone).
void sandbox_uid_destroy (sandbox_uid_t **self_p);

//  The range in force: *first and *count. 0, or -1 with a reason.
int sandbox_uid_range (uid_t *first, uid_t *count, char *err, size_t errlen);

#endif
