/*  sandbox_root - the runner's own file system: an empty root or a view.  */
#include "common_util.h"
#include "sandbox_root.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S_STAGE     "/tmp"          //  where the new root is built (in our mount namespace)
#define S_OLD       "/.old"         //  where the host's root goes, then is detached
#define S_ENTRIES   40              //  view paths at most

//  One path of a view, opened before the stage hides anything.
typedef struct {
    const char *path;               //  absolute, as given: also its place in the view
    const char *at;                 //  its place in the view when not path (the writable one)
    int fd;                         //  O_PATH of the source, -1 for a symlink
    char link [PATH_MAX];           //  the symlink's text
    bool is_dir;                    //  directory (else a file or a symlink)
    bool is_proc;                   //  "/proc": a procfs of its own pid namespace, not the host's
    bool writable;                  //  the one writable directory
} s_entry_t;

//  Absolute, no "." or ".." component, no "//": a place we can recreate.
static bool
s_clean_path (const char *path)
{
    if (!path || path [0] != '/' || strstr (path, "//")
    ||  strlen (path) >= PATH_MAX - sizeof S_STAGE - 8)
        return false;
    for (const char *p = path + 1; *p; ) {
        size_t len = strcspn (p, "/");
        if ((len == 1 && p [0] == '.') || (len == 2 && p [0] == '.' && p [1] == '.'))
            return false;
        p += len + (p [len] == '/');
    }
    return true;
}

//  Is child below (or at) parent?
static bool
s_below (const char *child, const char *parent)
{
    size_t len = strlen (parent);
    return strncmp (child, parent, len) == 0 && (child [len] == '/' || child [len] == 0);
}

//  Make the directories leading to target, only ever on the stage's tmpfs:
//  never inside a bind mount (that would write to the host).
static int
s_make_parents (const char *target, dev_t stage)
{
    char path [PATH_MAX];
    snprintf (path, sizeof path, "%s", target);
    for (char *slash = strchr (path + sizeof S_STAGE, '/'); slash; slash = strchr (slash + 1, '/')) {
        *slash = 0;
        struct stat st;
        if (lstat (path, &st) == 0) {
            *slash = '/';
            if (!S_ISDIR (st.st_mode)) {
                errno = ENOTDIR;
                return -1;
            }
            continue;
        }
        char *up = strrchr (path, '/');
        *up = 0;
        bool ours = stat (path, &st) == 0 && st.st_dev == stage;
        *up = '/';
        if (!ours || mkdir (path, 0755) != 0)
            return -1;
        *slash = '/';
    }
    return 0;
}

//  Copy the object into the stage as /candidate.so.
static int
s_copy_object (int object_fd, off_t size)
{
    int out = open (S_STAGE SANDBOX_ROOT_OBJECT, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (out < 0)
        return -1;
    static char buf [65536];
    off_t at = 0;
    bool ok = true;
    while (ok) {
        //  By offset: the descriptor's own position is left alone.
        ssize_t n = pread (object_fd, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = n == 0 && at == size;
            break;
        }
        ok = write (out, buf, (size_t) n) == n;
        at += n;
    }
    close (out);
    return ok? 0: -1;
}

//  Bind entry at its place in the stage; read-only unless writable.
static int
s_bind (const s_entry_t *entry, dev_t stage, char *err, size_t errlen)
{
    char target [PATH_MAX + 16], source [32];
    snprintf (target, sizeof target, "%s%s", S_STAGE, entry->at? entry->at: entry->path);
    if (s_make_parents (target, stage) != 0) {
        common_seterr (err, errlen, "view: cannot place %s: %s", entry->path, strerror (errno));
        return -1;
    }
    struct stat st;
    if (lstat (target, &st) == 0)
        return 0;                   //  already there (a symlink or directory recreated before)
    if (entry->is_proc) {
        if (mkdir (target, 0555) != 0
        ||  mount ("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
            common_seterr (err, errlen, "view: its own /proc: %s", strerror (errno));
            return -1;
        }
        return 0;
    }
    if (entry->fd < 0) {
        if (symlink (entry->link, target) != 0) {
            common_seterr (err, errlen, "view: symlink %s: %s", entry->path, strerror (errno));
            return -1;
        }
        return 0;
    }
    int made = entry->is_dir? mkdir (target, 0755)
                            : open (target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (made < 0) {
        common_seterr (err, errlen, "view: mount point %s: %s", entry->path, strerror (errno));
        return -1;
    }
    if (!entry->is_dir)
        close (made);
    //  With what is mounted below it: a container's runtime mounts the
    //  GPU driver's libraries file by file into /usr/lib.
    snprintf (source, sizeof source, "/proc/self/fd/%d", entry->fd);
    if (mount (source, target, NULL, MS_BIND | MS_REC, NULL) != 0) {
        common_seterr (err, errlen, "view: bind %s: %s", entry->path, strerror (errno));
        return -1;
    }
    if (entry->writable)
        return 0;
    //  Read-only and nosuid all the way down; the flags each mount has
    //  are kept.
    struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID };
    if (mount_setattr (AT_FDCWD, target, AT_RECURSIVE, &attr, sizeof attr) == 0)
        return 0;
    if (errno != ENOSYS) {
        common_seterr (err, errlen, "view: read-only %s: %s", entry->path, strerror (errno));
        return -1;
    }
    //  An older kernel: the top mount alone read-only; the flags the host's
    //  mount has must be kept (a user namespace may not clear them).
    struct statvfs sv;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID;
    if (statvfs (target, &sv) == 0) {
        flags |= sv.f_flag & ST_NODEV? MS_NODEV: 0;
        flags |= sv.f_flag & ST_NOEXEC? MS_NOEXEC: 0;
        flags |= sv.f_flag & ST_NOATIME? MS_NOATIME: 0;
        flags |= sv.f_flag & ST_NODIRATIME? MS_NODIRATIME: 0;
        flags |= sv.f_flag & ST_RELATIME? MS_RELATIME: 0;
    }
    if (mount (NULL, target, NULL, flags, NULL) != 0) {
        common_seterr (err, errlen, "view: read-only %s: %s", entry->path, strerror (errno));
        return -1;
    }
    return 0;
}

//  Open the view's sources (ro, then rw) while the host's root is whole.
static int
s_open_entries (const char *const *ro, size_t nro, const char *rw, const char *rw_at,
                s_entry_t *entries, size_t *count, char *err, size_t errlen)
{
    *count = 0;
    if (rw && rw_at && (!s_clean_path (rw_at) || strcmp (rw_at, "/") == 0 || s_below (S_STAGE, rw_at))) {
        common_seterr (err, errlen, "view: bad place for the writable directory '%.100s'", rw_at);
        return -1;
    }
    for (size_t i = 0; i < nro + (rw? 1: 0); i++) {
        const char *path = i < nro? ro [i]: rw;
        bool writable = i == nro;
        if (!s_clean_path (path)) {
            common_seterr (err, errlen, "view: bad path '%.100s'", path? path: "");
            return -1;
        }
        //  Covered by an earlier read-only path: nothing to add.
        bool covered = false;
        for (size_t j = 0; j < *count && !writable; j++)
            covered |= s_below (path, entries [j].path);
        struct stat st;
        if (covered || (lstat (path, &st) != 0 && errno == ENOENT && !writable))
            continue;
        if (*count >= S_ENTRIES) {
            common_seterr (err, errlen, "view: more than %d paths", S_ENTRIES);
            return -1;
        }
        //  Its own directory, not a tree others use (and not what the new
        //  root is built on).
        if (writable && (s_below (S_STAGE, path) || strcmp (path, "/") == 0)) {
            common_seterr (err, errlen, "view: %s may not be the writable directory", path);
            return -1;
        }
        s_entry_t *entry = &entries [(*count)++];
        memset (entry, 0, sizeof *entry);
        entry->path = path;
        entry->at = writable? rw_at: NULL;
        entry->fd = -1;
        entry->writable = writable;
        if (!writable && strcmp (path, "/proc") == 0) {
            entry->is_proc = true;      //  mounted afresh, nothing of the host's to open
            continue;
        }
        //  A symlink to another listed path (/lib -> usr/lib) is recreated;
        //  any other (a toolkit's include -> targets/...) is bound resolved.
        char real [PATH_MAX];
        bool link_to_listed = false;
        if (!writable && lstat (path, &st) == 0 && S_ISLNK (st.st_mode) && realpath (path, real))
            for (size_t j = 0; j < nro && !link_to_listed; j++)
                link_to_listed = j != i && s_below (real, ro [j]);
        if (link_to_listed) {
            ssize_t n = readlink (path, entry->link, sizeof entry->link - 1);
            if (n <= 0) {
                common_seterr (err, errlen, "view: readlink %s: %s", path, strerror (errno));
                return -1;
            }
            entry->link [n] = 0;
            continue;
        }
        entry->fd = open (path, O_PATH | O_CLOEXEC);
        if (entry->fd < 0 && errno == ENOENT && !writable) {
            (*count)--;             //  a dangling symlink: nothing to show
            continue;
        }
        if (entry->fd < 0 || fstat (entry->fd, &st) != 0) {
            common_seterr (err, errlen, "view: %s: %s", path, strerror (errno));
            return -1;
        }
        entry->is_dir = S_ISDIR (st.st_mode);
        if (writable && !entry->is_dir) {
            common_seterr (err, errlen, "view: %s is not a directory", path);
            return -1;
        }
    }
    return 0;
}

int
sandbox_root_enter (sandbox_root_t root, const char *const *ro, size_t nro, const char *rw,
                    const char *rw_at, int object_fd, char *err, size_t errlen)
{
    if (root == SANDBOX_ROOT_HOST) {
        //  The host's files as they are, with a /proc of the runner's own pid
        //  namespace: CUDA's driver looks itself up in /proc by its pid, and
        //  against the host's /proc cuInit fails (CUDA_ERROR_OPERATING_SYSTEM,
        //  seen on the H200).
        if (unshare (CLONE_NEWNS) != 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
        ||  mount ("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
            common_seterr (err, errlen, "its own /proc: %s", strerror (errno));
            return -1;
        }
        return 0;
    }
    s_entry_t entries [S_ENTRIES];
    size_t count = 0;
    int rc = -1;
    struct stat st;
    st.st_size = 0;
    if (root == SANDBOX_ROOT_EMPTY && object_fd >= 0
    && (fstat (object_fd, &st) != 0 || !S_ISREG (st.st_mode))) {
        common_seterr (err, errlen, "empty root: the object is not a regular file");
        return -1;
    }
    if (unshare (CLONE_NEWNS) != 0 || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        common_seterr (err, errlen, "mount namespace: %s", strerror (errno));
        goto done;
    }
    //  Sources are opened in the new namespace (a bind takes only its own
    //  mounts), before the stage hides what lies below it.
    if (root == SANDBOX_ROOT_VIEW
    &&  s_open_entries (ro, nro, rw, rw_at, entries, &count, err, errlen) != 0)
        goto done;
    char options [96];
    snprintf (options, sizeof options, "size=%llu,mode=0755,nr_inodes=%d",
              (unsigned long long) (root == SANDBOX_ROOT_EMPTY? st.st_size: 0) + (1u << 20),
              root == SANDBOX_ROOT_EMPTY? 16: 1024);
    struct stat stage;
    if (mount ("kgym", S_STAGE, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0
    ||  stat (S_STAGE, &stage) != 0) {
        common_seterr (err, errlen, "root tmpfs: %s", strerror (errno));
        goto done;
    }
    if (root == SANDBOX_ROOT_EMPTY && object_fd >= 0 && s_copy_object (object_fd, st.st_size) != 0) {
        common_seterr (err, errlen, "empty root: cannot copy the object: %s", strerror (errno));
        goto done;
    }
    for (size_t i = 0; i < count; i++)
        if (s_bind (&entries [i], stage.st_dev, err, errlen) != 0)
            goto done;
    if (mkdir (S_STAGE S_OLD, 0700) != 0
    ||  syscall (SYS_pivot_root, S_STAGE, S_STAGE S_OLD) != 0 || chdir ("/") != 0
    ||  umount2 (S_OLD, MNT_DETACH) != 0 || rmdir (S_OLD) != 0) {
        common_seterr (err, errlen, "cannot switch to the new root: %s", strerror (errno));
        goto done;
    }
    //  Nothing is mounted or created in the root itself from here on.
    if (mount (NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0
    ||  chdir (rw? (rw_at? rw_at: rw): "/") != 0) {
        common_seterr (err, errlen, "new root: %s", strerror (errno));
        goto done;
    }
    rc = 0;
done:
    for (size_t i = 0; i < count; i++)
        if (entries [i].fd >= 0)
            close (entries [i].fd);
    return rc;
}
