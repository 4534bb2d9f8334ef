/*  sandbox_uid - a host uid of its own for every live runner.  */
#include "common_util.h"
#include "sandbox_uid.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

struct sandbox_uid_t {
    uid_t uid;                      //  the uid held
    int lock;                       //  its flocked file
};

static const char *const s_dirs [] = { "/run/kgym/uids", "/tmp/kgym-uids" };

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t s_next;             //  where this process looks first

//  A directory only root can write, made if need be.
static bool
s_dir_ok (const char *dir)
{
    char parent [64];
    snprintf (parent, sizeof parent, "%s", dir);
    char *slash = strrchr (parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (mkdir (parent, 0755) != 0 && errno != EEXIST)
            return false;
    }
    if (mkdir (dir, 0700) != 0 && errno != EEXIST)
        return false;
    struct stat st;
    return lstat (dir, &st) == 0 && S_ISDIR (st.st_mode) && st.st_uid == geteuid ()
        && !(st.st_mode & 0022);
}

int
sandbox_uid_range (uid_t *first, uid_t *count, char *err, size_t errlen)
{
    *first = SANDBOX_UID_FIRST;
    *count = SANDBOX_UID_COUNT;
    const char *text = getenv ("KGYM_SANDBOX_UIDS");
    if (!text || !*text)
        return 0;
    char *end;
    errno = 0;
    unsigned long lo = strtoul (text, &end, 10);
    unsigned long hi = *end == '-'? strtoul (end + 1, &end, 10): 0;
    //  Never 0 (root), nor (uid_t) -1, nor the overflow uid 65534 in the range.
    if (errno || *end || lo == 0 || hi < lo || hi >= 0xffffffffu || (lo <= 65534 && hi >= 65534)) {
        common_seterr (err, errlen, "KGYM_SANDBOX_UIDS '%.40s' is not FIRST-LAST (1 <= FIRST <= LAST "
                       "< 4294967295, without 65534)", text);
        return -1;
    }
    *first = (uid_t) lo;
    *count = (uid_t) (hi - lo + 1);
    return 0;
}

sandbox_uid_t *
sandbox_uid_new (char *err, size_t errlen)
{
    uid_t first, count;
    if (sandbox_uid_range (&first, &count, err, errlen))
        return NULL;
    const char *dir = NULL;
    for (size_t i = 0; i < sizeof s_dirs / sizeof s_dirs [0] && !dir; i++)
        if (s_dir_ok (s_dirs [i]))
            dir = s_dirs [i];
    if (!dir) {
        common_seterr (err, errlen, "no directory for uid locks (%s, %s)", s_dirs [0], s_dirs [1]);
        return NULL;
    }
    pthread_mutex_lock (&s_lock);
    if (s_next == 0 && getrandom (&s_next, sizeof s_next, GRND_NONBLOCK) != sizeof s_next)
        s_next = (uint32_t) getpid ();
    uint32_t start = s_next;
    pthread_mutex_unlock (&s_lock);
    for (uid_t i = 0; i < count; i++) {
        uid_t uid = first + (uid_t) ((start + i) % count);
        char path [96];
        snprintf (path, sizeof path, "%s/%u", dir, (unsigned) uid);
        int fd = open (path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            continue;
        if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
            close (fd);
            continue;
        }
        sandbox_uid_t *self = malloc (sizeof *self);
        if (!self) {
            close (fd);
            common_seterr (err, errlen, "out of memory");
            return NULL;
        }
        self->uid = uid;
        self->lock = fd;
        pthread_mutex_lock (&s_lock);
        s_next = start + i + 1;
        pthread_mutex_unlock (&s_lock);
        return self;
    }
    common_seterr (err, errlen, "every uid of %u-%u is in use", (unsigned) first,
                   (unsigned) (first + count - 1));
    return NULL;
}

uid_t
sandbox_uid_number (sandbox_uid_t *self)
{
    return self->uid;
}

void
sandbox_uid_destroy (sandbox_uid_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    close ((*self_p)->lock);
    free (*self_p);
    *self_p = NULL;
}
