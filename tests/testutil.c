/*  testutil - helpers shared by the libcheck tests.  */
#include "testutil.h"
#include "kgym_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

extern char **environ;

char *
testutil_source_path (const char *relative)
{
    const char *root = getenv ("KGYM_SOURCE_DIR");
    if (!root)
        root = KGYM_SOURCE_DIR;
    size_t len = strlen (root) + strlen (relative) + 2;
    char *path = malloc (len);
    ck_assert_ptr_nonnull (path);
    snprintf (path, len, "%s/%s", root, relative);
    return path;
}

json_t *
testutil_load_json (const char *relative)
{
    char *path = testutil_source_path (relative);
    json_error_t error;
    json_t *json = json_load_file (path, 0, &error);
    ck_assert_msg (json != NULL, "cannot load %s: %s (line %d)", path, error.text, error.line);
    free (path);
    return json;
}

int
testutil_run_suite (Suite *suite)
{
    SRunner *runner = srunner_create (suite);
    srunner_run_all (runner, CK_NORMAL);
    int failed = srunner_ntests_failed (runner);
    srunner_free (runner);
    return failed == 0 ? 0 : 1;
}

int
testutil_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname (fd, (struct sockaddr *) &addr, &len);
    close (fd);
    return ntohs (addr.sin_port);
}

pid_t
testutil_spawn (char *const argv [])
{
    pid_t pid;
    int rc = posix_spawn (&pid, argv [0], NULL, NULL, argv, environ);
    ck_assert_msg (rc == 0, "cannot start %s: %s", argv [0], strerror (rc));
    return pid;
}
