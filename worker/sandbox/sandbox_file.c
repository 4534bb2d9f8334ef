/*  sandbox_file - the small kernel files the sandbox reads and writes.  */
#include "sandbox_file.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int
sandbox_file_write (const char *path, const char *text)
{
    int fd = open (path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen (text);
    ssize_t n = write (fd, text, len);
    int saved = errno;
    close (fd);
    errno = saved;
    return n == (ssize_t) len? 0: -1;
}

ssize_t
sandbox_file_read (const char *path, char *buf, size_t len)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t n = read (fd, buf + got, len - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t) n;
    }
    int saved = errno;
    close (fd);
    errno = saved;
    buf [got] = 0;
    return (ssize_t) got;
}
