/*  sandbox_file - the small kernel files the sandbox reads and writes:
    cgroup knobs, /proc/PID/..., a user namespace's maps. Whole values in
    one call each, no allocation (the clone child uses it before exec).
*/
#ifndef SANDBOX_FILE_H
#define SANDBOX_FILE_H

#include <stddef.h>
#include <sys/types.h>

//  Write text to path in one write. 0, or -1 (errno kept).
int sandbox_file_write (const char *path, const char *text);

//  Read at most len - 1 bytes of path into buf, NUL-terminated. Bytes read,
//  or -1 (errno kept).
ssize_t sandbox_file_read (const char *path, char *buf, size_t len);

#endif
