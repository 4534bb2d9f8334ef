/*  test_common_notify - the hand-written sd_notify: messages reach a
    datagram socket named by $NOTIFY_SOCKET (a path, or '@' for the
    abstract namespace), nothing happens without one, the watchdog
    interval is read as systemd sets it.  */
#include "testutil.h"
#include "common_notify.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

//  A datagram socket bound to name ("@..." abstract, else a path).
static int
s_bind (const char *name)
{
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge (fd, 0);
    struct sockaddr_un addr;
    memset (&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    size_t len = strlen (name);
    memcpy (addr.sun_path, name, len);
    socklen_t addrlen = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len);
    if (name [0] == '@')
        addr.sun_path [0] = 0;
    else
        addrlen++;
    ck_assert_msg (bind (fd, (struct sockaddr *) &addr, addrlen) == 0, "bind %s: %s", name,
                   strerror (errno));
    return fd;
}

//  The next datagram, within 2 s.
static void
s_recv (int fd, char *buf, size_t buflen)
{
    struct pollfd item = { fd, POLLIN, 0 };
    ck_assert_msg (poll (&item, 1, 2000) == 1, "no notification within 2 s");
    ssize_t n = recv (fd, buf, buflen - 1, 0);
    ck_assert_int_ge (n, 0);
    buf [n] = 0;
}

START_TEST (test_no_socket)
{
    unsetenv ("NOTIFY_SOCKET");
    ck_assert_int_eq (common_notify_ready ("up"), 0);
    ck_assert_int_eq (common_notify ("READY=1"), 0);
    setenv ("NOTIFY_SOCKET", "", 1);
    ck_assert_int_eq (common_notify_watchdog (), 0);
    //  A relative name or another transport is refused, not guessed at.
    setenv ("NOTIFY_SOCKET", "relative/socket", 1);
    ck_assert_int_eq (common_notify_ready (NULL), -1);
    setenv ("NOTIFY_SOCKET", "vsock:2:1234", 1);
    ck_assert_int_eq (common_notify_ready (NULL), -1);
    //  Nobody listening there: -1, the caller logs and goes on.
    setenv ("NOTIFY_SOCKET", "/nonexistent/notify", 1);
    ck_assert_int_eq (common_notify_ready (NULL), -1);
}
END_TEST

START_TEST (test_path_socket)
{
    char dir [] = "/tmp/kgym-notify-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char path [128];
    snprintf (path, sizeof path, "%s/notify", dir);
    int fd = s_bind (path);
    setenv ("NOTIFY_SOCKET", path, 1);
    char buf [1024];
    ck_assert_int_eq (common_notify_ready ("serving on tcp://*:5555"), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "READY=1\nSTATUS=serving on tcp://*:5555");
    ck_assert_int_eq (common_notify_ready (NULL), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "READY=1");
    //  A newline in a status would start a new key: flattened.
    ck_assert_int_eq (common_notify_status ("%d queued\nREADY=0", 12), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "STATUS=12 queued READY=0");
    ck_assert_int_eq (common_notify_stopping ("draining 3 jobs"), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "STOPPING=1\nSTATUS=draining 3 jobs");
    ck_assert_int_eq (common_notify_watchdog (), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "WATCHDOG=1");
    close (fd);
    unlink (path);
    rmdir (dir);
}
END_TEST

START_TEST (test_abstract_socket)
{
    char name [64];
    snprintf (name, sizeof name, "@kgym-test-notify-%d", (int) getpid ());
    int fd = s_bind (name);
    setenv ("NOTIFY_SOCKET", name, 1);
    char buf [256];
    ck_assert_int_eq (common_notify_ready ("up"), 1);
    s_recv (fd, buf, sizeof buf);
    ck_assert_str_eq (buf, "READY=1\nSTATUS=up");
    close (fd);
}
END_TEST

START_TEST (test_watchdog_usec)
{
    unsetenv ("WATCHDOG_USEC");
    unsetenv ("WATCHDOG_PID");
    ck_assert_uint_eq (common_notify_watchdog_usec (), 0);
    setenv ("WATCHDOG_USEC", "30000000", 1);
    ck_assert_uint_eq (common_notify_watchdog_usec (), 30000000);
    char pid [32];
    snprintf (pid, sizeof pid, "%d", (int) getpid ());
    setenv ("WATCHDOG_PID", pid, 1);
    ck_assert_uint_eq (common_notify_watchdog_usec (), 30000000);
    //  Meant for another process (inherited through exec): not ours.
    snprintf (pid, sizeof pid, "%d", (int) getpid () + 1);
    setenv ("WATCHDOG_PID", pid, 1);
    ck_assert_uint_eq (common_notify_watchdog_usec (), 0);
    unsetenv ("WATCHDOG_PID");
    setenv ("WATCHDOG_USEC", "soon", 1);
    ck_assert_uint_eq (common_notify_watchdog_usec (), 0);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_notify");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_no_socket);
    tcase_add_test (tc, test_path_socket);
    tcase_add_test (tc, test_abstract_socket);
    tcase_add_test (tc, test_watchdog_usec);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
