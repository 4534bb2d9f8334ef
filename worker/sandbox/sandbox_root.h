/*  sandbox_root - the runner's own file system: an empty root or a view.

    Runner side, while it still holds CAP_SYS_ADMIN (root, or root of its
    fresh user namespace): a mount namespace of its own, a small tmpfs made
    its root with pivot_root, the host's root detached, the new root
    remounted read-only. Into it, before the switch:

      empty   the candidate's object, copied as /candidate.so (0444);
      view    read-only bind mounts of listed host paths at their own
              places (a symlink is recreated as a symlink, a missing path
              skipped; "/proc" is a new procfs of the runner's own pid
              namespace, not the host's), and one writable directory at
              its own place.

    Nothing else of the host can be opened, read or listed: no /etc, no
    /proc, no task data, no caches, no other candidate's files. Binds are
    not recursive: mounts below a listed path stay out of the view.
*/
#ifndef SANDBOX_ROOT_H
#define SANDBOX_ROOT_H

#include <stddef.h>
#include "sandbox_kind.h"

#define SANDBOX_ROOT_OBJECT "/candidate.so"

//  Enter the root: SANDBOX_ROOT_EMPTY copies object_fd (a regular file, or
//  nothing when -1);
//  SANDBOX_ROOT_VIEW binds the nro paths of ro read-only and rw (may be
//  NULL) writable at rw_at (NULL: at rw itself), then makes it (else /)
//  the working directory;
//  SANDBOX_ROOT_HOST does nothing. 0, or -1 with why (the runner must then
//  refuse to go on: half a switch leaves it in between).
int sandbox_root_enter (sandbox_root_t root, const char *const *ro, size_t nro, const char *rw,
                        const char *rw_at, int object_fd, char *err, size_t errlen);

#endif
