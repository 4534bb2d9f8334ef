/*  common_log - one-line logging to stderr for every kgym process.

    The message is formatted once into a bounded buffer, then wrapped in
    the chosen format. JSON escapes control characters and replaces bytes
    that are not UTF-8 (a message may quote a kernel's or compiler's
    output) so every line stays valid JSON. The journal format speaks
    systemd's native protocol: one datagram of "FIELD=value\n" lines, the
    message in the length-prefixed binary form when it holds a newline.
*/
#include "common_log.h"
#include "common_util.h"
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>

static common_log_level_t s_level = LOG_LEVEL_INFO;
static common_log_format_t s_format = LOG_FORMAT_TEXT;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static const char *s_names[] = { "debug", "info", "warn", "error", "quiet" };
static const char *s_format_names[] = { "text", "json", "journal" };
static atomic_int s_fd = 2;                        //  where lines go
static pthread_mutex_t s_mutex = PTHREAD_MUTEX_INITIALIZER;   //  guards s_gpu, s_journal_path
static char s_gpu [64];                            //  process-wide GPU context, "" for none
static char s_journal_path [108] = "/run/systemd/journal/socket";
static __thread char s_job [64];                   //  this thread's job, "" for none

//  Read KGYM_LOG and KGYM_LOG_FORMAT once, before the first line.
static void
s_init (void)
{
    const char *env = getenv ("KGYM_LOG");
    if (env)
        for (int i = 0; i <= LOG_LEVEL_QUIET; i++)
            if (strcasecmp (env, s_names [i]) == 0)
                s_level = (common_log_level_t) i;
    common_log_format_t format;
    env = getenv ("KGYM_LOG_FORMAT");
    if (env && common_log_format_parse (env, &format) == 0)
        s_format = format;
}

void
common_log_set_level (common_log_level_t level)
{
    pthread_once (&s_once, s_init);
    s_level = level;
}

common_log_level_t
common_log_level (void)
{
    pthread_once (&s_once, s_init);
    return s_level;
}

void
common_log_set_format (common_log_format_t format)
{
    pthread_once (&s_once, s_init);
    if (format >= LOG_FORMAT_TEXT && format <= LOG_FORMAT_JOURNAL)
        s_format = format;
}

common_log_format_t
common_log_format (void)
{
    pthread_once (&s_once, s_init);
    return s_format;
}

int
common_log_format_parse (const char *text, common_log_format_t *format)
{
    for (int i = 0; text && i <= LOG_FORMAT_JOURNAL; i++)
        if (strcasecmp (text, s_format_names [i]) == 0) {
            *format = (common_log_format_t) i;
            return 0;
        }
    return -1;
}

void
common_log_set_gpu (const char *gpu)
{
    pthread_mutex_lock (&s_mutex);
    snprintf (s_gpu, sizeof s_gpu, "%s", gpu? gpu: "");
    pthread_mutex_unlock (&s_mutex);
}

void
common_log_set_job (const char *job)
{
    snprintf (s_job, sizeof s_job, "%s", job? job: "");
}

void
common_log_set_fd (int fd)
{
    atomic_store (&s_fd, fd);
}

void
common_log_set_journal_socket (const char *path)
{
    pthread_mutex_lock (&s_mutex);
    snprintf (s_journal_path, sizeof s_journal_path, "%s",
              path? path: "/run/systemd/journal/socket");
    pthread_mutex_unlock (&s_mutex);
}

//  Bounded output buffer: appends stop quietly at the end.
typedef struct {
    char *data;                             //  the line
    size_t len;                             //  bytes used
    size_t cap;                             //  bytes available
} s_line_t;

static void
s_put (s_line_t *line, const char *text, size_t len)
{
    if (line->len + len > line->cap)
        len = line->cap - line->len;
    memcpy (line->data + line->len, text, len);
    line->len += len;
}

static void
s_puts (s_line_t *line, const char *text)
{
    s_put (line, text, strlen (text));
}

//  A JSON string body (no quotes): escapes, and U+FFFD for bytes that are
//  not UTF-8. Never cuts an escape or a character in two.
static void
s_put_json (s_line_t *line, const char *text)
{
    const unsigned char *p = (const unsigned char *) text;
    size_t left = strlen (text);
    while (left) {
        char escape [8];
        const char *out = escape;
        size_t outlen, used = 1;
        if (*p == '"' || *p == '\\') {
            escape [0] = '\\';
            escape [1] = (char) *p;
            outlen = 2;
        }
        else
        if (*p == '\n')
            out = "\\n", outlen = 2;
        else
        if (*p == '\t')
            out = "\\t", outlen = 2;
        else
        if (*p == '\r')
            out = "\\r", outlen = 2;
        else
        if (*p < 0x20 || *p == 0x7F)
            outlen = (size_t) snprintf (escape, sizeof escape, "\\u%04x", *p);
        else {
            used = common_utf8_len (p, left);
            if (used) {
                out = (const char *) p;
                outlen = used;
            }
            else {
                out = "\\ufffd";
                outlen = 6;
                used = 1;
            }
        }
        if (line->len + outlen > line->cap)
            break;
        s_put (line, out, outlen);
        p += used;
        left -= used;
    }
}

//  One journal field: "NAME=value\n", or the binary form for a value with
//  a newline ("NAME\n", 64-bit little-endian length, value, "\n").
static void
s_put_journal_field (s_line_t *line, const char *name, const char *value)
{
    size_t len = strlen (value);
    if (!strchr (value, '\n')) {
        s_puts (line, name);
        s_puts (line, "=");
        s_put (line, value, len);
        s_puts (line, "\n");
        return;
    }
    if (line->len + strlen (name) + 1 + 8 + len + 1 > line->cap)
        return;                             //  never send a cut binary field
    s_puts (line, name);
    s_puts (line, "\n");
    unsigned char size [8];
    for (int i = 0; i < 8; i++)
        size [i] = (unsigned char) ((uint64_t) len >> (8 * i));
    s_put (line, (const char *) size, 8);
    s_put (line, value, len);
    s_puts (line, "\n");
}

//  Send a native journal datagram; 0, or -1 when the journal is not there.
static int
s_journal_send (const char *data, size_t len)
{
    struct sockaddr_un addr;
    memset (&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    pthread_mutex_lock (&s_mutex);
    snprintf (addr.sun_path, sizeof addr.sun_path, "%s", s_journal_path);
    pthread_mutex_unlock (&s_mutex);
    int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t sent = sendto (fd, data, len, MSG_NOSIGNAL, (struct sockaddr *) &addr, sizeof addr);
    close (fd);
    return sent == (ssize_t) len? 0: -1;
}

void
common_log (common_log_level_t level, const char *component, const char *fmt, ...)
{
    pthread_once (&s_once, s_init);
    if (level < s_level || level >= LOG_LEVEL_QUIET)
        return;
    char message [2048];
    va_list args;
    va_start (args, fmt);
    int n = vsnprintf (message, sizeof message, fmt, args);
    va_end (args);
    if (n < 0)
        return;
    char gpu [sizeof s_gpu];
    pthread_mutex_lock (&s_mutex);
    memcpy (gpu, s_gpu, sizeof gpu);
    pthread_mutex_unlock (&s_mutex);
    const char *job = s_job;

    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    char stamp [40];
    snprintf (stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
              tm.tm_sec, ts.tv_nsec / 1000000);

    char buffer [16384];
    s_line_t line = { buffer, 0, sizeof buffer - 1 };      //  room for the newline
    common_log_format_t format = s_format;
    if (format == LOG_FORMAT_JOURNAL) {
        //  syslog priorities: debug 7, info 6, warning 4, err 3.
        static const char *priorities [] = { "7", "6", "4", "3" };
        s_put_journal_field (&line, "MESSAGE", message);
        s_put_journal_field (&line, "PRIORITY", priorities [level]);
        s_put_journal_field (&line, "SYSLOG_IDENTIFIER", program_invocation_short_name);
        s_put_journal_field (&line, "KGYM_COMPONENT", component);
        if (*gpu)
            s_put_journal_field (&line, "KGYM_GPU", gpu);
        if (*job)
            s_put_journal_field (&line, "KGYM_JOB", job);
        if (s_journal_send (line.data, line.len) == 0)
            return;
        //  No journal: "<N>component: message" on stderr, which journald
        //  (or a reader of it) still understands.
        line.len = 0;
        s_puts (&line, "<");
        s_puts (&line, priorities [level]);
        s_puts (&line, ">");
        s_puts (&line, component);
        s_puts (&line, ": ");
        for (const char *p = message; *p; p++)
            s_put (&line, *p == '\n'? " ": p, 1);
    }
    else
    if (format == LOG_FORMAT_JSON) {
        s_puts (&line, "{\"ts\":\"");
        s_puts (&line, stamp);
        s_puts (&line, "\",\"level\":\"");
        s_puts (&line, s_names [level]);
        s_puts (&line, "\",\"component\":\"");
        s_put_json (&line, component);
        s_puts (&line, "\",\"msg\":\"");
        //  Leave room to close the object whatever the message's length.
        line.cap -= 1024;
        s_put_json (&line, message);
        line.cap += 1024;
        if (*gpu) {
            s_puts (&line, "\",\"gpu\":\"");
            s_put_json (&line, gpu);
        }
        if (*job) {
            s_puts (&line, "\",\"job\":\"");
            s_put_json (&line, job);
        }
        s_puts (&line, "\"}");
    }
    else {
        s_puts (&line, stamp);
        s_puts (&line, " ");
        s_puts (&line, s_names [level]);
        s_puts (&line, " ");
        s_puts (&line, component);
        if (*gpu) {
            s_puts (&line, " gpu=");
            s_puts (&line, gpu);
        }
        if (*job) {
            s_puts (&line, " job=");
            s_puts (&line, job);
        }
        s_puts (&line, ": ");
        s_puts (&line, message);
    }
    line.data [line.len++] = '\n';
    //  One write per line so concurrent threads never interleave within a line.
    ssize_t rc = write (atomic_load (&s_fd), line.data, line.len);
    (void) rc;
}
