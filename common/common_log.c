/*  common_log - one-line logging to stderr for every kgym process.  */
#include "common_log.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

static common_log_level_t s_level = LOG_LEVEL_INFO;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static const char *s_names[] = { "debug", "info", "warn", "error", "quiet" };

//  Read KGYM_LOG once, before the first line.
static void
s_init (void)
{
    const char *env = getenv ("KGYM_LOG");
    if (!env)
        return;
    for (int i = 0; i <= LOG_LEVEL_QUIET; i++)
        if (strcasecmp (env, s_names [i]) == 0)
            s_level = (common_log_level_t) i;
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
common_log (common_log_level_t level, const char *component, const char *fmt, ...)
{
    pthread_once (&s_once, s_init);
    if (level < s_level || level >= LOG_LEVEL_QUIET)
        return;
    char line [2048];
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    int n = snprintf (line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: ",
                      tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                      tm.tm_sec, ts.tv_nsec / 1000000, s_names [level], component);
    va_list args;
    va_start (args, fmt);
    if (n > 0 && (size_t) n < sizeof line)
        n += vsnprintf (line + n, sizeof line - (size_t) n, fmt, args);
    va_end (args);
    if (n < 0)
        return;
    if ((size_t) n >= sizeof line - 1)
        n = sizeof line - 2;
    line [n++] = '\n';
    //  One write per line so concurrent threads never interleave within a line.
    ssize_t rc = write (STDERR_FILENO, line, (size_t) n);
    (void) rc;
}
