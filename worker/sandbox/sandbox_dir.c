/*  sandbox_dir - a runner's writable directory, bounded (see sandbox_dir.h).  */
#include "common_util.h"
#include "sandbox_dir.h"
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

int
sandbox_dir_cap (const char *dir, uint64_t bytes, char *err, size_t errlen)
{
    char options [64];
    snprintf (options, sizeof options, "size=%llu,mode=0700", (unsigned long long) bytes);
    if (bytes == 0 || mount ("kgym-dir", dir, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0) {
        common_seterr (err, errlen, "no tmpfs on %s: %s", dir, bytes? strerror (errno): "no size");
        return -1;
    }
    return 0;
}

static int
s_rm_entry (const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st; (void) flag; (void) ftw;
    remove (path);
    return 0;
}

void
sandbox_dir_remove (const char *dir)
{
    if (!dir || !dir [0])
        return;
    //  EINVAL: not a mount point (a directory on the disk).
    umount2 (dir, MNT_DETACH | UMOUNT_NOFOLLOW);
    nftw (dir, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
