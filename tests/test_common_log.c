/*  test_common_log - log formats: text (the historic line, plus gpu/job
    context when set), JSON (valid JSON whatever the message holds, per
    thread job), and the journal's native protocol (fields, binary form for
    multi-line messages, stderr fallback with a priority prefix).  */
#include "testutil.h"
#include "common_log.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

static int s_pipe [2];

//  Send log lines into a pipe the test reads.
static void
s_capture (void)
{
    ck_assert_int_eq (pipe2 (s_pipe, O_CLOEXEC | O_NONBLOCK), 0);
    common_log_set_fd (s_pipe [1]);
}

//  Everything logged so far.
static void
s_read (char *buf, size_t buflen)
{
    ssize_t n = read (s_pipe [0], buf, buflen - 1);
    buf [n > 0? n: 0] = 0;
}

START_TEST (test_text)
{
    s_capture ();
    char buf [4096];
    log_info ("broker", "clients on %s", "tcp://*:5555");
    s_read (buf, sizeof buf);
    //  "2026-11-30T12:00:00.000Z info broker: clients on tcp://*:5555\n"
    ck_assert_uint_eq (strlen (buf), 24 + strlen (" info broker: clients on tcp://*:5555\n"));
    ck_assert_str_eq (buf + 24, " info broker: clients on tcp://*:5555\n");
    ck_assert (buf [4] == '-' && buf [10] == 'T' && buf [23] == 'Z');
    common_log_set_gpu ("0");
    common_log_set_job ("42");
    log_warn ("worker", "slow");
    s_read (buf, sizeof buf);
    ck_assert_str_eq (buf + 24, " warn worker gpu=0 job=42: slow\n");
    common_log_set_job (NULL);
    log_debug ("worker", "dropped below the threshold");
    log_error ("worker", "bad");
    s_read (buf, sizeof buf);
    ck_assert_str_eq (buf + 24, " error worker gpu=0: bad\n");
}
END_TEST

START_TEST (test_format_parse)
{
    common_log_format_t format = LOG_FORMAT_TEXT;
    ck_assert_int_eq (common_log_format_parse ("json", &format), 0);
    ck_assert_int_eq (format, LOG_FORMAT_JSON);
    ck_assert_int_eq (common_log_format_parse ("Journal", &format), 0);
    ck_assert_int_eq (format, LOG_FORMAT_JOURNAL);
    ck_assert_int_eq (common_log_format_parse ("text", &format), 0);
    ck_assert_int_eq (format, LOG_FORMAT_TEXT);
    ck_assert_int_eq (common_log_format_parse ("xml", &format), -1);
    ck_assert_int_eq (common_log_format_parse (NULL, &format), -1);
    ck_assert_int_eq (common_log_format (), LOG_FORMAT_TEXT);
    common_log_set_format (LOG_FORMAT_JSON);
    ck_assert_int_eq (common_log_format (), LOG_FORMAT_JSON);
}
END_TEST

START_TEST (test_format_from_environment)
{
    //  Read once, before the first line: a fresh (forked) test process.
    setenv ("KGYM_LOG_FORMAT", "json", 1);
    ck_assert_int_eq (common_log_format (), LOG_FORMAT_JSON);
}
END_TEST

//  Parse one JSON line, failing the test when it is not an object.
static json_t *
s_json_line (const char *line)
{
    json_error_t error;
    json_t *obj = json_loads (line, JSON_REJECT_DUPLICATES, &error);
    ck_assert_msg (obj && json_is_object (obj), "not a JSON object (%s): %s",
                   obj? "": error.text, line);
    return obj;
}

static void *
s_other_thread (void *args)
{
    log_info ("worker", "from another thread");
    return NULL;
}

START_TEST (test_json)
{
    s_capture ();
    common_log_set_gpu (NULL);              //  (when tests share a process: CK_FORK=no)
    common_log_set_job (NULL);
    common_log_set_format (LOG_FORMAT_JSON);
    char buf [32768];
    log_info ("broker", "plain");
    s_read (buf, sizeof buf);
    ck_assert_uint_eq (buf [strlen (buf) - 1], '\n');
    json_t *obj = s_json_line (buf);
    ck_assert_str_eq (json_string_value (json_object_get (obj, "level")), "info");
    ck_assert_str_eq (json_string_value (json_object_get (obj, "component")), "broker");
    ck_assert_str_eq (json_string_value (json_object_get (obj, "msg")), "plain");
    ck_assert_uint_eq (strlen (json_string_value (json_object_get (obj, "ts"))), 24);
    ck_assert_ptr_null (json_object_get (obj, "gpu"));
    ck_assert_ptr_null (json_object_get (obj, "job"));
    json_decref (obj);

    //  Quotes, backslashes, control bytes and broken UTF-8 stay valid JSON.
    common_log_set_gpu ("3");
    common_log_set_job ("1234");
    log_error ("worker", "say \"hi\"\\ tab\there\nnext \x01 caf\xc3\xa9 bad \xff\xfe end");
    s_read (buf, sizeof buf);
    ck_assert_ptr_eq (strchr (buf, '\n'), buf + strlen (buf) - 1);     //  one line
    obj = s_json_line (buf);
    ck_assert_str_eq (json_string_value (json_object_get (obj, "msg")),
                      "say \"hi\"\\ tab\there\nnext \x01 caf\xc3\xa9 bad \xef\xbf\xbd\xef\xbf\xbd end");
    ck_assert_str_eq (json_string_value (json_object_get (obj, "level")), "error");
    ck_assert_str_eq (json_string_value (json_object_get (obj, "gpu")), "3");
    ck_assert_str_eq (json_string_value (json_object_get (obj, "job")), "1234");
    json_decref (obj);

    //  The job is this thread's: another thread's line has the GPU only.
    pthread_t thread;
    pthread_create (&thread, NULL, s_other_thread, NULL);
    pthread_join (thread, NULL);
    s_read (buf, sizeof buf);
    obj = s_json_line (buf);
    ck_assert_str_eq (json_string_value (json_object_get (obj, "gpu")), "3");
    ck_assert_ptr_null (json_object_get (obj, "job"));
    json_decref (obj);

    //  A message at the length limit still closes the object.
    char *big = malloc (5000);
    memset (big, '"', 4999);
    big [4999] = 0;
    log_info ("worker", "%s", big);
    free (big);
    s_read (buf, sizeof buf);
    obj = s_json_line (buf);
    ck_assert_str_eq (json_string_value (json_object_get (obj, "job")), "1234");
    json_decref (obj);
}
END_TEST

START_TEST (test_journal)
{
    s_capture ();
    char dir [] = "/tmp/kgym-journal-XXXXXX";
    ck_assert_ptr_nonnull (mkdtemp (dir));
    char path [128];
    snprintf (path, sizeof path, "%s/socket", dir);
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    snprintf (addr.sun_path, sizeof addr.sun_path, "%s", path);
    ck_assert_int_eq (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    common_log_set_journal_socket (path);
    common_log_set_format (LOG_FORMAT_JOURNAL);
    common_log_set_gpu ("1");
    common_log_set_job ("77");

    char buf [8192];
    log_warn ("worker", "runner crashed");
    struct pollfd item = { fd, POLLIN, 0 };
    ck_assert_int_eq (poll (&item, 1, 2000), 1);
    ssize_t n = recv (fd, buf, sizeof buf - 1, 0);
    ck_assert_int_gt (n, 0);
    buf [n] = 0;
    ck_assert_str_eq (buf, "MESSAGE=runner crashed\nPRIORITY=4\nSYSLOG_IDENTIFIER=test_common_log\n"
                           "KGYM_COMPONENT=worker\nKGYM_GPU=1\nKGYM_JOB=77\n");

    //  A multi-line message takes the binary form: NAME\n, LE64 size, bytes, \n.
    log_info ("worker", "two\nlines");
    ck_assert_int_eq (poll (&item, 1, 2000), 1);
    n = recv (fd, buf, sizeof buf, 0);
    ck_assert_int_gt (n, 8 + 9 + 9);
    ck_assert (memcmp (buf, "MESSAGE\n\x09\0\0\0\0\0\0\0two\nlines\nPRIORITY=6\n", 8 + 8 + 9 + 1 + 11) == 0);

    //  No journal: "<N>component: message" on the log descriptor.
    close (fd);
    unlink (path);
    log_error ("broker", "no journal\nhere");
    s_read (buf, sizeof buf);
    ck_assert_str_eq (buf, "<3>broker: no journal here\n");
    rmdir (dir);
}
END_TEST

static Suite *
s_suite (void)
{
    Suite *suite = suite_create ("common_log");
    TCase *tc = tcase_create ("core");
    tcase_add_test (tc, test_text);
    tcase_add_test (tc, test_format_parse);
    tcase_add_test (tc, test_format_from_environment);
    tcase_add_test (tc, test_json);
    tcase_add_test (tc, test_journal);
    suite_add_tcase (suite, tc);
    return suite;
}

int
main (void)
{
    return testutil_run_suite (s_suite ());
}
