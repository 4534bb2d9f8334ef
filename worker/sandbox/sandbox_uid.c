/*  sandbox_uid - a host uid of its own for every live runner.  */
#include "common_util.h"
#include "sandbox_uid.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct sandbox_uid_t {
    uid_t uid;                      //  the uid held
    int lock;                       //  the socket bound to its name
};

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t s_next;             //  where this process looks first

//  Bind fd to the abstract name of uid: 0 when we now hold it.
static int
s_hold (int fd, uid_t uid)
{
    struct sockaddr_un addr;
    memset (&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    int len = snprintf (addr.sun_path + 1, sizeof addr.sun_path - 1, "kgym-sandbox-uid-%u", (unsigned) uid);
    return bind (fd, (struct sockaddr *) &addr, (socklen_t) (offsetof (struct sockaddr_un, sun_path) + 1 + len));
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
    pthread_mutex_lock (&s_lock);
    if (s_next == 0 && getrandom (&s_next, sizeof s_next, GRND_NONBLOCK) != sizeof s_next)
        s_next = (uint32_t) getpid ();
    uint32_t start = s_next;
    pthread_mutex_unlock (&s_lock);
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        common_seterr (err, errlen, "uid lock: socket: %s", strerror (errno));
        return NULL;
    }
    for (uid_t i = 0; i < count; i++) {
        uid_t uid = first + (uid_t) ((start + i) % count);
        if (s_hold (fd, uid) != 0) {
            if (errno == EADDRINUSE)
                continue;
            common_seterr (err, errlen, "uid lock: bind: %s", strerror (errno));
            close (fd);
            return NULL;
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
    close (fd);
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
