/*  common_notify - systemd's readiness protocol (sd_notify), hand-written.

    The protocol is systemd's documented sd_notify(3) datagram format. We
    open a fresh socket per message: messages are rare (start, state
    changes, stop, watchdog at most a few per second), and no descriptor is
    then held for the process's life.
*/
#include "common_notify.h"
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

int
common_notify (const char *message)
{
    const char *path = getenv ("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    if (!message) {
        errno = EINVAL;
        return -1;
    }
    struct sockaddr_un addr;
    memset (&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t len = strlen (path);
    if ((path [0] != '/' && path [0] != '@') || len >= sizeof addr.sun_path) {
        //  vsock: and other transports of newer systemd are not spoken here.
        errno = EAFNOSUPPORT;
        return -1;
    }
    memcpy (addr.sun_path, path, len);
    socklen_t addrlen = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len);
    if (path [0] == '@')
        addr.sun_path [0] = 0;          //  abstract namespace: no terminating NUL counts
    else
        addrlen++;
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t sent = sendto (fd, message, strlen (message), MSG_NOSIGNAL,
                           (struct sockaddr *) &addr, addrlen);
    int saved = errno;
    close (fd);
    errno = saved;
    return sent == (ssize_t) strlen (message)? 1: -1;
}

//  "head" plus, when status is given, "STATUS=status" with newlines flattened.
static int
s_notify_with_status (const char *head, const char *status)
{
    char message [1024];
    int n = snprintf (message, sizeof message, "%s%s", head, status? "\nSTATUS=": "");
    if (n < 0 || (size_t) n >= sizeof message)
        return -1;
    if (status) {
        //  A newline in the status would start a new key.
        snprintf (message + n, sizeof message - (size_t) n, "%s", status);
        for (char *p = message + n; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
    }
    return common_notify (message);
}

int
common_notify_ready (const char *status)
{
    return s_notify_with_status ("READY=1", status);
}

int
common_notify_stopping (const char *status)
{
    return s_notify_with_status ("STOPPING=1", status);
}

int
common_notify_status (const char *fmt, ...)
{
    char status [900];
    va_list args;
    va_start (args, fmt);
    vsnprintf (status, sizeof status, fmt, args);
    va_end (args);
    char message [1024];
    snprintf (message, sizeof message, "STATUS=%s", status);
    for (char *p = message; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return common_notify (message);
}

int
common_notify_watchdog (void)
{
    return common_notify ("WATCHDOG=1");
}

uint64_t
common_notify_watchdog_usec (void)
{
    const char *usec = getenv ("WATCHDOG_USEC");
    if (!usec || !*usec)
        return 0;
    const char *pid = getenv ("WATCHDOG_PID");
    if (pid && *pid && strtol (pid, NULL, 10) != (long) getpid ())
        return 0;
    char *end;
    unsigned long long value = strtoull (usec, &end, 10);
    return *end || usec [0] == '-'? 0: (uint64_t) value;
}
