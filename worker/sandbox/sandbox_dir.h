/*  sandbox_dir - a runner's writable directory, bounded.

    A runner that may write (the python kind: its module, its builds, its
    temporary files) gets one private directory of the worker's. On the
    host's disk, what it writes there is bounded only by the disk: a
    candidate could fill it and take the worker (its cache, its logs, the
    other jobs) down with it. Where the worker may mount (root), the
    directory is a tmpfs of a fixed size instead; its pages also count
    against the memory cgroup of the process that writes them.
*/
#ifndef SANDBOX_DIR_H
#define SANDBOX_DIR_H

#include <stddef.h>
#include <stdint.h>

//  Mount a tmpfs of at most bytes on dir (an empty private directory of
//  the worker's, mode 0700). 0 when mounted; -1 with why (not root, no
//  tmpfs): dir is left as it was, on the disk.
int sandbox_dir_cap (const char *dir, uint64_t bytes, char *err, size_t errlen);

//  Remove dir and everything in it (its tmpfs unmounted first when it has
//  one; links are removed, never followed).
void sandbox_dir_remove (const char *dir);

#endif
